// sim::Network's switches: building them, their forwarding tables (shortest
// path over trunks, ECMP inside a trunk) and how a frame crosses one.
// The event loop that drives them is in network.cpp.
#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>
#include <utility>

#include "fabric/frame_peek.hpp"
#include "sim/network.hpp"
#include "wire/byte_order.hpp"

namespace metaroce::sim {

namespace {
bool is_zero(std::span<const std::uint8_t> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0; });
}
}  // namespace

void Network::check_switch(SwitchId sw, const char* what) const {
  if (sw >= switches_.size())
    throw std::invalid_argument(std::string("sim::Network::") + what + ": switch " + std::to_string(sw) +
                                " does not exist (" + std::to_string(switches_.size()) + " switches)");
}

SwitchId Network::add_switch(SwitchConfig config) {
  switches_.push_back(Switch{config, {}, {}, {}, {}, {}});
  routes_stale_ = true;
  return switches_.size() - 1;
}

PortId Network::connect_host(EndpointId host, SwitchId sw, fabric::FabricConfig up, LinkConfig down) {
  if (host >= hosts_.size())
    throw std::invalid_argument("sim::Network::connect_host: endpoint " + std::to_string(host) +
                                " does not exist");
  check_switch(sw, "connect_host");
  for (std::size_t index : hosts_[host].links) {
    if (links_[index].to_switch == sw)
      throw std::invalid_argument("sim::Network::connect_host: endpoint " + std::to_string(host) +
                                  " is already connected to switch " + std::to_string(sw));
  }
  if (const std::string error = validate(down); !error.empty())
    throw std::invalid_argument("sim::Network::connect_host: down link: " + error);
  // Built before anything is added: a bad config leaves the network unchanged.
  fabric::Impairment uplink(std::move(up));
  links_.push_back(Link{host, none, std::move(uplink), sw});
  hosts_[host].links.push_back(links_.size() - 1);
  switches_[sw].ports.push_back(OutputPort{SwitchPort(down, ports_made_++), true, host});
  routes_stale_ = true;
  return switches_[sw].ports.size() - 1;
}

Trunk Network::connect_switches(SwitchId a, SwitchId b, std::uint32_t links, LinkConfig each) {
  check_switch(a, "connect_switches");
  check_switch(b, "connect_switches");
  if (a == b) throw std::invalid_argument("sim::Network::connect_switches: a switch cannot be joined to itself");
  if (links == 0 || links > fabric::max_fabric_paths)
    throw std::invalid_argument("sim::Network::connect_switches: " + std::to_string(links) +
                                " links; a trunk has 1.." + std::to_string(fabric::max_fabric_paths));
  if (const std::string error = validate(each); !error.empty())
    throw std::invalid_argument("sim::Network::connect_switches: " + error);
  Trunk trunk{a, b, links, switches_[a].ports.size(), switches_[b].ports.size()};
  for (std::uint32_t k = 0; k < links; ++k)
    switches_[a].ports.push_back(OutputPort{SwitchPort(each, ports_made_++), false, b});
  for (std::uint32_t k = 0; k < links; ++k)
    switches_[b].ports.push_back(OutputPort{SwitchPort(each, ports_made_++), false, a});
  trunks_.push_back(trunk);
  switches_[a].trunks.push_back(trunks_.size() - 1);
  switches_[b].trunks.push_back(trunks_.size() - 1);
  routes_stale_ = true;
  return trunk;
}

void Network::set_port_rate(SwitchId sw, PortId port, std::uint64_t rate_bps, std::uint64_t at_ns) {
  check_switch(sw, "set_port_rate");
  if (port >= switches_[sw].ports.size())
    throw std::invalid_argument("sim::Network::set_port_rate: switch " + std::to_string(sw) + " has no port " +
                                std::to_string(port));
  // Rate 0 would mean "no queue": frames offered after it would overtake the queued ones.
  if (rate_bps == 0) throw std::invalid_argument("sim::Network::set_port_rate: the rate must be above 0");
  rate_changes_.emplace(std::max(at_ns, now_), RateChange{sw, port, rate_bps});
}

std::size_t Network::port_count(SwitchId sw) const {
  check_switch(sw, "port_count");
  return switches_[sw].ports.size();
}

const SwitchPort& Network::port(SwitchId sw, PortId port) const {
  check_switch(sw, "port");
  if (port >= switches_[sw].ports.size())
    throw std::invalid_argument("sim::Network::port: switch " + std::to_string(sw) + " has no port " +
                                std::to_string(port));
  return switches_[sw].ports[port].port;
}

SwitchPort& Network::port(SwitchId sw, PortId port) {
  return const_cast<SwitchPort&>(static_cast<const Network&>(*this).port(sw, port));
}

PortId Network::port_toward(SwitchId sw, EndpointId host) const {
  check_switch(sw, "port_toward");
  const std::vector<OutputPort>& ports = switches_[sw].ports;
  for (PortId p = 0; p < ports.size(); ++p) {
    if (ports[p].to_host && ports[p].peer == host) return p;
  }
  throw std::invalid_argument("sim::Network::port_toward: endpoint " + std::to_string(host) +
                              " is not connected to switch " + std::to_string(sw));
}

std::uint64_t Network::queued_bytes(SwitchId sw, PortId p) const { return port(sw, p).queued_bytes(now_); }

