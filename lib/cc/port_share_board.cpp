#include "cc/port_share_board.hpp"

#include <cmath>
#include <vector>

namespace metaroce::cc {

PortShareBoard::PortShareBoard(std::uint64_t capacity_bps, std::size_t fronts, transport::Time period)
    : share_(capacity_bps), fronts_(fronts), period_(period), slots_(std::make_unique<Slot[]>(fronts)) {
  for (std::size_t i = 0; i < fronts_; ++i)
    slots_[i].part_bps.store(fronts_ == 0 ? 0 : capacity_bps / fronts_, std::memory_order_relaxed);
}

bool PortShareBoard::front_turn(std::size_t i, FairShare& share, transport::Time now) {
  Slot& s = slots_[i];
  if (now < s.next_publish) return false;
  s.next_publish = now + period_;
  const ShareDemand d = share.demand(now);
  s.heavy.store(d.heavy, std::memory_order_relaxed);
  s.light_bps.store(static_cast<std::uint64_t>(std::llround(d.light_bps)), std::memory_order_relaxed);
  share.set_capacity_bps(s.part_bps.load(std::memory_order_relaxed));
  return true;
}

bool PortShareBoard::rebalance_turn(transport::Time now) {
  if (now < next_rebalance_) return false;
  next_rebalance_ = now + period_;
  std::vector<ShareDemand> demands(fronts_);
  for (std::size_t i = 0; i < fronts_; ++i) {
    demands[i].heavy = slots_[i].heavy.load(std::memory_order_relaxed);
    demands[i].light_bps = static_cast<double>(slots_[i].light_bps.load(std::memory_order_relaxed));
  }
  const std::vector<std::uint64_t> parts = share_.rebalance(demands);
  for (std::size_t i = 0; i < fronts_; ++i) slots_[i].part_bps.store(parts[i], std::memory_order_relaxed);
  rebalances_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace metaroce::cc
