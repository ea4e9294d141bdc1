// Ready-made switched topologies for congestion-control studies, built on
// sim::Network from endpoints the caller supplies: an N-to-1 incast star and
// two switches joined by an ECMP trunk. Hosts get numbered addresses
// (numbered_host_address), so the caller's endpoints know where to send.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fabric/config.hpp"
#include "sim/network.hpp"
#include "sim/switch_port.hpp"

namespace metaroce::sim {

// The address helpers give to endpoint `id`: with k = id + 1, MAC
// 02:00:00:00:kk:kk, IPv4 10.0.k/256.k%256, IPv6 fd00::k (k in the last two
// bytes). Endpoints 0 and 1 get 10.0.0.1 and 10.0.0.2, as wire test samples use.
[[nodiscard]] HostAddress numbered_host_address(EndpointId id) noexcept;

struct IncastStarConfig {
  HostConfig sender_host{};          // NIC of every sender (its address is replaced)
  HostConfig receiver_host{};        // NIC of the receiver (its address is replaced)
  fabric::FabricConfig uplink{};     // every host -> switch wire (delay, loss, ...)
  LinkConfig to_senders{};           // switch ports toward the senders (ACKs, CNPs)
  LinkConfig to_receiver{};          // the bottleneck port
  SwitchConfig switch_config{};
};

struct IncastStar {
  SwitchId sw = 0;
  std::vector<EndpointId> senders;
  EndpointId receiver = 0;
  PortId bottleneck = 0;             // port of `sw` toward the receiver
  std::vector<PortId> sender_ports;  // port of `sw` toward each sender
};

// N senders and one receiver on one switch. Endpoints are added in the order
// senders..., receiver; uplinks seeded `uplink.seed + id` so their losses differ.
IncastStar incast_star(Network& net, std::span<Endpoint* const> senders, Endpoint& receiver,
                       const IncastStarConfig& config);

struct TwoTierConfig {
  HostConfig host{};               // NIC of every host (its address is replaced)
  fabric::FabricConfig uplink{};   // every host -> switch wire
  LinkConfig to_hosts{};           // switch ports toward the hosts
  LinkConfig trunk{};              // every link of the trunk, both ways
  SwitchConfig switch_config{};
};

struct TwoTier {
  SwitchId left = 0;
  SwitchId right = 1;
  Trunk trunk{};
  std::vector<EndpointId> left_hosts, right_hosts;
  std::vector<PortId> left_ports, right_ports;  // switch port toward each host
};

// Hosts on two switches joined by an ECMP trunk of `trunk_links` links.
// Endpoints are added left hosts first, then right hosts.
TwoTier two_tier(Network& net, std::span<Endpoint* const> left, std::span<Endpoint* const> right,
                 std::uint32_t trunk_links, const TwoTierConfig& config);

// Two hosts with one port per plane, plane k a fabric of its own between
// their ports k (a fabric::Impairment each way, its ECMP paths by UDP
// source port): the parallel fabrics of a multiplane network. Each side's
// ports are endpoints (host::MultiportSimEndpoint::port), added in plane
// order, a's first, with the addresses given.
struct MultiplaneConfig {
  HostConfig nic{};                          // rate and overhead of every port (address replaced)
  std::vector<fabric::FabricConfig> planes;  // plane k's fabric, both ways (seeded per plane and direction)
};

struct Multiplane {
  std::vector<EndpointId> a_ports, b_ports;
};

Multiplane multiplane(Network& net, std::span<Endpoint* const> a_ports, std::span<const HostAddress> a_addresses,
                      std::span<Endpoint* const> b_ports, std::span<const HostAddress> b_addresses,
                      const MultiplaneConfig& config);

// Plane failure for a period: every path of `plane` (both ways) drops what
// arrives in [start_ns, start_ns + duration_ns). Changes the config that
// multiplane() is then given.
void fail_plane(MultiplaneConfig& config, std::size_t plane, std::uint64_t start_ns, std::uint64_t duration_ns);

}  // namespace metaroce::sim
