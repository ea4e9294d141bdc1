// Planes on the engine: two engine hosts, each with a port per plane,
// joined by one net_ring pair per plane; connections with two planes move
// WRITEs over both, and a plane whose link goes down (rte_eth_dev_set_link_down)
// is noticed by the hosts' link poll, fails, and its frames go over the
// other plane, without an error completion; back up, it carries data again.
// Both hosts are polled alternately from the test's thread. The same
// through the loopback's inline fabric, one per plane: one plane
// blackholed for a while.
#include <gtest/gtest.h>

#include <rte_ethdev.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/engine_host.hpp"
#include "engine/loopback.hpp"
#include "engine/node.hpp"
#include "engine/port.hpp"
#include "fabric/spec.hpp"
#include "transport/config.hpp"
#include "transport/connection.hpp"

namespace metaroce::engine {
namespace {

constexpr std::uint16_t planes = 2;
constexpr std::size_t messages = 64, len = 64 * 1024;

std::uint64_t opackets(std::uint16_t port_id) {
  rte_eth_stats stats{};
  EXPECT_EQ(rte_eth_stats_get(port_id, &stats), 0);
  return stats.opackets;
}

// Host A (sender) and host B, plane k on ring pair k; one connection each.
// `plane1_port`: the port index A's connection names for plane 1 (1: the
// host's second port; anything else: a port the host lacks).
struct EnginePlanesRig {
  explicit EnginePlanesRig(std::uint16_t plane1_port = 1) {
    static int instance = 0;
    ++instance;
    PortSetup ps;
    ps.mbufs = 2048;
    ps.rx_desc = 1024;
    ps.tx_desc = 1024;
    std::string error;
    for (std::uint16_t k = 0; k < planes; ++k) {
      std::unique_ptr<Port> a, b;
      EXPECT_TRUE(Port::create_ring_pair(fmt::format("pl{}a{}", instance, k), fmt::format("pl{}b{}", instance, k),
                                         ps, a, b, error))
          << error;
      EXPECT_TRUE(a->start(error)) << error;
      EXPECT_TRUE(b->start(error)) << error;
      ports_a.push_back(std::move(a));
      ports_b.push_back(std::move(b));
    }
    EngineHostConfig ha;
    ha.name = fmt::format("pl{}ha", instance);
    ha.port_id = ports_a[0]->id();
    ha.more_ports = {EnginePortQueue{ports_a[1]->id(), 0}};
    ha.tx_mbufs = 8192;
    EngineHostConfig hb = ha;
    hb.name = fmt::format("pl{}hb", instance);
    hb.port_id = ports_b[0]->id();
    hb.more_ports = {EnginePortQueue{ports_b[1]->id(), 0}};
    host_a = EngineHost::create(ha, error);
    EXPECT_TRUE(host_a) << error;
    host_b = EngineHost::create(hb, error);
    EXPECT_TRUE(host_b) << error;

    src.resize(messages * len);
    dst.assign(messages * len, 0);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + 3);
    lkey = host_a->memory().register_region(src.data(), src.size(), transport::access_local_write);
    rkey = host_b->memory().register_region(dst.data(), dst.size(),
                                            transport::access_local_write | transport::access_remote_write);

    transport::ConnectionConfig ca;
    ca.mtu = 4096;
    ca.paths = 8;
    ca.planes = planes;
    ca.ack_every_packets = 4;
    ca.ack_delay = 4'000;
    ca.max_rto = 1'000'000;
    for (std::uint16_t k = 0; k < planes; ++k) {
      transport::PlaneAddresses& p = ca.plane[k];
      p.port = k;
      p.local_mac = {2, 0, 0, 0, static_cast<std::uint8_t>(k), 1};
      p.peer_mac = {2, 0, 0, 0, static_cast<std::uint8_t>(k), 2};
      p.local_ipv4 = 0x0a000001u + (static_cast<std::uint32_t>(k) << 8);
      p.peer_ipv4 = 0x0a000002u + (static_cast<std::uint32_t>(k) << 8);
    }
    ca.endpoints.local_mac = ca.plane[0].local_mac;
    ca.endpoints.peer_mac = ca.plane[0].peer_mac;
    ca.endpoints.local_ipv4 = ca.plane[0].local_ipv4;
    ca.endpoints.peer_ipv4 = ca.plane[0].peer_ipv4;
    ca.local_qpn = 0x11;
    ca.peer_qpn = 0x22;
    transport::ConnectionConfig cb = ca;
    for (auto& p : cb.plane) {
      std::swap(p.local_mac, p.peer_mac);
      std::swap(p.local_ipv4, p.peer_ipv4);
    }
    std::swap(cb.endpoints.local_mac, cb.endpoints.peer_mac);
    std::swap(cb.endpoints.local_ipv4, cb.endpoints.peer_ipv4);
    std::swap(cb.local_qpn, cb.peer_qpn);
    cb.base_src_port = 50000;
    ca.plane[1].port = plane1_port;
    sender = host_a->add_connection(ca, nullptr, error);
    EXPECT_NE(sender, nullptr) << error;
    receiver = host_b->add_connection(cb, nullptr, error);
    EXPECT_NE(receiver, nullptr) << error;
    sender->connect();
    receiver->connect();
  }

