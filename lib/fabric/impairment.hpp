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
//
// The model holds frames through a handle it never looks inside except
// through its FrameOps: `Impairment` holds byte vectors (lib/sim, tests);
// lib/engine's ImpairedLink holds the received mbufs themselves, so its delay
// line copies nothing. The decisions depend on the frames' bytes and the
// seeds only, never on the handle type.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "fabric/config.hpp"
#include "fabric/counters.hpp"
#include "fabric/gilbert_elliott.hpp"
#include "fabric/random.hpp"
#include "fabric/rate_queue.hpp"

namespace metaroce::fabric {

// What the model needs from a frame handle. `Frame` is movable and
// default-constructible; destroying one gives its buffer back (the model
// destroys the frames it drops). Given `Ops ops; Frame f, copy;`:
//   ops.bytes(f)            the whole frame, contiguous, read-only
//   ops.writable(f)         the same bytes, writable, to set CE or flip a bit:
//                           may first replace `f` by a private copy when it
//                           shares its bytes (with a duplicate, a clone);
//                           std::nullopt when no such copy could be made
//   ops.duplicate(f, copy)  makes `copy` a second frame with the same bytes
//                           (possibly sharing them); false when it could not
// For byte vectors neither can fail; for mbufs both need a free mbuf, and a
// failure is counted as `dropped_no_buffer`.
template <class O>
concept FrameOps = std::movable<typename O::Frame> && std::default_initializable<typename O::Frame> &&
                   requires(O& ops, const typename O::Frame& frame, typename O::Frame& mutable_frame) {
                     { ops.bytes(frame) } -> std::same_as<std::span<const std::uint8_t>>;
                     { ops.writable(mutable_frame) } -> std::same_as<std::optional<std::span<std::uint8_t>>>;
                     { ops.duplicate(mutable_frame, mutable_frame) } -> std::same_as<bool>;
                   };

// Frames as byte vectors: what lib/sim and the tests use.
using ByteFrame = std::vector<std::uint8_t>;

struct ByteFrameOps {
  using Frame = ByteFrame;
  static std::span<const std::uint8_t> bytes(const Frame& frame) noexcept { return frame; }
  static std::optional<std::span<std::uint8_t>> writable(Frame& frame) noexcept {
    return std::span<std::uint8_t>(frame);
  }
  static bool duplicate(Frame& original, Frame& copy) {
    copy = original;
    return true;
  }
};

struct ReleasedFrame {
  std::uint64_t due_ns = 0;  // when it left the fabric (<= the `now` of release())
  std::uint32_t path = 0;
  std::vector<std::uint8_t> bytes;
};

template <FrameOps Ops>
class BasicImpairment {
 public:
  using Frame = typename Ops::Frame;

  // Throws std::invalid_argument with validate()'s message on a bad config.
  explicit BasicImpairment(FabricConfig config, Ops ops = Ops{});

  // A frame enters at `now`; `now` must not decrease across calls.
  void submit(std::uint64_t now, Frame frame);

  // Calls sink(due_ns, path, Frame&&) for every frame due at or before
  // `now`, ordered by due time then by submission (a duplicate right after
  // its original). Returns how many.
  template <class Sink>
  std::size_t release_to(std::uint64_t now, Sink&& sink);

  // The same, appended to `out` (byte frames).
  std::size_t release(std::uint64_t now, std::vector<ReleasedFrame>& out)
    requires std::same_as<typename Ops::Frame, ByteFrame>;

  // Due time of the next frame; UINT64_MAX when nothing is in flight.
  [[nodiscard]] std::uint64_t next_release_time() const noexcept {
    return in_flight_.empty() ? ~std::uint64_t{0} : in_flight_.front().due_ns;
  }
  [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_.size(); }
  // Bytes waiting in the rate queue(s) at `now` (0 without `rate`).
  [[nodiscard]] std::uint64_t queued_bytes(std::uint64_t now) {
    std::uint64_t n = 0;
    for (RateQueue& q : queues_) n += q.queued_bytes(now);
    return n;
  }
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
    Frame frame;
  };
  struct LaterFirst {
    bool operator()(const InFlight& a, const InFlight& b) const noexcept {
      return a.due_ns != b.due_ns ? a.due_ns > b.due_ns : a.seq > b.seq;
    }
  };

  [[nodiscard]] bool blackholed(std::uint32_t path, std::uint64_t now) const noexcept;
  void schedule(std::uint64_t due_ns, std::uint64_t order, std::uint32_t path, Frame frame);

  FabricConfig config_;
  Ops ops_;
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

// The byte-vector model, compiled once in impairment.cpp. Another frame type
// includes fabric/impairment_impl.hpp to instantiate its own.
using Impairment = BasicImpairment<ByteFrameOps>;
extern template class BasicImpairment<ByteFrameOps>;

}  // namespace metaroce::fabric
