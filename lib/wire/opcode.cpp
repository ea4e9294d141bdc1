#include "wire/opcode.hpp"

namespace metaroce::wire {
namespace {

constexpr std::uint16_t payload = has_payload;

// Operations common to RC and UC (UC has no READ, ACK or atomics).
struct BaseOp {
  std::uint8_t code;
  std::string_view suffix;
  std::uint16_t headers;
  bool in_uc;
};

constexpr BaseOp base_ops[] = {
    {opcode::send_first, "SEND_FIRST", payload, true},
    {opcode::send_middle, "SEND_MIDDLE", payload, true},
    {opcode::send_last, "SEND_LAST", payload, true},
    {opcode::send_last_imm, "SEND_LAST_WITH_IMMEDIATE", payload | has_imm, true},
    {opcode::send_only, "SEND_ONLY", payload, true},
    {opcode::send_only_imm, "SEND_ONLY_WITH_IMMEDIATE", payload | has_imm, true},
    {opcode::write_first, "RDMA_WRITE_FIRST", payload | has_reth, true},
    {opcode::write_middle, "RDMA_WRITE_MIDDLE", payload, true},
    {opcode::write_last, "RDMA_WRITE_LAST", payload, true},
    {opcode::write_last_imm, "RDMA_WRITE_LAST_WITH_IMMEDIATE", payload | has_imm, true},
    {opcode::write_only, "RDMA_WRITE_ONLY", payload | has_reth, true},
    {opcode::write_only_imm, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", payload | has_reth | has_imm, true},
    {opcode::read_request, "RDMA_READ_REQUEST", has_reth, false},
    {opcode::read_response_first, "RDMA_READ_RESPONSE_FIRST", payload | has_aeth, false},
    {opcode::read_response_middle, "RDMA_READ_RESPONSE_MIDDLE", payload, false},
    {opcode::read_response_last, "RDMA_READ_RESPONSE_LAST", payload | has_aeth, false},
    {opcode::read_response_only, "RDMA_READ_RESPONSE_ONLY", payload | has_aeth, false},
    {opcode::acknowledge, "ACKNOWLEDGE", has_aeth, false},
    {opcode::atomic_acknowledge, "ATOMIC_ACKNOWLEDGE", has_aeth | has_atomic_ack_eth, false},
    {opcode::compare_swap, "COMPARE_SWAP", has_atomic_eth, false},
    {opcode::fetch_add, "FETCH_ADD", has_atomic_eth, false},
    {opcode::send_last_inv, "SEND_LAST_WITH_INVALIDATE", payload | has_ieth, false},
    {opcode::send_only_inv, "SEND_ONLY_WITH_INVALIDATE", payload | has_ieth, false},
};

// Names must outlive the table: build them once into static storage.
struct NameStore {
  char text[256][40] = {};
};

std::array<OpcodeInfo, 256> make_table() {
  static NameStore names;
  std::array<OpcodeInfo, 256> table{};
  auto set = [&](std::uint8_t op, std::string_view prefix, std::string_view suffix,
                 std::uint16_t headers) {
    char* out = names.text[op];
    std::size_t n = 0;
    for (char c : prefix) out[n++] = c;
    for (char c : suffix) out[n++] = c;
    table[op] = OpcodeInfo{std::string_view(out, n), headers};
  };
  for (const BaseOp& op : base_ops) {
    set(static_cast<std::uint8_t>(opcode::rc | op.code), "RC_", op.suffix, op.headers);
    if (op.in_uc) set(static_cast<std::uint8_t>(opcode::uc | op.code), "UC_", op.suffix, op.headers);
  }
  set(opcode::ud | opcode::send_only, "UD_", "SEND_ONLY", payload | has_deth);
  set(opcode::ud | opcode::send_only_imm, "UD_", "SEND_ONLY_WITH_IMMEDIATE",
      payload | has_deth | has_imm);
  set(opcode::cnp, "", "CNP", has_cnp_reserved);
  set(opcode::mr_write, "", "MR_WRITE", payload | has_mr_data | has_mr_write);
  set(opcode::mr_write_imm, "", "MR_WRITE_WITH_IMMEDIATE",
      payload | has_mr_data | has_mr_write | has_imm);
  set(opcode::mr_send, "", "MR_SEND", payload | has_mr_data | has_mr_send);
  set(opcode::mr_send_imm, "", "MR_SEND_WITH_IMMEDIATE",
      payload | has_mr_data | has_mr_send | has_imm);
  set(opcode::mr_ack, "", "MR_ACK", has_mr_ack);
  return table;
}

}  // namespace

const std::array<OpcodeInfo, 256>& opcode_table() noexcept {
  static const std::array<OpcodeInfo, 256> table = make_table();
  return table;
}

}  // namespace metaroce::wire
