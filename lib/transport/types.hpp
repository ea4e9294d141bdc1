// Work requests, completions and their status codes: the verbs-like API of a
// connection. No DPDK type; time is virtual or real nanoseconds, passed in.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace metaroce::transport {

using Time = std::uint64_t;  // nanoseconds
inline constexpr Time never = ~Time{0};

enum class Mode : std::uint8_t { metaroce, rocev2 };

[[nodiscard]] constexpr std::string_view to_string(Mode m) noexcept {
  return m == Mode::metaroce ? "metaroce" : "rocev2";
}
// The inverse of to_string; false (and `out` untouched) for any other name.
[[nodiscard]] constexpr bool mode_from_string(std::string_view name, Mode& out) noexcept {
  for (const Mode m : {Mode::metaroce, Mode::rocev2}) {
    if (name == to_string(m)) {
      out = m;
      return true;
    }
  }
  return false;
}
static_assert([] {
  Mode m = Mode::metaroce;
  return mode_from_string("rocev2", m) && m == Mode::rocev2 && !mode_from_string("RoCEv2", m) && m == Mode::rocev2;
}());

// read: the peer's bytes [remote_addr, + length) under rkey into the local
// bytes (registered for local write). fetch_add and compare_swap: on the
// peer's 8 bytes at remote_addr (8-aligned), their value before the
// operation written to the 8 local bytes, in host order.
enum class SendOp : std::uint8_t { write, write_imm, send, send_imm, read, fetch_add, compare_swap };

inline constexpr std::array<std::string_view, 7> send_op_names = {"write", "write-imm", "send", "send-imm",
                                                                  "read",  "fetch-add", "cmp-swap"};
[[nodiscard]] constexpr std::string_view to_string(SendOp op) noexcept {
  return send_op_names[static_cast<std::size_t>(op)];
}

[[nodiscard]] constexpr bool is_atomic(SendOp op) noexcept {
  return op == SendOp::fetch_add || op == SendOp::compare_swap;
}
// READ and the atomics: the peer answers with data for our local bytes.
[[nodiscard]] constexpr bool is_request(SendOp op) noexcept {
  return op == SendOp::read || is_atomic(op);
}
[[nodiscard]] constexpr bool consumes_receive(SendOp op) noexcept {
  return op == SendOp::write_imm || op == SendOp::send || op == SendOp::send_imm;
}
[[nodiscard]] constexpr bool is_write(SendOp op) noexcept {
  return op == SendOp::write || op == SendOp::write_imm;
}
[[nodiscard]] constexpr bool has_imm(SendOp op) noexcept {
  return op == SendOp::write_imm || op == SendOp::send_imm;
}

// The local bytes of a send stay the application's: they must stay valid and
// unchanged until the send's completion (they are read again to retransmit).
struct SendRequest {
  std::uint64_t wr_id = 0;
  SendOp op = SendOp::write;
  std::uint16_t stream = 0;
  const std::uint8_t* local_addr = nullptr;
  std::uint64_t length = 0;
  std::uint32_t lkey = 0;
  std::uint64_t remote_addr = 0;  // WRITE: where the first byte goes
  std::uint32_t rkey = 0;         // WRITE
  std::uint32_t imm = 0;          // *_imm
  std::uint64_t swap_add = 0;     // fetch_add: the addend; compare_swap: the new value
  std::uint64_t compare = 0;      // compare_swap: swapped only if the old value equals it
};

// An atomic operates on 8 bytes.
inline constexpr std::uint64_t atomic_length = 8;

struct ReceiveRequest {
  std::uint64_t wr_id = 0;
  std::uint16_t stream = 0;
  std::uint8_t* addr = nullptr;
  std::uint64_t length = 0;
  std::uint32_t lkey = 0;
};

enum class CompletionStatus : std::uint8_t {
  success,
  remote_access_error,  // the peer refused a placement (rkey, bounds, rights)
  remote_invalid_request,  // e.g. a SEND larger than the posted receive
  remote_operational_error,  // the peer could not complete it (NAK code 3)
  retry_exceeded,       // no acknowledgement within the retry limit
  rnr_retry_exceeded,   // the peer had no receive posted, retry limit reached
  flushed,              // the connection went to error or was closed first
  local_length_error,   // receive buffer too small for the message that came
  count_
};

inline constexpr std::array<std::string_view, static_cast<std::size_t>(CompletionStatus::count_)>
    completion_status_names = {"success",          "remote_access_error", "remote_invalid_request",
                               "remote_operational_error", "retry_exceeded", "rnr_retry_exceeded",
                               "flushed",          "local_length_error"};

[[nodiscard]] constexpr std::string_view to_string(CompletionStatus s) noexcept {
  return completion_status_names[static_cast<std::size_t>(s)];
}

enum class CompletionKind : std::uint8_t {
  send,        // a SEND or SEND_IMM of ours completed
  write,       // a WRITE or WRITE_IMM of ours completed
  receive,     // a SEND arrived into a posted receive
  receive_write_imm,  // a WRITE_IMM arrived: consumes a posted receive, carries imm
  read,        // a READ of ours completed: its bytes are in place
  atomic,      // a FETCH_ADD or CMP_SWAP of ours completed: the old value is in place
};

[[nodiscard]] constexpr CompletionKind completion_kind(SendOp op) noexcept {
  return is_write(op) ? CompletionKind::write
         : op == SendOp::read ? CompletionKind::read
         : is_atomic(op) ? CompletionKind::atomic
                         : CompletionKind::send;
}

struct Completion {
  std::uint64_t wr_id = 0;
  CompletionStatus status = CompletionStatus::success;
  CompletionKind kind = CompletionKind::send;
  std::uint16_t stream = 0;
  std::uint64_t byte_len = 0;  // receive side: bytes placed
  bool has_imm = false;
  std::uint32_t imm = 0;
};

}  // namespace metaroce::transport
