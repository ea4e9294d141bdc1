// What one direction of a fabric did, one named counter per fate. Conservation:
// received + duplicated == forwarded + dropped() + frames still in flight.
#pragma once

#include <cstdint>

namespace metaroce::fabric {

struct FabricCounters {
  std::uint64_t received = 0;             // frames submitted
  std::uint64_t forwarded = 0;            // frames released, duplicates included
  std::uint64_t dropped_random_loss = 0;  // `loss`
  std::uint64_t dropped_burst_loss = 0;   // `gemodel`
  std::uint64_t dropped_queue_full = 0;   // tail drop at `limit`
  std::uint64_t dropped_blackhole = 0;    // `blackhole`
  std::uint64_t dropped_no_buffer = 0;    // a copy the model needed (a duplicate, or a private copy
                                          // to set CE or corrupt a shared frame) could not be made:
                                          // mbuf handles only, never with byte vectors
  std::uint64_t corrupted = 0;            // one bit flipped; the receiver will drop it
  std::uint64_t duplicated = 0;           // extra copies made
  std::uint64_t ecn_marked = 0;           // CE set by the queue
  std::uint64_t reordered = 0;            // released after a frame submitted later (any path)
  std::uint64_t reordered_in_path = 0;    // held back by `reorder` inside its path

  [[nodiscard]] std::uint64_t dropped() const noexcept {
    return dropped_random_loss + dropped_burst_loss + dropped_queue_full + dropped_blackhole + dropped_no_buffer;
  }

  // Calls f(name, value) for every counter, in declaration order (for
  // printing and JSON in the apps).
  template <class F>
  void visit(F&& f) const {
    f("received", received);
    f("forwarded", forwarded);
    f("dropped_random_loss", dropped_random_loss);
    f("dropped_burst_loss", dropped_burst_loss);
    f("dropped_queue_full", dropped_queue_full);
    f("dropped_blackhole", dropped_blackhole);
    f("dropped_no_buffer", dropped_no_buffer);
    f("corrupted", corrupted);
    f("duplicated", duplicated);
    f("ecn_marked", ecn_marked);
    f("reordered", reordered);
    f("reordered_in_path", reordered_in_path);
  }

  bool operator==(const FabricCounters&) const = default;
};

}  // namespace metaroce::fabric
