// Planes over sim::Fabric: hosts with one port per plane
// (host::MultiportSimEndpoint), each plane a leaf-spine of its own
// (sim::multiplane_leaf_spine), one metaroce connection spraying its paths
// over every plane, and a whole plane failing in the middle of a transfer.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "host/sim_endpoint.hpp"
#include "sim/fabric_network.hpp"
#include "sim/fabric_topology.hpp"
#include "sim/topology.hpp"

namespace metaroce::test {
namespace {

// 2 leaves of 2 hosts and 2 spines per plane, 100 Gb/s everywhere, 1 us
// per link. Host 0 (leaf 0) writes `bytes` to host 2 (leaf 1) over one
// connection of 2 paths per plane. NIC ring 128 frames, budget 64.
struct FabricPlanes {
  static constexpr std::uint32_t hosts = 4;
  static constexpr std::size_t len = 256 * 1024;

  FabricPlanes(std::uint16_t planes, std::size_t bytes) : planes(planes), messages(bytes / len) {
    host::HostConfig hc;
    hc.tx_budget_frames = 64;
    for (std::uint32_t h = 0; h < hosts; ++h) endpoints.push_back(std::make_unique<host::MultiportSimEndpoint>(planes, hc));
    std::vector<sim::Endpoint*> ports;
    for (std::uint16_t p = 0; p < planes; ++p) {
      for (std::uint32_t h = 0; h < hosts; ++h) ports.push_back(&endpoints[h]->port(p));
    }
    sim::MultiplaneLeafSpineConfig mc;
    mc.planes = planes;
    mc.plane.leaves = 2;
    mc.plane.spines = 2;
    mc.plane.hosts_per_leaf = 2;
    mc.plane.host_link.delay_ns = 1'000;
    mc.plane.spine_link.delay_ns = 1'000;
    topology = sim::multiplane_leaf_spine(net, ports, mc);
    net.set_nic_ring(128);

    src.resize(messages * len);
    dst.assign(messages * len, 0);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + 3);
    host::MultiportSimEndpoint& a = *endpoints[0];
    host::MultiportSimEndpoint& b = *endpoints[2];
    lkey = a.memory().register_region(src.data(), src.size(), transport::access_local_write);
    rkey = b.memory().register_region(dst.data(), dst.size(), transport::access_local_write | transport::access_remote_write);
    transport::ConnectionConfig ca;
    ca.mtu = 4096;
    ca.planes = planes;
    ca.paths = static_cast<std::uint16_t>(2 * planes);
    ca.max_rto = 1'000'000;
    for (std::uint16_t p = 0; p < planes; ++p) {
      const sim::HostAddress local = sim::numbered_host_address(p * hosts + 0);
      const sim::HostAddress peer = sim::numbered_host_address(p * hosts + 2);
      ca.plane[p].port = p;
      ca.plane[p].local_mac = local.mac;
      ca.plane[p].peer_mac = peer.mac;
      ca.plane[p].local_ipv4 = local.ipv4;
      ca.plane[p].peer_ipv4 = peer.ipv4;
    }
    ca.endpoints.local_mac = ca.plane[0].local_mac;
    ca.endpoints.peer_mac = ca.plane[0].peer_mac;
    ca.endpoints.local_ipv4 = ca.plane[0].local_ipv4;
    ca.endpoints.peer_ipv4 = ca.plane[0].peer_ipv4;
    ca.local_qpn = 0x11;
    ca.peer_qpn = 0x22;
    transport::ConnectionConfig cb = ca;
    for (auto& pa : cb.plane) {
      std::swap(pa.local_mac, pa.peer_mac);
      std::swap(pa.local_ipv4, pa.peer_ipv4);
    }
    std::swap(cb.endpoints.local_mac, cb.endpoints.peer_mac);
    std::swap(cb.endpoints.local_ipv4, cb.endpoints.peer_ipv4);
    std::swap(cb.local_qpn, cb.peer_qpn);
    cb.base_src_port = 50000;
    sender = &a.add(ca);
    receiver = &b.add(cb);
    sender->connect();
    receiver->connect();
  }

