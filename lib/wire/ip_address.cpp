#include "wire/ip_address.hpp"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

namespace metaroce::wire {

bool parse_ip(std::string_view text, IpAddress& out) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return false;
  char buffer[INET6_ADDRSTRLEN] = {};
  std::memcpy(buffer, text.data(), text.size());
  in_addr a4{};
  if (inet_pton(AF_INET, buffer, &a4) == 1) {
    out = IpAddress::v4(ntohl(a4.s_addr));
    return true;
  }
  in6_addr a6{};
  if (inet_pton(AF_INET6, buffer, &a6) == 1) {
    Ipv6Address a{};
    std::memcpy(a.data(), &a6, a.size());
    out = IpAddress::v6(a);
    return true;
  }
  return false;
}

std::string to_string(const Ipv6Address& a) {
  char buffer[INET6_ADDRSTRLEN] = {};
  in6_addr a6{};
  std::memcpy(&a6, a.data(), a.size());
  if (inet_ntop(AF_INET6, &a6, buffer, sizeof buffer) == nullptr) return "?";
  return buffer;
}

std::string to_string(const IpAddress& a) {
  if (a.version == 6) return to_string(a.ipv6);
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%u.%u.%u.%u", a.ipv4 >> 24, (a.ipv4 >> 16) & 0xff, (a.ipv4 >> 8) & 0xff,
                a.ipv4 & 0xff);
  return buffer;
}

std::string to_string(const MacAddress& m) {
  char buffer[18];
  std::snprintf(buffer, sizeof buffer, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return buffer;
}

}  // namespace metaroce::wire
