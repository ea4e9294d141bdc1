// Hostile packets against the rocev2 receive path, and the cases both modes
// share. (The metaroce receive path has its own suite, Hostile in
// test_metaroce_exact.cpp; the frames only the engine sees, such as a bad
// ICRC or a UDP port other than 4791, are tests/engine's.)
//
// Each frame is a genuine one of the peer rebuilt with one field changed
// and a valid ICRC, so that only the transport can refuse it. Each is
// dropped or NAKed under its own counter; not one byte outside what the
// protocol allows is written (the whole destination and its canaries are
// compared); the connection stays READY where RC says it does, and goes to
// ERROR, with the requester told by a NAK, where RC says a request is fatal.
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "connection_pair.hpp"
#include "transport/connection.hpp"
#include "wire/byte_order.hpp"
#include "wire/frame.hpp"

namespace {

using namespace metaroce;
using namespace metaroce::transport;
using test::ConnectionPair;
using test::Frames;

constexpr std::uint32_t mtu = 256;
constexpr std::uint32_t psn_a = ConnectionPair::first_psn_a;

std::uint32_t psn_plus(std::uint32_t psn, std::uint32_t n) { return (psn + n) & wire::psn_mask; }

// The rocev2 pair: MTU 256, 4 streams.
struct RocePair : ConnectionPair {
  RocePair() : ConnectionPair(test::pair_config(Mode::rocev2, mtu, 1, 4)) {}
};

// A parsed frame as the spec that builds it again.
wire::FrameSpec spec_of(const wire::ParsedFrame& f) {
  wire::FrameSpec s;
  s.eth = f.ethernet();
  s.ip_version = f.ip_version;
  s.ipv4 = f.ipv4();
  s.udp = f.udp();
  s.bth = f.bth;
  s.reth = f.reth;
  s.aeth = f.aeth;
  s.imm = f.imm;
  s.mr_data = f.mr_data;
  s.mr_write = f.mr_write;
  s.mr_send = f.mr_send;
  s.mr_ack = f.mr_ack;
  return s;
}

std::vector<std::uint8_t> build(const wire::FrameSpec& s, std::span<const std::uint8_t> payload) {
  std::vector<std::uint8_t> frame(wire::headers_size(s) + payload.size() + 8);
  frame.resize(wire::build_frame(s, wire::ByteSpan(payload.data(), payload.size()), frame));
  EXPECT_FALSE(frame.empty());
  return frame;
}

// The frame with its BTH pad count set to `pad` and its ICRC made right
// again: a sender that lies about the pad (the receiver sees a payload
// shorter by the difference). IPv4 without VLAN: the BTH is at byte 42.
std::vector<std::uint8_t> with_pad(std::vector<std::uint8_t> frame, std::uint8_t pad) {
  constexpr std::size_t l3 = 14, bth = 42;
  frame[bth + 1] = static_cast<std::uint8_t>((frame[bth + 1] & ~0x30u) | (pad << 4));
  const std::size_t end = frame.size() - 4;
  wire::store_le32(frame.data() + end, wire::compute_icrc(wire::ByteSpan(frame.data() + l3, end - l3)));
  return frame;
}

// The payload a parsed frame carries, copied.
std::vector<std::uint8_t> payload_of(const std::vector<std::uint8_t>& frame) {
  const wire::ParsedFrame f = ConnectionPair::parse(frame);
  return {f.payload.begin(), f.payload.end()};
}

// B's one answer: an ACK frame with this syndrome and PSN.
void expect_answer(ConnectionPair& p, std::uint8_t syndrome, std::uint32_t psn, const std::string& what) {
  const Frames answer = p.drain(*p.b, 2000);
  ASSERT_EQ(answer.size(), 1u) << what;
  const wire::ParsedFrame f = ConnectionPair::parse(answer[0]);
  EXPECT_EQ(f.bth.opcode, wire::opcode::acknowledge) << what;
  EXPECT_EQ(f.aeth.syndrome, syndrome) << what;
  EXPECT_EQ(f.bth.psn, psn) << what;
  EXPECT_EQ(f.bth.dest_qp, ConnectionPair::qpn_a) << what;
  // The requester learns of it: the message fails with the NAK's status,
  // the connection with it.
  ConnectionPair::deliver(*p.a, 3000, answer[0]);
}

// B's destination is as `before`, except [offset, offset + len), which holds
// the source's bytes at the same offset; canaries included.
void expect_only_placed(ConnectionPair& p, const std::vector<std::uint8_t>& before, std::size_t offset,
                        std::size_t len, const std::string& what) {
  EXPECT_TRUE(p.guards_intact()) << what;
  EXPECT_EQ(std::memcmp(p.dst_at(offset), p.src.data() + offset, len), 0) << what;
  const std::size_t at = ConnectionPair::guard + offset;
  EXPECT_TRUE(std::equal(p.dst.begin(), p.dst.begin() + static_cast<std::ptrdiff_t>(at), before.begin())) << what;
  EXPECT_TRUE(std::equal(p.dst.begin() + static_cast<std::ptrdiff_t>(at + len), p.dst.end(),
                         before.begin() + static_cast<std::ptrdiff_t>(at + len)))
      << what;
}

// ------------------------------------------------------------ rocev2 WRITEs

// A WRITE refused for its R_Key, rights or range: NAK remote access error
// naming the packet, the responder in ERROR, and not one byte of the message
// written, even when the packet's own bytes would fit (the RETH's whole
// range is checked at the first packet).
TEST(RoceHostile, WritesOutsideWhatTheRkeyAllowsWriteNothing) {
  struct Case {
    const char* what;
    std::size_t length;  // of the WRITE A posts; the change is to its first packet
    std::function<void(wire::FrameSpec&, RocePair&, std::uint32_t local_only_key)> change;
  };
  const auto at = [](RocePair& p, std::size_t offset) { return reinterpret_cast<std::uintptr_t>(p.dst_at(offset)); };
  const std::uint64_t top = ~std::uint64_t{0};
  const Case cases[] = {
      {"rkey of another region slot", 100, [](wire::FrameSpec& s, RocePair&, std::uint32_t) { s.reth.rkey ^= 0x100; }},
      {"rkey 0", 100, [](wire::FrameSpec& s, RocePair&, std::uint32_t) { s.reth.rkey = 0; }},
      {"rkey of a region without remote write", 100,
       [](wire::FrameSpec& s, RocePair&, std::uint32_t key) { s.reth.rkey = key; }},
      {"address + length wraps past 2^64", 100,
       [&](wire::FrameSpec& s, RocePair&, std::uint32_t) { s.reth.va = top - 10; }},
      {"one byte before the region", 100,
       [&](wire::FrameSpec& s, RocePair& p, std::uint32_t) { s.reth.va = at(p, 0) - 1; }},
      {"last byte one past the region", 100,
       [&](wire::FrameSpec& s, RocePair& p, std::uint32_t) { s.reth.va = at(p, ConnectionPair::region_size - 99); }},
      {"FIRST inside, the message's range not", 2 * mtu,
       [&](wire::FrameSpec& s, RocePair& p, std::uint32_t) { s.reth.va = at(p, ConnectionPair::region_size - mtu); }},
      {"FIRST inside, RETH length 4 GiB - 1", 2 * mtu,
       [](wire::FrameSpec& s, RocePair&, std::uint32_t) { s.reth.dma_len = 0xffffffffu; }},
      {"FIRST whose RETH range wraps past 2^64", 2 * mtu,
       [&](wire::FrameSpec& s, RocePair&, std::uint32_t) { s.reth.va = top - mtu - 100; }},
  };
  for (const Case& c : cases) {
    RocePair p;
    std::vector<std::uint8_t> local_only(4096, 0x5a);
    const std::uint32_t local_only_key =
        p.mem_b.register_region(local_only.data(), local_only.size(), access_local_write);
    ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, c.length)), PostResult::ok);
    const Frames frames = p.drain(*p.a, 1000);
    ASSERT_EQ(frames.size(), c.length / mtu + (c.length % mtu != 0));
    wire::FrameSpec s = spec_of(ConnectionPair::parse(frames[0]));
    c.change(s, p, local_only_key);
    const std::vector<std::uint8_t> before = p.dst;
    ConnectionPair::deliver(*p.b, 2000, build(s, payload_of(frames[0])));
    for (std::size_t i = 1; i < frames.size(); ++i) ConnectionPair::deliver(*p.b, 2000, frames[i]);
    EXPECT_EQ(p.b->counters().remote_access_errors, 1u) << c.what;
    EXPECT_EQ(p.b->counters().data_packets_received, 0u) << c.what;
    EXPECT_EQ(p.b->counters().packets_in_error_state, frames.size() - 1) << c.what;
    EXPECT_EQ(p.b->state(), ConnectionState::error) << c.what;
    EXPECT_TRUE(p.dst == before) << c.what << ": a byte was written";
    EXPECT_EQ(local_only, std::vector<std::uint8_t>(4096, 0x5a)) << c.what;
    expect_answer(p, wire::syndrome::nak_remote_access_error, psn_a, c.what);
    const auto tx = ConnectionPair::completions(*p.a);
    ASSERT_EQ(tx.size(), 1u) << c.what;
    EXPECT_EQ(tx[0].wr_id, 1u);
    EXPECT_EQ(tx[0].status, CompletionStatus::remote_access_error) << c.what;
    EXPECT_EQ(p.a->state(), ConnectionState::error) << c.what;
  }
}

