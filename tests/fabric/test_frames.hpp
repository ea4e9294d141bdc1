// Frames for the fabric and simulator tests, built with lib/wire.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace metaroce::test {

struct TestFrame {
  std::uint16_t sport = 49152;
  std::uint32_t psn = 0;
  std::size_t payload_len = 64;
  int ip_version = 4;
  std::uint8_t ecn = 2;  // ECT(0)
  bool vlan = false;
};

// A metaroce WRITE frame (sample_spec addresses) with a valid ICRC.
std::vector<std::uint8_t> make_frame(const TestFrame& frame);

inline std::vector<std::uint8_t> make_frame(std::uint16_t sport, std::uint32_t psn,
                                            std::size_t payload_len = 64) {
  return make_frame(TestFrame{sport, psn, payload_len});
}

// The BTH PSN of a frame (no checks but lengths).
std::uint32_t psn_of(std::span<const std::uint8_t> frame);

// The first UDP source port from 49152 up that path_of_port maps to `path`.
std::uint16_t port_on_path(std::uint32_t path, std::uint32_t paths);

// 64-bit FNV-1a, to fingerprint runs.
inline std::uint64_t fnv1a(std::uint64_t hash, std::span<const std::uint8_t> bytes) {
  for (std::uint8_t b : bytes) hash = (hash ^ b) * 0x100000001b3ull;
  return hash;
}
inline std::uint64_t fnv1a(std::uint64_t hash, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) hash = (hash ^ ((value >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return hash;
}
inline constexpr std::uint64_t fnv1a_basis = 0xcbf29ce484222325ull;

}  // namespace metaroce::test
