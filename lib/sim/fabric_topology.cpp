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

LeafSpine leaf_spine(Fabric& net, std::span<Endpoint* const> hosts, const LeafSpineConfig& config) {
  if (config.leaves == 0 || config.spines == 0 || config.hosts_per_leaf == 0)
    throw std::invalid_argument("sim::leaf_spine: leaves, spines and hosts per leaf must be at least 1");
  if (hosts.size() != std::size_t{config.leaves} * config.hosts_per_leaf)
    throw std::invalid_argument("sim::leaf_spine: " + std::to_string(hosts.size()) + " endpoints for " +
                                std::to_string(config.leaves) + " leaves of " +
                                std::to_string(config.hosts_per_leaf) + " hosts");
  if (!(config.oversubscription > 0.0))
    throw std::invalid_argument("sim::leaf_spine: the oversubscription must be above 0");
  FabricLinkConfig spine_link = config.spine_link;
  if (spine_link.rate_bps == 0)
    spine_link.rate_bps = static_cast<std::uint64_t>(
        std::llround(static_cast<double>(config.host_link.rate_bps) * config.hosts_per_leaf /
                     (config.spines * config.oversubscription)));
  LeafSpine t;
  add_hosts(net, hosts, t.hosts);
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
  return t;
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
