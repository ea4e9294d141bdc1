// rocev2 mode (RoceConnection), the go-back-N baseline.
//
// Rocev2Exact: a connection pair driven by hand, frame by frame, without the
// simulator: the standard RC opcode sequences and headers, then each
// recovery and error path with exact counts.
// Rocev2Impairments: verified transfers through the simulator under each
// impairment (the harness checks every byte, every completion once and in
// order, canaries and the window), with the counter relations go-back-N
// implies.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/pcap_file.hpp"
#include "connection_pair.hpp"
#include "timer/wheel.hpp"
#include "transfer_harness.hpp"
#include "transport/connection.hpp"
#include "transport/memory_region.hpp"
#include "wire/frame.hpp"

namespace {

using namespace metaroce;
using namespace metaroce::transport;
using Frames = std::vector<std::vector<std::uint8_t>>;

constexpr std::uint32_t mtu = 256;
constexpr std::uint32_t region_size = 64 * 1024;

// With METAROCE_ROCEV2_PCAP=/tmp/x.pcap, every frame the exact tests emit
// is written there, for checking by hand that tshark and metaroce-decode
// read them as standard RC (data, ACK, NAK, RNR NAK).
void capture(const Frames& frames) {
  static const char* path = std::getenv("METAROCE_ROCEV2_PCAP");
  static apps::PcapWriter writer;
  static bool opened = false;
  static std::uint64_t timestamp = 0;
  if (path == nullptr) return;
  if (!opened) {
    std::string error;
    opened = writer.open(path, error);
    if (!opened) {
      std::fprintf(stderr, "METAROCE_ROCEV2_PCAP: %s\n", error.c_str());
      path = nullptr;
      return;
    }
  }
  for (const auto& f : frames) writer.write(f, timestamp += 1000);
}

// The shared hand-driven pair (connection_pair.hpp), rocev2 mode, 4
// streams, MTU 256; every frame it emitted goes to the capture at the end.
struct Pair : test::ConnectionPair {
  explicit Pair(const std::function<void(ConnectionConfig&)>& adjust = {}) : ConnectionPair(config(adjust)) {}
  ~Pair() { capture(captured); }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;

  static ConnectionConfig config(const std::function<void(ConnectionConfig&)>& adjust) {
    ConnectionConfig c = test::pair_config(Mode::rocev2, mtu, 1, 4);
    if (adjust) adjust(c);
    return c;
  }
};

std::uint32_t psn_of(std::uint32_t initial, std::uint32_t i) { return (initial + i) & wire::psn_mask; }

void expect_ack(const std::vector<std::uint8_t>& frame, std::uint8_t syndrome, std::uint32_t psn) {
  const auto f = Pair::parse(frame);
  EXPECT_EQ(f.bth.opcode, wire::opcode::acknowledge);
  EXPECT_TRUE(f.has(wire::has_aeth));
  EXPECT_EQ(f.aeth.syndrome, syndrome);
  EXPECT_EQ(f.bth.psn, psn);
  EXPECT_EQ(f.bth.dest_qp, 0x11u);
  EXPECT_EQ(f.udp_src_port, 50000);
}

TEST(Rocev2Exact, ThreePacketWriteHasStandardOpcodesAndOneReth) {
  Pair p;
  const std::size_t len = 2 * mtu + 89;  // last packet 89 bytes: pad 3
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, len)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 3u);
  const std::uint8_t opcodes[] = {wire::opcode::write_first, wire::opcode::write_middle, wire::opcode::write_last};
  const std::size_t payloads[] = {mtu, mtu, 89};
  const std::uint8_t pads[] = {0, 0, 3};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto f = Pair::parse(frames[i]);
    EXPECT_EQ(f.bth.opcode, opcodes[i]);
    EXPECT_EQ(wire::opcode_info(f.bth.opcode).name,
              std::string_view(i == 0 ? "RC_RDMA_WRITE_FIRST" : i == 1 ? "RC_RDMA_WRITE_MIDDLE" : "RC_RDMA_WRITE_LAST"));
    EXPECT_EQ(f.bth.psn, psn_of(0xfffffe, static_cast<std::uint32_t>(i)));  // wraps through 0
    EXPECT_EQ(f.bth.ack_req, i == 2);
    EXPECT_EQ(f.bth.pad, pads[i]);
    EXPECT_EQ(f.bth.dest_qp, 0x22u);
    EXPECT_EQ(f.bth.pkey, 0xffff);
    EXPECT_EQ(f.has(wire::has_reth), i == 0);  // RETH on FIRST only
    EXPECT_FALSE(f.has(wire::has_imm));
    EXPECT_EQ(f.payload.size(), payloads[i]);
    EXPECT_EQ(std::memcmp(f.payload.data(), p.src.data() + i * mtu, payloads[i]), 0);
    EXPECT_EQ(f.udp_src_port, 49152);  // one source port: one path
    EXPECT_EQ(f.ecn(), 2);             // ECT(0)
    EXPECT_TRUE(f.icrc_checked);
  }
  const auto first = Pair::parse(frames[0]);
  EXPECT_EQ(first.reth.va, reinterpret_cast<std::uintptr_t>(p.dst_at(0)));
  EXPECT_EQ(first.reth.rkey, p.dst_key);
  EXPECT_EQ(first.reth.dma_len, len);  // the whole message

  Pair::deliver_all(*p.b, 2000, frames);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), len), 0);
  const Frames acks = p.drain(*p.b, 2000);
  ASSERT_EQ(acks.size(), 1u);  // AckReq on the last packet: one ACK for all three
  expect_ack(acks[0], 0x1f, psn_of(0xfffffe, 2));
  EXPECT_EQ(Pair::parse(acks[0]).aeth.msn, 1u);
  EXPECT_EQ(Pair::parse(acks[0]).ecn(), 0);
  EXPECT_EQ(p.a->packets_outstanding(), 3u);
  Pair::deliver(*p.a, 3000, acks[0]);
  EXPECT_EQ(p.a->packets_outstanding(), 0u);
  const auto done = Pair::completions(*p.a);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].wr_id, 1u);
  EXPECT_EQ(done[0].status, CompletionStatus::success);
  EXPECT_EQ(done[0].kind, CompletionKind::write);
  EXPECT_TRUE(Pair::completions(*p.b).empty());  // a plain WRITE consumes no receive
  EXPECT_EQ(p.a->counters().retransmitted_packets, 0u);
  EXPECT_EQ(p.b->counters().data_packets_received, 3u);
  EXPECT_TRUE(p.guards_intact());
}

