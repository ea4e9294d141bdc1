// Goodput over 1, 2, 4 and 8 planes in virtual time (100 Gb/s per plane,
// 10 us base RTT, 8 fabric paths and 8 connection paths per plane, several
// connections), as a ratio to one plane; then one plane of four fails
// for a while and the bench measures, in RTTs from the failure, how long
// goodput takes to be back within 5% of 3/4 of what it was. Deterministic:
// same binary, same figures. Last line: JSON.
//   metaroce-bench-planes [--connections N] [--measure-ms N]
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/json_line.hpp"
#include "host/sim_endpoint.hpp"
#include "sim/network.hpp"
#include "sim/topology.hpp"
#include "transport/connection.hpp"

namespace {

using namespace metaroce;

constexpr std::uint64_t plane_bps = 100'000'000'000;
constexpr std::uint64_t one_way_ns = 5'000;  // 10 us base RTT
constexpr std::uint64_t rtt_ns = 2 * one_way_ns;
constexpr std::uint32_t paths_per_plane = 8;
constexpr std::uint32_t mtu = 4096;
constexpr std::uint32_t path_window = 16;  // packets
constexpr std::uint64_t message_bytes = 64 * 1024;

struct Options {
  std::uint32_t connections = 8;
  std::uint64_t warmup_ns = 1'000'000;
  std::uint64_t measure_ns = 5'000'000;
};

sim::HostAddress address(std::uint8_t side, std::uint16_t plane) {
  sim::HostAddress a;
  a.mac = {2, 0, 0, 0, static_cast<std::uint8_t>(plane), side};
  a.ipv4 = 0x0a000000u | (std::uint32_t{plane} << 8) | side;
  return a;
}

struct Run {
  double goodput_gbps = 0;         // over the measured window (first bins, the failover run: before the failure)
  std::vector<std::uint64_t> bins;  // bytes placed per RTT from the start of measurement
  std::uint64_t planes_failed = 0, planes_recovered = 0, moved = 0, errors = 0;
};

// `fail_at`: plane 1 blackholed from then for `fail_for` (0: no failure).
Run run(std::uint16_t planes, const Options& opt, std::uint64_t fail_at, std::uint64_t fail_for) {
  const std::uint32_t c_count = opt.connections;
  const std::uint64_t ring = 64 * message_bytes;
  std::vector<std::uint8_t> src(ring, 0x5a), dst(ring * c_count, 0);
  host::MultiportSimEndpoint a(planes), b(planes);
  const std::uint32_t src_key = a.memory().register_region(src.data(), src.size(), transport::access_local_write);
  const std::uint32_t dst_key = b.memory().register_region(dst.data(), dst.size(),
                                                          transport::access_local_write | transport::access_remote_write);
  std::vector<transport::Connection*> senders, receivers;
  // ~3x the bandwidth-delay product of all planes, shared by the connections.
  const std::uint32_t window = std::max<std::uint32_t>(8, 96u * planes / c_count);
  for (std::uint32_t i = 0; i < c_count; ++i) {
    transport::ConnectionConfig ca;
    ca.paths = static_cast<std::uint16_t>(paths_per_plane * planes);
    ca.planes = planes;
    ca.mtu = mtu;
    const sim::HostAddress a0 = address(1, 0), b0 = address(2, 0);
    ca.endpoints.local_mac = a0.mac;
    ca.endpoints.peer_mac = b0.mac;
    ca.endpoints.local_ipv4 = a0.ipv4;
    ca.endpoints.peer_ipv4 = b0.ipv4;
    for (std::uint16_t k = 0; k < planes; ++k) {
      ca.plane[k].port = k;
      ca.plane[k].local_mac = address(1, k).mac;
      ca.plane[k].peer_mac = address(2, k).mac;
      ca.plane[k].local_ipv4 = address(1, k).ipv4;
      ca.plane[k].peer_ipv4 = address(2, k).ipv4;
    }
    ca.local_qpn = 0x100 + i;
    ca.peer_qpn = 0x200 + i;
    ca.initial_psn = 1000 * i;
    ca.peer_initial_psn = 2000 * i;
    ca.base_src_port = static_cast<std::uint16_t>(49152 + 64 * i);
    transport::ConnectionConfig cb = ca;
    std::swap(cb.endpoints.local_mac, cb.endpoints.peer_mac);
    std::swap(cb.endpoints.local_ipv4, cb.endpoints.peer_ipv4);
    for (auto& p : cb.plane) {
      std::swap(p.local_mac, p.peer_mac);
      std::swap(p.local_ipv4, p.peer_ipv4);
    }
    std::swap(cb.local_qpn, cb.peer_qpn);
    std::swap(cb.initial_psn, cb.peer_initial_psn);
    cb.base_src_port = static_cast<std::uint16_t>(33000 + 64 * i);
    senders.push_back(&a.add(ca, std::make_unique<transport::FixedWindow>(path_window, window)));
    receivers.push_back(&b.add(cb, std::make_unique<transport::FixedWindow>(path_window, window)));
    senders.back()->connect();
    receivers.back()->connect();
  }

  sim::Network net;
  sim::MultiplaneConfig mc;
  mc.nic = sim::HostConfig{{}, plane_bps, 24};
  for (std::uint16_t k = 0; k < planes; ++k) {
    fabric::FabricConfig f;
    f.delay_ns = one_way_ns;
    f.paths = paths_per_plane;
    f.seed = 11;
    mc.planes.push_back(f);
  }
  if (fail_for != 0) sim::fail_plane(mc, 1, fail_at, fail_for);
  std::vector<sim::Endpoint*> ap, bp;
  std::vector<sim::HostAddress> aa, ba;
  for (std::uint16_t k = 0; k < planes; ++k) {
    ap.push_back(&a.port(k));
    bp.push_back(&b.port(k));
    aa.push_back(address(1, k));
    ba.push_back(address(2, k));
  }
  sim::multiplane(net, ap, aa, bp, ba, mc);

  Run r;
  std::vector<std::uint64_t> posted(c_count, 0);
  std::vector<std::size_t> outstanding(c_count, 0);
  std::vector<transport::Completion> cq;
  const std::uint64_t end = opt.warmup_ns + opt.measure_ns;
  const auto placed = [&] {
    std::uint64_t n = 0;
    for (const auto* c : receivers) n += c->counters().data_bytes_placed;
    return n;
  };
  std::uint64_t last = 0;
  for (std::uint64_t t = rtt_ns; t <= end; t += rtt_ns) {
    for (std::uint32_t i = 0; i < c_count; ++i) {
      cq.clear();
      senders[i]->poll_completions(cq);
      for (const auto& c : cq) {
        --outstanding[i];
        if (c.status != transport::CompletionStatus::success) ++r.errors;
      }
      while (outstanding[i] < 16) {
        const std::uint64_t slot = posted[i] % 64;
        transport::SendRequest q;
        q.wr_id = posted[i]++;
        q.local_addr = src.data() + slot * message_bytes;
        q.length = message_bytes;
        q.lkey = src_key;
        q.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + ring * i + slot * message_bytes);
        q.rkey = dst_key;
        if (senders[i]->post_send(q) != transport::PostResult::ok) break;
        ++outstanding[i];
      }
    }
    net.run_until(t);
    const std::uint64_t now_placed = placed();
    if (t > opt.warmup_ns) r.bins.push_back(now_placed - last);
    last = now_placed;
  }
  std::uint64_t measured = 0;
  const std::size_t before = fail_for != 0 ? (fail_at - opt.warmup_ns) / rtt_ns : r.bins.size();
  for (std::size_t i = 0; i < before && i < r.bins.size(); ++i) measured += r.bins[i];
  r.goodput_gbps = static_cast<double>(measured) * 8.0 / static_cast<double>(before * rtt_ns);
  for (const auto* c : senders) {
    r.planes_failed += c->counters().planes_failed;
    r.planes_recovered += c->counters().planes_recovered;
    r.moved += c->counters().packets_moved_to_other_planes;
    if (c->state() != transport::ConnectionState::ready) ++r.errors;
  }
  return r;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::uint64_t value = std::stoull(argv[i + 1]);
    if (flag == "--connections" && value >= 1 && value <= 64) {
      opt.connections = static_cast<std::uint32_t>(value);
    } else if (flag == "--measure-ms" && value >= 1) {
      opt.measure_ns = value * 1'000'000;
    } else {
      std::fprintf(stderr, "usage: %s [--connections 1..64] [--measure-ms N>=1]\n", argv[0]);
      return 2;
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "usage: %s [--connections 1..64] [--measure-ms N>=1]\n", argv[0]);
    return 2;
  }
  std::printf("# planes: %llu Gb/s per plane, %llu us base RTT, %u paths per plane, MTU %u, %u connections,\n"
              "# %llu KiB WRITEs, %llu ms measured after %llu ms warm-up (virtual time); CPU %s\n",
              static_cast<unsigned long long>(plane_bps / 1'000'000'000), static_cast<unsigned long long>(rtt_ns / 1000),
              paths_per_plane, mtu, opt.connections, static_cast<unsigned long long>(message_bytes / 1024),
              static_cast<unsigned long long>(opt.measure_ns / 1'000'000),
              static_cast<unsigned long long>(opt.warmup_ns / 1'000'000), cpu_model().c_str());
  std::printf("%6s %12s %10s\n", "planes", "goodput_Gbps", "x_1_plane");
  std::string rows = "[";
  double one = 0;
  bool linear = true;
  for (const std::uint16_t planes : {1, 2, 4, 8}) {
    const Run r = run(planes, opt, 0, 0);
    if (planes == 1) one = r.goodput_gbps;
    const double ratio = one > 0 ? r.goodput_gbps / one : 0;
    linear = linear && ratio >= 0.9 * planes && r.errors == 0;
    std::printf("%6u %12.2f %10.2f\n", planes, r.goodput_gbps, ratio);
    std::fflush(stdout);
    apps::JsonLine j;
    j.add("planes", planes);
    j.add("goodput_gbps", r.goodput_gbps);
    j.add("ratio", ratio);
    if (rows.size() > 1) rows += ',';
    rows += std::move(j).finish();
  }
  rows += "]";

  // Failover: 4 planes, plane 1 blackholed (both ways) 1 ms into the
  // measurement for 2 ms, then healed.
  const std::uint16_t planes = 4;
  const std::uint64_t fail_at = opt.warmup_ns + 1'000'000, fail_for = 2'000'000;
  Options fo = opt;
  fo.measure_ns = std::max<std::uint64_t>(opt.measure_ns, 12'000'000);  // room for the probes to find the healed plane
  const Run f = run(planes, fo, fail_at, fail_for);
  const double before_bytes_per_rtt = f.goodput_gbps * static_cast<double>(rtt_ns) / 8.0;
  const double target = 0.95 * before_bytes_per_rtt * (planes - 1) / planes;
  const std::size_t first = (fail_at - fo.warmup_ns) / rtt_ns;
  const std::size_t healed = (fail_at + fail_for - fo.warmup_ns) / rtt_ns;
  // The first RTT from which a 5-RTT average stays at the target until the plane heals.
  std::int64_t back = -1;
  for (std::size_t i = first; i + 5 <= healed; ++i) {
    bool ok = true;
    for (std::size_t s = i; s + 5 <= healed && ok; ++s) {
      std::uint64_t sum = 0;
      for (std::size_t w = s; w < s + 5; ++w) sum += f.bins[w];
      ok = static_cast<double>(sum) / 5.0 >= target;
    }
    if (ok) {
      back = static_cast<std::int64_t>(i - first);
      break;
    }
  }
  std::uint64_t outage = 0;
  const std::size_t settle = first + (back < 0 ? 0 : static_cast<std::size_t>(back));
  for (std::size_t i = settle; i < healed; ++i) outage += f.bins[i];
  const double outage_ratio = healed > settle
                                  ? static_cast<double>(outage) / static_cast<double>(healed - settle) / before_bytes_per_rtt
                                  : 0;
  std::printf("failover, %u planes, plane 1 down %llu ms: back within 5%% of %u/%u after %lld RTTs; "
              "outage goodput %.3f of before; planes failed %llu, recovered %llu, packets moved %llu, errors %llu\n",
              planes, static_cast<unsigned long long>(fail_for / 1'000'000), planes - 1, planes,
              static_cast<long long>(back), outage_ratio, static_cast<unsigned long long>(f.planes_failed),
              static_cast<unsigned long long>(f.planes_recovered), static_cast<unsigned long long>(f.moved),
              static_cast<unsigned long long>(f.errors));
  apps::JsonLine out;
  out.add("bench", "planes");
  out.add("cpu", cpu_model());
  out.add("plane_gbps", static_cast<double>(plane_bps) / 1e9);
  out.add("connections", opt.connections);
  out.add_raw("rows", rows);
  out.add("linear", linear);
  out.add("failover_rtts", static_cast<double>(back));
  out.add("outage_goodput_ratio", outage_ratio);
  out.add("planes_failed", f.planes_failed);
  out.add("planes_recovered", f.planes_recovered);
  out.add("packets_moved_to_other_planes", f.moved);
  out.add("errors", f.errors);
  std::cout << std::move(out).finish() << std::endl;
  return 0;
}
