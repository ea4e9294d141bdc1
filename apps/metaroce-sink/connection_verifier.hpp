// The sink's check of one generator connection: every message, every byte.
// No DPDK: the sink feeds it receive completions, tests feed it by hand.
//
// Memory (common/traffic_handshake.hpp): per stream, a ring of write slots
// and a set of receive buffers, each slot_bytes. The generator numbers the
// writes of a stream (plain and with immediate) and puts write n in slot
// n mod write_slots. Streams complete in order at the receiver, so when a
// write-imm or a send completes on a stream, every message posted before it
// on that stream is in place: that completion is the moment to check
// them all, in order:
//
//   write-imm, imm = k:          plain writes next_write..k-1, then write k
//   send, header write index W:  plain writes next_write..W-1, then the send
//
// The generator does not reuse a write slot before its completion says a
// later write-imm or send of the stream completed here, so a slot still holds
// its message when it is checked. Checked this way, the messages of stream s
// come in their sequence order s, s + S, s + 2S, ... (S streams), so:
//   - a header with the expected sequence: its bytes are checked;
//   - a later sequence: the ones in between are missing;
//   - an earlier one: in a write slot, the write never landed (missing); in a
//     completion (write-imm index below next_write, or a send), the message
//     completed twice (a duplicate);
//   - a header the generator cannot have written: a wrong message.
// finish(posted) counts what never came as missing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/latency_histogram.hpp"
#include "common/traffic_handshake.hpp"
#include "common/traffic_message.hpp"

namespace metaroce::apps::traffic {

struct VerifierLayout {
  std::uint32_t connection = 0;  // the generator's index: part of every pattern
  std::uint16_t streams = 1;
  std::uint32_t write_slots = 2;  // per stream
  std::uint32_t receives = 1;     // per stream
  std::uint32_t slot_bytes = header_size;
};

struct VerifierTotals : SinkReport {
  std::uint64_t writes_checked = 0;  // plain writes checked at a later completion
  std::uint64_t completions = 0;     // receive completions handled
  std::uint64_t last_verified_ns = 0;
};

class ConnectionVerifier {
 public:
  // The regions are the sink's (sizes from write_region_bytes / receive_region_bytes).
  ConnectionVerifier(const VerifierLayout& layout, const std::uint8_t* write_region,
                     const std::uint8_t* receive_region);

  [[nodiscard]] static std::uint64_t write_region_bytes(const VerifierLayout& l) noexcept {
    return std::uint64_t{l.streams} * l.write_slots * l.slot_bytes;
  }
  [[nodiscard]] static std::uint64_t receive_region_bytes(const VerifierLayout& l) noexcept {
    return std::uint64_t{l.streams} * l.receives * l.slot_bytes;
  }
  // Offset of write `index` of `stream` in the write region; of receive
  // buffer `buffer` (stream * receives + j) in the receive region.
  [[nodiscard]] std::uint64_t write_offset(std::uint16_t stream, std::uint64_t index) const noexcept {
    return (std::uint64_t{stream} * layout_.write_slots + index % layout_.write_slots) * layout_.slot_bytes;
  }
  [[nodiscard]] std::uint64_t receive_offset(std::uint64_t buffer) const noexcept {
    return buffer * layout_.slot_bytes;
  }

  // A WRITE_WITH_IMMEDIATE completed on `stream` with `imm` and `length`
  // bytes; `now_ns` is CLOCK_MONOTONIC (latency from the header's post time).
  void on_write_imm(std::uint16_t stream, std::uint32_t imm, std::uint64_t length, std::uint64_t now_ns);
  // A SEND completed into receive buffer `buffer` with `length` bytes.
  void on_send(std::uint16_t stream, std::uint64_t buffer, std::uint64_t length, std::uint64_t now_ns);
  // A receive completed with an error status.
  void on_failed_completion() { ++failed_completions_; }
  // The generator says it posted messages 0..posted-1 and they completed
  // there: plain writes after a stream's last write-imm or send are checked
  // in place (while their slot holds the stream's next sequence), and what
  // was not seen is missing. Call once, after the last completion.
  void finish(std::uint64_t posted);

  [[nodiscard]] const VerifierTotals& totals() const noexcept { return totals_; }
  [[nodiscard]] const LatencyHistogram& latency() const noexcept { return latency_; }
  [[nodiscard]] std::uint64_t failed_completions() const noexcept { return failed_completions_; }
  [[nodiscard]] bool finished() const noexcept { return finished_; }
  // The first problem in words; empty while there is none.
  [[nodiscard]] const std::string& first_problem() const noexcept { return first_problem_; }
  [[nodiscard]] bool clean() const noexcept {
    return totals_.wrong == 0 && totals_.missing == 0 && totals_.duplicates == 0 && failed_completions_ == 0;
  }

 private:
  struct Stream {
    std::uint64_t next_write = 0;  // writes before this one are checked
    std::uint64_t expected = 0;    // the next sequence this stream must show
  };
  enum class Seen : std::uint8_t { write_slot, completion };

  // Checks the message at p as the next of `stream`: op and write index as
  // the caller expects; `length` from the completion (0: take the header's,
  // a plain write).
  void check(std::uint16_t stream, const std::uint8_t* p, Op op, std::uint32_t write_index, std::uint64_t length,
             Seen seen, std::uint64_t now_ns);
  void check_writes_before(std::uint16_t stream, std::uint64_t end);
  void wrong(std::uint64_t sequence, std::uint64_t offset, std::uint64_t bytes, const std::string& what);
  void missing(std::uint64_t count, std::uint64_t first_sequence, const char* why);

  VerifierLayout layout_;
  const std::uint8_t* writes_;
  const std::uint8_t* receives_;
  std::vector<Stream> streams_;
  VerifierTotals totals_;
  LatencyHistogram latency_;
  std::uint64_t failed_completions_ = 0;
  bool finished_ = false;
  std::string first_problem_;
};

}  // namespace metaroce::apps::traffic