TEST(Rocev2Exact, WriteOnlyWithImmediateConsumesAReceive) {
  Pair p;
  ASSERT_EQ(p.b->post_receive(p.receive(70, 0, 0, 2)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write_imm, 5, 100, 102, 1)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 1u);
  const auto f = Pair::parse(frames[0]);
  EXPECT_EQ(f.bth.opcode, wire::opcode::write_only_imm);
  EXPECT_TRUE(f.has(wire::has_reth));
  EXPECT_TRUE(f.has(wire::has_imm));
  EXPECT_EQ(f.reth.dma_len, 102u);
  EXPECT_EQ(f.reth.va, reinterpret_cast<std::uintptr_t>(p.dst_at(100)));
  EXPECT_EQ(f.imm, 0xabcd0005u);
  EXPECT_EQ(f.bth.pad, 2);
  EXPECT_TRUE(f.bth.ack_req);
  EXPECT_EQ(f.bth.psn, 0xfffffeu);
  Pair::deliver(*p.b, 2000, frames[0]);
  EXPECT_EQ(std::memcmp(p.dst_at(100), p.src.data() + 100, 102), 0);
  const auto rx = Pair::completions(*p.b);
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].wr_id, 70u);
  EXPECT_EQ(rx[0].kind, CompletionKind::receive_write_imm);
  EXPECT_EQ(rx[0].stream, 2);  // the receive's stream: rocev2 has one receive queue
  EXPECT_EQ(rx[0].byte_len, 102u);
  EXPECT_TRUE(rx[0].has_imm);
  EXPECT_EQ(rx[0].imm, 0xabcd0005u);
  const Frames acks = p.drain(*p.b, 2000);
  ASSERT_EQ(acks.size(), 1u);
  expect_ack(acks[0], 0x1f, 0xfffffe);
  Pair::deliver(*p.a, 3000, acks[0]);
  const auto tx = Pair::completions(*p.a);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].kind, CompletionKind::write);
  EXPECT_EQ(tx[0].stream, 1);
}

TEST(Rocev2Exact, TwoPacketSendWithImmediateHasNoReth) {
  Pair p;
  // Receives are consumed in posting order whatever their stream.
  ASSERT_EQ(p.b->post_receive(p.receive(80, 1000, 400, 3)), PostResult::ok);
  ASSERT_EQ(p.b->post_receive(p.receive(81, 2000, 400, 0)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::send_imm, 9, 1000, mtu + 45, 1)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 2u);
  const auto first = Pair::parse(frames[0]);
  const auto last = Pair::parse(frames[1]);
  EXPECT_EQ(first.bth.opcode, wire::opcode::send_first);
  EXPECT_EQ(last.bth.opcode, wire::opcode::send_last_imm);
  EXPECT_EQ(wire::opcode_info(last.bth.opcode).name, "RC_SEND_LAST_WITH_IMMEDIATE");
  EXPECT_FALSE(first.has(wire::has_reth));
  EXPECT_FALSE(last.has(wire::has_reth));
  EXPECT_FALSE(first.has(wire::has_imm));
  EXPECT_TRUE(last.has(wire::has_imm));
  EXPECT_EQ(last.imm, 0xabcd0009u);
  EXPECT_EQ(first.bth.pad, 0);
  EXPECT_EQ(last.bth.pad, 3);
  EXPECT_EQ(last.payload.size(), 45u);
  EXPECT_FALSE(first.bth.ack_req);
  EXPECT_TRUE(last.bth.ack_req);
  EXPECT_EQ(first.bth.psn, 0xfffffeu);
  EXPECT_EQ(last.bth.psn, 0xffffffu);
  Pair::deliver_all(*p.b, 2000, frames);
  EXPECT_EQ(std::memcmp(p.dst_at(1000), p.src.data() + 1000, mtu + 45), 0);
  const auto rx = Pair::completions(*p.b);
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].wr_id, 80u);
  EXPECT_EQ(rx[0].kind, CompletionKind::receive);
  EXPECT_EQ(rx[0].stream, 3);
  EXPECT_EQ(rx[0].byte_len, mtu + 45);
  EXPECT_TRUE(rx[0].has_imm);
  EXPECT_EQ(rx[0].imm, 0xabcd0009u);
  const Frames acks = p.drain(*p.b, 2000);
  ASSERT_EQ(acks.size(), 1u);
  expect_ack(acks[0], 0x1f, 0xffffff);
  Pair::deliver(*p.a, 3000, acks[0]);
  const auto tx = Pair::completions(*p.a);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].kind, CompletionKind::send);
  EXPECT_EQ(tx[0].status, CompletionStatus::success);
}

