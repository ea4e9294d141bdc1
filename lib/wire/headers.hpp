// Typed views of every header of both modes, with their wire sizes and
// encode/decode to and from big-endian bytes. Byte layouts: doc/WIRE.md.
// No state, no allocation, no DPDK.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "wire/byte_order.hpp"

namespace metaroce::wire {

inline constexpr std::uint16_t roce_udp_port = 4791;
inline constexpr std::uint16_t ethertype_ipv4 = 0x0800;
inline constexpr std::uint16_t ethertype_ipv6 = 0x86dd;
inline constexpr std::uint16_t ethertype_vlan = 0x8100;
inline constexpr std::uint8_t ip_protocol_udp = 17;

inline constexpr std::size_t ethernet_header_size = 14;
inline constexpr std::size_t vlan_tag_size = 4;
inline constexpr std::size_t ipv4_header_size = 20;  // we neither build nor accept options
inline constexpr std::size_t ipv6_header_size = 40;
inline constexpr std::size_t udp_header_size = 8;
inline constexpr std::size_t bth_size = 12;
inline constexpr std::size_t deth_size = 8;
inline constexpr std::size_t reth_size = 16;
inline constexpr std::size_t atomic_eth_size = 28;
inline constexpr std::size_t aeth_size = 4;
inline constexpr std::size_t atomic_ack_eth_size = 8;
inline constexpr std::size_t immdt_size = 4;
inline constexpr std::size_t ieth_size = 4;
inline constexpr std::size_t cnp_reserved_size = 16;
inline constexpr std::size_t icrc_size = 4;

// metaroce extension headers.
inline constexpr std::size_t mr_data_header_size = 16;
inline constexpr std::size_t mr_write_header_size = 20;
inline constexpr std::size_t mr_send_header_size = 12;
inline constexpr std::size_t mr_read_header_size = 12;
inline constexpr std::size_t mr_ack_header_size = 16;
inline constexpr std::size_t mr_path_ack_size = 44;
inline constexpr std::size_t sack_bits = 256;
inline constexpr std::size_t max_paths = 64;

inline constexpr std::uint32_t psn_mask = 0x00ff'ffff;
inline constexpr std::uint32_t qpn_mask = 0x00ff'ffff;

using MacAddress = std::array<std::uint8_t, 6>;
using Ipv6Address = std::array<std::uint8_t, 16>;

struct EthernetHeader {
  MacAddress dst{};
  MacAddress src{};
  bool vlan_present = false;
  std::uint16_t vlan_tci = 0;  // PCP(3) DEI(1) VID(12)
  std::uint16_t ethertype = ethertype_ipv4;