  void post() {
    for (std::size_t i = 0; i < messages; ++i) {
      transport::SendRequest r;
      r.wr_id = i + 1;
      r.local_addr = src.data() + i * len;
      r.length = len;
      r.lkey = lkey;
      r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + i * len);
      r.rkey = rkey;
      ASSERT_EQ(sender->post_send(r), transport::PostResult::ok);
    }
    net.wake(topology.port(0, 0));
  }
  // Runs to `t`, collecting completions.
  void run_to(std::uint64_t t) {
    net.run_until([&] { sender->poll_completions(done); return false; }, t);
  }
  bool complete(std::uint64_t limit_ns) {
    return net.run_until([&] { sender->poll_completions(done); return done.size() >= messages; }, limit_ns);
  }
  [[nodiscard]] std::uint64_t placed() const { return receiver->counters().data_bytes_placed; }
  // Frames host 0 sent on plane p (its NIC port's link toward its leaf).
  [[nodiscard]] std::uint64_t nic_frames(std::uint16_t p, std::uint32_t host) const {
    const sim::LeafSpine& t = topology.planes[p];
    return net.port_counters(t.host_links[host], t.hosts[host]).tx_frames;
  }
  void expect_all_completed_once() const {
    ASSERT_EQ(done.size(), messages);
    std::vector<int> seen(messages + 1, 0);
    for (const transport::Completion& c : done) {
      EXPECT_EQ(c.status, transport::CompletionStatus::success) << "wr " << c.wr_id;
      ASSERT_GE(c.wr_id, 1u);
      ASSERT_LE(c.wr_id, messages);
      ++seen[c.wr_id];
    }
    for (std::size_t i = 1; i <= messages; ++i) EXPECT_EQ(seen[i], 1) << "wr " << i;
  }

  std::uint16_t planes;
  std::size_t messages;
  sim::Fabric net;
  std::vector<std::unique_ptr<host::MultiportSimEndpoint>> endpoints;
  sim::MultiplaneLeafSpine topology;
  std::vector<std::uint8_t> src, dst;
  std::uint32_t lkey = 0, rkey = 0;
  transport::Connection* sender = nullptr;
  transport::Connection* receiver = nullptr;
  std::vector<transport::Completion> done;
};

TEST(FabricPlanes, TopologyNumbersPortsPlaneByPlaneAndGroupsEachHost) {
  FabricPlanes s(2, FabricPlanes::len);
  ASSERT_EQ(s.topology.planes.size(), 2u);
  EXPECT_EQ(s.topology.hosts, 4u);
  EXPECT_EQ(s.topology.port(0, 3), 3u);
  EXPECT_EQ(s.topology.port(1, 0), 4u);
  // 8 ports, then 4 switches per plane; 4 host links and 4 uplinks per plane.
  EXPECT_EQ(s.net.node_count(), 8u + 8u);
  EXPECT_EQ(s.net.link_count(), 16u);
  EXPECT_EQ(s.topology.planes[1].leaves.front(), 12u);
  const std::vector<sim::FabricNodeId> again = {0, 5};
  EXPECT_THROW(s.net.group_ports(again), std::invalid_argument);  // already grouped
  sim::Fabric other;
  std::vector<sim::Endpoint*> three = {&s.endpoints[0]->port(0), &s.endpoints[1]->port(0), &s.endpoints[2]->port(0)};
  EXPECT_THROW(sim::multiplane_leaf_spine(other, three, sim::MultiplaneLeafSpineConfig{}), std::invalid_argument);
}

