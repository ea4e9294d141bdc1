// MetaroceConnection driven by hand, frame by frame, without the simulator:
// exact headers, exact ACK contents, and every error path with its counter.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "connection_pair.hpp"
#include "timer/wheel.hpp"
#include "transport/connection.hpp"
#include "transport/memory_region.hpp"
#include "wire/frame.hpp"

namespace {

using namespace metaroce;
using namespace metaroce::transport;

// The shared hand-driven pair (connection_pair.hpp), metaroce mode, 2 streams.
struct Pair : test::ConnectionPair {
  explicit Pair(std::uint16_t paths = 4, std::uint32_t mtu = 1024)
      : ConnectionPair(test::pair_config(Mode::metaroce, mtu, paths, 2)) {}
};

SendRequest write_request(Pair& p, std::uint64_t id, std::size_t offset, std::size_t len) {
  return p.request(SendOp::write, id, offset, len);
}

TEST(MetaroceExact, WriteIsSprayedAndPlacedOutOfOrder) {
  Pair p(4, 1024);
  ASSERT_EQ(p.a->post_send(write_request(p, 1, 0, 3000)), PostResult::ok);
  auto frames = p.drain(*p.a, 100'000);
  ASSERT_EQ(frames.size(), 3u);  // 1024 + 1024 + 952
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const auto f = Pair::parse(frames[i]);
    EXPECT_EQ(f.bth.opcode, wire::opcode::mr_write);
    EXPECT_EQ(f.bth.dest_qp, 0x22u);
    EXPECT_EQ(f.bth.psn, (0xfffffeu + i) & wire::psn_mask);  // PSN wraps through 0
    EXPECT_EQ(f.mr_data.path_id, i);                          // round-robin spraying
    EXPECT_EQ(f.mr_data.path_seq, 0u);                        // each path's first packet
    EXPECT_EQ(f.udp_src_port, 49152 + i);
    EXPECT_EQ(f.mr_write.msg_offset, 1024 * i);
    EXPECT_EQ(f.mr_write.va, reinterpret_cast<std::uintptr_t>(p.dst_at(1024 * i)));
    EXPECT_EQ(f.mr_write.msg_len, 3000u);
    EXPECT_EQ((f.mr_data.flags & wire::mr_flag::last) != 0, i == 2);
    EXPECT_EQ(f.bth.ack_req, i == 2);
    EXPECT_EQ(f.ecn(), 2);  // ECT(0)
  }
  // Deliver last, first, middle: each lands in place at once.
  Pair::deliver(*p.b, 110'000, frames[2]);
  EXPECT_EQ(std::memcmp(p.dst_at(2048), p.src.data() + 2048, 952), 0);
  EXPECT_EQ(*p.dst_at(0), 0);
  Pair::deliver(*p.b, 110'000, frames[0]);
  Pair::deliver(*p.b, 110'000, frames[1]);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 3000), 0);
  EXPECT_EQ(p.b->counters().data_bytes_placed, 3000u);
  EXPECT_TRUE(p.guards_intact());

  // The AckReq on the last packet made B want to ACK: one ACK, three paths.
  auto acks = p.drain(*p.b, 120'000);
  ASSERT_EQ(acks.size(), 1u);
  const auto ack = Pair::parse(acks[0]);
  EXPECT_EQ(ack.bth.opcode, wire::opcode::mr_ack);
  EXPECT_EQ(ack.mr_ack.delivered_psn, 1u);  // 0xfffffe + 3, wrapped
  EXPECT_EQ(ack.mr_ack.path_count, 3u);
  for (std::size_t i = 0; i < ack.mr_ack.path_count; ++i) {
    const auto block = ack.path_ack(i);
    EXPECT_EQ(block.cum_seq, 1u);
    EXPECT_EQ(block.sack, (std::array<std::uint8_t, 32>{}));
  }
  Pair::deliver(*p.a, 130'000, acks[0]);
  std::vector<Completion> cq;
  ASSERT_EQ(p.a->poll_completions(cq), 1u);
  EXPECT_EQ(cq[0].wr_id, 1u);
  EXPECT_EQ(cq[0].status, CompletionStatus::success);
  EXPECT_EQ(cq[0].kind, CompletionKind::write);
  EXPECT_EQ(p.a->packets_outstanding(), 0u);
}

TEST(MetaroceExact, GapOnAPathRetransmitsExactlyTheMissingPacketOnAnotherSequence) {
  Pair p(1, 1024);  // one path, so the gap is unambiguous
  ASSERT_EQ(p.a->post_send(write_request(p, 1, 0, 4096)), PostResult::ok);
  auto frames = p.drain(*p.a, 100'000);
  ASSERT_EQ(frames.size(), 4u);
  // Packet 1 (path seq 1) is lost; 0, 2, 3 arrive.
  Pair::deliver(*p.b, 110'000, frames[0]);
  Pair::deliver(*p.b, 110'000, frames[2]);
  Pair::deliver(*p.b, 110'000, frames[3]);
  auto acks = p.drain(*p.b, 110'000);  // a gap forces an immediate ACK
  ASSERT_EQ(acks.size(), 1u);
  const auto block = Pair::parse(acks[0]).path_ack(0);
  EXPECT_EQ(block.cum_seq, 1u);
  EXPECT_TRUE(block.sack_bit(0));  // seq 2
  EXPECT_TRUE(block.sack_bit(1));  // seq 3
  EXPECT_FALSE(block.sack_bit(2));
  Pair::deliver(*p.a, 120'000, acks[0]);
  EXPECT_EQ(p.a->counters().packets_declared_lost, 1u);
  auto resent = p.drain(*p.a, 120'000);
  ASSERT_EQ(resent.size(), 1u);
  const auto r = Pair::parse(resent[0]);
  EXPECT_EQ(r.bth.psn, (0xfffffeu + 1) & wire::psn_mask);  // same PSN
  EXPECT_EQ(r.mr_data.path_seq, 4u);                        // new path sequence
  EXPECT_TRUE(r.mr_data.flags & wire::mr_flag::retransmit);
  EXPECT_EQ(r.mr_write.msg_offset, 1024u);
  Pair::deliver(*p.b, 130'000, resent[0]);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 4096), 0);
  EXPECT_EQ(p.a->counters().retransmitted_packets, 1u);
  EXPECT_EQ(p.b->counters().duplicate_packets, 0u);
}

TEST(MetaroceExact, DuplicateIsDroppedAndCounted) {
  Pair p(2, 1024);
  ASSERT_EQ(p.a->post_send(write_request(p, 1, 0, 2048)), PostResult::ok);
  auto frames = p.drain(*p.a, 100'000);
  ASSERT_EQ(frames.size(), 2u);
  Pair::deliver(*p.b, 110'000, frames[1]);
  std::memset(p.dst_at(1024), 0xee, 16);  // the application reuses the bytes
  Pair::deliver(*p.b, 110'000, frames[1]);  // same PSN, same path sequence
  EXPECT_EQ(p.dst_at(1024)[0], 0xee) << "a duplicate must not be placed again";
  EXPECT_EQ(p.b->counters().duplicate_packets, 1u);
  EXPECT_EQ(p.b->counters().spurious_retransmissions, 0u);  // a network copy, not a resend
}

TEST(MetaroceExact, SendWithoutReceiveIsRnrNakedThenRetried) {
  Pair p(2, 1024);
  SendRequest s;
  s.wr_id = 9;
  s.op = SendOp::send_imm;
  s.stream = 1;
  s.local_addr = p.src.data();
  s.length = 100;
  s.lkey = p.src_key;
  s.imm = 0xabcdef01;
  ASSERT_EQ(p.a->post_send(s), PostResult::ok);
  auto frames = p.drain(*p.a, 100'000);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(Pair::parse(frames[0]).bth.opcode, wire::opcode::mr_send_imm);
  Pair::deliver(*p.b, 110'000, frames[0]);
  EXPECT_EQ(p.b->counters().rnr_naks_sent, 1u);
  auto naks = p.drain(*p.b, 110'000);
  ASSERT_EQ(naks.size(), 1u);
  const auto nak = Pair::parse(naks[0]);
  EXPECT_EQ(wire::ack_kind(nak.mr_ack.syndrome), wire::AckKind::rnr_nak);
  EXPECT_EQ(nak.bth.psn, 0xfffffeu);
  Pair::deliver(*p.a, 120'000, naks[0]);
  EXPECT_EQ(p.a->counters().rnr_naks_received, 1u);
  EXPECT_TRUE(p.drain(*p.a, 120'000).empty()) << "nothing resent before rnr_delay";

  ReceiveRequest r;
  r.wr_id = 77;
  r.stream = 1;
  r.addr = p.dst_at(0);
  r.length = 4096;
  r.lkey = p.dst_key;
  ASSERT_EQ(p.b->post_receive(r), PostResult::ok);
  // The RNR timer fires no earlier than rnr_delay after the NAK.
  const timer::Tick wake = p.wheel_a.next_deadline();
  ASSERT_GE(wake, 120'000 + p.a->config().rnr_delay);
  p.wheel_a.advance(wake);
  auto resent = p.drain(*p.a, wake);
  ASSERT_EQ(resent.size(), 1u);
  Pair::deliver(*p.b, 150'000, resent[0]);
  std::vector<Completion> cq;
  ASSERT_EQ(p.b->poll_completions(cq), 1u);
  EXPECT_EQ(cq[0].wr_id, 77u);
  EXPECT_EQ(cq[0].kind, CompletionKind::receive);
  EXPECT_EQ(cq[0].stream, 1);
  EXPECT_EQ(cq[0].byte_len, 100u);
  EXPECT_TRUE(cq[0].has_imm);
  EXPECT_EQ(cq[0].imm, 0xabcdef01u);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 100), 0);
}

TEST(MetaroceExact, WriteOutsideTheRegionWritesNothingAndFailsBothEnds) {
  Pair p(1, 1024);
  SendRequest w = write_request(p, 5, 0, 2048);
  w.remote_addr = reinterpret_cast<std::uintptr_t>(p.dst_at(64 * 1024 - 1024));  // second packet overruns
  ASSERT_EQ(p.a->post_send(w), PostResult::ok);
  SendRequest later = write_request(p, 6, 4096, 10);
  ASSERT_EQ(p.a->post_send(later), PostResult::ok);
  auto frames = p.drain(*p.a, 100'000);
  ASSERT_EQ(frames.size(), 3u);
  Pair::deliver(*p.b, 110'000, frames[1]);  // the overrunning packet first
  EXPECT_EQ(p.b->counters().remote_access_errors, 1u);
  EXPECT_EQ(p.b->state(), ConnectionState::error);
  EXPECT_TRUE(p.guards_intact());
  EXPECT_EQ(*p.dst_at(64 * 1024 - 1), 0) << "nothing placed";
  auto naks = p.drain(*p.b, 110'000);
  ASSERT_EQ(naks.size(), 1u);
  EXPECT_EQ(Pair::parse(naks[0]).mr_ack.syndrome, wire::syndrome::nak_remote_access_error);
  Pair::deliver(*p.b, 111'000, frames[0]);  // ERROR: dropped and counted
  EXPECT_EQ(p.b->counters().packets_in_error_state, 1u);
  Pair::deliver(*p.a, 120'000, naks[0]);
  std::vector<Completion> cq;
  ASSERT_EQ(p.a->poll_completions(cq), 2u);
  EXPECT_EQ(cq[0].wr_id, 5u);
  EXPECT_EQ(cq[0].status, CompletionStatus::remote_access_error);
  EXPECT_EQ(cq[1].wr_id, 6u);
  EXPECT_EQ(cq[1].status, CompletionStatus::flushed);
  EXPECT_EQ(p.a->state(), ConnectionState::error);
  EXPECT_EQ(p.a->state_transitions(ConnectionState::error), 1u);
}

TEST(MetaroceExact, UnreachablePeerEndsInRetryExceeded) {
  Pair p(2, 1024);
  ASSERT_EQ(p.a->post_send(write_request(p, 1, 0, 1000)), PostResult::ok);
  ASSERT_EQ(p.drain(*p.a, 0).size(), 1u);
  // Nothing ever comes back: probes, path failures, then retry_exceeded.
  Time now = 0;
  std::vector<Completion> cq;
  for (int i = 0; i < 100000 && cq.empty(); ++i) {
    const timer::Tick next = p.wheel_a.next_deadline();
    ASSERT_NE(next, timer::kNever) << "the connection stopped trying";
    now = next;
    p.wheel_a.advance(now);
    p.drain(*p.a, now);
    p.a->poll_completions(cq);
  }
  ASSERT_EQ(cq.size(), 1u);
  EXPECT_EQ(cq[0].status, CompletionStatus::retry_exceeded);
  EXPECT_EQ(p.a->state(), ConnectionState::error);
  EXPECT_EQ(p.a->counters().paths_failed, 2u);
  EXPECT_GT(p.a->counters().probes_sent, 0u);
  EXPECT_LT(now, 60'000'000'000u) << "gave up within a minute of virtual time";
}

TEST(MetaroceExact, BadPostsAreRefusedWithAReason) {
  Pair p(1, 1024);
  SendRequest w = write_request(p, 1, 0, 100);
  w.stream = 2;
  EXPECT_EQ(p.a->post_send(w), PostResult::bad_stream);
  w = write_request(p, 1, 0, 100);
  w.lkey = 12345;
  EXPECT_EQ(p.a->post_send(w), PostResult::bad_lkey);
  w = write_request(p, 1, 64 * 1024 - 50, 100);  // local bytes run past the region
  EXPECT_EQ(p.a->post_send(w), PostResult::bad_lkey);
  w = write_request(p, 1, 0, 100);
  w.rkey = 0;
  EXPECT_EQ(p.a->post_send(w), PostResult::bad_rkey);
  p.a->close();
  EXPECT_EQ(p.a->post_send(write_request(p, 1, 0, 100)), PostResult::not_ready);
  EXPECT_EQ(p.a->state(), ConnectionState::closed);
}

TEST(MetaroceExact, ConfigErrorsSayWhatToFix) {
  MemoryRegistry mem;
  timer::Wheel wheel{0};
  std::string error;
  ConnectionConfig c;
  c.mtu = 100;
  EXPECT_EQ(Connection::create(c, mem, wheel, nullptr, error), nullptr);
  EXPECT_EQ(error, "mtu 100 is outside 256..9000 payload bytes");
  c = ConnectionConfig{};
  c.paths = 65;
  EXPECT_EQ(Connection::create(c, mem, wheel, nullptr, error), nullptr);
  EXPECT_EQ(error, "paths 65 is outside 1..64 (metaroce mode)");
  c = ConnectionConfig{};
  c.psn_window = 1000;
  EXPECT_EQ(Connection::create(c, mem, wheel, nullptr, error), nullptr);
  EXPECT_EQ(error, "psn_window 1000 must be a power of two up to 4194304");
}

TEST(MemoryRegistry, BoundsAreCheckedWithoutOverflow) {
  MemoryRegistry mem;
  std::vector<std::uint8_t> buf(4096);
  const auto base = reinterpret_cast<std::uintptr_t>(buf.data());
  const std::uint32_t key = mem.register_region(buf.data(), 4096, access_remote_write);
  EXPECT_NE(key, 0u);
  EXPECT_EQ(mem.check(key, base, 4096, access_remote_write), AccessCheck::ok);
  EXPECT_EQ(mem.check(key, base + 4095, 1, access_remote_write), AccessCheck::ok);
  EXPECT_EQ(mem.check(key, base + 4096, 0, access_remote_write), AccessCheck::ok);
  EXPECT_EQ(mem.check(key, base + 4095, 2, access_remote_write), AccessCheck::out_of_bounds);
  EXPECT_EQ(mem.check(key, base - 1, 1, access_remote_write), AccessCheck::out_of_bounds);
  EXPECT_EQ(mem.check(key, base + 1, ~std::uint64_t{0}, access_remote_write), AccessCheck::out_of_bounds);
  EXPECT_EQ(mem.check(key, ~std::uint64_t{0} - 10, 100, access_remote_write), AccessCheck::out_of_bounds);
  EXPECT_EQ(mem.check(key, base, 1, access_remote_read), AccessCheck::no_permission);
  EXPECT_EQ(mem.check(key + 1, base, 1, access_remote_write), AccessCheck::bad_key);
  EXPECT_EQ(mem.check(0, base, 1, access_remote_write), AccessCheck::bad_key);
  EXPECT_TRUE(mem.deregister(key));
  EXPECT_FALSE(mem.deregister(key));
  EXPECT_EQ(mem.check(key, base, 1, access_remote_write), AccessCheck::bad_key);
  // The slot is reused with a new generation: the old key stays dead.
  const std::uint32_t key2 = mem.register_region(buf.data(), 4096, access_remote_write);
  EXPECT_NE(key2, key);
  EXPECT_EQ(mem.check(key, base, 1, access_remote_write), AccessCheck::bad_key);
  EXPECT_EQ(mem.check(key2, base, 1, access_remote_write), AccessCheck::ok);
  EXPECT_EQ(mem.size(), 1u);
}

}  // namespace

namespace {

// Hostile packets: frames a real sender never makes, rebuilt from a genuine
// one with one field changed (valid ICRC, so only the transport can refuse
// them). Each is dropped or NAKed under its own counter, nothing lands
// outside the registered region, and the connection stays READY unless the
// protocol says a NAK ends it.
struct Hostile : ::testing::Test {
  Pair p{2, 1024};

  // A genuine 100-byte WRITE from A, as a spec we can change.
  wire::FrameSpec genuine() {
    EXPECT_EQ(p.a->post_send(write_request(p, 1, 0, 100)), PostResult::ok);
    auto frames = p.drain(*p.a, 100'000);
    EXPECT_EQ(frames.size(), 1u);
    original = frames[0];
    const wire::ParsedFrame f = Pair::parse(original);
    wire::FrameSpec s;
    s.eth = f.ethernet();
    s.ip_version = f.ip_version;
    s.ipv4 = f.ipv4();
    s.udp = f.udp();
    s.bth = f.bth;
    s.mr_data = f.mr_data;
    s.mr_write = f.mr_write;
    payload.assign(f.payload.begin(), f.payload.end());
    return s;
  }
  std::vector<std::uint8_t> build(const wire::FrameSpec& s) const {
    std::vector<std::uint8_t> frame(wire::headers_size(s) + payload.size() + 8);
    frame.resize(wire::build_frame(s, payload, frame));
    return frame;
  }
  void expect_nothing_placed() {
    EXPECT_TRUE(p.guards_intact());
    for (std::size_t i = 0; i < 64 * 1024; ++i) ASSERT_EQ(*p.dst_at(i), 0) << "byte " << i << " was written";
    EXPECT_EQ(p.b->counters().data_bytes_placed, 0u);
  }

  std::vector<std::uint8_t> original;
  std::vector<std::uint8_t> payload;
};

TEST_F(Hostile, WrongRkeyIsNakedAndNothingIsWritten) {
  wire::FrameSpec s = genuine();
  s.mr_write.rkey ^= 0x100;  // another slot's key
  Pair::deliver(*p.b, 110'000, build(s));
  EXPECT_EQ(p.b->counters().remote_access_errors, 1u);
  expect_nothing_placed();
  const auto naks = p.drain(*p.b, 110'000);
  ASSERT_EQ(naks.size(), 1u);
  EXPECT_EQ(Pair::parse(naks[0]).mr_ack.syndrome, wire::syndrome::nak_remote_access_error);
}

TEST_F(Hostile, AddressPlusLengthOverflowingIsRefused) {
  wire::FrameSpec s = genuine();
  s.mr_write.va = ~std::uint64_t{0} - 10;  // va + 100 wraps past 2^64
  Pair::deliver(*p.b, 110'000, build(s));
  EXPECT_EQ(p.b->counters().remote_access_errors, 1u);
  expect_nothing_placed();
}

TEST_F(Hostile, AddressJustOutsideTheRegionIsRefused) {
  wire::FrameSpec s = genuine();
  s.mr_write.va = reinterpret_cast<std::uintptr_t>(p.dst_at(64 * 1024 - 99));  // one byte over
  Pair::deliver(*p.b, 110'000, build(s));
  EXPECT_EQ(p.b->counters().remote_access_errors, 1u);
  expect_nothing_placed();
}

TEST_F(Hostile, FieldsOutOfRangeAreDroppedAndTheConnectionStaysReady) {
  const wire::FrameSpec base = genuine();
  struct Case {
    const char* what;
    void (*change)(wire::FrameSpec&);
    std::uint64_t ConnectionCounters::*counter;
  };
  const Case cases[] = {
      {"PSN far beyond the window", [](wire::FrameSpec& s) { s.bth.psn = (s.bth.psn + 0x100000) & wire::psn_mask; },
       &ConnectionCounters::psn_beyond_window},
      {"path id >= paths", [](wire::FrameSpec& s) { s.mr_data.path_id = 5; }, &ConnectionCounters::path_id_out_of_range},
      {"stream >= streams", [](wire::FrameSpec& s) { s.mr_data.stream_id = 9; }, &ConnectionCounters::stream_out_of_range},
      {"path sequence far ahead", [](wire::FrameSpec& s) { s.mr_data.path_seq = 1'000'000; },
       &ConnectionCounters::path_seq_beyond_window},
      {"message far ahead", [](wire::FrameSpec& s) { s.mr_data.msg_seq = 5000; },
       &ConnectionCounters::message_beyond_window},
      {"offset + length beyond the message", [](wire::FrameSpec& s) { s.mr_write.msg_offset = 50; },
       &ConnectionCounters::offset_out_of_range},
  };
  for (const Case& c : cases) {
    wire::FrameSpec s = base;
    c.change(s);
    const std::uint64_t before = p.b->counters().*(c.counter);
    Pair::deliver(*p.b, 110'000, build(s));
    EXPECT_EQ(p.b->counters().*(c.counter), before + 1) << c.what;
    EXPECT_EQ(p.b->state(), ConnectionState::ready) << c.what;
  }
  expect_nothing_placed();
  // The genuine frame still lands afterwards.
  Pair::deliver(*p.b, 120'000, original);
  EXPECT_EQ(p.b->counters().data_bytes_placed, 100u);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 100), 0);
}

TEST_F(Hostile, LengthThatDisagreesWithAnEarlierPacketIsDropped) {
  wire::FrameSpec s = genuine();
  Pair::deliver(*p.b, 110'000, original);  // message of 100 bytes, complete
  s.bth.psn = (s.bth.psn + 1) & wire::psn_mask;
  s.mr_data.msg_seq = 1;
  s.mr_data.path_seq = 1;
  // The last packet of message 1 says 1124 bytes (1024 + 100) ...
  s.mr_write.msg_len = 1124;
  s.mr_write.msg_offset = 1024;
  s.mr_write.va = reinterpret_cast<std::uintptr_t>(p.dst_at(1024));
  Pair::deliver(*p.b, 111'000, build(s));
  // ... another one of the same message, right on its own, says 2148.
  s.bth.psn = (s.bth.psn + 1) & wire::psn_mask;
  s.mr_data.path_seq = 2;
  s.mr_write.msg_len = 2148;
  s.mr_write.msg_offset = 2048;
  s.mr_write.va = reinterpret_cast<std::uintptr_t>(p.dst_at(2048));
  Pair::deliver(*p.b, 112'000, build(s));
  EXPECT_EQ(p.b->counters().inconsistent_message, 1u);
  EXPECT_EQ(p.b->counters().data_packets_received, 2u);
  EXPECT_EQ(p.b->state(), ConnectionState::ready);
}

TEST_F(Hostile, PayloadLargerThanTheMtuIsDropped) {
  wire::FrameSpec s = genuine();
  payload.assign(1500, 0x77);  // the connection's MTU is 1024
  s.mr_write.msg_len = 1500;
  Pair::deliver(*p.b, 110'000, build(s));
  EXPECT_EQ(p.b->counters().payload_over_mtu, 1u);
  expect_nothing_placed();
}

TEST_F(Hostile, SackForPacketsNeverSentIsCountedAndIgnored) {
  genuine();
  wire::FrameSpec ack;
  ack.eth.src = {2, 0, 0, 0, 0, 2};
  ack.ipv4.src = 0x0a000002;
  ack.ipv4.dst = 0x0a000001;
  ack.udp.src_port = 50000;
  ack.bth.opcode = wire::opcode::mr_ack;
  ack.bth.dest_qp = 0x11;
  ack.mr_ack.delivered_psn = 0xfffffe;  // nothing delivered yet
  wire::MrPathAck block;
  block.path_id = 0;
  block.cum_seq = 40;  // path 0 sent one packet
  block.set_sack_bit(100);
  const std::array<wire::MrPathAck, 1> blocks = {block};
  ack.mr_path_acks = blocks;
  std::vector<std::uint8_t> frame(wire::headers_size(ack) + 8);
  frame.resize(wire::build_frame(ack, {}, frame));
  Pair::deliver(*p.a, 120'000, frame);
  EXPECT_GE(p.a->counters().sack_unknown, 1u);
  EXPECT_EQ(p.a->state(), ConnectionState::ready);
  std::vector<Completion> cq;
  p.a->poll_completions(cq);
  // The one packet sent was acknowledged by the cumulative part (seq 0 < 40).
  ASSERT_EQ(cq.size(), 1u);
  EXPECT_EQ(cq[0].status, CompletionStatus::success);
}

TEST_F(Hostile, OpcodeOfTheOtherModeIsCounted) {
  wire::FrameSpec s = genuine();
  s.bth.opcode = wire::opcode::rc | wire::opcode::write_only;
  s.reth = {s.mr_write.va, s.mr_write.rkey, 100};
  Pair::deliver(*p.b, 110'000, build(s));
  EXPECT_EQ(p.b->counters().wrong_mode_packets, 1u);
  expect_nothing_placed();
}

}  // namespace

namespace {

TEST_F(Hostile, FrameOfAnotherIncarnationIsDroppedByItsPkey) {
  // The connection manager puts a per-connection nonce in the P_Key: a frame
  // of an earlier connection between the same QPNs carries another one.
  wire::FrameSpec s = genuine();
  ASSERT_EQ(s.bth.pkey, 0xffff);  // the Pair was set up by hand: default partition
  s.bth.pkey = 0x8123;
  Pair::deliver(*p.b, 110'000, build(s));
  EXPECT_EQ(p.b->counters().pkey_mismatch, 1u);
  EXPECT_EQ(p.b->counters().data_packets_received, 0u);
  expect_nothing_placed();
  EXPECT_TRUE(p.drain(*p.b, 110'000).empty());  // no NAK either: it is not ours
  // The genuine frame still lands.
  Pair::deliver(*p.b, 110'000, original);
  EXPECT_EQ(p.b->counters().data_packets_received, 1u);
  EXPECT_EQ(p.b->counters().pkey_mismatch, 1u);
}

TEST(MetaroceExact, PkeyTravelsInEveryFrameAndAnInvalidOneIsRefused) {
  ConnectionConfig c;
  c.pkey = 0x8000;
  EXPECT_NE(validate(c).find("pkey 0x8000 is invalid"), std::string::npos) << validate(c);
  c.pkey = 0x0000;
  EXPECT_FALSE(validate(c).empty());
  c.pkey = 0x9abc;
  EXPECT_EQ(validate(c), "");
  EXPECT_EQ(frame_spec(c, wire::opcode::mr_write, 49152, true).bth.pkey, 0x9abc);
  EXPECT_EQ(frame_spec(c, wire::opcode::mr_ack, 49152, false).bth.pkey, 0x9abc);
}

}  // namespace
