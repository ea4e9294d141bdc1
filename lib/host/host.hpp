// A transport host: one timing wheel, one memory registry, one set of pools
// and the connections it owns, demultiplexed by destination QPN. No DPDK
// type: the engine (lib/engine, one per lcore, on mbufs and the TSC) and the
// simulator (sim_endpoint.hpp, in virtual time) run this same code, so what
// the simulator measures is what the engine runs.
//
// Receive: receive(now, frame bytes) hands ARP and ICMPv6 frames to the
// neighbour cache when one is enabled (neighbours.hpp: it answers for the
// port's addresses and resolves next hops), parses the rest (a bad one is
// counted under its ParseError name), hands QP 1 to the management handler (the
// connection manager), checks that the QPN is this host's (steering) and
// the frame's VLAN is its connection's, and gives it to the connection.
//
// Transmit: poll_connections(now, sink) polls only the connections on the
// ready list (those with something to do: a post, a frame that needs an
// answer, a timer, a window that opened), oldest first, each at most once a
// turn, and hands their frames to the sink (the engine builds mbufs, the
// simulator copies bytes). Frames the sink cannot take now (no buffer) are
// copied aside, held, and given to it first on a later turn, in order;
// while any are held no connection is polled, and the ones not polled keep
// their place at the front of the ready list (no connection starves). A
// turn stops polling the same way once it has taken
// HostConfig::tx_budget_frames (tx_budget_stops).
// Nothing is dropped but a frame larger than any buffer (tx_frame_too_large).
// The neighbour cache's answers and requests go first, as held frames do.
//
// Threading: every member runs on the owning thread, except counters(),
// which others may read as a racy snapshot.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "host/host_counters.hpp"
#include "host/neighbours.hpp"
#include "host/qpn_table.hpp"
#include "timer/wheel.hpp"
#include "transport/connection.hpp"
#include "transport/pools.hpp"
#include "transport/ready_list.hpp"
#include "wire/frame.hpp"

namespace metaroce::host {

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

// The start-up steering check's probes (engine::check_steering): the probe
// for lcore `lcore` of `lcores` goes to a QPN of that lcore's queue at the
// top of the 24-bit space, where connections do not draw theirs. A host
// counts a probe for its own queue as rx_steering_probes (not as an
// unknown QPN: it was expected), and drops it.
inline constexpr std::uint32_t steering_probe_base = 0xff0000;
inline constexpr std::uint32_t max_steering_lcores = 128;
[[nodiscard]] constexpr std::uint32_t steering_probe_qpn(std::uint16_t lcore, std::uint16_t lcores) noexcept {
  const std::uint32_t n = lcores == 0 ? 1 : lcores;
  return steering_probe_base - steering_probe_base % n + lcore;
}
[[nodiscard]] constexpr bool is_steering_probe_qpn(std::uint32_t qpn) noexcept {
  return qpn >= steering_probe_base - max_steering_lcores && qpn < steering_probe_base + max_steering_lcores;
}

struct HostConfig {
  std::string name = "host";
  std::uint16_t queue = 0;   // the queue this host owns ...
  std::uint16_t queues = 1;  // ... of this many: its connections' QPNs must steer to it
  // Connections this host may own: add_connection refuses more
  // (connections_refused). An idle one costs a few KiB (doc/DESIGN.md).
  std::uint32_t max_connections = 16384;
  transport::PoolLimits pool_limits{};
  // Frames a transmit turn takes from the connections before it stops
  // polling them (the rest keep their places at the front of the ready
  // list, for the next turn); 0: no limit. A turn always polls at least one
  // connection. Without a limit, thousands of ready connections each hand
  // over a burst in one turn: tens of thousands of frames wait in host
  // memory for a ring that takes a few hundred, their mbufs and packet
  // state grow cold, and the turn lasts milliseconds.
  std::uint32_t tx_budget_frames = 0;
};

// Where a host's frames go.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // Takes frames first, first + 1, ... of `batch`, in order, until it has
  // no buffer for one; returns how many it took (a frame it drops as too
  // large counts as taken, under tx_frame_too_large). The host holds the rest.
  virtual std::size_t take(const transport::TxBatch& batch, std::size_t first) = 0;
  // Takes one whole frame (ICRC included), copied; false when it has no
  // buffer now.
  virtual bool take_copy(std::span<const std::uint8_t> frame) = 0;
  // The largest frame take_copy can ever take.
  [[nodiscard]] virtual std::size_t max_copied_frame() const = 0;
  // Called when held frames wait and the sink had no buffer: a NIC frees
  // what it has sent only when asked.
  virtual void reclaim() {}
};

