// Congestion control in virtual time:
//  1. 16-to-1 incast of long flows into one 100 Gb/s switch port, 10 us base
//     RTT: metaroce (ECN-AIMD + receiver fair share) and DCQCN (rocev2):
//     time until every flow is within 10% of its fair share, aggregate
//     goodput, Jain fairness in steady state, bottleneck queue peak/average;
//  2. a flow joining and leaving mid-run (metaroce);
//  3. one of 8 ECMP trunk links at half rate: per-link shares of one
//     metaroce connection against fixed windows;
//  4. 1% random loss without congestion: goodput against lossless.
// Deterministic. Last line: JSON.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cc/fair_share.hpp"
#include "cc/registry.hpp"
#include "common/json_line.hpp"
#include "sim/network.hpp"
#include "sim/topology.hpp"
#include "host/sim_endpoint.hpp"
#include "transport/connection.hpp"

namespace {

using namespace metaroce;
using transport::Time;

constexpr std::uint64_t link_bps = 100'000'000'000;
constexpr Time hop_ns = 2'500;  // host -> switch and switch -> host: 10 us base RTT
constexpr Time base_rtt = 4 * hop_ns;
constexpr std::uint32_t mtu = 4096;
constexpr std::uint64_t message_bytes = 64 * 1024;
constexpr std::size_t outstanding_messages = 64;
constexpr std::uint64_t region_bytes = 4ull << 20;

// One long flow: a sender host with one connection, writing into its slice
// of the receiver's region for as long as it is switched on.
struct Flow {
  host::SimEndpoint* host = nullptr;
  transport::Connection* sender = nullptr;
  transport::Connection* receiver = nullptr;
  transport::CongestionControl* cc = nullptr;
  std::uint32_t src_key = 0;
  std::uint64_t dst_base = 0;
  std::uint32_t dst_key = 0;
  std::uint64_t posted = 0;
  std::size_t outstanding = 0;
  bool on = true;
};

transport::ConnectionConfig connection(transport::Mode mode, std::uint16_t paths, const sim::HostAddress& local,
                                       const sim::HostAddress& peer, std::uint32_t local_qpn, std::uint32_t peer_qpn,
                                       std::uint16_t base_port) {
  transport::ConnectionConfig c;
  c.mode = mode;
  c.paths = mode == transport::Mode::metaroce ? paths : 1;
  c.mtu = mtu;
  c.endpoints.local_mac = local.mac;
  c.endpoints.peer_mac = peer.mac;
  c.endpoints.local_ipv4 = local.ipv4;
  c.endpoints.peer_ipv4 = peer.ipv4;
  c.local_qpn = local_qpn;
  c.peer_qpn = peer_qpn;
  c.base_src_port = base_port;
  c.initial_rto = 500'000;
  return c;
}

void keep_busy(Flow& f, std::vector<std::uint8_t>& src) {
  std::vector<transport::Completion> cq;
  f.sender->poll_completions(cq);
  f.outstanding -= cq.size();
  while (f.on && f.outstanding < outstanding_messages) {
    transport::SendRequest r;
    r.wr_id = f.posted;
    r.op = transport::SendOp::write;
    r.local_addr = src.data();
    r.length = message_bytes;
    r.lkey = f.src_key;
    r.remote_addr = f.dst_base + (f.posted % (region_bytes / message_bytes)) * message_bytes;
    r.rkey = f.dst_key;
    if (f.sender->post_send(r) != transport::PostResult::ok) break;
    ++f.posted;
    ++f.outstanding;
  }
}

double jain(const std::vector<double>& x) {
  double sum = 0, squares = 0;
  for (double v : x) {
    sum += v;
    squares += v * v;
  }
  return squares == 0 ? 1.0 : sum * sum / (static_cast<double>(x.size()) * squares);
}

struct IncastResult {
  std::string cc;
  double converge_rtts = -1;       // first RTT from which every active flow stays within 10% of fair
  double aggregate_within_rtts = -1;  // first RTT whose aggregate goodput is within 10% of the link
  double goodput_gbps = 0;         // steady state, all flows
  double jain = 0;                 // steady state
  double peak_queue_kb = 0;
  double steady_avg_queue_kb = 0;
  double steady_peak_queue_kb = 0;
  std::uint64_t tail_drops = 0;
  std::uint64_t ecn_marks = 0;
  double rejoin_rtts = -1;         // after a flow joins (join/leave run)
  double releave_rtts = -1;        // after it leaves
};

struct IncastOptions {
  std::string cc = "metaroce";
  std::string csv;  // if set: one row per RTT (time, aggregate, queue, flow rates)
  std::size_t senders = 16;
  Time duration = 2'000'000;
  Time steady_from = 500'000;
  bool join_leave = false;  // the last flow is on only in [join_at, leave_at)
  Time join_at = 1'000'000;
  Time leave_at = 1'500'000;
};

IncastResult run_incast(const IncastOptions& opt) {
  const bool rocev2 = opt.cc == "dcqcn";
  const transport::Mode mode = rocev2 ? transport::Mode::rocev2 : transport::Mode::metaroce;
  std::vector<std::uint8_t> src(message_bytes, 0x5a);
  std::vector<std::uint8_t> dst(region_bytes * opt.senders);

  std::vector<std::unique_ptr<host::SimEndpoint>> hosts;
  for (std::size_t i = 0; i < opt.senders; ++i) hosts.push_back(std::make_unique<host::SimEndpoint>());
  host::SimEndpoint receiver_host;
  // FairShare capacity: the port's frame rate less a little headroom, so the
  // queue drains while the hints hold.
  cc::FairShare share(cc::FairShareParams{static_cast<std::uint64_t>(link_bps * 0.97)});
  const std::uint32_t dst_key = receiver_host.memory().register_region(
      dst.data(), dst.size(), transport::access_local_write | transport::access_remote_write);

  const sim::HostAddress receiver_address = sim::numbered_host_address(opt.senders);
  std::vector<Flow> flows(opt.senders);
  cc::CcConfig cc_config;
  cc_config.metaroce.paths = 4;
  cc_config.dcqcn.line_rate_bps = link_bps;
  for (std::size_t i = 0; i < opt.senders; ++i) {
    Flow& f = flows[i];
    f.host = hosts[i].get();
    const sim::HostAddress me = sim::numbered_host_address(i);
    const auto qpn = static_cast<std::uint32_t>(0x10 + i);
    const auto rqpn = static_cast<std::uint32_t>(0x1000 + i);
    std::string error;
    auto cc = cc::make(opt.cc, cc_config, error);
    f.cc = cc.get();
    f.sender = &f.host->add(connection(mode, 4, me, receiver_address, qpn, rqpn, 49152), std::move(cc));
    f.receiver = &receiver_host.add(connection(mode, 4, receiver_address, me, rqpn, qpn, 50000),
                                    cc::make(opt.cc, cc_config, error));
    if (!rocev2) f.receiver->attach_receive_share(&share);
    f.sender->connect();
    f.receiver->connect();
    f.src_key = f.host->memory().register_region(src.data(), src.size(), transport::access_local_write);
    f.dst_base = reinterpret_cast<std::uintptr_t>(dst.data() + i * region_bytes);
    f.dst_key = dst_key;
    f.on = !(opt.join_leave && i + 1 == opt.senders);
  }

  sim::Network net;
  std::vector<sim::Endpoint*> endpoints;
  for (auto& h : hosts) endpoints.push_back(h.get());
  sim::IncastStarConfig star;
  star.sender_host.nic_rate_bps = link_bps;
  star.sender_host.nic_overhead_bytes = 24;
  star.receiver_host.nic_rate_bps = link_bps;
  star.receiver_host.nic_overhead_bytes = 24;
  star.uplink.delay_ns = hop_ns;
  star.to_senders = sim::LinkConfig{link_bps, 24, 0, {}, hop_ns, 1};
  star.to_receiver = sim::LinkConfig{link_bps, 24, 4'000'000, {true, 100'000, 100'000, 1.0}, hop_ns, 2};
  const sim::IncastStar topo = sim::incast_star(net, endpoints, receiver_host, star);

  IncastResult result;
  result.cc = opt.cc;
  const double frame_share = static_cast<double>(mtu) / (mtu + 24 + 94);  // payload per wire byte, roughly
  std::vector<std::uint64_t> placed_at_sample(opt.senders, 0);
  std::vector<std::uint64_t> placed_at_steady(opt.senders, 0);
  Time next_sample = base_rtt;
  Time last_unconverged = 0;
  Time last_join_unconverged = opt.join_at;
  Time last_leave_unconverged = opt.leave_at;
  bool steady_started = false;
  std::FILE* csv = opt.csv.empty() ? nullptr : std::fopen(opt.csv.c_str(), "w");
  if (csv != nullptr) {
    std::fprintf(csv, "time_us,aggregate_gbps,queue_kb");
    for (std::size_t i = 0; i < opt.senders; ++i) std::fprintf(csv, ",flow%zu_gbps", i);
    std::fprintf(csv, "\n");
  }

  while (net.now() < opt.duration) {
    for (Flow& f : flows) keep_busy(f, src);
    if (!net.step(opt.duration)) break;
    if (opt.join_leave) {
      flows.back().on = net.now() >= opt.join_at && net.now() < opt.leave_at;
    }
    if (!steady_started && net.now() >= opt.steady_from) {
      steady_started = true;
      net.port(topo.sw, topo.bottleneck).start_window(net.now());
      for (std::size_t i = 0; i < opt.senders; ++i) placed_at_steady[i] = flows[i].receiver->counters().data_bytes_placed;
    }
    while (net.now() >= next_sample) {
      // Per RTT: each active flow's sending rate against its fair share,
      // and the aggregate goodput of the RTT against the link.
      std::size_t active = 0;
      for (const Flow& f : flows) active += f.on || f.sender->packets_outstanding() > 0 ? 1 : 0;
      const double fair = static_cast<double>(link_bps) / static_cast<double>(std::max<std::size_t>(active, 1));
      bool within = true;
      std::uint64_t aggregate = 0;
      std::vector<double> rates(opt.senders, 0.0);
      for (std::size_t i = 0; i < opt.senders; ++i) {
        Flow& f = flows[i];
        const std::uint64_t placed = f.receiver->counters().data_bytes_placed;
        aggregate += placed - placed_at_sample[i];
        placed_at_sample[i] = placed;
        if (!(f.on || f.sender->packets_outstanding() > 0)) continue;
        std::uint64_t rate = f.cc->pacing_rate_bps(next_sample);
        if (rate == 0 || rate > link_bps) rate = link_bps;
        rates[i] = static_cast<double>(rate) / 1e9;
        if (std::abs(static_cast<double>(rate) - fair) > 0.1 * fair) within = false;
      }
      if (!within) {
        last_unconverged = next_sample;
        if (next_sample >= opt.join_at && next_sample < opt.leave_at) last_join_unconverged = next_sample;
        if (next_sample >= opt.leave_at) last_leave_unconverged = next_sample;
      }
      const double goodput = static_cast<double>(aggregate) * 8 / static_cast<double>(base_rtt) * 1e9;
      if (result.aggregate_within_rtts < 0 && goodput >= 0.9 * static_cast<double>(link_bps) * frame_share)
        result.aggregate_within_rtts = static_cast<double>(next_sample) / base_rtt;
      if (csv != nullptr) {
        std::fprintf(csv, "%.1f,%.3f,%.1f", static_cast<double>(next_sample) / 1000, goodput / 1e9,
                     static_cast<double>(net.queued_bytes(topo.sw, topo.bottleneck)) / 1000);
        for (double r : rates) std::fprintf(csv, ",%.3f", r);
        std::fprintf(csv, "\n");
      }
      next_sample += base_rtt;
    }
  }

  // NaN (null in the JSON line) when some flow was still off its share at
  // the end of the run.
  if (csv != nullptr) std::fclose(csv);
  const bool ever_converged = last_unconverged + base_rtt < opt.duration;
  result.converge_rtts =
      ever_converged ? static_cast<double>(last_unconverged + base_rtt) / base_rtt : std::nan("");
  if (opt.join_leave) {
    result.rejoin_rtts = static_cast<double>(last_join_unconverged + base_rtt - opt.join_at) / base_rtt;
    result.releave_rtts = static_cast<double>(last_leave_unconverged + base_rtt - opt.leave_at) / base_rtt;
  }
  std::vector<double> steady;
  double total = 0;
  for (std::size_t i = 0; i < opt.senders; ++i) {
    if (opt.join_leave && i + 1 == opt.senders) continue;
    const double bytes = static_cast<double>(flows[i].receiver->counters().data_bytes_placed - placed_at_steady[i]);
    steady.push_back(bytes);
    total += bytes;
  }
  const double seconds = static_cast<double>(opt.duration - opt.steady_from) / 1e9;
  result.goodput_gbps = total * 8 / seconds / 1e9;
  result.jain = jain(steady);
  const sim::SwitchPort& port = net.port(topo.sw, topo.bottleneck);
  result.peak_queue_kb = static_cast<double>(port.counters().peak_queued_bytes) / 1000;
  result.steady_avg_queue_kb = port.average_queued_bytes(net.now()) / 1000;
  result.steady_peak_queue_kb = static_cast<double>(port.window_peak_bytes()) / 1000;
  result.tail_drops = port.counters().dropped_queue_full;
  result.ecn_marks = port.counters().ecn_marked;
  return result;
}

// One metaroce connection over 8 ECMP trunk links of 12.5 Gb/s, one of them
// at half rate: bytes per trunk link.
std::vector<double> ecmp_shares(const std::string& cc_name, std::uint32_t slowed_link, double& goodput_gbps) {
  constexpr std::uint32_t links = 8;
  constexpr std::uint64_t trunk_bps = link_bps / links;
  std::vector<std::uint8_t> src(message_bytes, 1), dst(region_bytes);
  host::SimEndpoint left, right;
  const sim::HostAddress la = sim::numbered_host_address(0), ra = sim::numbered_host_address(1);
  cc::CcConfig cfg;
  cfg.metaroce.paths = 16;
  cfg.fixed_path_window = 8;
  cfg.fixed_connection_window = 128;
  std::string error;
  Flow f;
  f.host = &left;
  auto cc = cc::make(cc_name, cfg, error);
  f.cc = cc.get();
  f.sender = &left.add(connection(transport::Mode::metaroce, 16, la, ra, 0x10, 0x20, 49152), std::move(cc));
  f.receiver = &right.add(connection(transport::Mode::metaroce, 16, ra, la, 0x20, 0x10, 50000), cc::make(cc_name, cfg, error));
  f.sender->connect();
  f.receiver->connect();
  f.src_key = left.memory().register_region(src.data(), src.size(), transport::access_local_write);
  f.dst_key = right.memory().register_region(dst.data(), dst.size(), transport::access_remote_write);
  f.dst_base = reinterpret_cast<std::uintptr_t>(dst.data());

  sim::Network net;
  std::vector<sim::Endpoint*> l = {&left}, r = {&right};
  sim::TwoTierConfig tt;
  tt.host.nic_rate_bps = link_bps;
  tt.host.nic_overhead_bytes = 24;
  tt.uplink.delay_ns = hop_ns;
  tt.to_hosts = sim::LinkConfig{link_bps, 24, 0, {}, hop_ns, 3};
  tt.trunk = sim::LinkConfig{trunk_bps, 24, 2'000'000, {true, 30'000, 30'000, 1.0}, 1'000, 4};
  const sim::TwoTier topo = sim::two_tier(net, l, r, links, tt);
  net.set_port_rate(topo.left, topo.trunk.a_port(slowed_link), trunk_bps / 2, 0);
  const Time end = 3'000'000;
  while (net.now() < end) {
    keep_busy(f, src);
    if (!net.step(end)) break;
  }
  std::vector<double> shares(links);
  double total = 0;
  for (std::uint32_t k = 0; k < links; ++k) {
    shares[k] = static_cast<double>(net.port(topo.left, topo.trunk.a_port(k)).counters().forwarded);
    total += shares[k];
  }
  for (double& s : shares) s /= total;
  goodput_gbps = static_cast<double>(f.receiver->counters().data_bytes_placed) * 8 / static_cast<double>(end);
  return shares;
}

// One flow through the star with random loss on its uplink and no other
// traffic: goodput.
double lossy_goodput(double loss) {
  std::vector<std::uint8_t> src(message_bytes, 2), dst(region_bytes);
  host::SimEndpoint a, b;
  cc::CcConfig cfg;
  cfg.metaroce.paths = 8;
  std::string error;
  Flow f;
  f.host = &a;
  const sim::HostAddress aa = sim::numbered_host_address(0), ba = sim::numbered_host_address(1);
  auto cc = cc::make("metaroce", cfg, error);
  f.cc = cc.get();
  f.sender = &a.add(connection(transport::Mode::metaroce, 8, aa, ba, 0x10, 0x20, 49152), std::move(cc));
  f.receiver = &b.add(connection(transport::Mode::metaroce, 8, ba, aa, 0x20, 0x10, 50000), cc::make("metaroce", cfg, error));
  f.sender->connect();
  f.receiver->connect();
  f.src_key = a.memory().register_region(src.data(), src.size(), transport::access_local_write);
  f.dst_key = b.memory().register_region(dst.data(), dst.size(), transport::access_remote_write);
  f.dst_base = reinterpret_cast<std::uintptr_t>(dst.data());
  sim::Network net;
  std::vector<sim::Endpoint*> senders = {&a};
  sim::IncastStarConfig star;
  star.sender_host.nic_rate_bps = link_bps;
  star.sender_host.nic_overhead_bytes = 24;
  star.receiver_host.nic_rate_bps = link_bps;
  star.receiver_host.nic_overhead_bytes = 24;
  star.uplink.delay_ns = hop_ns;
  star.uplink.loss = loss;
  star.to_senders = sim::LinkConfig{link_bps, 24, 0, {}, hop_ns, 5};
  star.to_receiver = sim::LinkConfig{link_bps, 24, 4'000'000, {true, 100'000, 100'000, 1.0}, hop_ns, 6};
  sim::incast_star(net, senders, b, star);
  const Time end = 3'000'000;
  while (net.now() < end) {
    keep_busy(f, src);
    if (!net.step(end)) break;
  }
  return static_cast<double>(f.receiver->counters().data_bytes_placed) * 8 / static_cast<double>(end);
}

void print_incast(const IncastResult& r) {
  std::printf("%-9s converged after %5.1f RTTs (every flow within 10%% of its share), aggregate within 10%% of the link "
              "after %.1f RTTs\n          steady state: %.2f Gb/s, Jain %.4f; bottleneck queue peak %.0f kB, steady "
              "average %.1f kB (peak %.0f kB); %llu tail drops, %llu ECN marks\n",
              r.cc.c_str(), r.converge_rtts, r.aggregate_within_rtts, r.goodput_gbps, r.jain, r.peak_queue_kb,
              r.steady_avg_queue_kb, r.steady_peak_queue_kb, static_cast<unsigned long long>(r.tail_drops),
              static_cast<unsigned long long>(r.ecn_marks));
}

}  // namespace

int main(int argc, char** argv) {
  // --csv DIR: time series of the two incast runs for tools/plot-incast.
  std::string csv_dir;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--csv") csv_dir = argv[i + 1];
  std::printf("# incast: 16 senders -> one 100 Gb/s switch port (4 MB buffer, ECN step at 100 kB), 10 us base RTT,\n"
              "# 64 KiB WRITEs, 64 posted per flow, MTU 4096; metaroce over 4 paths per connection; dcqcn on rocev2 (virtual time)\n");
  IncastOptions metaroce_opt;
  if (!csv_dir.empty()) metaroce_opt.csv = csv_dir + "/incast-metaroce.csv";
  const IncastResult m = run_incast(metaroce_opt);
  print_incast(m);
  IncastOptions dcqcn_opt;
  dcqcn_opt.cc = "dcqcn";
  dcqcn_opt.duration = 20'000'000;
  dcqcn_opt.steady_from = 10'000'000;
  if (!csv_dir.empty()) dcqcn_opt.csv = csv_dir + "/incast-dcqcn.csv";
  const IncastResult d = run_incast(dcqcn_opt);
  print_incast(d);
  if (std::isnan(d.converge_rtts))
    std::printf("          dcqcn: some flow was still more than 10%% off its share after 20 ms (2,000 RTTs)\n");

  IncastOptions jl;
  jl.join_leave = true;
  const IncastResult j = run_incast(jl);
  std::printf("join/leave: flow 16 joins at 1 ms: the others reach the new share after %.1f RTTs; it leaves at 1.5 ms: "
              "back after %.1f RTTs\n", j.rejoin_rtts, j.releave_rtts);

  double ecmp_metaroce_gbps = 0, ecmp_fixed_gbps = 0;
  const std::vector<double> ecmp_m = ecmp_shares("metaroce", 3, ecmp_metaroce_gbps);
  const std::vector<double> ecmp_f = ecmp_shares("fixed", 3, ecmp_fixed_gbps);
  std::printf("ECMP, 8 x 12.5 Gb/s trunk, link 3 at half rate; share of packets per link:\n  metaroce:");
  for (double s : ecmp_m) std::printf(" %.3f", s);
  std::printf("  (%.1f Gb/s)\n  fixed:   ", ecmp_metaroce_gbps);
  for (double s : ecmp_f) std::printf(" %.3f", s);
  std::printf("  (%.1f Gb/s)\n", ecmp_fixed_gbps);

  const double clean = lossy_goodput(0.0), lossy = lossy_goodput(0.01);
  std::printf("random loss without congestion: %.2f Gb/s lossless, %.2f Gb/s at 1%% loss (%.3f)\n", clean, lossy,
              lossy / clean);

  apps::JsonLine out;
  out.add("bench", "incast");
  out.add("senders", 16);
  out.add("cc", "metaroce");
  out.add("converge_rtts", m.converge_rtts);
  out.add("aggregate_rtts", m.aggregate_within_rtts);
  out.add("goodput_gbps", m.goodput_gbps);
  out.add("jain", m.jain);
  out.add("peak_queue_kb", m.peak_queue_kb);
  out.add("steady_queue_kb", m.steady_avg_queue_kb);
  out.add("dcqcn_converge_rtts", d.converge_rtts);
  out.add("dcqcn_goodput_gbps", d.goodput_gbps);
  out.add("dcqcn_jain", d.jain);
  out.add("dcqcn_peak_queue_kb", d.peak_queue_kb);
  out.add("join_rtts", j.rejoin_rtts);
  out.add("leave_rtts", j.releave_rtts);
  out.add("ecmp_slow_link_share", ecmp_m[3]);
  out.add("ecmp_slow_link_share_fixed", ecmp_f[3]);
  out.add("loss1_goodput_ratio", lossy / clean);
  std::cout << std::move(out).finish() << std::endl;
  return 0;
}