// Every byte arrives once, and every plane carries a share of the data.
void every_plane_carries_data(std::uint16_t planes, const std::vector<std::uint64_t>& expected_frames,
                              std::uint64_t expected_ns) {
  FabricPlanes s(planes, 8u << 20);
  s.post();
  ASSERT_TRUE(s.complete(20'000'000));
  s.expect_all_completed_once();
  EXPECT_EQ(s.dst, s.src);
  EXPECT_EQ(s.placed(), 8u << 20);
  EXPECT_EQ(s.sender->counters().retransmitted_packets, 0u);
  std::vector<std::uint64_t> frames;
  std::uint64_t total = 0;
  for (std::uint16_t p = 0; p < planes; ++p) {
    EXPECT_GT(s.sender->plane_info(p).data_packets, 0u) << "plane " << p;
    frames.push_back(s.nic_frames(p, 0));
    total += s.sender->plane_info(p).data_packets;
  }
  EXPECT_EQ(total, (8u << 20) / 4096);
  EXPECT_EQ(frames, expected_frames);
  EXPECT_EQ(s.net.total_port_counters().dropped_queue_full, 0u);
  for (const auto& e : s.endpoints) EXPECT_EQ(e->tx_no_such_port(), 0u);
  EXPECT_EQ(s.net.now(), expected_ns);  // the instant of the last completion
  std::printf("%u planes: 8 MiB in %.1f us, frames per plane:", planes, static_cast<double>(s.net.now()) / 1e3);
  for (std::uint64_t f : frames) std::printf(" %llu", static_cast<unsigned long long>(f));
  std::printf("\n");
}