// Lengths and opcode sequences RC forbids: NAK invalid request naming the
// packet, the responder in ERROR, nothing of it written (earlier packets of
// the same message were placed, as on any RC responder).
TEST(RoceHostile, LengthsAndSequencesThatDisagreeAreInvalidRequests) {
  struct Case {
    const char* what;
    std::size_t length;     // of the WRITE A posts
    std::size_t genuine;    // its first packets delivered as they are
    // The hostile frame, made from A's frames.
    std::function<std::vector<std::uint8_t>(const Frames&)> hostile;
    std::uint64_t ConnectionCounters::*counter;
  };
  const auto rebuilt = [](const std::vector<std::uint8_t>& frame, const std::function<void(wire::FrameSpec&)>& change,
                          std::vector<std::uint8_t> payload) {
    wire::FrameSpec s = spec_of(ConnectionPair::parse(frame));
    change(s);
    return build(s, payload);
  };
  const Case cases[] = {
      {"payload larger than the MTU", 100, 0,
       [&](const Frames& f) {
         return rebuilt(f[0], [](wire::FrameSpec& s) { s.reth.dma_len = mtu + 44; },
                        std::vector<std::uint8_t>(mtu + 44, 0x77));
       },
       &ConnectionCounters::payload_over_mtu},
      {"pad that lies on an ONLY (97 of 100 bytes)", 100, 0, [](const Frames& f) { return with_pad(f[0], 3); },
       &ConnectionCounters::inconsistent_message},
      {"pad that lies on a FIRST (254 bytes)", 2 * mtu, 0, [](const Frames& f) { return with_pad(f[0], 2); },
       &ConnectionCounters::inconsistent_message},
      {"RETH length below the payload", 100, 0,
       [&](const Frames& f) {
         return rebuilt(f[0], [](wire::FrameSpec& s) { s.reth.dma_len = 50; }, payload_of(f[0]));
       },
       &ConnectionCounters::inconsistent_message},
      {"RETH length above an ONLY's payload", 100, 0,
       [&](const Frames& f) {
         return rebuilt(f[0], [](wire::FrameSpec& s) { s.reth.dma_len = 200; }, payload_of(f[0]));
       },
       &ConnectionCounters::inconsistent_message},
      {"MIDDLE with no message begun", 3 * mtu, 0,
       [&](const Frames& f) {
         return rebuilt(f[1], [](wire::FrameSpec& s) { s.bth.psn = psn_a; }, payload_of(f[1]));
       },
       &ConnectionCounters::inconsistent_message},
      {"FIRST while a message is under way", 3 * mtu, 1,
       [&](const Frames& f) {
         return rebuilt(f[0], [](wire::FrameSpec& s) { s.bth.psn = psn_plus(psn_a, 1); }, payload_of(f[0]));
       },
       &ConnectionCounters::inconsistent_message},
      {"SEND MIDDLE continuing a WRITE", 3 * mtu, 1,
       [&](const Frames& f) {
         return rebuilt(f[1], [](wire::FrameSpec& s) { s.bth.opcode = wire::opcode::send_middle; }, payload_of(f[1]));
       },
       &ConnectionCounters::inconsistent_message},
      {"LAST longer than the rest of the message", 2 * mtu - 10, 1,
       [&](const Frames& f) {
         return rebuilt(f[1], [](wire::FrameSpec&) {}, std::vector<std::uint8_t>(mtu, 0x77));
       },
       &ConnectionCounters::inconsistent_message},
  };
  for (const Case& c : cases) {
    RocePair p;
    ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, c.length)), PostResult::ok);
    const Frames frames = p.drain(*p.a, 1000);
    const std::vector<std::uint8_t> before = p.dst;
    for (std::size_t i = 0; i < c.genuine; ++i) ConnectionPair::deliver(*p.b, 2000, frames[i]);
    ConnectionPair::deliver(*p.b, 2000, c.hostile(frames));
    EXPECT_EQ(p.b->counters().*(c.counter), 1u) << c.what;
    EXPECT_EQ(p.b->counters().data_packets_received, c.genuine) << c.what;
    EXPECT_EQ(p.b->state(), ConnectionState::error) << c.what;
    expect_only_placed(p, before, 0, c.genuine * mtu, c.what);
    expect_answer(p, wire::syndrome::nak_invalid_request, psn_plus(psn_a, static_cast<std::uint32_t>(c.genuine)),
                  c.what);
    const auto tx = ConnectionPair::completions(*p.a);
    ASSERT_EQ(tx.size(), 1u) << c.what;
    EXPECT_EQ(tx[0].status, CompletionStatus::remote_invalid_request) << c.what;
  }
}

