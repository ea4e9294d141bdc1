// Planes: a connection's paths spread over separate fabrics, each reached
// through its own port with its own addresses, and a plane that fails
// (link down, or every path of it dead) without the application noticing.
// Two connections joined by a wire per plane, in virtual time: a test
// cuts a plane and sees exactly which frames went where.
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "connection_pair.hpp"
#include "host/sim_endpoint.hpp"
#include "sim/network.hpp"
#include "sim/topology.hpp"

namespace metaroce::test {
namespace {

using transport::Time;

constexpr std::uint16_t plane_ports[transport::max_planes] = {3, 5, 7, 9, 11, 13, 15, 17};

transport::ConnectionConfig planes_config(std::uint16_t planes, std::uint16_t paths) {
  transport::ConnectionConfig c;
  c.mtu = 1024;
  c.paths = paths;
  c.planes = planes;
  c.ack_every_packets = 4;
  c.ack_delay = 4'000;
  c.max_rto = 2'000'000;  // a failed path probes at least every 2 ms
  for (std::uint16_t k = 0; k < transport::max_planes; ++k) {
    transport::PlaneAddresses& a = c.plane[k];
    a.port = plane_ports[k];
    a.local_mac = {2, 0, 0, 0, static_cast<std::uint8_t>(k), 1};
    a.peer_mac = {2, 0, 0, 0, static_cast<std::uint8_t>(k), 2};
    a.local_ipv4 = 0x0a000001u + (static_cast<std::uint32_t>(k) << 8);
    a.peer_ipv4 = 0x0a000002u + (static_cast<std::uint32_t>(k) << 8);
  }
  return c;
}

// B's side: each plane's addresses the other way round.
void swap_plane_addresses(transport::ConnectionConfig& c) {
  for (auto& a : c.plane) {
    std::swap(a.local_mac, a.peer_mac);
    std::swap(a.local_ipv4, a.peer_ipv4);
  }
}

struct InFlight {
  std::vector<std::uint8_t> bytes;
  std::uint8_t plane = 0;
  Time arrives = 0;
  bool to_b = true;
};

// A wire per plane, 5 us each way; a plane may be cut (frames dropped).
class PlaneNetwork {
 public:
  explicit PlaneNetwork(const transport::ConnectionConfig& c)
      : pair(c, [](transport::ConnectionConfig& b) { swap_plane_addresses(b); }), planes(c.planes) {}

  // One microsecond: both connections polled, due frames delivered.
  void step() {
    now += 1'000;
    pair.wheel_a.advance(now);
    pair.wheel_b.advance(now);
    send(*pair.a, true);
    send(*pair.b, false);
    while (!wire.empty() && wire.front().arrives <= now) {
      const InFlight f = wire.front();
      wire.pop_front();
      ConnectionPair::deliver(f.to_b ? *pair.b : *pair.a, now, f.bytes);
    }
  }
  void run_for(Time t) {
    const Time end = now + t;
    while (now < end) step();
  }
  // Steps until `a` has `n` completions in `done` (or `limit` passes).
  bool run_until_completions(std::size_t n, Time limit) {
    const Time end = now + limit;
    while (now < end) {
      step();
      pair.a->poll_completions(done);
      if (done.size() >= n) return true;
    }
    return false;
  }

  ConnectionPair pair;
  std::uint16_t planes;
  Time now = 0;
  std::deque<InFlight> wire;
  std::array<bool, transport::max_planes> cut{};
  // Data frames A sent on each plane, counted by the descriptor's plane;
  // and frames whose descriptor named a plane other than the path's, or
  // a port or source address other than the plane's.
  std::array<std::uint64_t, transport::max_planes> data_frames{};
  std::array<std::uint64_t, transport::max_planes> data_frames_after_mark{};
  std::array<std::uint64_t, transport::max_planes> ack_frames{};  // B's ACKs, by plane
  bool counting_after_mark = false;
  std::uint64_t misrouted = 0;
  std::vector<transport::Completion> done;

