// A switched fabric in virtual time (ns) for fabric-scale studies: hosts
// (sim::Endpoint, the same transport core the engine runs) single-homed on
// switches joined by point-to-point links. Unlike sim::Network it is driven by
// one event heap (its cost grows with events, not with the fabric's size),
// routes every frame by shortest path with ECMP across all next hops (a
// 5-tuple hash, salted per switch), fails and repairs links and switches at
// given times, and models PFC: per-priority ingress accounting with XOFF/XON
// thresholds, pause frames that reach the upstream port after the link delay,
// and a paused egress that stops. doc/SIMULATOR.md describes the model.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "fabric/config.hpp"
#include "fabric/frame_peek.hpp"
#include "fabric/random.hpp"
#include "sim/endpoint.hpp"

namespace metaroce::sim {

inline constexpr std::size_t pfc_priorities = 8;

// One direction of a cable and the egress queue at its head.
struct FabricLinkConfig {
  std::uint64_t rate_bps = 100'000'000'000;
  std::uint64_t delay_ns = 1'000;        // propagation, after the last bit left the port
  std::uint32_t overhead_bytes = 24;     // preamble + IFG + FCS, per frame on the wire
  std::uint64_t buffer_bytes = 0;        // egress tail drop above it (switch ports, lossy priorities); 0: unlimited
  fabric::EcnMarking ecn{};              // marking on enqueue, as fabric::RateQueue: step or RED-like (switch ports only)
  double loss = 0.0;                     // each frame vanishes on the wire with this probability
};

// Priority-based flow control (IEEE 802.1Qbb) at a switch's ingress ports.
// A frame counts against (ingress port, priority) from its arrival until its
// last bit leaves the egress port. Above `xoff_bytes` the switch sends XOFF
// to the port upstream; at or below `xon_bytes` it sends XON. A lossless
// priority is never tail-dropped (the headroom is assumed to suffice: the peak
// ingress occupancy is recorded to check it).
struct PfcConfig {
  bool enabled = false;
  std::uint64_t xoff_bytes = 256 * 1024;
  std::uint64_t xon_bytes = 128 * 1024;
  std::uint8_t lossless_priorities = 0xff;  // bit p: priority p is lossless
};

struct FabricSwitchConfig {
  std::uint64_t forwarding_latency_ns = 0;
  PfcConfig pfc{};
};

struct FabricPortCounters {
  std::uint64_t tx_frames = 0;           // frames whose last bit left the port
  std::uint64_t tx_bytes = 0;            // their frame bytes (no overhead)
  std::uint64_t dropped_queue_full = 0;  // tail drops
  std::uint64_t dropped_loss = 0;        // lost on this port's wire (FabricLinkConfig::loss)
  std::uint64_t dropped_link_down = 0;   // queued, on the wire or sent to it while it was down
  std::uint64_t ecn_marked = 0;
  std::uint64_t peak_queued_bytes = 0;   // egress, frames + overhead
  std::uint64_t peak_ingress_bytes = 0;  // PFC ingress accounting, any priority
  std::uint64_t pauses_sent = 0;         // XOFF frames this port sent upstream
  std::uint64_t resumes_sent = 0;        // XON frames
  std::uint64_t pauses_received = 0;     // XOFF frames that stopped this port's egress
  std::uint64_t resumes_received = 0;
  std::uint64_t paused_ns = 0;           // time some priority of this egress was paused (summed per priority)
};

struct FabricCounters {
  std::uint64_t sent = 0;          // frames hosts handed to poll()'s `out`
  std::uint64_t delivered = 0;     // on_frame() calls
  std::uint64_t unroutable = 0;    // no route to their destination (or not addressed to a host): dropped
  std::uint64_t events = 0;        // events processed (heap pops and host polls)
  std::uint64_t reroutes = 0;      // forwarding tables recomputed after a failure or repair
  std::uint64_t peak_pending_events = 0;  // most events waiting in the heap at once
  std::uint64_t peak_frames = 0;          // most frames held at once (frames_in_flight)
};

using FabricNodeId = std::uint32_t;  // hosts and switches share one numbering, in creation order
using FabricLinkId = std::uint32_t;

class Fabric {
 public:
  Fabric() = default;
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  // A host; `ipv4` (host order, nonzero, unique) is the destination address
  // frames for it carry. The endpoint must outlive the fabric. Its NIC is the
  // port of the link that joins it to its switch (connect()).
  FabricNodeId add_host(Endpoint& endpoint, std::uint32_t ipv4);
  FabricNodeId add_switch(const FabricSwitchConfig& config = {});
  // The hosts `ports` are the ports of one multi-port endpoint (such as
  // host::MultiportSimEndpoint, one port per plane): polling any of them can
  // give the others frames to send, so after each poll of one the others'
  // wake-ups are read again. Throws std::invalid_argument on a switch, a
  // repeated node or a node already in a group.
  void group_ports(std::span<const FabricNodeId> ports);
  // A cable between two nodes, `a_to_b` and `b_to_a` its directions (the
  // egress port of each side). A host has exactly one link, to a switch.
  // Throws std::invalid_argument on a bad id, a second host link, a
  // host-to-host link or a zero rate.
  FabricLinkId connect(FabricNodeId a, FabricNodeId b, const FabricLinkConfig& a_to_b,
                       const FabricLinkConfig& b_to_a, std::uint64_t seed = 1);