TEST(Rocev2Exact, DroppedPacketGetsOneNakAndGoBackN) {
  Pair p;
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 8 * mtu)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 8u);
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (i != 2) Pair::deliver(*p.b, 2000, frames[i]);  // PSN 2 is lost
  const Frames naks = p.drain(*p.b, 2000);
  ASSERT_EQ(naks.size(), 1u);  // one NAK for the gap, not one per dropped packet
  expect_ack(naks[0], wire::syndrome::nak_psn_sequence_error, psn_of(0xfffffe, 2));
  EXPECT_EQ(p.b->counters().out_of_sequence_drops, 5u);
  EXPECT_EQ(p.b->counters().data_packets_received, 2u);

  Pair::deliver(*p.a, 3000, naks[0]);
  EXPECT_EQ(p.a->packets_outstanding(), 6u);  // the NAK acknowledged PSNs 0 and 1
  const Frames resent = p.drain(*p.a, 3000);
  ASSERT_EQ(resent.size(), 6u);  // go-back-N: PSN 2 and everything after it
  for (std::size_t i = 0; i < resent.size(); ++i) {
    const auto f = Pair::parse(resent[i]);
    EXPECT_EQ(f.bth.psn, psn_of(0xfffffe, static_cast<std::uint32_t>(2 + i)));
    EXPECT_EQ(f.bth.opcode, i == 5 ? wire::opcode::write_last : wire::opcode::write_middle);
  }
  EXPECT_EQ(p.a->counters().retransmitted_packets, 6u);
  EXPECT_EQ(p.a->counters().naks_received, 1u);
  // A copy of the NAK (the network duplicated it) does not start another round.
  Pair::deliver(*p.a, 3100, naks[0]);
  EXPECT_TRUE(p.drain(*p.a, 3100).empty());

  Pair::deliver_all(*p.b, 4000, resent);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 8 * mtu), 0);
  const Frames acks = p.drain(*p.b, 4000);
  ASSERT_EQ(acks.size(), 1u);
  expect_ack(acks[0], 0x1f, psn_of(0xfffffe, 7));
  Pair::deliver(*p.a, 5000, acks[0]);
  const auto tx = Pair::completions(*p.a);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].status, CompletionStatus::success);
  EXPECT_EQ(p.b->counters().data_packets_received, 8u);
  EXPECT_EQ(p.b->counters().duplicate_packets, 0u);
  EXPECT_EQ(p.a->counters().retransmitted_packets, 6u);
  EXPECT_EQ(p.a->counters().rto_timeouts, 0u);
}

TEST(Rocev2Exact, DuplicateIsAckedAgainAtOnce) {
  Pair p;
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 2 * mtu)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 2u);
  Pair::deliver_all(*p.b, 2000, frames);
  const Frames first_ack = p.drain(*p.b, 2000);
  ASSERT_EQ(first_ack.size(), 1u);
  expect_ack(first_ack[0], 0x1f, 0xffffff);
  // The ACK was lost and the requester resent the first packet: the
  // responder drops it and ACKs everything it has, at once.
  Pair::deliver(*p.b, 3000, frames[0]);
  const Frames again = p.drain(*p.b, 3000);
  ASSERT_EQ(again.size(), 1u);
  expect_ack(again[0], 0x1f, 0xffffff);
  EXPECT_EQ(p.b->counters().duplicate_packets, 1u);
  EXPECT_EQ(p.b->counters().spurious_retransmissions, 1u);
  EXPECT_EQ(p.b->counters().data_packets_received, 2u);
  Pair::deliver(*p.a, 4000, again[0]);
  ASSERT_EQ(Pair::completions(*p.a).size(), 1u);
  // A stale ACK (behind what is acknowledged) changes nothing.
  Pair::deliver(*p.a, 4100, first_ack[0]);
  EXPECT_TRUE(Pair::completions(*p.a).empty());
  EXPECT_EQ(p.a->state(), ConnectionState::ready);
}