 private:
  void send(transport::Connection& c, bool to_b) {
    transport::TxBatch batch;
    c.poll(now, batch);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      InFlight f;
      batch.serialize(i, f.bytes);
      f.plane = batch[i].plane;
      f.arrives = now + 5'000;
      f.to_b = to_b;
      const wire::ParsedFrame p = ConnectionPair::parse(f.bytes);
      const transport::PlaneAddresses& want = c.config().plane[f.plane];
      if (batch[i].port != want.port) ++misrouted;
      if (f.plane != 0 && p.ipv4().src != want.local_ipv4) ++misrouted;
      if (f.plane == 0 && p.ipv4().src != c.config().endpoints.local_ipv4) ++misrouted;
      if (p.bth.opcode == wire::opcode::mr_ack && !to_b) {
        // B's ACK leaves from the source port of the path it leads with,
        // on that path's plane (no path of B moves in these runs).
        const std::uint32_t lead = p.udp_src_port - c.config().base_src_port;
        if (lead >= c.config().paths || lead % planes != f.plane) ++misrouted;
        ++ack_frames[f.plane];
      }
      if (p.bth.opcode >= wire::opcode::mr_write && p.bth.opcode <= wire::opcode::mr_send_imm) {
        if (p.mr_data.path_id % planes != f.plane) ++misrouted;
        if (to_b) {
          ++data_frames[f.plane];
          if (counting_after_mark) ++data_frames_after_mark[f.plane];
        }
      }
      if (cut[f.plane]) continue;
      wire.push_back(std::move(f));
    }
  }
};

// `n` WRITEs of `len` bytes each from A, src[i * len ...] to dst[i * len ...].
void post_writes(PlaneNetwork& net, std::size_t n, std::size_t len, std::uint64_t first_id = 1) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t off = (first_id - 1 + i) * len;
    ASSERT_EQ(net.pair.a->post_send(net.pair.request(transport::SendOp::write, first_id + i, off, len)),
              transport::PostResult::ok);
  }
}

void expect_each_completed_once(const std::vector<transport::Completion>& done, std::uint64_t first,
                                std::size_t n) {
  ASSERT_EQ(done.size(), n);
  std::vector<int> seen(n, 0);
  for (const auto& c : done) {
    EXPECT_EQ(c.status, transport::CompletionStatus::success);
    ASSERT_GE(c.wr_id, first);
    ASSERT_LT(c.wr_id - first, n);
    ++seen[c.wr_id - first];
  }
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "message " << first + i;
}

bool bytes_placed(ConnectionPair& pair, std::size_t len) {
  return std::memcmp(pair.dst_at(0), pair.src.data(), len) == 0;
}

TEST(Planes, ConfigIsChecked) {
  auto c = planes_config(3, 2);
  EXPECT_EQ(transport::validate(c), "planes 3 exceeds paths 2: every plane needs a path (path p is on plane p % planes)");
  c = planes_config(9, 16);
  EXPECT_EQ(transport::validate(c), "planes 9 is outside 1..8");
  c = planes_config(0, 1);
  EXPECT_EQ(transport::validate(c), "planes 0 is outside 1..8");
  c = planes_config(2, 1);
  c.mode = transport::Mode::rocev2;
  EXPECT_FALSE(transport::validate(c).empty());
  EXPECT_EQ(transport::validate(planes_config(8, 64)), "");
}

TEST(Planes, OnePlaneSendsEverythingOnPlaneZero) {
  PlaneNetwork net(planes_config(1, 4));
  post_writes(net, 16, 4096);
  ASSERT_TRUE(net.run_until_completions(16, 20'000'000));
  expect_each_completed_once(net.done, 1, 16);
  EXPECT_TRUE(bytes_placed(net.pair, 16 * 4096));
  EXPECT_EQ(net.misrouted, 0u);
  EXPECT_EQ(net.data_frames[0], 64u);
  EXPECT_EQ(net.pair.a->plane_info(0).data_packets, 64u);
  EXPECT_EQ(net.pair.a->plane_info(0).port, 3u);
  EXPECT_EQ(net.pair.a->counters().planes_failed, 0u);
}

