// A port stopped and restarted in the middle of a verified transfer, on a
// net_ring pair: the sender's port (nothing leaves, its peer's ACKs wait in
// its receive ring) or the receiver's (the sender fills the receiver's ring
// to its capacity, then finds it full), three times per transfer, in both
// modes. What DPDK 22.11 does on rte_eth_dev_stop: the port's rx and tx burst
// functions become dummies that take and give nothing, the rings keep every
// frame, and rte_eth_dev_start puts the PMD's functions back. So nothing is
// lost: the transfer completes with no retransmission, and while a port is
// stopped every turn of a host with frames waiting counts tx_ring_full once
// and tx_deferred per frame waiting, exactly. A NIC is not so kind (its
// receive descriptors are reset on stop): the "flushed" cases empty the
// stopped receiver's ring, and the sender resends exactly what was lost
// (metaroce), or everything from the first lost PSN on (rocev2).
#include <gtest/gtest.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_host.hpp"
#include "engine/port.hpp"
#include "guarded_buffers.hpp"
#include "transport/connection.hpp"

namespace metaroce::engine {
namespace {

// Descriptors per queue: the rings hold 127 frames (a ring of 128 slots
// keeps one free), fewer than either mode's window, so a running sender
// fills a stopped receiver's ring.
constexpr std::uint16_t ring_descriptors = 128;
constexpr std::uint64_t ring_capacity = ring_descriptors - 1;

// Two ports of a net_ring pair, a host on each, one connection between them
// set up in memory. Timers far beyond the test (min RTO 1 s): no timeout can
// resend anything, so every retransmission would mean a lost frame.
struct Pair {
  explicit Pair(transport::Mode mode) {
    static unsigned instance = 0;
    const std::string n = std::to_string(instance++);
    PortSetup setup;
    setup.rx_desc = ring_descriptors;
    setup.tx_desc = ring_descriptors;
    if (!Port::create_ring_pair("pf_a" + n, "pf_b" + n, setup, port_a, port_b, error) || !port_a->start(error) ||
        !port_b->start(error))
      return;
    transport::ConnectionConfig a;
    a.mode = mode;
    a.mtu = 1024;
    a.paths = mode == transport::Mode::metaroce ? 4 : 1;
    a.initial_rto = 2'000'000'000;
    a.min_rto = 1'000'000'000;
    a.max_rto = 4'000'000'000;
    const auto make_host = [&](const char* side, const Port& port, std::unique_ptr<EngineHost>& out) {
      EngineHostConfig hc;
      hc.name = std::string("pf") + side + n;
      hc.port_id = port.id();
      hc.tx_mbufs = 4096;
      hc.zero_copy_threshold = zero_copy_never;
      hc.tx_data_room = data_room_for_mtu(a.mtu + 256);
      out = EngineHost::create(hc, error);
      return out != nullptr;
    };
    if (!make_host("A", *port_a, host_a) || !make_host("B", *port_b, host_b)) return;
    a.endpoints.local_mac = {0x02, 0, 0, 0, 0, 0x0a};
    a.endpoints.peer_mac = {0x02, 0, 0, 0, 0, 0x0b};
    a.endpoints.local_ipv4 = 0x0a000001;
    a.endpoints.peer_ipv4 = 0x0a000002;
    a.local_qpn = 0x101;
    a.peer_qpn = 0x202;
    a.initial_psn = 0x10000;
    a.peer_initial_psn = 0x20000;
    transport::ConnectionConfig b = a;
    std::swap(b.endpoints.local_mac, b.endpoints.peer_mac);
    std::swap(b.endpoints.local_ipv4, b.endpoints.peer_ipv4);
    std::swap(b.local_qpn, b.peer_qpn);
    std::swap(b.initial_psn, b.peer_initial_psn);
    conn_a = host_a->add_connection(a, nullptr, error);
    conn_b = conn_a != nullptr ? host_b->add_connection(b, nullptr, error) : nullptr;
    if (conn_b == nullptr) return;
    conn_a->connect();
    conn_b->connect();
  }
  ~Pair() {
    // Every mbuf back to its pool before the pools go (the ports drain
    // their rings, started or not).
    for (Port* p : {port_a.get(), port_b.get()})
      if (p != nullptr) p->drain_rx();
    host_a.reset();
    host_b.reset();
    for (Port* p : {port_a.get(), port_b.get()})
      if (p != nullptr) p->drain_rx();
  }
  [[nodiscard]] bool ready() const { return conn_b != nullptr; }
  void turn() {
    host_a->poll_once();
    host_b->poll_once();
  }

