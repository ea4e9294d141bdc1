#include "fabric/frame_peek.hpp"

#include <algorithm>
#include <array>
#include <cstddef>

#include "fabric/random.hpp"
#include "wire/byte_order.hpp"
#include "wire/headers.hpp"

namespace metaroce::fabric {

using wire::load_be16;

FramePeek peek_frame(std::span<const std::uint8_t> frame) noexcept {
  FramePeek peek;
  const std::size_t len = frame.size();
  const std::uint8_t* p = frame.data();
  if (len < wire::ethernet_header_size) return peek;
  std::size_t l3 = wire::ethernet_header_size;
  std::uint16_t ethertype = load_be16(p + 12);
  if (ethertype == wire::ethertype_vlan) {
    if (len < wire::ethernet_header_size + wire::vlan_tag_size) return peek;
    ethertype = load_be16(p + 16);
    l3 += wire::vlan_tag_size;
  }
  peek.l3_offset = static_cast<std::uint16_t>(l3);
  std::size_t l4 = 0;
  std::uint8_t protocol = 0;
  if (ethertype == wire::ethertype_ipv4) {
    if (len < l3 + wire::ipv4_header_size || (p[l3] >> 4) != 4) return peek;
    const std::size_t ihl = std::size_t{p[l3] & 0x0fu} * 4;
    peek.ip_version = 4;
    peek.ecn = static_cast<std::uint8_t>(p[l3 + 1] & 3);
    if (ihl < wire::ipv4_header_size) return peek;
    l4 = l3 + ihl;
    protocol = p[l3 + 9];
  } else if (ethertype == wire::ethertype_ipv6) {
    if (len < l3 + wire::ipv6_header_size || (p[l3] >> 4) != 6) return peek;
    peek.ip_version = 6;
    peek.ecn = static_cast<std::uint8_t>((p[l3 + 1] >> 4) & 3);
    l4 = l3 + wire::ipv6_header_size;
    protocol = p[l3 + 6];
  } else {
    return peek;
  }
  if (protocol != wire::ip_protocol_udp || len < l4 + wire::udp_header_size) return peek;
  peek.udp = true;
  peek.l4_offset = static_cast<std::uint16_t>(l4);
  peek.udp_src_port = load_be16(p + l4);
  peek.roce = load_be16(p + l4 + 2) == wire::roce_udp_port;
  return peek;
}

bool set_ecn_ce(std::span<std::uint8_t> frame, const FramePeek& peek) noexcept {
  std::uint8_t* ip = frame.data() + peek.l3_offset;
  if (peek.ip_version == 6) {
    ip[1] = static_cast<std::uint8_t>(ip[1] | (ecn::ce << 4));
    return true;
  }
  if (peek.ip_version != 4) return false;
  const std::uint16_t old_word = load_be16(ip);
  ip[1] = static_cast<std::uint8_t>(ip[1] | ecn::ce);
  const std::uint16_t new_word = load_be16(ip);
  // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m').
  std::uint32_t sum = static_cast<std::uint16_t>(~load_be16(ip + 10));
  sum += static_cast<std::uint16_t>(~old_word);
  sum += new_word;
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  wire::store_be16(ip + 10, static_cast<std::uint16_t>(~sum));
  return true;
}

namespace {

struct ByteRange {
  std::size_t begin = 0;
  std::size_t end = 0;
};

// Ranges [begin, end) of bytes whose change a RoCE receiver detects.
std::size_t checked_ranges(std::size_t len, const FramePeek& peek, std::array<ByteRange, 4>& out) {
  const std::size_t l3 = peek.l3_offset;
  if (l3 == 0) {  // not even Ethernet: anything after its header
    out[0] = {wire::ethernet_header_size, len};
    return 1;
  }
  if (!peek.roce) {
    out[0] = {l3, len};
    return 1;
  }
  const std::size_t l4 = peek.l4_offset;
  const std::size_t bth = l4 + wire::udp_header_size;
  std::size_t n = 0;
  if (peek.ip_version == 6) {
    out[n++] = {l3 + 4, l3 + 7};   // payload length, next header
    out[n++] = {l3 + 8, l4 + 6};   // addresses, UDP ports and length
  } else {
    out[n++] = {l3, l4 + 6};       // the whole IPv4 header: its checksum covers it
  }
  out[n++] = {l4 + 8, bth + 4};    // BTH opcode .. P_Key
  out[n++] = {bth + 5, len};       // BTH QPN onwards, payload, ICRC
  return n;
}

}  // namespace

bool flip_random_bit(std::span<std::uint8_t> frame, const FramePeek& peek, Random& random) noexcept {
  std::array<ByteRange, 4> ranges{};
  const std::size_t count = checked_ranges(frame.size(), peek, ranges);
  std::size_t total = 0;
  for (std::size_t i = 0; i < count; ++i) {
    ranges[i].end = std::min(ranges[i].end, frame.size());
    ranges[i].begin = std::min(ranges[i].begin, ranges[i].end);
    total += ranges[i].end - ranges[i].begin;
  }
  if (total == 0) return false;
  std::size_t pick = random.below(total);
  const auto bit = static_cast<unsigned>(random.below(8));
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t size = ranges[i].end - ranges[i].begin;
    if (pick < size) {
      frame[ranges[i].begin + pick] = static_cast<std::uint8_t>(frame[ranges[i].begin + pick] ^ (1u << bit));
      return true;
    }
    pick -= size;
  }
  return false;
}

}  // namespace metaroce::fabric
