// Whole frames: Ethernet [802.1Q] | IPv4 or IPv6 | UDP 4791 | BTH | ext | payload | pad | ICRC.
//
// build_* write a frame from a FrameSpec (lengths, pad and the IPv4 checksum
// are filled in); parse_frame reads one back, never past the given bytes, and
// says why when it cannot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "wire/headers.hpp"
#include "wire/icrc.hpp"
#include "wire/opcode.hpp"

namespace metaroce::wire {

enum class ParseError : std::uint8_t {
  ok,
  truncated,             // the frame ends before a header or a length it claims
  not_ip,                // ethertype is neither IPv4 nor IPv6
  bad_ip_version,        // version nibble disagrees with the ethertype
  bad_ip_header_length,  // IPv4 IHL below 5
  ipv4_options,          // IPv4 IHL above 5: RoCEv2 carries no options
  ip_fragment,           // MF set or fragment offset non-zero
  bad_ip_length,         // IPv4 total length below its header
  bad_ip_checksum,
  not_udp,
  not_roce_port,         // UDP destination port is not 4791
  bad_udp_length,        // UDP length disagrees with the IP payload length
  unknown_opcode,
  bad_header_field,      // BTH TVer, metaroce flags or path count out of range
  bad_pad,               // pad count larger than the payload, or payload+pad not 4-aligned
  length_mismatch,       // the opcode's headers and ICRC do not fit the UDP payload,
                         // or bytes follow a header that carries no payload
  bad_icrc,
  count_
};

inline constexpr std::size_t parse_error_count = static_cast<std::size_t>(ParseError::count_);

[[nodiscard]] std::string_view to_string(ParseError e) noexcept;

// Everything needed to build one frame. Lengths, BTH pad and the IPv4
// checksum are computed by the builder; the headers the opcode does not carry
// are ignored. UDP checksum is written as given (0: RoCEv2 practice).
struct FrameSpec {
  EthernetHeader eth{};
  std::uint8_t ip_version = 4;
  Ipv4Header ipv4{};
  Ipv6Header ipv6{};
  UdpHeader udp{};
  Bth bth{};
  Deth deth{};
  Reth reth{};
  AtomicEth atomic_eth{};
  Aeth aeth{};
  std::uint64_t atomic_ack_orig = 0;
  std::uint32_t imm = 0;
  std::uint32_t ieth_rkey = 0;
  MrDataHeader mr_data{};
  MrWriteHeader mr_write{};
  MrSendHeader mr_send{};
  MrReadHeader mr_read{};
  MrAckHeader mr_ack{};  // path_count is taken from mr_path_acks.size()
  std::span<const MrPathAck> mr_path_acks{};
};

// Bytes from the start of the frame to the end of the last extension header.
[[nodiscard]] std::size_t headers_size(const FrameSpec& spec) noexcept;

// Pad bytes that follow a payload of this length.
[[nodiscard]] constexpr std::uint8_t pad_for(std::size_t payload_len) noexcept {
  return static_cast<std::uint8_t>((4 - (payload_len & 3)) & 3);
}

// Writes every header for a payload of `payload_len` bytes that will follow
// in another buffer; the IP header starts at spec.eth.size() and the trailer
// carries pad_for(payload_len) pad bytes. Returns the bytes written, or 0 when
// `out` is too small, the IP version is not 4 or 6, or the frame would exceed
// 65535 bytes of IP.
std::size_t build_headers(const FrameSpec& spec, std::uint32_t payload_len,
                          std::span<std::uint8_t> out) noexcept;

// Writes `pad` zero bytes then the ICRC (least-significant byte first).
// Returns bytes written (pad + 4), 0 when `out` is too small.
std::size_t build_trailer(std::uint8_t pad, std::uint32_t icrc, std::span<std::uint8_t> out) noexcept;

// A whole frame in one buffer, ICRC included. Returns its length, or 0 when
// `out` is too small or the spec is bad.
std::size_t build_frame(const FrameSpec& spec, ByteSpan payload, std::span<std::uint8_t> out) noexcept;

// What parse_frame found. The BTH and every header after it are decoded
// (the transport reads them all); the Ethernet, IP and UDP headers are only
// validated, and decoded on demand by the accessors, which read the frame:
// they are valid while the frame's bytes are.
// The secure trailer (lib/secure): SPI, counter, GCM tag.
inline constexpr std::size_t secure_trailer_size = 28;

struct ParsedFrame {
  ByteSpan frame{};
  std::uint8_t ip_version = 0;
  std::uint16_t udp_src_port = 0;  // the path entropy, wanted on every packet
  Bth bth{};
  std::uint16_t headers = 0;  // HeaderFlag bits of the headers present
  Deth deth{};
  Reth reth{};
  AtomicEth atomic_eth{};
  Aeth aeth{};
  std::uint64_t atomic_ack_orig = 0;
  std::uint32_t imm = 0;
  std::uint32_t ieth_rkey = 0;
  MrDataHeader mr_data{};
  MrWriteHeader mr_write{};
  MrSendHeader mr_send{};
  MrReadHeader mr_read{};
  MrAckHeader mr_ack{};
  ByteSpan mr_path_acks_raw{};  // mr_ack.path_count blocks of mr_path_ack_size bytes

