// The neighbour cache of one port: answers ARP requests and IPv6 neighbour
// solicitations for the port's own addresses, and resolves the MAC of a
// next hop (the peer itself, or a gateway) with retries and a timeout, in
// the caller's time. Sans-I/O and DPDK-free like the rest of lib/host: it
// takes received frames (receive) and the time, and returns frames to send
// (poll); the host feeds it the ARP and ICMPv6 frames of its port and sends
// what it returns with the connections' frames. Frames: wire/neighbour.hpp.
//
// An entry's life (RFC 4861's states, simplified; ARP uses the same):
//
//   resolve() -> incomplete --answer--> reachable --reachable_time--> stale
//                  |  a request every retry_interval,                  |
//                  |  `tries` of them                 resolve(): asked again
//                  v                                  (unicast), MAC still used
//                failed (the error says which address, how many tries, which port)
//   set_permanent(): the MAC given by the user; never asked, never replaced.
//
// An answer or a request from a neighbour refreshes its entry (and a
// request for our address from an unknown neighbour creates one: it is
// about to talk to us). Every dropped frame is counted by reason
// (NeighbourCounters). Threading: the owning thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "host/neighbour_counters.hpp"
#include "wire/ip_address.hpp"
#include "wire/neighbour.hpp"

namespace metaroce::host {

using NeighbourTime = std::uint64_t;  // ns, the caller's clock
inline constexpr NeighbourTime neighbour_never = ~NeighbourTime{0};

struct NeighbourConfig {
  std::string port_name = "port";  // named in error messages
  wire::MacAddress local_mac{};
  bool ipv4_present = false;  // answer ARP for this address, and ask from it
  std::uint32_t local_ipv4 = 0;
  bool ipv6_present = false;  // answer solicitations for this address, and ask from it
  wire::Ipv6Address local_ipv6{};
  bool vlan_present = false;  // frames carry this tag (the VID must match; the priority is ours)
  std::uint16_t vlan_tci = 0;
  NeighbourTime retry_interval = 1'000'000'000;  // between requests for one address
  std::uint32_t tries = 3;                       // requests before a resolution fails
  NeighbourTime reachable_time = 30'000'000'000;  // a confirmed entry goes stale after this
  std::size_t max_entries = 1024;
  // False on all lcores of a port but one when every lcore sees the port's
  // ARP and ND frames (lanes sharing them): a request for our address still
  // teaches us the asker's MAC, but another lcore answers it.
  bool answer_requests = true;
};

enum class NeighbourState : std::uint8_t { incomplete, reachable, stale, failed, permanent };
[[nodiscard]] std::string_view to_string(NeighbourState s) noexcept;

struct NeighbourEntry {
  NeighbourState state = NeighbourState::incomplete;
  wire::MacAddress mac{};           // known unless incomplete (or failed before any answer)
  bool mac_known = false;
  std::uint32_t tries = 0;          // requests sent in the current round
  NeighbourTime next_send = neighbour_never;  // the next request (or, after the last, the time it fails)
  NeighbourTime confirmed = 0;      // last answer: reachable until confirmed + reachable_time
};

struct Resolution {
  NeighbourState state = NeighbourState::incomplete;
  wire::MacAddress mac{};  // when usable()
  std::string error;       // failed: one line saying what was tried (the caller adds what to do)
  [[nodiscard]] bool usable() const noexcept {
    return state == NeighbourState::reachable || state == NeighbourState::stale ||
           state == NeighbourState::permanent;
  }
};

class Neighbours {
 public:
  // Counts into `counters` (the host's).
  Neighbours(const NeighbourConfig& config, NeighbourCounters& counters);

  // The next hop's MAC, or where its resolution stands. An address without
  // an entry gets one (incomplete: its first request goes at the next
  // poll); a stale one is asked again while its MAC is still returned; a
  // failed one stays failed until forget().
  Resolution resolve(NeighbourTime now, const wire::IpAddress& address);
  // A MAC given by the user: never asked, never replaced by what arrives.
  void set_permanent(const wire::IpAddress& address, const wire::MacAddress& mac);
  bool forget(const wire::IpAddress& address);
  [[nodiscard]] const NeighbourEntry* find(const wire::IpAddress& address) const;
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

  // One received ARP or ICMPv6 frame (wire::classify said so), from its
  // Ethernet header on.
  void receive(NeighbourTime now, wire::ByteSpan frame);
  // Answers to what was received, then the requests due (first tries and
  // retries), appended to `out`; resolutions out of tries fail here.
  void poll(NeighbourTime now, std::vector<std::vector<std::uint8_t>>& out);
  // The earliest time poll() has something to do (now when answers wait).
  [[nodiscard]] NeighbourTime next_deadline() const noexcept {
    return answers_.empty() ? next_deadline_ : 0;
  }
  [[nodiscard]] const NeighbourConfig& config() const noexcept { return config_; }

 private:
  void receive_arp(NeighbourTime now, const wire::NeighbourFrame& f);
  void receive_nd(NeighbourTime now, const wire::NeighbourFrame& f);
  // A neighbour told us its MAC: `confirmed` (an answer to us, or it asks
  // us) or not (an unsolicited advertisement: stale).
  enum class Learned : std::uint8_t { yes, no_entry, permanent, table_full };
  Learned learn(NeighbourTime now, const wire::IpAddress& address, const wire::MacAddress& mac, bool confirmed,
                bool create);
  std::vector<std::uint8_t> request_frame(const wire::IpAddress& address, const NeighbourEntry& e) const;
  std::string failure(const wire::IpAddress& address, const NeighbourEntry& e) const;
  [[nodiscard]] wire::EthernetHeader ethernet_to(const wire::MacAddress& dst) const noexcept;
  void recompute_deadline() noexcept;

  NeighbourConfig config_;
  NeighbourCounters& counters_;
  std::unordered_map<wire::IpAddress, NeighbourEntry, wire::IpAddressHash> entries_;
  std::vector<std::vector<std::uint8_t>> answers_;
  NeighbourTime next_deadline_ = neighbour_never;
};

}  // namespace metaroce::host
