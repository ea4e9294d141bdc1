#include "host/neighbours.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace metaroce::host {

std::string_view to_string(NeighbourState s) noexcept {
  switch (s) {
    case NeighbourState::incomplete: return "incomplete";
    case NeighbourState::reachable: return "reachable";
    case NeighbourState::stale: return "stale";
    case NeighbourState::failed: return "failed";
    case NeighbourState::permanent: return "permanent";
  }
  return "unknown";
}

Neighbours::Neighbours(const NeighbourConfig& config, NeighbourCounters& counters)
    : config_(config), counters_(counters) {
  config_.tries = std::max<std::uint32_t>(config_.tries, 1);
}

namespace {
Resolution resolution_of(const NeighbourEntry& e) {
  Resolution r;
  r.state = e.state;
  if (e.mac_known && e.state != NeighbourState::failed) r.mac = e.mac;
  return r;
}
}  // namespace

Resolution Neighbours::resolve(NeighbourTime now, const wire::IpAddress& address) {
  const bool family_ok = address.version == 4 ? config_.ipv4_present : config_.ipv6_present;
  if (!family_ok) {
    Resolution r;
    r.state = NeighbourState::failed;
    r.error = fmt::format("cannot resolve {} on port {}: it has no IPv{} address of its own to ask from",
                          wire::to_string(address), config_.port_name, address.version);
    return r;
  }
  auto it = entries_.find(address);
  if (it == entries_.end()) {
    if (entries_.size() >= config_.max_entries) {
      ++counters_.neighbour_table_full;
      Resolution r;
      r.state = NeighbourState::failed;
      r.error = fmt::format("cannot resolve {} on port {}: its neighbour cache holds {} entries already",
                            wire::to_string(address), config_.port_name, entries_.size());
      return r;
    }
    NeighbourEntry e;
    e.next_send = now;
    it = entries_.emplace(address, e).first;
    ++counters_.resolutions_started;
    next_deadline_ = std::min(next_deadline_, now);
    return resolution_of(it->second);
  }
  NeighbourEntry& e = it->second;
  if (e.state == NeighbourState::reachable && now >= e.confirmed + config_.reachable_time) {
    e.state = NeighbourState::stale;
    ++counters_.entries_stale;
  }
  if (e.state == NeighbourState::stale && e.next_send == neighbour_never) {
    e.tries = 0;  // ask again, unicast, while the MAC we have is used
    e.next_send = now;
    next_deadline_ = std::min(next_deadline_, now);
  }
  Resolution r = resolution_of(e);
  if (e.state == NeighbourState::failed) r.error = failure(address, e);
  return r;
}

void Neighbours::set_permanent(const wire::IpAddress& address, const wire::MacAddress& mac) {
  NeighbourEntry e;
  e.state = NeighbourState::permanent;
  e.mac = mac;
  e.mac_known = true;
  entries_[address] = e;
  recompute_deadline();
}

bool Neighbours::forget(const wire::IpAddress& address) {
  const bool had = entries_.erase(address) != 0;
  recompute_deadline();
  return had;
}

const NeighbourEntry* Neighbours::find(const wire::IpAddress& address) const {
  const auto it = entries_.find(address);
  return it == entries_.end() ? nullptr : &it->second;
}

std::string Neighbours::failure(const wire::IpAddress& address, const NeighbourEntry& e) const {
  return fmt::format("no {} from {} after {} tries over {:.1f} s on port {}",
                     address.version == 4 ? "ARP reply" : "neighbour advertisement", wire::to_string(address),
                     e.tries, double(e.tries) * double(config_.retry_interval) / 1e9, config_.port_name);
}

wire::EthernetHeader Neighbours::ethernet_to(const wire::MacAddress& dst) const noexcept {
  wire::EthernetHeader eth;
  eth.dst = dst;
  eth.src = config_.local_mac;
  eth.vlan_present = config_.vlan_present;
  eth.vlan_tci = config_.vlan_tci;
  return eth;
}