TEST(RoceHostile, SendLargerThanTheMtuIsAnInvalidRequest) {
  RocePair p;
  ASSERT_EQ(p.b->post_receive(p.receive(7, 0, 4096)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::send, 1, 0, 100)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 1u);
  const std::vector<std::uint8_t> before = p.dst;
  const wire::FrameSpec s = spec_of(ConnectionPair::parse(frames[0]));
  ConnectionPair::deliver(*p.b, 2000, build(s, std::vector<std::uint8_t>(mtu + 4, 1)));
  EXPECT_EQ(p.b->counters().payload_over_mtu, 1u);
  EXPECT_TRUE(p.dst == before);
  const auto rx = ConnectionPair::completions(*p.b);
  ASSERT_EQ(rx.size(), 1u);  // the receive is flushed: the responder is in ERROR
  EXPECT_EQ(rx[0].wr_id, 7u);
  EXPECT_EQ(rx[0].status, CompletionStatus::flushed);
  expect_answer(p, wire::syndrome::nak_invalid_request, psn_a, "SEND over the MTU");
}

// A pad count that lies on a SEND cannot be told from a shorter SEND (RC
// carries no SEND length): the receive completes with the bytes that came.
TEST(RoceHostile, PadThatLiesOnASendOnlyShortensIt) {
  RocePair p;
  ASSERT_EQ(p.b->post_receive(p.receive(7, 0, 4096)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::send, 1, 0, 100)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ConnectionPair::deliver(*p.b, 2000, with_pad(frames[0], 2));
  const auto rx = ConnectionPair::completions(*p.b);
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].status, CompletionStatus::success);
  EXPECT_EQ(rx[0].byte_len, 98u);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 98), 0);
  EXPECT_EQ(*p.dst_at(98), 0);
  EXPECT_EQ(p.b->state(), ConnectionState::ready);
}

