// What one direction of a fabric does to the frames that cross it. Filled in
// by code or parsed from a tc-netem-like string (fabric/spec.hpp); read by
// fabric::Impairment. Exact semantics of every field: doc/FABRIC.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace metaroce::fabric {

inline constexpr std::uint64_t forever = ~std::uint64_t{0};
inline constexpr std::uint32_t max_fabric_paths = 256;

// tc-netem `loss gemodel p r 1-h 1-k`: a two-state Markov chain advanced once
// per frame; the frame is lost with the loss probability of the state it finds.
struct GilbertElliott {
  double p = 0.0;             // P(good -> bad)
  double r = 1.0;             // P(bad -> good)
  double loss_in_bad = 1.0;   // 1-h
  double loss_in_good = 0.0;  // 1-k

  [[nodiscard]] bool enabled() const noexcept { return p > 0.0 || loss_in_good > 0.0; }
  // Long-run loss rate: pi_bad * (1-h) + pi_good * (1-k), pi_bad = p / (p + r).
  [[nodiscard]] double stationary_loss() const noexcept;
  bool operator==(const GilbertElliott&) const = default;
};

// CE marking of ECT frames by the occupancy q (bytes, not counting the
// arriving frame) of the queue they join. Step: mark when q > min_bytes
// (min_bytes == max_bytes). RED-like: no mark for q <= min_bytes, always for
// q >= max_bytes, else with probability max_probability * (q - min) / (max - min).
struct EcnMarking {
  bool enabled = false;
  std::uint64_t min_bytes = 0;
  std::uint64_t max_bytes = 0;
  double max_probability = 1.0;
  bool operator==(const EcnMarking&) const = default;
};

// Frames of `path` (of every path: every_path) that arrive in
// [start_ns, start_ns + duration_ns) vanish.
struct Blackhole {
  static constexpr std::uint32_t every_path = 0xffffffff;
  std::uint32_t path = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t duration_ns = forever;

  [[nodiscard]] bool covers(std::uint32_t frame_path, std::uint64_t now) const noexcept {
    return (path == every_path || frame_path == path) && now >= start_ns &&
           (duration_ns == forever || now - start_ns < duration_ns);
  }
  bool operator==(const Blackhole&) const = default;
};

enum class QueueMode : std::uint8_t {
  shared,    // one rate-limited queue in front of all paths (the sender's port)
  per_path,  // one queue of `rate_bps` per path (N parallel links)
};

struct FabricConfig {
  // Paths: frames are spread over `paths` FIFO links by their UDP source port
  // (path_of_port in fabric/frame_peek.hpp).
  std::uint32_t paths = 1;
  std::uint64_t delay_ns = 0;   // one-way propagation delay of path 0
  std::uint64_t spread_ns = 0;  // path k adds k * spread / (paths - 1)
  std::vector<std::uint64_t> path_delays_ns;  // if set: one delay per path, overrides both
  std::uint64_t jitter_ns = 0;  // uniform in [-jitter, +jitter], never reorders a path

  // Serialisation and queueing; rate 0 = unlimited (no queue at all).
  std::uint64_t rate_bps = 0;
  std::uint32_t overhead_bytes = 0;  // added to every frame for serialisation (24: preamble+IFG+FCS)
  QueueMode queue_mode = QueueMode::shared;
  std::uint64_t limit_bytes = 0;  // tail drop above this occupancy; 0 = unlimited
  EcnMarking ecn{};

  // Losses and damage on the wire (after the queue).
  double loss = 0.0;
  GilbertElliott gemodel{};
  double duplicate = 0.0;
  double corrupt = 0.0;
  double reorder = 0.0;                 // P(a frame is held back inside its path)
  std::uint64_t reorder_gap_ns = 10'000;  // how long it is held back
  std::vector<Blackhole> blackholes;

  std::uint64_t seed = 1;

  // Base one-way delay of path k (before jitter).
  [[nodiscard]] std::uint64_t path_delay_ns(std::uint32_t path) const noexcept;
  bool operator==(const FabricConfig&) const = default;
};

// Empty when the config is usable, else what is wrong and how to fix it.
[[nodiscard]] std::string validate(const FabricConfig& config);

}  // namespace metaroce::fabric