  [[nodiscard]] std::size_t size() const noexcept {
    return ethernet_header_size + (vlan_present ? vlan_tag_size : 0);
  }
  [[nodiscard]] std::uint16_t vlan_id() const noexcept { return vlan_tci & 0x0fff; }
  [[nodiscard]] std::uint8_t vlan_pcp() const noexcept {
    return static_cast<std::uint8_t>(vlan_tci >> 13);
  }
};

struct Ipv4Header {
  std::uint8_t dscp = 0;
  std::uint8_t ecn = 0;
  std::uint16_t total_length = 0;
  std::uint16_t identification = 0;
  bool dont_fragment = true;
  std::uint8_t ttl = 64;
  std::uint8_t protocol = ip_protocol_udp;
  std::uint16_t checksum = 0;
  std::uint32_t src = 0;  // host order: 10.0.0.1 is 0x0a000001
  std::uint32_t dst = 0;
};

struct Ipv6Header {
  std::uint8_t dscp = 0;
  std::uint8_t ecn = 0;
  std::uint32_t flow_label = 0;
  std::uint16_t payload_length = 0;
  std::uint8_t next_header = ip_protocol_udp;
  std::uint8_t hop_limit = 64;
  Ipv6Address src{};
  Ipv6Address dst{};
};

struct UdpHeader {
  std::uint16_t src_port = 0;
  std::uint16_t dst_port = roce_udp_port;
  std::uint16_t length = 0;
  std::uint16_t checksum = 0;
};

struct Bth {
  std::uint8_t opcode = 0;
  bool solicited = false;
  bool mig_req = false;
  std::uint8_t pad = 0;  // 0..3
  std::uint8_t tver = 0;
  std::uint16_t pkey = 0xffff;
  bool fecn = false;
  bool becn = false;
  std::uint32_t dest_qp = 0;  // 24 bits
  bool ack_req = false;
  std::uint32_t psn = 0;  // 24 bits
};

struct Deth {
  std::uint32_t qkey = 0;
  std::uint32_t src_qp = 0;  // 24 bits
};

struct Reth {
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint32_t dma_len = 0;
};

struct AtomicEth {
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint64_t swap_add = 0;
  std::uint64_t compare = 0;
};

// AETH syndrome: top 3 bits say ACK, RNR NAK or NAK; low 5 bits are the
// credit count, the RNR timer or the NAK code.
namespace syndrome {
inline constexpr std::uint8_t kind_mask = 0xe0;
inline constexpr std::uint8_t ack = 0x00;
inline constexpr std::uint8_t rnr_nak = 0x20;
inline constexpr std::uint8_t nak = 0x60;
inline constexpr std::uint8_t nak_psn_sequence_error = 0x60;
inline constexpr std::uint8_t nak_invalid_request = 0x61;
inline constexpr std::uint8_t nak_remote_access_error = 0x62;
inline constexpr std::uint8_t nak_remote_operational_error = 0x63;
inline constexpr std::uint8_t nak_invalid_rd_request = 0x64;
}  // namespace syndrome

enum class AckKind : std::uint8_t { ack, rnr_nak, nak, reserved };

[[nodiscard]] inline AckKind ack_kind(std::uint8_t syn) noexcept {
  switch (syn & syndrome::kind_mask) {
    case syndrome::ack: return AckKind::ack;
    case syndrome::rnr_nak: return AckKind::rnr_nak;
    case syndrome::nak: return AckKind::nak;
    default: return AckKind::reserved;
  }
}

struct Aeth {
  std::uint8_t syndrome = 0;
  std::uint32_t msn = 0;  // 24 bits
};

// metaroce data header (MDH): on every metaroce data packet.
namespace mr_flag {
inline constexpr std::uint8_t last = 0x01;        // carries the message's final bytes
inline constexpr std::uint8_t retransmit = 0x02;  // a resend of an earlier PSN
inline constexpr std::uint8_t defined = last | retransmit;
}  // namespace mr_flag

struct MrDataHeader {
  std::uint8_t path_id = 0;
  std::uint8_t flags = 0;
  std::uint16_t stream_id = 0;
  std::uint32_t path_seq = 0;
  std::uint32_t msg_seq = 0;
  std::uint32_t tsval = 0;  // sender clock, microseconds, echoed in ACKs
};

// metaroce WRITE placement (MWH): the remote address of this packet's bytes.
struct MrWriteHeader {
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint32_t msg_len = 0;
  std::uint32_t msg_offset = 0;
};

// metaroce SEND placement (MSH): which posted receive, and where in it.
struct MrSendHeader {
  std::uint32_t recv_seq = 0;
  std::uint32_t msg_len = 0;
  std::uint32_t msg_offset = 0;
};

// metaroce READ destination (MRDH), on READ and atomic requests: where the
// answer goes in the requester's memory. The responder copies both fields
// into the MWH of each response packet; the requester checks them against
// the request it remembers before placing anything.
struct MrReadHeader {
  std::uint64_t va = 0;
  std::uint32_t key = 0;
};

// metaroce ACK header (MAH), followed by path_count path blocks.
struct MrAckHeader {
  std::uint8_t syndrome = 0;  // AETH encoding
  std::uint8_t path_count = 0;
  std::uint32_t delivered_psn = 0;  // 24 bits: every PSN before it has been placed
  std::uint32_t completed_msn = 0;  // messages completed on this connection
  std::uint32_t rate_hint_mbps = 0;  // receiver's fair share for this sender; 0 = none
};

// One path's acknowledgement: bit i of sack means path_seq cum_seq + 1 + i
// arrived; cum_seq is the first path sequence not yet received.
struct MrPathAck {
  std::uint8_t path_id = 0;
  std::uint16_t ce_count = 0;  // ECN-CE marked packets seen on this path, wrapping
  std::uint32_t cum_seq = 0;
  std::uint32_t ts_echo = 0;
  std::array<std::uint8_t, sack_bits / 8> sack{};