// IBTA: a zero-length WRITE need not carry a valid address or R_Key, and
// touches nothing.
TEST(RoceHostile, ZeroLengthWriteWithAnyAddressTouchesNothing) {
  RocePair p;
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 0)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 1u);
  wire::FrameSpec s = spec_of(ConnectionPair::parse(frames[0]));
  s.reth.va = ~std::uint64_t{0};
  s.reth.rkey = 0x12345;
  const std::vector<std::uint8_t> before = p.dst;
  ConnectionPair::deliver(*p.b, 2000, build(s, {}));
  EXPECT_TRUE(p.dst == before);
  EXPECT_EQ(p.b->counters().data_packets_received, 1u);
  EXPECT_EQ(p.b->counters().remote_access_errors, 0u);
  expect_answer(p, 0x1f, psn_a, "zero-length WRITE");
  const auto tx = ConnectionPair::completions(*p.a);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].status, CompletionStatus::success);
}

// ------------------------------------------------------------ rocev2 PSNs

// A PSN far ahead is a gap (one NAK PSN sequence error, nothing written);
// one far behind is a duplicate (ACKed again at once). Neither is fatal, and
// the genuine packet lands afterwards.
TEST(RoceHostile, PsnFarOutsideTheWindowIsDroppedAndTheConnectionStaysReady) {
  RocePair p;
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 100)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 1u);
  const wire::FrameSpec genuine = spec_of(ConnectionPair::parse(frames[0]));
  const std::vector<std::uint8_t> payload = payload_of(frames[0]);
  const std::vector<std::uint8_t> before = p.dst;

  wire::FrameSpec ahead = genuine;
  ahead.bth.psn = psn_plus(psn_a, 0x100000);
  ConnectionPair::deliver(*p.b, 2000, build(ahead, payload));
  ConnectionPair::deliver(*p.b, 2000, build(ahead, payload));  // a second one: no second NAK
  EXPECT_EQ(p.b->counters().out_of_sequence_drops, 2u);
  const Frames nak = p.drain(*p.b, 2000);
  ASSERT_EQ(nak.size(), 1u);
  EXPECT_EQ(ConnectionPair::parse(nak[0]).aeth.syndrome, wire::syndrome::nak_psn_sequence_error);
  EXPECT_EQ(ConnectionPair::parse(nak[0]).bth.psn, psn_a);  // the PSN it expects

  wire::FrameSpec behind = genuine;
  behind.bth.psn = psn_plus(psn_a, 0x800001);  // more than half the PSN space ahead: behind
  ConnectionPair::deliver(*p.b, 2000, build(behind, payload));
  EXPECT_EQ(p.b->counters().duplicate_packets, 1u);
  const Frames reack = p.drain(*p.b, 2000);
  ASSERT_EQ(reack.size(), 1u);
  EXPECT_EQ(ConnectionPair::parse(reack[0]).aeth.syndrome, 0x1f);
  EXPECT_EQ(ConnectionPair::parse(reack[0]).bth.psn, psn_plus(psn_a, wire::psn_mask));  // e - 1: nothing new

  EXPECT_TRUE(p.dst == before);
  EXPECT_EQ(p.b->state(), ConnectionState::ready);
  ConnectionPair::deliver(*p.b, 2500, frames[0]);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 100), 0);
  EXPECT_EQ(p.b->counters().data_packets_received, 1u);
  expect_answer(p, 0x1f, psn_a, "the genuine WRITE");
  const auto tx = ConnectionPair::completions(*p.a);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].status, CompletionStatus::success);
}