  std::string error;
  std::unique_ptr<Port> port_a, port_b;
  std::unique_ptr<EngineHost> host_a, host_b;
  transport::Connection* conn_a = nullptr;
  transport::Connection* conn_b = nullptr;
};

// Source at A, destination at B between canaries; WRITEs of `each` bytes.
struct Buffers : test::GuardedBuffers {
  Buffers(Pair& p, std::size_t size) : GuardedBuffers(p.host_a->memory(), p.host_b->memory(), size, 13, 509) {}
};

// DPDK 22.11 logs an error and writes a stack trace to stderr (directly,
// not through rte_log) the first time a stopped port's rx or tx burst is
// called after each stop: expected here, so stderr goes to /dev/null while a
// port is stopped (gtest reports failures on stdout).
class QuietStoppedPort {
 public:
  QuietStoppedPort() {
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved_ >= 0 && null >= 0) ::dup2(null, STDERR_FILENO);
    if (null >= 0) ::close(null);
  }
  ~QuietStoppedPort() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
  }
  QuietStoppedPort(const QuietStoppedPort&) = delete;
  QuietStoppedPort& operator=(const QuietStoppedPort&) = delete;

 private:
  int saved_ = -1;
};

enum class Stopped : std::uint8_t { sender, receiver };
struct Case {
  transport::Mode mode;
  Stopped side;
  bool flush = false;  // the stopped receiver loses what its ring holds
};

class PortStopStart : public ::testing::TestWithParam<Case> {};

// What a host counted, at one moment.
struct Snapshot {
  explicit Snapshot(const EngineHost& h)
      : tx_frames(h.counters().tx_frames),
        rx_frames(h.counters().rx_frames),
        tx_ring_full(h.counters().tx_ring_full),
        tx_deferred(h.counters().tx_deferred),
        waiting(h.tx_waiting()) {}
  std::uint64_t tx_frames, rx_frames, tx_ring_full, tx_deferred, waiting;
};

