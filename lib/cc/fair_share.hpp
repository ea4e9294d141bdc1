// The receiver-driven half of `metaroce` congestion control: a host's
// inbound capacity divided among the senders that are sending to it.
//
// A sender is active while its packets keep arriving (within active_window
// of the last one). Its share is max-min fair: senders that used well under
// the share they were last given in the last measurement period (light
// ones: limited by something else) keep what they use plus headroom, and the
// rest of the capacity is split equally among the others, each getting at
// least an equal split of the port; with nobody heavy, the light senders
// split the rest among themselves (a sender alone is told the whole port). With N senders starting at once into one port
// the first ACK each gets already says capacity / N: incast settles in one
// round trip instead of waiting for queues to build and marks to come back.
//
// One per receiving port (Host::set_receive_share attaches it to every
// connection whose controller follows the hint). Several lcores receiving
// on one port each keep a front of their own (no lock on the data path)
// and a PortShare divides the port's capacity among the fronts once per
// measurement period, by their demand (doc/DESIGN.md, "The receive share").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/receive_share.hpp"

namespace metaroce::cc {

struct FairShareParams {
  std::uint64_t capacity_bps = 100'000'000'000;  // what the host may receive (its port, less headroom)
  transport::Time active_window = 50'000;        // ns without a packet before a sender counts as gone
  transport::Time measure_period = 20'000;       // ns over which arrival rates are measured
  double light_fraction = 0.5;                   // using less than this share of its hint makes a sender light
  double light_headroom = 1.25;                  // a light sender may grow by this factor before re-measure
};

// What a share counts (X-macro: name, meaning).
#define METAROCE_FAIR_SHARE_COUNTERS(X)                                            \
  X(arrivals, "data packets reported by the connections attached")                 \
  X(arrival_bytes, "their frame bytes")                                            \
  X(hints, "rate hints given (one per ACK that carries one)")                      \
  X(generations, "times a sender started or came back (every share shrank)")       \
  X(max_active_senders, "most senders active at once (a gauge, not a sum)")

struct FairShareCounters {
#define METAROCE_FAIR_SHARE_FIELD(name, what) std::uint64_t name = 0;
  METAROCE_FAIR_SHARE_COUNTERS(METAROCE_FAIR_SHARE_FIELD)
#undef METAROCE_FAIR_SHARE_FIELD
  template <class F>
  void visit(F&& f) const {
#define METAROCE_FAIR_SHARE_VISIT(name, what) f(std::string(#name), name);
    METAROCE_FAIR_SHARE_COUNTERS(METAROCE_FAIR_SHARE_VISIT)
#undef METAROCE_FAIR_SHARE_VISIT
  }
};

// One sender's allocation (FairShare::allocations).
struct Allocation {
  std::uint32_t sender = 0;
  double bps = 0;
  bool light = false;
};

// What a front needs of its port (PortShare::rebalance): the senders that
// take an equal split, and what the light ones keep.
struct ShareDemand {
  std::size_t heavy = 0;
  double light_bps = 0;
};

// The share a receiving port gets: `capacity_bps` when given (the user
// knows the bottleneck), else the link rate less 3% headroom so the queue
// in front of it drains while the hints hold; a link rate the PMD does not
// report leaves the default (100 Gb/s: hints that bound nothing).
[[nodiscard]] std::uint64_t port_receive_capacity(std::uint64_t capacity_bps, std::uint32_t link_speed_mbps) noexcept;

class FairShare;
// A real port's timing: a sender's packets come at its share (16 senders
// into 2 Gb/s: one 4 KiB frame each per 260 us) and a shared VM
// deschedules a polling process for milliseconds, so the simulator's 50 us
// window would count a steady sender as gone between two of its packets
// (every share then too large). A sender counts as gone after 2 ms without
// a packet; rates are measured over 500 us.
inline constexpr transport::Time real_time_active_window = 2'000'000;
inline constexpr transport::Time real_time_measure_period = 500'000;
// A port's share: port_receive_capacity and the real-time timing above.
[[nodiscard]] std::unique_ptr<FairShare> make_receive_share(std::uint64_t capacity_bps, std::uint32_t link_speed_mbps);

class FairShare final : public transport::ReceiveShare {
 public:
  explicit FairShare(const FairShareParams& params) : params_(params) {}

