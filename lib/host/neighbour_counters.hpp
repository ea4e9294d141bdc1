// What the neighbour cache (neighbours.hpp) counts: requests answered and
// sent, replies learned, and every ARP or neighbour-discovery frame it
// dropped, under the name of the reason. A member of HostCounters, so the
// engine's counters (telemetry, --json) carry them.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "wire/neighbour.hpp"

namespace metaroce::host {

#define METAROCE_NEIGHBOUR_COUNTERS(X)                                                                     \
  X(arp_requests_answered, "ARP requests for our IPv4 address, answered")                                \
  X(arp_requests_not_ours, "ARP requests for another address: ignored")                                  \
  X(arp_requests_sent, "ARP requests we sent, retries included")                                         \
  X(arp_replies_learned, "ARP replies (and requests) that filled in or refreshed a cache entry")         \
  X(arp_replies_unrequested, "ARP replies for an address we never asked about: ignored")                \
  X(arp_address_conflicts, "ARP from another MAC claiming our IPv4 address")                             \
  X(nd_solicitations_answered, "neighbour solicitations for our IPv6 address, answered")                 \
  X(requests_answered_elsewhere, "ARP requests or solicitations for our address left to another lcore "    \
                                 "of the port to answer (NeighbourConfig::answer_requests)")              \
  X(nd_solicitations_not_ours, "neighbour solicitations for another address: ignored")                   \
  X(nd_solicitations_sent, "neighbour solicitations we sent, retries included")                          \
  X(nd_advertisements_learned, "neighbour advertisements (and solicitations) that filled in or refreshed " \
                               "a cache entry")                                                          \
  X(nd_advertisements_unrequested, "neighbour advertisements for an address we never asked about")       \
  X(nd_advertisements_not_overriding, "advertisements of another MAC without the override flag: ignored")  \
  X(nd_address_conflicts, "neighbour advertisements from another MAC for our IPv6 address")              \
  X(answers_for_permanent, "ARP or ND news of an address whose MAC was given (--peer-mac): ignored")      \
  X(own_frames, "ARP or ND frames from our own MAC for our own address (looped back): ignored")           \
  X(neighbour_vlan_mismatch, "ARP or ND frames with another VLAN tag (or none) than the port's: dropped") \
  X(neighbour_wrong_family, "ARP on a port without an IPv4 address, or ND without an IPv6 one: dropped") \
  X(neighbour_table_full, "resolutions or learned entries refused: the cache holds max_entries")         \
  X(resolutions_started, "addresses we started to resolve")                                              \
  X(resolutions_failed, "resolutions that got no answer after every try")                                \
  X(entries_stale, "entries that went stale (not confirmed within reachable_time)")

struct NeighbourCounters {
#define METAROCE_NEIGHBOUR_FIELD(name, what) std::uint64_t name = 0;
  METAROCE_NEIGHBOUR_COUNTERS(METAROCE_NEIGHBOUR_FIELD)
#undef METAROCE_NEIGHBOUR_FIELD
  // Dropped ARP and ND frames, by wire::NeighbourParseError (ICMPv6 of
  // other types under icmpv6_other).
  std::array<std::uint64_t, wire::neighbour_parse_error_count> rx_errors{};

  [[nodiscard]] std::uint64_t rx_errors_total() const noexcept {
    std::uint64_t n = 0;
    for (const auto v : rx_errors) n += v;
    return n;
  }

  NeighbourCounters& operator+=(const NeighbourCounters& o) noexcept {
#define METAROCE_NEIGHBOUR_ADD(name, what) name += o.name;
    METAROCE_NEIGHBOUR_COUNTERS(METAROCE_NEIGHBOUR_ADD)
#undef METAROCE_NEIGHBOUR_ADD
    for (std::size_t i = 0; i < rx_errors.size(); ++i) rx_errors[i] += o.rx_errors[i];
    return *this;
  }

  // f(name, value) for every counter, the errors as "neighbour_rx_error.<reason>".
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
#define METAROCE_NEIGHBOUR_VISIT(name, what) f(#name, self.name);
    METAROCE_NEIGHBOUR_COUNTERS(METAROCE_NEIGHBOUR_VISIT)
#undef METAROCE_NEIGHBOUR_VISIT
    for (std::size_t i = 1; i < wire::neighbour_parse_error_count; ++i)
      f("neighbour_rx_error." + std::string(wire::to_string(static_cast<wire::NeighbourParseError>(i))),
        self.rx_errors[i]);
  }
};

}  // namespace metaroce::host
