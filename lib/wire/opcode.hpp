// BTH opcodes of both modes and what each one carries.
//
// rocev2 mode uses the standard InfiniBand opcodes (RC, UC, UD) and CNP.
// metaroce mode uses opcodes from the manufacturer-specific range 0xC0-0xDF
// (top bits 110), so Wireshark and NICs still parse the BTH and treat the rest
// as opaque: see doc/WIRE.md.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace metaroce::wire {

namespace opcode {
// Transport prefixes (top 3 bits).
inline constexpr std::uint8_t rc = 0x00;
inline constexpr std::uint8_t uc = 0x20;
inline constexpr std::uint8_t ud = 0x60;

// Operation codes (low 5 bits).
inline constexpr std::uint8_t send_first = 0x00;
inline constexpr std::uint8_t send_middle = 0x01;
inline constexpr std::uint8_t send_last = 0x02;
inline constexpr std::uint8_t send_last_imm = 0x03;
inline constexpr std::uint8_t send_only = 0x04;
inline constexpr std::uint8_t send_only_imm = 0x05;
inline constexpr std::uint8_t write_first = 0x06;
inline constexpr std::uint8_t write_middle = 0x07;
inline constexpr std::uint8_t write_last = 0x08;
inline constexpr std::uint8_t write_last_imm = 0x09;
inline constexpr std::uint8_t write_only = 0x0a;
inline constexpr std::uint8_t write_only_imm = 0x0b;
inline constexpr std::uint8_t read_request = 0x0c;
inline constexpr std::uint8_t read_response_first = 0x0d;
inline constexpr std::uint8_t read_response_middle = 0x0e;
inline constexpr std::uint8_t read_response_last = 0x0f;
inline constexpr std::uint8_t read_response_only = 0x10;
inline constexpr std::uint8_t acknowledge = 0x11;
inline constexpr std::uint8_t atomic_acknowledge = 0x12;
inline constexpr std::uint8_t compare_swap = 0x13;
inline constexpr std::uint8_t fetch_add = 0x14;
inline constexpr std::uint8_t send_last_inv = 0x16;
inline constexpr std::uint8_t send_only_inv = 0x17;

// Congestion notification packet (RoCEv2 annex A17).
inline constexpr std::uint8_t cnp = 0x81;

// metaroce mode.
inline constexpr std::uint8_t mr_write = 0xc0;
inline constexpr std::uint8_t mr_write_imm = 0xc1;
inline constexpr std::uint8_t mr_send = 0xc2;
inline constexpr std::uint8_t mr_send_imm = 0xc3;
inline constexpr std::uint8_t mr_ack = 0xc4;
inline constexpr std::uint8_t mr_probe = 0xc5;
inline constexpr std::uint8_t mr_read_request = 0xc6;
inline constexpr std::uint8_t mr_read_response = 0xc7;
inline constexpr std::uint8_t mr_compare_swap = 0xc8;
inline constexpr std::uint8_t mr_fetch_add = 0xc9;
inline constexpr std::uint8_t mr_atomic_response = 0xca;
}  // namespace opcode

// Which headers follow the BTH, in wire order:
// DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH for the standard
// opcodes; MDH, then MWH, MSH or AtomicETH, then MRDH or ImmDt for metaroce
// data; MAH and its path blocks for metaroce ACKs.
enum HeaderFlag : std::uint16_t {
  has_deth = 1u << 0,
  has_reth = 1u << 1,
  has_atomic_eth = 1u << 2,
  has_aeth = 1u << 3,
  has_atomic_ack_eth = 1u << 4,
  has_imm = 1u << 5,
  has_ieth = 1u << 6,
  has_payload = 1u << 7,  // may carry payload bytes (after the headers)
  has_cnp_reserved = 1u << 8,
  has_mr_data = 1u << 9,
  has_mr_write = 1u << 10,
  has_mr_send = 1u << 11,
  has_mr_ack = 1u << 12,
  has_mr_read = 1u << 13,  // MRDH: where a READ's or atomic's answer goes at the requester
};

struct OpcodeInfo {
  std::string_view name;  // empty: not an opcode we know
  std::uint16_t headers = 0;

  [[nodiscard]] constexpr bool known() const noexcept { return !name.empty(); }
  [[nodiscard]] constexpr bool has(HeaderFlag f) const noexcept { return (headers & f) != 0; }
};

