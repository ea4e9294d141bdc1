// This process's resident memory (VmRSS of /proc/self/status), to measure
// what a number of connections costs: read before and after creating them
// (or after traffic has touched their windows) and divide the difference.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace metaroce::apps {

// Resident bytes now; 0 when /proc is not there.
[[nodiscard]] inline std::uint64_t resident_bytes() noexcept {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, "VmRSS:", 6) == 0 && std::sscanf(line + 6, "%llu", &kib) == 1) break;
  std::fclose(f);
  return std::uint64_t{kib} * 1024;
}

}  // namespace metaroce::apps