  void on_arrival(std::uint32_t sender, std::uint32_t bytes, transport::Time now) override;
  [[nodiscard]] std::uint32_t share_mbps(std::uint32_t sender, transport::Time now) override;

  [[nodiscard]] std::uint64_t generation() const override { return generation_; }

  [[nodiscard]] std::size_t active_senders(transport::Time now) const;
  // Every active sender's share now (the hint it would be given), light or
  // not. They sum to the capacity unless light senders use more than it.
  [[nodiscard]] std::vector<Allocation> allocations(transport::Time now) const;
  [[nodiscard]] ShareDemand demand(transport::Time now) const;

  [[nodiscard]] std::uint64_t capacity_bps() const noexcept { return params_.capacity_bps; }
  // A PortShare sets a front's part of the port; hints given from now on use it.
  void set_capacity_bps(std::uint64_t bps) noexcept { params_.capacity_bps = bps; }
  [[nodiscard]] const FairShareParams& params() const noexcept { return params_; }
  [[nodiscard]] const FairShareCounters& counters() const noexcept { return counters_; }

 private:
  struct Sender {
    std::uint32_t id = 0;
    transport::Time last_arrival = 0;
    std::uint64_t bytes_this_period = 0;
    double measured_bps = 0;  // over the last complete period
    double last_hint_bps = 0;  // the share it was last told
    double hint_of_measured_period_bps = 0;
  };
  Sender& find(std::uint32_t id);
  void roll_period(transport::Time now);
  [[nodiscard]] bool active(const Sender& s, transport::Time now) const noexcept {
    return now - s.last_arrival <= params_.active_window;
  }
  // Light: it used well under the share it was last given, so it is
  // limited elsewhere (the application, another bottleneck). A sender
  // that uses its whole share is not light, whatever that share was.
  [[nodiscard]] bool light(const Sender& s) const noexcept {
    return s.measured_bps > 0 && s.hint_of_measured_period_bps > 0 &&
           s.measured_bps < params_.light_fraction * s.hint_of_measured_period_bps;
  }
  // The share of each active sender: `f(sender, bps, light)`. With
  // share_spare, light senders also split what nobody heavy takes (their
  // hints); without, a light sender's part is its use (a front's demand).
  template <class F>
  void divide(transport::Time now, bool share_spare, F&& f) const;

  FairShareParams params_;
  std::vector<Sender> senders_;  // few per host: a linear scan beats a map
  transport::Time period_start_ = 0;
  std::uint64_t generation_ = 0;
  FairShareCounters counters_;
};

// The capacity of one port divided among the fronts (one FairShare per
// lcore receiving on it): each gets what its light senders keep plus an
// equal per-sender part of the rest for each of its heavy senders, so a
// sender's share does not depend on the lcore its connection landed on.
// Call rebalance once per measurement period from one thread, with the
// fronts' demands as they published them (each front's own lcore reads its
// demand(); how it hands it over, e.g. an atomic per front, is the
// owner's). Fronts with no active sender get an equal part of what is left.
class PortShare {
 public:
  explicit PortShare(std::uint64_t capacity_bps) : capacity_bps_(capacity_bps) {}
  [[nodiscard]] std::uint64_t capacity_bps() const noexcept { return capacity_bps_; }
  // The capacity each front should be set to (set_capacity_bps), in the
  // order of `demands`; they sum to the port's capacity.
  [[nodiscard]] std::vector<std::uint64_t> rebalance(const std::vector<ShareDemand>& demands) const;

 private:
  std::uint64_t capacity_bps_;
};

}  // namespace metaroce::cc
