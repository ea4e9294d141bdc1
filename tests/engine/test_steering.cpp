// Steering by destination QPN: a net_ring pair with two queues and one
// engine host per queue on each side (four hosts, polled in turn from the
// test's thread as four lcores would be). Each connection lives on the
// queue its QPNs steer to on both ends, so every host transmits on, and
// receives from, its own queue only: both queues carry verified transfers,
// nothing is misdirected, and a frame sent on the wrong queue is counted.
#include <gtest/gtest.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/engine_host.hpp"
#include "engine/port.hpp"
#include "engine/steering.hpp"
#include "wire/frame.hpp"

namespace metaroce::engine {
namespace {

constexpr std::uint16_t queues = 2;

struct SteeredPair {
  std::unique_ptr<Port> a, b;
  std::array<std::unique_ptr<EngineHost>, queues> hosts_a, hosts_b;
  std::array<transport::Connection*, queues> conn_a{}, conn_b{};

  bool create(std::string& error) {
    PortSetup s;
    s.queues = queues;
    s.mbufs = 4096;
    static int pairs = 0;  // ring port names are unique per process
    const std::string n = std::to_string(pairs++);
    if (!Port::create_ring_pair("st_a" + n, "st_b" + n, s, a, b, error) || !a->start(error) || !b->start(error))
      return false;
    for (std::uint16_t q = 0; q < queues; ++q) {
      for (auto [port, hosts, side] : {std::tuple{a.get(), &hosts_a, "A"}, std::tuple{b.get(), &hosts_b, "B"}}) {
        EngineHostConfig c;
        c.name = std::string("steer") + side + std::to_string(q);
        c.port_id = port->id();
        c.queue = q;
        c.queues = queues;
        c.tx_mbufs = 2048;
        (*hosts)[q] = EngineHost::create(c, error);
        if (!(*hosts)[q]) return false;
      }
    }
    return true;
  }
  ~SteeredPair() {
    for (Port* p : {a.get(), b.get()})
      if (p) p->drain_rx();
    for (auto& h : hosts_a) h.reset();
    for (auto& h : hosts_b) h.reset();
    for (Port* p : {a.get(), b.get()})
      if (p) p->drain_rx();
  }
  void poll_all() {
    for (std::uint16_t q = 0; q < queues; ++q) {
      hosts_a[q]->poll_once();
      hosts_b[q]->poll_once();
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

TEST(Steering, EachQueueCarriesOnlyItsOwnConnections) {
  SteeredPair p;
  std::string error;
  ASSERT_TRUE(p.create(error)) << error;
  // Queue q: QPNs with qpn % 2 == q on both ends.
  const std::array<std::uint32_t, queues> qpn_a = {0x100, 0x301}, qpn_b = {0x202, 0x403};
  for (std::uint16_t q = 0; q < queues; ++q) {
    p.conn_a[q] = p.hosts_a[q]->add_connection(config(qpn_a[q], qpn_b[q]), nullptr, error);
    ASSERT_NE(p.conn_a[q], nullptr) << error;
    p.conn_b[q] = p.hosts_b[q]->add_connection(config(qpn_b[q], qpn_a[q]), nullptr, error);
    ASSERT_NE(p.conn_b[q], nullptr) << error;
    p.conn_a[q]->connect();
    p.conn_b[q]->connect();
  }
  constexpr std::size_t size = 256 * 1024;
  std::array<std::vector<std::uint8_t>, queues> src, dst;
  for (std::uint16_t q = 0; q < queues; ++q) {
    src[q].resize(size);
    for (std::size_t i = 0; i < size; ++i) src[q][i] = static_cast<std::uint8_t>(i * 7 + q * 101);
    dst[q].assign(size, 0);
    transport::SendRequest r;
    r.wr_id = q;
    r.op = transport::SendOp::write;
    r.local_addr = src[q].data();
    r.length = size;
    r.lkey = p.hosts_a[q]->memory().register_region(src[q].data(), size, transport::access_local_write);
    r.remote_addr = reinterpret_cast<std::uint64_t>(dst[q].data());
    r.rkey = p.hosts_b[q]->memory().register_region(dst[q].data(), size,
                                                    transport::access_local_write | transport::access_remote_write);
    ASSERT_EQ(p.conn_a[q]->post_send(r), transport::PostResult::ok);
  }
  std::array<std::vector<transport::Completion>, queues> done;
  for (int turn = 0; turn < 200000 && (done[0].empty() || done[1].empty()); ++turn) {
    p.poll_all();
    for (std::uint16_t q = 0; q < queues; ++q) p.conn_a[q]->poll_completions(done[q]);
  }
  for (int turn = 0; turn < 1000; ++turn) p.poll_all();  // the last ACKs
  for (std::uint16_t q = 0; q < queues; ++q) {
    ASSERT_EQ(done[q].size(), 1u) << "queue " << q;
    EXPECT_EQ(done[q][0].status, transport::CompletionStatus::success);
    EXPECT_EQ(std::memcmp(src[q].data(), dst[q].data(), size), 0) << "queue " << q;
    for (const EngineHost* h : {p.hosts_a[q].get(), p.hosts_b[q].get()}) {
      EXPECT_GT(h->counters().rx_delivered, 0u) << h->config().name;
      EXPECT_EQ(h->counters().rx_misdirected, 0u) << h->config().name;
      EXPECT_EQ(h->counters().rx_unknown_qpn, 0u) << h->config().name;
    }
    // 256 packets of 1 KiB, each received by B's host of this queue only.
    EXPECT_EQ(p.conn_b[q]->counters().data_packets_received, size / 1024) << "queue " << q;
  }
}

TEST(Steering, AConnectionOnTheWrongQueueIsRefusedAndAStrayFrameCounted) {
  SteeredPair p;
  std::string error;
  ASSERT_TRUE(p.create(error)) << error;
  EXPECT_EQ(p.hosts_a[0]->add_connection(config(0x101, 0x200), nullptr, error), nullptr);
  EXPECT_NE(error.find("steer to queues 1 and 0, but this host owns queue 0 of 2"), std::string::npos) << error;
  EXPECT_EQ(p.hosts_a[1]->add_connection(config(0x101, 0x200), nullptr, error), nullptr);
  EXPECT_NE(error.find("pick QPNs with qpn % 2 == 1 on both ends"), std::string::npos) << error;

  // A frame for queue 1's QPN 0x203 sent on queue 0 reaches B's queue-0 host.
  wire::FrameSpec s;
  s.bth.opcode = 0xc5;  // MR_PROBE: headers only
  s.bth.dest_qp = 0x203;
  std::vector<std::uint8_t> frame(256);
  frame.resize(wire::build_frame(s, {}, frame));
  ASSERT_TRUE(p.hosts_a[0]->send_frame(frame));
  // And one for an even QPN no connection has: unknown, not misdirected.
  s.bth.dest_qp = 0x204;
  frame.resize(256);
  frame.resize(wire::build_frame(s, {}, frame));
  ASSERT_TRUE(p.hosts_a[0]->send_frame(frame));
  for (int turn = 0; turn < 10; ++turn) p.poll_all();
  EXPECT_EQ(p.hosts_b[0]->counters().rx_misdirected, 1u);
  EXPECT_EQ(p.hosts_b[0]->counters().rx_unknown_qpn, 1u);
  EXPECT_EQ(p.hosts_b[1]->counters().rx_frames, 0u);
}

// The flow rules installed on a port whose PMD has no flow engine (net_ring
// here; net_af_packet, net_tap alike): refused with the PMD's reason,
// nothing left installed, and the queue count checked first.
TEST(Steering, FlowRulesOnAPortWithoutAFlowEngineAreRefusedWithTheReason) {
  std::unique_ptr<Port> a, b;
  std::string error;
  PortSetup s;
  s.queues = 2;
  s.mbufs = 2048;
  ASSERT_TRUE(Port::create_ring_pair("st_flow_a", "st_flow_b", s, a, b, error)) << error;
  ASSERT_TRUE(a->start(error) && b->start(error)) << error;
  std::vector<rte_flow*> rules;
  error.clear();
  EXPECT_FALSE(install_bth_queue_rules(a->id(), 2, false, rules, error));
  EXPECT_TRUE(rules.empty());
  EXPECT_EQ(error.rfind("the rule for QP 1 was refused: ", 0), 0u) << error;  // the first one tried
  EXPECT_GT(error.size(), std::string("the rule for QP 1 was refused: ").size()) << error;
  error.clear();
  EXPECT_FALSE(install_bth_queue_rules(a->id(), 3, true, rules, error));
  EXPECT_EQ(error.rfind("3 queues: a rule on the QPN's low byte needs a power of two", 0), 0u) << error;
  EXPECT_TRUE(rules.empty());
  a->drain_rx();
  b->drain_rx();
}

}  // namespace
}  // namespace metaroce::engine