TEST_P(PortStopStart, TransferCompletesAndEveryStoppedTurnAndFrameIsCounted) {
  const Case c = GetParam();
  Pair p(c.mode);
  ASSERT_TRUE(p.ready()) << p.error;
  constexpr std::size_t size = 8u << 20, each = 128u << 10;
  Buffers buffers(p, size);
  const std::size_t writes = buffers.post_writes(*p.conn_a, each);
  const std::uint64_t data_packets = size / p.conn_a->config().mtu;
  Port& stopped = c.side == Stopped::sender ? *p.port_a : *p.port_b;
  const EngineHost& host_a = *p.host_a;
  const EngineHost& host_b = *p.host_b;
  // The stopped side's last frames and ACKs find their place: at least
  // this many turns and this long (a delayed ACK waits ack_delay, 4 us).
  constexpr int settle_turns = 50;
  constexpr std::uint64_t settle_ns = 1'000'000;
  constexpr int stopped_turns = 200;

  std::uint64_t flushed = 0;
  std::vector<transport::Completion> done;
  for (int cycle = 0; cycle < 3; ++cycle) {
    SCOPED_TRACE("stop " + std::to_string(cycle + 1));
    for (int i = 0; i < 30; ++i) p.turn();
    p.conn_a->poll_completions(done);
    ASSERT_LT(p.conn_b->counters().data_packets_received, data_packets) << "the transfer ended before the stop";
    // A receiver that takes a whole burst per turn keeps up with its
    // sender: the sender alone for a few turns fills the ring, so that the
    // stop finds frames waiting (and the sender's connection, not polled
    // while they wait, sends nothing more, tail-loss probes included).
    for (int i = 0; i < 8 && host_a.tx_waiting() == 0; ++i) p.host_a->poll_once();
    ASSERT_GT(host_a.tx_waiting(), 0u) << "the sender has nothing waiting when the stop comes";

    const std::uint64_t probes_before = p.conn_a->counters().probes_sent;
    const QuietStoppedPort quiet;
    ASSERT_TRUE(stopped.stop());
    EXPECT_FALSE(stopped.started());
    EXPECT_FALSE(stopped.link().pmd_up);
    EXPECT_TRUE(stopped.link().interface.empty());
    EXPECT_TRUE(stopped.stop()) << "a second stop is a no-op";
    const std::uint64_t settle_start = host_a.now_ns();
    for (int i = 0; i < settle_turns || host_a.now_ns() - settle_start < settle_ns; ++i) p.turn();
    const Snapshot a0(host_a), b0(host_b);
    for (int i = 0; i < stopped_turns; ++i) p.turn();
    const Snapshot a1(host_a), b1(host_b);

    if (c.side == Stopped::receiver) {
      // B takes nothing and sends nothing; A filled B's ring to its
      // capacity and keeps the rest: each turn it offers them again.
      EXPECT_EQ(b1.rx_frames, b0.rx_frames);
      EXPECT_EQ(b1.tx_frames, b0.tx_frames);
      EXPECT_EQ(a1.tx_frames, a0.tx_frames);
      EXPECT_EQ(a1.tx_frames - flushed - b1.rx_frames, ring_capacity) << "B's receive ring holds exactly its capacity";
      EXPECT_EQ(a1.rx_frames, b1.tx_frames) << "A took every ACK B sent before its stop";
    } else {
      // A sends nothing and takes nothing; B took everything A sent before
      // the stop and acknowledged it into A's receive ring, which keeps it.
      EXPECT_EQ(a1.tx_frames, a0.tx_frames);
      EXPECT_EQ(a1.rx_frames, a0.rx_frames);
      EXPECT_EQ(b1.rx_frames, a1.tx_frames) << "B took every frame A sent before its stop";
      EXPECT_GT(b1.tx_frames, a1.rx_frames) << "no ACK waits in A's receive ring";
      EXPECT_EQ(b1.tx_frames, b0.tx_frames);
    }
    // The sender has frames it could not hand over, the same ones all along
    // (connections are not polled while any wait): one tx_ring_full per turn
    // and tx_deferred for each frame waiting.
    EXPECT_GT(a0.waiting, 0u) << "the stop caught the sender with nothing to send";
    EXPECT_EQ(a1.waiting, a0.waiting);
    EXPECT_EQ(a1.tx_ring_full - a0.tx_ring_full, static_cast<std::uint64_t>(stopped_turns));
    EXPECT_EQ(a1.tx_deferred - a0.tx_deferred, stopped_turns * a0.waiting);
    // B's ACKs: a stopped B keeps those its timers made (counted likewise);
    // a running B finds A's ring (holding a few ACKs) never full.
    EXPECT_EQ(b1.waiting, b0.waiting);
    if (c.side == Stopped::sender) {
      EXPECT_EQ(b0.waiting, 0u);
    }
    EXPECT_EQ(b1.tx_ring_full - b0.tx_ring_full, b0.waiting != 0 ? stopped_turns : 0u);
    EXPECT_EQ(b1.tx_deferred - b0.tx_deferred, stopped_turns * b0.waiting);

    if (c.flush) {
      const std::size_t n = p.port_b->drain_rx();
      EXPECT_EQ(n, ring_capacity);
      flushed += n;
    }
    std::string error;
    const std::uint64_t probes_stopped = p.conn_a->counters().probes_sent;
    ASSERT_TRUE(stopped.start(error)) << error;
    EXPECT_TRUE(stopped.started());
    EXPECT_TRUE(stopped.link().up());
    EXPECT_EQ(probes_stopped, probes_before) << "the connection was polled while its frames waited";
  }

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (done.size() < writes && std::chrono::steady_clock::now() < deadline) {
    p.turn();
    p.conn_a->poll_completions(done);
  }
  for (int i = 0; i < 200; ++i) p.turn();  // the last ACKs
  ASSERT_EQ(done.size(), writes);
  for (std::size_t k = 0; k < done.size(); ++k) {
    EXPECT_EQ(done[k].wr_id, k) << "completions out of order";
    EXPECT_EQ(done[k].status, transport::CompletionStatus::success);
  }
  EXPECT_TRUE(buffers.placed());
  EXPECT_TRUE(buffers.canaries_intact());

  // Nothing malformed; nothing lost but what was flushed, and only that
  // (metaroce) or from its first PSN on (rocev2) resent.
  const EngineCounters& a = host_a.counters();
  const EngineCounters& b = host_b.counters();
  EXPECT_EQ(b.rx_frames + flushed, a.tx_frames);
  EXPECT_EQ(a.rx_frames, b.tx_frames);
  EXPECT_EQ(a.dropped(), 0u);
  EXPECT_EQ(b.dropped(), 0u);
  EXPECT_EQ(b.rx_delivered, b.rx_frames);
  EXPECT_EQ(a.tx_mempool_empty + b.tx_mempool_empty, 0u);
  const transport::ConnectionCounters& ca = p.conn_a->counters();
  const transport::ConnectionCounters& cb = p.conn_b->counters();
  EXPECT_EQ(ca.data_packets_sent, data_packets);
  EXPECT_EQ(cb.data_packets_received, data_packets);
  EXPECT_EQ(ca.rto_timeouts, 0u) << "a timeout, not the ACKs, found the loss";
  // Every frame accounted for: A sends data, retransmissions and (metaroce)
  // tail-loss probes, which a stop longer than two RTTs sets off; B sends
  // ACKs (and NAKs), and takes each data frame once, or drops it as a
  // duplicate or (rocev2) as beyond a gap.
  EXPECT_EQ(a.tx_frames, ca.data_packets_sent + ca.retransmitted_packets + ca.probes_sent);
  EXPECT_EQ(b.tx_frames, cb.acks_sent);
  EXPECT_EQ(b.rx_frames,
            cb.data_packets_received + cb.duplicate_packets + cb.out_of_sequence_drops + ca.probes_sent);
  if (!c.flush) {
    EXPECT_EQ(ca.retransmitted_packets, 0u);
    EXPECT_EQ(ca.packets_declared_lost, 0u);
    EXPECT_EQ(cb.duplicate_packets + cb.out_of_sequence_drops, 0u);
  } else if (c.mode == transport::Mode::metaroce) {
    EXPECT_EQ(flushed, 3 * ring_capacity);
    EXPECT_EQ(ca.packets_declared_lost, flushed) << "the SACKs show exactly the flushed packets missing";
    EXPECT_EQ(ca.retransmitted_packets, flushed);
    EXPECT_EQ(cb.duplicate_packets, 0u);
  } else {
    EXPECT_GT(ca.retransmitted_packets, flushed) << "go-back-N resends what followed the gap too";
    EXPECT_GT(cb.out_of_sequence_drops, 0u);
  }
  if (c.mode == transport::Mode::rocev2) {
    EXPECT_EQ(ca.probes_sent, 0u);
  }
  EXPECT_EQ(p.conn_a->state(), transport::ConnectionState::ready);
  EXPECT_EQ(p.conn_b->state(), transport::ConnectionState::ready);
}