  ~EnginePlanesRig() {
    for (auto& p : ports_a) p->drain_rx();
    for (auto& p : ports_b) p->drain_rx();
    host_a.reset();
    host_b.reset();
    for (auto& p : ports_a) p->drain_rx();
    for (auto& p : ports_b) p->drain_rx();
  }

  void post(std::uint64_t first_id, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      transport::SendRequest r;
      r.wr_id = first_id + i;
      r.local_addr = src.data() + i * len;
      r.length = len;
      r.lkey = lkey;
      r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + i * len);
      r.rkey = rkey;
      ASSERT_EQ(sender->post_send(r), transport::PostResult::ok);
    }
  }
  void turn() {
    host_a->poll_once();
    host_b->poll_once();
  }
  // Turns until `done()` or `limit` of wall time passes.
  template <class F>
  bool run_until(F&& done, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      turn();
      if (done()) return true;
    }
    return false;
  }
  bool complete(std::size_t n) {
    return run_until([&] { sender->poll_completions(completions); return completions.size() >= n; },
                     std::chrono::seconds(20));
  }
  void expect_each_completed_once(std::uint64_t first, std::size_t n) {
    ASSERT_EQ(completions.size(), n);
    std::vector<int> seen(n, 0);
    for (const auto& c : completions) {
      EXPECT_EQ(c.status, transport::CompletionStatus::success);
      ASSERT_GE(c.wr_id, first);
      ASSERT_LT(c.wr_id - first, n);
      ++seen[c.wr_id - first];
    }
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "message " << first + i;
    completions.clear();
  }
  // Every frame A's host counts as sent left through one of its ports.
  void expect_tx_frames_are_the_ports_opackets() {
    EXPECT_EQ(host_a->counters().tx_frames, opackets(ports_a[0]->id()) + opackets(ports_a[1]->id()));
    EXPECT_EQ(host_b->counters().tx_frames, opackets(ports_b[0]->id()) + opackets(ports_b[1]->id()));
  }

  std::vector<std::unique_ptr<Port>> ports_a, ports_b;
  std::unique_ptr<EngineHost> host_a, host_b;
  std::vector<std::uint8_t> src, dst;
  std::uint32_t lkey = 0, rkey = 0;
  transport::Connection* sender = nullptr;
  transport::Connection* receiver = nullptr;
  std::vector<transport::Completion> completions;
};

TEST(EnginePlanes, WritesSprayOverEveryPortAndPlaceExactBytes) {
  EnginePlanesRig rig;
  ASSERT_EQ(rig.host_a->ports(), 2);
  rig.post(1, messages);
  ASSERT_TRUE(rig.complete(messages));
  rig.expect_each_completed_once(1, messages);
  EXPECT_EQ(rig.dst, rig.src);
  EXPECT_EQ(rig.receiver->counters().data_bytes_placed, messages * len);
  for (std::uint16_t k = 0; k < planes; ++k) {
    EXPECT_GT(rig.sender->plane_info(k).data_packets, 0u) << "plane " << k;
    EXPECT_GT(opackets(rig.ports_a[k]->id()), 0u) << "port " << k;
  }
  EXPECT_GT(opackets(rig.ports_b[0]->id()) + opackets(rig.ports_b[1]->id()), 0u);  // acknowledgements
  rig.expect_tx_frames_are_the_ports_opackets();
  EXPECT_EQ(rig.sender->counters().planes_failed, 0u);
  EXPECT_EQ(rig.host_a->counters().link_changes, 0u);
  EXPECT_EQ(rig.host_a->counters().tx_no_such_port, 0u);
  EXPECT_EQ(rig.host_a->counters().tx_dropped_link_down, 0u);
}

