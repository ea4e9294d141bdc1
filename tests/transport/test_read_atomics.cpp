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
  explicit ReadPair(std::uint32_t max_reads = 16)
      : ConnectionPair(config(max_reads)) {
    mem_b.deregister(dst_key);
    dst_key = mem_b.register_region(dst_at(0), region_size,
                                    access_local_write | access_remote_write | access_remote_read | access_remote_atomic);
    for (std::size_t i = 0; i < region_size; ++i) *dst_at(i) = static_cast<std::uint8_t>(i * 7 + 3);
    std::memset(src.data(), 0, src.size());
  }
  static ConnectionConfig config(std::uint32_t max_reads) {
    ConnectionConfig c = test::pair_config(Mode::metaroce, 1024, 4, 2);
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
