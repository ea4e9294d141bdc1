// The bytes of message m under --verify: each 8-byte word names its message
// and its offset, so a byte placed in the wrong message or at the wrong
// offset is found; a tail shorter than a word gets (m + k) per byte.
#pragma once

#include <cstdint>
#include <cstring>

namespace metaroce::perf {

[[nodiscard]] inline std::uint64_t pattern_word(std::uint64_t message, std::uint64_t word) noexcept {
  return ((message << 32) | (word & 0xffffffffu)) ^ 0xa5a5a5a55a5a5a5aULL;
}

inline void fill_pattern(std::uint8_t* p, std::uint64_t len, std::uint64_t message) noexcept {
  const std::uint64_t words = len / 8;
  for (std::uint64_t w = 0; w < words; ++w) {
    const std::uint64_t v = pattern_word(message, w);
    std::memcpy(p + w * 8, &v, 8);
  }
  for (std::uint64_t k = words * 8; k < len; ++k) p[k] = static_cast<std::uint8_t>(message + k);
}

// True when every byte of [p, p + len) is message m's.
[[nodiscard]] inline bool check_pattern(const std::uint8_t* p, std::uint64_t len, std::uint64_t message) noexcept {
  const std::uint64_t words = len / 8;
  for (std::uint64_t w = 0; w < words; ++w) {
    std::uint64_t v = 0;
    std::memcpy(&v, p + w * 8, 8);
    if (v != pattern_word(message, w)) return false;
  }
  for (std::uint64_t k = words * 8; k < len; ++k)
    if (p[k] != static_cast<std::uint8_t>(message + k)) return false;
  return true;
}

}  // namespace metaroce::perf