TEST(EnginePlanes, LinkDownMidTransferFailsThePlaneAndItComesBackWhenUp) {
  EnginePlanesRig rig;
  rig.post(1, messages);
  ASSERT_TRUE(rig.run_until([&] { return rig.receiver->counters().data_bytes_placed >= 512 * 1024; },
                            std::chrono::seconds(10)));
  ASSERT_LT(rig.receiver->counters().data_bytes_placed, messages * len) << "the transfer ended too early";
  // The cable of plane 1 is pulled: both ends see their link down.
  const auto cut = std::chrono::steady_clock::now();
  ASSERT_EQ(rte_eth_dev_set_link_down(rig.ports_a[1]->id()), 0);
  ASSERT_EQ(rte_eth_dev_set_link_down(rig.ports_b[1]->id()), 0);
  ASSERT_TRUE(rig.run_until([&] { return rig.host_a->counters().link_changes == 1 && rig.host_b->counters().link_changes == 1; },
                            std::chrono::milliseconds(100)))
      << "link down not noticed within 100 ms";
  const auto noticed = std::chrono::steady_clock::now() - cut;
  EXPECT_LT(noticed, std::chrono::milliseconds(50));
  EXPECT_FALSE(rig.host_a->port_link_up(1));
  EXPECT_TRUE(rig.host_a->port_link_up(0));
  EXPECT_EQ(rig.sender->counters().planes_failed, 1u);
  EXPECT_EQ(rig.receiver->counters().planes_failed, 1u);
  EXPECT_TRUE(rig.sender->plane_info(1).link_down);
  const std::uint64_t port1_out = opackets(rig.ports_a[1]->id());
  const std::uint64_t plane1_down = rig.sender->plane_info(1).data_packets;

  ASSERT_TRUE(rig.complete(messages));
  rig.expect_each_completed_once(1, messages);
  EXPECT_EQ(rig.dst, rig.src);
  EXPECT_EQ(rig.receiver->counters().data_bytes_placed, messages * len);
  EXPECT_EQ(opackets(rig.ports_a[1]->id()), port1_out) << "frames left through a port whose link is down";
  EXPECT_EQ(rig.sender->plane_info(1).data_packets, plane1_down) << "data sent on a plane whose link is down";
  rig.expect_tx_frames_are_the_ports_opackets();
  EXPECT_EQ(rig.host_a->counters().tx_no_such_port, 0u);
  EXPECT_EQ(rig.sender->counters().planes_recovered, 0u);
  const std::uint64_t dropped_down = rig.host_a->counters().tx_dropped_link_down;
  std::printf("plane 1 down after %.1f ms: %llu packets moved to plane 0, %llu frames dropped at the down port\n",
              std::chrono::duration<double, std::milli>(noticed).count(),
              static_cast<unsigned long long>(rig.sender->counters().packets_moved_to_other_planes),
              static_cast<unsigned long long>(dropped_down));

  // Plugged back in: noticed, probes answered, the plane carries data again.
  const std::uint64_t plane1 = rig.sender->plane_info(1).data_packets;
  ASSERT_EQ(rte_eth_dev_set_link_up(rig.ports_a[1]->id()), 0);
  ASSERT_EQ(rte_eth_dev_set_link_up(rig.ports_b[1]->id()), 0);
  ASSERT_TRUE(rig.run_until([&] { return rig.sender->counters().planes_recovered == 1; }, std::chrono::seconds(2)))
      << "plane 1 not back in use";
  EXPECT_EQ(rig.host_a->counters().link_changes, 2u);
  EXPECT_TRUE(rig.host_a->port_link_up(1));
  // Until the poll saw the link back, the plane's probes were dropped at the port; no more since.
  EXPECT_GE(rig.host_a->counters().tx_dropped_link_down, dropped_down);
  const std::uint64_t dropped_up = rig.host_a->counters().tx_dropped_link_down;
  rig.post(100, 8);
  ASSERT_TRUE(rig.complete(8));
  rig.expect_each_completed_once(100, 8);
  EXPECT_GT(rig.sender->plane_info(1).data_packets, plane1);
  EXPECT_GT(opackets(rig.ports_a[1]->id()), port1_out);
  EXPECT_EQ(rig.host_a->counters().tx_dropped_link_down, dropped_up);
  EXPECT_EQ(rig.receiver->counters().planes_failed, 1u);
  rig.expect_tx_frames_are_the_ports_opackets();
}

