#include "sim/network.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>
#include <utility>

#include "fabric/frame_peek.hpp"
#include "wire/byte_order.hpp"

namespace metaroce::sim {

namespace {
constexpr std::uint64_t never = ~std::uint64_t{0};

bool is_zero(std::span<const std::uint8_t> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0; });
}

// Does `frame` address `peer`? By destination MAC, else destination IP.
bool addressed_to(std::span<const std::uint8_t> frame, const HostAddress& peer) {
  if (frame.size() < 6) return false;
  if (!is_zero(peer.mac) && std::equal(peer.mac.begin(), peer.mac.end(), frame.begin())) return true;
  const fabric::FramePeek peek = fabric::peek_frame(frame);
  const std::uint8_t* ip = frame.data() + peek.l3_offset;
  if (peek.ip_version == 4) return peer.ipv4 != 0 && wire::load_be32(ip + 16) == peer.ipv4;
  if (peek.ip_version == 6) return !is_zero(peer.ipv6) && std::equal(peer.ipv6.begin(), peer.ipv6.end(), ip + 24);
  return false;
}
}  // namespace

EndpointId Network::add(Endpoint& endpoint, HostConfig config) {
  Host host{&endpoint, config, nullptr, {}, false};
  if (config.nic_rate_bps != 0) {
    fabric::FabricConfig nic;
    nic.rate_bps = config.nic_rate_bps;
    nic.overhead_bytes = config.nic_overhead_bytes;
    host.nic = std::make_unique<fabric::Impairment>(nic);
  }
  hosts_.push_back(std::move(host));
  routes_stale_ = true;
  return hosts_.size() - 1;
}

void Network::connect(EndpointId a, EndpointId b, fabric::FabricConfig a_to_b, fabric::FabricConfig b_to_a) {
  if (a >= hosts_.size() || b >= hosts_.size() || a == b)
    throw std::invalid_argument("sim::Network::connect: endpoints " + std::to_string(a) + " and " +
                                std::to_string(b) + " must be two distinct ids returned by add()");
  for (std::size_t index : hosts_[a].links) {
    if (links_[index].to == b)
      throw std::invalid_argument("sim::Network::connect: endpoints " + std::to_string(a) + " and " +
                                  std::to_string(b) + " are already connected");
  }
  // Both directions are built before either is added: a bad config leaves the network unchanged.
  fabric::Impairment forward(std::move(a_to_b));
  fabric::Impairment backward(std::move(b_to_a));
  links_.push_back(Link{a, b, std::move(forward)});
  hosts_[a].links.push_back(links_.size() - 1);
  links_.push_back(Link{b, a, std::move(backward)});
  hosts_[b].links.push_back(links_.size() - 1);
}

std::size_t Network::link_index(EndpointId from, EndpointId to) const {
  if (from < hosts_.size()) {
    for (std::size_t index : hosts_[from].links) {
      if (links_[index].to == to) return index;
    }
  }
  throw std::invalid_argument("sim::Network: no link from endpoint " + std::to_string(from) + " to " +
                              std::to_string(to));
}

const fabric::Impairment& Network::fabric(EndpointId from, EndpointId to) const {
  return links_[link_index(from, to)].impairment;
}

fabric::Impairment& Network::fabric(EndpointId from, EndpointId to) {
  return links_[link_index(from, to)].impairment;
}

void Network::route(EndpointId from, std::vector<std::uint8_t> frame) {
  const Host& host = hosts_[from];
  if (host.links.size() == 1) {
    links_[host.links.front()].impairment.submit(now_, std::move(frame));
    return;
  }
  bool has_uplink = false;
  for (std::size_t index : host.links) {
    if (links_[index].to_switch != none) {
      has_uplink = true;
    } else if (addressed_to(frame, hosts_[links_[index].to].config.address)) {
      links_[index].impairment.submit(now_, std::move(frame));
      return;
    }
  }
  // No direct peer: the first switch that knows the destination.
  if (has_uplink) {
    if (routes_stale_) rebuild_routes();
    const EndpointId destination = destination_of(frame);
    for (std::size_t index : host.links) {
      const SwitchId sw = links_[index].to_switch;
      if (sw != none && destination != none && switches_[sw].routes[destination].kind != Hop::Kind::none) {
        links_[index].impairment.submit(now_, std::move(frame));
        return;
      }
    }
  }
  ++counters_.unroutable;
}

void Network::transmit(EndpointId from, std::vector<std::uint8_t> frame) {
  ++counters_.sent;
  if (hosts_[from].nic) {
    hosts_[from].nic->submit(now_, std::move(frame));
  } else {
    route(from, std::move(frame));
  }
}

