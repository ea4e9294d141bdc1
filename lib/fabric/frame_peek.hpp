// The few fields the fabric reads or changes in a frame: where the IP and UDP
// headers are, the ECN bits, the UDP source port (path entropy). No full
// parse and no ICRC check: a fabric forwards what a switch would.
#pragma once

#include <cstdint>
#include <span>

namespace metaroce::fabric {

class Random;

namespace ecn {
inline constexpr std::uint8_t not_ect = 0;
inline constexpr std::uint8_t ect1 = 1;
inline constexpr std::uint8_t ect0 = 2;
inline constexpr std::uint8_t ce = 3;
}  // namespace ecn

struct FramePeek {
  std::uint16_t l3_offset = 0;  // first byte after Ethernet [+ 802.1Q]
  std::uint16_t l4_offset = 0;  // first byte of UDP; valid when udp
  std::uint8_t ip_version = 0;  // 0: not IPv4/IPv6 (or truncated)
  std::uint8_t ecn = 0;
  bool udp = false;
  bool roce = false;  // UDP destination port 4791
  std::uint16_t udp_src_port = 0;

  [[nodiscard]] bool ect() const noexcept { return ecn == ecn::ect0 || ecn == ecn::ect1; }
};

// Reads Ethernet [802.1Q] | IPv4 (any IHL) or IPv6 (no extension headers) |
// UDP, never past `frame`.
[[nodiscard]] FramePeek peek_frame(std::span<const std::uint8_t> frame) noexcept;

// ECMP: path of a UDP source port among `paths` links:
//   h = (sport * 0x9E3779B1) mod 2^32;  path = ((h >> 16) * paths) >> 16
// (Fibonacci hashing, then multiply-shift onto [0, paths)).
[[nodiscard]] constexpr std::uint32_t path_of_port(std::uint16_t sport, std::uint32_t paths) noexcept {
  const std::uint32_t h = static_cast<std::uint32_t>(sport) * 0x9E37'79B1u;
  return static_cast<std::uint32_t>((std::uint64_t{h >> 16} * paths) >> 16);
}

// Sets the ECN field to CE. The IPv4 header checksum is updated
// incrementally (RFC 1624), so an error elsewhere in the header stays
// detectable; the ICRC masks TOS/traffic class and stays valid. Returns false
// (and changes nothing) when the frame is not IP.
bool set_ecn_ce(std::span<std::uint8_t> frame, const FramePeek& peek) noexcept;

// Flips one uniformly chosen bit among the bytes after the Ethernet header
// that some receiver check covers: for RoCE frames it skips the fields the
// ICRC masks and nothing else protects (IPv6 traffic class, flow label and
// hop limit; UDP checksum; the BTH FECN/BECN/reserved byte), so every
// corrupted RoCE frame fails wire::parse_frame. Returns false when there is
// no byte to corrupt.
bool flip_random_bit(std::span<std::uint8_t> frame, const FramePeek& peek, Random& random) noexcept;

}  // namespace metaroce::fabric