// Plane 1's port on the sender stopped mid-transfer (rte_eth_dev_stop: its
// burst functions become dummies and net_ring reports the link down) and
// started again: the same as a cable pulled and plugged back, on that
// host alone. The plane fails at the sender only, exactly its packets in
// flight are resent on plane 0, nothing more leaves through the stopped
// port, every WRITE completes once with its bytes placed; once started
// the plane is back in use.
TEST(EnginePlanes, PortStoppedAndStartedFailsThePlaneAndBringsItBack) {
  EnginePlanesRig rig;
  rig.post(1, messages);
  ASSERT_TRUE(rig.run_until([&] { return rig.receiver->counters().data_bytes_placed >= 512 * 1024; },
                            std::chrono::seconds(10)));
  ASSERT_LT(rig.receiver->counters().data_bytes_placed, messages * len) << "the transfer ended too early";
  // Stopped right after a turn of A's and read at once (as the 10 ms poll
  // would): exactly the packets in flight on plane 1's paths move.
  std::uint64_t in_flight_1 = 0;
  for (int tries = 0; tries < 1000 && in_flight_1 == 0; ++tries) {
    rig.turn();
    rig.host_a->poll_once();
    in_flight_1 = 0;
    for (std::uint16_t p = 1; p < 8; p += 2) in_flight_1 += rig.sender->path_info(p).in_flight;
  }
  ASSERT_GT(in_flight_1, 0u) << "nothing in flight on plane 1";
  ASSERT_TRUE(rig.ports_a[1]->stop());
  rig.host_a->poll_links(rig.host_a->now_ns());
  EXPECT_EQ(rig.host_a->counters().link_changes, 1u) << "the stopped port's link not read as down";
  EXPECT_FALSE(rig.host_a->port_link_up(1));
  EXPECT_EQ(rig.sender->counters().planes_failed, 1u);
  EXPECT_EQ(rig.sender->counters().packets_moved_to_other_planes, in_flight_1);
  EXPECT_TRUE(rig.sender->plane_info(1).link_down);
  const std::uint64_t port1_out = opackets(rig.ports_a[1]->id());
  const std::uint64_t plane1_down = rig.sender->plane_info(1).data_packets;
  ASSERT_TRUE(rig.complete(messages));
  rig.expect_each_completed_once(1, messages);
  EXPECT_EQ(rig.dst, rig.src);
  EXPECT_EQ(rig.receiver->counters().data_bytes_placed, messages * len);
  EXPECT_EQ(opackets(rig.ports_a[1]->id()), port1_out) << "frames left through a stopped port";
  EXPECT_EQ(rig.sender->plane_info(1).data_packets, plane1_down) << "data sent on a plane whose port is stopped";
  EXPECT_EQ(rig.host_b->counters().link_changes, 0u) << "the receiver's ports never changed";
  EXPECT_EQ(rig.receiver->counters().planes_failed, 0u);

  std::string error;
  ASSERT_TRUE(rig.ports_a[1]->start(error)) << error;
  // Plane 1 itself back (the counters count every plane, and on a loaded
  // machine a scheduling stall can fail and bring back plane 0 as well).
  ASSERT_TRUE(rig.run_until(
      [&] { return rig.host_a->port_link_up(1) && rig.sender->plane_info(1).state == transport::PlaneState::active; },
      std::chrono::seconds(2)))
      << "plane 1 not back in use after its port started";
  EXPECT_EQ(rig.host_a->counters().link_changes, 2u);
  const std::uint64_t plane1 = rig.sender->plane_info(1).data_packets;
  rig.post(100, 8);
  ASSERT_TRUE(rig.complete(8));
  rig.expect_each_completed_once(100, 8);
  EXPECT_GT(rig.sender->plane_info(1).data_packets, plane1);
  EXPECT_GT(opackets(rig.ports_a[1]->id()), port1_out);
  EXPECT_EQ(rig.sender->plane_info(1).failures, 1u);
}