  // Link or switch failure and repair at `at_ns` (events). A failed link drops
  // what is queued at both its ends, what is on the wire and what is later
  // sent to it; the switches recompute their forwarding tables
  // `reroute_after_ns` after the failure (and after the repair).
  void fail_link(FabricLinkId link, std::uint64_t at_ns, std::uint64_t reroute_after_ns = 0);
  void repair_link(FabricLinkId link, std::uint64_t at_ns, std::uint64_t reroute_after_ns = 0);
  void fail_switch(FabricNodeId sw, std::uint64_t at_ns, std::uint64_t reroute_after_ns = 0);
  void repair_switch(FabricNodeId sw, std::uint64_t at_ns, std::uint64_t reroute_after_ns = 0);

  // Processes every event at or before `t`, then sets now() to t.
  void run_until(std::uint64_t t);
  // Runs until done() holds (checked first and after every instant) or
  // `limit`. Returns done().
  bool run_until(const std::function<bool()>& done, std::uint64_t limit);
  // Processes the next instant if it is at or before `limit`; false if none.
  bool step(std::uint64_t limit);
  [[nodiscard]] std::uint64_t now() const noexcept { return now_; }
  [[nodiscard]] std::uint64_t next_event_time() const noexcept;
  // A host whose state the caller changed (a posted request) is polled at
  // the next instant processed.
  void wake(FabricNodeId host);

  // A NIC transmit ring of `frames` per host (0: unlimited, the default): a
  // host is polled only while fewer frames wait at its NIC, and again once
  // its NIC has drained to half of it. With a host transmit budget
  // (host::HostConfig::tx_budget_frames) unsent frames stay in the
  // transport, as on a real NIC, instead of piling up in the fabric.
  void set_nic_ring(std::uint32_t frames) noexcept { nic_ring_ = frames; }

  // From now on, frames leaving `from` on `link` vanish with probability `loss`.
  void set_loss(FabricLinkId link, FabricNodeId from, double loss);

