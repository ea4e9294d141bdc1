// READ and atomics in metaroce mode: the exact frames of a request and its
// answer, hostile requests and answers (each with its own counter, the
// canaries intact), the limit on outstanding READs, and verified transfers
// through the simulator under loss, reordering and duplication.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "connection_pair.hpp"
#include "transfer_harness.hpp"
#include "wire/byte_order.hpp"

namespace {

using namespace metaroce;
using namespace metaroce::transport;
using test::ConnectionPair;

// A reads B's region (registered for remote read and atomics as well).
struct ReadPair : ConnectionPair {
  explicit ReadPair(std::uint32_t max_reads = 16, Mode mode = Mode::metaroce)
      : ConnectionPair(config(max_reads, mode)) {
    mem_b.deregister(dst_key);
    dst_key = mem_b.register_region(dst_at(0), region_size,
                                    access_local_write | access_remote_write | access_remote_read | access_remote_atomic);
    for (std::size_t i = 0; i < region_size; ++i) *dst_at(i) = static_cast<std::uint8_t>(i * 7 + 3);
    std::memset(src.data(), 0, src.size());
  }
  static ConnectionConfig config(std::uint32_t max_reads, Mode mode = Mode::metaroce) {
    ConnectionConfig c = test::pair_config(mode, 1024, mode == Mode::rocev2 ? 1 : 4, 2);
    c.max_outstanding_reads = max_reads;
    return c;
  }
  // A READ of B's [offset, offset + len) into A's src at the same offset.
  SendRequest read(std::uint64_t id, std::size_t offset, std::size_t len, std::uint16_t stream = 0) {
    SendRequest r = request(SendOp::read, id, offset, len, stream);
    return r;
  }
  SendRequest atomic(SendOp op, std::uint64_t id, std::size_t remote_offset, std::uint64_t swap_add,
                     std::uint64_t compare = 0) {
    SendRequest r = request(op, id, 0, atomic_length);
    r.remote_addr = reinterpret_cast<std::uintptr_t>(dst_at(remote_offset));
    r.swap_add = swap_add;
    r.compare = compare;
    return r;
  }
  // Moves every frame both ways until neither has more.
  void settle(Time now) {
    for (int round = 0; round < 20; ++round) {
      const auto from_a = drain(*a, now);
      const auto from_b = drain(*b, now);
      if (from_a.empty() && from_b.empty()) return;
      deliver_all(*b, now, from_a);
      deliver_all(*a, now, from_b);
    }
  }
};

std::uint64_t word_at(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

TEST(MetaroceRead, RequestAndAnswerFramesCarryTheirPlacement) {
  ReadPair p;
  ASSERT_EQ(p.a->post_send(p.read(1, 100, 3000)), PostResult::ok);
  auto requests = p.drain(*p.a, 1'000);
  ASSERT_EQ(requests.size(), 1u);
  const auto q = ConnectionPair::parse(requests[0]);
  EXPECT_EQ(q.bth.opcode, wire::opcode::mr_read_request);
  EXPECT_TRUE(q.bth.ack_req);
  EXPECT_EQ(q.mr_write.va, reinterpret_cast<std::uintptr_t>(p.dst_at(100)));
  EXPECT_EQ(q.mr_write.rkey, p.dst_key);
  EXPECT_EQ(q.mr_write.msg_len, 3000u);
  EXPECT_EQ(q.mr_read.va, reinterpret_cast<std::uintptr_t>(p.src.data() + 100));
  EXPECT_EQ(q.mr_read.key, p.src_key);
  EXPECT_TRUE(q.payload.empty());

  ConnectionPair::deliver(*p.b, 2'000, requests[0]);
  EXPECT_EQ(p.b->counters().read_requests_served, 1u);
  auto answers = p.drain(*p.b, 3'000);
  std::vector<std::vector<std::uint8_t>> data;
  for (auto& f : answers)
    if (ConnectionPair::parse(f).bth.opcode == wire::opcode::mr_read_response) data.push_back(f);
  ASSERT_EQ(data.size(), 3u);  // 1024 + 1024 + 952, sprayed over paths 0, 1, 2
  for (std::size_t i = 0; i < data.size(); ++i) {
    const auto f = ConnectionPair::parse(data[i]);
    EXPECT_EQ(f.mr_data.path_id, i);
    EXPECT_EQ(f.mr_data.msg_seq, q.mr_data.msg_seq);
    EXPECT_EQ(f.mr_write.va, reinterpret_cast<std::uintptr_t>(p.src.data() + 100 + 1024 * i));
    EXPECT_EQ(f.mr_write.rkey, p.src_key);
    EXPECT_EQ(f.mr_write.msg_offset, 1024 * i);
    EXPECT_EQ(f.udp_src_port, ConnectionPair::src_port_b + i);
  }
  // Last first: each piece lands in place; the READ completes with the last.
  ConnectionPair::deliver(*p.a, 4'000, data[2]);
  ConnectionPair::deliver(*p.a, 4'000, data[0]);
  EXPECT_TRUE(ConnectionPair::completions(*p.a).empty());
  ConnectionPair::deliver(*p.a, 4'000, data[1]);
  EXPECT_EQ(std::memcmp(p.src.data() + 100, p.dst_at(100), 3000), 0);
  EXPECT_EQ(p.src[99], 0);
  EXPECT_EQ(p.src[3100], 0);
  const auto done = ConnectionPair::completions(*p.a);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].wr_id, 1u);
  EXPECT_EQ(done[0].kind, CompletionKind::read);
  EXPECT_EQ(done[0].status, CompletionStatus::success);
  EXPECT_EQ(done[0].byte_len, 3000u);
  // A copy of an answer the network duplicated is dropped by its PSN.
  ConnectionPair::deliver(*p.a, 5'000, data[1]);
  EXPECT_EQ(p.a->counters().duplicate_packets, 1u);
  EXPECT_EQ(p.a->counters().read_response_unexpected, 0u);
  EXPECT_TRUE(p.guards_intact());
}

TEST(MetaroceRead, LostAnswerPacketIsResentAlone) {
  ReadPair p;
  ASSERT_EQ(p.a->post_send(p.read(1, 0, 4096)), PostResult::ok);
  ConnectionPair::deliver_all(*p.b, 1'000, p.drain(*p.a, 1'000));
  auto answers = p.drain(*p.b, 2'000);
  std::vector<std::vector<std::uint8_t>> data;
  for (auto& f : answers)
    if (ConnectionPair::parse(f).bth.opcode == wire::opcode::mr_read_response) data.push_back(f);
  ASSERT_EQ(data.size(), 4u);
  // The first packet of each path goes missing on path 1 only; path 1's
  // next packet reveals the gap. Here: deliver 0, 2, 3 and let time pass.
  ConnectionPair::deliver(*p.a, 3'000, data[0]);
  ConnectionPair::deliver(*p.a, 3'000, data[2]);
  ConnectionPair::deliver(*p.a, 3'000, data[3]);
  const std::uint64_t sent_before = p.b->counters().data_packets_sent;
  p.settle(2'000'000);  // probes and their ACKs find the loss
  EXPECT_EQ(p.b->counters().retransmitted_packets, 1u);
  EXPECT_EQ(p.b->counters().data_packets_sent, sent_before);
  EXPECT_EQ(std::memcmp(p.src.data(), p.dst_at(0), 4096), 0);
  const auto done = ConnectionPair::completions(*p.a);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].kind, CompletionKind::read);
}

TEST(MetaroceAtomics, FetchAddAndCompareSwapReturnTheOldValue) {
  ReadPair p;
  const std::uint64_t start = 0x1122334455667788ull;
  std::memcpy(p.dst_at(64), &start, 8);
  ASSERT_EQ(p.a->post_send(p.atomic(SendOp::fetch_add, 1, 64, 5)), PostResult::ok);
  auto requests = p.drain(*p.a, 1'000);
  ASSERT_EQ(requests.size(), 1u);
  const auto q = ConnectionPair::parse(requests[0]);
  EXPECT_EQ(q.bth.opcode, wire::opcode::mr_fetch_add);
  EXPECT_EQ(q.atomic_eth.va, reinterpret_cast<std::uintptr_t>(p.dst_at(64)));
  EXPECT_EQ(q.atomic_eth.swap_add, 5u);
  ConnectionPair::deliver(*p.b, 2'000, requests[0]);
  // The request again (its ACK lost, say): not executed twice.
  ConnectionPair::deliver(*p.b, 2'000, requests[0]);
  EXPECT_EQ(p.b->counters().duplicate_packets, 1u);
  p.settle(3'000);  // (executed when B polls: once)
  EXPECT_EQ(word_at(p.dst_at(64)), start + 5);
  EXPECT_EQ(p.b->counters().atomics_executed, 1u);
  EXPECT_EQ(word_at(p.src.data()), start);
  auto done = ConnectionPair::completions(*p.a);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].kind, CompletionKind::atomic);

  // Compare-and-swap: a miss leaves the value, a hit swaps it.
  ASSERT_EQ(p.a->post_send(p.atomic(SendOp::compare_swap, 2, 64, 42, 7)), PostResult::ok);
  p.settle(10'000);
  EXPECT_EQ(word_at(p.dst_at(64)), start + 5);
  EXPECT_EQ(word_at(p.src.data()), start + 5);
  ASSERT_EQ(p.a->post_send(p.atomic(SendOp::compare_swap, 3, 64, 42, start + 5)), PostResult::ok);
  p.settle(20'000);
  EXPECT_EQ(word_at(p.dst_at(64)), 42u);
  EXPECT_EQ(word_at(p.src.data()), start + 5);
  done = ConnectionPair::completions(*p.a);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(p.b->counters().atomics_executed, 3u);
  EXPECT_TRUE(p.guards_intact());
}

// ---- hostile: each refusal has its own counter, canaries stay intact

TEST(MetaroceReadHostile, ReadWithWrongKeyOrBeyondTheRegionIsNaked) {
  for (const bool wrong_key : {true, false}) {
    ReadPair p;
    SendRequest r = p.read(1, 0, 1024);
    if (wrong_key) r.rkey ^= 0x100;
    else r.remote_addr = reinterpret_cast<std::uintptr_t>(p.dst_at(ConnectionPair::region_size - 512));
    ASSERT_EQ(p.a->post_send(r), PostResult::ok);
    p.settle(1'000);
    EXPECT_EQ(p.b->counters().read_access_errors, 1u);
    EXPECT_EQ(p.b->counters().read_requests_served, 0u);
    const auto done = ConnectionPair::completions(*p.a);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, CompletionStatus::remote_access_error);
    EXPECT_EQ(done[0].kind, CompletionKind::read);
    EXPECT_TRUE(std::all_of(p.src.begin(), p.src.end(), [](std::uint8_t v) { return v == 0; }));
    EXPECT_TRUE(p.guards_intact());
  }
}

TEST(MetaroceReadHostile, UnalignedAtomicIsNaked) {
  ReadPair p;
  const std::vector<std::uint8_t> before(p.dst_at(0), p.dst_at(64));
  ASSERT_EQ(p.a->post_send(p.atomic(SendOp::fetch_add, 1, 12, 1)), PostResult::ok);
  p.settle(1'000);
  EXPECT_EQ(p.b->counters().atomic_unaligned, 1u);
  EXPECT_EQ(p.b->counters().atomics_executed, 0u);
  EXPECT_EQ(std::memcmp(before.data(), p.dst_at(0), 64), 0);
  const auto done = ConnectionPair::completions(*p.a);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, CompletionStatus::remote_invalid_request);
  EXPECT_TRUE(p.guards_intact());
}

TEST(MetaroceReadHostile, AnswersNotAskedForOrPastTheLengthAreDropped) {
  ReadPair p;
  ASSERT_EQ(p.a->post_send(p.read(1, 0, 2048)), PostResult::ok);
  const auto request = ConnectionPair::parse(p.drain(*p.a, 1'000).at(0));
  // A forged answer: its build starts from the request's own frame fields.
  const auto forge = [&](std::uint32_t msg_seq, std::uint32_t offset, std::uint32_t len, std::uint32_t psn) {
    wire::FrameSpec s = frame_spec(p.b->config(), wire::opcode::mr_read_response, ConnectionPair::src_port_b, false);
    s.bth.psn = psn;
    s.mr_data.msg_seq = msg_seq;
    s.mr_data.flags = wire::mr_flag::last;
    s.mr_write = wire::MrWriteHeader{request.mr_read.va + offset, request.mr_read.key, offset + len, offset};
    std::vector<std::uint8_t> payload(len, 0xee), frame(9000);
    frame.resize(wire::build_frame(s, payload, frame));
    return frame;
  };
  ConnectionPair::deliver(*p.a, 2'000, forge(request.mr_data.msg_seq + 1, 0, 64, ConnectionPair::first_psn_b));
  EXPECT_EQ(p.a->counters().read_response_unexpected, 1u);
  ConnectionPair::deliver(*p.a, 2'000, forge(request.mr_data.msg_seq, 2048, 64, ConnectionPair::first_psn_b));
  EXPECT_EQ(p.a->counters().read_response_beyond_length, 1u);
  EXPECT_EQ(p.a->counters().data_bytes_placed, 0u);
  EXPECT_TRUE(std::all_of(p.src.begin(), p.src.end(), [](std::uint8_t v) { return v == 0; }));
  EXPECT_TRUE(ConnectionPair::completions(*p.a).empty());
  // The real answer still completes it.
  ConnectionPair::deliver(*p.b, 3'000, p.captured.front());  // the request itself
  p.settle(4'000);
  EXPECT_EQ(std::memcmp(p.src.data(), p.dst_at(0), 2048), 0);
  EXPECT_EQ(ConnectionPair::completions(*p.a).size(), 1u);
}

// ---- exhaustion: the negotiated number of READs outstanding

TEST(MetaroceReadExhaustion, RequesterHoldsBackReadsBeyondTheLimit) {
  ReadPair p(2);
  for (std::uint64_t i = 0; i < 6; ++i) ASSERT_EQ(p.a->post_send(p.read(i, 1024 * i, 1000)), PostResult::ok);
  const auto first = p.drain(*p.a, 1'000);
  EXPECT_EQ(first.size(), 2u);  // two requests, the rest wait
  EXPECT_GT(p.a->counters().read_limit_waits, 0u);
  ConnectionPair::deliver_all(*p.b, 1'000, first);
  Time now = 1'000;
  std::vector<Completion> done;
  for (int round = 0; round < 20 && done.size() < 6; ++round) {
    now += 1'000;
    p.settle(now);
    for (const Completion& c : ConnectionPair::completions(*p.a)) done.push_back(c);
  }
  ASSERT_EQ(done.size(), 6u);
  for (std::uint64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(done[i].wr_id, i);  // in order on the stream
    EXPECT_EQ(done[i].status, CompletionStatus::success);
  }
  EXPECT_EQ(std::memcmp(p.src.data(), p.dst_at(0), 1000), 0);
  EXPECT_EQ(std::memcmp(p.src.data() + 5 * 1024, p.dst_at(5 * 1024), 1000), 0);
  EXPECT_EQ(p.b->counters().read_requests_over_limit, 0u);
}

TEST(MetaroceReadExhaustion, ReadsBothWaysAtTheLimitDoNotWaitOnEachOther) {
  // Each end's answers are queued behind its own READs that wait for the
  // limit: they must still go, or both ends wait for ever.
  ReadPair p(2);
  p.mem_a.deregister(p.src_key);
  p.src_key = p.mem_a.register_region(p.src.data(), p.src.size(), access_local_write | access_remote_read);
  for (std::size_t i = 0; i < 8 * 1024; ++i) p.src[32 * 1024 + i] = static_cast<std::uint8_t>(i * 5 + 1);
  for (std::uint64_t i = 0; i < 4; ++i) {
    ASSERT_EQ(p.a->post_send(p.read(i, 1024 * i, 1000)), PostResult::ok);
    SendRequest r;  // B reads A's [32K + 1K i, + 1000) into its own region at the same offset
    r.wr_id = 10 + i;
    r.op = SendOp::read;
    r.local_addr = p.dst_at(32 * 1024 + 1024 * i);
    r.length = 1000;
    r.lkey = p.dst_key;
    r.remote_addr = reinterpret_cast<std::uintptr_t>(p.src.data() + 32 * 1024 + 1024 * i);
    r.rkey = p.src_key;
    ASSERT_EQ(p.b->post_send(r), PostResult::ok);
  }
  std::size_t done_a = 0, done_b = 0;
  Time now = 1'000;
  for (int round = 0; round < 40 && (done_a < 4 || done_b < 4); ++round) {
    now += 1'000;
    p.settle(now);
    done_a += ConnectionPair::completions(*p.a).size();
    done_b += ConnectionPair::completions(*p.b).size();
  }
  EXPECT_EQ(done_a, 4u);
  EXPECT_EQ(done_b, 4u);

  EXPECT_GT(p.a->counters().read_limit_waits, 0u);
  EXPECT_GT(p.b->counters().read_limit_waits, 0u);
  EXPECT_EQ(std::memcmp(p.src.data() + 3 * 1024, p.dst_at(3 * 1024), 1000), 0);
  EXPECT_EQ(std::memcmp(p.dst_at(32 * 1024 + 3 * 1024), p.src.data() + 32 * 1024 + 3 * 1024, 1000), 0);
}

TEST(MetaroceReadExhaustion, ResponderQueuesThenNaksRequestsBeyondTheLimit) {
  // A requester that thinks it may have 8 outstanding, a responder that
  // serves 2 and queues 2: the fifth is NAKed.
  ConnectionPair p(ReadPair::config(8), [](ConnectionConfig& b) { b.max_outstanding_reads = 2; });
  p.mem_b.deregister(p.dst_key);
  p.dst_key = p.mem_b.register_region(p.dst_at(0), ConnectionPair::region_size, access_remote_read);
  for (std::uint64_t i = 0; i < 5; ++i) {
    SendRequest r = p.request(SendOp::read, i, 1024 * i, 1000);
    ASSERT_EQ(p.a->post_send(r), PostResult::ok);
  }
  const auto requests = p.drain(*p.a, 1'000);
  ASSERT_EQ(requests.size(), 5u);
  ConnectionPair::deliver_all(*p.b, 1'000, requests);
  EXPECT_EQ(p.b->counters().read_requests_queued, 2u);
  EXPECT_EQ(p.b->counters().read_requests_over_limit, 1u);
  EXPECT_EQ(p.b->state(), ConnectionState::error);
  const auto naks = p.drain(*p.b, 2'000);
  ASSERT_FALSE(naks.empty());
  EXPECT_EQ(ConnectionPair::parse(naks[0]).mr_ack.syndrome, wire::syndrome::nak_invalid_request);
}

// ---- through the simulator: every byte and every value checked

test::TransferSpec mixed(Mode mode) {
  test::TransferSpec s;
  s.base.mode = mode;
  s.reads = true;
  s.atomics = true;
  s.messages = 10'000;
  s.max_message = 1u << 20;
  s.forward.loss = 0.01;
  s.backward.loss = 0.01;
  s.forward.duplicate = 0.01;
  s.backward.duplicate = 0.01;
  s.forward.reorder = 0.01;
  s.forward.reorder_gap_ns = 3'000;
  s.backward.reorder = 0.01;
  s.backward.reorder_gap_ns = 3'000;
  return s;
}

TEST(MetaroceReadSim, TenThousandMixedOperationsUnderLossReorderAndDuplication) {
  const test::TransferResult r = test::run_transfer(mixed(Mode::metaroce));
  EXPECT_TRUE(r.finished) << r.error;
  EXPECT_EQ(r.error, "");
  EXPECT_GT(r.reads_verified, 1000u);
  EXPECT_GT(r.atomics_verified, 1000u);
  EXPECT_GT(r.receiver.retransmitted_packets, 0u);  // READ answers were lost and resent
  EXPECT_GT(r.sender.duplicate_packets, 0u);
}

TEST(MetaroceAtomicsSim, IncrementsUnderDuplicationAndLossLeaveExactlyTheirCount) {
  test::TransferSpec s;
  s.sends = false;
  s.atomics = true;
  s.atomic_counters = 1;
  s.messages = 4'000;
  s.max_message = 4096;
  s.forward.loss = 0.01;
  s.backward.loss = 0.01;
  s.forward.duplicate = 0.05;
  s.backward.duplicate = 0.05;
  const test::TransferResult r = test::run_transfer(s);
  EXPECT_TRUE(r.finished) << r.error;
  EXPECT_EQ(r.error, "");  // the counter equals its increments, each old value seen once
  EXPECT_GT(r.atomics_verified, 1000u);
  EXPECT_EQ(r.receiver.atomics_executed, r.atomics_verified);
  EXPECT_GT(r.receiver.duplicate_packets, 0u);  // duplicated requests, not executed again
}

}  // namespace

namespace {

using namespace metaroce;
using namespace metaroce::transport;

TEST(RoceReadSim, TenThousandMixedOperationsUnderLossReorderAndDuplication) {
  test::TransferSpec s = mixed(Mode::rocev2);
  s.messages = 10'000;
  const test::TransferResult r = test::run_transfer(s);
  EXPECT_TRUE(r.finished) << r.error;
  EXPECT_EQ(r.error, "");
  EXPECT_GT(r.reads_verified, 1000u);
  EXPECT_GT(r.atomics_verified, 1000u);
  EXPECT_GT(r.sender.read_responses_out_of_sequence, 0u);  // gaps in READ responses re-issued the READ
  EXPECT_GT(r.receiver.duplicate_reads_reexecuted, 0u);
}

TEST(RoceAtomicsSim, IncrementsUnderDuplicationAndLossLeaveExactlyTheirCount) {
  test::TransferSpec s;
  s.base.mode = Mode::rocev2;
  s.sends = false;
  s.atomics = true;
  s.atomic_counters = 1;
  s.messages = 4'000;
  s.max_message = 4096;
  s.forward.loss = 0.01;
  s.backward.loss = 0.01;
  s.forward.duplicate = 0.05;
  s.backward.duplicate = 0.05;
  const test::TransferResult r = test::run_transfer(s);
  EXPECT_TRUE(r.finished) << r.error;
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.receiver.atomics_executed, r.atomics_verified);
  EXPECT_GT(r.receiver.atomic_replays, 0u);  // duplicates answered from the saved results
}

}  // namespace

namespace {

using namespace metaroce;
using namespace metaroce::transport;
using test::ConnectionPair;

std::vector<wire::ParsedFrame> parsed(const test::Frames& frames) {
  std::vector<wire::ParsedFrame> out;
  for (const auto& f : frames) out.push_back(ConnectionPair::parse(f));
  return out;
}

TEST(RoceRead, RequestAndResponsesAsIbtaHasThem) {
  ReadPair p(16, Mode::rocev2);
  ASSERT_EQ(p.a->post_send(p.read(1, 100, 2500)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 2, 4000, 10)), PostResult::ok);
  const auto requests = p.drain(*p.a, 1'000);
  ASSERT_EQ(requests.size(), 2u);
  const auto q = ConnectionPair::parse(requests[0]);
  EXPECT_EQ(q.bth.opcode, wire::opcode::read_request);
  EXPECT_EQ(q.bth.psn, ConnectionPair::first_psn_a);
  EXPECT_TRUE(q.bth.ack_req);
  EXPECT_EQ(q.reth.va, reinterpret_cast<std::uintptr_t>(p.dst_at(100)));
  EXPECT_EQ(q.reth.rkey, p.dst_key);
  EXPECT_EQ(q.reth.dma_len, 2500u);
  // The READ took three PSNs (its responses'): the WRITE has the fourth.
  EXPECT_EQ(ConnectionPair::parse(requests[1]).bth.psn, (ConnectionPair::first_psn_a + 3) & wire::psn_mask);

  ConnectionPair::deliver(*p.b, 2'000, requests[0]);
  const auto answer_frames = p.drain(*p.b, 3'000);
  const auto answers = parsed(answer_frames);
  ASSERT_EQ(answers.size(), 3u);
  const std::uint8_t ops[] = {wire::opcode::read_response_first, wire::opcode::read_response_middle,
                              wire::opcode::read_response_last};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(answers[i].bth.opcode, ops[i]);
    EXPECT_EQ(answers[i].bth.psn, (ConnectionPair::first_psn_a + i) & wire::psn_mask);
    EXPECT_EQ(answers[i].has(wire::has_aeth), i != 1);  // AETH on FIRST and LAST
    EXPECT_EQ(answers[i].payload.size(), i < 2 ? 1024u : 452u);
  }
  ConnectionPair::deliver_all(*p.a, 4'000, answer_frames);
  ConnectionPair::deliver(*p.b, 4'000, requests[1]);
  p.settle(5'000);
  EXPECT_EQ(std::memcmp(p.src.data() + 100, p.dst_at(100), 2500), 0);
  const auto done = ConnectionPair::completions(*p.a);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].wr_id, 1u);
  EXPECT_EQ(done[0].kind, CompletionKind::read);
  EXPECT_EQ(done[1].kind, CompletionKind::write);
  EXPECT_EQ(p.b->counters().read_requests_served, 1u);
}

TEST(RoceRead, GapInResponsesReissuesFromTheFirstMissingPsn) {
  ReadPair p(16, Mode::rocev2);
  ASSERT_EQ(p.a->post_send(p.read(1, 0, 2500)), PostResult::ok);
  ConnectionPair::deliver_all(*p.b, 1'000, p.drain(*p.a, 1'000));
  const auto answers = p.drain(*p.b, 2'000);
  ASSERT_EQ(answers.size(), 3u);
  ConnectionPair::deliver(*p.a, 3'000, answers[0]);
  ConnectionPair::deliver(*p.a, 3'000, answers[2]);  // MIDDLE lost
  EXPECT_EQ(p.a->counters().read_responses_out_of_sequence, 1u);
  const auto again = p.drain(*p.a, 4'000);
  ASSERT_EQ(again.size(), 1u);
  const auto q = ConnectionPair::parse(again[0]);
  EXPECT_EQ(q.bth.opcode, wire::opcode::read_request);
  EXPECT_EQ(q.bth.psn, (ConnectionPair::first_psn_a + 1) & wire::psn_mask);
  EXPECT_EQ(q.reth.va, reinterpret_cast<std::uintptr_t>(p.dst_at(1024)));
  EXPECT_EQ(q.reth.dma_len, 2500u - 1024u);
  ConnectionPair::deliver(*p.b, 5'000, again[0]);
  EXPECT_EQ(p.b->counters().duplicate_reads_reexecuted, 1u);
  const auto rest_frames = p.drain(*p.b, 6'000);
  const auto rest = parsed(rest_frames);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].bth.opcode, wire::opcode::read_response_first);
  EXPECT_EQ(rest[0].bth.psn, (ConnectionPair::first_psn_a + 1) & wire::psn_mask);
  EXPECT_EQ(rest[1].bth.opcode, wire::opcode::read_response_last);
  ConnectionPair::deliver_all(*p.a, 7'000, rest_frames);
  EXPECT_EQ(std::memcmp(p.src.data(), p.dst_at(0), 2500), 0);
  const auto done = ConnectionPair::completions(*p.a);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, CompletionStatus::success);
}

// The READ's request is lost and the timer fires (the RTO doubles); the
// answers to the re-issued request lose their MIDDLE. The gap is loss, the
// responder answering at once: the backoff ends, and once the READ is
// answered the next packet's timer has the undoubled RTO.
TEST(RoceRead, GapInResponsesEndsTheBackoff) {
  ReadPair p(16, Mode::rocev2);
  ASSERT_EQ(p.a->post_send(p.read(1, 0, 2500)), PostResult::ok);
  ASSERT_EQ(p.drain(*p.a, 1'000).size(), 1u);  // lost
  const Time base = p.a->path_info(0).rto;
  EXPECT_EQ(base, ConnectionConfig{}.initial_rto);  // no RTT sampled yet
  const auto reissued = p.drain(*p.a, 1'000 + base + 300'000);
  ASSERT_EQ(reissued.size(), 1u);
  EXPECT_EQ(p.a->counters().rto_timeouts, 1u);
  EXPECT_EQ(p.a->path_info(0).rto, 2 * base);
  const Time t = 1'000 + base + 350'000;  // before the second timeout (base + 2 base)
  ConnectionPair::deliver(*p.b, t, reissued[0]);
  const auto answers = p.drain(*p.b, t);
  ASSERT_EQ(answers.size(), 3u);
  ConnectionPair::deliver(*p.a, t, answers[0]);
  ConnectionPair::deliver(*p.a, t, answers[2]);  // MIDDLE lost
  EXPECT_EQ(p.a->counters().read_responses_out_of_sequence, 1u);
  const auto again = p.drain(*p.a, t + 1'000);
  ASSERT_EQ(again.size(), 1u);
  ConnectionPair::deliver(*p.b, t + 2'000, again[0]);
  ConnectionPair::deliver_all(*p.a, t + 3'000, p.drain(*p.b, t + 2'000));
  EXPECT_EQ(std::memcmp(p.src.data(), p.dst_at(0), 2500), 0);
  const auto done = ConnectionPair::completions(*p.a);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, CompletionStatus::success);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 2, 0, 100)), PostResult::ok);
  EXPECT_EQ(p.drain(*p.a, t + 4'000).size(), 1u);
  EXPECT_EQ(p.a->path_info(0).rto, base);
}

TEST(RoceAtomics, DuplicateIsAnsweredFromTheSavedResultNotExecutedAgain) {
  ReadPair p(16, Mode::rocev2);
  const std::uint64_t start = 1000;
  std::memcpy(p.dst_at(8), &start, 8);
  ASSERT_EQ(p.a->post_send(p.atomic(SendOp::fetch_add, 1, 8, 7)), PostResult::ok);
  const auto request = p.drain(*p.a, 1'000);
  ASSERT_EQ(request.size(), 1u);
  EXPECT_EQ(ConnectionPair::parse(request[0]).bth.opcode, wire::opcode::fetch_add);
  ConnectionPair::deliver(*p.b, 2'000, request[0]);
  const auto lost = parsed(p.drain(*p.b, 3'000));  // the ATOMIC ACKNOWLEDGE, lost
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].bth.opcode, wire::opcode::atomic_acknowledge);
  EXPECT_EQ(lost[0].atomic_ack_orig, start);
  ConnectionPair::deliver(*p.b, 4'000, request[0]);  // the requester's retry
  EXPECT_EQ(p.b->counters().atomic_replays, 1u);
  EXPECT_EQ(p.b->counters().atomics_executed, 1u);
  EXPECT_EQ(word_at(p.dst_at(8)), start + 7);
  const auto answer = p.drain(*p.b, 5'000);
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_EQ(ConnectionPair::parse(answer[0]).atomic_ack_orig, start);
  ConnectionPair::deliver(*p.a, 6'000, answer[0]);
  EXPECT_EQ(word_at(p.src.data()), start);
  const auto done = ConnectionPair::completions(*p.a);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].kind, CompletionKind::atomic);
}

TEST(RoceReadHostile, EachRefusalHasItsCounterAndTheCanariesStayIntact) {
  {  // wrong rkey
    ReadPair p(16, Mode::rocev2);
    SendRequest r = p.read(1, 0, 1024);
    r.rkey ^= 0x100;
    ASSERT_EQ(p.a->post_send(r), PostResult::ok);
    p.settle(1'000);
    EXPECT_EQ(p.b->counters().read_access_errors, 1u);
    const auto done = ConnectionPair::completions(*p.a);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, CompletionStatus::remote_access_error);
    EXPECT_TRUE(p.guards_intact());
  }
  {  // beyond the region
    ReadPair p(16, Mode::rocev2);
    SendRequest r = p.read(1, 0, 1024);
    r.remote_addr = reinterpret_cast<std::uintptr_t>(p.dst_at(ConnectionPair::region_size - 100));
    ASSERT_EQ(p.a->post_send(r), PostResult::ok);
    p.settle(1'000);
    EXPECT_EQ(p.b->counters().read_access_errors, 1u);
    EXPECT_TRUE(std::all_of(p.src.begin(), p.src.end(), [](std::uint8_t v) { return v == 0; }));
  }
  {  // unaligned atomic
    ReadPair p(16, Mode::rocev2);
    ASSERT_EQ(p.a->post_send(p.atomic(SendOp::compare_swap, 1, 4, 1, 0)), PostResult::ok);
    p.settle(1'000);
    EXPECT_EQ(p.b->counters().atomic_unaligned, 1u);
    const auto done = ConnectionPair::completions(*p.a);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, CompletionStatus::remote_invalid_request);
    EXPECT_TRUE(p.guards_intact());
  }
  {  // a response for no READ, then one past the requested length
    ReadPair p(16, Mode::rocev2);
    const auto forge = [&](std::uint32_t psn, std::size_t len) {
      wire::FrameSpec s = frame_spec(p.b->config(), wire::opcode::read_response_only, ConnectionPair::src_port_b, false);
      s.bth.psn = psn;
      std::vector<std::uint8_t> payload(len, 0xee), frame(9000);
      frame.resize(wire::build_frame(s, payload, frame));
      return frame;
    };
    ConnectionPair::deliver(*p.a, 1'000, forge(ConnectionPair::first_psn_a, 64));
    EXPECT_EQ(p.a->counters().read_response_unexpected, 1u);
    ASSERT_EQ(p.a->post_send(p.read(1, 0, 100)), PostResult::ok);
    p.drain(*p.a, 2'000);
    ConnectionPair::deliver(*p.a, 3'000, forge(ConnectionPair::first_psn_a, 200));
    EXPECT_EQ(p.a->counters().read_response_beyond_length, 1u);
    EXPECT_TRUE(std::all_of(p.src.begin(), p.src.end(), [](std::uint8_t v) { return v == 0; }));
    EXPECT_TRUE(ConnectionPair::completions(*p.a).empty());
  }
}

TEST(RoceReadExhaustion, RequesterHoldsBackAndResponderNaksBeyondTheLimit) {
  {
    ReadPair p(2, Mode::rocev2);
    for (std::uint64_t i = 0; i < 5; ++i) ASSERT_EQ(p.a->post_send(p.read(i, 1024 * i, 1000)), PostResult::ok);
    EXPECT_EQ(p.drain(*p.a, 1'000).size(), 2u);
    EXPECT_GT(p.a->counters().read_limit_waits, 0u);
  }
  {
    ReadPair p(2, Mode::rocev2);
    for (std::uint64_t i = 0; i < 5; ++i) ASSERT_EQ(p.a->post_send(p.read(i, 1024 * i, 1000)), PostResult::ok);
    Time now = 1'000;
    std::vector<Completion> done;
    for (int round = 0; round < 20 && done.size() < 5; ++round) {
      now += 1'000;
      p.settle(now);
      for (const Completion& c : ConnectionPair::completions(*p.a)) done.push_back(c);
    }
    ASSERT_EQ(done.size(), 5u);
    for (std::uint64_t i = 0; i < 5; ++i) EXPECT_EQ(done[i].wr_id, i);
    EXPECT_EQ(std::memcmp(p.src.data() + 4096, p.dst_at(4096), 1000), 0);
  }
  {
    ConnectionPair p(ReadPair::config(8, Mode::rocev2), [](ConnectionConfig& b) { b.max_outstanding_reads = 2; });
    p.mem_b.deregister(p.dst_key);
    p.dst_key = p.mem_b.register_region(p.dst_at(0), ConnectionPair::region_size, access_remote_read);
    for (std::uint64_t i = 0; i < 3; ++i)
      ASSERT_EQ(p.a->post_send(p.request(SendOp::read, i, 1024 * i, 1000)), PostResult::ok);
    const auto requests = p.drain(*p.a, 1'000);
    ASSERT_EQ(requests.size(), 3u);
    ConnectionPair::deliver_all(*p.b, 1'000, requests);
    EXPECT_EQ(p.b->counters().read_requests_over_limit, 1u);
    EXPECT_EQ(p.b->state(), ConnectionState::error);
  }
}

}  // namespace
