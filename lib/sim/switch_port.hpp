// One switch output port of the simulator: a fabric::RateQueue (line rate,
// byte limit -> tail drop, ECN step or RED marking) followed by a fixed
// propagation delay, with its counters and a queue-occupancy record (current,
// peak, time-weighted average) for congestion-control studies.
// Rules: doc/FABRIC.md, "Switches".
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "fabric/config.hpp"
#include "fabric/random.hpp"
#include "fabric/rate_queue.hpp"

namespace metaroce::sim {

// One direction of a cable with its queue at the head: a switch output port
// toward a host, or one link of a trunk between two switches.
struct LinkConfig {
  std::uint64_t rate_bps = 0;        // 0: unlimited (no queue, never drops)
  std::uint32_t overhead_bytes = 0;  // added per frame on the wire (24: preamble+IFG+FCS)
  std::uint64_t limit_bytes = 0;     // tail drop when occupancy + frame would exceed it; 0: unlimited
  fabric::EcnMarking ecn{};          // step (min == max) or RED-like (min < max)
  std::uint64_t delay_ns = 0;        // propagation, after the frame's last bit left the port
  std::uint64_t seed = 1;            // RED marking draws (each port its own stream)
};

// Empty when the config is usable, else what is wrong.
[[nodiscard]] std::string validate(const LinkConfig& config);

struct PortCounters {
  std::uint64_t enqueued = 0;            // frames accepted by the queue
  std::uint64_t forwarded = 0;           // frames that reached the far end of the link
  std::uint64_t dropped_queue_full = 0;  // tail drops
  std::uint64_t ecn_marked = 0;          // CE set on an ECT frame by this port
  std::uint64_t peak_queued_bytes = 0;   // highest occupancy ever (overhead included)

  template <class F>
  void visit(F&& f) const {
    f("enqueued", enqueued);
    f("forwarded", forwarded);
    f("dropped_queue_full", dropped_queue_full);
    f("ecn_marked", ecn_marked);
    f("peak_queued_bytes", peak_queued_bytes);
  }
  bool operator==(const PortCounters&) const = default;
};

class SwitchPort {
 public:
  // A frame on the link: `origin` is the endpoint that sent it (for Delivery).
  struct Frame {
    std::uint64_t due_ns = 0;  // reaches the far end
    std::size_t origin = 0;
    std::vector<std::uint8_t> bytes;
  };

  // `random_stream` separates the RED draws of ports built from one seed.
  SwitchPort(const LinkConfig& config, std::uint64_t random_stream);

  // A frame reaches the port at `now` (non-decreasing). Returns false when it
  // is tail-dropped. An ECT frame the queue marks gets CE in its IP header.
  bool enqueue(std::uint64_t now, std::size_t origin, std::vector<std::uint8_t> frame);

  // UINT64_MAX when no frame is on the link.
  [[nodiscard]] std::uint64_t next_release_time() const noexcept {
    return on_link_.empty() ? ~std::uint64_t{0} : on_link_.front().due_ns;
  }
  // Moves the oldest frame due at or before `now` to `out`; false when none.
  bool pop_due(std::uint64_t now, Frame& out);
  [[nodiscard]] std::size_t in_flight() const noexcept { return on_link_.size(); }

  // Frames that reach the port from `now` on serialise at the new rate
  // (queued ones keep their departure times). rate_bps > 0.
  void set_rate(std::uint64_t now, std::uint64_t rate_bps);
  [[nodiscard]] std::uint64_t rate_bps() const noexcept { return queue_.rate_bps(); }

  // Bytes accepted and not yet fully serialised at `now` (>= the last enqueue).
  [[nodiscard]] std::uint64_t queued_bytes(std::uint64_t now) const noexcept;
  // Occupancy averaged over time since the window started (start_window, or
  // t = 0), up to `now`; 0 for an empty window. Exact: byte-nanoseconds summed.
  [[nodiscard]] double average_queued_bytes(std::uint64_t now) const noexcept;
  // Highest occupancy since the window started.
  [[nodiscard]] std::uint64_t window_peak_bytes() const noexcept { return window_peak_bytes_; }
  [[nodiscard]] std::uint64_t window_start() const noexcept { return window_start_ns_; }
  // Starts a new averaging window at `now` (e.g. after a warm-up, for the steady state).
  void start_window(std::uint64_t now);

  [[nodiscard]] const PortCounters& counters() const noexcept { return counters_; }
  [[nodiscard]] const LinkConfig& config() const noexcept { return config_; }

 private:
  struct Backlog {
    std::uint64_t departure_ns;
    std::uint64_t bytes;  // overhead included, as the RateQueue counts them
  };
  // Folds departures up to `now` into the occupancy integral.
  void advance(std::uint64_t now);
  [[nodiscard]] std::uint64_t integral_until(std::uint64_t now) const noexcept;

  LinkConfig config_;
  fabric::RateQueue queue_;
  fabric::Random random_;
  std::deque<Frame> on_link_;  // FIFO: serialised in order, one delay
  std::uint64_t last_due_ns_ = 0;

  // Occupancy record, mirroring the RateQueue at ns resolution (a frame
  // counts until its departure_ns, as RateQueue::queued_bytes does).
  std::deque<Backlog> backlog_;
  std::uint64_t backlog_bytes_ = 0;
  std::uint64_t integral_time_ns_ = 0;       // integral_ covers [window_start, integral_time]
  std::uint64_t integral_ = 0;               // byte-ns (2^64: 1 MB for 5 hours)
  std::uint64_t window_start_ns_ = 0;
  std::uint64_t window_peak_bytes_ = 0;
  PortCounters counters_;
};

}  // namespace metaroce::sim
