// The calling thread's CPU time, for per-lcore costs: what the thread ran,
// preemption left out (with more lcores than CPUs, TSC cycles between two
// reads include the time another thread had the CPU).
#pragma once

#include <time.h>

#include <cstdint>

namespace metaroce::apps {

// CLOCK_THREAD_CPUTIME_ID in ns.
[[nodiscard]] inline std::uint64_t thread_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace metaroce::apps