TEST(Rocev2Exact, RnrNakWaitsThenSucceedsOnceAReceiveIsPosted) {
  Pair p([](ConnectionConfig& c) { c.rnr_delay = 50'000; });
  ASSERT_EQ(p.a->post_send(p.request(SendOp::send, 1, 0, 100)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 2, 4096, 300)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 3u);  // SEND_ONLY, WRITE_FIRST, WRITE_LAST
  Pair::deliver_all(*p.b, 2000, frames);
  const Frames rnr = p.drain(*p.b, 2000);
  ASSERT_EQ(rnr.size(), 1u);  // the WRITE packets behind it are dropped silently
  const auto nak = Pair::parse(rnr[0]);
  EXPECT_EQ(nak.aeth.syndrome & wire::syndrome::kind_mask, wire::syndrome::rnr_nak);
  EXPECT_EQ(nak.aeth.syndrome & 0x1f, 5);  // IBTA timer code 5 = 0.06 ms >= 50 us
  EXPECT_EQ(nak.bth.psn, 0xfffffeu);
  EXPECT_EQ(p.b->counters().rnr_naks_sent, 1u);
  EXPECT_EQ(p.b->counters().out_of_sequence_drops, 2u);
  EXPECT_EQ(p.dst_at(4096)[0], 0);  // nothing placed

  Pair::deliver(*p.a, 3000, rnr[0]);
  EXPECT_EQ(p.a->counters().rnr_naks_received, 1u);
  EXPECT_TRUE(p.drain(*p.a, 3000).empty());
  EXPECT_TRUE(p.drain(*p.a, 3000 + 49'000).empty());  // still waiting
  ASSERT_EQ(p.b->post_receive(p.receive(40, 0, 100)), PostResult::ok);
  const Frames resent = p.drain(*p.a, 3000 + 50'000 + 4096);  // wheel granularity
  ASSERT_EQ(resent.size(), 3u);
  EXPECT_EQ(Pair::parse(resent[0]).bth.opcode, wire::opcode::send_only);
  EXPECT_EQ(p.a->counters().retransmitted_packets, 3u);
  Pair::deliver_all(*p.b, 60'000, resent);
  const auto rx = Pair::completions(*p.b);
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].wr_id, 40u);
  EXPECT_EQ(rx[0].status, CompletionStatus::success);
  const Frames acks = p.drain(*p.b, 60'000);
  ASSERT_EQ(acks.size(), 1u);
  Pair::deliver(*p.a, 61'000, acks[0]);
  const auto tx = Pair::completions(*p.a);
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].wr_id, 1u);
  EXPECT_EQ(tx[1].wr_id, 2u);
  EXPECT_EQ(tx[0].status, CompletionStatus::success);
  EXPECT_EQ(tx[1].status, CompletionStatus::success);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 100), 0);
  EXPECT_EQ(std::memcmp(p.dst_at(4096), p.src.data() + 4096, 300), 0);
}

TEST(Rocev2Exact, RnrRetryLimitFailsTheConnection) {
  Pair p([](ConnectionConfig& c) {
    c.rnr_retry_limit = 2;
    c.rnr_delay = 20'000;
  });
  ASSERT_EQ(p.a->post_send(p.request(SendOp::send, 1, 0, 100, 1)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 2, 4096, 100, 2)), PostResult::ok);
  Time now = 1000;
  std::uint64_t rounds = 0;
  while (p.a->state() == ConnectionState::ready && rounds < 10) {
    const Frames frames = p.drain(*p.a, now);
    ASSERT_EQ(frames.size(), 2u);
    Pair::deliver_all(*p.b, now, frames);
    const Frames rnr = p.drain(*p.b, now);
    ASSERT_EQ(rnr.size(), 1u);
    Pair::deliver(*p.a, now, rnr[0]);
    ++rounds;
    now += 30'000;
  }
  EXPECT_EQ(rounds, 3u);  // the first try and rnr_retry_limit retries
  EXPECT_EQ(p.a->state(), ConnectionState::error);
  EXPECT_EQ(p.a->counters().rnr_naks_received, 3u);
  EXPECT_EQ(p.a->counters().retransmitted_packets, 4u);
  const auto tx = Pair::completions(*p.a);
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].wr_id, 1u);
  EXPECT_EQ(tx[0].status, CompletionStatus::rnr_retry_exceeded);
  EXPECT_EQ(tx[1].wr_id, 2u);
  EXPECT_EQ(tx[1].status, CompletionStatus::flushed);
  EXPECT_EQ(p.a->post_send(p.request(SendOp::write, 3, 0, 1)), PostResult::not_ready);
  EXPECT_TRUE(p.drain(*p.a, now + 1'000'000).empty());
  EXPECT_EQ(p.b->state(), ConnectionState::ready);  // RNR is not an error at the responder
}

TEST(Rocev2Exact, WriteOutsideTheRegionIsNakedAndNothingIsWritten) {
  Pair p;
  ASSERT_EQ(p.b->post_receive(p.receive(90, 0, 16)), PostResult::ok);
  // Crosses the end of the registered region by 56 bytes: the FIRST packet's
  // own bytes are inside, its RETH's range is not.
  SendRequest bad = p.request(SendOp::write, 1, 0, 2 * mtu);
  bad.remote_addr = reinterpret_cast<std::uintptr_t>(p.dst_at(region_size - 2 * mtu + 56));
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 0, 0, 64)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(bad), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 2, 8192, 64)), PostResult::ok);
  const Frames frames = p.drain(*p.a, 1000);
  ASSERT_EQ(frames.size(), 4u);
  // Keep a copy of the destination: the refused message must change nothing.
  const std::vector<std::uint8_t> before(p.dst.begin(), p.dst.end());
  Pair::deliver_all(*p.b, 2000, frames);
  EXPECT_EQ(p.b->counters().remote_access_errors, 1u);
  EXPECT_EQ(p.b->counters().packets_in_error_state, 2u);  // its LAST and the WRITE after it
  EXPECT_EQ(p.b->state(), ConnectionState::error);
  const Frames naks = p.drain(*p.b, 2000);
  ASSERT_EQ(naks.size(), 1u);
  // The RETH's whole range is checked at the FIRST packet (as rxe and IBTA
  // responders do): the NAK names it, and not one byte of the message was
  // written; the WRITE before it was, the one after it was not.
  expect_ack(naks[0], wire::syndrome::nak_remote_access_error, psn_of(0xfffffe, 1));
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 64), 0);
  EXPECT_TRUE(std::equal(p.dst.begin() + Pair::guard + 64, p.dst.end(), before.begin() + Pair::guard + 64));
  EXPECT_TRUE(p.guards_intact());
  const auto rx = Pair::completions(*p.b);
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].wr_id, 90u);
  EXPECT_EQ(rx[0].status, CompletionStatus::flushed);

  Pair::deliver(*p.a, 3000, naks[0]);
  EXPECT_EQ(p.a->state(), ConnectionState::error);
  const auto tx = Pair::completions(*p.a);
  ASSERT_EQ(tx.size(), 3u);
  EXPECT_EQ(tx[0].wr_id, 0u);
  EXPECT_EQ(tx[0].status, CompletionStatus::success);  // the NAK acknowledged it
  EXPECT_EQ(tx[1].wr_id, 1u);
  EXPECT_EQ(tx[1].status, CompletionStatus::remote_access_error);
  EXPECT_EQ(tx[2].wr_id, 2u);
  EXPECT_EQ(tx[2].status, CompletionStatus::flushed);
}