TEST(Planes, PathsAreSprayedOverEveryPlaneThroughItsPort) {
  for (const std::uint16_t planes : {2, 4}) {
    SCOPED_TRACE(planes);
    PlaneNetwork net(planes_config(planes, 8));
    post_writes(net, 16, 4096);
    ASSERT_TRUE(net.run_until_completions(16, 20'000'000));
    expect_each_completed_once(net.done, 1, 16);
    EXPECT_TRUE(bytes_placed(net.pair, 16 * 4096));
    EXPECT_EQ(net.misrouted, 0u);
    std::uint64_t total = 0;
    for (std::uint16_t k = 0; k < planes; ++k) {
      // 64 packets round robin over 8 paths: 8 per path, 8 / planes paths per plane.
      EXPECT_EQ(net.data_frames[k], 64u / planes) << "plane " << k;
      EXPECT_EQ(net.pair.a->plane_info(k).data_packets, 64u / planes);
      EXPECT_EQ(net.pair.a->plane_info(k).port, plane_ports[k]);
      total += net.data_frames[k];
    }
    EXPECT_EQ(total, net.pair.a->counters().data_packets_sent);
    EXPECT_EQ(net.pair.b->counters().data_bytes_placed, 16u * 4096);
    EXPECT_EQ(net.pair.a->counters().retransmitted_packets, 0u);
  }
}

// B's ACKs take the paths in turn, each from its path's source port and on
// its plane: as many on each plane. (The last packet of every message
// here goes on a path of plane 1, the plane ACKs left on when they took
// the plane of the last frame received.)
TEST(Planes, AcksLeaveOnThePlaneOfThePathTheyLeadWith) {
  PlaneNetwork net(planes_config(2, 8));
  for (std::uint64_t id = 1; id <= 16; ++id) {
    post_writes(net, 1, 4096, id);
    ASSERT_TRUE(net.run_until_completions(id, 20'000'000));
  }
  expect_each_completed_once(net.done, 1, 16);
  EXPECT_EQ(net.misrouted, 0u);
  EXPECT_EQ(net.pair.b->counters().acks_sent, 16u);
  EXPECT_EQ(net.ack_frames[0], 8u);
  EXPECT_EQ(net.ack_frames[1], 8u);
}

