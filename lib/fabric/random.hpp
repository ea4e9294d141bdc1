// The fabric's only source of randomness: xoshiro256** seeded through
// splitmix64. Written out here (not std::mt19937 + <random> distributions)
// because the standard leaves distributions implementation-defined: the same
// seed must give the same run with any standard library.
#pragma once

#include <array>
#include <cstdint>

namespace metaroce::fabric {

class Random {
 public:
  // `stream` separates generators built from one seed: each impairment model
  // draws from its own stream, so changing one model's parameters does not
  // shift the decisions of the others.
  explicit Random(std::uint64_t seed, std::uint64_t stream = 0) noexcept {
    std::uint64_t x = seed ^ (stream * 0xd1b5'4a32'd192'ed03ull);
    for (auto& word : state_) word = splitmix64(x);
  }

  std::uint64_t next() noexcept {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1), 53 bits.
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // True with probability p. Draws nothing when p <= 0 or p >= 1, so a model
  // that is switched off costs nothing and consumes no randomness.
  bool chance(double p) noexcept {
    if (p <= 0.0) return false;
    if (p >= 1.0) return true;
    return uniform() < p;
  }

  // Uniform in [0, n); n > 0. Rejection keeps it unbiased.
  std::uint64_t below(std::uint64_t n) noexcept {
    const std::uint64_t threshold = (0 - n) % n;
    for (;;) {
      const std::uint64_t r = next();
      if (r >= threshold) return r % n;
    }
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix64(std::uint64_t& x) noexcept {
    std::uint64_t z = (x += 0x9e37'79b9'7f4a'7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58'476d'1ce4'e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d0'49bb'1331'11ebull;
    return z ^ (z >> 31);
  }

  std::array<std::uint64_t, 4> state_{};
};

}  // namespace metaroce::fabric
