// What a host counts: every frame in and out, and every drop under the name
// of its reason. The DPDK-free host (host.hpp) counts demultiplexing,
// holding and polling; the engine adds what only it sees (mbufs, the PMD).
// Owned by one lcore; read by others only after it stopped (or as a racy
// snapshot for progress lines).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "host/neighbour_counters.hpp"
#include "wire/frame.hpp"

namespace metaroce::host {

struct HostCounters {
  std::uint64_t rx_frames = 0;       // received: from the port, or handed off by another lcore
  std::uint64_t rx_bytes = 0;
  std::uint64_t rx_linearized = 0;   // multi-segment frames copied to be parsed
  std::uint64_t rx_delivered = 0;    // handed to a connection
  std::uint64_t rx_unknown_qpn = 0;  // dropped: no connection has its destination QP
  std::uint64_t rx_steering_probes = 0;  // the start-up steering check's probes, taken and dropped
  std::uint64_t rx_management = 0;   // to QP 1: handed to the connection manager
  std::uint64_t rx_neighbour = 0;    // ARP and ICMPv6: handed to the neighbour cache (counted there)
  std::uint64_t rx_misdirected = 0;  // dropped: its QPN steers to another queue than this host's
  std::uint64_t rx_vlan_mismatch = 0;  // dropped: 802.1Q tag (or none) not the connection's VLAN
  // Software hand-off (a node on a PMD that cannot steer by QPN): frames
  // this lcore took from the port for a QPN another lcore owns, passed to
  // that owner's ring (counted there as rx_frames, not here) ...
  std::uint64_t rx_handed_off = 0;
  std::uint64_t rx_handoff_ring_full = 0;  // ... or dropped: the owner's ring was full
  // Lanes (RxHandoff::share_other_frames): copies of a frame that is not
  // RoCEv2 (ARP, neighbour discovery) this lcore took and handed to another
  // lcore too, by reference, one per lcore (each counts it in rx_frames).
  std::uint64_t rx_shared = 0;
  std::array<std::uint64_t, wire::parse_error_count> rx_parse_errors{};  // dropped, by reason
  std::uint64_t rx_mempool_empty = 0;  // the port's rx_nombuf, refreshed by refresh_port_counters()

  std::uint64_t tx_frames = 0;       // taken by the PMD
  std::uint64_t tx_bytes = 0;
  std::uint64_t tx_zero_copy = 0;    // payload attached as an external buffer
  std::uint64_t tx_copied = 0;       // payload copied into the mbuf
  std::uint64_t tx_deferred = 0;     // not taken by the PMD this turn; retried the next
  std::uint64_t tx_ring_full = 0;    // turns in which the PMD took fewer than offered
  // Frames that found no mbuf: copied aside and sent on a later turn, in
  // order, before anything newer (not a drop; connections wait meanwhile).
  std::uint64_t tx_mempool_empty = 0;
  std::uint64_t tx_frame_too_large = 0;  // dropped: frame larger than an mbuf (raise mbuf_data_room)
  // Dropped: the descriptor named a port index the host does not have (a
  // connection's plane config names more ports than the host was given).
  std::uint64_t tx_no_such_port = 0;
  // Dropped: the port's link is down (the transport resends on the other planes).
  std::uint64_t tx_dropped_link_down = 0;

  std::uint64_t polls = 0;
  std::uint64_t idle_polls = 0;      // turns with nothing received or sent
  std::uint64_t idle_sleeps = 0;
  // Longest time between two turns: a stall (preemption, a slow caller)
  // that the transport's timers saw. Not a sum: += keeps the larger.
  std::uint64_t max_poll_gap_ns = 0;
  // Turns that began 1 ms or more after the one before: stalls (another
  // thread, the kernel or the hypervisor had the CPU) long enough to count
  // against a retransmission timer.
  std::uint64_t poll_stalls = 0;
  std::uint64_t connections_refused = 0;  // add_connection refused: max_connections reached
  // Connections polled, summed over turns: a turn polls only those on the
  // ready list, so idle connections add nothing.
  std::uint64_t connections_polled = 0;
  // Turns that stopped polling connections at the transmit budget
  // (HostConfig::tx_budget_frames): those not polled go first next turn.
  std::uint64_t tx_budget_stops = 0;
  // Ports whose link went down or came back (set_port_link), each change once.
  std::uint64_t link_changes = 0;
  // The neighbour cache's (Host::enable_neighbours): ARP and ND answered,
  // sent, learned and dropped by reason.
  NeighbourCounters neighbour;

