#include "fabric/forwarding_table.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

namespace metaroce::fabric {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::uint16_t be16(const std::uint8_t* p) noexcept { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }

}  // namespace

bool ForwardingTable::add(std::string_view entry, std::string& error) {
  const std::size_t eq = entry.find('=');
  if (eq == std::string_view::npos) {
    error = fmt::format("route '{}' has no '=': give ADDRESS=PORT, such as 10.0.0.2=1 or fd00::2=1", entry);
    return false;
  }
  const std::string_view address = trim(entry.substr(0, eq));
  const std::string_view port = trim(entry.substr(eq + 1));
  Route route;
  if (!wire::parse_ip(address, route.address)) {
    error = fmt::format("route '{}': '{}' is not an IP address (give A.B.C.D or an IPv6 address such as fd00::2)",
                        entry, address);
    return false;
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value >= ports_) {
    error = fmt::format("route '{}': port '{}' is not one of this switch's: give 0..{}", entry, port, ports_ - 1);
    return false;
  }
  route.port = static_cast<std::uint16_t>(value);
  return add(route, error);
}

bool ForwardingTable::add(const Route& route, std::string& error) {
  if (route.port >= ports_) {
    error = fmt::format("route {}: port {} is not one of this switch's: give 0..{}", wire::to_string(route.address),
                        route.port, ports_ - 1);
    return false;
  }
  const auto [at, added] = routes_.emplace(route.address, route.port);
  if (!added && at->second != route.port) {
    error = fmt::format("route {}={}: {} already goes to port {}: give each address one port",
                        wire::to_string(route.address), route.port, wire::to_string(route.address), at->second);
    return false;
  }
  if (added) order_.push_back(route);
  return true;
}

bool ForwardingTable::add_lines(std::string_view text, std::string_view source, std::string& error) {
  std::size_t line_number = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_number;
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    std::string why;
    if (!add(line, why)) {
      error = fmt::format("{} line {}: {}", source, line_number, why);
      return false;
    }
  }
  return true;
}

std::optional<std::uint16_t> ForwardingTable::lookup(const wire::IpAddress& address) const {
  const auto at = routes_.find(address);
  if (at == routes_.end()) return std::nullopt;
  return at->second;
}

std::optional<std::uint16_t> ForwardingTable::route_frame(std::span<const std::uint8_t> frame) const {
  wire::IpAddress address;
  if (!forwarding_address(frame, address)) return std::nullopt;
  return lookup(address);
}

bool forwarding_address(std::span<const std::uint8_t> frame, wire::IpAddress& out) noexcept {
  constexpr std::uint16_t ethertype_ipv4 = 0x0800, ethertype_ipv6 = 0x86dd, ethertype_arp = 0x0806,
                          ethertype_vlan = 0x8100;
  if (frame.size() < 14) return false;
  std::size_t l3 = 14;
  std::uint16_t type = be16(frame.data() + 12);
  if (type == ethertype_vlan) {
    if (frame.size() < 18) return false;
    type = be16(frame.data() + 16);
    l3 = 18;
  }
  const std::uint8_t* p = frame.data() + l3;
  const std::size_t left = frame.size() - l3;
  if (type == ethertype_ipv4) {
    if (left < 20 || (p[0] >> 4) != 4) return false;
    out = wire::IpAddress::v4(static_cast<std::uint32_t>(p[16]) << 24 | static_cast<std::uint32_t>(p[17]) << 16 |
                              static_cast<std::uint32_t>(p[18]) << 8 | p[19]);
    return true;
  }
  if (type == ethertype_arp) {
    // Ethernet/IPv4 ARP: the target protocol address at 24.
    if (left < 28 || be16(p) != 1 || be16(p + 2) != ethertype_ipv4 || p[4] != 6 || p[5] != 4) return false;
    out = wire::IpAddress::v4(static_cast<std::uint32_t>(p[24]) << 24 | static_cast<std::uint32_t>(p[25]) << 16 |
                              static_cast<std::uint32_t>(p[26]) << 8 | p[27]);
    return true;
  }
  if (type == ethertype_ipv6) {
    if (left < 40 || (p[0] >> 4) != 6) return false;
    wire::Ipv6Address a{};
    constexpr std::uint8_t icmpv6 = 58, neighbour_solicitation = 135;
    // A solicitation goes to a group: forward it by the address it asks about.
    if (p[6] == icmpv6 && left >= 40 + 24 && p[40] == neighbour_solicitation) {
      std::memcpy(a.data(), p + 48, a.size());
    } else {
      std::memcpy(a.data(), p + 24, a.size());
    }
    out = wire::IpAddress::v6(a);
    return true;
  }
  return false;
}

}  // namespace metaroce::fabric