// ------------------------------------------------------------ rocev2 ACKs

// ACKs and NAKs naming PSNs the requester never sent, a reserved syndrome
// and an ACK from long ago change nothing: counted, the requester stays
// READY, and the genuine ACK then completes the WRITE.
TEST(RoceHostile, AcksForPacketsNeverSentAreCountedAndIgnored) {
  RocePair p;
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 100)), PostResult::ok);
  ASSERT_EQ(p.drain(*p.a, 1000).size(), 1u);  // PSN 0xfffffe
  const auto ack = [&](std::uint8_t syndrome, std::uint32_t psn) {
    wire::FrameSpec s = frame_spec(p.b->config(), wire::opcode::acknowledge, ConnectionPair::src_port_b, false);
    s.bth.psn = psn;
    s.aeth = {syndrome, 1};
    return build(s, {});
  };
  const std::uint32_t never = psn_plus(psn_a, 5);
  ConnectionPair::deliver(*p.a, 2000, ack(0x1f, never));
  ConnectionPair::deliver(*p.a, 2000, ack(wire::syndrome::nak_psn_sequence_error, never));
  ConnectionPair::deliver(*p.a, 2000, ack(wire::syndrome::rnr_nak | 1, never));
  ConnectionPair::deliver(*p.a, 2000, ack(wire::syndrome::nak_remote_access_error, never));
  EXPECT_EQ(p.a->counters().sack_unknown, 4u);
  ConnectionPair::deliver(*p.a, 2000, ack(0x40, psn_a));  // kind 010: reserved
  EXPECT_EQ(p.a->counters().reserved_ack_syndromes, 1u);
  ConnectionPair::deliver(*p.a, 2000, ack(0x1f, psn_plus(psn_a, 0x900000)));  // far behind: stale
  EXPECT_EQ(p.a->counters().acks_received, 6u);
  EXPECT_EQ(p.a->counters().naks_received, 0u);
  EXPECT_EQ(p.a->counters().rnr_naks_received, 0u);
  EXPECT_EQ(p.a->state(), ConnectionState::ready);
  EXPECT_EQ(p.a->packets_outstanding(), 1u);
  EXPECT_TRUE(ConnectionPair::completions(*p.a).empty());
  EXPECT_TRUE(p.drain(*p.a, 2000).empty());  // and nothing resent

  ConnectionPair::deliver(*p.a, 3000, ack(0x1f, psn_a));
  const auto tx = ConnectionPair::completions(*p.a);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].wr_id, 1u);
  EXPECT_EQ(tx[0].status, CompletionStatus::success);
  EXPECT_EQ(p.a->packets_outstanding(), 0u);
}

