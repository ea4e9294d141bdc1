// The two directions of metaroce-fabric and the loop that drives them.
//
// Each direction is an engine::ImpairedLink (rx of one port -> the fabric
// model -> tx of the other). Its owning lcore copies the counters into a
// snapshot every 10 ms (and at the end), handed over with a try_lock as the
// engine's telemetry does, so the main lcore (stats lines, exit checks) and
// the telemetry thread never read a counter the owner is writing and the
// owner never waits for them.
//
// Counters of a direction (DirectionSnapshot::totals): with
//   forwarded = frames the tx port took,
//   dropped   = the model's drops (random_loss, burst_loss, queue_full,
//               blackhole) + no_mbuf (on arrival, or a copy the model needed),
//   in_flight = frames in the model + frames waiting for the tx port,
// always  received + duplicated == forwarded + dropped + in_flight.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/impaired_link.hpp"
#include "engine/tsc_clock.hpp"
#include "fabric/counters.hpp"

namespace metaroce::fabric_app {

struct DirectionTotals {
  std::uint64_t received = 0, received_bytes = 0;
  std::uint64_t forwarded = 0, forwarded_bytes = 0;
  std::uint64_t dropped_random_loss = 0, dropped_burst_loss = 0, dropped_queue_full = 0, dropped_blackhole = 0,
                dropped_no_mbuf = 0;
  std::uint64_t ecn_marked = 0, duplicated = 0, corrupted = 0, reordered = 0, reordered_in_path = 0;
  std::uint64_t in_flight = 0;
  std::uint64_t rx_missed = 0;  // the rx port's imissed + rx_nombuf: never received, so not in the sums
  std::uint64_t tx_deferred = 0, rx_linearized = 0, clones = 0, private_copies = 0;

  [[nodiscard]] std::uint64_t dropped() const noexcept {
    return dropped_random_loss + dropped_burst_loss + dropped_queue_full + dropped_blackhole + dropped_no_mbuf;
  }
  // Calls f(name, value) for every counter, drops under their cause names.
  template <class F>
  void visit(F&& f) const {
    f("received", received);
    f("forwarded", forwarded);
    f("dropped", dropped());
    f("dropped_random_loss", dropped_random_loss);
    f("dropped_burst_loss", dropped_burst_loss);
    f("dropped_queue_full", dropped_queue_full);
    f("dropped_blackhole", dropped_blackhole);
    f("dropped_no_mbuf", dropped_no_mbuf);
    f("ecn_marked", ecn_marked);
    f("duplicated", duplicated);
    f("corrupted", corrupted);
    f("reordered", reordered);
    f("reordered_in_path", reordered_in_path);
    f("in_flight", in_flight);
    f("received_bytes", received_bytes);
    f("forwarded_bytes", forwarded_bytes);
    f("rx_missed", rx_missed);
    f("tx_deferred", tx_deferred);
    f("rx_linearized", rx_linearized);
    f("clones", clones);
    f("private_copies", private_copies);
  }
};

struct DirectionSnapshot {
  DirectionTotals totals{};
  std::uint64_t taken_ns = 0;      // node clock
  std::uint64_t last_busy_ns = 0;  // last turn that received a frame or had one in flight
};

class Direction {
 public:
  // `fed`: a switch's output port, whose frames come from submit_st (its
  // link's `from` is not read), not from its own port. `lane`: the queue
  // of a direction's lanes (--lcores) this one forwards; the rx port's
  // misses (rx_missed, per port, not per queue) are counted by lane 0 only.
  Direction(std::string name, std::string label, std::uint16_t from_port, std::unique_ptr<engine::ImpairedLink> link,
            std::string spec, bool fed = false, std::uint16_t lane = 0);

  [[nodiscard]] const std::string& name() const noexcept { return name_; }    // a_to_b
  [[nodiscard]] const std::string& label() const noexcept { return label_; }  // a->b
  [[nodiscard]] const std::string& spec() const noexcept { return spec_; }    // canonical
  [[nodiscard]] std::uint16_t lane() const noexcept { return lane_; }
  // The EAL lcore that turns it (set before the lcores start).
  [[nodiscard]] unsigned lcore() const noexcept { return lcore_; }
  void set_lcore(unsigned lcore) noexcept { lcore_ = lcore; }

  // Owning lcore only: one turn at `now_ns`; returns frames moved.
  std::size_t turn_st(std::uint64_t now_ns);
  [[nodiscard]] std::uint64_t next_release_ns_st() const noexcept { return link_->next_release_ns(); }
  // Owning lcore only, fed: one frame in (the mbuf is the link's now), and
  // the bytes its queue holds now.
  void submit_st(std::uint64_t now_ns, rte_mbuf* frame) { link_->submit(now_ns, frame); }
  [[nodiscard]] std::uint64_t queued_bytes_st(std::uint64_t now_ns) { return link_->queued_bytes(now_ns); }
  [[nodiscard]] std::size_t in_flight_st() const noexcept { return link_->in_flight(); }
  // Owning lcore only: publishes a snapshot now; `wait` = false skips it when
  // a reader holds the lock (the periodic ones), true waits (the last one).
  void publish_st(std::uint64_t now_ns, bool wait);
  // Owning lcore only: frees the link and every frame it holds.
  void destroy_link_st() noexcept { link_.reset(); }

  // Any thread: the last published snapshot.
  [[nodiscard]] DirectionSnapshot snapshot() const;

 private:
  static constexpr std::uint64_t publish_period_ns = 10'000'000;

  std::string name_, label_, spec_;
  std::uint16_t from_port_;
  std::unique_ptr<engine::ImpairedLink> link_;
  bool fed_ = false;
  std::uint16_t lane_ = 0;
  unsigned lcore_ = 0;
  std::uint64_t last_busy_ns_ = 0;
  std::uint64_t last_publish_ns_ = 0;
  mutable std::mutex published_mutex_;
  DirectionSnapshot published_;  // guarded by published_mutex_
};

// a += b, every counter (a direction's lanes summed).
void add_totals(DirectionTotals& a, const DirectionTotals& b) noexcept;

// One direction of the two-port form: its lanes (one per queue, --lcores),
// each a Direction of its own; `spec` is the whole direction's (canonical),
// each lane's own spec has its share of the rate, limit and ECN thresholds.
struct DirectionLanes {
  std::string name, label, spec;
  std::vector<const Direction*> lanes;
};

struct NodeControl {
  std::atomic<bool> stop{false};
  std::uint32_t idle_sleep_us = 0;
};

// Runs `directions` until control.stop, sleeping after a turn that moved
// nothing when control.idle_sleep_us is set (never past the next release).
// `on_turn(now)`, if set, is called after every turn on this lcore. Publishes
// a last snapshot of each direction on the way out.
void run_directions_st(const std::vector<Direction*>& directions, const engine::TscClock& clock,
                       NodeControl& control, const std::function<void(std::uint64_t)>& on_turn);

// The loop under it (and under the switch's): `turn(now)` returns the
// frames it moved; after a turn that moved none it sleeps up to
// idle_sleep_us, never past `next_release()`.
void run_turns_st(const engine::TscClock& clock, NodeControl& control,
                  const std::function<std::size_t(std::uint64_t)>& turn,
                  const std::function<std::uint64_t()>& next_release,
                  const std::function<void(std::uint64_t)>& on_turn);

}  // namespace metaroce::fabric_app
