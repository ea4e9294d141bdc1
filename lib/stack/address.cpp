#include "stack/address.hpp"

#include <arpa/inet.h>

#include <cstdio>

#include <fmt/format.h>

namespace metaroce::stack {

bool parse_ipv4(const std::string& text, std::uint32_t& out) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) return false;
  out = ntohl(a.s_addr);
  return true;
}

bool parse_mac(const std::string& text, wire::MacAddress& out) {
  unsigned v[6];
  char tail = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
    return false;
  for (int i = 0; i < 6; ++i) {
    if (v[i] > 255) return false;
    out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v[i]);
  }
  return true;
}

std::string mac_string(const wire::MacAddress& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
}

}  // namespace metaroce::stack
