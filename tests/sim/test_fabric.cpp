// sim::Fabric and its topologies: every byte crosses a leaf-spine and a
// fat-tree; ECMP spreads flows over every next hop (exact counts, fixed
// seed); a failed link's and a failed switch's traffic reroutes; PFC pauses
// upstream, its counters add up, and it blocks a victim flow that shares no
// bottleneck (head-of-line blocking).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "fabric/frame_peek.hpp"
#include "sim/fabric_network.hpp"
#include "sim/fabric_topology.hpp"
#include "sim/topology.hpp"
#include "test_frames.hpp"
#include "wire/byte_order.hpp"
#include "wire/frame.hpp"
#include "wire/opcode.hpp"
#include "wire_samples.hpp"

namespace metaroce::sim {
namespace {

constexpr std::uint64_t never = ~std::uint64_t{0};
constexpr std::uint64_t gbit = 1'000'000'000;

std::vector<std::uint8_t> frame_between(std::size_t src, std::size_t dst, std::uint16_t sport, std::uint32_t psn,
                                        std::size_t payload_len, std::uint8_t dscp = 26) {
  const HostAddress s = numbered_host_address(src), d = numbered_host_address(dst);
  wire::FrameSpec spec = test::sample_spec(wire::opcode::mr_write, 4, false);
  spec.eth.src = s.mac;
  spec.eth.dst = d.mac;
  spec.ipv4.src = s.ipv4;
  spec.ipv4.dst = d.ipv4;
  spec.udp.src_port = sport;
  spec.bth.psn = psn;
  spec.ipv4.dscp = dscp;
  std::vector<std::uint8_t> payload(payload_len, 0x5a);
  std::vector<std::uint8_t> bytes(payload_len + 256);
  bytes.resize(wire::build_frame(spec, payload, bytes));
  return bytes;
}

// Hands its frames to the fabric at `start` (the NIC then sends them back to
// back); records what arrives.
class Blaster : public Endpoint {
 public:
  std::vector<std::vector<std::uint8_t>> frames;
  std::uint64_t start = 0;
  std::uint64_t received = 0, received_bytes = 0, last_arrival = 0;
  std::map<std::uint32_t, std::uint64_t> from;  // source IPv4 -> frames

  void on_frame(std::uint64_t now, std::span<const std::uint8_t> frame) override {
    ++received;
    received_bytes += frame.size();
    last_arrival = now;
    ++from[wire::load_be32(frame.data() + 14 + 12)];
  }
  void poll(std::uint64_t now, std::vector<std::vector<std::uint8_t>>& out) override {
    if (!sent_ && now >= start) {
      for (auto& frame : frames) out.push_back(std::move(frame));
      sent_ = true;
    }
  }
  std::uint64_t next_wakeup() const override { return sent_ || frames.empty() ? never : start; }

