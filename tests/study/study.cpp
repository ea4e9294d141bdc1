#include "study.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "cc/fair_share.hpp"
#include "cc/registry.hpp"
#include "host/sim_endpoint.hpp"
#include "sim/topology.hpp"
#include "transport/connection.hpp"

namespace metaroce::study {

namespace {

transport::ConnectionConfig connection(const Variant& v, const StudySpec& spec, std::uint32_t local,
                                       std::uint32_t peer, std::uint32_t local_qpn, std::uint32_t peer_qpn,
                                       std::uint16_t base_port) {
  const sim::HostAddress me = sim::numbered_host_address(local), them = sim::numbered_host_address(peer);
  transport::ConnectionConfig c;
  c.mode = v.mode == "rocev2" ? transport::Mode::rocev2 : transport::Mode::metaroce;
  c.paths = c.mode == transport::Mode::metaroce ? spec.metaroce_paths : 1;
  c.mtu = spec.mtu;
  c.endpoints.local_mac = me.mac;
  c.endpoints.peer_mac = them.mac;
  c.endpoints.local_ipv4 = me.ipv4;
  c.endpoints.peer_ipv4 = them.ipv4;
  c.local_qpn = local_qpn;
  c.peer_qpn = peer_qpn;
  c.base_src_port = base_port;
  c.initial_rto = 500'000;
  return c;
}

// One queue pair between two hosts, used both ways: `first` is the host the
// first transfer between them leaves from, `at_first` its end.
struct Pair {
  std::uint32_t first = 0;
  transport::Connection* at_first = nullptr;
  transport::Connection* at_second = nullptr;
  [[nodiscard]] transport::Connection* sender(std::uint32_t src) const { return src == first ? at_first : at_second; }
};

}  // namespace

sim::FlowSizeCdf flow_sizes(const std::string& name) {
  if (name.find('/') != std::string::npos || name.find('.') != std::string::npos) return sim::FlowSizeCdf::load(name);
  if (name != "web-search" && name != "data-mining")
    throw std::invalid_argument("study: no flow-size distribution named '" + name +
                                "': use web-search, data-mining or the path of a CDF file");
  return sim::FlowSizeCdf::load(std::string(METAROCE_FLOW_SIZES_DIR) + "/" + name + ".cdf");
}

namespace {

// Links between two hosts: 2 under one leaf (edge switch), 4 across the
// spines (within a fat-tree pod), 6 through a fat-tree's core.
std::uint64_t hops_between(const StudySpec& spec, std::uint32_t a, std::uint32_t b) {
  if (spec.topology == Topology::leaf_spine) {
    const std::uint32_t per_leaf = spec.leaf_spine.hosts_per_leaf;
    return a / per_leaf == b / per_leaf ? 2 : 4;
  }
  const std::uint32_t k = spec.fat_tree.k;
  const std::uint32_t per_edge = k / 2, per_pod = k * k / 4;
  if (a / per_edge == b / per_edge) return 2;
  return a / per_pod == b / per_pod ? 4 : 6;
}

constexpr std::uint64_t background_tag = std::uint64_t{1} << 63;  // in a background flow's wr_id

}  // namespace

double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0.0;
}

