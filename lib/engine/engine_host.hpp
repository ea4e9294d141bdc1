// One transport host per lcore on a real DPDK port queue: the DPDK-free
// host (lib/host: wheel, registry, pools, connections by destination QPN,
// the ready list, held frames), which the simulator runs too, on mbufs and
// the TSC. This class only converts between mbufs and the host's spans.
//
// One turn of the poll loop (poll_once):
//   rx burst -> ICRCs of four alike frames folded together -> Host::receive
//   (parse, ICRC checked in software unless the NIC offloads it; a bad frame
//   is counted under its ParseError name; the connection of its destination
//   QP, its VLAN checked) -> mbuf freed -> timers -> transmit what the PMD
//   did not take last turn -> Host::transmit: held frames, then
//   Connection::poll for each connection on the ready list -> descriptors to
//   mbufs (copied, or payload attached in place) -> tx burst. What the PMD
//   does not take waits for the next turn, and a frame that finds the tx
//   mempool empty is copied aside and built on a later turn (both counted,
//   neither dropped); connections are not polled while anything waits.
//
// Ports: the host drives its main port's queue (port index 0) and one queue
// on each further port (EngineHostConfig::more_ports, index 1, 2, ...), all
// from the same lcore: a turn receives from every port, and each frame
// leaves through the port its descriptor names (TxDescriptor::port, a
// plane's port index; frames the host builds itself through port 0). A
// port index the host lacks is dropped (tx_no_such_port). On a host of
// several ports, every link_poll_ns of the host clock each port's link is read
// (rte_eth_link_get_nowait) and a change told to the connections
// (Host::set_port_link), and frames for a port whose link is down are
// dropped (tx_dropped_link_down): the transport resends them on other
// planes. A host of one port does neither: its frames wait for the port.
//
// Threading: every member runs on the owning lcore, except counters(),
// which others may read as a racy snapshot.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/engine_counters.hpp"
#include "engine/mbuf_frames.hpp"
#include "engine/tsc_clock.hpp"
#include "host/host.hpp"
#include "transport/connection.hpp"

struct rte_mbuf;
struct rte_ring;

namespace metaroce::engine {

using host::management_qpn;
using host::steering_queue;

// A further port of a host (one per plane after the first) and its queue.
struct EnginePortQueue {
  std::uint16_t port_id = 0;
  std::uint16_t queue = 0;
};

struct EngineHostConfig {
  std::string name = "host";
  std::uint16_t port_id = 0;
  std::uint16_t queue = 0;
  // Port index k >= 1 of the host (TxDescriptor::port, PlaneAddresses::port)
  // is more_ports[k - 1]; index 0 is port_id/queue.
  std::vector<EnginePortQueue> more_ports;
  // How often (host clock) every port's link is read; 0: never.
  std::uint64_t link_poll_ns = 10'000'000;
  std::uint16_t queues = 1;        // queues of the port: connections must steer to `queue`
  bool icrc_offload = false;       // the NIC verified the ICRC: skip it in software
  bool multi_segment_tx = true;    // the port chains mbufs (Port::multi_segment_tx)
  std::uint32_t zero_copy_threshold = default_zero_copy_threshold;
  std::uint32_t tx_mbufs = 16384;
  std::uint16_t tx_data_room = 0;  // 0: room for a 9000-byte frame
  // Connections this host may own (an idle one holds a few KiB, a busy one
  // what its traffic in flight needs: doc/DESIGN.md, "Connection memory"):
  // add_connection refuses more (connections_refused).
  std::uint32_t max_connections = 16384;
  transport::PoolLimits pool_limits{};
  // Frames one turn takes from the connections (host::HostConfig::
  // tx_budget_frames): a few bursts, so that what waits for the ring stays
  // small and warm however many connections are ready. 0: no limit.
  std::uint32_t tx_budget_frames = 256;
  // 0: busy poll. Otherwise run() sleeps this long after a turn that did
  // nothing, so processes can share cores (costs latency).
  std::uint32_t idle_sleep_us = 0;
};

// Software hand-off between a node's lcores (Node, on a PMD that cannot
// steer by QPN): lcore i's ring takes the frames other lcores received for
// its QPNs (many producers, one consumer: lcore i); the mbufs move, their
// bytes are not copied.
struct RxHandoff {
  std::vector<rte_ring*> rings;      // by lcore; empty: no hand-off
  std::uint16_t self = 0;            // this host's lcore
  std::uint16_t management_lcore = 0;  // where QP 1's frames go
  // Lanes, each with a connection manager of its own: a frame to QP 1 goes
  // to the lcore of the QPN this reads from it (cm::peek_owner_qpn), or to
  // management_lcore when it reads none.
  bool (*management_owner)(std::span<const std::uint8_t>, std::uint32_t&) noexcept = nullptr;
  // Frames that are not RoCEv2 (ARP, neighbour discovery) go to every lcore,
  // each a reference to the same mbuf (rx_shared), so that each lcore's
  // neighbour cache learns the answers to its own requests; without this
  // they stay with the lcore that took them.
  bool share_other_frames = false;
};

class alignas(64) EngineHost {
 public:
  static std::unique_ptr<EngineHost> create(const EngineHostConfig& config, std::string& error);
  ~EngineHost();
  EngineHost(const EngineHost&) = delete;
  EngineHost& operator=(const EngineHost&) = delete;

  // Creates a connection on this host's wheel and registry; nullptr and
  // `error` when the config is not usable, its local QPN is taken or the
  // host has max_connections already.
  transport::Connection* add_connection(const transport::ConnectionConfig& config,
                                        std::unique_ptr<transport::CongestionControl> congestion,
                                        std::string& error);
  [[nodiscard]] transport::Connection* connection(std::uint32_t local_qpn) noexcept;
  // Destroys a connection (its timers go with it); false if there is none.
  bool remove_connection(std::uint32_t local_qpn);