TEST(Rocev2Exact, WriteWithABadRkeyWritesNothing) {
  Pair p;
  SendRequest bad = p.request(SendOp::write, 1, 0, 3 * mtu);
  bad.rkey = p.dst_key + 1;
  ASSERT_EQ(p.a->post_send(bad), PostResult::ok);
  const std::vector<std::uint8_t> before(p.dst.begin(), p.dst.end());
  Pair::deliver_all(*p.b, 2000, p.drain(*p.a, 1000));
  EXPECT_TRUE(std::equal(p.dst.begin(), p.dst.end(), before.begin()));
  EXPECT_EQ(p.b->counters().remote_access_errors, 1u);
  EXPECT_EQ(p.b->counters().packets_in_error_state, 2u);  // MIDDLE and LAST after the error
  const Frames naks = p.drain(*p.b, 2000);
  ASSERT_EQ(naks.size(), 1u);
  expect_ack(naks[0], wire::syndrome::nak_remote_access_error, 0xfffffe);
  Pair::deliver(*p.a, 3000, naks[0]);
  const auto tx = Pair::completions(*p.a);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].status, CompletionStatus::remote_access_error);
}

TEST(Rocev2Exact, SendLongerThanTheReceiveIsALengthError) {
  Pair p;
  ASSERT_EQ(p.b->post_receive(p.receive(50, 0, 300)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::send, 1, 0, 2 * mtu)), PostResult::ok);
  Pair::deliver_all(*p.b, 2000, p.drain(*p.a, 1000));
  EXPECT_EQ(p.b->state(), ConnectionState::error);
  EXPECT_EQ(p.b->counters().receive_too_small, 1u);
  const auto rx = Pair::completions(*p.b);
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].status, CompletionStatus::local_length_error);
  const Frames naks = p.drain(*p.b, 2000);
  ASSERT_EQ(naks.size(), 1u);
  expect_ack(naks[0], wire::syndrome::nak_invalid_request, 0xffffff);
  Pair::deliver(*p.a, 3000, naks[0]);
  const auto tx = Pair::completions(*p.a);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].status, CompletionStatus::remote_invalid_request);
}

TEST(Rocev2Exact, PeerThatNeverAnswersGivesRetryExceeded) {
  Pair p([](ConnectionConfig& c) { c.retry_limit = 3; });
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 2 * mtu, 0)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::send, 2, 4096, 10, 3)), PostResult::ok);
  std::uint64_t frames_sent = p.drain(*p.a, 0).size();
  EXPECT_EQ(frames_sent, 3u);
  std::vector<Time> timeouts;
  for (int guard = 0; guard < 100 && p.a->state() == ConnectionState::ready; ++guard) {
    const Time t = p.wheel_a.next_deadline();
    ASSERT_NE(t, timer::kNever);
    const std::uint64_t before = p.a->counters().rto_timeouts;
    frames_sent += p.drain(*p.a, t).size();  // nothing ever reaches b
    if (p.a->counters().rto_timeouts != before) timeouts.push_back(t);
  }
  EXPECT_EQ(p.a->state(), ConnectionState::error);
  ASSERT_EQ(timeouts.size(), 4u);  // retry_limit retries, then the failing timeout
  EXPECT_EQ(p.a->counters().rto_timeouts, 4u);
  EXPECT_EQ(p.a->counters().retransmitted_packets, 3u * 3u);  // each retry resends all three
  EXPECT_EQ(frames_sent, 3u + 9u);
  // Exponential backoff: 200, 400, 800, 1600 us (initial RTO, no RTT sample).
  for (std::size_t i = 1; i < timeouts.size(); ++i)
    EXPECT_NEAR(static_cast<double>(timeouts[i] - timeouts[i - 1]),
                static_cast<double>(ConnectionConfig{}.initial_rto << i), 0.15 * static_cast<double>(ConnectionConfig{}.initial_rto << i));
  const auto tx = Pair::completions(*p.a);
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].wr_id, 1u);
  EXPECT_EQ(tx[0].status, CompletionStatus::retry_exceeded);
  EXPECT_EQ(tx[1].wr_id, 2u);
  EXPECT_EQ(tx[1].status, CompletionStatus::flushed);
  EXPECT_EQ(tx[1].stream, 3);
}

