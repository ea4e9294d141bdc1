#include "wire/neighbour.hpp"

#include <cstring>

namespace metaroce::wire {

Ipv6Address solicited_node_address(const Ipv6Address& a) noexcept {
  Ipv6Address g{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0, 0, 0};
  g[13] = a[13];
  g[14] = a[14];
  g[15] = a[15];
  return g;
}

MacAddress ipv6_multicast_mac(const Ipv6Address& group) noexcept {
  return MacAddress{0x33, 0x33, group[12], group[13], group[14], group[15]};
}

std::size_t build_arp_frame(const EthernetHeader& eth, const ArpMessage& m, std::span<std::uint8_t> out) noexcept {
  EthernetHeader e = eth;
  e.ethertype = ethertype_arp;
  const std::size_t size = e.size() + arp_size;
  if (out.size() < size) return 0;
  std::uint8_t* p = out.data();
  encode(e, p);
  p += e.size();
  store_be16(p, 1);  // Ethernet
  store_be16(p + 2, ethertype_ipv4);
  p[4] = 6;
  p[5] = 4;
  store_be16(p + 6, m.operation);
  std::memcpy(p + 8, m.sender_mac.data(), 6);
  store_be32(p + 14, m.sender_ip);
  std::memcpy(p + 18, m.target_mac.data(), 6);
  store_be32(p + 24, m.target_ip);
  return size;
}

namespace {

// One's-complement sum of big-endian 16-bit words, folded later.
std::uint32_t add_words(std::uint32_t sum, const std::uint8_t* p, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 1 < n; i += 2) sum += load_be16(p + i);
  if (i < n) sum += static_cast<std::uint32_t>(p[i]) << 8;
  return sum;
}

std::uint16_t fold(std::uint32_t sum) noexcept {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum & 0xffff);
}

}  // namespace

std::uint16_t icmpv6_checksum(const Ipv6Address& src, const Ipv6Address& dst, ByteSpan message) noexcept {
  std::uint32_t sum = add_words(0, src.data(), 16);
  sum = add_words(sum, dst.data(), 16);
  const auto length = static_cast<std::uint32_t>(message.size());
  sum += length >> 16;
  sum += length & 0xffff;
  sum += ip_protocol_icmpv6;
  sum = add_words(sum, message.data(), message.size());
  return fold(sum);
}

std::size_t build_nd_frame(const EthernetHeader& eth, const Ipv6Address& src, const Ipv6Address& dst,
                           const NdMessage& m, std::span<std::uint8_t> out) noexcept {
  EthernetHeader e = eth;
  e.ethertype = ethertype_ipv6;
  const std::size_t icmp_size = nd_message_size + (m.link_address_present ? nd_link_option_size : 0);
  const std::size_t size = e.size() + ipv6_header_size + icmp_size;
  if (out.size() < size) return 0;
  std::uint8_t* p = out.data();
  encode(e, p);
  Ipv6Header ip;
  ip.payload_length = static_cast<std::uint16_t>(icmp_size);
  ip.next_header = ip_protocol_icmpv6;
  ip.hop_limit = nd_hop_limit;
  ip.src = src;
  ip.dst = dst;
  encode(ip, p + e.size());
  std::uint8_t* icmp = p + e.size() + ipv6_header_size;
  std::memset(icmp, 0, icmp_size);
  icmp[0] = m.type;
  if (m.type == icmpv6_neighbour_advertisement)
    icmp[4] = static_cast<std::uint8_t>((m.router ? 0x80 : 0) | (m.solicited ? 0x40 : 0) | (m.override_entry ? 0x20 : 0));
  std::memcpy(icmp + 8, m.target.data(), 16);
  if (m.link_address_present) {
    icmp[24] = m.type == icmpv6_neighbour_solicitation ? nd_option_source_link : nd_option_target_link;
    icmp[25] = 1;  // in units of 8 bytes
    std::memcpy(icmp + 26, m.link_address.data(), 6);
  }
  store_be16(icmp + 2, icmpv6_checksum(src, dst, ByteSpan(icmp, icmp_size)));
  return size;
}