TEST(FabricPlanes, TwoPlanesDeliverEveryByteAndEachCarriesData) { every_plane_carries_data(2, {1024, 1024}, 355'214); }
TEST(FabricPlanes, FourPlanesDeliverEveryByteAndEachCarriesData) { every_plane_carries_data(4, {512, 512, 512, 512}, 182'214); }

// Plane 2 of 4 (its switches, so every link of it) fails 200 us into 64
// MiB of WRITEs and comes back 1 ms later: no error completion, every byte
// once, and the goodput during the outage at least 70% of that before it
// (three planes of four: 75% at most).
TEST(FabricPlanes, OnePlaneOfFourFailsMidTransferAndGoodputHolds) {
  FabricPlanes s(4, 64u << 20);
  constexpr std::uint64_t fail_at = 200'000, outage = 1'000'000, warm = 50'000;
  sim::fail_fabric_plane(s.net, s.topology.planes[2], fail_at);
  sim::repair_fabric_plane(s.net, s.topology.planes[2], fail_at + outage);
  s.post();
  s.run_to(warm);
  const std::uint64_t at_warm = s.placed();
  s.run_to(fail_at);
  const std::uint64_t at_fail = s.placed();
  s.run_to(fail_at + outage);
  const std::uint64_t at_repair = s.placed();
  const std::uint64_t plane2_at_repair = s.sender->plane_info(2).data_packets;
  ASSERT_TRUE(s.complete(100'000'000));
  s.expect_all_completed_once();
  EXPECT_EQ(s.dst, s.src);
  EXPECT_EQ(s.placed(), 64u << 20);
  const double before = static_cast<double>(at_fail - at_warm) / static_cast<double>(fail_at - warm);
  const double during = static_cast<double>(at_repair - at_fail) / static_cast<double>(outage);
  std::printf("goodput before %.2f Gb/s, during the outage %.2f Gb/s (%.1f%%), done at %.1f us\n", before * 8,
              during * 8, 100.0 * during / before, static_cast<double>(s.net.now()) / 1e3);
  EXPECT_GE(during, 0.70 * before);
  EXPECT_LE(during, 0.75 * before * 1.01);
  EXPECT_EQ(s.sender->counters().planes_failed, 1u);
  // What was in flight on plane 2 when it failed, moved to the others, and
  // the packets resent after their timeouts; the failed plane's NIC port
  // and switches dropped them.
  EXPECT_EQ(s.sender->counters().packets_moved_to_other_planes, 256u);
  EXPECT_EQ(s.sender->counters().retransmitted_packets, 512u);
  EXPECT_EQ(s.net.total_port_counters().dropped_link_down, 521u);
  const sim::LeafSpine& dead = s.topology.planes[2];
  EXPECT_GT(s.net.port_counters(dead.host_links[0], dead.hosts[0]).dropped_link_down, 0u);
  EXPECT_EQ(s.net.now(), 1'731'916u);
  // After the repair the plane's probes are answered and it carries data again.
  EXPECT_EQ(s.sender->counters().planes_recovered, 1u);
  EXPECT_EQ(s.sender->plane_info(2).state, transport::PlaneState::active);
  EXPECT_GT(s.sender->plane_info(2).data_packets, plane2_at_repair);
}

// The other form: every link of plane 1 of 2 fails 50 us into 8 MiB and
// stays down; the rest goes over plane 0, once.
TEST(FabricPlanes, PlaneWhoseLinksAllFailIsAbandonedAndTheOtherCarriesTheRest) {
  FabricPlanes s(2, 8u << 20);
  sim::fail_fabric_plane(s.net, s.topology.planes[1], 50'000, 0, sim::PlaneFailure::links);
  s.post();
  ASSERT_TRUE(s.complete(20'000'000));
  s.expect_all_completed_once();
  EXPECT_EQ(s.dst, s.src);
  EXPECT_EQ(s.sender->counters().planes_failed, 1u);
  EXPECT_EQ(s.sender->plane_info(1).state, transport::PlaneState::failed);
  const sim::LeafSpine& dead = s.topology.planes[1];
  std::uint64_t uplink_drops = 0;
  for (const auto& row : dead.uplinks) {
    for (sim::FabricLinkId link : row) uplink_drops += s.net.port_counters(link, s.net.link_end(link, 0)).dropped_link_down;
  }
  EXPECT_EQ(s.sender->counters().packets_moved_to_other_planes, 256u);
  EXPECT_EQ(s.net.port_counters(dead.host_links[0], dead.hosts[0]).dropped_link_down, 503u);
  EXPECT_EQ(uplink_drops, 4u);
  EXPECT_EQ(s.net.now(), 873'948u);
}

// Many connections on 4 planes of 4 leaves x 4 hosts and 4 spines: each
// of the 16 hosts writes 1 MiB to the host on the next leaf,
// (h + 4) mod 16, every host both a sender and a receiver, ports
// grouped per host. Every byte arrives, every plane of every sender
// carries data, nothing is dropped.
TEST(FabricPlanes, SixteenHostsOnFourPlanesEachWriteToTheNextLeaf) {
  constexpr std::uint16_t planes = 4;
  constexpr std::uint32_t hosts = 16;
  constexpr std::size_t bytes = 1u << 20;
  host::HostConfig hc;
  hc.tx_budget_frames = 64;
  std::vector<std::unique_ptr<host::MultiportSimEndpoint>> eps;
  for (std::uint32_t h = 0; h < hosts; ++h) eps.push_back(std::make_unique<host::MultiportSimEndpoint>(planes, hc));
  std::vector<sim::Endpoint*> ports;
  for (std::uint16_t p = 0; p < planes; ++p) {
    for (std::uint32_t h = 0; h < hosts; ++h) ports.push_back(&eps[h]->port(p));
  }
  sim::MultiplaneLeafSpineConfig mc;
  mc.planes = planes;
  mc.plane.leaves = 4;
  mc.plane.spines = 4;
  mc.plane.hosts_per_leaf = 4;
  sim::Fabric net;
  const sim::MultiplaneLeafSpine m = sim::multiplane_leaf_spine(net, ports, mc);
  net.set_nic_ring(128);
  std::vector<std::uint8_t> src(bytes, 0x5a);
  std::vector<std::vector<std::uint8_t>> dst(hosts, std::vector<std::uint8_t>(bytes, 0));
  std::vector<transport::Connection*> senders(hosts), receivers(hosts);
  for (std::uint32_t s = 0; s < hosts; ++s) {
    const std::uint32_t d = (s + 4) % hosts;
    transport::ConnectionConfig c;
    c.mtu = 4096;
    c.planes = planes;
    c.paths = 2 * planes;
    for (std::uint16_t p = 0; p < planes; ++p) {
      const sim::HostAddress local = sim::numbered_host_address(p * hosts + s);
      const sim::HostAddress peer = sim::numbered_host_address(p * hosts + d);
      c.plane[p] = transport::PlaneAddresses{};
      c.plane[p].port = p;
      c.plane[p].local_mac = local.mac;
      c.plane[p].peer_mac = peer.mac;
      c.plane[p].local_ipv4 = local.ipv4;
      c.plane[p].peer_ipv4 = peer.ipv4;
    }
    c.endpoints.local_mac = c.plane[0].local_mac;
    c.endpoints.peer_mac = c.plane[0].peer_mac;
    c.endpoints.local_ipv4 = c.plane[0].local_ipv4;
    c.endpoints.peer_ipv4 = c.plane[0].peer_ipv4;
    c.local_qpn = 0x100 + s;
    c.peer_qpn = 0x200 + d;
    c.base_src_port = static_cast<std::uint16_t>(49152 + 64 * s);
    transport::ConnectionConfig r = c;
    for (auto& pa : r.plane) {
      std::swap(pa.local_mac, pa.peer_mac);
      std::swap(pa.local_ipv4, pa.peer_ipv4);
    }
    std::swap(r.endpoints.local_mac, r.endpoints.peer_mac);
    std::swap(r.endpoints.local_ipv4, r.endpoints.peer_ipv4);
    std::swap(r.local_qpn, r.peer_qpn);
    r.base_src_port = static_cast<std::uint16_t>(r.base_src_port + 32);
    senders[s] = &eps[s]->add(c);
    receivers[d] = &eps[d]->add(r);
    senders[s]->connect();
    receivers[d]->connect();
  }
  for (std::uint32_t s = 0; s < hosts; ++s) {
    const std::uint32_t d = (s + 4) % hosts;
    transport::SendRequest w;
    w.wr_id = s + 1;
    w.local_addr = src.data();
    w.length = bytes;
    w.lkey = eps[s]->memory().register_region(src.data(), src.size(), transport::access_local_write);
    w.rkey = eps[d]->memory().register_region(dst[d].data(), bytes,
                                              transport::access_local_write | transport::access_remote_write);
    w.remote_addr = reinterpret_cast<std::uintptr_t>(dst[d].data());
    ASSERT_EQ(senders[s]->post_send(w), transport::PostResult::ok);
    net.wake(m.port(0, s));
  }
  std::vector<transport::Completion> done;
  ASSERT_TRUE(net.run_until(
      [&] {
        for (transport::Connection* c : senders) c->poll_completions(done);
        return done.size() >= hosts;
      },
      50'000'000));
  for (const transport::Completion& c : done) EXPECT_EQ(c.status, transport::CompletionStatus::success);
  for (std::uint32_t d = 0; d < hosts; ++d) {
    EXPECT_EQ(receivers[d]->counters().data_bytes_placed, bytes) << "host " << d;
    EXPECT_EQ(dst[d], src) << "host " << d;
  }
  for (std::uint32_t s = 0; s < hosts; ++s) {
    for (std::uint16_t p = 0; p < planes; ++p)
      EXPECT_EQ(senders[s]->plane_info(p).data_packets, bytes / 4096 / planes) << "host " << s << " plane " << p;
  }
  EXPECT_EQ(net.total_port_counters().dropped_queue_full, 0u);
  EXPECT_EQ(net.now(), 67'024u);  // the last completion
}

}  // namespace
}  // namespace metaroce::test