  // --- Inspection ---
  [[nodiscard]] std::size_t node_count() const noexcept { return nodes_.size(); }
  [[nodiscard]] std::size_t link_count() const noexcept { return links_.size(); }
  [[nodiscard]] bool is_host(FabricNodeId node) const { return nodes_.at(node).endpoint != nullptr; }
  // The egress port of `from` on `link` (from is one of its ends).
  [[nodiscard]] const FabricPortCounters& port_counters(FabricLinkId link, FabricNodeId from) const;
  [[nodiscard]] FabricNodeId link_end(FabricLinkId link, int side) const { return ports_.at(2 * link + side).node; }
  [[nodiscard]] std::uint64_t queued_bytes(FabricLinkId link, FabricNodeId from) const;
  [[nodiscard]] const FabricCounters& counters() const noexcept { return counters_; }
  // Sums over every port.
  [[nodiscard]] FabricPortCounters total_port_counters() const;
  // Observer of every delivery to a host (time, origin host, destination host, frame).
  void on_delivery(std::function<void(std::uint64_t, FabricNodeId, FabricNodeId, std::span<const std::uint8_t>)> f) {
    observer_ = std::move(f);
  }
  // Called after every poll of a host (its completions can be read then).
  void on_poll(std::function<void(FabricNodeId)> f) { poll_observer_ = std::move(f); }
  // Frames held by the fabric now: queued, being serialised or on a wire.
  [[nodiscard]] std::size_t frames_in_flight() const noexcept { return packets_.size() - free_packets_.size(); }

  static constexpr std::uint64_t max_polls_per_instant = 100'000;

 private:
  static constexpr std::uint32_t none = ~std::uint32_t{0};

  enum class EventKind : std::uint8_t { tx_done, arrive, pause, wake, link_state, reroute, forwarded };
  struct Event {
    std::uint64_t time;
    std::uint64_t seq;
    EventKind kind;
    std::uint32_t a;  // port / node / link
    std::uint32_t b;  // packet / state
    bool operator>(const Event& other) const noexcept {
      return time != other.time ? time > other.time : seq > other.seq;
    }
  };
  // The pending events, taken in (time, seq) order, a total order: the
  // processing order is that of any exact priority queue. A radix heap:
  // time never goes back, so every event pushed is at or after the last one
  // taken, and an event waits in the bucket of the highest bit in which its
  // (time, seq) differs from the last one taken; taking the next event
  // empties only the lowest nonempty bucket, its events moving to lower
  // ones. Each event moves a few times in all, where a heap's sift-down
  // read a cache line per level of a tree of 10^5 events. An event pushed
  // below the last one taken (a wake-up asked for in the past) waits in a
  // small heap of its own, taken first.
  class EventHeap {
   public:
    [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] const Event& top() const;
    void push(const Event& e);
    void pop();

   private:
    [[nodiscard]] std::size_t bucket_of(const Event& e) const noexcept;
    void settle() const;  // the next event into bucket 0 (or past_)

    static constexpr std::size_t bucket_count = 1 + 64 + 64;  // equal; seq bit 0..63; time bit 0..63
    mutable std::array<std::vector<Event>, bucket_count> buckets_;
    mutable Event last_{0, 0, EventKind::tx_done, 0, 0};  // the lowest key settled so far
    std::vector<Event> past_;                             // below last_: a min-heap
    std::size_t size_ = 0;
  };
  // A queued frame: its id and its size, so that serialising it needs no
  // look at the frame (which has often left the cache while it waited).
  struct Queued {
    std::uint32_t packet;
    std::uint32_t bytes;
  };
  struct Packet {
    std::vector<std::uint8_t> bytes;
    std::uint32_t origin = 0;   // host that sent it
    std::uint32_t in_port = 0;  // ingress port at the current switch (none at a host)
    std::uint8_t priority = 0;
    // Read once, when the host hands the frame over: switches never parse it.
    fabric::FramePeek peek{};
    std::uint32_t destination = 0;  // host node, or none
    std::uint64_t tuple = 0;        // 5-tuple for the ECMP hash
  };
  struct Port {
    FabricNodeId node = 0;
    FabricLinkConfig config;
    fabric::Random random{1, 0};
    std::array<std::deque<Queued>, pfc_priorities> queue;
    std::uint64_t queued_bytes = 0;   // waiting or being serialised, + overhead
    std::uint32_t queued_frames = 0;  // waiting or being serialised
    std::uint64_t busy_until_ps = 0;  // end of the last serialisation
    bool busy = false;
    bool up = true;
    std::uint8_t paused = 0;                  // priorities the peer paused
    std::array<std::uint64_t, pfc_priorities> paused_since{};
    // Ingress side: frames that arrived on this link into `node`.
    std::array<std::uint64_t, pfc_priorities> ingress_bytes{};
    std::uint8_t xoff_sent = 0;
    FabricPortCounters counters;
  };
  struct Node {
    Endpoint* endpoint = nullptr;       // null for a switch
    std::uint32_t ipv4 = 0;
    FabricSwitchConfig config;
    std::vector<std::uint32_t> ports;   // egress ports of this node
    bool up = true;
    bool poll_due = false;
    bool nic_blocked = false;           // due, but its NIC ring is full
    std::uint64_t scheduled_wake = ~std::uint64_t{0};
    std::uint32_t switch_index = none;  // among switches
    std::uint32_t tor = none;           // host: the switch it is attached to
    std::uint64_t salt = 0;             // ECMP hash salt
    std::uint32_t sibling = none;       // next port of the same multi-port host (a ring), or none
  };