std::vector<std::uint8_t> Neighbours::request_frame(const wire::IpAddress& address, const NeighbourEntry& e) const {
  // A stale entry is asked at its MAC (as a kernel's unicast probe), a new
  // one by broadcast (ARP) or at its solicited-node group (ND).
  std::vector<std::uint8_t> frame(128);
  std::size_t n = 0;
  if (address.version == 4) {
    wire::ArpMessage m;
    m.operation = wire::arp_request;
    m.sender_mac = config_.local_mac;
    m.sender_ip = config_.local_ipv4;
    m.target_ip = address.ipv4;
    n = wire::build_arp_frame(ethernet_to(e.mac_known ? e.mac : wire::broadcast_mac), m, frame);
  } else {
    const wire::Ipv6Address group = wire::solicited_node_address(address.ipv6);
    wire::NdMessage m;
    m.type = wire::icmpv6_neighbour_solicitation;
    m.target = address.ipv6;
    m.link_address_present = true;
    m.link_address = config_.local_mac;
    n = wire::build_nd_frame(ethernet_to(e.mac_known ? e.mac : wire::ipv6_multicast_mac(group)),
                             config_.local_ipv6, e.mac_known ? address.ipv6 : group, m, frame);
  }
  frame.resize(n);
  return frame;
}

void Neighbours::poll(NeighbourTime now, std::vector<std::vector<std::uint8_t>>& out) {
  for (auto& a : answers_) out.push_back(std::move(a));
  answers_.clear();
  if (now < next_deadline_) return;
  for (auto& [address, e] : entries_) {
    if (e.state == NeighbourState::reachable && now >= e.confirmed + config_.reachable_time) {
      e.state = NeighbourState::stale;
      ++counters_.entries_stale;
    }
    if (now < e.next_send) continue;
    if (e.tries >= config_.tries) {  // the last request's interval is over: no answer
      e.state = NeighbourState::failed;
      e.next_send = neighbour_never;
      ++counters_.resolutions_failed;
      continue;
    }
    out.push_back(request_frame(address, e));
    ++(address.version == 4 ? counters_.arp_requests_sent : counters_.nd_solicitations_sent);
    ++e.tries;
    e.next_send = now + config_.retry_interval;
  }
  recompute_deadline();
}

void Neighbours::recompute_deadline() noexcept {
  next_deadline_ = neighbour_never;
  for (const auto& [address, e] : entries_) {
    next_deadline_ = std::min(next_deadline_, e.next_send);
    if (e.state == NeighbourState::reachable)
      next_deadline_ = std::min(next_deadline_, e.confirmed + config_.reachable_time);
  }
}

Neighbours::Learned Neighbours::learn(NeighbourTime now, const wire::IpAddress& address,
                                      const wire::MacAddress& mac, bool confirmed, bool create) {
  auto it = entries_.find(address);
  if (it == entries_.end()) {
    if (!create) return Learned::no_entry;
    if (entries_.size() >= config_.max_entries) {
      ++counters_.neighbour_table_full;
      return Learned::table_full;
    }
    it = entries_.emplace(address, NeighbourEntry{}).first;
  }
  NeighbourEntry& e = it->second;
  if (e.state == NeighbourState::permanent) {  // the user's MAC wins
    ++counters_.answers_for_permanent;
    return Learned::permanent;
  }
  const bool moved = e.mac_known && e.mac != mac;
  const bool waiting = e.state == NeighbourState::incomplete || e.state == NeighbourState::failed;
  e.mac = mac;
  e.mac_known = true;
  if (confirmed || waiting) {
    e.state = confirmed ? NeighbourState::reachable : NeighbourState::stale;
    e.confirmed = now;
    e.tries = 0;
    e.next_send = neighbour_never;
  } else if (moved) {
    e.state = NeighbourState::stale;  // news, not a confirmation: asked again when next used
  }
  recompute_deadline();
  return Learned::yes;
}

void Neighbours::receive(NeighbourTime now, wire::ByteSpan frame) {
  wire::NeighbourFrame f;
  const wire::NeighbourParseError error = wire::parse_neighbour_frame(frame, f);
  if (error != wire::NeighbourParseError::ok) {
    ++counters_.rx_errors[static_cast<std::size_t>(error)];
    return;
  }
  if (f.eth.vlan_present != config_.vlan_present ||
      (f.eth.vlan_present && ((f.eth.vlan_tci ^ config_.vlan_tci) & 0x0fff) != 0)) {
    ++counters_.neighbour_vlan_mismatch;
    return;
  }
  if (f.is_arp)
    receive_arp(now, f);
  else
    receive_nd(now, f);
}

