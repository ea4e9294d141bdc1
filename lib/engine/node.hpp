// A node: the engine hosts of one machine's lcores, one per lcore, each
// driving its own queue of the node's port (doc/ENGINE.md, "Nodes").
//
//              port 0
//   lcore 0    queue 0   -> host 0: owns the QPNs q with q % lcores == 0
//   lcore 1    queue 1   -> host 1: owns the QPNs q with q % lcores == 1
//   ...
//
// A connection lives on one host for its whole life (steering_queue: the
// host of its QPN's queue), and its timers, windows and pools are that
// host's. The hosts sit in a cache-aligned array, one slot per lcore, so
// no two lcores write the same cache line.
//
// Work that must cross lcores (a connection the connection manager set up
// on its lcore for another one, a close, a memory registration) is posted
// to the owner's command ring (an rte_ring, many producers, one consumer)
// and runs on the owner's next turn, never on the poster's lcore.
//
// On a PMD that cannot steer by QPN (steering_method: software_handoff),
// frames land on any queue: with software_handoff set, the lcore that takes
// a frame for another lcore's QPN passes the mbuf to that owner's hand-off
// ring (QP 1's to management_lcore, where the connection manager runs),
// and each lcore drains its ring before its own rx burst (rx_handed_off at
// the receiver; rx_handoff_ring_full, a drop, when the owner's ring is full).
//
// Threading: post() may be called from any thread; everything else about
// slot i (host(i), poll(i), run_commands(i)) only from lcore i's thread,
// except counters, which others may read as racy snapshots.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_host.hpp"

struct rte_ring;

namespace metaroce::engine {

struct NodeConfig {
  std::string name = "node";
  std::uint16_t port_id = 0;  // its queue i is lcore i's (the port has `lcores` queues)
  std::uint16_t lcores = 1;   // hosts, 1..max_node_lcores
  // Each host's settings; name, port, queue and queues are filled in
  // ("<name>.<i>", port_id, i, lcores).
  EngineHostConfig hosts{};
  std::uint32_t command_ring_size = 1024;  // commands waiting per lcore (a power of two)
  bool software_handoff = false;           // the PMD does not steer by QPN: lcores pass frames on
  std::uint32_t handoff_ring_size = 4096;  // frames waiting per lcore (a power of two)
  std::uint16_t management_lcore = 0;      // the connection manager's: QP 1's frames go there
};

inline constexpr std::uint16_t max_node_lcores = 128;

// One lcore's cross-lcore traffic.
struct NodeLcoreCounters {
  std::uint64_t commands_run = 0;       // by the owner
  std::uint64_t commands_refused = 0;   // post() found the ring full (the poster may retry)
};

class Node {
 public:
  using Command = std::function<void(EngineHost&)>;

  static std::unique_ptr<Node> create(const NodeConfig& config, std::string& error);
  // Destroys the commands nobody ran (without running them), then the hosts.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  [[nodiscard]] std::uint16_t lcores() const noexcept { return static_cast<std::uint16_t>(slots_.size()); }
  [[nodiscard]] EngineHost& host(std::uint16_t lcore) noexcept { return *slots_[lcore].host; }
  [[nodiscard]] const EngineHost& host(std::uint16_t lcore) const noexcept { return *slots_[lcore].host; }
  // The lcore that owns the connection with this QPN.
  [[nodiscard]] std::uint16_t owner_of(std::uint32_t qpn) const noexcept { return steering_queue(qpn, lcores()); }

  // Any thread: `work` runs on lcore `lcore` in its next run_commands (with
  // its host), in the order posted by one poster. False when the ring is
  // full (commands_refused): nothing was queued.
  bool post(std::uint16_t lcore, Command work);
  // Lcore `lcore` only: runs the commands waiting for it; returns how many.
  std::size_t run_commands(std::uint16_t lcore);
  // Lcore `lcore` only: its commands, then one turn of its host; returns
  // commands run + frames moved (0: idle).
  std::size_t poll(std::uint16_t lcore) { return run_commands(lcore) + slots_[lcore].host->poll_once(); }

  [[nodiscard]] NodeLcoreCounters counters(std::uint16_t lcore) const noexcept;
  [[nodiscard]] const NodeConfig& config() const noexcept { return config_; }

 private:
  explicit Node(const NodeConfig& config) : config_(config) {}

  // One lcore's: its host and its command ring, a cache line (or more) of
  // its own.
  struct alignas(64) LcoreSlot {
    std::unique_ptr<EngineHost> host;
    rte_ring* commands = nullptr;
    std::uint64_t commands_run = 0;                  // written by the owner only
    std::atomic<std::uint64_t> commands_refused{0};  // by any poster
    rte_ring* handoff = nullptr;                     // frames for this lcore's QPNs (software_handoff)
  };
  static_assert(sizeof(LcoreSlot) == 64);

  NodeConfig config_;
  std::vector<LcoreSlot> slots_;
};

}  // namespace metaroce::engine