  void schedule(std::uint64_t time, EventKind kind, std::uint32_t a, std::uint32_t b);
  std::uint32_t new_packet();
  void free_packet(std::uint32_t id);
  void enqueue(std::uint32_t port, std::uint32_t packet);
  void start_tx(std::uint32_t port);
  void tx_done(std::uint32_t port, std::uint32_t packet);
  void arrive(std::uint32_t port, std::uint32_t packet);  // `port`: the egress it left by
  void forward(FabricNodeId sw, std::uint32_t packet);
  void release_ingress(std::uint32_t packet);
  void pause(std::uint32_t port, std::uint32_t state);
  void set_link(FabricLinkId link, bool up);
  void drop_queued(std::uint32_t port);
  void rebuild_routes();
  void poll_host(FabricNodeId host);
  void classify(Packet& packet) const;
  void note_wakeup(FabricNodeId host);
  [[nodiscard]] std::uint32_t host_of_ipv4(std::uint32_t ipv4) const;
  void check_node(FabricNodeId node, const char* what) const;
  [[nodiscard]] std::uint32_t egress_of(FabricLinkId link, FabricNodeId from) const;

  std::vector<Node> nodes_;
  std::vector<Port> ports_;  // link k: ports 2k (from its a end) and 2k+1 (from b)
  std::vector<std::uint32_t> links_;  // per link: nothing but its existence (size = link count)
  std::vector<std::uint32_t> switches_;  // switch node ids
  std::vector<Packet> packets_;
  std::vector<std::uint32_t> free_packets_;
  EventHeap events_;
  std::uint64_t seq_ = 0;
  std::uint64_t now_ = 0;
  FabricCounters counters_;
  std::function<void(FabricNodeId)> poll_observer_;
  std::vector<FabricNodeId> due_;  // hosts to poll at this instant
  std::vector<FabricNodeId> due_now_;  // those being polled
  std::vector<std::vector<std::uint8_t>> polled_;
  // The buffers of frames delivered or dropped, for the hosts to build
  // their next frames in (Endpoint::use_spare_buffers): a buffer that is
  // still in the cache instead of an allocation per frame.
  Endpoint::SpareBuffers spare_frames_ = std::make_shared<std::vector<std::vector<std::uint8_t>>>();
  std::function<void(std::uint64_t, FabricNodeId, FabricNodeId, std::span<const std::uint8_t>)> observer_;

  // Forwarding: for switch index s and destination switch index d, the
  // egress ports toward d (ECMP group) are group_ports_[group_first_[s*S+d]
  // .. group_first_[s*S+d+1]).
  bool routes_stale_ = true;
  bool started_ = false;
  std::uint32_t nic_ring_ = 0;
  std::vector<std::uint32_t> group_first_;
  std::vector<std::uint32_t> group_ports_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> host_by_ipv4_;  // sorted (ipv4, host)
};

}  // namespace metaroce::sim