// IBTA timers: 4.096 us x 2^N, the retry counts as given (RNR retry 7: no
// limit), the RTO never below the timeout.
TEST(Rocev2Timers, IbtaTimersSetTheRetransmissionTimeoutAndRetryLimits) {
  EXPECT_EQ(ibta_timeout_ns(14), 67'108'864u);
  EXPECT_EQ(ibta_timeout_ns(1), 8'192u);
  ConnectionConfig c;
  apply(IbtaTimers{14, 3, 7}, c);
  EXPECT_EQ(c.initial_rto, 67'108'864u);
  EXPECT_EQ(c.min_rto, 67'108'864u);
  EXPECT_EQ(c.max_rto, 32u * 67'108'864u);
  EXPECT_EQ(c.retry_limit, 3u);
  EXPECT_EQ(c.rnr_retry_limit, ~std::uint32_t{0});
  apply(IbtaTimers{28, 7, 2}, c);
  EXPECT_EQ(c.max_rto, ibta_timeout_ns(28));  // over 60 s already: no backoff beyond it
  EXPECT_EQ(c.rnr_retry_limit, 2u);
  EXPECT_EQ(validate(IbtaTimers{}), "");
  EXPECT_EQ(validate(IbtaTimers{0, 7, 7}), "local ACK timeout 0 is outside 1..31 (4.096 us x 2^N; 14 is 67 ms)");
  EXPECT_EQ(validate(IbtaTimers{14, 8, 7}), "retry count 8 is outside 0..7");
  EXPECT_EQ(validate(IbtaTimers{14, 7, 9}), "RNR retry 9 is outside 0..7 (7: no limit)");
}

// A peer slower than the timeout: it takes 1 ms per packet and ACKs every
// 16th (16 ms apart), the requester's local ACK timeout is 2^10 x 4.096 us
// = 4.19 ms, and one 128-packet WRITE is posted. The first timeout (4.19
// ms) resends the 128 packets, the second (after 8.39 ms more, at 12.58 ms)
// resends them again, and the RTO is 16.8 ms from then on: ACK progress does
// not undo the backoff (no RTT sample: every packet was resent), and each
// ACK comes 16 ms after the one before, inside it. Exactly 2 x 128
// retransmissions. Were the backoff reset by each ACK, the 4.19 ms RTO would
// fire again between every two ACKs and resend the rest of the window each
// time: 16 timeouts, and the peer still busy with duplicates after 400 ms.
TEST(Rocev2Timers, SlowPeerGetsTheWindowResentTwiceNotOncePerAck) {
  constexpr Time ms = 1'000'000;
  constexpr std::uint32_t packets = 128;
  Pair p([](ConnectionConfig& c) {
    apply(IbtaTimers{10, 7, 7}, c);
    c.ack_every_packets = 16;
    c.ack_delay = 1'000'000'000;  // only every 16th packet (and the AckReq on the last) is ACKed
  });
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, packets * mtu, 0)), PostResult::ok);
  std::deque<std::vector<std::uint8_t>> queue;  // at the slow peer, first come first served
  Time next_service = 0;
  std::vector<Time> timeouts;
  bool completed = false;
  for (Time t = 0; t <= 400 * ms && (!completed || !queue.empty()); t += 100'000) {
    const std::uint64_t before = p.a->counters().rto_timeouts;
    for (auto& f : p.drain(*p.a, t)) queue.push_back(std::move(f));
    if (p.a->counters().rto_timeouts != before) timeouts.push_back(t);
    if (!queue.empty() && t >= next_service) {
      Pair::deliver(*p.b, t, queue.front());
      queue.pop_front();
      next_service = t + ms;
    }
    Pair::deliver_all(*p.a, t, p.drain(*p.b, t));
    for (const auto& c : Pair::completions(*p.a)) {
      EXPECT_EQ(c.status, CompletionStatus::success);
      completed = true;
    }
  }
  ASSERT_TRUE(completed);
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(p.a->state(), ConnectionState::ready);
  ASSERT_EQ(timeouts.size(), 2u);
  EXPECT_EQ(timeouts[0], 4'200'000u);   // 4.19 ms, seen at the next 0.1 ms step
  EXPECT_EQ(timeouts[1], 12'900'000u);  // 8.39 ms later, in the wheel's 262 us slots at that range
  EXPECT_EQ(p.a->counters().rto_timeouts, 2u);
  EXPECT_EQ(p.a->counters().retransmitted_packets, 2u * packets);
  EXPECT_EQ(p.a->counters().data_packets_sent, packets);
  EXPECT_EQ(p.b->counters().data_packets_received, packets);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), packets * mtu), 0);
}

// Loss, not a slow peer: the timer fires (everything of a 4-packet WRITE
// lost), the resent round loses its second packet again, and the peer
// answers the gap with a NAK at once. That NAK ends the backoff: once the
// round is acknowledged the timer is armed with the measured RTO (4.19 ms
// here), not the doubled one (8.39 ms), although every packet was resent
// and so no RTT was sampled. (Under heavy loss a backoff kept until the next
// sample only grows: the loss sweep's rocev2 rows at 5% and 10% fell to a
// tenth of their goodput so.)
TEST(Rocev2Timers, NakForAGapEndsTheBackoff) {
  constexpr Time base_rto = 4'194'304;  // 2^10 x 4.096 us
  Pair p([](ConnectionConfig& c) { apply(IbtaTimers{10, 7, 7}, c); });
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 4 * mtu, 0)), PostResult::ok);
  EXPECT_EQ(p.drain(*p.a, 0).size(), 4u);  // all lost
  EXPECT_EQ(p.a->path_info(0).rto, base_rto);
  const auto resent = p.drain(*p.a, 4'300'000);
  ASSERT_EQ(resent.size(), 4u);
  EXPECT_EQ(p.a->counters().rto_timeouts, 1u);
  EXPECT_EQ(p.a->path_info(0).rto, 2 * base_rto);  // backed off
  // The second is lost again; the third makes the peer NAK PSN 1.
  Pair::deliver(*p.b, 4'400'000, resent[0]);
  Pair::deliver(*p.b, 4'400'000, resent[2]);
  const auto nak = p.drain(*p.b, 4'400'000);
  ASSERT_EQ(nak.size(), 1u);
  Pair::deliver(*p.a, 4'500'000, nak[0]);
  EXPECT_EQ(p.a->counters().naks_received, 1u);
  const auto again = p.drain(*p.a, 4'500'000);
  ASSERT_EQ(again.size(), 3u);
  Pair::deliver_all(*p.b, 4'600'000, again);
  Pair::deliver_all(*p.a, 4'700'000, p.drain(*p.b, 4'600'000));
  const auto done = Pair::completions(*p.a);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, CompletionStatus::success);
  EXPECT_EQ(p.a->counters().retransmitted_packets, 7u);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 4 * mtu), 0);
  // Nothing outstanding: post one more packet and see which RTO it gets.
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 2, 0, mtu, 0)), PostResult::ok);
  EXPECT_EQ(p.drain(*p.a, 4'800'000).size(), 1u);
  EXPECT_EQ(p.a->path_info(0).rto, base_rto);
}

