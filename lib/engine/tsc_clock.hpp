// Nanoseconds from the TSC: the engine's clock for timer wheels, fabrics and
// reports. The TSC frequency is read once (after EAL start); converting is a
// multiply and a shift, no division, no system call.
#pragma once

#include <cstdint>

namespace metaroce::engine {

class TscClock {
 public:
  // Needs a started EAL (rte_get_tsc_hz). Time 0 is the moment of construction.
  TscClock() noexcept;
  [[nodiscard]] std::uint64_t now_ns() const noexcept;
  [[nodiscard]] std::uint64_t tsc_hz() const noexcept { return hz_; }

 private:
  std::uint64_t origin_ = 0;
  std::uint64_t hz_ = 1;
  std::uint64_t ns_per_cycle_q32_ = 0;  // 2^32 * 1e9 / hz
};

}  // namespace metaroce::engine