StudyResult run(const StudySpec& spec, const Variant& variant) {
  const auto wall_start = std::chrono::steady_clock::now();
  if (variant.mode != "metaroce" && variant.mode != "rocev2")
    throw std::invalid_argument("study: mode '" + variant.mode + "': use metaroce or rocev2");
  // The fabric's links.
  sim::FabricLinkConfig link;
  link.rate_bps = spec.host_rate_bps;
  link.delay_ns = spec.link_delay_ns;
  link.buffer_bytes = spec.buffer_bytes;
  link.ecn = fabric::EcnMarking{true, spec.ecn_threshold_bytes, spec.ecn_threshold_bytes, 1.0};
  sim::FabricSwitchConfig sw;
  sw.pfc.enabled = variant.pfc;
  sw.pfc.xoff_bytes = spec.pfc_xoff_bytes;
  sw.pfc.xon_bytes = spec.pfc_xon_bytes;
  sw.pfc.lossless_priorities = 1u << 3;  // DSCP 26 (the transport's) -> priority 3

  std::uint32_t host_count = 0;
  if (spec.topology == Topology::leaf_spine) {
    host_count = spec.leaf_spine.leaves * spec.leaf_spine.hosts_per_leaf;
  } else {
    host_count = spec.fat_tree.k * spec.fat_tree.k * spec.fat_tree.k / 4;
  }
  std::vector<std::unique_ptr<host::SimEndpoint>> hosts;
  std::vector<sim::Endpoint*> endpoints;
  host::HostConfig host_config;
  host_config.tx_budget_frames = spec.host_tx_budget_frames;
  for (std::uint32_t i = 0; i < host_count; ++i) {
    hosts.push_back(std::make_unique<host::SimEndpoint>(host_config));
    endpoints.push_back(hosts.back().get());
  }
  sim::Fabric net;
  net.set_nic_ring(spec.nic_ring_frames);
  std::vector<sim::FabricLinkId> host_links;
  if (spec.topology == Topology::leaf_spine) {
    sim::LeafSpineConfig c = spec.leaf_spine;
    c.host_link = link;
    c.spine_link = link;
    c.spine_link.rate_bps = spec.leaf_spine.spine_link.rate_bps;  // 0: from the oversubscription
    c.switch_config = sw;
    c.seed = spec.seed;
    const sim::LeafSpine t = sim::leaf_spine(net, endpoints, c);
    host_links = t.host_links;
    for (const LinkFailure& f : spec.failures) {
      const sim::FabricLinkId link = t.uplinks.at(f.leaf).at(f.spine);
      net.fail_link(link, f.at_ns, f.reroute_after_ns);
      if (f.repair_at_ns != 0) net.repair_link(link, f.repair_at_ns, f.reroute_after_ns);
    }
  } else {
    sim::FatTreeConfig c = spec.fat_tree;
    c.host_link = link;
    c.fabric_link = link;
    c.switch_config = sw;
    c.seed = spec.seed;
    host_links = sim::fat_tree(net, endpoints, c).host_links;
  }
  if (variant.loss > 0.0) {
    for (std::uint32_t i = 0; i < host_count; ++i) net.set_loss(host_links[i], i, variant.loss);
  }

  // One buffer each side for every transfer: WRITEs of all peers land on
  // the same bytes (the bytes placed are counted, not compared).
  const sim::CollectiveJob job = spec.job ? spec.job(host_count) : sim::CollectiveJob{};
  sim::JobTracker tracker(job, host_count);
  std::vector<sim::BackgroundFlow> background;
  if (spec.background.load > 0) {
    std::vector<std::uint32_t> all(host_count);
    for (std::uint32_t i = 0; i < host_count; ++i) all[i] = i;
    background = sim::background_flows(all, spec.background.sizes, spec.background.load, spec.host_rate_bps,
                                       spec.background.duration_ns, spec.seed);
  }
  std::vector<std::uint64_t> background_end(background.size(), 0);
  std::uint64_t largest = 1;
  for (const auto& step : job.steps) {
    for (const sim::Transfer& t : step) largest = std::max(largest, t.bytes);
  }
  for (const sim::BackgroundFlow& f : background) largest = std::max(largest, f.bytes);
  std::vector<std::uint8_t> src(largest, 0x5a), dst(largest);
  std::vector<std::uint32_t> lkeys(host_count), rkeys(host_count);
  for (std::uint32_t i = 0; i < host_count; ++i) {
    lkeys[i] = hosts[i]->memory().register_region(src.data(), src.size(), transport::access_local_write);
    rkeys[i] = hosts[i]->memory().register_region(dst.data(), dst.size(),
                                                  transport::access_local_write | transport::access_remote_write);
  }

  cc::CcConfig cc_config;
  cc_config.metaroce.paths = spec.metaroce_paths;
  cc_config.dcqcn.line_rate_bps = spec.host_rate_bps;
  std::vector<std::unique_ptr<cc::FairShare>> shares;
  if (variant.mode == "metaroce" && variant.receive_share) {
    // As the engine: one receive share per host, its metaroce connections
    // hinted by it (Host::set_receive_share).
    for (std::uint32_t i = 0; i < host_count; ++i) {
      shares.push_back(std::make_unique<cc::FairShare>(
          cc::FairShareParams{static_cast<std::uint64_t>(static_cast<double>(spec.host_rate_bps) * 0.97)}));
      hosts[i]->host().set_receive_share(shares.back().get());
    }
  }
  std::unordered_map<std::uint64_t, Pair> pairs;
  std::vector<std::uint32_t> next_qpn(host_count, 0x100);
  StudyResult result;
  result.variant = variant;
  result.hosts = host_count;
  auto pair_of = [&](std::uint32_t s, std::uint32_t d) -> Pair& {
    const std::uint64_t key = std::uint64_t{std::min(s, d)} * host_count + std::max(s, d);
    auto [it, fresh] = pairs.try_emplace(key);
    if (fresh) {
      it->second.first = s;
      std::string error;
      const std::uint32_t sq = next_qpn[s]++, dq = next_qpn[d]++;
      const auto port = static_cast<std::uint16_t>(49152 + (pairs.size() * 64) % 16000);
      auto scc = cc::make(variant.cc, cc_config, error);
      if (!scc) throw std::invalid_argument("study: " + error);
      it->second.at_first = &hosts[s]->add(connection(variant, spec, s, d, sq, dq, port), std::move(scc));
      it->second.at_second = &hosts[d]->add(connection(variant, spec, d, s, dq, sq, static_cast<std::uint16_t>(port + 32)),
                                            cc::make(variant.cc, cc_config, error));
      it->second.at_first->connect();
      it->second.at_second->connect();
      result.connections += 2;
    }
    return it->second;
  };
  for (const auto& step : job.steps) {
    for (const sim::Transfer& t : step) pair_of(t.src, t.dst);
  }

  // One WRITE of `bytes` from host `from` to host `to` (every one lands on
  // the same buffer), tagged `wr_id`.
  auto write = [&](std::uint64_t wr_id, std::uint32_t from, std::uint32_t to, std::uint64_t bytes) {
    transport::SendRequest r;
    r.wr_id = wr_id;
    r.op = transport::SendOp::write;
    r.local_addr = src.data();
    r.length = bytes;
    r.lkey = lkeys[from];
    r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
    r.rkey = rkeys[to];
    if (pair_of(from, to).sender(from)->post_send(r) != transport::PostResult::ok)
      throw std::runtime_error("study: a connection refused a WRITE of " + std::to_string(bytes) + " bytes");
    net.wake(from);
  };
  auto post = [&](std::size_t id) {
    const sim::Transfer& t = tracker.transfer(id);
    write(id, t.src, t.dst, t.bytes);
    tracker.start(id, net.now());
  };
  auto post_background = [&](std::size_t i) {
    const sim::BackgroundFlow& f = background[i];
    write(background_tag | i, f.src, f.dst, f.bytes);
  };
  std::size_t background_posted = 0, background_done = 0;
  // The flows due by now (their start times are virtual: posted when the
  // run reaches them).
  auto post_due = [&] {
    while (background_posted < background.size() && background[background_posted].start_ns <= net.now())
      post_background(background_posted++);
  };
  std::vector<std::size_t> ready;
  tracker.initial(ready);
  for (std::size_t id : ready) post(id);
  std::vector<transport::Completion> scratch;
  std::vector<std::size_t> released;
  std::uint64_t failed_completions = 0;
  net.on_poll([&](sim::FabricNodeId h) {
    hosts[h]->host().poll_completions(scratch, [&](transport::Connection&, std::vector<transport::Completion>& done) {
      for (const transport::Completion& c : done) {
        if (c.kind != transport::CompletionKind::write) continue;
        if (c.status != transport::CompletionStatus::success) {
          ++failed_completions;
          continue;
        }
        if ((c.wr_id & background_tag) != 0) {
          background_end[c.wr_id & ~background_tag] = net.now();
          ++background_done;
          continue;
        }
        released.clear();
        tracker.finish(c.wr_id, net.now(), released);
        for (std::size_t id : released) post(id);
      }
    });
  });
  result.setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  std::uint64_t checks = 0;
  bool out_of_time = false;
  auto last_report = std::chrono::steady_clock::now();
  const auto done = [&] {
    if (tracker.done() && background_done == background.size()) return true;
    if ((++checks & 0xffff) != 0 || (spec.wall_limit_s <= 0 && !spec.progress)) return false;
    const auto now = std::chrono::steady_clock::now();
    if (spec.progress && now - last_report > std::chrono::seconds(10)) {
      last_report = now;
      std::fprintf(stderr, "study %s: %.1f s, virtual %.3f ms, transfers %zu/%zu, background %zu/%zu, events %llu\n",
                   spec.name.c_str(), std::chrono::duration<double>(now - wall_start).count(),
                   static_cast<double>(net.now()) / 1e6, tracker.finished(), tracker.transfer_count(),
                   background_done, background.size(), static_cast<unsigned long long>(net.counters().events));
    }
    out_of_time = spec.wall_limit_s > 0 && std::chrono::duration<double>(now - wall_start).count() > spec.wall_limit_s;
    return out_of_time;
  };
  // Up to each background flow's start time, which posts it; then on to
  // the limit (without a background, one run to the limit).
  post_due();
  for (;;) {
    const std::uint64_t until = background_posted < background.size()
                                    ? std::min(background[background_posted].start_ns, spec.time_limit_ns)
                                    : spec.time_limit_ns;
    result.completed = net.run_until(done, until);
    if (result.completed || until >= spec.time_limit_ns) break;
    post_due();
  }
  if (out_of_time) result.completed = false;
  if (failed_completions != 0) result.completed = false;
  result.failed_completions = failed_completions;

  // Metrics.
  result.completion_ns = net.now();
  result.step_end_ns = tracker.step_end();
  result.job_bytes = job.total_bytes();
  result.transfers = tracker.transfer_count();
  result.transfers_done = tracker.finished();
  const std::uint64_t hops = spec.topology == Topology::leaf_spine ? 4 : 6;
  const double base_rtt = 2.0 * static_cast<double>(hops * spec.link_delay_ns);
  std::vector<double> slowdowns;
  for (std::size_t id = 0; id < tracker.transfer_count(); ++id) {
    if (tracker.end_time(id) == 0) continue;
    const double ideal = static_cast<double>(tracker.transfer(id).bytes) * 8e9 / static_cast<double>(spec.host_rate_bps) + base_rtt;
    slowdowns.push_back(static_cast<double>(tracker.end_time(id) - tracker.start_time(id)) / ideal);
  }
  result.p50_fct_slowdown = sim::percentile(slowdowns, 50);
  result.p99_fct_slowdown = sim::percentile(slowdowns, 99);
  // The background flows, overall and by size.
  result.background_flows = background.size();
  result.background_done = background_done;
  const std::array<std::uint64_t, 5> bounds = {10'000, 100'000, 1'000'000, 10'000'000, 0};
  std::vector<std::vector<double>> by_bin(bounds.size());
  std::vector<double> all_background;
  result.background_bins.resize(bounds.size());
  for (std::size_t b = 0; b < bounds.size(); ++b) result.background_bins[b].max_bytes = bounds[b];
  for (std::size_t i = 0; i < background.size(); ++i) {
    const sim::BackgroundFlow& f = background[i];
    result.background_bytes += f.bytes;
    std::size_t b = 0;
    while (bounds[b] != 0 && f.bytes > bounds[b]) ++b;
    ++result.background_bins[b].flows;
    if (background_end[i] == 0) continue;
    ++result.background_bins[b].done;
    const double rtt = 2.0 * static_cast<double>(hops_between(spec, f.src, f.dst) * spec.link_delay_ns);
    const double ideal = static_cast<double>(f.bytes) * 8e9 / static_cast<double>(spec.host_rate_bps) + rtt;
    const double slowdown = static_cast<double>(background_end[i] - f.start_ns) / ideal;
    by_bin[b].push_back(slowdown);
    all_background.push_back(slowdown);
  }
  for (std::size_t b = 0; b < bounds.size(); ++b) {
    result.background_bins[b].p50_slowdown = sim::percentile(by_bin[b], 50);
    result.background_bins[b].p99_slowdown = sim::percentile(by_bin[b], 99);
  }
  result.background_p50_slowdown = sim::percentile(all_background, 50);
  result.background_p99_slowdown = sim::percentile(all_background, 99);
  for (const auto& [key, pair] : pairs) {  // sums: the map's order does not matter
    for (const transport::Connection* end : {pair.at_first, pair.at_second}) {
      result.bytes_placed += end->counters().data_bytes_placed;
      result.retransmitted_packets += end->counters().retransmitted_packets;
      result.rto_timeouts += end->counters().rto_timeouts;
      if (end->state() != transport::ConnectionState::ready) ++result.connections_in_error;
      result.connection_bytes += end->memory_bytes();
    }
  }
  if (result.completion_ns != 0)
    result.goodput_gbps = static_cast<double>(result.bytes_placed) * 8 / static_cast<double>(result.completion_ns);
  result.ports = net.total_port_counters();
  result.fabric = net.counters();
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

namespace {

// The 128-host leaf-spine of allreduce-128 and background-128: 8 leaves of
// 16 hosts, 8 spines, 1:1 (short: 4 leaves of 4 hosts, 2 spines).
StudySpec on_leaf_spine_128(const std::string& name, bool short_form) {
  StudySpec s;
  s.name = name;
  s.topology = Topology::leaf_spine;
  s.leaf_spine.leaves = short_form ? 4 : 8;
  s.leaf_spine.spines = short_form ? 2 : 8;
  s.leaf_spine.hosts_per_leaf = short_form ? 4 : 16;
  s.leaf_spine.oversubscription = 1.0;
  s.time_limit_ns = 2'000'000'000;
  return s;
}

}  // namespace

StudySpec allreduce_128(bool short_form) {
  StudySpec s = on_leaf_spine_128(short_form ? "allreduce-16" : "allreduce-128", short_form);
  const std::uint64_t bytes = short_form ? (1u << 20) : (8u << 20);
  const std::uint32_t leaves = s.leaf_spine.leaves;
  s.job = [bytes, leaves](std::uint32_t hosts) {
    // Ranks striped over the leaves: consecutive ranks are on different
    // leaves, so every transfer of every step crosses the spines.
    const std::uint32_t per_leaf = hosts / leaves;
    std::vector<std::uint32_t> ranks(hosts);
    for (std::uint32_t r = 0; r < hosts; ++r) ranks[r] = (r % leaves) * per_leaf + r / leaves;
    return sim::ring_allreduce(ranks, bytes);
  };
  return s;
}

StudySpec alltoall_1024(bool short_form, std::uint32_t k_override, std::uint64_t bytes_override) {
  StudySpec s;
  s.topology = Topology::fat_tree;
  s.fat_tree.k = k_override != 0 ? k_override : short_form ? 4 : 16;
  const std::uint32_t k = s.fat_tree.k;
  s.name = "alltoall-" + std::to_string(k * k * k / 4);
  const std::uint64_t bytes = bytes_override != 0 ? bytes_override : short_form ? (64u << 10) : (1u << 20);
  s.job = [k, bytes](std::uint32_t hosts) {
    // k groups of k^2/4 hosts, spread across the pods: host h is in group
    // h mod k, so a group has k/4 members in every pod (k = 4: one) and most
    // of its traffic crosses the core.
    const std::uint32_t groups = k;
    std::vector<std::vector<std::uint32_t>> members(groups);
    for (std::uint32_t h = 0; h < hosts; ++h) members[h % groups].push_back(h);
    return sim::all_to_all(members, bytes);
  };
  s.time_limit_ns = 2'000'000'000;
  return s;
}

StudySpec link_failure(bool short_form) {
  StudySpec s = allreduce_128(short_form);
  s.name = short_form ? "link-failure-16" : "link-failure";
  // Mid-job (the lossless ring takes 0.5 ms short, 4-6 ms full); routes
  // converge 200 us (short) or 1 ms later.
  s.failures.push_back(LinkFailure{0, 0, short_form ? 100'000u : 1'000'000u, short_form ? 200'000u : 1'000'000u, 0});
  return s;
}

StudySpec background_128(bool short_form) {
  StudySpec s = on_leaf_spine_128(short_form ? "background-16" : "background-128", short_form);
  s.background.load = 0.5;
  s.background.sizes_name = "web-search";
  s.background.sizes = flow_sizes(s.background.sizes_name);
  s.background.duration_ns = short_form ? 1'000'000 : 5'000'000;
  return s;
}

std::vector<Variant> background_variants() {
  return {Variant{"metaroce", "metaroce", false, 0.0, true}, Variant{"rocev2", "dcqcn", true, 0.0, false},
          Variant{"rocev2", "dcqcn", false, 0.0, false}};
}

std::vector<Variant> link_failure_variants() {
  return {Variant{"metaroce", "metaroce", false, 0.0, true}, Variant{"metaroce", "metaroce", false, 0.0, false},
          Variant{"rocev2", "dcqcn", true, 0.0, false}, Variant{"rocev2", "dcqcn", false, 0.0, false}};
}

std::vector<Variant> allreduce_variants() {
  std::vector<Variant> v;
  for (const double loss : {0.0, 0.01}) {
    v.push_back(Variant{"metaroce", "metaroce", false, loss, true});
    v.push_back(Variant{"metaroce", "metaroce", false, loss, false});
    v.push_back(Variant{"rocev2", "dcqcn", true, loss, false});
    v.push_back(Variant{"rocev2", "dcqcn", false, loss, false});
  }
  return v;
}

std::vector<Variant> alltoall_variants() {
  return {Variant{"metaroce", "metaroce", false, 0.0, true}, Variant{"rocev2", "dcqcn", true, 0.0, false}};
}

}  // namespace metaroce::study
