// Where the generator's next message of one connection goes, and when it may
// go, so that metaroce-sink can check every message
// (metaroce-sink/connection_verifier.hpp has the sink's half). No DPDK.
//
// Message m goes on stream m mod S. Per stream the planner keeps:
//   - the writes posted (plain and with immediate): write n goes to write
//     slot n mod write_slots of the stream;
//   - `covered`: writes the sink has checked, as far as the generator knows.
//     The sink checks a stream's writes when a later write-imm or send of the
//     stream completes there; when that message completes here, the writes
//     before it are checked. A slot is reused only once its write is covered;
//   - plain writes since the last write-imm or send: at most write_slots / 2,
//     after which the next plain write is posted as a write-imm (a forced
//     fence), so the ring always drains;
//   - write-imms and sends in flight: at most `receives`, the receives the
//     sink keeps posted per stream (no RNR).
#pragma once

#include <cstdint>
#include <vector>

#include "common/traffic_message.hpp"

namespace metaroce::apps::traffic {

struct PlannerLayout {
  std::uint16_t streams = 1;
  std::uint32_t write_slots = 2;  // per stream, >= 2
  std::uint32_t receives = 1;     // per stream
  std::uint32_t slot_bytes = header_size;
};

struct PlannedMessage {
  std::uint64_t sequence = 0;
  std::uint16_t stream = 0;
  Op op = Op::write;
  std::uint32_t write_index = 0;    // writes: this one's; sends: writes posted before it
  std::uint64_t remote_offset = 0;  // writes: the slot's offset in the sink's write region
  bool forced_fence = false;        // drawn as a plain write, posted as a write-imm
};

class MessagePlanner {
 public:
  explicit MessagePlanner(const PlannerLayout& layout);

  // The next message (sequence posted()) as `drawn`; false when its stream
  // cannot take it yet (its write ring or receives are in use): ask again
  // after a completion. Changes nothing.
  [[nodiscard]] bool plan(Op drawn, PlannedMessage& out) const;
  // The message plan() gave was posted.
  void commit(const PlannedMessage& m);
  // It completed successfully here.
  void complete(const PlannedMessage& m);

  [[nodiscard]] std::uint64_t posted() const noexcept { return posted_; }
  [[nodiscard]] std::uint64_t forced_fences() const noexcept { return forced_fences_; }
  [[nodiscard]] const PlannerLayout& layout() const noexcept { return layout_; }

 private:
  struct Stream {
    std::uint64_t writes = 0;   // posted
    std::uint64_t covered = 0;  // writes below this one are checked by the sink
    std::uint32_t unfenced = 0;
    std::uint32_t receives_in_use = 0;
  };
  PlannerLayout layout_;
  std::vector<Stream> streams_;
  std::uint64_t posted_ = 0;
  std::uint64_t forced_fences_ = 0;
};

}  // namespace metaroce::apps::traffic
