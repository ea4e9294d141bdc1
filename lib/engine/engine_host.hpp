// One transport host per lcore on a real DPDK port queue: a timing wheel, a
// memory registry and the connections it owns, demultiplexed by destination
// QPN. The same thing as tests/transport/sim_host.hpp, on mbufs and the TSC.
//
// One turn of the poll loop (poll_once):
//   rx burst -> parse (ICRC checked in software unless the NIC offloads it;
//   a bad frame is counted under its ParseError name and freed) -> the
//   connection of its destination QP (its VLAN checked) -> wheel.advance(now)
//   -> transmit what the PMD did not take last turn -> Connection::poll for
//   each connection -> descriptors to mbufs (copied, or payload attached in
//   place) -> tx burst. What the PMD does not take waits for the next turn,
//   and a frame that finds the tx mempool empty is copied aside and built on
//   a later turn (both counted, neither dropped); connections are not polled
//   while anything waits.
//
// Threading: every member runs on the owning lcore, except counters(),
// which others may read as a racy snapshot.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_counters.hpp"
#include "engine/mbuf_frames.hpp"
#include "engine/tsc_clock.hpp"
#include "timer/wheel.hpp"
#include "transport/connection.hpp"

struct rte_mbuf;

namespace metaroce::engine {

// Destination QP of connection-manager frames (the GSI QP of InfiniBand).
inline constexpr std::uint32_t management_qpn = 1;

// Steering: on a port with several queues, the connection whose QPN is q is
// owned by the host (lcore) of queue q % queues on each end, and its frames
// travel on that queue (net_ring: tx queue i is the peer's rx queue i; a NIC
// steers by flow rule). Both ends of a connection pick QPNs of the same
// queue, so a host only ever transmits on, and receives from, its own queue.
[[nodiscard]] constexpr std::uint16_t steering_queue(std::uint32_t qpn, std::uint16_t queues) noexcept {
  return queues <= 1 ? 0 : static_cast<std::uint16_t>(qpn % queues);
}

struct EngineHostConfig {
  std::string name = "host";
  std::uint16_t port_id = 0;
  std::uint16_t queue = 0;
  std::uint16_t queues = 1;        // queues of the port: connections must steer to `queue`
  bool icrc_offload = false;       // the NIC verified the ICRC: skip it in software
  bool multi_segment_tx = true;    // the port chains mbufs (Port::multi_segment_tx)
  std::uint32_t zero_copy_threshold = default_zero_copy_threshold;
  std::uint32_t tx_mbufs = 16384;
  std::uint16_t tx_data_room = 0;  // 0: room for a 9000-byte frame
  // Connections this host may own (each is about 700 KiB with the default
  // windows): add_connection refuses more (connections_refused).
  std::uint32_t max_connections = 1024;
  // 0: busy poll. Otherwise run() sleeps this long after a turn that did
  // nothing, so processes can share cores (costs latency).
  std::uint32_t idle_sleep_us = 0;
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
  using ManagementHandler = std::function<void(std::uint64_t now_ns, const wire::ParsedFrame&)>;
  void set_management_handler(ManagementHandler handler) { management_ = std::move(handler); }
  // Queues one whole frame (ICRC included) for transmission with the
  // connections' frames (held in host memory if no mbuf is free); false
  // only when it is larger than an mbuf (tx_frame_too_large).
  bool send_frame(std::span<const std::uint8_t> frame);
  [[nodiscard]] transport::MemoryRegistry& memory() noexcept { return memory_; }

  // One turn; returns frames received + frames transmitted (0: idle).
  std::size_t poll_once();
  // Turns until `stop` becomes true, sleeping when idle if configured.
  template <class StopFlag>
  void run(const StopFlag& stop) {
    while (!stop) idle(poll_once() == 0);
  }

  [[nodiscard]] std::uint64_t now_ns() const noexcept { return clock_.now_ns(); }
  [[nodiscard]] const TscClock& clock() const noexcept { return clock_; }
  [[nodiscard]] const EngineCounters& counters() const noexcept { return counters_; }
  // Copies the port's rx_nombuf into counters().rx_mempool_empty.
  void refresh_port_counters() noexcept;
  [[nodiscard]] std::size_t tx_waiting() const noexcept { return tx_pending_.size() - tx_pending_head_; }
  // Frames that found no mbuf and wait, copied, for the pool to refill.
  [[nodiscard]] std::size_t tx_held() const noexcept { return held_ends_.size() - held_head_; }
  [[nodiscard]] const EngineHostConfig& config() const noexcept { return config_; }

 private:
  explicit EngineHost(const EngineHostConfig& config) : config_(config) {}
  void receive(std::uint64_t now, rte_mbuf* m, const wire::ParseOptions::Precomputed* icrc = nullptr);
  // Receives four frames of a burst that look alike (four_alike in the
  // .cpp), their ICRCs folded together.
  void receive_four(std::uint64_t now, rte_mbuf* const* frames);
  std::size_t flush_tx();
  void poll_connections(std::uint64_t now);
  void hold(std::size_t i);
  bool release_held();
  void idle(bool nothing_done);

  static constexpr std::uint16_t burst_size = 64;

  EngineHostConfig config_;
  TscClock clock_;
  timer::Wheel wheel_{0};
  transport::MemoryRegistry memory_;
  std::unordered_map<std::uint32_t, std::unique_ptr<transport::Connection>> connections_;
  std::vector<transport::Connection*> connection_list_;  // polled in order
  std::unique_ptr<TxMbufBuilder> tx_builder_;
  transport::TxBatch batch_;
  std::vector<rte_mbuf*> tx_pending_;
  std::size_t tx_pending_head_ = 0;
  // Frames the connections emitted when the tx mempool was empty, copied
  // whole (their payload may be the application's, reusable once
  // acknowledged): held_ends_[k] is where frame k ends in held_bytes_.
  std::vector<std::uint8_t> held_bytes_;
  std::vector<std::size_t> held_ends_;
  std::size_t held_head_ = 0;  // next held frame to build
  std::size_t poll_cursor_ = 0;  // the connection polled first next turn
  std::vector<std::uint8_t> rx_scratch_;
  EngineCounters counters_;
  std::uint64_t last_poll_ns_ = 0;
  ManagementHandler management_;
};

}  // namespace metaroce::engine
