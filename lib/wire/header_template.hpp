// A connection path's headers, built once and stamped per packet.
//
// Everything from Ethernet to the BTH is the same for every packet of a path
// but the lengths, the IPv4 checksum, the pad count, the PSN and AckReq.
// prepare() builds the full header bytes once from a FrameSpec; stamp()
// copies them and patches only those fields (the IPv4 checksum by adding the
// new total length to a precomputed sum, RFC 1624 style). The caller then
// encodes the per-packet extension headers at ext_offset(). This is the
// transmit fast path; build_headers() is the general one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/frame.hpp"

namespace metaroce::wire {

class HeaderTemplate {
 public:
  // The largest header a template holds: VLAN + IPv6 + UDP + BTH + the
  // largest data extension set. ACKs with path blocks use build_headers().
  static constexpr std::size_t capacity = 128;

  // False when the spec cannot be built or its headers exceed `capacity`.
  bool prepare(const FrameSpec& spec) noexcept;

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t l3_offset() const noexcept { return l3_offset_; }
  [[nodiscard]] std::size_t ext_offset() const noexcept { return bth_offset_ + bth_size; }

  // Writes the headers of one packet carrying `payload_len` payload bytes
  // (its trailer then carries pad_for(payload_len) pad bytes and the ICRC).
  // Returns size(), or 0 when `out` is smaller than size() or the packet
  // would exceed 65535 bytes of IP.
  std::size_t stamp(std::span<std::uint8_t> out, std::uint32_t payload_len, std::uint32_t psn,
                    bool ack_req) const noexcept;

 private:
  std::array<std::uint8_t, capacity> bytes_{};
  std::uint32_t size_ = 0;
  std::uint32_t l3_offset_ = 0;
  std::uint32_t l4_offset_ = 0;
  std::uint32_t bth_offset_ = 0;
  std::uint32_t ipv4_partial_sum_ = 0;  // header words but total length and checksum
  bool ipv6_ = false;
};

}  // namespace metaroce::wire