// The link goes down right after A's turn, and A reads it before B has
// acknowledged anything of that turn (poll_links, as the 10 ms poll does):
// exactly the packets in flight on plane 1's paths are resent on plane 0,
// and each WRITE still completes once (B takes the copies still in the
// ring as duplicates).
TEST(EnginePlanes, LinkDownMovesExactlyThePlanesPacketsInFlight) {
  EnginePlanesRig rig;
  rig.post(1, messages);
  ASSERT_TRUE(rig.run_until([&] { return rig.receiver->counters().data_bytes_placed >= 512 * 1024; },
                            std::chrono::seconds(10)));
  std::uint64_t in_flight_1 = 0;
  for (int tries = 0; tries < 1000 && in_flight_1 == 0; ++tries) {
    rig.turn();
    rig.host_a->poll_once();
    in_flight_1 = 0;
    for (std::uint16_t p = 1; p < 8; p += 2) in_flight_1 += rig.sender->path_info(p).in_flight;
  }
  ASSERT_GT(in_flight_1, 0u) << "nothing in flight on plane 1";
  ASSERT_EQ(rte_eth_dev_set_link_down(rig.ports_a[1]->id()), 0);
  ASSERT_EQ(rte_eth_dev_set_link_down(rig.ports_b[1]->id()), 0);
  rig.host_a->poll_links(rig.host_a->now_ns());
  EXPECT_EQ(rig.host_a->counters().link_changes, 1u);
  EXPECT_EQ(rig.sender->counters().planes_failed, 1u);
  EXPECT_EQ(rig.sender->counters().packets_moved_to_other_planes, in_flight_1);
  rig.host_b->poll_links(rig.host_b->now_ns());
  EXPECT_EQ(rig.receiver->counters().planes_failed, 1u);
  ASSERT_TRUE(rig.complete(messages));
  rig.expect_each_completed_once(1, messages);
  EXPECT_EQ(rig.dst, rig.src);
  EXPECT_EQ(rig.receiver->counters().data_bytes_placed, messages * len);
  EXPECT_EQ(rig.host_b->counters().link_changes, 1u);
  rig.expect_tx_frames_are_the_ports_opackets();
  ASSERT_EQ(rte_eth_dev_set_link_up(rig.ports_a[1]->id()), 0);
  ASSERT_EQ(rte_eth_dev_set_link_up(rig.ports_b[1]->id()), 0);
}

// A connection whose plane 1 names port index 5 on a host of two ports:
// those frames are dropped and counted, plane 1's paths fail, and
// everything completes over plane 0.
TEST(EnginePlanes, PortIndexTheHostLacksIsDroppedAndCounted) {
  EnginePlanesRig rig(5);
  rig.post(1, 8);
  ASSERT_TRUE(rig.complete(8));
  rig.expect_each_completed_once(1, 8);
  EXPECT_EQ(rig.receiver->counters().data_bytes_placed, 8 * len);
  EXPECT_GT(rig.host_a->counters().tx_no_such_port, 0u);
  EXPECT_EQ(rig.host_b->counters().tx_no_such_port, 0u);
  EXPECT_EQ(opackets(rig.ports_a[1]->id()), 0u);
  rig.expect_tx_frames_are_the_ports_opackets();
}

// A node's lcores each drive a queue of one port: ports per plane are for
// a node of one lcore, and a node of several says so.
TEST(EnginePlanes, NodeOfSeveralLcoresRefusesPortsPerPlane) {
  NodeConfig nc;
  nc.name = "planes2";
  nc.lcores = 2;
  nc.hosts.more_ports = {EnginePortQueue{1, 0}};
  std::string error;
  EXPECT_EQ(Node::create(nc, error), nullptr);
  EXPECT_EQ(error, "node 'planes2': several lcores drive one port each; a port per plane (hosts.more_ports) needs one lcore");
}