TEST(Rocev2Exact, CnpAndMetaroceOpcodesAreCountedAndIgnored) {
  Pair p;
  wire::FrameSpec spec;
  spec.ipv4.src = 0x0a000002;
  spec.ipv4.dst = 0x0a000001;
  spec.bth.opcode = wire::opcode::cnp;
  spec.bth.becn = true;
  spec.bth.dest_qp = 0x11;
  std::vector<std::uint8_t> frame(256);
  frame.resize(wire::build_frame(spec, {}, frame));
  Pair::deliver(*p.a, 1000, frame);
  EXPECT_EQ(p.a->counters().cnp_received, 1u);
  spec.bth.opcode = wire::opcode::mr_probe;
  spec.bth.becn = false;
  frame.resize(256);
  frame.resize(wire::build_frame(spec, {}, frame));
  Pair::deliver(*p.a, 1000, frame);
  EXPECT_EQ(p.a->counters().wrong_mode_packets, 1u);
  EXPECT_EQ(p.a->state(), ConnectionState::ready);
  EXPECT_TRUE(p.drain(*p.a, 1000).empty());
}

TEST(Rocev2Exact, PathInfoDescribesTheOnePath) {
  Pair p;
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 3 * mtu)), PostResult::ok);
  p.drain(*p.a, 1000);
  const PathInfo info = p.a->path_info(0);
  EXPECT_EQ(info.src_port, 49152);
  EXPECT_EQ(info.in_flight, 3u);
  EXPECT_EQ(info.sent, 3u);
  EXPECT_EQ(info.rto, ConnectionConfig{}.initial_rto);
  EXPECT_EQ(p.a->packets_outstanding(), 3u);
}

// ------------------------------------------------------------- impairments

using metaroce::test::run_transfer;
using metaroce::test::TransferResult;
using metaroce::test::TransferSpec;

// Sanitizer builds run a tenth of the messages: same code paths, 10x the cost.
std::size_t message_count(std::size_t normal) {
#if defined(__SANITIZE_ADDRESS__)
  return normal / 10;
#else
  return normal;
#endif
}

// Go-back-N resends about a window (~90 packets) per loss: the lossy cases
// cost about 5 s each at 10,000 messages; the suite stays well within budget.
constexpr std::size_t lossy_messages = 10'000;

TransferSpec rocev2_spec(std::uint64_t seed, std::size_t messages = 10'000) {
  TransferSpec s;
  s.base.mode = Mode::rocev2;
  s.messages = message_count(messages);
  s.max_message = 1u << 20;
  s.streams = 4;
  s.paths = 1;  // forced to 1 in rocev2 mode anyway
  s.seed = seed;
  s.forward.delay_ns = 5'000;
  s.backward.delay_ns = 5'000;
  // The fabric has 8 paths; one UDP source port keeps the connection on one.
  s.forward.paths = 8;
  s.backward.paths = 8;
  s.forward.seed = seed * 3 + 1;
  s.backward.seed = seed * 3 + 2;
  return s;
}

void report(const char* name, const TransferResult& r) {
  std::printf("[rocev2 %s] %.2f ms virtual, %.1f MB verified, data sent %llu (+%llu retransmitted), lost %llu, "
              "out-of-sequence drops %llu, NAKs %llu, rto %llu, duplicates %llu\n",
              name, static_cast<double>(r.virtual_ns) / 1e6, static_cast<double>(r.bytes_verified) / 1e6,
              static_cast<unsigned long long>(r.sender.data_packets_sent),
              static_cast<unsigned long long>(r.sender.retransmitted_packets),
              static_cast<unsigned long long>(r.data_frames_lost()),
              static_cast<unsigned long long>(r.receiver.out_of_sequence_drops),
              static_cast<unsigned long long>(r.sender.naks_received),
              static_cast<unsigned long long>(r.sender.rto_timeouts),
              static_cast<unsigned long long>(r.receiver.duplicate_packets));
}

// What holds for go-back-N under any impairment: every byte verified and
// every completion once and in order (the harness), each PSN placed exactly
// once, and every data frame that reached the responder intact accounted
// for as placed, duplicate or out-of-sequence drop.
void expect_verified(const TransferResult& r, std::size_t messages) {
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.messages_completed, messages);
  EXPECT_LE(r.max_outstanding_psns, 96u);
  EXPECT_EQ(r.paths.size(), 1u);
  EXPECT_EQ(r.receiver.data_packets_received, r.sender.data_packets_sent);
  EXPECT_EQ(r.data_frames_delivered, r.receiver.data_packets_received + r.receiver.duplicate_packets +
                                         r.receiver.out_of_sequence_drops);
  EXPECT_EQ(r.receiver.spurious_retransmissions, r.receiver.duplicate_packets);
  EXPECT_EQ(r.sender.wrong_mode_packets + r.receiver.wrong_mode_packets, 0u);
  EXPECT_EQ(r.receiver.rnr_naks_sent, 0u);  // the harness posts receives first
}

