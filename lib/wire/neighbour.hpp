// ARP (RFC 826) and IPv6 neighbour discovery (RFC 4861: neighbour
// solicitation and advertisement, with their link-layer address options)
// as whole Ethernet frames: what lets a kernel router learn our MAC and
// lets us learn its. Build and parse only, no state (host/neighbours.hpp
// keeps the cache); parse never reads past the given bytes and names the
// first check that failed. Byte layouts: doc/WIRE.md, "Neighbours".
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "wire/headers.hpp"
#include "wire/icrc.hpp"

namespace metaroce::wire {

inline constexpr std::uint16_t ethertype_arp = 0x0806;
inline constexpr std::uint8_t ip_protocol_icmpv6 = 58;

inline constexpr std::size_t arp_size = 28;  // Ethernet/IPv4 ARP
inline constexpr std::uint16_t arp_request = 1;
inline constexpr std::uint16_t arp_reply = 2;

inline constexpr std::uint8_t icmpv6_neighbour_solicitation = 135;
inline constexpr std::uint8_t icmpv6_neighbour_advertisement = 136;
inline constexpr std::size_t nd_message_size = 24;       // type, code, checksum, flags/reserved, target
inline constexpr std::size_t nd_link_option_size = 8;    // type, length 1, a MAC
inline constexpr std::uint8_t nd_option_source_link = 1;
inline constexpr std::uint8_t nd_option_target_link = 2;
inline constexpr std::uint8_t nd_hop_limit = 255;        // RFC 4861: anything else came through a router

inline constexpr MacAddress broadcast_mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
inline constexpr Ipv6Address all_nodes_address{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

[[nodiscard]] constexpr bool is_multicast(const MacAddress& m) noexcept { return (m[0] & 1) != 0; }
[[nodiscard]] constexpr bool is_multicast(const Ipv6Address& a) noexcept { return a[0] == 0xff; }
[[nodiscard]] constexpr bool is_unspecified(const Ipv6Address& a) noexcept {
  for (const auto b : a)
    if (b != 0) return false;
  return true;
}
// ff02::1:ffXX:XXXX, the group a neighbour solicitation for `a` goes to.
[[nodiscard]] Ipv6Address solicited_node_address(const Ipv6Address& a) noexcept;
// 33:33 and the group's last four bytes (RFC 2464).
[[nodiscard]] MacAddress ipv6_multicast_mac(const Ipv6Address& group) noexcept;

struct ArpMessage {
  std::uint16_t operation = arp_request;
  MacAddress sender_mac{};
  std::uint32_t sender_ip = 0;  // host order
  MacAddress target_mac{};      // zero in a request
  std::uint32_t target_ip = 0;
};

// A neighbour solicitation (type 135) or advertisement (136).
struct NdMessage {
  std::uint8_t type = icmpv6_neighbour_solicitation;
  bool router = false;     // advertisement flags
  bool solicited = false;
  bool override_entry = false;
  Ipv6Address target{};
  // The solicitation's source, or the advertisement's target, link-layer
  // address option.
  bool link_address_present = false;
  MacAddress link_address{};
};

// Writes the frame (the Ethernet header's ethertype is set by the builder;
// a VLAN tag when eth.vlan_present). Returns its length (42 bytes untagged:
// the NIC pads it to the Ethernet minimum), 0 when `out` is too small.
std::size_t build_arp_frame(const EthernetHeader& eth, const ArpMessage& m, std::span<std::uint8_t> out) noexcept;
// IPv6 header (hop limit 255, traffic class 0) and the ICMPv6 message with
// its checksum; the link-layer address option when m.link_address_present.
// 86 bytes untagged with the option, 78 without; 0 when `out` is too small.
std::size_t build_nd_frame(const EthernetHeader& eth, const Ipv6Address& src, const Ipv6Address& dst,
                           const NdMessage& m, std::span<std::uint8_t> out) noexcept;

// The ICMPv6 checksum (RFC 4443: over the pseudo-header and the message,
// its checksum field taken as is): 0 for a message whose field is right
// when computed over it with the field zeroed, it is the value to store.
[[nodiscard]] std::uint16_t icmpv6_checksum(const Ipv6Address& src, const Ipv6Address& dst,
                                            ByteSpan message) noexcept;

enum class NeighbourParseError : std::uint8_t {
  ok,
  truncated,              // the frame ends before a header or a length it claims
  not_neighbour,          // neither ARP nor ICMPv6 in IPv6
  arp_not_ethernet_ipv4,  // hardware type 1, protocol 0x0800, lengths 6 and 4: anything else
  arp_bad_operation,      // neither request nor reply
  arp_bad_sender,         // sender MAC multicast or broadcast
  ipv6_bad_version,       // version nibble not 6
  icmpv6_other,           // ICMPv6 but neither solicitation nor advertisement (RA, MLD, echo, ...)
  nd_bad_hop_limit,       // not 255: sent from beyond this link
  nd_bad_code,
  nd_bad_length,          // shorter than 24 bytes
  nd_bad_checksum,
  nd_multicast_target,
  nd_bad_option,          // an option of length 0, or one past the message's end
  nd_bad_unspecified_source,  // a solicitation from :: with a source address option or to a unicast address
  nd_solicited_to_multicast,  // an advertisement with the solicited flag sent to a group
  nd_multicast_source,        // from a group address: no packet may come from one, and an answer would go to it
  count_
};

inline constexpr std::size_t neighbour_parse_error_count = static_cast<std::size_t>(NeighbourParseError::count_);

[[nodiscard]] std::string_view to_string(NeighbourParseError e) noexcept;

// What a frame is, from its ethertype (after one VLAN tag) and, for IPv6,
// its next header: cheap, for the receive path's dispatch.
enum class FrameKind : std::uint8_t { other, arp, icmpv6 };
[[nodiscard]] FrameKind classify(ByteSpan frame) noexcept;

struct NeighbourFrame {
  EthernetHeader eth{};
  bool is_arp = false;
  ArpMessage arp{};  // is_arp
  Ipv6Address ip_src{};  // !is_arp
  Ipv6Address ip_dst{};
  std::uint8_t icmpv6_type = 0;
  NdMessage nd{};
};

[[nodiscard]] NeighbourParseError parse_neighbour_frame(ByteSpan frame, NeighbourFrame& out) noexcept;

}  // namespace metaroce::wire