// Table indexed by opcode byte, built at compile time; names follow scapy's
// contrib.roce ("RC_RDMA_WRITE_FIRST") and "MR_*" for metaroce. RD opcodes
// are not supported (they parse as unknown_opcode).
constexpr std::array<OpcodeInfo, 256> make_opcode_table() noexcept {
  constexpr std::uint16_t payload = has_payload;
  std::array<OpcodeInfo, 256> t{};
  t[0x00] = {"RC_SEND_FIRST", payload};
  t[0x01] = {"RC_SEND_MIDDLE", payload};
  t[0x02] = {"RC_SEND_LAST", payload};
  t[0x03] = {"RC_SEND_LAST_WITH_IMMEDIATE", payload | has_imm};
  t[0x04] = {"RC_SEND_ONLY", payload};
  t[0x05] = {"RC_SEND_ONLY_WITH_IMMEDIATE", payload | has_imm};
  t[0x06] = {"RC_RDMA_WRITE_FIRST", payload | has_reth};
  t[0x07] = {"RC_RDMA_WRITE_MIDDLE", payload};
  t[0x08] = {"RC_RDMA_WRITE_LAST", payload};
  t[0x09] = {"RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", payload | has_imm};
  t[0x0a] = {"RC_RDMA_WRITE_ONLY", payload | has_reth};
  t[0x0b] = {"RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", payload | has_reth | has_imm};
  t[0x0c] = {"RC_RDMA_READ_REQUEST", has_reth};
  t[0x0d] = {"RC_RDMA_READ_RESPONSE_FIRST", payload | has_aeth};
  t[0x0e] = {"RC_RDMA_READ_RESPONSE_MIDDLE", payload};
  t[0x0f] = {"RC_RDMA_READ_RESPONSE_LAST", payload | has_aeth};
  t[0x10] = {"RC_RDMA_READ_RESPONSE_ONLY", payload | has_aeth};
  t[0x11] = {"RC_ACKNOWLEDGE", has_aeth};
  t[0x12] = {"RC_ATOMIC_ACKNOWLEDGE", has_aeth | has_atomic_ack_eth};
  t[0x13] = {"RC_COMPARE_SWAP", has_atomic_eth};
  t[0x14] = {"RC_FETCH_ADD", has_atomic_eth};
  t[0x16] = {"RC_SEND_LAST_WITH_INVALIDATE", payload | has_ieth};
  t[0x17] = {"RC_SEND_ONLY_WITH_INVALIDATE", payload | has_ieth};
  t[0x20] = {"UC_SEND_FIRST", payload};
  t[0x21] = {"UC_SEND_MIDDLE", payload};
  t[0x22] = {"UC_SEND_LAST", payload};
  t[0x23] = {"UC_SEND_LAST_WITH_IMMEDIATE", payload | has_imm};
  t[0x24] = {"UC_SEND_ONLY", payload};
  t[0x25] = {"UC_SEND_ONLY_WITH_IMMEDIATE", payload | has_imm};
  t[0x26] = {"UC_RDMA_WRITE_FIRST", payload | has_reth};
  t[0x27] = {"UC_RDMA_WRITE_MIDDLE", payload};
  t[0x28] = {"UC_RDMA_WRITE_LAST", payload};
  t[0x29] = {"UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", payload | has_imm};
  t[0x2a] = {"UC_RDMA_WRITE_ONLY", payload | has_reth};
  t[0x2b] = {"UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", payload | has_reth | has_imm};
  t[0x64] = {"UD_SEND_ONLY", payload | has_deth};
  t[0x65] = {"UD_SEND_ONLY_WITH_IMMEDIATE", payload | has_deth | has_imm};
  t[0x81] = {"CNP", has_cnp_reserved};
  t[0xc0] = {"MR_WRITE", payload | has_mr_data | has_mr_write};
  t[0xc1] = {"MR_WRITE_WITH_IMMEDIATE", payload | has_mr_data | has_mr_write | has_imm};
  t[0xc2] = {"MR_SEND", payload | has_mr_data | has_mr_send};
  t[0xc3] = {"MR_SEND_WITH_IMMEDIATE", payload | has_mr_data | has_mr_send | has_imm};
  t[0xc4] = {"MR_ACK", has_mr_ack};
  t[0xc5] = {"MR_PROBE", has_mr_data};
  t[0xc6] = {"MR_READ_REQUEST", has_mr_data | has_mr_write | has_mr_read};
  t[0xc7] = {"MR_READ_RESPONSE", payload | has_mr_data | has_mr_write};
  t[0xc8] = {"MR_COMPARE_SWAP", has_mr_data | has_atomic_eth | has_mr_read};
  t[0xc9] = {"MR_FETCH_ADD", has_mr_data | has_atomic_eth | has_mr_read};
  t[0xca] = {"MR_ATOMIC_RESPONSE", payload | has_mr_data | has_mr_write};
  return t;
}

inline constexpr std::array<OpcodeInfo, 256> opcode_table = make_opcode_table();

inline const OpcodeInfo& opcode_info(std::uint8_t op) noexcept { return opcode_table[op]; }

[[nodiscard]] inline bool is_metaroce_opcode(std::uint8_t op) noexcept {
  return op >= opcode::mr_write && op <= opcode::mr_atomic_response;
}

}  // namespace metaroce::wire
