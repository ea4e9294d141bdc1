// metaroce-fabric --ports N: a small switch on one lcore. Every turn it
// takes a burst from each port, looks each frame's address up in the
// forwarding table (fabric/forwarding_table.hpp) and hands the frame to its
// output port's Direction: an ImpairedLink fed by submit (engine/
// impaired_link.hpp), whose fabric model is that port's output queue (rate,
// limit, ECN marking) and impairments. A frame with no route is dropped and
// counted on the port it came in on.
//
// Counters of port i (SwitchPortSnapshot):
//   in:  received == routed to some output port + dropped_no_route
//   out: the Direction's totals, received = frames routed to port i:
//        received + duplicated == forwarded + dropped + in_flight
// so over the switch: sum(in.received) == sum(out.received) + sum(no_route).
// Queue depth: the bytes each frame found in port i's output queue on
// arrival (p50, p99, max).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/latency_histogram.hpp"
#include "fabric/forwarding_table.hpp"
#include "metaroce-fabric/fabric_node.hpp"

namespace metaroce::fabric_app {

struct SwitchIngressTotals {
  std::uint64_t received = 0, received_bytes = 0;
  std::uint64_t dropped_no_route = 0;
  std::uint64_t rx_missed = 0;  // the port's imissed + rx_nombuf: never received, so not in the sums
};

struct QueueDepth {
  std::uint64_t p50_bytes = 0, p99_bytes = 0, max_bytes = 0;
  std::uint64_t samples = 0;
};

struct SwitchPortSnapshot {
  std::string name;  // the port's EAL device name
  std::string spec;  // its output queue's, canonical
  SwitchIngressTotals in{};
  DirectionTotals out{};
  QueueDepth queue{};
  std::uint64_t taken_ns = 0;
  std::uint64_t last_busy_ns = 0;
};

class SwitchNode {
 public:
  // `out[i]` is port i's output: a link to `port_ids[i]` whose own `from`
  // is never read.
  SwitchNode(std::vector<std::uint16_t> port_ids, std::vector<std::string> port_names,
             std::vector<std::unique_ptr<Direction>> out, fabric::ForwardingTable table);

  // Owning lcore only: one turn; returns frames received + transmitted.
  std::size_t turn_st(std::uint64_t now_ns);
  [[nodiscard]] std::uint64_t next_release_ns_st() const noexcept;
  void publish_st(std::uint64_t now_ns, bool wait);
  void destroy_links_st() noexcept;

  // Any thread: the last published snapshot, port by port.
  [[nodiscard]] std::vector<SwitchPortSnapshot> snapshot() const;
  [[nodiscard]] std::size_t ports() const noexcept { return port_ids_.size(); }
  [[nodiscard]] const fabric::ForwardingTable& table() const noexcept { return table_; }

 private:
  static constexpr std::uint64_t publish_period_ns = 10'000'000;

  std::vector<std::uint16_t> port_ids_;
  std::vector<std::string> port_names_;
  std::vector<std::unique_ptr<Direction>> out_;
  fabric::ForwardingTable table_;
  std::vector<SwitchIngressTotals> in_;
  std::vector<apps::LatencyHistogram> depth_;  // bytes, not ns: the histogram is the same
  std::uint64_t last_busy_ns_ = 0;
  std::uint64_t last_publish_ns_ = 0;
  mutable std::mutex published_mutex_;
  std::vector<SwitchPortSnapshot> published_;  // guarded by published_mutex_
};

// Runs the switch until control.stop, as run_directions_st runs directions.
void run_switch_st(SwitchNode& node, const engine::TscClock& clock, NodeControl& control,
                   const std::function<void(std::uint64_t)>& on_turn);

}  // namespace metaroce::fabric_app