TEST(Rocev2Impairments, CleanNetwork) {
  const TransferSpec s = rocev2_spec(1);
  const TransferResult r = run_transfer(s);
  report("clean", r);
  expect_verified(r, s.messages);
  EXPECT_EQ(r.sender.retransmitted_packets, 0u);
  EXPECT_EQ(r.sender.rto_timeouts, 0u);
  EXPECT_EQ(r.data_frames_delivered, r.data_frames_sent);
  EXPECT_EQ(r.receiver.duplicate_packets, 0u);
  EXPECT_EQ(r.receiver.out_of_sequence_drops, 0u);
}

TEST(Rocev2Impairments, RandomLossGoesBackN) {
  TransferSpec s = rocev2_spec(2, lossy_messages);
  s.forward.loss = 0.01;
  const TransferResult r = run_transfer(s);
  report("loss 1%", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.data_frames_lost(), 0u);
  EXPECT_GE(r.sender.retransmitted_packets, r.data_frames_lost());
  EXPECT_GT(r.receiver.out_of_sequence_drops, 0u);
  EXPECT_GT(r.sender.naks_received, 0u);
  // No ACK is lost: a resent packet finds the responder still waiting for it.
  EXPECT_LE(r.receiver.duplicate_packets, r.sender.rto_timeouts * 96);
}

TEST(Rocev2Impairments, LossBothWays) {
  TransferSpec s = rocev2_spec(3, lossy_messages);
  s.forward.loss = 0.02;
  s.backward.loss = 0.02;
  const TransferResult r = run_transfer(s);
  report("loss 2% both ways", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.backward_counters.dropped_random_loss, 0u);
  EXPECT_GE(r.sender.retransmitted_packets, r.data_frames_lost());
  EXPECT_GT(r.receiver.out_of_sequence_drops, 0u);
}

TEST(Rocev2Impairments, BurstLoss) {
  TransferSpec s = rocev2_spec(4, lossy_messages);
  s.forward.gemodel = {0.002, 0.25, 0.8, 0.0};  // bursts of ~4 frames, ~0.6% lost
  const TransferResult r = run_transfer(s);
  report("gemodel", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.forward_counters.dropped_burst_loss, 0u);
  EXPECT_GE(r.sender.retransmitted_packets, r.data_frames_lost());
  EXPECT_GT(r.receiver.out_of_sequence_drops, 0u);
}

TEST(Rocev2Impairments, DuplicationIsDroppedByPsn) {
  TransferSpec s = rocev2_spec(5);
  s.forward.duplicate = 0.05;
  s.backward.duplicate = 0.05;
  const TransferResult r = run_transfer(s);
  report("duplicate 5%", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.forward_counters.duplicated, 0u);
  EXPECT_EQ(r.sender.retransmitted_packets, 0u);
  EXPECT_EQ(r.receiver.duplicate_packets, r.forward_counters.duplicated);
  EXPECT_EQ(r.receiver.out_of_sequence_drops, 0u);
}

TEST(Rocev2Impairments, JitterNeverReordersTheOnePath) {
  TransferSpec s = rocev2_spec(7);
  s.forward.jitter_ns = 4'000;
  s.backward.jitter_ns = 4'000;
  const TransferResult r = run_transfer(s);
  report("jitter 4 us", r);
  expect_verified(r, s.messages);
  EXPECT_EQ(r.sender.retransmitted_packets, 0u);
  EXPECT_EQ(r.receiver.out_of_sequence_drops, 0u);
}

TEST(Rocev2Impairments, CorruptFramesAreDroppedAndResent) {
  TransferSpec s = rocev2_spec(9, lossy_messages);
  s.forward.corrupt = 0.01;
  s.backward.corrupt = 0.01;
  const TransferResult r = run_transfer(s);
  report("corrupt 1%", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.forward_counters.corrupted, 0u);
  std::uint64_t rejected = 0;
  for (std::uint64_t n : r.receiver_parse_errors) rejected += n;
  EXPECT_EQ(rejected, r.forward_counters.corrupted);
  EXPECT_GE(r.sender.retransmitted_packets, r.data_frames_lost());
}

TEST(Rocev2Impairments, BottleneckQueueWithEcnMarks) {
  TransferSpec s = rocev2_spec(11);
  s.forward.rate_bps = 40'000'000'000;  // below the 100 Gb/s NIC: the queue fills
  s.forward.ecn = {true, 60'000, 60'000, 1.0};
  const TransferResult r = run_transfer(s);
  report("40 Gb/s bottleneck, ECN", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.forward_counters.ecn_marked, 0u);
  EXPECT_EQ(r.receiver.ecn_ce_received, r.forward_counters.ecn_marked);
  EXPECT_EQ(r.sender.retransmitted_packets, 0u);  // no queue limit: nothing dropped
}

TEST(Rocev2Impairments, EverythingAtOnceWithoutBlackholes) {
  TransferSpec s = rocev2_spec(12, lossy_messages);
  for (auto* f : {&s.forward, &s.backward}) {
    f->loss = 0.01;
    f->gemodel = {0.001, 0.3, 0.7, 0.0};
    f->duplicate = 0.01;
    f->corrupt = 0.005;
    f->jitter_ns = 2'000;
  }
  const TransferResult r = run_transfer(s);
  report("everything", r);
  expect_verified(r, s.messages);
  EXPECT_GE(r.sender.retransmitted_packets, r.data_frames_lost());
}

// Multipath spread and path blackholes are not run: one UDP source port
// means one path, so a spread fabric only changes the one path's delay, and
// go-back-N has no other path to move to.

}  // namespace