 private:
  bool sent_ = false;
};

std::vector<Endpoint*> refs(std::vector<Blaster>& blasters) {
  std::vector<Endpoint*> r;
  for (Blaster& b : blasters) r.push_back(&b);
  return r;
}

LeafSpineConfig small_leaf_spine(std::uint32_t leaves, std::uint32_t spines, std::uint32_t hosts_per_leaf) {
  LeafSpineConfig c;
  c.leaves = leaves;
  c.spines = spines;
  c.hosts_per_leaf = hosts_per_leaf;
  c.host_link.rate_bps = 100 * gbit;
  c.host_link.delay_ns = 500;
  c.spine_link.delay_ns = 1000;
  return c;
}

// ---------------------------------------------------------------------------

TEST(FabricTopology, LeafSpineShapeAndOversubscribedUplinkRate) {
  Fabric net;
  std::vector<Blaster> hosts(12);
  LeafSpineConfig c = small_leaf_spine(3, 2, 4);
  c.oversubscription = 2.0;
  const LeafSpine t = leaf_spine(net, refs(hosts), c);
  EXPECT_EQ(t.hosts.size(), 12u);
  EXPECT_EQ(t.leaves.size(), 3u);
  EXPECT_EQ(t.spines.size(), 2u);
  EXPECT_EQ(net.node_count(), 17u);
  EXPECT_EQ(net.link_count(), 12u + 6u);
  EXPECT_EQ(t.hosts[5], 5u);
  EXPECT_EQ(net.link_end(t.host_links[5], 1), t.leaves[1]);
  // 4 hosts x 100 Gb/s over 2 spines at 2:1 -> 100 Gb/s per uplink: a frame
  // of 1,226 bytes + 24 takes 100 ns; at 100 Gb/s the host link takes the same.
  EXPECT_THROW(leaf_spine(net, refs(hosts), c), std::invalid_argument);  // not an empty fabric
  Fabric other;
  std::vector<Blaster> wrong(11);
  EXPECT_THROW(leaf_spine(other, refs(wrong), c), std::invalid_argument);
  c.oversubscription = 0;
  EXPECT_THROW(leaf_spine(other, refs(hosts), c), std::invalid_argument);
}

TEST(FabricTopology, FatTreeShape) {
  Fabric net;
  std::vector<Blaster> hosts(16);
  FatTreeConfig c;
  c.k = 4;
  const FatTree t = fat_tree(net, refs(hosts), c);
  EXPECT_EQ(t.edges.size(), 8u);
  EXPECT_EQ(t.aggregations.size(), 8u);
  EXPECT_EQ(t.cores.size(), 4u);
  EXPECT_EQ(t.edge_links.size(), 16u);
  EXPECT_EQ(t.core_links.size(), 16u);
  EXPECT_EQ(net.link_count(), 16u + 16u + 16u);
  EXPECT_EQ(t.pod_of(15), 3u);
  EXPECT_EQ(net.link_end(t.host_links[5], 1), t.edges[2]);
  Fabric other;
  c.k = 3;
  EXPECT_THROW(fat_tree(other, refs(hosts), c), std::invalid_argument);
}

// 4 leaves x 4 hosts, 4 spines: host i sends 64 flows (UDP source ports) of
// 4 frames each to host (i + 4) % 16, on the next leaf. Every frame and byte
// arrives; ECMP at the leaves spreads the 64 flows of each host over the 4
// spines (exact counts for this hash and salt), and at a spine there is one
// next hop.
TEST(FabricEcmp, LeafSpineDeliversEveryByteAndSpreadsFlowsOverEverySpine) {
  Fabric net;
  std::vector<Blaster> hosts(16);
  const LeafSpine t = leaf_spine(net, refs(hosts), small_leaf_spine(4, 4, 4));
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    for (std::uint16_t flow = 0; flow < 64; ++flow) {
      for (std::uint32_t k = 0; k < 4; ++k) {
        hosts[i].frames.push_back(frame_between(i, (i + 4) % 16, static_cast<std::uint16_t>(49152 + flow), k, 1000));
        bytes += hosts[i].frames.back().size();
      }
    }
  }
  net.run_until(never - 1);
  std::uint64_t received = 0, received_bytes = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    received += hosts[i].received;
    received_bytes += hosts[i].received_bytes;
    ASSERT_EQ(hosts[i].from.size(), 1u);
    EXPECT_EQ(hosts[i].from.begin()->second, 256u);
  }
  EXPECT_EQ(received, 16u * 256u);
  EXPECT_EQ(received_bytes, bytes);
  EXPECT_EQ(net.counters().sent, 16u * 256u);
  EXPECT_EQ(net.counters().delivered, 16u * 256u);
  EXPECT_EQ(net.counters().unroutable, 0u);
  EXPECT_EQ(net.frames_in_flight(), 0u);
  EXPECT_EQ(net.queued_bytes(t.uplinks[0][0], t.leaves[0]), 0u);
  const FabricPortCounters total = net.total_port_counters();
  EXPECT_EQ(total.dropped_queue_full + total.dropped_loss + total.dropped_link_down, 0u);
  // Per leaf, frames sent up to each spine (4 frames per flow).
  std::vector<std::vector<std::uint64_t>> up(4, std::vector<std::uint64_t>(4));
  for (std::size_t l = 0; l < 4; ++l) {
    std::uint64_t sum = 0;
    for (std::size_t s = 0; s < 4; ++s) {
      up[l][s] = net.port_counters(t.uplinks[l][s], t.leaves[l]).tx_frames;
      sum += up[l][s];
      EXPECT_GT(up[l][s], 0u) << "leaf " << l << " spine " << s;
      EXPECT_EQ(up[l][s] % 4, 0u);  // a flow keeps its path
    }
    EXPECT_EQ(sum, 4u * 256u);
  }
  const std::vector<std::vector<std::uint64_t>> expected = {
      {228, 244, 292, 260}, {256, 272, 276, 220}, {292, 252, 212, 268}, {296, 268, 232, 228}};
  EXPECT_EQ(up, expected);
}