std::string_view to_string(NeighbourParseError e) noexcept {
  switch (e) {
    case NeighbourParseError::ok: return "ok";
    case NeighbourParseError::truncated: return "truncated";
    case NeighbourParseError::not_neighbour: return "not_neighbour";
    case NeighbourParseError::arp_not_ethernet_ipv4: return "arp_not_ethernet_ipv4";
    case NeighbourParseError::arp_bad_operation: return "arp_bad_operation";
    case NeighbourParseError::arp_bad_sender: return "arp_bad_sender";
    case NeighbourParseError::ipv6_bad_version: return "ipv6_bad_version";
    case NeighbourParseError::icmpv6_other: return "icmpv6_other";
    case NeighbourParseError::nd_bad_hop_limit: return "nd_bad_hop_limit";
    case NeighbourParseError::nd_bad_code: return "nd_bad_code";
    case NeighbourParseError::nd_bad_length: return "nd_bad_length";
    case NeighbourParseError::nd_bad_checksum: return "nd_bad_checksum";
    case NeighbourParseError::nd_multicast_target: return "nd_multicast_target";
    case NeighbourParseError::nd_bad_option: return "nd_bad_option";
    case NeighbourParseError::nd_bad_unspecified_source: return "nd_bad_unspecified_source";
    case NeighbourParseError::nd_solicited_to_multicast: return "nd_solicited_to_multicast";
    case NeighbourParseError::nd_multicast_source: return "nd_multicast_source";
    case NeighbourParseError::count_: break;
  }
  return "unknown";
}

FrameKind classify(ByteSpan frame) noexcept {
  if (frame.size() < ethernet_header_size) return FrameKind::other;
  std::size_t l3 = ethernet_header_size;
  std::uint16_t type = load_be16(frame.data() + 12);
  if (type == ethertype_vlan) {
    if (frame.size() < ethernet_header_size + vlan_tag_size) return FrameKind::other;
    type = load_be16(frame.data() + 16);
    l3 += vlan_tag_size;
  }
  if (type == ethertype_arp) return FrameKind::arp;
  if (type == ethertype_ipv6 && frame.size() > l3 + 6 && frame[l3 + 6] == ip_protocol_icmpv6) return FrameKind::icmpv6;
  return FrameKind::other;
}

