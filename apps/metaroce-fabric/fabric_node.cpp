#include "metaroce-fabric/fabric_node.hpp"

#include <rte_ethdev.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

namespace metaroce::fabric_app {

Direction::Direction(std::string name, std::string label, std::uint16_t from_port,
                     std::unique_ptr<engine::ImpairedLink> link, std::string spec, bool fed, std::uint16_t lane)
    : name_(std::move(name)),
      label_(std::move(label)),
      spec_(std::move(spec)),
      from_port_(from_port),
      link_(std::move(link)),
      fed_(fed),
      lane_(lane) {}

std::size_t Direction::turn_st(std::uint64_t now_ns) {
  const std::size_t moved = fed_ ? link_->release_once(now_ns) : link_->forward_once(now_ns);
  if (moved != 0 || link_->in_flight() != 0) last_busy_ns_ = now_ns;
  if (now_ns - last_publish_ns_ >= publish_period_ns) publish_st(now_ns, false);
  return moved;
}

void Direction::publish_st(std::uint64_t now_ns, bool wait) {
  DirectionSnapshot s;
  DirectionTotals& t = s.totals;
  if (link_) {
    const engine::ImpairedLinkCounters& l = link_->counters();
    const fabric::FabricCounters& f = link_->fabric_counters();
    t.received = l.received;
    t.received_bytes = l.received_bytes;
    t.forwarded = l.transmitted;
    t.forwarded_bytes = l.transmitted_bytes;
    t.dropped_random_loss = f.dropped_random_loss;
    t.dropped_burst_loss = f.dropped_burst_loss;
    t.dropped_queue_full = f.dropped_queue_full;
    t.dropped_blackhole = f.dropped_blackhole;
    t.dropped_no_mbuf = l.dropped_no_mbuf + f.dropped_no_buffer;
    t.ecn_marked = f.ecn_marked;
    t.duplicated = f.duplicated;
    t.corrupted = f.corrupted;
    t.reordered = f.reordered;
    t.reordered_in_path = f.reordered_in_path;
    t.in_flight = link_->in_flight();
    t.tx_deferred = l.tx_deferred;
    t.rx_linearized = l.rx_linearized;
    t.clones = l.clones;
    t.private_copies = l.private_copies;
  }
  rte_eth_stats stats{};
  if (!fed_ && lane_ == 0 && rte_eth_stats_get(from_port_, &stats) == 0) t.rx_missed = stats.imissed + stats.rx_nombuf;
  s.taken_ns = now_ns;
  s.last_busy_ns = last_busy_ns_;
  // Periodic: try_lock, so a reader copying the snapshot makes us skip this
  // one, never wait. The last one waits (readers hold the lock for a copy).
  std::unique_lock lock(published_mutex_, std::defer_lock);
  if (wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return;
  }
  published_ = s;
  last_publish_ns_ = now_ns;
}

DirectionSnapshot Direction::snapshot() const {
  std::lock_guard lock(published_mutex_);
  return published_;
}

void add_totals(DirectionTotals& a, const DirectionTotals& b) noexcept {
  static_assert(sizeof(DirectionTotals) == 20 * sizeof(std::uint64_t), "add_totals adds every counter");
  a.received += b.received;
  a.received_bytes += b.received_bytes;
  a.forwarded += b.forwarded;
  a.forwarded_bytes += b.forwarded_bytes;
  a.dropped_random_loss += b.dropped_random_loss;
  a.dropped_burst_loss += b.dropped_burst_loss;
  a.dropped_queue_full += b.dropped_queue_full;
  a.dropped_blackhole += b.dropped_blackhole;
  a.dropped_no_mbuf += b.dropped_no_mbuf;
  a.ecn_marked += b.ecn_marked;
  a.duplicated += b.duplicated;
  a.corrupted += b.corrupted;
  a.reordered += b.reordered;
  a.reordered_in_path += b.reordered_in_path;
  a.in_flight += b.in_flight;
  a.rx_missed += b.rx_missed;
  a.tx_deferred += b.tx_deferred;
  a.rx_linearized += b.rx_linearized;
  a.clones += b.clones;
  a.private_copies += b.private_copies;
}

void run_turns_st(const engine::TscClock& clock, NodeControl& control,
                  const std::function<std::size_t(std::uint64_t)>& turn,
                  const std::function<std::uint64_t()>& next_release,
                  const std::function<void(std::uint64_t)>& on_turn) {
  while (!control.stop.load(std::memory_order_relaxed)) {
    std::uint64_t now = clock.now_ns();
    const std::size_t moved = turn(now);
    if (on_turn) on_turn(now);
    if (moved != 0 || control.idle_sleep_us == 0) continue;
    std::uint64_t sleep_ns = std::uint64_t{control.idle_sleep_us} * 1000;
    const std::uint64_t next = next_release();
    now = clock.now_ns();
    if (next != ~std::uint64_t{0}) sleep_ns = next > now ? std::min(sleep_ns, next - now) : 0;
    if (sleep_ns >= 1000) std::this_thread::sleep_for(std::chrono::nanoseconds(sleep_ns));
  }
}

void run_directions_st(const std::vector<Direction*>& directions, const engine::TscClock& clock,
                       NodeControl& control, const std::function<void(std::uint64_t)>& on_turn) {
  const auto turn = [&](std::uint64_t now) {
    std::size_t moved = 0;
    for (Direction* d : directions) moved += d->turn_st(now);
    return moved;
  };
  const auto next_release = [&] {
    std::uint64_t next = ~std::uint64_t{0};
    for (Direction* d : directions) next = std::min(next, d->next_release_ns_st());
    return next;
  };
  run_turns_st(clock, control, turn, next_release, on_turn);
  for (Direction* d : directions) d->publish_st(clock.now_ns(), true);
}

}  // namespace metaroce::fabric_app
