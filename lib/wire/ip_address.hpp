// An IPv4 or IPv6 address as one value, with its text forms: what the apps
// take on the command line (--local-ip, --gateway, a peer's address) and
// what the neighbour cache is keyed by. No DPDK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "wire/headers.hpp"

namespace metaroce::wire {

struct IpAddress {
  std::uint8_t version = 4;  // 4 or 6
  std::uint32_t ipv4 = 0;    // host order, when version == 4
  Ipv6Address ipv6{};        // when version == 6

  [[nodiscard]] static IpAddress v4(std::uint32_t a) noexcept { return IpAddress{4, a, {}}; }
  [[nodiscard]] static IpAddress v6(const Ipv6Address& a) noexcept { return IpAddress{6, 0, a}; }
  friend bool operator==(const IpAddress& a, const IpAddress& b) noexcept {
    return a.version == b.version && (a.version == 4 ? a.ipv4 == b.ipv4 : a.ipv6 == b.ipv6);
  }
};

// "10.0.0.1" or "fd00::1" (RFC 4291 text, no zone, no prefix); false
// for anything else.
[[nodiscard]] bool parse_ip(std::string_view text, IpAddress& out);
// The canonical text: dotted quad, or RFC 5952 for IPv6 ("fd00::1").
[[nodiscard]] std::string to_string(const IpAddress& a);
[[nodiscard]] std::string to_string(const Ipv6Address& a);
[[nodiscard]] std::string to_string(const MacAddress& m);

struct IpAddressHash {
  std::size_t operator()(const IpAddress& a) const noexcept {
    if (a.version == 4) return std::hash<std::uint32_t>{}(a.ipv4);
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (const auto b : a.ipv6) h = (h ^ b) * 0x100000001b3ull;
    return static_cast<std::size_t>(h);
  }
};

}  // namespace metaroce::wire
