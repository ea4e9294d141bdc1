// One output port: a FIFO drained at a fixed line rate, with a byte limit
// (tail drop) and ECN marking. Used per direction by fabric::Impairment and,
// later, as a switch output port by lib/sim. Time is passed in (ns); the
// queue keeps its clock in picoseconds so that serialisation at rates that
// do not divide a second evenly does not drift.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "fabric/config.hpp"

namespace metaroce::fabric {

class Random;

class RateQueue {
 public:
  struct Admission {
    bool accepted = false;
    bool mark_ce = false;                   // the caller sets CE (only offered for ECT frames)
    std::uint64_t departure_ns = 0;         // last bit leaves the port (rounded up to a ns)
    std::uint64_t queued_bytes_before = 0;  // occupancy the frame found
  };

  // rate_bps 0: unlimited; the queue is then always empty and never drops.
  RateQueue(std::uint64_t rate_bps, std::uint32_t overhead_bytes, std::uint64_t limit_bytes,
            EcnMarking ecn) noexcept;

  // A frame of `frame_bytes` arrives at `now` (non-decreasing across calls).
  // Accepted when occupancy + its bytes stay within the limit; it then starts
  // serialising when the port is free: departure = max(now, busy) + bytes*8/rate.
  // `random` is drawn from only by RED-like marking between min and max.
  Admission offer(std::uint64_t now, std::size_t frame_bytes, bool ect, Random& random);

  // Bytes accepted and not yet fully serialised at `now` (counted with overhead).
  [[nodiscard]] std::uint64_t queued_bytes(std::uint64_t now);

  // New rate for frames offered from `now` on; frames already queued keep
  // their departure times.
  void set_rate(std::uint64_t rate_bps) noexcept { rate_bps_ = rate_bps; }
  [[nodiscard]] std::uint64_t rate_bps() const noexcept { return rate_bps_; }

  // Picoseconds to serialise `bytes` (overhead included by the caller).
  [[nodiscard]] static std::uint64_t serialisation_ps(std::uint64_t bytes, std::uint64_t rate_bps) noexcept {
    return bytes * 8 * 1'000'000'000'000ull / rate_bps;
  }

 private:
  struct Queued {
    std::uint64_t departure_ps;
    std::uint64_t bytes;
  };
  void drain(std::uint64_t now_ps);
  bool should_mark(std::uint64_t queued, Random& random) const;

  std::uint64_t rate_bps_;
  std::uint32_t overhead_bytes_;
  std::uint64_t limit_bytes_;
  EcnMarking ecn_;
  std::uint64_t busy_until_ps_ = 0;
  std::uint64_t queued_bytes_ = 0;
  std::deque<Queued> queued_;
};

}  // namespace metaroce::fabric