class alignas(64) Host {
 public:
  explicit Host(const HostConfig& config);
  ~Host();
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  // Creates a connection on this host's wheel, registry and pools; nullptr
  // and `error` when the config is not usable, its local QPN is taken, its
  // QPNs steer to another queue or the host has max_connections already.
  transport::Connection* add_connection(const transport::ConnectionConfig& config,
                                        std::unique_ptr<transport::CongestionControl> congestion,
                                        std::string& error);
  [[nodiscard]] transport::Connection* connection(std::uint32_t local_qpn) noexcept;
  // Destroys a connection (its timers, pool blocks and ready-list place go
  // with it); false if there is none.
  bool remove_connection(std::uint32_t local_qpn);
  // Makes connection `local_qpn` secure (Connection::set_security): its
  // frames are parsed with their trailer from now on. A connection of a
  // host is made secure here, not on the connection, or its frames without
  // payload would not parse. False and `error` when it cannot be.
  bool set_security(std::uint32_t local_qpn, const transport::SecurityConfig& config, std::string& error);
  [[nodiscard]] std::size_t connection_count() const noexcept { return connections_.size(); }
  // Every connection secure (and at least one): no data frame's ICRC is
  // checked here (parse_for_connection), so an engine need not compute it.
  [[nodiscard]] bool all_secure() const noexcept {
    return secure_connections_ != 0 && secure_connections_ == connections_.size();
  }
  // The link of port `port` (a plane's port index) is down (up == false)
  // or up: every connection with a plane on that port is told
  // (Connection::set_plane_link). A repeat of the state it has is ignored;
  // a change counts under link_changes. Ports start up.
  void set_port_link(std::uint64_t now, std::uint16_t port, bool up);
  [[nodiscard]] bool port_link_up(std::uint16_t port) const noexcept {
    return port >= 64 || ((ports_down_ >> port) & 1u) == 0;
  }

  // The receive share of the port this host receives on (not owned; it
  // must outlive the connections or be set to nullptr first): from now on
  // every metaroce-mode connection whose controller follows the rate hint
  // is attached to it when created, so its ACKs carry the receiver's fair
  // share. nullptr: none (connections made before keep theirs).
  void set_receive_share(transport::ReceiveShare* share) noexcept { receive_share_ = share; }
  [[nodiscard]] transport::ReceiveShare* receive_share() const noexcept { return receive_share_; }

  // Frames addressed to QP 1 (the connection manager's, lib/cm) go to this
  // handler instead of a connection; without one they count as unknown QPN.
  using ManagementHandler = std::function<void(std::uint64_t now_ns, const wire::ParsedFrame&)>;
  void set_management_handler(ManagementHandler handler) { management_ = std::move(handler); }

  // From now on ARP and ICMPv6 frames go to a neighbour cache with this
  // configuration (counted in counters().neighbour), which answers for the
  // port's addresses and resolves next hops; its frames leave with the
  // connections'. Without it they are parsed as RoCE frames (and dropped:
  // not_ip, not_udp). Returns the cache (replacing any earlier one).
  Neighbours& enable_neighbours(const NeighbourConfig& config);
  // nullptr until enable_neighbours.
  [[nodiscard]] Neighbours* neighbours() noexcept { return neighbours_.get(); }

  // One received frame (from its Ethernet header to its ICRC).
  void receive(std::uint64_t now, std::span<const std::uint8_t> frame, const wire::ParseOptions& options = {});
  // Fires the timers due by `now`.
  void advance(std::uint64_t now) { wheel_.advance(now); }
  // Held frames to the sink first; then, if none is left, the ready
  // connections' frames. Call it when the sink can take frames.
  void transmit(std::uint64_t now, FrameSink& sink) {
    if (neighbours_ && neighbours_->next_deadline() <= now) send_neighbour_frames(now, sink);
    if (release_held(sink)) poll_connections(now, sink);
  }
  // Queues one whole frame (ICRC included) behind any held ones; false only
  // when it is larger than the sink can ever take (tx_frame_too_large).
  bool send_frame(std::span<const std::uint8_t> frame, FrameSink& sink);

