// One port's receive share when several lcores receive on it: each lcore's
// host has its own FairShare (a "front", written by that lcore only), and
// the board divides the port's capacity among the fronts by what they
// publish (PortShare::rebalance), so a sender's share does not depend on the
// lcore its connection landed on.
//
//   lcore i, every turn:   front_turn(i, its FairShare, now)
//                          at most once a period: publishes the front's demand
//                          and sets the front's capacity to its last part
//   one lcore, every turn: rebalance_turn(now)
//                          at most once a period: reads every demand, writes
//                          every part
//
// Threading: slot i's demand is written by lcore i only, the parts by the
// rebalancing lcore only, each field an atomic of its own: a reader may see
// one front's heavy count of this period with its light rate of the last,
// which the next period corrects. No lock, no lcore waits for another.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cc/fair_share.hpp"
#include "transport/types.hpp"

namespace metaroce::cc {

class PortShareBoard {
 public:
  // `capacity_bps` of the port among `fronts` fronts (equal parts until the
  // first rebalance); each turn acts at most once per `period`.
  PortShareBoard(std::uint64_t capacity_bps, std::size_t fronts,
                 transport::Time period = real_time_measure_period);
  PortShareBoard(const PortShareBoard&) = delete;
  PortShareBoard& operator=(const PortShareBoard&) = delete;

  // Lcore of front i. True when it published and applied (once a period).
  bool front_turn(std::size_t i, FairShare& share, transport::Time now);
  // The rebalancing lcore. True when it divided the port (once a period).
  bool rebalance_turn(transport::Time now);

  [[nodiscard]] std::size_t fronts() const noexcept { return fronts_; }
  [[nodiscard]] std::uint64_t capacity_bps() const noexcept { return share_.capacity_bps(); }
  // Front i's part as last set by a rebalance (any thread: a snapshot).
  [[nodiscard]] std::uint64_t part_bps(std::size_t i) const noexcept {
    return slots_[i].part_bps.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t rebalances() const noexcept { return rebalances_.load(std::memory_order_relaxed); }

 private:
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> heavy{0};      // front's lcore
    std::atomic<std::uint64_t> light_bps{0};  // front's lcore
    std::atomic<std::uint64_t> part_bps{0};   // rebalancing lcore
    transport::Time next_publish = 0;         // front's lcore only
  };

  PortShare share_;
  std::size_t fronts_;
  transport::Time period_;
  std::unique_ptr<Slot[]> slots_;
  transport::Time next_rebalance_ = 0;  // rebalancing lcore only
  std::atomic<std::uint64_t> rebalances_{0};
};

}  // namespace metaroce::cc
