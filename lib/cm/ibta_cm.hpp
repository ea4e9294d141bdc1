// The IBTA communication manager's messages (InfiniBand Architecture
// Specification Vol. 1, chapter 12), as rdma_cm sends them over RoCEv2: a
// UD SEND ONLY to QP 1 with Q_Key 0x80010000 carrying one 256-byte MAD of
// management class 0x07 (class version 2, method Send), attribute REQ,
// REP, RTU, REJ, DREQ or DREP. Encode and decode only, no state; the byte
// layout is in doc/WIRE.md, "IBTA communication manager".
//
// rdma_cm puts its own header first in a REQ's private data (the IP
// addresses and port the connection is for, and the service ID carries the
// port space and the port): RdmaCmHeader.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/config.hpp"
#include "wire/frame.hpp"

namespace metaroce::cm::ibta {

inline constexpr std::uint8_t mgmt_class_cm = 0x07;
inline constexpr std::uint8_t cm_class_version = 2;
inline constexpr std::uint8_t method_send = 0x03;
inline constexpr std::size_t mad_size = 256;
inline constexpr std::size_t header_size = 24;  // the MAD common header; the message follows

enum class Attribute : std::uint16_t {
  req = 0x0010,
  mra = 0x0011,
  rej = 0x0012,
  rep = 0x0013,
  rtu = 0x0014,
  dreq = 0x0015,
  drep = 0x0016,
};
[[nodiscard]] std::string_view to_string(Attribute a) noexcept;

// Private data room of each message (IBTA 12.6): REQ 92, REP 196, RTU 224,
// REJ 148, DREQ 220, DREP 224 bytes. The field is always that long on the
// wire (zero-filled); the sender says nothing of how much of it it meant.
[[nodiscard]] std::size_t private_data_size(Attribute a) noexcept;

// A GID: over RoCEv2 the IPv6 address, or ::ffff:a.b.c.d for IPv4.
using Gid = std::array<std::uint8_t, 16>;
[[nodiscard]] Gid ipv4_gid(std::uint32_t ipv4) noexcept;

// The primary path of a REQ (IBTA 12.6.5; the alternate path is sent zero).
struct Path {
  std::uint16_t local_lid = 0;  // 0 over RoCE
  std::uint16_t remote_lid = 0;
  Gid local_gid{};
  Gid remote_gid{};
  std::uint32_t flow_label = 0;      // 20 bits
  std::uint8_t packet_rate = 0;      // 6 bits
  std::uint8_t traffic_class = 0;
  std::uint8_t hop_limit = 0;
  std::uint8_t sl = 0;               // 4 bits
  bool subnet_local = false;
  std::uint8_t local_ack_timeout = 0;  // 5 bits: 4.096 us x 2^n
  bool operator==(const Path&) const = default;
};

// One message; the fields an attribute does not carry stay as they are
// and are not encoded.
struct Message {
  Attribute attribute = Attribute::req;
  std::uint64_t transaction_id = 0;
  std::uint32_t local_comm_id = 0;   // every message
  std::uint32_t remote_comm_id = 0;  // all but REQ
  // REQ and REP
  std::uint64_t local_ca_guid = 0;
  std::uint32_t local_qkey = 0;
  std::uint32_t local_qpn = 0;         // 24 bits
  std::uint32_t starting_psn = 0;      // 24 bits
  std::uint8_t responder_resources = 0;  // READs and atomics it answers at once
  std::uint8_t initiator_depth = 0;      // READs and atomics it has outstanding
  bool end_to_end_flow_control = false;
  std::uint8_t rnr_retry_count = 0;      // 3 bits
  bool srq = false;
  // REQ
  std::uint64_t service_id = 0;
  std::uint32_t vendor_id = 0;           // 24 bits
  std::uint8_t remote_cm_response_timeout = 0;  // 5 bits
  std::uint8_t transport_service_type = 0;      // 2 bits: 0 RC
  std::uint8_t local_cm_response_timeout = 0;   // 5 bits
  std::uint8_t retry_count = 0;                 // 3 bits
  std::uint16_t pkey = 0;
  std::uint8_t path_mtu = 0;                    // 4 bits: 1 = 256 .. 5 = 4096
  bool rdc_exists = false;
  std::uint8_t max_cm_retries = 0;              // 4 bits
  std::uint8_t extended_transport_type = 0;     // 3 bits
  Path primary{};
  // REP
  std::uint8_t target_ack_delay = 0;  // 5 bits
  std::uint8_t failover_accepted = 0;  // 2 bits
  // REJ
  std::uint8_t message_rejected = 0;  // 2 bits: 0 REQ, 1 REP, 2 other
  std::uint16_t reason = 0;
  // DREQ
  std::uint32_t remote_qpn = 0;  // 24 bits
  // At most private_data_size(attribute) bytes; decode returns all of them.
  std::vector<std::uint8_t> private_data;
  bool operator==(const Message&) const = default;
};

// The path MTU code of an IB MTU (256 -> 1 .. 4096 -> 5); 0 for any other.
[[nodiscard]] std::uint8_t mtu_code(std::uint32_t mtu) noexcept;
// The MTU of a code; 0 for codes outside 1..5.
[[nodiscard]] std::uint32_t mtu_of_code(std::uint8_t code) noexcept;

// False (and `error` says which field) when a field does not fit.
bool encode_mad(const Message& m, std::array<std::uint8_t, mad_size>& out, std::string& error);

enum class DecodeError : std::uint8_t {
  ok,
  not_gsi,         // not a UD SEND ONLY to QP 1 with the GSI Q_Key
  short_mad,       // fewer than 256 bytes
  not_cm,          // another base version, management class, class version or method
  bad_attribute,   // MRA, LAP, SIDR... or an unknown attribute
};
[[nodiscard]] std::string_view to_string(DecodeError e) noexcept;

DecodeError decode_mad(std::span<const std::uint8_t> mad, Message& out);
// A message from a parsed frame (parse_frame checked the ICRC).
DecodeError decode(const wire::ParsedFrame& frame, Message& out);
// A whole frame carrying `m` (P_Key 0xffff, source QP 1).
std::vector<std::uint8_t> build_frame(const transport::Endpoints& endpoints, std::uint16_t src_port,
                                      const Message& m);

// rdma_cm's header at the start of a REQ's private data (36 bytes:
// version 0, IP version in the high nibble, the source port, then source
// and destination address, 16 bytes each, IPv4 in the last 4), and the
// service ID of its TCP port space: 0x0000000001060000 | port.
inline constexpr std::size_t rdma_cm_header_size = 36;
inline constexpr std::uint64_t rdma_ps_tcp = 0x0106;
[[nodiscard]] constexpr std::uint64_t rdma_cm_service_id(std::uint16_t port) noexcept {
  return (rdma_ps_tcp << 16) | port;
}
struct RdmaCmHeader {
  std::uint8_t ip_version = 4;
  std::uint16_t src_port = 0;
  std::uint32_t src_ipv4 = 0;
  std::uint32_t dst_ipv4 = 0;
  bool operator==(const RdmaCmHeader&) const = default;
};
// The REQ private data: the header, then `user` (at most 56 bytes).
bool encode_rdma_cm_private(const RdmaCmHeader& h, std::span<const std::uint8_t> user,
                            std::vector<std::uint8_t>& out, std::string& error);
// False when `data` is shorter than the header or not version 0 / IPv4.
bool decode_rdma_cm_private(std::span<const std::uint8_t> data, RdmaCmHeader& h);

}  // namespace metaroce::cm::ibta
