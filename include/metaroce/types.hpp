// The vocabulary of the public API: work requests, completions, memory
// regions and the results of posting. Standard C++ only: no DPDK type and
// no header of the library's internals, so a program that includes this
// builds with nothing but `pkg-config --cflags metaroce`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace metaroce {

// What a registered region allows. Local reads are always allowed (a send
// reads its own bytes); the rest must be asked for.
enum Access : std::uint32_t {
  access_local_write = 1u << 0,   // receives may fill it
  access_remote_write = 1u << 1,  // the peer's WRITEs may land in it
  access_remote_read = 1u << 2,   // the peer may read it (READ)
  access_remote_atomic = 1u << 3, // the peer's FETCH_ADD and CMP_SWAP may change it
};

// Bytes the network may read or write, once registered with an endpoint.
// `key` is both the lkey (for posts that name these bytes) and the rkey
// (for the peer, which writes into them). 0 is never a key.
struct MemoryRegion {
  void* addr = nullptr;
  std::size_t length = 0;
  std::uint32_t key = 0;
  [[nodiscard]] bool valid() const noexcept { return key != 0; }
};

// A region of the peer's, as its owner advertised it (in the connection
// request or reply, see encode_remote_buffer): where a WRITE may land.
struct RemoteBuffer {
  std::uint64_t addr = 0;
  std::uint64_t length = 0;
  std::uint32_t rkey = 0;
};

// 20 bytes, big-endian: a buffer in a connection request's or reply's
// private data. decode_remote_buffer is false when `bytes` holds fewer.
[[nodiscard]] std::vector<std::uint8_t> encode_remote_buffer(const RemoteBuffer& buffer);
[[nodiscard]] bool decode_remote_buffer(const std::vector<std::uint8_t>& bytes, RemoteBuffer& out) noexcept;

// read: the peer's bytes at remote_addr under rkey into `local` (a region
// registered for local write). fetch_add, compare_swap: on the peer's 8
// aligned bytes at remote_addr; their old value lands in the 8 bytes at
// `local`, in host order.
enum class Op : std::uint8_t { write, write_imm, send, send_imm, read, fetch_add, compare_swap };

// One send-side work request. The local bytes stay the application's and
// must stay valid and unchanged until its completion (they are read again
// to resend what the network lost).
struct SendWork {
  std::uint64_t wr_id = 0;  // returned in its completion
  Op op = Op::write;
  std::uint16_t stream = 0;  // completions are in order per stream
  const void* local = nullptr;
  std::size_t length = 0;
  std::uint32_t lkey = 0;         // the MemoryRegion holding local..local+length
  std::uint64_t remote_addr = 0;  // WRITE*: where the first byte goes; READ, atomics: what is read
  std::uint32_t rkey = 0;         // WRITE*, READ, atomics: the peer's key for it
  std::uint32_t imm = 0;          // *_imm
  std::uint64_t swap_add = 0;     // fetch_add: the addend; compare_swap: the new value
  std::uint64_t compare = 0;      // compare_swap: swapped only when the old value equals it
};

// A buffer for one incoming SEND (or the notice of one WRITE_IMM).
struct ReceiveWork {
  std::uint64_t wr_id = 0;
  std::uint16_t stream = 0;
  void* addr = nullptr;
  std::size_t length = 0;
  std::uint32_t lkey = 0;
};

enum class PostResult : std::uint8_t {
  ok,
  not_ready,     // the connection is not established, or has failed
  bad_stream,    // stream beyond the connection's streams
  bad_lkey,      // local bytes not inside a region registered for them
  bad_rkey,      // a WRITE without an rkey
  too_long,      // longer than 4 GiB - 1
  queue_full,    // too many work requests waiting for their completions: poll, then post again
  no_resources,  // the host's memory pools are dry for now: poll, then post again
  bad_length,    // an atomic whose length is not 8
};
[[nodiscard]] std::string_view to_string(PostResult r) noexcept;

enum class Status : std::uint8_t {
  success,
  remote_access_error,       // the peer refused a placement (rkey, bounds, rights)
  remote_invalid_request,    // e.g. a SEND larger than the peer's posted receive
  remote_operational_error,  // the peer could not complete it
  retry_exceeded,            // no acknowledgement within the retry limit
  rnr_retry_exceeded,        // the peer had no receive posted, retry limit reached
  flushed,                   // the connection failed or closed first
  local_length_error,        // a receive buffer too small for the message that came
};
[[nodiscard]] std::string_view to_string(Status s) noexcept;

enum class CompletionKind : std::uint8_t {
  send,               // a SEND or SEND_IMM of ours completed
  write,              // a WRITE or WRITE_IMM of ours completed
  receive,            // a SEND arrived into a posted receive
  receive_write_imm,  // a WRITE_IMM arrived: consumed a posted receive, carries imm
  read,               // a READ of ours completed: the bytes are in `local`
  atomic,             // an atomic of ours completed: the old value is in `local`
};

struct Completion {
  std::uint64_t wr_id = 0;
  Status status = Status::success;
  CompletionKind kind = CompletionKind::send;
  std::uint16_t stream = 0;
  std::uint64_t byte_len = 0;  // receives: bytes placed
  std::optional<std::uint32_t> imm;
};

// One path of a connection: a UDP source port with its own sequence,
// SACK and RTT estimate.
struct PathStats {
  bool failed = false;           // declared failed (too many losses in a row); probes bring it back
  std::uint16_t src_port = 0;
  std::uint32_t in_flight = 0;   // packets sent and not yet acknowledged
  std::uint64_t srtt_ns = 0;
  std::uint64_t rto_ns = 0;
  std::uint64_t sent = 0;        // data packets, first transmissions and resends
  std::uint64_t resent = 0;
  std::uint64_t declared_lost = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t ce_marks = 0;    // ECN congestion marks echoed by the peer
  std::uint64_t port_changes = 0;  // times the path moved to another source port
};

// One plane of a connection (path p is on plane p % planes).
struct PlaneStats {
  bool failed = false;           // declared failed (its link down or all its paths failed); probes bring it back
  bool link_down = false;        // its port's link is down
  std::uint64_t data_packets = 0;  // data packets sent on it, first transmissions and resends
  std::uint64_t resent = 0;
  std::uint64_t failures = 0;    // times it was declared failed
};

}  // namespace metaroce