const SwitchCounters& Network::switch_counters(SwitchId sw) const {
  check_switch(sw, "switch_counters");
  return switches_[sw].counters;
}

const fabric::Impairment& Network::uplink(EndpointId host, SwitchId sw) const {
  if (host < hosts_.size()) {
    for (std::size_t index : hosts_[host].links) {
      if (links_[index].to_switch == sw) return links_[index].impairment;
    }
  }
  throw std::invalid_argument("sim::Network::uplink: endpoint " + std::to_string(host) +
                              " is not connected to switch " + std::to_string(sw));
}

EndpointId Network::destination_of(std::span<const std::uint8_t> frame) const {
  if (frame.size() < 6) return none;
  wire::MacAddress mac;
  std::copy_n(frame.begin(), mac.size(), mac.begin());
  if (const auto found = by_mac_.find(mac); found != by_mac_.end()) return found->second;
  const fabric::FramePeek peek = fabric::peek_frame(frame);
  const std::uint8_t* ip = frame.data() + peek.l3_offset;
  if (peek.ip_version == 4) {
    if (const auto found = by_ipv4_.find(wire::load_be32(ip + 16)); found != by_ipv4_.end()) return found->second;
  } else if (peek.ip_version == 6) {
    wire::Ipv6Address address;
    std::copy_n(ip + 24, address.size(), address.begin());
    if (const auto found = by_ipv6_.find(address); found != by_ipv6_.end()) return found->second;
  }
  return none;
}

void Network::rebuild_routes() {
  routes_stale_ = false;
  by_mac_.clear();
  by_ipv4_.clear();
  by_ipv6_.clear();
  for (EndpointId id = 0; id < hosts_.size(); ++id) {  // emplace keeps the lowest id of a duplicate
    const HostAddress& address = hosts_[id].config.address;
    if (!is_zero(address.mac)) by_mac_.emplace(address.mac, id);
    if (address.ipv4 != 0) by_ipv4_.emplace(address.ipv4, id);
    if (!is_zero(address.ipv6)) by_ipv6_.emplace(address.ipv6, id);
  }
  for (Switch& sw : switches_) sw.routes.assign(hosts_.size(), Hop{});
  // Per destination host: breadth-first over trunks from the switches it is
  // attached to; a switch sends toward a neighbour one hop closer, the first
  // such trunk in creation order (fewest switch hops; ties: oldest trunk).
  std::vector<std::size_t> distance(switches_.size());
  std::deque<SwitchId> frontier;
  for (EndpointId host = 0; host < hosts_.size(); ++host) {
    std::fill(distance.begin(), distance.end(), none);
    for (SwitchId sw = 0; sw < switches_.size(); ++sw) {
      const std::vector<OutputPort>& ports = switches_[sw].ports;
      for (PortId p = 0; p < ports.size(); ++p) {
        if (ports[p].to_host && ports[p].peer == host) {
          distance[sw] = 0;
          switches_[sw].routes[host] = Hop{Hop::Kind::port, p};
          frontier.push_back(sw);
          break;
        }
      }
    }
    while (!frontier.empty()) {
      const SwitchId sw = frontier.front();
      frontier.pop_front();
      for (std::size_t index : switches_[sw].trunks) {
        const SwitchId other = trunks_[index].a == sw ? trunks_[index].b : trunks_[index].a;
        if (distance[other] != none) continue;
        distance[other] = distance[sw] + 1;
        frontier.push_back(other);
      }
    }
    for (SwitchId sw = 0; sw < switches_.size(); ++sw) {
      if (distance[sw] == none || distance[sw] == 0) continue;
      for (std::size_t index : switches_[sw].trunks) {
        const SwitchId other = trunks_[index].a == sw ? trunks_[index].b : trunks_[index].a;
        if (distance[other] + 1 == distance[sw]) {
          switches_[sw].routes[host] = Hop{Hop::Kind::trunk, index};
          break;
        }
      }
    }
  }
}

void Network::arrive_at_switch(SwitchId sw, EndpointId origin, std::vector<std::uint8_t> frame) {
  Switch& arrived = switches_[sw];
  ++arrived.counters.received;
  if (arrived.config.forwarding_latency_ns == 0) {
    forward(sw, origin, std::move(frame));
  } else {
    arrived.forwarding.push_back(Forwarding{now_ + arrived.config.forwarding_latency_ns, origin, std::move(frame)});
  }
}

void Network::forward(SwitchId sw, EndpointId origin, std::vector<std::uint8_t> frame) {
  Switch& through = switches_[sw];
  const EndpointId destination = destination_of(frame);
  const Hop hop = destination == none ? Hop{} : through.routes[destination];
  PortId out = hop.index;
  switch (hop.kind) {
    case Hop::Kind::none:
      ++through.counters.unroutable;
      ++counters_.unroutable;
      return;
    case Hop::Kind::port:
      break;
    case Hop::Kind::trunk: {
      const Trunk& trunk = trunks_[hop.index];
      const fabric::FramePeek peek = fabric::peek_frame(frame);
      const std::uint32_t link = peek.roce ? fabric::path_of_port(peek.udp_src_port, trunk.links) : 0;
      out = (trunk.a == sw ? trunk.a_first : trunk.b_first) + link;
      break;
    }
  }
  through.ports[out].port.enqueue(now_, origin, std::move(frame));
}

}  // namespace metaroce::sim