  // Frames addressed to QP 1 (the connection manager's, lib/cm) go to this
  // handler instead of a connection; without one they count as unknown QPN.
  using ManagementHandler = host::Host::ManagementHandler;
  void set_management_handler(ManagementHandler handler) { host_.set_management_handler(std::move(handler)); }
  // Queues one whole frame (ICRC included) for transmission with the
  // connections' frames (held in host memory if no mbuf is free); false
  // only when it is larger than an mbuf (tx_frame_too_large).
  bool send_frame(std::span<const std::uint8_t> frame);
  [[nodiscard]] transport::MemoryRegistry& memory() noexcept { return host_.memory(); }
  // The DPDK-free host this engine host drives.
  [[nodiscard]] host::Host& host() noexcept { return host_; }
  [[nodiscard]] const host::Host& host() const noexcept { return host_; }

  // Before the first poll_once only. With hand-off, each turn first receives
  // what other lcores handed this one, then passes on each frame from the
  // port whose destination QP another lcore owns (QP 1: the management
  // lcore's), and parses only its own.
  void set_rx_handoff(RxHandoff handoff) { handoff_ = std::move(handoff); }
  [[nodiscard]] const RxHandoff& rx_handoff() const noexcept { return handoff_; }

  // One turn; returns frames received + frames transmitted (0: idle).
  std::size_t poll_once();
  // Turns until `stop` becomes true, sleeping when idle if configured.
  template <class StopFlag>
  void run(const StopFlag& stop) {
    while (!stop) idle(poll_once() == 0);
  }

  [[nodiscard]] std::uint64_t now_ns() const noexcept { return clock_.now_ns(); }
  [[nodiscard]] const TscClock& clock() const noexcept { return clock_; }
  [[nodiscard]] const EngineCounters& counters() const noexcept { return host_.counters(); }
  // Copies the port's rx_nombuf into counters().rx_mempool_empty.
  void refresh_port_counters() noexcept;
  [[nodiscard]] std::size_t tx_waiting() const noexcept {
    std::size_t n = 0;
    for (const TxPort& p : ports_) n += p.pending.size() - p.head;
    return n;
  }
  // Ports this host drives (1 + more_ports) and what it last read of port
  // index k's link (up until a poll says otherwise).
  [[nodiscard]] std::uint16_t ports() const noexcept { return static_cast<std::uint16_t>(ports_.size()); }
  [[nodiscard]] bool port_link_up(std::uint16_t k) const noexcept { return k < ports_.size() && ports_[k].link_up; }
  // Reads every port's link now and tells the host of changes (poll_once
  // does this every link_poll_ns on a host of several ports).
  void poll_links(std::uint64_t now);
  // Frames that found no mbuf and wait, copied, for the pool to refill.
  [[nodiscard]] std::size_t tx_held() const noexcept { return host_.tx_held(); }
  [[nodiscard]] const EngineHostConfig& config() const noexcept { return config_; }

 private:
  explicit EngineHost(const EngineHostConfig& config);
  void receive(std::uint64_t now, rte_mbuf* m, const wire::ParseOptions::Precomputed* icrc = nullptr);
  // Receives four frames of a burst that look alike (four_alike in the
  // .cpp), their ICRCs folded together.
  void receive_four(std::uint64_t now, rte_mbuf* const* frames);
  // Receives and frees `n` frames.
  void receive_burst(std::uint64_t now, rte_mbuf* const* frames, std::uint16_t n);
  // Passes the frames of `rx` that another lcore owns to it; returns how
  // many stay (compacted at the front).
  std::uint16_t hand_off(rte_mbuf** rx, std::uint16_t n);
  std::size_t flush_tx();
  std::size_t flush_port(std::uint16_t k);
  // Frames for port k are dropped: its link is down and the host has other
  // ports (planes) to carry the traffic. A host of one port keeps them
  // waiting for the link (or a stopped port's start), as before planes.
  [[nodiscard]] bool drops_for_link(std::uint16_t k) const noexcept { return ports_.size() > 1 && !ports_[k].link_up; }
  void idle(bool nothing_done);

  // The host's frames to mbufs, queued in tx_pending_.
  class MbufSink final : public host::FrameSink {
   public:
    explicit MbufSink(EngineHost& owner) : owner_(owner) {}
    std::size_t take(const transport::TxBatch& batch, std::size_t first) override;
    bool take_copy(std::span<const std::uint8_t> frame) override;
    [[nodiscard]] std::size_t max_copied_frame() const override;
    void reclaim() override;

   private:
    EngineHost& owner_;
  };

  static constexpr std::uint16_t burst_size = 64;

  EngineHostConfig config_;
  TscClock clock_;
  host::Host host_;
  MbufSink sink_{*this};
  std::unique_ptr<TxMbufBuilder> tx_builder_;
  // One per port index: frames built for it, waiting for its PMD.
  struct TxPort {
    std::uint16_t port_id = 0;
    std::uint16_t queue = 0;
    bool link_up = true;
    std::vector<rte_mbuf*> pending;
    std::size_t head = 0;
  };
  std::vector<TxPort> ports_;
  std::uint64_t next_link_poll_ns_ = 0;
  std::vector<std::uint8_t> rx_scratch_;
  std::uint64_t last_poll_ns_ = 0;
  static constexpr std::uint64_t stall_ns = 1'000'000;  // a gap between turns this long is a poll_stall
  RxHandoff handoff_;
};

}  // namespace metaroce::engine