namespace {

NeighbourParseError parse_arp(const std::uint8_t* p, std::size_t len, ArpMessage& m) noexcept {
  if (len < arp_size) return NeighbourParseError::truncated;  // Ethernet padding may follow: more is fine
  if (load_be16(p) != 1 || load_be16(p + 2) != ethertype_ipv4 || p[4] != 6 || p[5] != 4)
    return NeighbourParseError::arp_not_ethernet_ipv4;
  m.operation = load_be16(p + 6);
  std::memcpy(m.sender_mac.data(), p + 8, 6);
  m.sender_ip = load_be32(p + 14);
  std::memcpy(m.target_mac.data(), p + 18, 6);
  m.target_ip = load_be32(p + 24);
  if (m.operation != arp_request && m.operation != arp_reply) return NeighbourParseError::arp_bad_operation;
  if (is_multicast(m.sender_mac)) return NeighbourParseError::arp_bad_sender;
  return NeighbourParseError::ok;
}

NeighbourParseError parse_nd(const std::uint8_t* p, std::size_t len, NeighbourFrame& out) noexcept {
  if (len < ipv6_header_size) return NeighbourParseError::truncated;
  if ((p[0] >> 4) != 6) return NeighbourParseError::ipv6_bad_version;
  if (p[6] != ip_protocol_icmpv6) return NeighbourParseError::not_neighbour;
  const std::size_t payload = load_be16(p + 4);
  if (ipv6_header_size + payload > len) return NeighbourParseError::truncated;  // padding may follow
  std::memcpy(out.ip_src.data(), p + 8, 16);
  std::memcpy(out.ip_dst.data(), p + 24, 16);
  const std::uint8_t* icmp = p + ipv6_header_size;
  if (payload < 4) return NeighbourParseError::truncated;
  out.icmpv6_type = icmp[0];
  if (icmp[0] != icmpv6_neighbour_solicitation && icmp[0] != icmpv6_neighbour_advertisement)
    return NeighbourParseError::icmpv6_other;
  if (p[7] != nd_hop_limit) return NeighbourParseError::nd_bad_hop_limit;
  if (icmp[1] != 0) return NeighbourParseError::nd_bad_code;
  if (payload < nd_message_size) return NeighbourParseError::nd_bad_length;
  if (icmpv6_checksum(out.ip_src, out.ip_dst, ByteSpan(icmp, payload)) != 0)
    return NeighbourParseError::nd_bad_checksum;
  NdMessage& m = out.nd;
  m.type = icmp[0];
  m.router = (icmp[4] & 0x80) != 0;
  m.solicited = (icmp[4] & 0x40) != 0;
  m.override_entry = (icmp[4] & 0x20) != 0;
  if (m.type == icmpv6_neighbour_solicitation) m.router = m.solicited = m.override_entry = false;
  std::memcpy(m.target.data(), icmp + 8, 16);
  if (is_multicast(m.target)) return NeighbourParseError::nd_multicast_target;
  const std::uint8_t wanted =
      m.type == icmpv6_neighbour_solicitation ? nd_option_source_link : nd_option_target_link;
  for (std::size_t at = nd_message_size; at < payload;) {
    if (payload - at < 2 || icmp[at + 1] == 0) return NeighbourParseError::nd_bad_option;
    const std::size_t option = std::size_t{icmp[at + 1]} * 8;
    if (option > payload - at) return NeighbourParseError::nd_bad_option;
    if (icmp[at] == wanted && option == nd_link_option_size) {
      m.link_address_present = true;
      std::memcpy(m.link_address.data(), icmp + at + 2, 6);
    }
    at += option;  // other options (nonce, ...) are skipped, as RFC 4861 says
  }
  if (m.type == icmpv6_neighbour_solicitation && is_unspecified(out.ip_src) &&
      (m.link_address_present || out.ip_dst != solicited_node_address(m.target)))
    return NeighbourParseError::nd_bad_unspecified_source;
  if (m.type == icmpv6_neighbour_advertisement && m.solicited && is_multicast(out.ip_dst))
    return NeighbourParseError::nd_solicited_to_multicast;
  if (is_multicast(out.ip_src)) return NeighbourParseError::nd_multicast_source;
  return NeighbourParseError::ok;
}

}  // namespace

NeighbourParseError parse_neighbour_frame(ByteSpan frame, NeighbourFrame& out) noexcept {
  out = NeighbourFrame{};
  const std::uint8_t* p = frame.data();
  std::size_t len = frame.size();
  if (len < ethernet_header_size) return NeighbourParseError::truncated;
  EthernetHeader& e = out.eth;
  std::memcpy(e.dst.data(), p, 6);
  std::memcpy(e.src.data(), p + 6, 6);
  e.vlan_present = load_be16(p + 12) == ethertype_vlan;
  if (e.vlan_present && len < ethernet_header_size + vlan_tag_size) return NeighbourParseError::truncated;
  e.vlan_tci = e.vlan_present ? load_be16(p + 14) : 0;
  e.ethertype = load_be16(p + (e.vlan_present ? 16 : 12));
  p += e.size();
  len -= e.size();
  if (e.ethertype == ethertype_arp) {
    out.is_arp = true;
    return parse_arp(p, len, out.arp);
  }
  out.is_arp = false;
  if (e.ethertype != ethertype_ipv6) return NeighbourParseError::not_neighbour;
  return parse_nd(p, len, out);
}

}  // namespace metaroce::wire