  [[nodiscard]] std::uint64_t rx_parse_errors_total() const noexcept {
    std::uint64_t n = 0;
    for (const auto v : rx_parse_errors) n += v;
    return n;
  }
  [[nodiscard]] std::uint64_t dropped() const noexcept {
    return rx_unknown_qpn + rx_misdirected + rx_vlan_mismatch + rx_handoff_ring_full + rx_parse_errors_total() + rx_mempool_empty +
           tx_frame_too_large + tx_no_such_port + tx_dropped_link_down + neighbour.rx_errors_total();
  }

  HostCounters& operator+=(const HostCounters& o) noexcept {
    rx_frames += o.rx_frames;
    rx_bytes += o.rx_bytes;
    rx_linearized += o.rx_linearized;
    rx_delivered += o.rx_delivered;
    rx_unknown_qpn += o.rx_unknown_qpn;
    rx_steering_probes += o.rx_steering_probes;
    rx_management += o.rx_management;
    rx_neighbour += o.rx_neighbour;
    rx_misdirected += o.rx_misdirected;
    rx_vlan_mismatch += o.rx_vlan_mismatch;
    rx_handed_off += o.rx_handed_off;
    rx_handoff_ring_full += o.rx_handoff_ring_full;
    rx_shared += o.rx_shared;
    for (std::size_t i = 0; i < rx_parse_errors.size(); ++i) rx_parse_errors[i] += o.rx_parse_errors[i];
    rx_mempool_empty += o.rx_mempool_empty;
    tx_frames += o.tx_frames;
    tx_bytes += o.tx_bytes;
    tx_zero_copy += o.tx_zero_copy;
    tx_copied += o.tx_copied;
    tx_deferred += o.tx_deferred;
    tx_ring_full += o.tx_ring_full;
    tx_mempool_empty += o.tx_mempool_empty;
    tx_frame_too_large += o.tx_frame_too_large;
    tx_no_such_port += o.tx_no_such_port;
    tx_dropped_link_down += o.tx_dropped_link_down;
    polls += o.polls;
    idle_polls += o.idle_polls;
    idle_sleeps += o.idle_sleeps;
    max_poll_gap_ns = std::max(max_poll_gap_ns, o.max_poll_gap_ns);
    poll_stalls += o.poll_stalls;
    connections_refused += o.connections_refused;
    connections_polled += o.connections_polled;
    tx_budget_stops += o.tx_budget_stops;
    link_changes += o.link_changes;
    neighbour += o.neighbour;
    return *this;
  }

  // f(name, value) for every counter; parse errors as "rx_parse_error.<reason>",
  // the zero ones too, so a reader sees every reason that exists. The
  // non-const one hands f the counter itself (to set it by name).
  template <class F>
  void visit(F&& f) const {
    visit_fields(*this, f);
  }
  template <class F>
  void visit(F&& f) {
    visit_fields(*this, f);
  }

 private:
  template <class Self, class F>
  static void visit_fields(Self& self, F& f) {
    f("rx_frames", self.rx_frames);
    f("rx_bytes", self.rx_bytes);
    f("rx_linearized", self.rx_linearized);
    f("rx_delivered", self.rx_delivered);
    f("rx_unknown_qpn", self.rx_unknown_qpn);
    f("rx_steering_probes", self.rx_steering_probes);
    f("rx_management", self.rx_management);
    f("rx_neighbour", self.rx_neighbour);
    f("rx_misdirected", self.rx_misdirected);
    f("rx_vlan_mismatch", self.rx_vlan_mismatch);
    f("rx_handed_off", self.rx_handed_off);
    f("rx_handoff_ring_full", self.rx_handoff_ring_full);
    f("rx_shared", self.rx_shared);
    for (std::size_t i = 1; i < wire::parse_error_count; ++i)
      f("rx_parse_error." + std::string(wire::to_string(static_cast<wire::ParseError>(i))), self.rx_parse_errors[i]);
    f("rx_mempool_empty", self.rx_mempool_empty);
    f("tx_frames", self.tx_frames);
    f("tx_bytes", self.tx_bytes);
    f("tx_zero_copy", self.tx_zero_copy);
    f("tx_copied", self.tx_copied);
    f("tx_deferred", self.tx_deferred);
    f("tx_ring_full", self.tx_ring_full);
    f("tx_mempool_empty", self.tx_mempool_empty);
    f("tx_frame_too_large", self.tx_frame_too_large);
    f("tx_no_such_port", self.tx_no_such_port);
    f("tx_dropped_link_down", self.tx_dropped_link_down);
    f("polls", self.polls);
    f("idle_polls", self.idle_polls);
    f("idle_sleeps", self.idle_sleeps);
    f("max_poll_gap_ns", self.max_poll_gap_ns);
    f("poll_stalls", self.poll_stalls);
    f("connections_refused", self.connections_refused);
    f("connections_polled", self.connections_polled);
    f("tx_budget_stops", self.tx_budget_stops);
    f("link_changes", self.link_changes);
    self.neighbour.visit(f);
  }
};

}  // namespace metaroce::host