  // Connections with something to do (poll_connections polls them).
  [[nodiscard]] std::size_t ready_count() const noexcept { return ready_.size(); }
  // Polls the completions of the connections that have some, the one whose
  // first waiting completion came earliest first, each once:
  // f(connection, its completions), these in `scratch` (cleared for each).
  // Visits no connection without completions. Returns how many completions.
  template <class F>
  std::size_t poll_completions(std::vector<transport::Completion>& scratch, F&& f) {
    std::size_t total = 0;
    for (std::size_t n = with_completions_.size(); n > 0; --n) {
      transport::Connection* c = with_completions_.pop();
      scratch.clear();
      total += c->poll_completions(scratch);
      f(*c, scratch);
    }
    return total;
  }
  // Connections with completions waiting.
  [[nodiscard]] std::size_t completions_waiting() const noexcept { return with_completions_.size(); }
  // Frames the sink could not take, waiting in host memory.
  [[nodiscard]] std::size_t tx_held() const noexcept { return held_ends_.size() - held_head_; }
  // The earliest time something is due: now when a connection is ready,
  // else the next timer's deadline (timer::kNever when none).
  [[nodiscard]] std::uint64_t next_deadline(std::uint64_t now) const noexcept {
    if (!ready_.empty()) return now;
    const std::uint64_t timers = wheel_.next_deadline();
    return neighbours_ ? std::min<std::uint64_t>(timers, std::max(now, neighbours_->next_deadline())) : timers;
  }

  [[nodiscard]] transport::MemoryRegistry& memory() noexcept { return memory_; }
  [[nodiscard]] timer::Wheel& wheel() noexcept { return wheel_; }
  [[nodiscard]] transport::HostPools& pools() noexcept { return pools_; }
  [[nodiscard]] const transport::HostPools& pools() const noexcept { return pools_; }
  [[nodiscard]] const HostConfig& config() const noexcept { return config_; }
  // Payloads up to this many bytes go into the batch after their headers;
  // longer ones stay where they are (a sink that attaches them).
  void set_tx_inline_limit(std::size_t bytes) noexcept { batch_.set_inline_limit(bytes); }
  [[nodiscard]] const HostCounters& counters() const noexcept { return counters_; }
  // For the engine, which counts what only it sees in the same place.
  [[nodiscard]] HostCounters& counters() noexcept { return counters_; }
  // Bytes the connections hold (Connection::memory_bytes, summed: it
  // visits every connection, for reports, not for the data path).
  [[nodiscard]] std::size_t connection_memory_bytes() const noexcept;

 private:
  // With secure connections on this host: parses with the secure trailer
  // when the frame's destination QP is a secure connection's. `looked_up`
  // is then the QPN it found in the frame and `found` that QP's connection
  // (null: none), so that the caller need not look it up again.
  struct LookedUp {
    bool done = false;
    std::uint32_t qpn = 0;
    transport::Connection* found = nullptr;
  };
  [[nodiscard]] wire::ParseError parse_for_connection(std::span<const std::uint8_t> frame,
                                                      const wire::ParseOptions& options, wire::ParsedFrame& parsed,
                                                      LookedUp& looked_up) const;
  void poll_connections(std::uint64_t now, FrameSink& sink);
  void send_neighbour_frames(std::uint64_t now, FrameSink& sink);
  // Frame i of batch_ could not be taken: copy it aside.
  void hold(std::size_t i, const FrameSink& sink);
  // Gives held frames to the sink, oldest first; true when none is left.
  bool release_held(FrameSink& sink);

  HostConfig config_;
  HostCounters counters_;
  // These outlive the connections (declared before them).
  timer::Wheel wheel_{0};
  transport::MemoryRegistry memory_;
  transport::HostPools pools_;
  transport::ReadyList ready_;
  transport::ReadyList with_completions_{transport::ReadyList::completions};
  std::unordered_map<std::uint32_t, std::unique_ptr<transport::Connection>> connections_;
  QpnTable by_qpn_;  // connections_ for look-ups on the receive path
  std::size_t secure_connections_ = 0;  // of connections_, those made secure (set_security)
  std::uint64_t ports_down_ = 0;  // bit k: port k's link is down (ports 0..63)
  transport::TxBatch batch_;
  // Frames the sink could not take, copied whole (their payload may be the
  // application's, reusable once acknowledged): held_ends_[k] is where
  // frame k ends in held_bytes_.
  std::vector<std::uint8_t> held_bytes_;
  std::vector<std::size_t> held_ends_;
  std::size_t held_head_ = 0;  // next held frame to give
  ManagementHandler management_;
  std::unique_ptr<Neighbours> neighbours_;
  transport::ReceiveShare* receive_share_ = nullptr;
  std::vector<std::vector<std::uint8_t>> neighbour_frames_;
};

}  // namespace metaroce::host