// k=4 fat-tree, every host sends 8 flows of 2 frames to every other host:
// every frame arrives; inter-pod traffic uses all 4 cores; the aggregation
// to core links carry exactly the inter-pod frames (once up, once down).
TEST(FabricEcmp, FatTreeAllToAllDeliversEveryByteAcrossAllCores) {
  Fabric net;
  std::vector<Blaster> hosts(16);
  FatTreeConfig c;
  c.k = 4;
  c.host_link.delay_ns = 500;
  c.fabric_link.delay_ns = 500;
  const FatTree t = fat_tree(net, refs(hosts), c);
  std::uint64_t inter_pod = 0, bytes = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    for (std::size_t j = 0; j < 16; ++j) {
      if (i == j) continue;
      for (std::uint16_t flow = 0; flow < 8; ++flow) {
        for (std::uint32_t k = 0; k < 2; ++k) {
          hosts[i].frames.push_back(frame_between(i, j, static_cast<std::uint16_t>(50000 + flow), k, 500));
          bytes += hosts[i].frames.back().size();
        }
      }
      if (t.pod_of(i) != t.pod_of(j)) inter_pod += 16;
    }
  }
  net.run_until(never - 1);
  std::uint64_t received_bytes = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    received_bytes += hosts[i].received_bytes;
    EXPECT_EQ(hosts[i].from.size(), 15u);
    EXPECT_EQ(hosts[i].received, 15u * 16u);
  }
  EXPECT_EQ(received_bytes, bytes);
  EXPECT_EQ(net.counters().unroutable, 0u);
  std::uint64_t core_frames = 0;
  std::vector<std::uint64_t> per_core(4);
  for (FabricLinkId link : t.core_links) {
    const std::uint64_t up = net.port_counters(link, net.link_end(link, 0)).tx_frames;
    const std::uint64_t down = net.port_counters(link, net.link_end(link, 1)).tx_frames;
    core_frames += up + down;
    per_core[std::find(t.cores.begin(), t.cores.end(), net.link_end(link, 1)) - t.cores.begin()] += up;
  }
  EXPECT_EQ(core_frames, 2 * inter_pod);
  for (std::uint64_t n : per_core) EXPECT_GT(n, 0u);
  EXPECT_EQ(per_core, (std::vector<std::uint64_t>{818, 768, 754, 732}));
}

// 2 leaves x 2 hosts, 2 spines. Link leaf0-spine0 fails before any traffic:
// after the reroute every frame crosses spine 1 and all arrive.
TEST(FabricFailure, FailedLinkTrafficReroutesOverTheOtherSpine) {
  Fabric net;
  std::vector<Blaster> hosts(4);
  const LeafSpine t = leaf_spine(net, refs(hosts), small_leaf_spine(2, 2, 2));
  for (std::size_t i = 0; i < 2; ++i) {
    hosts[i].start = 10'000;
    for (std::uint16_t flow = 0; flow < 32; ++flow)
      hosts[i].frames.push_back(frame_between(i, i + 2, static_cast<std::uint16_t>(49152 + flow), 0, 1000));
  }
  net.fail_link(t.uplinks[0][0], 1'000, 2'000);
  net.run_until(never - 1);
  EXPECT_EQ(hosts[2].received + hosts[3].received, 64u);
  EXPECT_EQ(net.port_counters(t.uplinks[0][0], t.leaves[0]).tx_frames, 0u);
  EXPECT_EQ(net.port_counters(t.uplinks[0][1], t.leaves[0]).tx_frames, 64u);
  EXPECT_EQ(net.port_counters(t.uplinks[1][1], t.spines[1]).tx_frames, 64u);
  EXPECT_EQ(net.counters().reroutes, 1u);
}

