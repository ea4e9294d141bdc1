// A RoCEv2 GID as perftest prints it: the 16 bytes of the address, IPv4 as
// an IPv4-mapped IPv6 address (::ffff:A.B.C.D, RFC 4291 2.5.5.2, the GID a
// RoCE NIC derives from an IPv4 address), each byte in decimal with at least
// two digits, colon-separated:
//   10.77.1.2 -> 00:00:00:00:00:00:00:00:00:00:255:255:10:77:01:02
// A user compares it with what ib_write_bw shows for the other end.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "wire/ip_address.hpp"

namespace metaroce::apps {

[[nodiscard]] inline std::array<std::uint8_t, 16> gid_bytes(const wire::IpAddress& a) {
  std::array<std::uint8_t, 16> g{};
  if (a.version == 6) {
    for (std::size_t i = 0; i < 16; ++i) g[i] = a.ipv6[i];
    return g;
  }
  g[10] = 0xff;
  g[11] = 0xff;
  for (int i = 0; i < 4; ++i) g[12 + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(a.ipv4 >> (24 - 8 * i));
  return g;
}

// perftest's GID text for `address` (IPv4 or IPv6 text); empty when it is
// not an address.
[[nodiscard]] inline std::string gid_text(const std::string& address) {
  wire::IpAddress a;
  if (!wire::parse_ip(address, a)) return {};
  const std::array<std::uint8_t, 16> g = gid_bytes(a);
  std::string out;
  for (std::size_t i = 0; i < g.size(); ++i) out += fmt::format("{}{:02d}", i == 0 ? "" : ":", g[i]);
  return out;
}

}  // namespace metaroce::apps