// Opcodes RoCEv2 has and this responder does not implement (SEND with
// invalidate, UC, UD) are counted and dropped; the connection carries on.
TEST(RoceHostile, UnsupportedOpcodesAreCountedAndDropped) {
  RocePair p;
  const std::uint8_t opcodes[] = {wire::opcode::send_only_inv, wire::opcode::send_last_inv,
                                  wire::opcode::uc | wire::opcode::send_only,
                                  wire::opcode::ud | wire::opcode::send_only};
  for (const std::uint8_t op : opcodes) {
    wire::FrameSpec s = frame_spec(p.a->config(), op, 49152, true);
    s.bth.psn = ConnectionPair::first_psn_a;
    s.reth = {reinterpret_cast<std::uintptr_t>(p.dst_at(0)), p.dst_key, 64};
    const bool payload = wire::opcode_info(op).has(wire::has_payload);
    const std::vector<std::uint8_t> bytes(payload ? 64 : 0, 9);
    ConnectionPair::deliver(*p.b, 1000, build(s, bytes));
  }
  EXPECT_EQ(p.b->counters().unsupported_opcodes, 4u);
  EXPECT_TRUE(p.drain(*p.b, 1000).empty());
  EXPECT_EQ(p.b->state(), ConnectionState::ready);
  EXPECT_TRUE(p.guards_intact());
  EXPECT_EQ(*p.dst_at(0), 0);
  // A genuine WRITE still lands.
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 64)), PostResult::ok);
  ConnectionPair::deliver_all(*p.b, 2000, p.drain(*p.a, 2000));
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 64), 0);
}

// ------------------------------------------------------------ both modes

class BothModes : public ::testing::TestWithParam<Mode> {
 protected:
  static transport::ConnectionConfig config() {
    return test::pair_config(GetParam(), GetParam() == Mode::rocev2 ? mtu : 1024,
                             GetParam() == Mode::rocev2 ? 1 : 2, 2);
  }
};

