// metaroce ACKs take as many routes as the data: each ACK leaves from the
// source port of the path it leads with, the paths in turn, and a route
// that a probe shows dead moves to a new source port. Driven by hand over a wire with a
// fixed delay, in virtual time; a route is a UDP source port, so "the
// route is dead" is "every frame from that port is dropped".
#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "connection_pair.hpp"
#include "timer/wheel.hpp"
#include "transport/connection.hpp"
#include "wire/frame.hpp"

namespace {

using namespace metaroce;
using namespace metaroce::transport;

constexpr Time link_delay = 1'000;

struct Pair : test::ConnectionPair {
  explicit Pair(std::uint16_t paths) : ConnectionPair(test::pair_config(Mode::metaroce, 1024, paths, 1)) {}
};

// Frames in flight between A and B, each arriving link_delay after it was
// sent. `drop_b` decides which of B's frames the network loses.
struct Wire {
  struct InFlight {
    Time at;
    bool to_b;
    std::vector<std::uint8_t> frame;
  };
  explicit Wire(Pair& pair) : p(pair) {}
  Pair& p;
  std::function<bool(const wire::ParsedFrame&)> drop_b = [](const wire::ParsedFrame&) { return false; };
  std::deque<InFlight> flight;  // in order of arrival (one delay for all)
  std::map<std::uint16_t, std::uint32_t> b_ack_ports;  // ACKs B sent, by UDP source port
  std::uint32_t b_dropped = 0;
  Time now = 0;

  void send(Time t) {
    for (auto& f : p.drain(*p.a, t)) flight.push_back({t + link_delay, true, std::move(f)});
    for (auto& f : p.drain(*p.b, t)) {
      const wire::ParsedFrame parsed = Pair::parse(f);
      if (parsed.bth.opcode == wire::opcode::mr_ack) ++b_ack_ports[parsed.udp_src_port];
      if (drop_b(parsed)) {
        ++b_dropped;
        continue;
      }
      flight.push_back({t + link_delay, false, std::move(f)});
    }
  }
  // Runs until A has `completions` completions or nothing is left to do.
  std::vector<Completion> run(std::size_t completions, Time limit) {
    std::vector<Completion> cq;
    send(now);
    while (cq.size() < completions && now < limit) {
      Time next = std::min(p.wheel_a.next_deadline(), p.wheel_b.next_deadline());
      if (!flight.empty()) next = std::min(next, flight.front().at);
      if (next == timer::kNever) break;
      now = std::max(now, next);
      while (!flight.empty() && flight.front().at <= now) {
        InFlight f = std::move(flight.front());
        flight.pop_front();
        Pair::deliver(f.to_b ? *p.b : *p.a, now, f.frame);
      }
      send(now);
      p.a->poll_completions(cq);
    }
    return cq;
  }
};

// Eight 4 KiB WRITEs over 4 paths, one at a time: each message's last
// packet asks for an ACK, so B sends one ACK per message (coalescing is
// out of reach in the pair). The ACKs lead with the paths in turn: two
// from each of B's four source ports, none from one port only.
TEST(AckRoutes, AcksSpreadOverThePathsSourcePorts) {
  Pair p(4);
  Wire w(p);
  for (std::uint64_t id = 1; id <= 8; ++id) {
    ASSERT_EQ(p.a->post_send(p.request(SendOp::write, id, (id - 1) * 4096, 4096)), PostResult::ok);
    const std::vector<Completion> cq = w.run(1, w.now + 1'000'000);
    ASSERT_EQ(cq.size(), 1u);
    EXPECT_EQ(cq[0].status, CompletionStatus::success);
  }
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 8 * 4096), 0);
  EXPECT_EQ(p.b->counters().acks_sent, 8u);
  EXPECT_EQ(w.b_ack_ports, (std::map<std::uint16_t, std::uint32_t>{{50000, 2}, {50001, 2}, {50002, 2}, {50003, 2}}));
  EXPECT_EQ(p.b->counters().ack_routes_moved, 0u);
  EXPECT_EQ(p.a->counters().rto_timeouts, 0u);
  EXPECT_EQ(p.a->counters().retransmitted_packets, 0u);
}

// The route of B's first path dies for everything B sends from its port
// (50000) while every data route works. A loses the ACKs that took it; its
// tail probe comes back in order, B moves that path to a new source port
// and answers on another route. Every WRITE completes, nothing is failed, nothing is resent:
// the data was never lost. (With every ACK from one port, this route
// carrying all of them, the connection ended in retry_exceeded.)
TEST(AckRoutes, ADeadAckRouteDoesNotFailAConnectionWhoseDataRoutesWork) {
  Pair p(4);
  Wire w(p);
  w.drop_b = [](const wire::ParsedFrame& f) { return f.udp_src_port == test::ConnectionPair::src_port_b; };
  for (std::uint64_t id = 1; id <= 8; ++id) {
    ASSERT_EQ(p.a->post_send(p.request(SendOp::write, id, (id - 1) * 4096, 4096)), PostResult::ok);
    const std::vector<Completion> cq = w.run(1, w.now + 100'000'000);
    ASSERT_EQ(cq.size(), 1u) << "message " << id;
    EXPECT_EQ(cq[0].status, CompletionStatus::success);
    EXPECT_EQ(cq[0].wr_id, id);
  }
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 8 * 4096), 0);
  EXPECT_EQ(p.a->state(), ConnectionState::ready);
  EXPECT_EQ(p.b->state(), ConnectionState::ready);
  // The first ACK took the dead route; A's tail probe came back in order,
  // so B moved its path 0 to a new source port (as a failed path moves:
  // 49152 + the path's mix for round 1) and answered the probe on path 1's
  // route. From then on the ACKs take the four routes in turn, the new one
  // included: 9 ACKs (8 messages and the probe).
  EXPECT_EQ(w.b_ack_ports,
            (std::map<std::uint16_t, std::uint32_t>{{50000, 1}, {50001, 2}, {50002, 2}, {50003, 2}, {56888, 2}}));
  EXPECT_EQ(w.b_dropped, 1u);
  EXPECT_EQ(p.b->counters().acks_sent, 9u);
  EXPECT_EQ(p.b->counters().ack_routes_moved, 1u);
  EXPECT_EQ(p.b->path_info(0).src_port, 56888u);
  // One probe per path of the first message, on its first timeout.
  EXPECT_EQ(p.a->counters().probes_sent, 4u);
  EXPECT_EQ(p.a->counters().rto_timeouts, 4u);
  EXPECT_EQ(p.a->counters().paths_failed, 0u);
  EXPECT_EQ(p.a->counters().retransmitted_packets, 0u);
  EXPECT_EQ(p.b->counters().data_bytes_placed, 8u * 4096u);
  EXPECT_EQ(p.b->counters().duplicate_packets, 0u);
}

}  // namespace