std::uint64_t Network::next_event_time() const {
  std::uint64_t next = never;
  for (const Host& host : hosts_) {
    next = std::min(next, host.endpoint->next_wakeup());
    if (host.nic) next = std::min(next, host.nic->next_release_time());
  }
  for (const Link& link : links_) next = std::min(next, link.impairment.next_release_time());
  for (const Switch& sw : switches_) {
    if (!sw.forwarding.empty()) next = std::min(next, sw.forwarding.front().ready_ns);
    for (const OutputPort& out : sw.ports) next = std::min(next, out.port.next_release_time());
  }
  if (!rate_changes_.empty()) next = std::min(next, rate_changes_.begin()->first);
  return next;
}

bool Network::step(std::uint64_t limit) {
  const std::uint64_t next = next_event_time();
  if (next == never || next > limit) return false;
  const std::uint64_t t = std::max(next, now_);
  if (t == now_ && counters_.steps != 0) {
    if (++steps_at_now_ > max_steps_per_instant)
      throw std::runtime_error("sim::Network: more than " + std::to_string(max_steps_per_instant) +
                               " steps at t=" + std::to_string(t) +
                               " ns: an endpoint keeps asking to be woken now, or frames loop over "
                               "zero-delay links; give the links a delay");
  } else {
    steps_at_now_ = 0;
  }
  now_ = t;
  ++counters_.steps;
  if (routes_stale_) rebuild_routes();

  // 0. Port rate changes due now, before any frame reaches a port at this instant.
  while (!rate_changes_.empty() && rate_changes_.begin()->first <= t) {
    const RateChange& change = rate_changes_.begin()->second;
    switches_[change.sw].ports[change.port].port.set_rate(t, change.rate_bps);
    rate_changes_.erase(rate_changes_.begin());
  }
  // 1. Frames whose last bit left a NIC enter the link toward their peer.
  for (EndpointId id = 0; id < hosts_.size(); ++id) {
    if (!hosts_[id].nic) continue;
    released_.clear();
    hosts_[id].nic->release(t, released_);
    for (fabric::ReleasedFrame& frame : released_) route(id, std::move(frame.bytes));
  }
  // 2. Arrivals, link by link in creation order, each link in its own order;
  //    host -> switch uplinks hand their frames to the switch.
  for (Link& link : links_) {
    released_.clear();
    if (link.impairment.release(t, released_) == 0) continue;
    for (fabric::ReleasedFrame& frame : released_) {
      if (link.to_switch != none) {
        arrive_at_switch(link.to_switch, link.from, std::move(frame.bytes));
      } else {
        deliver(link.from, link.to, frame.bytes);
      }
    }
  }
  // 3. Frames whose forwarding latency has passed reach their output ports.
  for (SwitchId sw = 0; sw < switches_.size(); ++sw) {
    std::deque<Forwarding>& inside = switches_[sw].forwarding;
    while (!inside.empty() && inside.front().ready_ns <= t) {
      Forwarding frame = std::move(inside.front());
      inside.pop_front();
      forward(sw, frame.origin, std::move(frame.bytes));
    }
  }
  // 4. Frames at the far end of switch output ports, switch by switch, port
  //    by port: delivered to a host, or arriving at the next switch.
  for (Switch& sw : switches_) {
    for (OutputPort& out : sw.ports) {
      while (out.port.pop_due(t, popped_)) {
        if (out.to_host) {
          deliver(popped_.origin, out.peer, popped_.bytes);
        } else {
          arrive_at_switch(out.peer, popped_.origin, std::move(popped_.bytes));
        }
      }
    }
  }
  // 5. Polls, in id order, of every endpoint that received or whose wake-up is due.
  for (EndpointId id = 0; id < hosts_.size(); ++id) {
    Host& host = hosts_[id];
    if (!host.poll_due && host.endpoint->next_wakeup() > t) continue;
    host.poll_due = false;
    polled_.clear();
    host.endpoint->poll(t, polled_);
    for (std::vector<std::uint8_t>& frame : polled_) transmit(id, std::move(frame));
  }
  return true;
}

void Network::deliver(EndpointId from, EndpointId to, std::span<const std::uint8_t> frame) {
  ++counters_.delivered;
  if (observer_) observer_(Delivery{now_, from, to, frame});
  hosts_[to].endpoint->on_frame(now_, frame);
  hosts_[to].poll_due = true;
}

void Network::run_until(std::uint64_t t) {
  while (step(t)) {
  }
  now_ = std::max(now_, t);
}

bool Network::run_until(const std::function<bool()>& done, std::uint64_t limit) {
  if (done()) return true;
  while (step(limit)) {
    if (done()) return true;
  }
  now_ = std::max(now_, limit);
  return done();
}

}  // namespace metaroce::sim