// The same link fails while traffic flows, with a 5 us reroute delay: frames
// queued on it, on its wire or sent to it before the reroute are counted as
// dropped_link_down; every other frame arrives, and after the repair (and
// its reroute) the link carries traffic again.
TEST(FabricFailure, LinkFailsMidRunDropsAreCountedAndRepairRestoresIt) {
  Fabric net;
  std::vector<Blaster> hosts(4);
  const LeafSpine t = leaf_spine(net, refs(hosts), small_leaf_spine(2, 2, 2));
  for (std::uint16_t flow = 0; flow < 64; ++flow) {
    for (std::uint32_t k = 0; k < 8; ++k)
      hosts[0].frames.push_back(frame_between(0, 2, static_cast<std::uint16_t>(49152 + flow), k, 1000));
  }
  Blaster late;  // not in the fabric: a second wave from host 1 after the repair
  for (std::uint16_t flow = 0; flow < 64; ++flow)
    hosts[1].frames.push_back(frame_between(1, 3, static_cast<std::uint16_t>(49152 + flow), 0, 1000));
  hosts[1].start = 200'000;
  net.fail_link(t.uplinks[0][0], 10'000, 5'000);
  net.repair_link(t.uplinks[0][0], 100'000, 0);
  net.run_until(150'000);
  const std::uint64_t before_repair = net.port_counters(t.uplinks[0][0], t.leaves[0]).tx_frames;
  EXPECT_EQ(hosts[3].received, 0u);
  net.run_until(never - 1);
  const FabricPortCounters total = net.total_port_counters();
  EXPECT_GT(total.dropped_link_down, 0u);
  EXPECT_EQ(hosts[2].received + total.dropped_link_down, 512u);
  EXPECT_EQ(hosts[3].received, 64u);
  EXPECT_GT(net.port_counters(t.uplinks[1][0], t.spines[0]).tx_frames, 0u);
  EXPECT_EQ(net.counters().reroutes, 2u);
  // The second wave (after the repair) uses spine 0 again for some of its flows.
  EXPECT_EQ(before_repair, 48u);
  EXPECT_EQ(net.port_counters(t.uplinks[0][0], t.leaves[0]).tx_frames, 48u + 33u);
}

// A spine fails for a while: traffic avoids it, then uses it after repair.
TEST(FabricFailure, SwitchFailureAndRepair) {
  Fabric net;
  std::vector<Blaster> hosts(4);
  const LeafSpine t = leaf_spine(net, refs(hosts), small_leaf_spine(2, 2, 2));
  for (std::uint16_t flow = 0; flow < 32; ++flow) {
    hosts[0].frames.push_back(frame_between(0, 2, static_cast<std::uint16_t>(49152 + flow), 0, 1000));
    hosts[1].frames.push_back(frame_between(1, 3, static_cast<std::uint16_t>(49152 + flow), 0, 1000));
  }
  hosts[0].start = 5'000;
  hosts[1].start = 100'000;
  net.fail_switch(t.spines[0], 1'000);
  net.repair_switch(t.spines[0], 50'000);
  net.run_until(never - 1);
  EXPECT_EQ(hosts[2].received, 32u);
  EXPECT_EQ(hosts[3].received, 32u);
  const FabricPortCounters total = net.total_port_counters();
  EXPECT_EQ(total.dropped_link_down, 0u);
  // Host 0's wave: all on spine 1. Host 1's wave, after the repair: both spines.
  EXPECT_EQ(net.port_counters(t.uplinks[1][1], t.spines[1]).tx_frames, 32u + (32u - net.port_counters(t.uplinks[1][0], t.spines[0]).tx_frames));
  EXPECT_GT(net.port_counters(t.uplinks[1][0], t.spines[0]).tx_frames, 0u);
}

TEST(FabricNetwork, RejectsBadLinksAndAddresses) {
  Fabric net;
  Blaster a, b;
  const FabricNodeId ha = net.add_host(a, 1);
  EXPECT_THROW(net.add_host(b, 1), std::invalid_argument);
  EXPECT_THROW(net.add_host(b, 0), std::invalid_argument);
  const FabricNodeId hb = net.add_host(b, 2);
  EXPECT_THROW(net.connect(ha, hb, {}, {}), std::invalid_argument);
  const FabricNodeId sw = net.add_switch();
  FabricLinkConfig zero;
  zero.rate_bps = 0;
  EXPECT_THROW(net.connect(ha, sw, zero, {}), std::invalid_argument);
  net.connect(ha, sw, {}, {});
  EXPECT_THROW(net.connect(ha, sw, {}, {}), std::invalid_argument);
  EXPECT_THROW(net.connect(sw, sw, {}, {}), std::invalid_argument);
  EXPECT_THROW(net.connect(sw, 17, {}, {}), std::invalid_argument);
  EXPECT_THROW(net.fail_switch(ha, 0), std::invalid_argument);
}

// Hosts 0 (`sender`) and 1 (`receiver`) on one switch, 100 Gb/s links:
// the sender's node and its link to the switch.
struct TwoHosts {
  FabricNodeId sender;
  FabricLinkId uplink;
};
TwoHosts two_hosts_on_a_switch(Fabric& net, Endpoint& sender, Endpoint& receiver) {
  const FabricNodeId a = net.add_host(sender, numbered_host_address(0).ipv4);
  const FabricNodeId b = net.add_host(receiver, numbered_host_address(1).ipv4);
  const FabricNodeId sw = net.add_switch();
  FabricLinkConfig link;
  link.rate_bps = 100 * gbit;
  const FabricLinkId up = net.connect(a, sw, link, link);
  net.connect(b, sw, link, link);
  return {a, up};
}

// Hands one frame per poll and asks to be polled again at once while it has
// frames: a host whose transport always has more to send.
class Trickle : public Endpoint {
 public:
  std::vector<std::vector<std::uint8_t>> frames;
  std::size_t next = 0;
  std::uint64_t polls = 0;
  void on_frame(std::uint64_t, std::span<const std::uint8_t>) override {}
  void poll(std::uint64_t now, std::vector<std::vector<std::uint8_t>>& out) override {
    ++polls;
    last_ = now;
    if (next < frames.size()) out.push_back(std::move(frames[next++]));
  }
  std::uint64_t next_wakeup() const override { return next < frames.size() ? last_ : never; }

 private:
  std::uint64_t last_ = 0;
};

// With a NIC ring of 4 frames the host is not polled while 4 wait at its NIC:
// at most 4 are ever queued there, and every frame still arrives.
TEST(FabricNetwork, NicRingHoldsFramesInTheHost) {
  for (const std::uint32_t ring : {0u, 4u}) {
    Fabric net;
    net.set_nic_ring(ring);
    Trickle sender;
    Blaster receiver;
    const auto [a, up] = two_hosts_on_a_switch(net, sender, receiver);
    for (std::uint32_t k = 0; k < 100; ++k) sender.frames.push_back(frame_between(0, 1, 49152, k, 1000));
    const std::uint64_t frame = sender.frames.front().size() + 24;
    net.run_until(5'000);  // mid-run: frames wait at the NIC or on the wires
    EXPECT_GT(net.frames_in_flight(), 0u);
    EXPECT_GT(net.queued_bytes(up, a), 0u);
    EXPECT_LE(net.queued_bytes(up, a), (ring == 0 ? 100 : 4) * frame);
    net.run_until(never - 1);
    EXPECT_EQ(receiver.received, 100u);
    if (ring == 0) {
      EXPECT_EQ(net.port_counters(up, a).peak_queued_bytes, 100 * frame);
    } else {
      EXPECT_EQ(net.port_counters(up, a).peak_queued_bytes, 4 * frame);
    }
  }
}

// Sends the frames it is given, each built in one of the network's spare
// buffers when there is one (as host::SimEndpoint does), and records which.
class Recycler : public Endpoint {
 public:
  std::vector<std::size_t> sizes;  // frames to send, one a poll
  std::vector<const std::uint8_t*> built_in;  // where each frame was built
  SpareBuffers spares;
  void on_frame(std::uint64_t, std::span<const std::uint8_t>) override {}
  void poll(std::uint64_t, std::vector<std::vector<std::uint8_t>>& out) override {
    if (next_ == sizes.size()) return;
    const std::vector<std::uint8_t> frame = frame_between(0, 1, 49152, 0, sizes[next_++]);
    std::vector<std::uint8_t>& f = out.emplace_back();
    if (frame.size() >= spare_buffer_bytes && !spares->empty()) {
      f.swap(spares->back());
      spares->pop_back();
    }
    f.assign(frame.begin(), frame.end());
    built_in.push_back(f.data());
  }
  std::uint64_t next_wakeup() const override { return next_ < sizes.size() ? 0 : never; }
  void use_spare_buffers(SpareBuffers s) override { spares = std::move(s); }

 private:
  std::size_t next_ = 0;
};

// A frame's buffer goes back to the hosts once the frame is delivered (or
// dropped), when it is a full frame's (1 KiB or more): the next large frame
// is built in the same memory, a small one (an ACK) is not kept.
TEST(FabricNetwork, DeliveredFramesGiveTheirBuffersBackToTheHosts) {
  Fabric net;
  Recycler sender;
  Blaster receiver;
  const FabricNodeId a = two_hosts_on_a_switch(net, sender, receiver).sender;
  ASSERT_NE(sender.spares, nullptr);
  sender.sizes = {4000, 100};
  net.run_until(never - 1);
  ASSERT_EQ(receiver.received, 2u);
  ASSERT_EQ(sender.spares->size(), 1u);  // the 4000-byte frame's, not the small one's
  EXPECT_EQ(sender.spares->back().data(), sender.built_in[0]);
  EXPECT_GE(sender.spares->back().capacity(), 4000u);
  EXPECT_TRUE(sender.spares->back().empty());
  sender.sizes.push_back(3000);
  net.wake(a);
  net.run_until(never - 1);
  ASSERT_EQ(receiver.received, 3u);
  ASSERT_EQ(sender.built_in.size(), 3u);
  EXPECT_EQ(sender.built_in[2], sender.built_in[0]);  // the same memory again
  EXPECT_EQ(sender.spares->size(), 1u);
}

// --- PFC ---

std::uint64_t hol_frame_bytes() { return frame_between(1, 5, 49153, 0, 1000).size(); }

struct HolRun {
  std::vector<Blaster> hosts{8};
  Fabric net;
  LeafSpine t;
};

// Leaf 0: hosts 0 (incast sender A) and 1 (victim V); leaf 1: hosts 4 (R),
// 5 (W), 6 and 7 (incast senders). A, 6 and 7 each send 2 MB to R: R's port
// is the only bottleneck. V sends 2 MB to W, over the same spine and the same
// spine -> leaf 1 link as A, which run at 400 Gb/s: V shares no bottleneck.
void hol(HolRun& run, bool pfc) {
  LeafSpineConfig c = small_leaf_spine(2, 1, 4);
  c.spine_link.rate_bps = 400 * gbit;
  c.switch_config.pfc.enabled = pfc;
  c.switch_config.pfc.xoff_bytes = 64 * 1024;
  c.switch_config.pfc.xon_bytes = 32 * 1024;
  run.t = leaf_spine(run.net, refs(run.hosts), c);
  for (std::uint32_t k = 0; k < 2000; ++k) {
    for (std::size_t sender : {0u, 6u, 7u})
      run.hosts[sender].frames.push_back(frame_between(sender, 4, 49152, k, 1000));
    run.hosts[1].frames.push_back(frame_between(1, 5, 49153, k, 1000));
  }
  run.net.run_until(never - 1);
}

TEST(FabricPfc, HeadOfLineBlockingPausesAVictimThatSharesNoBottleneck) {
  HolRun lossy, lossless;
  hol(lossy, false);
  hol(lossless, true);
  for (HolRun* run : {&lossy, &lossless}) {
    EXPECT_EQ(run->hosts[4].received, 6000u);
    EXPECT_EQ(run->hosts[5].received, 2000u);
    EXPECT_EQ(run->net.total_port_counters().dropped_queue_full, 0u);
  }
  // Without PFC the victim runs at its line rate: 2000 frames back to back at
  // 100 Gb/s, then the last one's 4 hops (3 us of delay, 1.5 us allowed for
  // serialisation at the 3 switches and queueing behind the incast sender).
  const std::uint64_t wire_ns = (hol_frame_bytes() + 24) * 8 * 2000 / 100;
  EXPECT_GE(lossy.hosts[5].last_arrival, wire_ns + 3'000);
  EXPECT_LE(lossy.hosts[5].last_arrival, wire_ns + 3'000 + 1'500);
  EXPECT_EQ(lossy.hosts[5].last_arrival, 183'159u);
  EXPECT_EQ(lossy.net.total_port_counters().pauses_sent, 0u);
  // With PFC, R's queue backs up into leaf 1's ingress from the spine, which
  // pauses the spine's port toward leaf 1, and with it the victim's frames.
  const FabricPortCounters& spine_down = lossless.net.port_counters(lossless.t.uplinks[1][0], lossless.t.spines[0]);
  EXPECT_GT(spine_down.pauses_received, 0u);
  EXPECT_GT(spine_down.paused_ns, 0u);
  EXPECT_GT(lossless.hosts[5].last_arrival, lossy.hosts[5].last_arrival * 3 / 2);
  // Exact for this configuration: the run is deterministic.
  EXPECT_EQ(lossless.hosts[5].last_arrival, 533'393u);
  EXPECT_EQ(spine_down.pauses_received, 27u);
  EXPECT_EQ(spine_down.paused_ns, 421'923u);
}

TEST(FabricPfc, PausesSentEqualPausesReceivedAndNothingIsDropped) {
  HolRun run;
  hol(run, true);
  EXPECT_EQ(run.net.frames_in_flight(), 0u);
  const FabricPortCounters total = run.net.total_port_counters();
  EXPECT_GT(total.pauses_sent, 0u);
  EXPECT_EQ(total.pauses_sent, total.pauses_received);
  EXPECT_EQ(total.resumes_sent, total.resumes_received);
  EXPECT_EQ(total.pauses_sent, total.resumes_sent);  // the run ends drained: every XOFF was lifted
  EXPECT_EQ(total.dropped_queue_full + total.dropped_loss + total.dropped_link_down, 0u);
  // Hosts 6 and 7 are paused by leaf 1 directly.
  EXPECT_GT(run.net.port_counters(run.t.host_links[6], 6).pauses_received, 0u);
  EXPECT_EQ(total.pauses_sent, 157u);
  EXPECT_EQ(total.paused_ns, 2'172'072u);
}

// With a finite buffer and no PFC the same incast tail-drops; with PFC on
// the lossless priority it does not.
TEST(FabricPfc, LossyPriorityDropsWhereLosslessPauses) {
  for (const bool pfc : {false, true}) {
    Fabric net;
    std::vector<Blaster> hosts(4);
    LeafSpineConfig c = small_leaf_spine(1, 1, 4);
    c.host_link.buffer_bytes = 200 * 1024;
    c.switch_config.pfc.enabled = pfc;
    c.switch_config.pfc.xoff_bytes = 32 * 1024;
    c.switch_config.pfc.xon_bytes = 16 * 1024;
    const LeafSpine t = leaf_spine(net, refs(hosts), c);
    for (std::uint32_t k = 0; k < 1000; ++k) {
      for (std::size_t sender : {0u, 1u, 2u}) hosts[sender].frames.push_back(frame_between(sender, 3, 49152, k, 1000));
    }
    net.run_until(never - 1);
    const FabricPortCounters total = net.total_port_counters();
    if (pfc) {
      EXPECT_EQ(hosts[3].received, 3000u);
      EXPECT_EQ(total.dropped_queue_full, 0u);
      EXPECT_EQ(total.pauses_sent, total.pauses_received);
      // Each of the 3 ingress ports stops near XOFF (+ what is on the wire).
      EXPECT_LE(net.port_counters(t.host_links[3], t.leaves[0]).peak_queued_bytes, 3u * 48u * 1024u);
      EXPECT_EQ(net.port_counters(t.host_links[3], t.leaves[0]).peak_queued_bytes, 126'334u);
    } else {
      EXPECT_EQ(hosts[3].received + total.dropped_queue_full, 3000u);
      EXPECT_GT(total.dropped_queue_full, 0u);
      EXPECT_EQ(total.pauses_sent, 0u);
    }
  }
}

// Only the lossless priorities are paused: the same incast on DSCP 0
// (priority 0) with only priority 3 lossless tail-drops and sends no pause.
TEST(FabricPfc, OnlyLosslessPrioritiesPause) {
  for (const std::uint8_t dscp : {std::uint8_t{26}, std::uint8_t{0}}) {
    Fabric net;
    std::vector<Blaster> hosts(4);
    LeafSpineConfig c = small_leaf_spine(1, 1, 4);
    c.host_link.buffer_bytes = 200 * 1024;
    c.switch_config.pfc.enabled = true;
    c.switch_config.pfc.xoff_bytes = 32 * 1024;
    c.switch_config.pfc.xon_bytes = 16 * 1024;
    c.switch_config.pfc.lossless_priorities = 1u << 3;
    leaf_spine(net, refs(hosts), c);
    for (std::uint32_t k = 0; k < 1000; ++k) {
      for (std::size_t sender : {0u, 1u, 2u})
        hosts[sender].frames.push_back(frame_between(sender, 3, 49152, k, 1000, dscp));
    }
    net.run_until(never - 1);
    const FabricPortCounters total = net.total_port_counters();
    if (dscp == 26) {
      EXPECT_EQ(hosts[3].received, 3000u);
      EXPECT_GT(total.pauses_sent, 0u);
      EXPECT_EQ(total.dropped_queue_full, 0u);
    } else {
      EXPECT_EQ(total.pauses_sent, 0u);
      EXPECT_GT(total.dropped_queue_full, 0u);
      EXPECT_EQ(hosts[3].received + total.dropped_queue_full, 3000u);
    }
  }
}

// Loss on one direction of a host link: every frame is either delivered or
// counted as lost on that port, and the count is exact for the seed.
TEST(FabricNetwork, LinkLossIsCountedPerPort) {
  Fabric net;
  std::vector<Blaster> hosts(2);
  const LeafSpine t = leaf_spine(net, refs(hosts), small_leaf_spine(1, 1, 2));
  net.set_loss(t.host_links[0], 0, 0.1);
  EXPECT_THROW(net.set_loss(t.host_links[0], 0, 1.5), std::invalid_argument);
  EXPECT_THROW(net.set_loss(t.host_links[0], 1, 0.1), std::invalid_argument);  // host 1 is not on that link
  for (std::uint32_t k = 0; k < 1000; ++k) hosts[0].frames.push_back(frame_between(0, 1, 49152, k, 500));
  net.run_until(never - 1);
  const std::uint64_t lost = net.port_counters(t.host_links[0], 0).dropped_loss;
  EXPECT_EQ(hosts[1].received + lost, 1000u);
  EXPECT_EQ(lost, 104u);
}

}  // namespace
}  // namespace metaroce::sim