// After close(), whatever arrives (the peer's ACK for what was in flight,
// its data) is dropped and counted; nothing is written, nothing is sent, no
// timer of the connection is left on the wheel, and every work request had
// exactly one completion (flushed).
TEST_P(BothModes, FramesForAClosedConnectionAreDropped) {
  ConnectionPair p(config());
  ASSERT_EQ(p.b->post_receive(p.receive(70, 8192, 1024)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 200)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 2, 4096, 200)), PostResult::ok);
  const Frames data = p.drain(*p.a, 1000);
  ASSERT_EQ(data.size(), 2u);
  ConnectionPair::deliver(*p.b, 2000, data[0]);
  const Frames acks = p.drain(*p.b, 2000);  // AckReq on the last packet: ACKed at once
  ASSERT_EQ(acks.size(), 1u);

  p.a->close();
  const auto tx = ConnectionPair::completions(*p.a);
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].wr_id, 1u);
  EXPECT_EQ(tx[1].wr_id, 2u);
  EXPECT_EQ(tx[0].status, CompletionStatus::flushed);
  EXPECT_EQ(tx[1].status, CompletionStatus::flushed);
  ConnectionPair::deliver(*p.a, 3000, acks[0]);  // the ACK for a closed connection
  EXPECT_EQ(p.a->counters().packets_in_error_state, 1u);
  EXPECT_EQ(p.a->counters().acks_received, 0u);
  EXPECT_TRUE(ConnectionPair::completions(*p.a).empty());
  EXPECT_TRUE(p.drain(*p.a, 1'000'000'000).empty());
  EXPECT_EQ(p.wheel_a.next_deadline(), timer::kNever) << "a timer of the closed connection is still armed";
  EXPECT_EQ(p.a->packets_outstanding(), 0u);
  EXPECT_EQ(p.a->state(), ConnectionState::closed);

  p.b->close();
  const auto rx = ConnectionPair::completions(*p.b);
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].wr_id, 70u);
  EXPECT_EQ(rx[0].status, CompletionStatus::flushed);
  const std::vector<std::uint8_t> before = p.dst;
  ConnectionPair::deliver(*p.b, 3000, data[1]);  // data for a closed connection
  EXPECT_EQ(p.b->counters().packets_in_error_state, 1u);
  EXPECT_TRUE(p.dst == before);
  EXPECT_TRUE(p.drain(*p.b, 1'000'000'000).empty());
  EXPECT_EQ(p.wheel_b.next_deadline(), timer::kNever);
  EXPECT_EQ(p.a->post_send(p.request(SendOp::write, 3, 0, 1)), PostResult::not_ready);
  EXPECT_EQ(p.b->post_receive(p.receive(71, 0, 1)), PostResult::not_ready);
}

INSTANTIATE_TEST_SUITE_P(Transport, BothModes, ::testing::Values(Mode::metaroce, Mode::rocev2),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// ------------------------------------------------------------ metaroce

struct MetarocePair : ConnectionPair {
  MetarocePair() : ConnectionPair(test::pair_config(Mode::metaroce, 1024, 2, 2)) {}
};

// A pad count that lies makes a packet shorter than the MTU cut implies.
// Placed, it would leave its message 3 bytes short for ever and stall the
// stream; it is dropped, not recorded on its path, and the genuine copy
// lands and completes the message.
TEST(MetaroceHostile, PadThatLiesIsDroppedAndTheGenuineCopyLands) {
  MetarocePair p;
  ASSERT_EQ(p.b->post_receive(p.receive(70, 8192, 1024)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 100)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write_imm, 2, 200, 100)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 2u);
  const std::vector<std::uint8_t> before = p.dst;
  ConnectionPair::deliver(*p.b, 2000, with_pad(frames[0], 3));  // 97 of 100 bytes
  EXPECT_EQ(p.b->counters().inconsistent_message, 1u);
  EXPECT_EQ(p.b->counters().data_packets_received, 0u);
  EXPECT_TRUE(p.dst == before);
  ConnectionPair::deliver(*p.b, 2000, frames[0]);
  ConnectionPair::deliver(*p.b, 2000, frames[1]);
  EXPECT_EQ(p.b->counters().duplicate_packets, 0u);
  EXPECT_EQ(p.b->counters().data_packets_received, 2u);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 100), 0);
  EXPECT_EQ(std::memcmp(p.dst_at(200), p.src.data() + 200, 100), 0);
  const auto rx = ConnectionPair::completions(*p.b);  // the stream did not stall
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].wr_id, 70u);
  EXPECT_EQ(rx[0].kind, CompletionKind::receive_write_imm);
  EXPECT_EQ(rx[0].imm, 0xabcd0002u);
  EXPECT_EQ(p.b->state(), ConnectionState::ready);
}

