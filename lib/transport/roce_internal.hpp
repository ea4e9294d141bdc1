// Private: the state behind RoceConnection, shared by its .cpp files only.
#pragma once

#include <cstdint>

#include "transport/roce_connection.hpp"

namespace metaroce::transport {

// A send work request, from post_send until its completion. Its PSNs are
// [first_rel, first_rel + packets): assigned at post time, in post order.
struct RoceConnection::SendMessage {
  SendRequest request;
  std::uint64_t first_rel = 0;
  std::uint32_t packets = 0;
  std::uint32_t rnr_retries = 0;

  [[nodiscard]] std::uint64_t end_rel() const noexcept { return first_rel + packets; }
};

// An answer being sent: READ RESPONSE packets from rel on, or one ATOMIC
// ACKNOWLEDGE.
struct RoceConnection::Answer {
  bool atomic = false;
  std::uint64_t rel = 0;      // PSN (receive side) of the next packet
  std::uint64_t va = 0;       // READ: the next byte to send
  std::uint64_t remaining = 0;
  bool started = false;       // READ: FIRST (or ONLY) sent
  std::uint64_t old = 0;      // atomic: the value before
  bool duplicate = false;     // for a duplicate request (not counted against the limit)
};

namespace roce {

// RC data opcodes by kind and position in the message.
[[nodiscard]] constexpr bool is_send_opcode(std::uint8_t op) noexcept { return op <= wire::opcode::send_only_imm; }
[[nodiscard]] constexpr bool is_data_opcode(std::uint8_t op) noexcept { return op <= wire::opcode::write_only_imm; }
[[nodiscard]] constexpr bool is_request_opcode(std::uint8_t op) noexcept {
  return op == wire::opcode::read_request || op == wire::opcode::compare_swap || op == wire::opcode::fetch_add;
}
[[nodiscard]] constexpr bool is_answer_opcode(std::uint8_t op) noexcept {
  return (op >= wire::opcode::read_response_first && op <= wire::opcode::read_response_only) ||
         op == wire::opcode::atomic_acknowledge;
}
[[nodiscard]] constexpr bool starts_message(std::uint8_t op) noexcept {
  return op == wire::opcode::send_first || op == wire::opcode::send_only || op == wire::opcode::send_only_imm ||
         op == wire::opcode::write_first || op == wire::opcode::write_only || op == wire::opcode::write_only_imm;
}
[[nodiscard]] constexpr bool ends_message(std::uint8_t op) noexcept {
  return op != wire::opcode::send_first && op != wire::opcode::send_middle && op != wire::opcode::write_first &&
         op != wire::opcode::write_middle;
}
[[nodiscard]] constexpr bool carries_imm(std::uint8_t op) noexcept {
  return op == wire::opcode::send_last_imm || op == wire::opcode::send_only_imm ||
         op == wire::opcode::write_last_imm || op == wire::opcode::write_only_imm;
}

// The opcode of packet `index` of `count` of a message of kind `op`.
[[nodiscard]] constexpr std::uint8_t data_opcode(SendOp op, std::uint32_t index, std::uint32_t count) noexcept {
  const bool only = count == 1;
  const bool last = index + 1 == count;
  const bool imm = has_imm(op);
  if (is_write(op)) {
    if (only) return imm ? wire::opcode::write_only_imm : wire::opcode::write_only;
    if (index == 0) return wire::opcode::write_first;
    if (last) return imm ? wire::opcode::write_last_imm : wire::opcode::write_last;
    return wire::opcode::write_middle;
  }
  if (only) return imm ? wire::opcode::send_only_imm : wire::opcode::send_only;
  if (index == 0) return wire::opcode::send_first;
  if (last) return imm ? wire::opcode::send_last_imm : wire::opcode::send_last;
  return wire::opcode::send_middle;
}

// AETH syndrome of an ACK without end-to-end credits ("credit count
// invalid"): what a responder that does not advertise credits sends.
inline constexpr std::uint8_t ack_no_credits = 0x1f;

// Smallest IBTA RNR timer code (AETH low 5 bits) whose delay is >= `delay`
// (IBTA table "RNR NAK timer field encodings"; code 0 is the longest).
[[nodiscard]] std::uint8_t rnr_timer_code(Time delay) noexcept;

}  // namespace roce
}  // namespace metaroce::transport