  std::uint16_t l3_offset = 0;
  std::uint16_t l4_offset = 0;
  std::uint16_t bth_offset = 0;
  std::uint16_t payload_offset = 0;
  ByteSpan payload{};  // without pad, secure trailer and ICRC
  // Where the secure trailer starts (ParseOptions::secure_trailer), 0 when
  // the frame was parsed without one: the protected region is
  // [bth_offset, secure_trailer_offset), the trailer the
  // secure_trailer_size bytes after it.
  std::uint16_t secure_trailer_offset = 0;
  std::uint32_t icrc = 0;  // as carried (least-significant byte first on the wire)
  bool icrc_checked = false;

  [[nodiscard]] bool has(HeaderFlag f) const noexcept { return (headers & f) != 0; }

  [[nodiscard]] EthernetHeader ethernet() const noexcept;
  [[nodiscard]] Ipv4Header ipv4() const noexcept {  // when ip_version == 4
    Ipv4Header h;
    decode(frame.data() + l3_offset, h);
    return h;
  }
  [[nodiscard]] Ipv6Header ipv6() const noexcept {  // when ip_version == 6
    Ipv6Header h;
    decode(frame.data() + l3_offset, h);
    return h;
  }
  [[nodiscard]] UdpHeader udp() const noexcept {
    UdpHeader h;
    decode(frame.data() + l4_offset, h);
    return h;
  }
  // Traffic class byte: IPv4 TOS, or IPv6 bits 4..11.
  [[nodiscard]] std::uint8_t traffic_class() const noexcept {
    const std::uint8_t* ip = frame.data() + l3_offset;
    return ip_version == 6 ? static_cast<std::uint8_t>((ip[0] << 4) | (ip[1] >> 4)) : ip[1];
  }
  [[nodiscard]] std::uint8_t ecn() const noexcept { return traffic_class() & 3; }
  [[nodiscard]] std::uint8_t dscp() const noexcept {
    return static_cast<std::uint8_t>(traffic_class() >> 2);
  }
  [[nodiscard]] MrPathAck path_ack(std::size_t i) const noexcept {
    MrPathAck a;
    decode(mr_path_acks_raw.data() + i * mr_path_ack_size, a);
    return a;
  }
};

struct ParseOptions {
  bool verify_ip_checksum = true;
  // Off when the frame is scattered over buffers: call compute_icrc on the
  // pieces instead.
  bool verify_icrc = true;
  // A CRC the caller already computed over the frame's bytes [from, to)
  // (compute_icrcs, four frames folded at once): verification uses it when
  // that is exactly the span the frame's ICRC covers, else computes its own.
  struct Precomputed {
    std::uint32_t icrc = 0;
    std::uint32_t from = 0;
    std::uint32_t to = 0;
  };
  const Precomputed* precomputed_icrc = nullptr;
  // The frame carries a secure trailer (doc/WIRE.md) between its pad and
  // its ICRC: parse the headers and payload before it.
  bool secure_trailer = false;
};

// The destination QP of a RoCEv2 frame (Ethernet, one optional 802.1Q tag,
// IPv4 or IPv6, UDP to 4791, the BTH's QPN bytes) without parsing or
// checking the rest, from the bytes at hand (a first segment will do): for
// choosing who parses a frame, or how. False for anything else or too
// short.
[[nodiscard]] bool peek_dest_qp(ByteSpan frame, std::uint32_t& qpn) noexcept;
// The same walk: where the BTH starts in a RoCEv2 frame (the UDP payload of
// a datagram to 4791), with at least the BTH's first 8 bytes at hand.
[[nodiscard]] bool peek_bth_offset(ByteSpan frame, std::size_t& bth) noexcept;

// The bytes of a frame's transport headers (the BTH, its extension headers
// and an ACK's path blocks) read from `from_bth` (the frame from its BTH
// on), as parse_frame would count them; 0 when the opcode is unknown or
// the headers do not fit. For a frame this stack built: nothing else is
// checked.
[[nodiscard]] std::size_t transport_headers_size(ByteSpan from_bth) noexcept;

// Parses a contiguous frame. On error, `out` holds what was decoded before
// the failing check (for diagnostics) and the reason is returned.
[[nodiscard]] ParseError parse_frame(ByteSpan frame, ParsedFrame& out,
                                     ParseOptions options = {}) noexcept;

}  // namespace metaroce::wire
