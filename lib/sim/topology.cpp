#include "sim/topology.hpp"

#include <stdexcept>

namespace metaroce::sim {

HostAddress numbered_host_address(EndpointId id) noexcept {
  const auto k = static_cast<std::uint32_t>(id + 1);
  const auto high = static_cast<std::uint8_t>(k >> 8);
  const auto low = static_cast<std::uint8_t>(k);
  HostAddress address;
  address.mac = {0x02, 0, 0, 0, high, low};
  address.ipv4 = 0x0a000000u | (k & 0xffffu);
  address.ipv6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, high, low};
  return address;
}

namespace {
EndpointId add_numbered(Network& net, Endpoint& endpoint, HostConfig config) {
  config.address = numbered_host_address(net.endpoint_count());
  return net.add(endpoint, config);
}

PortId connect_seeded(Network& net, EndpointId host, SwitchId sw, fabric::FabricConfig up, const LinkConfig& down) {
  up.seed += host;
  return net.connect_host(host, sw, std::move(up), down);
}
}  // namespace

IncastStar incast_star(Network& net, std::span<Endpoint* const> senders, Endpoint& receiver,
                       const IncastStarConfig& config) {
  IncastStar star;
  star.sw = net.add_switch(config.switch_config);
  for (Endpoint* sender : senders) star.senders.push_back(add_numbered(net, *sender, config.sender_host));
  star.receiver = add_numbered(net, receiver, config.receiver_host);
  for (EndpointId id : star.senders)
    star.sender_ports.push_back(connect_seeded(net, id, star.sw, config.uplink, config.to_senders));
  star.bottleneck = connect_seeded(net, star.receiver, star.sw, config.uplink, config.to_receiver);
  return star;
}

TwoTier two_tier(Network& net, std::span<Endpoint* const> left, std::span<Endpoint* const> right,
                 std::uint32_t trunk_links, const TwoTierConfig& config) {
  TwoTier topology;
  topology.left = net.add_switch(config.switch_config);
  topology.right = net.add_switch(config.switch_config);
  for (Endpoint* host : left) topology.left_hosts.push_back(add_numbered(net, *host, config.host));
  for (Endpoint* host : right) topology.right_hosts.push_back(add_numbered(net, *host, config.host));
  for (EndpointId id : topology.left_hosts)
    topology.left_ports.push_back(connect_seeded(net, id, topology.left, config.uplink, config.to_hosts));
  for (EndpointId id : topology.right_hosts)
    topology.right_ports.push_back(connect_seeded(net, id, topology.right, config.uplink, config.to_hosts));
  topology.trunk = net.connect_switches(topology.left, topology.right, trunk_links, config.trunk);
  return topology;
}

Multiplane multiplane(Network& net, std::span<Endpoint* const> a_ports, std::span<const HostAddress> a_addresses,
                      std::span<Endpoint* const> b_ports, std::span<const HostAddress> b_addresses,
                      const MultiplaneConfig& config) {
  const std::size_t n = config.planes.size();
  if (n == 0 || a_ports.size() != n || b_ports.size() != n || a_addresses.size() != n || b_addresses.size() != n)
    throw std::invalid_argument("multiplane: one port and one address per plane on each side, and at least one plane");
  Multiplane m;
  for (std::size_t k = 0; k < n; ++k) {
    HostConfig c = config.nic;
    c.address = a_addresses[k];
    m.a_ports.push_back(net.add(*a_ports[k], c));
  }
  for (std::size_t k = 0; k < n; ++k) {
    HostConfig c = config.nic;
    c.address = b_addresses[k];
    m.b_ports.push_back(net.add(*b_ports[k], c));
  }
  for (std::size_t k = 0; k < n; ++k) {
    fabric::FabricConfig forward = config.planes[k], backward = config.planes[k];
    forward.seed += 2 * k;
    backward.seed += 2 * k + 1;
    net.connect(m.a_ports[k], m.b_ports[k], std::move(forward), std::move(backward));
  }
  return m;
}

void fail_plane(MultiplaneConfig& config, std::size_t plane, std::uint64_t start_ns, std::uint64_t duration_ns) {
  fabric::FabricConfig& f = config.planes.at(plane);
  for (std::uint32_t p = 0; p < f.paths; ++p) f.blackholes.push_back(fabric::Blackhole{p, start_ns, duration_ns});
}

}  // namespace metaroce::sim
