// Why a lossless run resends: a receiver that does not run for longer than
// the sender's RTO (a software end preempted on a shared core: the loss
// sweep's lcores stall for 1 to 8 ms at times, against an RTO floor of
// 2 ms) sends no ACK in that time, so the sender's timer fires although
// nothing was lost. rocev2 then goes back and resends the whole window,
// every packet of it a duplicate at the receiver (`spurious`); metaroce
// only probes, and resends nothing the receiver has.
#include <gtest/gtest.h>

#include <cstring>

#include "connection_pair.hpp"

namespace metaroce::test {
namespace {

using transport::Mode;
using transport::SendOp;

constexpr transport::Time rto = 2'000'000;       // the perf loopback's floor
constexpr transport::Time stall_end = 3'000'000;  // the receiver runs again
constexpr std::size_t message = 16 * 1024;         // 16 packets of 1 KiB

struct StallOutcome {
  transport::ConnectionCounters sender, receiver;
  bool completed = false;
  bool placed = false;
};

StallOutcome run_stall(Mode mode) {
  transport::ConnectionConfig c = pair_config(mode, 1024, mode == Mode::rocev2 ? 1 : 4, 1);
  c.initial_rto = rto;
  c.min_rto = rto;
  ConnectionPair p(c);
  StallOutcome out;
  EXPECT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, message)), transport::PostResult::ok);
  // Everything arrives at once; the receiver takes it in, then stalls
  // before it can answer.
  ConnectionPair::deliver_all(*p.b, 10'000, p.drain(*p.a, 0));
  // The sender's timer fires during the stall; what it sends then reaches
  // the receiver's queue and waits there with the rest.
  const Frames during = p.drain(*p.a, rto + 500'000);
  // The receiver runs again: it takes in what waited, then answers.
  ConnectionPair::deliver_all(*p.b, stall_end, during);
  ConnectionPair::deliver_all(*p.a, stall_end + 10'000, p.drain(*p.b, stall_end));
  // Whatever else either end has to say, until both are quiet.
  for (transport::Time t = stall_end + 20'000; t < stall_end + 100'000; t += 10'000) {
    ConnectionPair::deliver_all(*p.b, t, p.drain(*p.a, t));
    ConnectionPair::deliver_all(*p.a, t, p.drain(*p.b, t));
  }
  const auto done = ConnectionPair::completions(*p.a);
  out.completed = done.size() == 1 && done[0].wr_id == 1 && done[0].status == transport::CompletionStatus::success;
  out.placed = std::memcmp(p.dst_at(0), p.src.data(), message) == 0 && p.guards_intact();
  out.sender = p.a->counters();
  out.receiver = p.b->counters();
  return out;
}

TEST(ReceiverStall, Rocev2ResendsItsWholeWindowAndEveryPacketIsSpurious) {
  const StallOutcome o = run_stall(Mode::rocev2);
  EXPECT_TRUE(o.completed);
  EXPECT_TRUE(o.placed);
  EXPECT_EQ(o.sender.rto_timeouts, 1u);
  EXPECT_EQ(o.sender.retransmitted_packets, 16u);
  EXPECT_EQ(o.receiver.duplicate_packets, 16u);
  EXPECT_EQ(o.receiver.spurious_retransmissions, 16u);
  EXPECT_EQ(o.receiver.data_bytes_placed, message);
}

TEST(ReceiverStall, MetaroceProbesAndResendsNothing) {
  const StallOutcome o = run_stall(Mode::metaroce);
  EXPECT_TRUE(o.completed);
  EXPECT_TRUE(o.placed);
  EXPECT_GE(o.sender.probes_sent, 1u);
  EXPECT_EQ(o.sender.retransmitted_packets, 0u);
  EXPECT_EQ(o.receiver.duplicate_packets, 0u);
  EXPECT_EQ(o.receiver.spurious_retransmissions, 0u);
  EXPECT_EQ(o.receiver.data_bytes_placed, message);
}

}  // namespace
}  // namespace metaroce::test
