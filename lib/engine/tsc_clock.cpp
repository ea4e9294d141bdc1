#include "engine/tsc_clock.hpp"

#include <rte_cycles.h>

namespace metaroce::engine {

TscClock::TscClock() noexcept : origin_(rte_get_tsc_cycles()), hz_(rte_get_tsc_hz()) {
  if (hz_ == 0) hz_ = 1;
  ns_per_cycle_q32_ = (std::uint64_t{1'000'000'000} << 32) / hz_;
}

std::uint64_t TscClock::now_ns() const noexcept {
  const std::uint64_t cycles = rte_get_tsc_cycles() - origin_;
  // 64x64 -> 128-bit product, kept exact for centuries of uptime.
  __extension__ using u128 = unsigned __int128;
  return static_cast<std::uint64_t>((static_cast<u128>(cycles) * ns_per_cycle_q32_) >> 32);
}

}  // namespace metaroce::engine
