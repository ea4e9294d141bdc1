// Addresses as the command line and the connection manager give them:
// IPv4 in dotted quads, MACs as six colon-separated hex bytes.
#pragma once

#include <cstdint>
#include <string>

#include "wire/headers.hpp"

namespace metaroce::stack {

// A.B.C.D into host byte order; false when `text` is not one.
bool parse_ipv4(const std::string& text, std::uint32_t& out);
// xx:xx:xx:xx:xx:xx (hex, either case); false otherwise.
bool parse_mac(const std::string& text, wire::MacAddress& out);
// Lower-case xx:xx:xx:xx:xx:xx.
std::string mac_string(const wire::MacAddress& mac);

}  // namespace metaroce::stack