INSTANTIATE_TEST_SUITE_P(Engine, PortStopStart,
                         ::testing::Values(Case{transport::Mode::metaroce, Stopped::sender},
                                           Case{transport::Mode::metaroce, Stopped::receiver},
                                           Case{transport::Mode::metaroce, Stopped::receiver, true},
                                           Case{transport::Mode::rocev2, Stopped::sender},
                                           Case{transport::Mode::rocev2, Stopped::receiver},
                                           Case{transport::Mode::rocev2, Stopped::receiver, true}),
                         [](const auto& info) {
                           return std::string(transport::to_string(info.param.mode)) +
                                  (info.param.side == Stopped::sender ? "_sender" : "_receiver") +
                                  (info.param.flush ? "_flushed" : "");
                         });

// A stopped net_ring port receives nothing through ethdev (its rx burst is
// a dummy) but is drained from its rings; a restarted one receives again.
TEST(PortStopStart, StoppedRingPortIsDrainedFromItsRings) {
  std::unique_ptr<Port> a, b;
  std::string error;
  PortSetup setup;
  setup.rx_desc = ring_descriptors;
  setup.tx_desc = ring_descriptors;
  ASSERT_TRUE(Port::create_ring_pair("pf_da", "pf_db", setup, a, b, error)) << error;
  ASSERT_TRUE(a->start(error) && b->start(error)) << error;
  EXPECT_TRUE(b->link().up());
  EXPECT_EQ(b->link().speed_mbps, 10000u) << "net_ring's nominal speed";
  const auto send = [&](unsigned n) {
    unsigned sent = 0;
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf* m = rte_pktmbuf_alloc(a->rx_pool());
      if (m == nullptr) break;
      rte_pktmbuf_append(m, 64);
      if (rte_eth_tx_burst(a->id(), 0, &m, 1) != 1) {
        rte_pktmbuf_free(m);
        break;
      }
      ++sent;
    }
    return sent;
  };
  const QuietStoppedPort quiet;
  ASSERT_TRUE(b->stop());
  EXPECT_EQ(send(200), ring_capacity) << "the stopped port's ring takes its capacity";
  rte_mbuf* got = nullptr;
  EXPECT_EQ(rte_eth_rx_burst(b->id(), 0, &got, 1), 0) << "a stopped port's rx burst gives nothing";
  EXPECT_EQ(b->drain_rx(), ring_capacity);
  ASSERT_TRUE(b->start(error)) << error;
  ASSERT_TRUE(b->start(error)) << "a second start is a no-op";
  EXPECT_EQ(send(5), 5u);
  EXPECT_EQ(b->drain_rx(), 5u);
}

}  // namespace
}  // namespace metaroce::engine
