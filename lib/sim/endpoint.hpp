// What the simulator drives: one transport core, or a test stub. The
// simulator owns time; an endpoint never reads a clock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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
  // Frame buffers the network is done with: empty, with room for at least
  // spare_buffer_bytes each, the last returned at the back (the likeliest
  // to be in the cache still). An endpoint may move one out (pop_back) and
  // build a frame of that size or more in it instead of allocating. Shared:
  // either side may go first. Optional.
  static constexpr std::size_t spare_buffer_bytes = 1024;
  using SpareBuffers = std::shared_ptr<std::vector<std::vector<std::uint8_t>>>;
  virtual void use_spare_buffers(SpareBuffers spares) { (void)spares; }
};

}  // namespace metaroce::sim