  [[nodiscard]] bool sack_bit(std::size_t i) const noexcept {
    return (sack[i / 8] >> (i % 8)) & 1u;
  }
  void set_sack_bit(std::size_t i) noexcept {
    sack[i / 8] = static_cast<std::uint8_t>(sack[i / 8] | (1u << (i % 8)));
  }
  // The highest set bit, or -1 when none is: a word at a time (bit i is
  // bit i % 64 of the little-endian word i / 64).
  [[nodiscard]] int highest_sack_bit() const noexcept {
    for (int w = static_cast<int>(sack_bits / 64) - 1; w >= 0; --w) {
      std::uint64_t word = 0;
      for (int b = 7; b >= 0; --b) word = (word << 8) | sack[static_cast<std::size_t>(w * 8 + b)];
      if (word != 0) return w * 64 + 63 - std::countl_zero(word);
    }
    return -1;
  }
};

// ---- encode: write exactly the header's wire size at p ----
inline void encode(const EthernetHeader& h, std::uint8_t* p) noexcept {
  for (std::size_t i = 0; i < 6; ++i) p[i] = h.dst[i];
  for (std::size_t i = 0; i < 6; ++i) p[6 + i] = h.src[i];
  if (h.vlan_present) {
    store_be16(p + 12, ethertype_vlan);
    store_be16(p + 14, h.vlan_tci);
    store_be16(p + 16, h.ethertype);
  } else {
    store_be16(p + 12, h.ethertype);
  }
}

// Writes h.checksum as given; the frame builder fills it in.
inline void encode(const Ipv4Header& h, std::uint8_t* p) noexcept {
  p[0] = 0x45;
  p[1] = static_cast<std::uint8_t>((h.dscp << 2) | (h.ecn & 3));
  store_be16(p + 2, h.total_length);
  store_be16(p + 4, h.identification);
  store_be16(p + 6, h.dont_fragment ? 0x4000 : 0);
  p[8] = h.ttl;
  p[9] = h.protocol;
  store_be16(p + 10, h.checksum);
  store_be32(p + 12, h.src);
  store_be32(p + 16, h.dst);
}

inline void encode(const Ipv6Header& h, std::uint8_t* p) noexcept {
  const std::uint32_t traffic_class = static_cast<std::uint32_t>((h.dscp << 2) | (h.ecn & 3));
  store_be32(p, (6u << 28) | (traffic_class << 20) | (h.flow_label & 0xfffff));
  store_be16(p + 4, h.payload_length);
  p[6] = h.next_header;
  p[7] = h.hop_limit;
  for (std::size_t i = 0; i < 16; ++i) p[8 + i] = h.src[i];
  for (std::size_t i = 0; i < 16; ++i) p[24 + i] = h.dst[i];
}

inline void encode(const UdpHeader& h, std::uint8_t* p) noexcept {
  store_be16(p, h.src_port);
  store_be16(p + 2, h.dst_port);
  store_be16(p + 4, h.length);
  store_be16(p + 6, h.checksum);
}

inline void encode(const Bth& h, std::uint8_t* p) noexcept {
  p[0] = h.opcode;
  p[1] = static_cast<std::uint8_t>((h.solicited ? 0x80 : 0) | (h.mig_req ? 0x40 : 0) |
                                   ((h.pad & 3) << 4) | (h.tver & 0x0f));
  store_be16(p + 2, h.pkey);
  store_be32(p + 4, (h.fecn ? 0x8000'0000u : 0) | (h.becn ? 0x4000'0000u : 0) |
                        (h.dest_qp & qpn_mask));
  store_be32(p + 8, (h.ack_req ? 0x8000'0000u : 0) | (h.psn & psn_mask));
}

inline void encode(const Deth& h, std::uint8_t* p) noexcept {
  store_be32(p, h.qkey);
  store_be32(p + 4, h.src_qp & qpn_mask);
}

inline void encode(const Reth& h, std::uint8_t* p) noexcept {
  store_be64(p, h.va);
  store_be32(p + 8, h.rkey);
  store_be32(p + 12, h.dma_len);
}

inline void encode(const AtomicEth& h, std::uint8_t* p) noexcept {
  store_be64(p, h.va);
  store_be32(p + 8, h.rkey);
  store_be64(p + 12, h.swap_add);
  store_be64(p + 20, h.compare);
}

inline void encode(const Aeth& h, std::uint8_t* p) noexcept {
  store_be32(p, (std::uint32_t{h.syndrome} << 24) | (h.msn & 0x00ff'ffff));
}

inline void encode(const MrDataHeader& h, std::uint8_t* p) noexcept {
  p[0] = h.path_id;
  p[1] = h.flags;
  store_be16(p + 2, h.stream_id);
  store_be32(p + 4, h.path_seq);
  store_be32(p + 8, h.msg_seq);
  store_be32(p + 12, h.tsval);
}

inline void encode(const MrWriteHeader& h, std::uint8_t* p) noexcept {
  store_be64(p, h.va);
  store_be32(p + 8, h.rkey);
  store_be32(p + 12, h.msg_len);
  store_be32(p + 16, h.msg_offset);
}

inline void encode(const MrSendHeader& h, std::uint8_t* p) noexcept {
  store_be32(p, h.recv_seq);
  store_be32(p + 4, h.msg_len);
  store_be32(p + 8, h.msg_offset);
}

inline void encode(const MrReadHeader& h, std::uint8_t* p) noexcept {
  store_be64(p, h.va);
  store_be32(p + 8, h.key);
}

inline void encode(const MrAckHeader& h, std::uint8_t* p) noexcept {
  p[0] = h.syndrome;
  p[1] = h.path_count;
  store_be16(p + 2, 0);
  store_be32(p + 4, h.delivered_psn & psn_mask);
  store_be32(p + 8, h.completed_msn);
  store_be32(p + 12, h.rate_hint_mbps);
}

inline void encode(const MrPathAck& h, std::uint8_t* p) noexcept {
  p[0] = h.path_id;
  p[1] = 0;
  store_be16(p + 2, h.ce_count);
  store_be32(p + 4, h.cum_seq);
  store_be32(p + 8, h.ts_echo);
  for (std::size_t i = 0; i < h.sack.size(); ++i) p[12 + i] = h.sack[i];
}

// ---- decode: read a header whose bytes the caller has bounds-checked ----
inline void decode(const std::uint8_t* p, Ipv4Header& h) noexcept {
  h.dscp = static_cast<std::uint8_t>(p[1] >> 2);
  h.ecn = static_cast<std::uint8_t>(p[1] & 3);
  h.total_length = load_be16(p + 2);
  h.identification = load_be16(p + 4);
  h.dont_fragment = (p[6] & 0x40) != 0;
  h.ttl = p[8];
  h.protocol = p[9];
  h.checksum = load_be16(p + 10);
  h.src = load_be32(p + 12);
  h.dst = load_be32(p + 16);
}

inline void decode(const std::uint8_t* p, Ipv6Header& h) noexcept {
  const std::uint32_t first = load_be32(p);
  const auto traffic_class = static_cast<std::uint8_t>(first >> 20);
  h.dscp = static_cast<std::uint8_t>(traffic_class >> 2);
  h.ecn = static_cast<std::uint8_t>(traffic_class & 3);
  h.flow_label = first & 0xfffff;
  h.payload_length = load_be16(p + 4);
  h.next_header = p[6];
  h.hop_limit = p[7];
  for (std::size_t i = 0; i < 16; ++i) h.src[i] = p[8 + i];
  for (std::size_t i = 0; i < 16; ++i) h.dst[i] = p[24 + i];
}

inline void decode(const std::uint8_t* p, UdpHeader& h) noexcept {
  h.src_port = load_be16(p);
  h.dst_port = load_be16(p + 2);
  h.length = load_be16(p + 4);
  h.checksum = load_be16(p + 6);
}

inline void decode(const std::uint8_t* p, Bth& h) noexcept {
  h.opcode = p[0];
  h.solicited = (p[1] & 0x80) != 0;
  h.mig_req = (p[1] & 0x40) != 0;
  h.pad = static_cast<std::uint8_t>((p[1] >> 4) & 3);
  h.tver = static_cast<std::uint8_t>(p[1] & 0x0f);
  h.pkey = load_be16(p + 2);
  const std::uint32_t qp_word = load_be32(p + 4);
  h.fecn = (qp_word & 0x8000'0000u) != 0;
  h.becn = (qp_word & 0x4000'0000u) != 0;
  h.dest_qp = qp_word & qpn_mask;
  const std::uint32_t psn_word = load_be32(p + 8);
  h.ack_req = (psn_word & 0x8000'0000u) != 0;
  h.psn = psn_word & psn_mask;
}

inline void decode(const std::uint8_t* p, Deth& h) noexcept {
  h.qkey = load_be32(p);
  h.src_qp = load_be32(p + 4) & qpn_mask;
}

inline void decode(const std::uint8_t* p, Reth& h) noexcept {
  h.va = load_be64(p);
  h.rkey = load_be32(p + 8);
  h.dma_len = load_be32(p + 12);
}

inline void decode(const std::uint8_t* p, AtomicEth& h) noexcept {
  h.va = load_be64(p);
  h.rkey = load_be32(p + 8);
  h.swap_add = load_be64(p + 12);
  h.compare = load_be64(p + 20);
}

inline void decode(const std::uint8_t* p, Aeth& h) noexcept {
  const std::uint32_t word = load_be32(p);
  h.syndrome = static_cast<std::uint8_t>(word >> 24);
  h.msn = word & 0x00ff'ffff;
}

inline void decode(const std::uint8_t* p, MrDataHeader& h) noexcept {
  h.path_id = p[0];
  h.flags = p[1];
  h.stream_id = load_be16(p + 2);
  h.path_seq = load_be32(p + 4);
  h.msg_seq = load_be32(p + 8);
  h.tsval = load_be32(p + 12);
}

inline void decode(const std::uint8_t* p, MrWriteHeader& h) noexcept {
  h.va = load_be64(p);
  h.rkey = load_be32(p + 8);
  h.msg_len = load_be32(p + 12);
  h.msg_offset = load_be32(p + 16);
}

inline void decode(const std::uint8_t* p, MrSendHeader& h) noexcept {
  h.recv_seq = load_be32(p);
  h.msg_len = load_be32(p + 4);
  h.msg_offset = load_be32(p + 8);
}

inline void decode(const std::uint8_t* p, MrReadHeader& h) noexcept {
  h.va = load_be64(p);
  h.key = load_be32(p + 8);
}

inline void decode(const std::uint8_t* p, MrAckHeader& h) noexcept {
  h.syndrome = p[0];
  h.path_count = p[1];
  h.delivered_psn = load_be32(p + 4) & psn_mask;
  h.completed_msn = load_be32(p + 8);
  h.rate_hint_mbps = load_be32(p + 12);
}

inline void decode(const std::uint8_t* p, MrPathAck& h) noexcept {
  h.path_id = p[0];
  h.ce_count = load_be16(p + 2);
  h.cum_seq = load_be32(p + 4);
  h.ts_echo = load_be32(p + 8);
  for (std::size_t i = 0; i < h.sack.size(); ++i) h.sack[i] = p[12 + i];
}

// RFC 1071 one's-complement sum over an IPv4 header as stored (`len` is
// IHL * 4, a multiple of 4): returns the checksum to store when the checksum
// field is zero, and 0 when a stored checksum is correct. Sums 32-bit words
// into 64 bits and folds once: the same one's-complement sum as 16-bit words.
[[nodiscard]] inline std::uint16_t ipv4_header_checksum(const std::uint8_t* header,
                                                        std::size_t len) noexcept {
  std::uint64_t sum;
  if (len == ipv4_header_size) {
    sum = std::uint64_t{load_be32(header)} + load_be32(header + 4) + load_be32(header + 8) +
          load_be32(header + 12) + load_be32(header + 16);
  } else {
    sum = 0;
    for (std::size_t i = 0; i + 3 < len; i += 4) sum += load_be32(header + i);
  }
  sum = (sum & 0xffff'ffff) + (sum >> 32);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

// An IPv4 header checksum after one 16-bit field of the header changed
// from `old_value` to `new_value`, from the checksum before (RFC 1624,
// equation 3: HC' = ~(~HC + ~m + m')): no pass over the header, and no
// load of bytes just stored.
[[nodiscard]] constexpr std::uint16_t ipv4_checksum_update(std::uint16_t checksum, std::uint16_t old_value,
                                                           std::uint16_t new_value) noexcept {
  std::uint32_t sum = (~std::uint32_t{checksum} & 0xffffu) + (~std::uint32_t{old_value} & 0xffffu) + new_value;
  sum = (sum & 0xffffu) + (sum >> 16);
  sum = (sum & 0xffffu) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

}  // namespace metaroce::wire