// Windows of 12 packets on plane 0's paths and 4 on plane 1's (as a
// congestion control that backed off on plane 1 would give).
class SplitWindows final : public transport::CongestionControl {
 public:
  explicit SplitWindows(std::uint16_t planes) : planes_(planes) {}
  void on_send(std::uint16_t, std::uint32_t, Time) override {}
  void on_ack(std::uint16_t, std::uint32_t, std::uint32_t, Time, Time) override {}
  void on_loss(std::uint16_t, Time) override {}
  void on_rate_hint(std::uint32_t, Time) override {}
  [[nodiscard]] std::uint32_t path_window(std::uint16_t path) const override { return path % planes_ == 0 ? 12 : 4; }
  [[nodiscard]] std::uint32_t connection_window() const override { return 4096; }
  [[nodiscard]] std::string_view name() const override { return "split"; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept override { return sizeof(*this); }

 private:
  std::uint16_t planes_;
};

// New packets go to each plane in proportion to its window, not in turn
// over the paths: 16 packets into windows of 24 (plane 0) and 8 (plane 1)
// with room to spare everywhere leave 12 and 4 (round robin over the paths
// would have sent 8 and 8). Then everything completes once.
TEST(Planes, NewPacketsGoToEachPlaneInProportionToItsWindow) {
  PlaneNetwork net(planes_config(2, 4));
  const transport::ConnectionConfig ca = net.pair.a->config();
  std::string error;
  net.pair.a = transport::Connection::create(ca, net.pair.mem_a, net.pair.wheel_a, std::make_unique<SplitWindows>(2),
                                             error);
  ASSERT_TRUE(net.pair.a) << error;
  net.pair.a->connect();
  post_writes(net, 4, 4096);  // 16 packets of 1024 bytes
  for (int i = 0; i < 3; ++i) net.step();  // before the first ACK (5 us away)
  EXPECT_EQ(net.data_frames[0], 12u);
  EXPECT_EQ(net.data_frames[1], 4u);
  EXPECT_EQ(net.pair.a->path_info(0).sent + net.pair.a->path_info(2).sent, 12u);
  EXPECT_EQ(net.pair.a->path_info(1).sent, 2u);
  EXPECT_EQ(net.pair.a->path_info(3).sent, 2u);
  ASSERT_TRUE(net.run_until_completions(4, 20'000'000));
  expect_each_completed_once(net.done, 1, 4);
  EXPECT_TRUE(bytes_placed(net.pair, 4 * 4096));
  EXPECT_EQ(net.misrouted, 0u);
  EXPECT_EQ(net.pair.a->counters().retransmitted_packets, 0u);
}

TEST(Planes, LinkDownMovesItsPacketsToTheOtherPlaneAndProbesBringItBack) {
  PlaneNetwork net(planes_config(2, 4));
  post_writes(net, 8, 4096);  // 32 packets
  net.run_for(3'000);  // sent on both planes, none arrived yet
  std::uint64_t on_plane_1 = 0;
  for (std::uint16_t p = 1; p < 4; p += 2) on_plane_1 += net.pair.a->path_info(p).in_flight;
  ASSERT_GT(on_plane_1, 0u);
  net.cut[1] = true;
  for (auto& f : net.wire) {
    if (f.plane == 1) f.arrives = ~Time{0};  // the cut plane's frames never arrive
  }
  std::erase_if(net.wire, [](const InFlight& f) { return f.arrives == ~Time{0}; });
  net.pair.a->set_plane_link(net.now, 1, false);
  EXPECT_EQ(net.pair.a->counters().planes_failed, 1u);
  EXPECT_EQ(net.pair.a->counters().packets_moved_to_other_planes, on_plane_1);
  EXPECT_EQ(net.pair.a->plane_info(1).state, transport::PlaneState::failed);
  EXPECT_TRUE(net.pair.a->plane_info(1).link_down);
  net.counting_after_mark = true;
  ASSERT_TRUE(net.run_until_completions(8, 50'000'000));
  expect_each_completed_once(net.done, 1, 8);
  EXPECT_TRUE(bytes_placed(net.pair, 8 * 4096));
  EXPECT_EQ(net.data_frames_after_mark[1], 0u);  // only probes went on the failed plane
  EXPECT_EQ(net.pair.a->counters().retransmitted_packets, on_plane_1);
  EXPECT_EQ(net.pair.b->counters().data_bytes_placed, 8u * 4096);
  EXPECT_EQ(net.pair.b->counters().duplicate_packets, 0u);

  // The link comes back: a probe is acknowledged and the plane carries data again.
  net.cut[1] = false;
  net.pair.a->set_plane_link(net.now, 1, true);
  net.run_for(100'000);
  EXPECT_EQ(net.pair.a->counters().planes_recovered, 1u);
  EXPECT_EQ(net.pair.a->plane_info(1).state, transport::PlaneState::active);
  net.done.clear();
  net.data_frames_after_mark = {};
  post_writes(net, 8, 4096, 9);
  ASSERT_TRUE(net.run_until_completions(8, 50'000'000));
  expect_each_completed_once(net.done, 9, 8);
  EXPECT_TRUE(bytes_placed(net.pair, 16 * 4096));
  EXPECT_EQ(net.data_frames_after_mark[0], 16u);
  EXPECT_EQ(net.data_frames_after_mark[1], 16u);
  EXPECT_EQ(net.pair.a->counters().planes_failed, 1u);
  EXPECT_EQ(net.pair.a->plane_info(1).failures, 1u);
  EXPECT_EQ(net.misrouted, 0u);
}

TEST(Planes, APlaneWhosePathsAllFailIsFailedAndComesBackWhenItHeals) {
  PlaneNetwork net(planes_config(2, 4));
  net.cut[1] = true;  // blackholed; nobody says so
  post_writes(net, 8, 4096);
  ASSERT_TRUE(net.run_until_completions(8, 50'000'000));
  expect_each_completed_once(net.done, 1, 8);
  EXPECT_TRUE(bytes_placed(net.pair, 8 * 4096));
  const auto& ca = net.pair.a->counters();
  EXPECT_EQ(ca.planes_failed, 1u);
  EXPECT_EQ(ca.paths_failed, 2u);  // paths 1 and 3, plane 1's
  EXPECT_EQ(net.pair.a->path_info(0).state, transport::PathState::active);
  EXPECT_EQ(net.pair.a->path_info(2).state, transport::PathState::active);
  EXPECT_EQ(net.pair.a->plane_info(1).state, transport::PlaneState::failed);
  EXPECT_FALSE(net.pair.a->plane_info(1).link_down);
  // Every first transmission on plane 1 was lost and sent again on plane 0.
  EXPECT_EQ(ca.retransmitted_packets, net.data_frames[1]);
  EXPECT_EQ(net.data_frames[0] + net.data_frames[1], 32u + ca.retransmitted_packets);
  // Path 1 failed first (its packets went to the other paths); path 3's
  // failure took the plane down: its eight were moved to plane 0.
  EXPECT_EQ(ca.packets_moved_to_other_planes, 8u);
  EXPECT_EQ(net.pair.b->counters().data_bytes_placed, 8u * 4096);

  net.cut[1] = false;  // healed: the next probe is answered
  net.run_for(10'000'000);
  EXPECT_EQ(ca.planes_recovered, 1u);
  EXPECT_EQ(ca.paths_recovered, 2u);
  EXPECT_EQ(net.pair.a->plane_info(1).state, transport::PlaneState::active);
  net.done.clear();
  net.counting_after_mark = true;
  post_writes(net, 8, 4096, 9);
  ASSERT_TRUE(net.run_until_completions(8, 50'000'000));
  expect_each_completed_once(net.done, 9, 8);
  EXPECT_TRUE(bytes_placed(net.pair, 16 * 4096));
  EXPECT_EQ(net.data_frames_after_mark[1], 16u);
}

// The two ends of the simulator tests' connection: `planes` planes of 4
// KiB packets, plane k on port k, A's end first.
std::pair<transport::ConnectionConfig, transport::ConnectionConfig> sim_plane_ends(std::uint16_t planes) {
  transport::ConnectionConfig ca = planes_config(planes, 8);
  ca.mtu = 4096;
  ca.max_rto = 1'000'000;
  ca.endpoints.local_mac = ca.plane[0].local_mac;
  ca.endpoints.peer_mac = ca.plane[0].peer_mac;
  ca.endpoints.local_ipv4 = ca.plane[0].local_ipv4;
  ca.endpoints.peer_ipv4 = ca.plane[0].peer_ipv4;
  for (std::uint16_t k = 0; k < planes; ++k) ca.plane[k].port = k;
  ca.local_qpn = 0x11;
  ca.peer_qpn = 0x22;
  transport::ConnectionConfig cb = ca;
  swap_plane_addresses(cb);
  std::swap(cb.endpoints.local_mac, cb.endpoints.peer_mac);
  std::swap(cb.endpoints.local_ipv4, cb.endpoints.peer_ipv4);
  std::swap(cb.local_qpn, cb.peer_qpn);
  cb.base_src_port = 50000;
  return {ca, cb};
}

// Two MultiportSimEndpoints joined by sim::multiplane, one connection
// each way round (A sends), 100 Gb/s ports, 5 us per plane one way.
struct SimPlanes {
  static constexpr std::uint16_t planes = 2;
  static constexpr std::size_t messages = 64, len = 64 * 1024;
  explicit SimPlanes(std::vector<fabric::FabricConfig> fabrics = {}) {
    src.resize(messages * len);
    dst.assign(messages * len, 0);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + 3);
    lkey = a.memory().register_region(src.data(), src.size(), transport::access_local_write);
    rkey = b.memory().register_region(dst.data(), dst.size(), transport::access_local_write | transport::access_remote_write);
    transport::ConnectionConfig cb;
    std::tie(ca, cb) = sim_plane_ends(planes);
    sender = &a.add(ca);
    receiver = &b.add(cb);
    sender->connect();
    receiver->connect();
    sim::MultiplaneConfig mc;
    mc.nic = sim::HostConfig{{}, 100'000'000'000, 24};
    for (std::uint16_t k = 0; k < planes; ++k) {
      fabric::FabricConfig f;
      f.delay_ns = 5'000;
      f.paths = 8;
      mc.planes.push_back(f);
    }
    for (std::size_t k = 0; k < fabrics.size(); ++k) mc.planes[k] = fabrics[k];
    std::vector<sim::Endpoint*> ap = {&a.port(0), &a.port(1)}, bp = {&b.port(0), &b.port(1)};
    std::vector<sim::HostAddress> aa, ba;
    for (std::uint16_t k = 0; k < planes; ++k) {
      aa.push_back(sim::HostAddress{ca.plane[k].local_mac, ca.plane[k].local_ipv4, {}});
      ba.push_back(sim::HostAddress{ca.plane[k].peer_mac, ca.plane[k].peer_ipv4, {}});
    }
    m = sim::multiplane(net, ap, aa, bp, ba, mc);
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
  bool complete(std::size_t n, std::uint64_t limit_ns) {
    done.clear();
    return net.run_until([&] { sender->poll_completions(done); return done.size() >= n; }, net.now() + limit_ns);
  }

  host::MultiportSimEndpoint a{planes}, b{planes};
  std::vector<std::uint8_t> src, dst;
  std::uint32_t lkey = 0, rkey = 0;
  transport::ConnectionConfig ca;
  transport::Connection* sender = nullptr;
  transport::Connection* receiver = nullptr;
  sim::Network net;
  sim::Multiplane m;
  std::vector<transport::Completion> done;
};

// Both hosts see port 1's link go down 100 us into 4 MiB of WRITEs (the
// engine's link poll does this): the plane fails at once on both, its
// frames are dropped at the port, everything completes once; the link
// comes back and the plane carries data again.
TEST(Planes, SimulatedLinkDownIsToldToTheConnectionsAndTheyCarryOn) {
  SimPlanes s;
  s.post(1, SimPlanes::messages);
  s.net.run_until(100'000);
  const std::uint64_t in_flight_1 = s.sender->path_info(1).in_flight + s.sender->path_info(3).in_flight +
                                    s.sender->path_info(5).in_flight + s.sender->path_info(7).in_flight;
  s.a.set_port_link(s.net.now(), 1, false);
  s.b.set_port_link(s.net.now(), 1, false);
  s.a.set_port_link(s.net.now(), 1, false);  // a repeat changes nothing
  EXPECT_EQ(s.a.host().counters().link_changes, 1u);
  EXPECT_EQ(s.sender->counters().planes_failed, 1u);
  EXPECT_EQ(s.receiver->counters().planes_failed, 1u);
  EXPECT_EQ(s.sender->counters().packets_moved_to_other_planes, in_flight_1);
  ASSERT_TRUE(s.complete(SimPlanes::messages, 50'000'000));
  expect_each_completed_once(s.done, 1, SimPlanes::messages);
  EXPECT_EQ(s.dst, s.src);
  EXPECT_EQ(s.receiver->counters().data_bytes_placed, SimPlanes::messages * SimPlanes::len);
  EXPECT_EQ(s.sender->counters().planes_recovered, 0u);  // probes only, dropped at the port
  const std::uint64_t plane1 = s.sender->plane_info(1).data_packets;
  s.a.set_port_link(s.net.now(), 1, true);
  s.b.set_port_link(s.net.now(), 1, true);
  EXPECT_EQ(s.a.host().counters().link_changes, 2u);
  s.net.run_until(s.net.now() + 5'000'000);
  EXPECT_EQ(s.sender->counters().planes_recovered, 1u);
  EXPECT_EQ(s.receiver->counters().planes_recovered, 1u);  // its own probes, answered by the sender
  s.post(100, 8);
  ASSERT_TRUE(s.complete(8, 50'000'000));
  expect_each_completed_once(s.done, 100, 8);
  EXPECT_GT(s.sender->plane_info(1).data_packets, plane1);
  EXPECT_EQ(s.a.tx_no_such_port(), 0u);
}

// Through the simulator: two hosts with a port per plane, plane k a fabric
// of its own (sim::multiplane); plane 1 of 2 blackholed both ways for 5 ms
// in the middle of 4 MiB of WRITEs.
TEST(Planes, SimulatedPlaneOutageCompletesEverythingOnceAndThePlaneComesBack) {
  constexpr std::uint16_t planes = 2;
  constexpr std::size_t messages = 64, len = 64 * 1024;
  std::vector<std::uint8_t> src(messages * len), dst(messages * len, 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + 3);
  host::MultiportSimEndpoint a(planes), b(planes);
  const std::uint32_t lkey = a.memory().register_region(src.data(), src.size(), transport::access_local_write);
  const std::uint32_t rkey = b.memory().register_region(dst.data(), dst.size(),
                                                       transport::access_local_write | transport::access_remote_write);
  const auto [ca, cb] = sim_plane_ends(planes);
  transport::Connection& sender = a.add(ca);
  transport::Connection& receiver = b.add(cb);
  sender.connect();
  receiver.connect();

  sim::Network net;
  sim::MultiplaneConfig mc;
  mc.nic = sim::HostConfig{{}, 100'000'000'000, 24};
  for (std::uint16_t k = 0; k < planes; ++k) {
    fabric::FabricConfig f;
    f.delay_ns = 5'000;
    f.paths = 8;
    mc.planes.push_back(f);
  }
  sim::fail_plane(mc, 1, 100'000, 5'000'000);
  std::vector<sim::Endpoint*> ap = {&a.port(0), &a.port(1)}, bp = {&b.port(0), &b.port(1)};
  std::vector<sim::HostAddress> aa, ba;
  for (std::uint16_t k = 0; k < planes; ++k) {
    aa.push_back(sim::HostAddress{ca.plane[k].local_mac, ca.plane[k].local_ipv4, {}});
    ba.push_back(sim::HostAddress{ca.plane[k].peer_mac, ca.plane[k].peer_ipv4, {}});
  }
  const sim::Multiplane m = sim::multiplane(net, ap, aa, bp, ba, mc);
  for (std::size_t i = 0; i < messages; ++i) {
    transport::SendRequest r;
    r.wr_id = i + 1;
    r.local_addr = src.data() + i * len;
    r.length = len;
    r.lkey = lkey;
    r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + i * len);
    r.rkey = rkey;
    ASSERT_EQ(sender.post_send(r), transport::PostResult::ok);
  }
  std::vector<transport::Completion> done;
  ASSERT_TRUE(net.run_until([&] { sender.poll_completions(done); return done.size() >= messages; }, 50'000'000));
  expect_each_completed_once(done, 1, messages);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(receiver.counters().data_bytes_placed, messages * len);
  EXPECT_EQ(sender.counters().planes_failed, 1u);
  EXPECT_GT(sender.counters().packets_moved_to_other_planes, 0u);
  EXPECT_EQ(a.tx_no_such_port(), 0u);
  EXPECT_GT(net.fabric(m.a_ports[1], m.b_ports[1]).counters().dropped_blackhole, 0u);
  EXPECT_EQ(net.fabric(m.a_ports[0], m.b_ports[0]).counters().dropped_blackhole, 0u);
  // After the outage the plane's probes are answered and it carries data again.
  const std::uint64_t plane1_before = sender.plane_info(1).data_packets;
  net.run_until(net.now() + 10'000'000);
  EXPECT_EQ(sender.counters().planes_recovered, 1u);
  EXPECT_EQ(sender.plane_info(1).state, transport::PlaneState::active);
  for (std::size_t i = 0; i < 8; ++i) {
    transport::SendRequest r;
    r.wr_id = 100 + i;
    r.local_addr = src.data() + i * len;
    r.length = len;
    r.lkey = lkey;
    r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + i * len);
    r.rkey = rkey;
    ASSERT_EQ(sender.post_send(r), transport::PostResult::ok);
  }
  done.clear();
  ASSERT_TRUE(net.run_until([&] { sender.poll_completions(done); return done.size() >= 8; }, net.now() + 50'000'000));
  expect_each_completed_once(done, 100, 8);
  EXPECT_GT(sender.plane_info(1).data_packets, plane1_before);
}

}  // namespace
}  // namespace metaroce::test
