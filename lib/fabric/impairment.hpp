// One direction of a fabric: frames go in with submit(), come out of
// release() when their time has come. The pipeline each frame goes through
// (doc/FABRIC.md has the exact rules):
//
//   path = ECMP hash of the UDP source port (non-RoCE: path 0)
//   queue (shared or per path): tail drop at `limit`, CE mark, serialisation
//   wire: blackhole of its path -> random loss -> Gilbert-Elliott loss
//         -> duplication -> per copy: corruption
//   path delay: base + spread + jitter, FIFO per path unless `reorder` holds it back
//
// Every decision is taken in submit(), so each frame's release time is known
// at once and the model works the same in virtual time (lib/sim) and in real
// time (metaroce-fabric): the caller passes `now` and calls release() when
// next_release_time() has come. Randomness: seeded streams owned by the model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fabric/config.hpp"
#include "fabric/counters.hpp"
#include "fabric/gilbert_elliott.hpp"
#include "fabric/random.hpp"
#include "fabric/rate_queue.hpp"

namespace metaroce::fabric {

struct ReleasedFrame {
  std::uint64_t due_ns = 0;  // when it left the fabric (<= the `now` of release())
  std::uint32_t path = 0;
  std::vector<std::uint8_t> bytes;
};

class Impairment {
 public:
  // Throws std::invalid_argument with validate()'s message on a bad config.
  explicit Impairment(FabricConfig config);

  // A frame enters at `now`; `now` must not decrease across calls.
  void submit(std::uint64_t now, std::vector<std::uint8_t> frame);

  // Appends every frame due at or before `now` to `out`, ordered by due time
  // then by submission (a duplicate right after its original). Returns how
  // many were appended.
  std::size_t release(std::uint64_t now, std::vector<ReleasedFrame>& out);

  // Due time of the next frame; UINT64_MAX when nothing is in flight.
  [[nodiscard]] std::uint64_t next_release_time() const noexcept {
    return in_flight_.empty() ? ~std::uint64_t{0} : in_flight_.front().due_ns;
  }
  [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_.size(); }
  [[nodiscard]] const FabricCounters& counters() const noexcept { return counters_; }
  [[nodiscard]] const FabricConfig& config() const noexcept { return config_; }

  // The path a frame takes.
  [[nodiscard]] std::uint32_t path_of(std::span<const std::uint8_t> frame) const noexcept;

  // Run-time control (metaroce-fabric, scenarios): from `now` on.
  void set_rate(std::uint64_t rate_bps) noexcept;
  void add_blackhole(const Blackhole& blackhole);

 private:
  struct InFlight {
    std::uint64_t due_ns;
    std::uint64_t seq;    // unique, in submission order: breaks ties
    std::uint64_t order;  // index of the submitted frame (shared by its duplicate)
    std::uint32_t path;
    std::vector<std::uint8_t> bytes;
  };
  struct LaterFirst {
    bool operator()(const InFlight& a, const InFlight& b) const noexcept {
      return a.due_ns != b.due_ns ? a.due_ns > b.due_ns : a.seq > b.seq;
    }
  };

  [[nodiscard]] bool blackholed(std::uint32_t path, std::uint64_t now) const noexcept;
  void schedule(std::uint64_t due_ns, std::uint64_t order, std::uint32_t path, std::vector<std::uint8_t> bytes);

  FabricConfig config_;
  std::vector<std::uint64_t> path_delay_ns_;
  std::vector<std::uint64_t> path_last_due_ns_;  // FIFO per path
  std::vector<RateQueue> queues_;                // 1 (shared) or one per path
  GilbertElliottLoss gilbert_elliott_;
  Random queue_random_, loss_random_, burst_random_, duplicate_random_, corrupt_random_,
      jitter_random_, reorder_random_;
  std::vector<InFlight> in_flight_;  // min-heap by (due_ns, seq)
  std::uint64_t next_seq_ = 0;
  std::uint64_t released_order_end_ = 0;  // 1 + highest `order` released so far
  FabricCounters counters_;
};

}  // namespace metaroce::fabric
