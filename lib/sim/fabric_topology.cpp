#include "sim/fabric_topology.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "sim/topology.hpp"

namespace metaroce::sim {

namespace {
void add_hosts(Fabric& net, std::span<Endpoint* const> hosts, std::vector<FabricNodeId>& out) {
  if (net.node_count() != 0)
    throw std::invalid_argument("sim: a fabric topology is built on an empty sim::Fabric (hosts are nodes 0..n-1)");
  for (std::size_t i = 0; i < hosts.size(); ++i) out.push_back(net.add_host(*hosts[i], numbered_host_address(i).ipv4));
}
}  // namespace

namespace {
void check_leaf_spine(std::size_t hosts, const LeafSpineConfig& config) {
  if (config.leaves == 0 || config.spines == 0 || config.hosts_per_leaf == 0)
    throw std::invalid_argument("sim::leaf_spine: leaves, spines and hosts per leaf must be at least 1");
  if (hosts != std::size_t{config.leaves} * config.hosts_per_leaf)
    throw std::invalid_argument("sim::leaf_spine: " + std::to_string(hosts) + " endpoints for " +
                                std::to_string(config.leaves) + " leaves of " +
                                std::to_string(config.hosts_per_leaf) + " hosts");
  if (!(config.oversubscription > 0.0))
    throw std::invalid_argument("sim::leaf_spine: the oversubscription must be above 0");
}

// The switches and links of one leaf-spine over hosts already added.
void build_leaf_spine(Fabric& net, LeafSpine& t, const LeafSpineConfig& config) {
  FabricLinkConfig spine_link = config.spine_link;
  if (spine_link.rate_bps == 0)
    spine_link.rate_bps = static_cast<std::uint64_t>(
        std::llround(static_cast<double>(config.host_link.rate_bps) * config.hosts_per_leaf /
                     (config.spines * config.oversubscription)));
  for (std::uint32_t l = 0; l < config.leaves; ++l) t.leaves.push_back(net.add_switch(config.switch_config));
  for (std::uint32_t s = 0; s < config.spines; ++s) t.spines.push_back(net.add_switch(config.switch_config));
  for (std::size_t i = 0; i < t.hosts.size(); ++i)
    t.host_links.push_back(
        net.connect(t.hosts[i], t.leaves[i / config.hosts_per_leaf], config.host_link, config.host_link, config.seed));
  t.uplinks.resize(config.leaves);
  for (std::uint32_t l = 0; l < config.leaves; ++l) {
    for (std::uint32_t s = 0; s < config.spines; ++s)
      t.uplinks[l].push_back(net.connect(t.leaves[l], t.spines[s], spine_link, spine_link, config.seed));
  }
}

template <class L, class S>
void for_plane(const LeafSpine& plane, PlaneFailure what, const L& f_link, const S& f_switch) {
  if (what == PlaneFailure::switches) {
    for (FabricNodeId sw : plane.leaves) f_switch(sw);
    for (FabricNodeId sw : plane.spines) f_switch(sw);
    return;
  }
  for (FabricLinkId link : plane.host_links) f_link(link);
  for (const std::vector<FabricLinkId>& row : plane.uplinks) {
    for (FabricLinkId link : row) f_link(link);
  }
}
}  // namespace

LeafSpine leaf_spine(Fabric& net, std::span<Endpoint* const> hosts, const LeafSpineConfig& config) {
  check_leaf_spine(hosts.size(), config);
  LeafSpine t;
  add_hosts(net, hosts, t.hosts);
  build_leaf_spine(net, t, config);
  return t;
}

MultiplaneLeafSpine multiplane_leaf_spine(Fabric& net, std::span<Endpoint* const> ports,
                                          const MultiplaneLeafSpineConfig& config) {
  if (config.planes == 0) throw std::invalid_argument("sim::multiplane_leaf_spine: at least one plane");
  const std::size_t hosts = std::size_t{config.plane.leaves} * config.plane.hosts_per_leaf;
  if (ports.size() != hosts * config.planes)
    throw std::invalid_argument("sim::multiplane_leaf_spine: " + std::to_string(ports.size()) + " ports for " +
                                std::to_string(config.planes) + " planes of " + std::to_string(hosts) + " hosts");
  check_leaf_spine(hosts, config.plane);
  MultiplaneLeafSpine m;
  m.hosts = static_cast<std::uint32_t>(hosts);
  std::vector<FabricNodeId> all;
  add_hosts(net, ports, all);
  m.planes.resize(config.planes);
  for (std::uint32_t p = 0; p < config.planes; ++p) {
    LeafSpine& t = m.planes[p];
    t.hosts.assign(all.begin() + static_cast<std::ptrdiff_t>(p * hosts),
                   all.begin() + static_cast<std::ptrdiff_t>((p + 1) * hosts));
    build_leaf_spine(net, t, config.plane);
  }
  std::vector<FabricNodeId> group(config.planes);
  for (std::size_t h = 0; h < hosts; ++h) {
    for (std::uint32_t p = 0; p < config.planes; ++p) group[p] = m.planes[p].hosts[h];
    net.group_ports(group);
  }
  return m;
}

void fail_fabric_plane(Fabric& net, const LeafSpine& plane, std::uint64_t at_ns, std::uint64_t reroute_after_ns,
                       PlaneFailure what) {
  for_plane(
      plane, what, [&](FabricLinkId link) { net.fail_link(link, at_ns, reroute_after_ns); },
      [&](FabricNodeId sw) { net.fail_switch(sw, at_ns, reroute_after_ns); });
}

void repair_fabric_plane(Fabric& net, const LeafSpine& plane, std::uint64_t at_ns, std::uint64_t reroute_after_ns,
                         PlaneFailure what) {
  for_plane(
      plane, what, [&](FabricLinkId link) { net.repair_link(link, at_ns, reroute_after_ns); },
      [&](FabricNodeId sw) { net.repair_switch(sw, at_ns, reroute_after_ns); });
}

FatTree fat_tree(Fabric& net, std::span<Endpoint* const> hosts, const FatTreeConfig& config) {
  const std::uint32_t k = config.k;
  if (k < 2 || k % 2 != 0) throw std::invalid_argument("sim::fat_tree: k must be even and at least 2");
  const std::uint32_t half = k / 2;
  if (hosts.size() != std::size_t{k} * k * k / 4)
    throw std::invalid_argument("sim::fat_tree: k=" + std::to_string(k) + " has " + std::to_string(k * k * k / 4) +
                                " hosts, not " + std::to_string(hosts.size()));
  FatTree t;
  t.k = k;
  add_hosts(net, hosts, t.hosts);
  for (std::uint32_t i = 0; i < k * half; ++i) t.edges.push_back(net.add_switch(config.switch_config));
  for (std::uint32_t i = 0; i < k * half; ++i) t.aggregations.push_back(net.add_switch(config.switch_config));
  for (std::uint32_t i = 0; i < half * half; ++i) t.cores.push_back(net.add_switch(config.switch_config));
  for (std::size_t i = 0; i < t.hosts.size(); ++i)
    t.host_links.push_back(net.connect(t.hosts[i], t.edges[i / half], config.host_link, config.host_link, config.seed));
  for (std::uint32_t pod = 0; pod < k; ++pod) {
    for (std::uint32_t e = 0; e < half; ++e) {
      for (std::uint32_t a = 0; a < half; ++a)
        t.edge_links.push_back(net.connect(t.edges[pod * half + e], t.aggregations[pod * half + a],
                                           config.fabric_link, config.fabric_link, config.seed));
    }
  }
  for (std::uint32_t pod = 0; pod < k; ++pod) {
    for (std::uint32_t a = 0; a < half; ++a) {
      for (std::uint32_t c = 0; c < half; ++c)
        t.core_links.push_back(net.connect(t.aggregations[pod * half + a], t.cores[a * half + c],
                                           config.fabric_link, config.fabric_link, config.seed));
    }
  }
  return t;
}

}  // namespace metaroce::sim