void Neighbours::receive_arp(NeighbourTime now, const wire::NeighbourFrame& f) {
  if (!config_.ipv4_present) {
    ++counters_.neighbour_wrong_family;
    return;
  }
  const wire::ArpMessage& m = f.arp;
  if (m.sender_ip == config_.local_ipv4) {
    // Ours: a conflict if another MAC says so (never answered: it would
    // teach the network the conflict).
    ++(m.sender_mac != config_.local_mac ? counters_.arp_address_conflicts : counters_.own_frames);
    return;
  }
  const bool for_us = m.operation == wire::arp_request && m.target_ip == config_.local_ipv4;
  // RFC 826: the sender's entry is refreshed whatever the message; a request
  // for us creates it (the asker is about to talk to us). Probes (RFC 5227)
  // come from 0.0.0.0 and teach nothing.
  const Learned learned = m.sender_ip == 0 ? Learned::no_entry
                                            : learn(now, wire::IpAddress::v4(m.sender_ip), m.sender_mac,
                                                    /*confirmed=*/true, /*create=*/for_us);
  if (learned == Learned::yes) ++counters_.arp_replies_learned;
  if (m.operation == wire::arp_reply) {
    if (learned == Learned::no_entry) ++counters_.arp_replies_unrequested;
    return;
  }
  if (!for_us) {
    ++counters_.arp_requests_not_ours;
    return;
  }
  if (!config_.answer_requests) {
    ++counters_.requests_answered_elsewhere;
    return;
  }
  wire::ArpMessage reply;
  reply.operation = wire::arp_reply;
  reply.sender_mac = config_.local_mac;
  reply.sender_ip = config_.local_ipv4;
  reply.target_mac = m.sender_mac;
  reply.target_ip = m.sender_ip;
  std::vector<std::uint8_t> frame(64);
  frame.resize(wire::build_arp_frame(ethernet_to(m.sender_mac), reply, frame));
  answers_.push_back(std::move(frame));
  ++counters_.arp_requests_answered;
}

void Neighbours::receive_nd(NeighbourTime now, const wire::NeighbourFrame& f) {
  if (!config_.ipv6_present) {
    ++counters_.neighbour_wrong_family;
    return;
  }
  const wire::NdMessage& m = f.nd;
  if (m.type == wire::icmpv6_neighbour_advertisement) {
    if (m.target == config_.local_ipv6) {
      const wire::MacAddress& claimed = m.link_address_present ? m.link_address : f.eth.src;
      ++(claimed != config_.local_mac ? counters_.nd_address_conflicts : counters_.own_frames);
      return;
    }
    // Without the target's link-layer address an advertisement only
    // confirms a MAC we know; for an address we are still asking about it
    // says nothing (RFC 4861 7.2.5). One without the override flag does not
    // replace a MAC we know.
    const NeighbourEntry* e = find(wire::IpAddress::v6(m.target));
    if (e == nullptr || (!m.link_address_present && !e->mac_known)) {
      ++counters_.nd_advertisements_unrequested;
      return;
    }
    const wire::MacAddress mac = m.link_address_present ? m.link_address : e->mac;
    if (e->mac_known && mac != e->mac && !m.override_entry && e->state != NeighbourState::incomplete &&
        e->state != NeighbourState::permanent) {
      ++counters_.nd_advertisements_not_overriding;
      return;
    }
    if (learn(now, wire::IpAddress::v6(m.target), mac, m.solicited, /*create=*/false) == Learned::yes)
      ++counters_.nd_advertisements_learned;
    return;
  }
  // A solicitation.
  const bool dad = wire::is_unspecified(f.ip_src);
  if (!dad && m.link_address_present && f.ip_src != config_.local_ipv6 &&
      learn(now, wire::IpAddress::v6(f.ip_src), m.link_address, /*confirmed=*/false,
            /*create=*/m.target == config_.local_ipv6) == Learned::yes)
    ++counters_.nd_advertisements_learned;
  if (m.target != config_.local_ipv6) {
    ++counters_.nd_solicitations_not_ours;
    return;
  }
  if (!config_.answer_requests) {
    ++counters_.requests_answered_elsewhere;
    return;
  }
  // The answer goes to the asker (its source link-layer address, else the
  // frame's source), or to all nodes when it checks for a duplicate (from ::).
  wire::NdMessage na;
  na.type = wire::icmpv6_neighbour_advertisement;
  na.solicited = !dad;
  na.override_entry = true;
  na.target = config_.local_ipv6;
  na.link_address_present = true;
  na.link_address = config_.local_mac;
  const wire::Ipv6Address dst = dad ? wire::all_nodes_address : f.ip_src;
  const wire::MacAddress dst_mac =
      dad ? wire::ipv6_multicast_mac(wire::all_nodes_address) : (m.link_address_present ? m.link_address : f.eth.src);
  std::vector<std::uint8_t> frame(128);
  frame.resize(wire::build_nd_frame(ethernet_to(dst_mac), config_.local_ipv6, dst, na, frame));
  answers_.push_back(std::move(frame));
  ++counters_.nd_solicitations_answered;
}

}  // namespace metaroce::host