// The loopback with planes and an inline fabric of its own per plane: a
// spec for every plane and one for plane 1 alone.
LoopbackConfig plane_loopback_config(const char* plane1_spec) {
  LoopbackConfig c;
  c.connection.mtu = 4096;
  c.connection.paths = 8;
  // Both hosts turn on this thread: RTOs above a scheduling stall of the
  // shared machine, so only the blackhole fails paths.
  c.connection.initial_rto = 10'000'000;
  c.connection.min_rto = 10'000'000;
  c.connection.retry_limit = 50;
  c.planes = 2;
  c.hosts.tx_mbufs = 8192;
  c.ports.rx_desc = 256;
  c.ports.tx_desc = 256;
  c.forward = fabric::parse_fabric_spec_or_throw("delay 20us");
  c.backward = c.forward;
  LoopbackConfig::PlaneFabric pf;
  pf.plane = 1;
  pf.forward = fabric::parse_fabric_spec_or_throw(plane1_spec);
  pf.backward = pf.forward;
  c.plane_fabrics.push_back(pf);
  return c;
}

TEST(LoopbackPlanes, EveryPlaneHasLinksOfItsOwnWithItsOwnFabric) {
  std::string error;
  auto lb = Loopback::create(plane_loopback_config("loss 1%"), error);
  ASSERT_TRUE(lb) << error;
  ASSERT_EQ(lb->planes(), 2);
  for (std::uint16_t k = 0; k < 2; ++k) {
    ASSERT_NE(lb->forward_link(k), nullptr);
    ASSERT_NE(lb->backward_link(k), nullptr);
    EXPECT_EQ(lb->forward_link(k)->fabric_config().delay_ns, k == 0 ? 20'000u : 0u);
    EXPECT_EQ(lb->backward_link(k)->fabric_config().loss, k == 0 ? 0.0 : 0.01);
  }
  // Plane 1 draws from its own seeds, each way apart.
  EXPECT_NE(lb->forward_link(1)->fabric_config().seed, lb->backward_link(1)->fabric_config().seed);
  EXPECT_NE(lb->forward_link(0)->fabric_config().seed, lb->forward_link(1)->fabric_config().seed);

  LoopbackConfig bad = plane_loopback_config("loss 1%");
  bad.plane_fabrics[0].plane = 2;
  EXPECT_EQ(Loopback::create(bad, error), nullptr);
  EXPECT_EQ(error, "a fabric for plane 2, but the planes are 0..1");
}

// Plane 1's fabric drops everything from 300 ms for 400 ms (both ways)
// while 64 KiB WRITEs keep flowing: plane 1 fails once, the packets in
// flight on its last working path go to plane 0, it carries no data while
// failed, every WRITE completes once with its bytes placed, and once the
// blackhole ends a probe brings plane 1 back and it carries data again.
TEST(LoopbackPlanes, BlackholedPlaneFailsAndComesBackWithoutAnErrorCompletion) {
  std::string error;
  auto lb = Loopback::create(plane_loopback_config("blackhole at 300ms for 400ms"), error);
  ASSERT_TRUE(lb) << error;
  constexpr std::size_t slots = 32, size = 64 * 1024;
  std::vector<std::uint8_t> src(slots * size), dst(slots * size, 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 13 + 5);
  EngineHost& a = lb->host_a();
  const std::uint32_t lkey = a.memory().register_region(src.data(), src.size(), transport::access_local_write);
  const std::uint32_t rkey = lb->host_b().memory().register_region(
      dst.data(), dst.size(), transport::access_local_write | transport::access_remote_write);
  transport::Connection& sender = lb->connection_a();
  transport::Connection& receiver = lb->connection_b();
  std::uint64_t posted = 0, completed = 0;
  const auto post = [&](std::uint64_t id) {
    transport::SendRequest r;
    r.wr_id = id;
    r.local_addr = src.data() + (id % slots) * size;
    r.length = size;
    r.lkey = lkey;
    r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + (id % slots) * size);
    r.rkey = rkey;
    ASSERT_EQ(sender.post_send(r), transport::PostResult::ok);
    ++posted;
  };
  for (std::uint64_t i = 0; i < slots; ++i) post(i);
  const auto plane1_in_flight = [&](std::vector<transport::PathInfo>& out) {
    out.clear();
    for (std::uint16_t p = 1; p < 8; p += 2) out.push_back(sender.path_info(p));
  };
  std::vector<transport::PathInfo> before, after;
  std::vector<transport::Completion> got;
  std::uint64_t failed_at = 0, recovered_at = 0, plane1_at_failure = 0;
  std::uint64_t plane1_data_while_failed = 0;
  std::vector<std::uint64_t> moved_candidates;
  std::vector<int> seen(std::size_t{1} << 20, 0);
  const std::uint64_t stop_posting_ns = 1'200'000'000;
  while (a.now_ns() < stop_posting_ns + 2'000'000'000 && completed < posted) {
    plane1_in_flight(before);
    lb->poll_side_a();
    lb->poll_side_b();
    if (failed_at == 0 && sender.counters().planes_failed == 1) {
      failed_at = a.now_ns();
      plane1_at_failure = sender.plane_info(1).data_packets;
      // The paths of plane 1 that failed in this turn (their RTOs fire
      // together): the last of them took the plane down, and the packets
      // it had in flight are the ones moved to plane 0 (the others' were
      // resent on the paths still working then).
      plane1_in_flight(after);
      for (std::size_t i = 0; i < before.size(); ++i)
        if (before[i].state == transport::PathState::active && after[i].state == transport::PathState::failed)
          moved_candidates.push_back(before[i].in_flight);
    }
    if (failed_at != 0 && recovered_at == 0) {
      if (sender.counters().planes_recovered == 1) recovered_at = a.now_ns();
      else plane1_data_while_failed = sender.plane_info(1).data_packets;
    }
    sender.poll_completions(got);
    for (const auto& c : got) {
      ASSERT_EQ(c.status, transport::CompletionStatus::success) << "WRITE " << c.wr_id;
      ASSERT_LT(c.wr_id, seen.size());
      ++seen[c.wr_id];
      ++completed;
      if (a.now_ns() < stop_posting_ns && posted < seen.size()) post(posted);
    }
    got.clear();
  }
  ASSERT_EQ(completed, posted) << "WRITEs left incomplete";
  for (std::uint64_t i = 0; i < posted; ++i) EXPECT_EQ(seen[i], 1) << "WRITE " << i;
  EXPECT_EQ(dst, src);
  EXPECT_EQ(receiver.counters().data_bytes_placed, posted * size);
  ASSERT_GT(posted, 2 * slots) << "too few WRITEs to cover the blackhole";

  EXPECT_EQ(sender.counters().planes_failed, 1u);
  EXPECT_EQ(sender.counters().planes_recovered, 1u);
  EXPECT_EQ(sender.plane_info(0).failures, 0u);
  EXPECT_EQ(sender.plane_info(1).failures, 1u);
  EXPECT_EQ(sender.plane_info(1).state, transport::PlaneState::active);
  EXPECT_GE(failed_at, 300'000'000u);
  EXPECT_LT(failed_at, 700'000'000u) << "plane 1 failed only after the blackhole";
  EXPECT_GE(recovered_at, 700'000'000u) << "plane 1 recovered inside the blackhole";
  EXPECT_LT(recovered_at, 1'200'000'000u);
  const std::uint64_t moved = sender.counters().packets_moved_to_other_planes;
  ASSERT_FALSE(moved_candidates.empty()) << "plane 1 failed without a path of it failing";
  EXPECT_NE(std::find(moved_candidates.begin(), moved_candidates.end(), moved), moved_candidates.end())
      << moved << " packets moved: not what a path that failed then had in flight";
  EXPECT_GT(moved, 0u);
  EXPECT_EQ(plane1_data_while_failed, plane1_at_failure) << "data sent on a failed plane";
  EXPECT_GT(sender.plane_info(1).data_packets, plane1_at_failure) << "plane 1 carried nothing once back";
  // Plane 0's links dropped nothing; plane 1's only in the blackhole.
  EXPECT_EQ(lb->forward_link(0)->fabric_counters().dropped(), 0u);
  EXPECT_EQ(lb->backward_link(0)->fabric_counters().dropped(), 0u);
  const auto& f1 = lb->forward_link(1)->fabric_counters();
  EXPECT_GT(f1.dropped_blackhole, 0u);
  EXPECT_EQ(f1.dropped(), f1.dropped_blackhole);
  std::printf("plane 1 failed %.1f ms into the blackhole, back %.1f ms after it; %llu packets moved to plane 0%s, "
              "%llu WRITEs\n",
              double(failed_at - 300'000'000) / 1e6, double(recovered_at - 700'000'000) / 1e6,
              static_cast<unsigned long long>(sender.counters().packets_moved_to_other_planes),
              fmt::format(" (what its last path had in flight; {} of its paths failed in that turn)",
                          moved_candidates.size()).c_str(),
              static_cast<unsigned long long>(posted));
}

}  // namespace
}  // namespace metaroce::engine
