// Data-centre fabrics on sim::Fabric: a two-tier leaf-spine (Clos) with a
// given oversubscription and a three-tier fat-tree of k-port switches.
// Hosts are added first, so host i is node i, with address
// numbered_host_address(i) (sim/topology.hpp); then the switches.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/endpoint.hpp"
#include "sim/fabric_network.hpp"

namespace metaroce::sim {

struct LeafSpineConfig {
  std::uint32_t leaves = 2;
  std::uint32_t spines = 2;
  std::uint32_t hosts_per_leaf = 2;
  // Host-facing capacity of a leaf over its spine-facing capacity. The
  // leaf-spine links run at hosts_per_leaf * host rate / (spines * it),
  // unless `spine_link.rate_bps` is nonzero.
  double oversubscription = 1.0;
  FabricLinkConfig host_link{};   // both directions of every host link
  FabricLinkConfig spine_link{.rate_bps = 0};  // both directions of every leaf-spine link (rate: see above)
  FabricSwitchConfig switch_config{};
  std::uint64_t seed = 1;          // loss and RED draws (each port its own stream)
};

struct LeafSpine {
  std::vector<FabricNodeId> hosts;       // host i is on leaf i / hosts_per_leaf
  std::vector<FabricNodeId> leaves, spines;
  std::vector<FabricLinkId> host_links;  // of host i
  std::vector<std::vector<FabricLinkId>> uplinks;  // [leaf][spine]
};

// Throws std::invalid_argument when a count is 0, the endpoint count is not
// leaves * hosts_per_leaf or the oversubscription is not positive.
LeafSpine leaf_spine(Fabric& net, std::span<Endpoint* const> hosts, const LeafSpineConfig& config);

// The multiplane variant: `planes` parallel leaf-spine fabrics of the same
// shape, each host with one NIC port on every plane (the ports of a
// host::MultiportSimEndpoint). The ports are added first, plane by plane:
// host h's port on plane p is node p * hosts + h, with address
// numbered_host_address(p * hosts + h), so a connection's plane p
// addresses are those of its two hosts' plane-p ports. Each plane is then
// a LeafSpine of its own (its switches after the previous plane's), with
// the ECMP salts and loss streams of its own switches and ports.
struct MultiplaneLeafSpineConfig {
  std::uint32_t planes = 2;
  LeafSpineConfig plane{};  // the shape of every plane
};

struct MultiplaneLeafSpine {
  std::uint32_t hosts = 0;         // per plane
  std::vector<LeafSpine> planes;   // planes[p].hosts[h]: host h's port on plane p

  [[nodiscard]] FabricNodeId port(std::uint32_t plane, std::uint32_t host) const { return planes.at(plane).hosts.at(host); }
};

// `ports` plane by plane: ports[p * hosts + h] is host h's port on plane p
// (hosts = leaves * hosts_per_leaf). Groups each host's ports
// (Fabric::group_ports). Throws std::invalid_argument when the fabric is
// not empty, planes is 0 or the port count is not planes * hosts.
MultiplaneLeafSpine multiplane_leaf_spine(Fabric& net, std::span<Endpoint* const> ports,
                                          const MultiplaneLeafSpineConfig& config);

// A whole plane fails at `at_ns` (and is repaired): every link of it, host
// links and leaf-spine links (PlaneFailure::links), or every switch of it
// (PlaneFailure::switches; a failed switch takes its links down, so on the
// wire the two are the same, the switch form also failing links added to
// the plane's switches by hand). Routes converge `reroute_after_ns` later.
// The hosts are not told: their ports' links simply stop delivering, as
// a failure past the first switch is for a NIC.
enum class PlaneFailure : std::uint8_t { links, switches };
void fail_fabric_plane(Fabric& net, const LeafSpine& plane, std::uint64_t at_ns, std::uint64_t reroute_after_ns = 0,
                       PlaneFailure what = PlaneFailure::switches);
void repair_fabric_plane(Fabric& net, const LeafSpine& plane, std::uint64_t at_ns, std::uint64_t reroute_after_ns = 0,
                         PlaneFailure what = PlaneFailure::switches);

struct FatTreeConfig {
  std::uint32_t k = 4;              // ports per switch, even: k^3/4 hosts, 5k^2/4 switches
  FabricLinkConfig host_link{};     // both directions of every host link
  FabricLinkConfig fabric_link{};   // both directions of every switch-to-switch link
  FabricSwitchConfig switch_config{};
  std::uint64_t seed = 1;
};

struct FatTree {
  std::uint32_t k = 0;
  std::vector<FabricNodeId> hosts;   // host i: pod i / (k^2/4), edge (i / (k/2)) % (k/2)
  std::vector<FabricNodeId> edges;   // pod p's edge switches: [p*k/2, (p+1)*k/2)
  std::vector<FabricNodeId> aggregations;  // same layout
  std::vector<FabricNodeId> cores;   // (k/2)^2; aggregation j of each pod joins cores [j*k/2, (j+1)*k/2)
  std::vector<FabricLinkId> host_links;
  std::vector<FabricLinkId> edge_links;  // edge-aggregation, pod by pod, edge by edge
  std::vector<FabricLinkId> core_links;  // aggregation-core, pod by pod, aggregation by aggregation

  [[nodiscard]] std::uint32_t pod_of(std::size_t host) const noexcept {
    return static_cast<std::uint32_t>(host / (std::size_t{k} * k / 4));
  }
};

// Throws std::invalid_argument when k is odd or below 2, or the endpoint
// count is not k^3/4.
FatTree fat_tree(Fabric& net, std::span<Endpoint* const> hosts, const FatTreeConfig& config);

}  // namespace metaroce::sim
