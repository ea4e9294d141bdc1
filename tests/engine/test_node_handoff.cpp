// Software hand-off between a node's lcores, on a port that cannot steer by
// QPN: a net_ring pair built unsteered (every tx queue feeds the peer's rx
// queue 0, as a PMD without flow rules would), a 2-lcore node on each end,
// polled in turn from the test's thread as two lcores would be. Lcore 0
// takes every frame from the port and passes lcore 1's to it: each one
// counted once as rx_handed_off, delivered, nothing misdirected or lost.
// And the start-up steering check (steering_check.hpp) on the same pairs.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "cm/message.hpp"
#include "engine/node.hpp"
#include "engine/port.hpp"
#include "engine/steering.hpp"
#include "engine/steering_check.hpp"
#include "wire/frame.hpp"
#include "wire/neighbour.hpp"

namespace metaroce::engine {
namespace {

constexpr std::uint16_t lcores = 2;

struct UnsteeredNodes {
  std::unique_ptr<Port> a, b;
  std::unique_ptr<Node> node_a, node_b;

  bool create(bool handoff, std::string& error, std::uint32_t handoff_ring_size = 4096,
              std::uint16_t management_lcore = 0, bool unsteered = true) {
    static int pairs = 0;
    const std::string n = std::to_string(pairs++);
    PortSetup s;
    s.queues = lcores;
    s.mbufs = 4096;
    s.ring_unsteered = unsteered;
    if (!Port::create_ring_pair("ho_a" + n, "ho_b" + n, s, a, b, error) || !a->start(error) || !b->start(error))
      return false;
    for (auto [port, node, side] : {std::tuple{a.get(), &node_a, "a"}, std::tuple{b.get(), &node_b, "b"}}) {
      NodeConfig c;
      c.name = "ho" + n + side;
      c.port_id = port->id();
      c.lcores = lcores;
      c.hosts.tx_mbufs = 2048;
      c.software_handoff = handoff;
      c.handoff_ring_size = handoff_ring_size;
      c.management_lcore = management_lcore;
      *node = Node::create(c, error);
      if (!*node) return false;
    }
    return true;
  }
  ~UnsteeredNodes() {
    for (Port* p : {a.get(), b.get()})
      if (p) p->drain_rx();
    node_a.reset();
    node_b.reset();
    for (Port* p : {a.get(), b.get()})
      if (p) p->drain_rx();
  }
  void poll_all() {
    for (std::uint16_t i = 0; i < lcores; ++i) {
      node_a->poll(i);
      node_b->poll(i);
    }
  }
};

transport::ConnectionConfig config(std::uint32_t local_qpn, std::uint32_t peer_qpn) {
  transport::ConnectionConfig c;
  c.mtu = 1024;
  c.paths = 2;
  c.local_qpn = local_qpn;
  c.peer_qpn = peer_qpn;
  c.endpoints.local_mac = {2, 0, 0, 0, 0, static_cast<std::uint8_t>(local_qpn)};
  c.endpoints.peer_mac = {2, 0, 0, 0, 0, static_cast<std::uint8_t>(peer_qpn)};
  return c;
}

std::vector<std::uint8_t> probe_frame(std::uint32_t dest_qp) {
  wire::FrameSpec s;
  s.bth.opcode = 0xc5;  // MR_PROBE: headers only
  s.bth.dest_qp = dest_qp;
  std::vector<std::uint8_t> frame(256);
  frame.resize(wire::build_frame(s, {}, frame));
  return frame;
}

TEST(NodeHandoff, PeekFindsTheDestinationQpOfRoceV2FramesOnly) {
  std::uint32_t qpn = 0;
  auto frame = probe_frame(0xabcdef);
  ASSERT_TRUE(wire::peek_dest_qp(frame, qpn));
  EXPECT_EQ(qpn, 0xabcdefu);
  wire::FrameSpec v6;
  v6.ip_version = 6;
  v6.bth.opcode = 0xc5;
  v6.bth.dest_qp = 0x123457;
  std::vector<std::uint8_t> f6(256);
  f6.resize(wire::build_frame(v6, {}, f6));
  ASSERT_TRUE(wire::peek_dest_qp(f6, qpn));
  EXPECT_EQ(qpn, 0x123457u);
  // Not UDP 4791, or cut short: the receiving lcore keeps it.
  frame[wire::ethernet_header_size + 20 + 3] ^= 1;
  EXPECT_FALSE(wire::peek_dest_qp(frame, qpn));
  EXPECT_FALSE(wire::peek_dest_qp(std::span(f6).first(wire::ethernet_header_size + 40 + 8 + 7), qpn));
}

TEST(NodeHandoff, EveryFrameForLcore1ArrivesOnQueue0AndIsHandedOffOnceAndDelivered) {
  UnsteeredNodes p;
  std::string error;
  ASSERT_TRUE(p.create(true, error)) << error;
  // Lcore i: QPNs with qpn % 2 == i on both ends.
  const std::array<std::uint32_t, lcores> qpn_a = {0x100, 0x301}, qpn_b = {0x202, 0x403};
  std::array<transport::Connection*, lcores> conn_a{}, conn_b{};
  for (std::uint16_t i = 0; i < lcores; ++i) {
    conn_a[i] = p.node_a->host(i).add_connection(config(qpn_a[i], qpn_b[i]), nullptr, error);
    ASSERT_NE(conn_a[i], nullptr) << error;
    conn_b[i] = p.node_b->host(i).add_connection(config(qpn_b[i], qpn_a[i]), nullptr, error);
    ASSERT_NE(conn_b[i], nullptr) << error;
    conn_a[i]->connect();
    conn_b[i]->connect();
  }
  constexpr std::size_t size = 256 * 1024;
  std::array<std::vector<std::uint8_t>, lcores> src, dst;
  for (std::uint16_t i = 0; i < lcores; ++i) {
    src[i].resize(size);
    for (std::size_t k = 0; k < size; ++k) src[i][k] = static_cast<std::uint8_t>(k * 7 + i * 101);
    dst[i].assign(size, 0);
    transport::SendRequest r;
    r.wr_id = i;
    r.op = transport::SendOp::write;
    r.local_addr = src[i].data();
    r.length = size;
    r.lkey = p.node_a->host(i).memory().register_region(src[i].data(), size, transport::access_local_write);
    r.remote_addr = reinterpret_cast<std::uint64_t>(dst[i].data());
    r.rkey = p.node_b->host(i).memory().register_region(dst[i].data(), size,
                                                        transport::access_local_write | transport::access_remote_write);
    ASSERT_EQ(conn_a[i]->post_send(r), transport::PostResult::ok);
  }
  std::array<std::vector<transport::Completion>, lcores> done;
  for (int turn = 0; turn < 200000 && (done[0].empty() || done[1].empty()); ++turn) {
    p.poll_all();
    for (std::uint16_t i = 0; i < lcores; ++i) conn_a[i]->poll_completions(done[i]);
  }
  for (int turn = 0; turn < 1000; ++turn) p.poll_all();  // the last ACKs
  for (std::uint16_t i = 0; i < lcores; ++i) {
    ASSERT_EQ(done[i].size(), 1u) << "lcore " << i;
    EXPECT_EQ(done[i][0].status, transport::CompletionStatus::success);
    EXPECT_EQ(std::memcmp(src[i].data(), dst[i].data(), size), 0) << "lcore " << i;
    // 256 packets of 1 KiB, each received by B's host of this lcore only.
    EXPECT_EQ(conn_b[i]->counters().data_packets_received, size / 1024) << "lcore " << i;
  }
  for (Node* node : {p.node_a.get(), p.node_b.get()}) {
    const EngineCounters& c0 = node->host(0).counters();
    const EngineCounters& c1 = node->host(1).counters();
    // Lcore 1's queue got nothing from the port: all it received, lcore 0
    // handed it, each frame once, and it was all for lcore 1's connection.
    EXPECT_GT(c1.rx_frames, 0u) << node->config().name;
    EXPECT_EQ(c0.rx_handed_off, c1.rx_frames) << node->config().name;
    EXPECT_EQ(c1.rx_delivered, c1.rx_frames) << node->config().name;
    EXPECT_EQ(c1.rx_handed_off, 0u) << node->config().name;
    EXPECT_EQ(c0.rx_delivered, c0.rx_frames) << node->config().name;
    for (const EngineCounters* c : {&c0, &c1}) {
      EXPECT_EQ(c->rx_misdirected, 0u) << node->config().name;
      EXPECT_EQ(c->rx_handoff_ring_full, 0u) << node->config().name;
      EXPECT_EQ(c->rx_unknown_qpn, 0u) << node->config().name;
    }
  }
  // B's lcore 1 got its 256 data packets that way (A's, the ACKs).
  EXPECT_GE(p.node_b->host(0).counters().rx_handed_off, size / 1024);
  // Every frame one side sent, the other side's lcores received once.
  for (auto [from, to] : {std::pair{p.node_a.get(), p.node_b.get()}, std::pair{p.node_b.get(), p.node_a.get()}}) {
    EXPECT_EQ(from->host(0).counters().tx_frames + from->host(1).counters().tx_frames,
              to->host(0).counters().rx_frames + to->host(1).counters().rx_frames)
        << to->config().name;
  }
}

TEST(NodeHandoff, WithoutHandOffLcore1sFramesAreMisdirectedAtLcore0) {
  UnsteeredNodes p;
  std::string error;
  ASSERT_TRUE(p.create(false, error)) << error;
  for (int k = 0; k < 3; ++k) ASSERT_TRUE(p.node_a->host(1).send_frame(probe_frame(0x203)));
  for (int turn = 0; turn < 10; ++turn) p.poll_all();
  EXPECT_EQ(p.node_b->host(0).counters().rx_misdirected, 3u);
  EXPECT_EQ(p.node_b->host(0).counters().rx_handed_off, 0u);
  EXPECT_EQ(p.node_b->host(1).counters().rx_frames, 0u);
}

TEST(NodeHandoff, AFullHandOffRingDropsUnderItsNameAndQp1GoesToTheManagementLcore) {
  UnsteeredNodes p;
  std::string error;
  // A ring of 4 holds 3 frames; the connection manager runs on lcore 1.
  ASSERT_TRUE(p.create(true, error, 4, 1)) << error;
  int managed_on_1 = 0;
  p.node_b->host(1).set_management_handler([&](std::uint64_t, const wire::ParsedFrame&) { ++managed_on_1; });
  ASSERT_TRUE(p.node_a->host(0).send_frame(probe_frame(1)));
  for (int k = 0; k < 7; ++k) ASSERT_TRUE(p.node_a->host(0).send_frame(probe_frame(0x203)));
  p.node_a->poll(0);  // sends the 8 frames
  p.node_b->poll(0);  // takes them all: QP 1's and two more fill lcore 1's ring
  const EngineCounters& c0 = p.node_b->host(0).counters();
  EXPECT_EQ(c0.rx_handed_off, 3u);
  EXPECT_EQ(c0.rx_handoff_ring_full, 5u);
  EXPECT_EQ(c0.rx_frames, 0u);
  EXPECT_EQ(c0.dropped(), 5u);
  p.node_b->poll(1);
  const EngineCounters& c1 = p.node_b->host(1).counters();
  EXPECT_EQ(managed_on_1, 1);
  EXPECT_EQ(c1.rx_management, 1u);
  EXPECT_EQ(c1.rx_frames, 3u);
  EXPECT_EQ(c1.rx_unknown_qpn, 2u);  // 0x203 has no connection
  EXPECT_EQ(c1.rx_misdirected, 0u);
}

// Lanes (each lcore with a connection manager of its own): a frame to QP 1
// goes to the lcore of the QPN the CM message concerns (cm::peek_owner_qpn),
// and a frame that is not RoCEv2 (ARP) goes to every lcore, by reference.
TEST(NodeHandoff, LanesGetTheirCmFramesByTheQpnInsideAndEveryLaneSeesArp) {
  UnsteeredNodes p;
  std::string error;
  ASSERT_TRUE(p.create(true, error)) << error;
  for (std::uint16_t i = 0; i < lcores; ++i) {
    RxHandoff h = p.node_b->host(i).rx_handoff();
    h.management_owner = &cm::peek_owner_qpn;
    h.share_other_frames = true;
    p.node_b->host(i).set_rx_handoff(h);
    host::NeighbourConfig n;
    n.ipv4_present = true;
    n.local_ipv4 = 0x0a000002;
    p.node_b->host(i).host().enable_neighbours(n);
  }
  std::array<int, lcores> managed{};
  for (std::uint16_t i = 0; i < lcores; ++i)
    p.node_b->host(i).set_management_handler([&managed, i](std::uint64_t, const wire::ParsedFrame&) { ++managed[i]; });
  const auto cm_frame = [](cm::MessageType type, std::uint32_t sender, std::uint32_t receiver) {
    cm::Message m;
    m.type = type;
    m.sender_qpn = sender;
    m.receiver_qpn = receiver;
    m.mtu = 1024;
    m.paths = 1;
    m.streams = 1;
    return cm::build_frame(transport::Endpoints{}, 49151, m);
  };
  // A REQ from a client QPN of queue 1, a REP to a QPN of queue 0, a DREQ to
  // one of queue 1, and a REJ naming neither QPN (to the management lcore).
  for (const auto& f : {cm_frame(cm::MessageType::request, 0x303, 0), cm_frame(cm::MessageType::reply, 0x305, 0x102),
                        cm_frame(cm::MessageType::disconnect, 0x302, 0x201),
                        cm_frame(cm::MessageType::reject, 0, 0)})
    ASSERT_TRUE(p.node_a->host(0).send_frame(f));
  // An ARP request for another address: each lane's neighbour cache sees it.
  wire::ArpMessage arp;
  arp.operation = wire::arp_request;
  arp.sender_mac = {2, 0, 0, 0, 0, 9};
  arp.sender_ip = 0x0a000009;
  arp.target_ip = 0x0a000001;
  wire::EthernetHeader eth;
  eth.dst = wire::broadcast_mac;
  eth.src = arp.sender_mac;
  std::vector<std::uint8_t> arp_frame(64);
  arp_frame.resize(wire::build_arp_frame(eth, arp, arp_frame));
  ASSERT_TRUE(p.node_a->host(0).send_frame(arp_frame));
  p.node_a->poll(0);
  p.node_b->poll(0);  // takes all five from queue 0
  p.node_b->poll(1);
  const EngineCounters& c0 = p.node_b->host(0).counters();
  const EngineCounters& c1 = p.node_b->host(1).counters();
  EXPECT_EQ(managed[0], 2);  // the REP and the REJ
  EXPECT_EQ(managed[1], 2);  // the REQ and the DREQ
  EXPECT_EQ(c0.rx_handed_off, 2u);
  EXPECT_EQ(c0.rx_shared, 1u);
  EXPECT_EQ(c0.rx_frames, 3u);  // REP, REJ, ARP
  EXPECT_EQ(c1.rx_frames, 3u);  // REQ, DREQ, ARP (shared)
  EXPECT_EQ(c0.rx_neighbour, 1u);
  EXPECT_EQ(c1.rx_neighbour, 1u);
  EXPECT_EQ(c0.neighbour.arp_requests_not_ours, 1u);
  EXPECT_EQ(c1.neighbour.arp_requests_not_ours, 1u);
  EXPECT_EQ(c0.dropped() + c1.dropped(), 0u);
  // The port gave five frames: each lcore's rx_frames, less the copies shared.
  EXPECT_EQ(c0.rx_frames + c1.rx_frames - c0.rx_shared - c1.rx_shared, 5u);
}

TEST(SteeringCheck, ProbesArriveOnTheirOwnersQueuesWhereTheRingSteers) {
  UnsteeredNodes p;
  std::string error;
  ASSERT_TRUE(p.create(false, error, 4096, 0, /*unsteered=*/false)) << error;
  SteeringCheck result;
  ASSERT_TRUE(check_steering(*p.node_a, *p.node_b, result, error)) << error;
  EXPECT_EQ(result.arrived_on, (std::vector<int>{0, 1}));
  EXPECT_EQ(result.handed_off, 0);
  for (std::uint16_t i = 0; i < lcores; ++i) {
    EXPECT_EQ(steering_probe_qpn(i, lcores) % lcores, i);
    EXPECT_EQ(p.node_b->host(i).counters().rx_steering_probes, 1u);
    EXPECT_EQ(p.node_b->host(i).counters().rx_unknown_qpn, 0u);
    EXPECT_EQ(p.node_b->host(i).counters().rx_misdirected, 0u);
  }
}

TEST(SteeringCheck, AnUnsteeredPortWithoutHandOffIsAOneLineErrorNamingTheFix) {
  UnsteeredNodes p;
  std::string error;
  ASSERT_TRUE(p.create(false, error)) << error;
  SteeringCheck result;
  EXPECT_FALSE(check_steering(*p.node_a, *p.node_b, result, error));
  EXPECT_EQ(error, "port " + std::to_string(p.b->id()) +
                       ": frames for lcore 1's QPNs arrived on queue 0: the PMD does not steer by QPN; run with "
                       "software hand-off (the default for this PMD) or install a flow rule per queue on the BTH "
                       "destination QP (testpmd_command, doc/ENGINE.md \"Steering by destination QPN\")");
  EXPECT_EQ(result.arrived_on, (std::vector<int>{0, 0}));
}

TEST(SteeringCheck, AnUnsteeredPortWithHandOffPassesAndTheProbeReachesItsOwner) {
  UnsteeredNodes p;
  std::string error;
  ASSERT_TRUE(p.create(true, error)) << error;
  SteeringCheck result;
  ASSERT_TRUE(check_steering(*p.node_a, *p.node_b, result, error)) << error;
  EXPECT_EQ(result.arrived_on, (std::vector<int>{0, 0}));
  EXPECT_EQ(result.handed_off, 1);
  EXPECT_EQ(p.node_b->host(0).counters().rx_handed_off, 1u);
  EXPECT_EQ(p.node_b->host(1).counters().rx_steering_probes, 1u);
  EXPECT_EQ(p.node_b->host(1).counters().rx_unknown_qpn, 0u);
  EXPECT_EQ(p.node_b->host(0).counters().rx_misdirected + p.node_b->host(1).counters().rx_misdirected, 0u);
}

TEST(SteeringCheck, AProbeThatNeverArrivesSaysSo) {
  UnsteeredNodes p;
  std::string error;
  ASSERT_TRUE(p.create(true, error)) << error;
  SteeringCheck result;
  // B as sender and receiver: its probes go to A, which nobody polls.
  EXPECT_FALSE(check_steering(*p.node_b, *p.node_b, result, error, 20));
  EXPECT_NE(error.find("the steering probe for lcore 0 did not arrive in 20 turns"), std::string::npos) << error;
}

}  // namespace
}  // namespace metaroce::engine
