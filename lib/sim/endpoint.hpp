// What the simulator drives: one transport core, or a test stub. The
// simulator owns time; an endpoint never reads a clock.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace metaroce::sim {

class Endpoint {  // one transport core (or a test stub)
 public:
  virtual ~Endpoint() = default;
  // A frame arrives at `now`.
  virtual void on_frame(std::uint64_t now, std::span<const std::uint8_t> frame) = 0;
  // Called at `now` (after arrivals, and when next_wakeup() is due): append every frame
  // the endpoint wants to transmit now to `out`.
  virtual void poll(std::uint64_t now, std::vector<std::vector<std::uint8_t>>& out) = 0;
  // Earliest virtual time poll() must run again without an arrival (timers, pacing);
  // UINT64_MAX when idle.
  virtual std::uint64_t next_wakeup() const = 0;
};

}  // namespace metaroce::sim