// Lengths the MTU cut does not allow, each dropped (not NAKed) and counted.
TEST(MetaroceHostile, PacketLengthsTheMtuCutDoesNotMakeAreDropped) {
  MetarocePair p;
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 2048 + 100)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 3u);
  const wire::FrameSpec first = spec_of(ConnectionPair::parse(frames[0]));
  const wire::FrameSpec last = spec_of(ConnectionPair::parse(frames[2]));
  const std::vector<std::uint8_t> full = payload_of(frames[0]);
  const std::vector<std::uint8_t> tail = payload_of(frames[2]);
  struct Case {
    const char* what;
    wire::FrameSpec spec;
    std::vector<std::uint8_t> payload;
  };
  std::vector<Case> cases;
  cases.push_back(
      {"a non-last packet shorter than the MTU", first, std::vector<std::uint8_t>(full.begin(), full.begin() + 1000)});
  {
    wire::FrameSpec s = first;
    s.mr_write.msg_offset = 512;  // not a multiple of the MTU
    s.mr_write.va += 512;
    cases.push_back({"an offset off the MTU grid", s, full});
  }
  {
    wire::FrameSpec s = first;
    s.mr_data.flags |= wire::mr_flag::last;  // LAST on a packet that does not end the message
    cases.push_back({"LAST flag in the middle", s, full});
  }
  {
    wire::FrameSpec s = last;
    s.mr_data.flags &= static_cast<std::uint8_t>(~wire::mr_flag::last);  // the end without LAST
    cases.push_back({"the last bytes without LAST", s, tail});
  }
  const std::vector<std::uint8_t> before = p.dst;
  for (const Case& c : cases) {
    const std::uint64_t n = p.b->counters().inconsistent_message;
    ConnectionPair::deliver(*p.b, 2000, build(c.spec, c.payload));
    EXPECT_EQ(p.b->counters().inconsistent_message, n + 1) << c.what;
  }
  EXPECT_TRUE(p.dst == before);
  EXPECT_EQ(p.b->counters().data_packets_received, 0u);
  ConnectionPair::deliver_all(*p.b, 3000, frames);
  EXPECT_EQ(p.b->counters().data_packets_received, 3u);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 2048 + 100), 0);
  EXPECT_EQ(p.b->state(), ConnectionState::ready);
}

// Each packet names its own address; the message's whole range (address
// less offset, message length) is checked on every one, so a message that
// leaves the region writes nothing whichever packet arrives first.
TEST(MetaroceHostile, MessageLeavingTheRegionWritesNothingFromAnyPacket) {
  MetarocePair p;
  SendRequest w = p.request(SendOp::write, 1, 0, 2048);
  w.remote_addr = reinterpret_cast<std::uintptr_t>(p.dst_at(ConnectionPair::region_size - 1524));
  ASSERT_EQ(p.a->post_send(w), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 2u);
  const std::vector<std::uint8_t> before = p.dst;
  ConnectionPair::deliver(*p.b, 2000, frames[0]);  // its own 1024 bytes are inside
  EXPECT_EQ(p.b->counters().remote_access_errors, 1u);
  EXPECT_EQ(p.b->state(), ConnectionState::error);
  EXPECT_TRUE(p.dst == before);
  const Frames nak = p.drain(*p.b, 2000);
  ASSERT_EQ(nak.size(), 1u);
  EXPECT_EQ(ConnectionPair::parse(nak[0]).mr_ack.syndrome, wire::syndrome::nak_remote_access_error);
  EXPECT_EQ(ConnectionPair::parse(nak[0]).bth.psn, psn_a);
}

// A reserved ACK syndrome is counted; its path blocks still say what
// arrived, and it fails nothing.
TEST(MetaroceHostile, ReservedAckSyndromeIsCountedAndFailsNothing) {
  MetarocePair p;
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 100)), PostResult::ok);
  const Frames data = p.drain(*p.a, 1000);
  ConnectionPair::deliver_all(*p.b, 2000, data);
  const Frames acks = p.drain(*p.b, 2000);
  ASSERT_EQ(acks.size(), 1u);
  wire::ParsedFrame parsed = ConnectionPair::parse(acks[0]);
  wire::FrameSpec s = spec_of(parsed);
  std::vector<wire::MrPathAck> blocks;
  for (std::size_t i = 0; i < parsed.mr_ack.path_count; ++i) blocks.push_back(parsed.path_ack(i));
  s.mr_path_acks = blocks;
  s.mr_ack.syndrome = 0x40;
  ConnectionPair::deliver(*p.a, 3000, build(s, {}));
  EXPECT_EQ(p.a->counters().reserved_ack_syndromes, 1u);
  EXPECT_EQ(p.a->counters().naks_received, 0u);
  EXPECT_EQ(p.a->state(), ConnectionState::ready);
  const auto tx = ConnectionPair::completions(*p.a);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].status, CompletionStatus::success);
}

}  // namespace
