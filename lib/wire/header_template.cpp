#include "wire/header_template.hpp"

#include <cstring>

namespace metaroce::wire {

bool HeaderTemplate::prepare(const FrameSpec& spec) noexcept {
  if (headers_size(spec) > capacity) return false;
  const std::size_t size = build_headers(spec, 0, bytes_);
  if (size == 0) return false;
  size_ = static_cast<std::uint32_t>(size);
  l3_offset_ = static_cast<std::uint32_t>(spec.eth.size());
  ipv6_ = spec.ip_version == 6;
  l4_offset_ = l3_offset_ + static_cast<std::uint32_t>(ipv6_ ? ipv6_header_size : ipv4_header_size);
  bth_offset_ = l4_offset_ + udp_header_size;
  if (!ipv6_) {
    // One's-complement sum of the header with total length and checksum zero.
    std::uint8_t* ip = bytes_.data() + l3_offset_;
    store_be16(ip + 2, 0);
    store_be16(ip + 10, 0);
    ipv4_partial_sum_ = static_cast<std::uint16_t>(~ipv4_header_checksum(ip, ipv4_header_size));
  }
  return true;
}

std::size_t HeaderTemplate::stamp(std::span<std::uint8_t> out, std::uint32_t payload_len,
                                  std::uint32_t psn, bool ack_req) const noexcept {
  const std::uint32_t pad = pad_for(payload_len);
  const std::uint32_t udp_len = size_ - l4_offset_ + payload_len + pad + icrc_size;
  const std::uint32_t ip_payload = ipv6_ ? udp_len : udp_len + ipv4_header_size;
  if (out.size() < size_ || ip_payload > 0xffff) return 0;
  std::uint8_t* p = out.data();
  copy_bytes(p, bytes_.data(), size_);  // inline: 16-byte moves, no library call
  std::uint8_t* ip = p + l3_offset_;
  if (ipv6_) {
    store_be16(ip + 4, static_cast<std::uint16_t>(udp_len));
  } else {
    std::uint32_t sum = ipv4_partial_sum_ + ip_payload;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    store_be16(ip + 2, static_cast<std::uint16_t>(ip_payload));
    store_be16(ip + 10, static_cast<std::uint16_t>(~sum));
  }
  store_be16(p + l4_offset_ + 4, static_cast<std::uint16_t>(udp_len));
  std::uint8_t* bth = p + bth_offset_;
  bth[1] = static_cast<std::uint8_t>((bth[1] & ~0x30u) | (pad << 4));
  store_be32(bth + 8, (ack_req ? 0x8000'0000u : 0u) | (psn & psn_mask));
  return size_;
}

}  // namespace metaroce::wire
