// Goodput under random loss in virtual time: metaroce against RoCEv2
// go-back-N over the same simulated network (100 Gb/s NICs, 10 us base RTT,
// 8 fabric paths), each row as a ratio to the same mode's lossless goodput.
// Deterministic: same binary, same figures. Last line: JSON.
//   metaroce-bench-sim-loss [--messages-kib N] [--measure-ms N]
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/json_line.hpp"
#include "fabric/config.hpp"
#include "sim/network.hpp"
#include "host/sim_endpoint.hpp"
#include "transport/connection.hpp"

namespace {

using namespace metaroce;

constexpr std::uint64_t nic_bps = 100'000'000'000;
constexpr std::uint64_t one_way_ns = 5'000;  // 10 us base RTT
constexpr std::uint32_t fabric_paths = 8;
constexpr std::uint32_t mtu = 4096;
constexpr std::uint32_t path_window = 16;        // packets
constexpr std::uint32_t connection_window = 96;  // packets: ~3x the bandwidth-delay product

struct Row {
  transport::Mode mode;
  double loss;
  bool ran = false;
  double goodput_gbps = 0;
  double ratio = 0;
  std::uint64_t retransmits = 0;
  std::uint64_t spurious = 0;
  std::uint64_t data_packets = 0;
};

struct Options {
  std::uint64_t message_bytes = 256 * 1024;
  std::uint64_t warmup_ns = 2'000'000;
  std::uint64_t measure_ns = 20'000'000;
};

void run_row(Row& row, const Options& opt) {
  constexpr std::uint64_t ring = 64ull << 20;
  std::vector<std::uint8_t> src(ring, 0x5a), dst(ring, 0);
  host::SimEndpoint a, b;
  const std::uint32_t src_key = a.memory().register_region(src.data(), ring, transport::access_local_write);
  const std::uint32_t dst_key =
      b.memory().register_region(dst.data(), ring, transport::access_local_write | transport::access_remote_write);

  transport::ConnectionConfig ca;
  ca.mode = row.mode;
  ca.paths = row.mode == transport::Mode::metaroce ? 8 : 1;
  ca.mtu = mtu;
  ca.endpoints.local_mac = {2, 0, 0, 0, 0, 1};
  ca.endpoints.peer_mac = {2, 0, 0, 0, 0, 2};
  ca.endpoints.local_ipv4 = 0x0a000001;
  ca.endpoints.peer_ipv4 = 0x0a000002;
  ca.local_qpn = 0x11;
  ca.peer_qpn = 0x22;
  ca.initial_psn = 1000;
  ca.peer_initial_psn = 2000;
  transport::ConnectionConfig cb = ca;
  std::swap(cb.endpoints.local_mac, cb.endpoints.peer_mac);
  std::swap(cb.endpoints.local_ipv4, cb.endpoints.peer_ipv4);
  std::swap(cb.local_qpn, cb.peer_qpn);
  std::swap(cb.initial_psn, cb.peer_initial_psn);
  cb.base_src_port = 50000;

  transport::Connection* sender;
  transport::Connection* receiver;
  try {
    sender = &a.add(ca, std::make_unique<transport::FixedWindow>(path_window, connection_window));
    receiver = &b.add(cb, std::make_unique<transport::FixedWindow>(path_window, connection_window));
  } catch (const std::exception& e) {
    std::printf("  %s: not available (%s)\n", std::string(transport::to_string(row.mode)).c_str(), e.what());
    return;
  }
  sender->connect();
  receiver->connect();

  sim::Network net;
  fabric::FabricConfig forward, backward;
  for (fabric::FabricConfig* f : {&forward, &backward}) {
    f->delay_ns = one_way_ns;
    f->paths = fabric_paths;
    f->loss = row.loss;
  }
  forward.seed = 11;
  backward.seed = 12;
  const auto ia = net.add(a, sim::HostConfig{{ca.endpoints.local_mac, ca.endpoints.local_ipv4, {}}, nic_bps, 24});
  const auto ib = net.add(b, sim::HostConfig{{cb.endpoints.local_mac, cb.endpoints.local_ipv4, {}}, nic_bps, 24});
  net.connect(ia, ib, forward, backward);

  const std::uint64_t slots = ring / opt.message_bytes;
  std::uint64_t posted = 0, completed_in_window = 0;
  std::size_t outstanding = 0;
  const std::size_t max_outstanding = 64;
  std::vector<transport::Completion> cq;
  const std::uint64_t end = opt.warmup_ns + opt.measure_ns;
  while (net.now() < end) {
    while (outstanding < max_outstanding) {
      const std::uint64_t slot = posted % slots;
      transport::SendRequest r;
      r.wr_id = posted++;
      r.op = transport::SendOp::write;
      r.local_addr = src.data() + slot * opt.message_bytes;
      r.length = opt.message_bytes;
      r.lkey = src_key;
      r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + slot * opt.message_bytes);
      r.rkey = dst_key;
      if (sender->post_send(r) != transport::PostResult::ok) break;
      ++outstanding;
    }
    if (!net.step(end)) break;
    cq.clear();
    sender->poll_completions(cq);
    for (const auto& c : cq) {
      --outstanding;
      if (c.status == transport::CompletionStatus::success && net.now() >= opt.warmup_ns) completed_in_window += c.byte_len;
    }
    if (sender->state() != transport::ConnectionState::ready) break;
  }
  row.ran = true;
  row.goodput_gbps = static_cast<double>(completed_in_window) * 8.0 / static_cast<double>(opt.measure_ns);
  row.retransmits = sender->counters().retransmitted_packets;
  row.spurious = receiver->counters().spurious_retransmissions;
  row.data_packets = sender->counters().data_packets_sent;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::uint64_t value = std::stoull(argv[i + 1]);
    if (flag == "--message-kib") {
      opt.message_bytes = value * 1024;
    } else if (flag == "--measure-ms") {
      opt.measure_ns = value * 1'000'000;
    } else {
      std::fprintf(stderr, "usage: %s [--message-kib N] [--measure-ms N]\n", argv[0]);
      return 2;
    }
  }
  const std::vector<double> losses = {0.0, 0.001, 0.01, 0.02, 0.05, 0.10};
  std::vector<Row> rows;
  for (transport::Mode mode : {transport::Mode::metaroce, transport::Mode::rocev2})
    for (double loss : losses) rows.push_back(Row{mode, loss});

  std::printf("# sim-loss: %llu Gb/s NICs, %llu us base RTT, %u fabric paths, MTU %u, windows %u/path %u/connection,\n"
              "# %llu KiB WRITEs, loss on both directions, %llu ms measured after %llu ms warm-up (virtual time)\n",
              static_cast<unsigned long long>(nic_bps / 1'000'000'000), static_cast<unsigned long long>(2 * one_way_ns / 1000),
              fabric_paths, mtu, path_window, connection_window,
              static_cast<unsigned long long>(opt.message_bytes / 1024),
              static_cast<unsigned long long>(opt.measure_ns / 1'000'000),
              static_cast<unsigned long long>(opt.warmup_ns / 1'000'000));
  std::printf("%-9s %6s %12s %10s %12s %10s\n", "mode", "loss%", "goodput_Gbps", "of_lossless", "retransmits", "spurious");
  double lossless = 0;
  for (Row& row : rows) {
    run_row(row, opt);
    if (!row.ran) continue;
    if (row.loss == 0.0) lossless = row.goodput_gbps;
    row.ratio = lossless > 0 ? row.goodput_gbps / lossless : 0;
    std::printf("%-9s %6.1f %12.2f %10.3f %12llu %10llu\n", std::string(transport::to_string(row.mode)).c_str(),
                row.loss * 100, row.goodput_gbps, row.ratio, static_cast<unsigned long long>(row.retransmits),
                static_cast<unsigned long long>(row.spurious));
    std::fflush(stdout);
  }
  std::string rows_json = "[";
  bool first = true;
  for (const Row& row : rows) {
    if (!row.ran) continue;
    apps::JsonLine j;
    j.add("mode", transport::to_string(row.mode));
    j.add("loss", row.loss);
    j.add("goodput_gbps", row.goodput_gbps);
    j.add("goodput_ratio", row.ratio);
    j.add("retransmits", row.retransmits);
    j.add("spurious", row.spurious);
    if (!first) rows_json += ',';
    rows_json += std::move(j).finish();
    first = false;
  }
  rows_json += "]";
  apps::JsonLine out;
  out.add("bench", "sim-loss");
  out.add("link_gbps", static_cast<double>(nic_bps) / 1e9);
  out.add("base_rtt_us", static_cast<double>(2 * one_way_ns) / 1000.0);
  out.add("paths", fabric_paths);
  out.add_raw("rows", rows_json);
  std::cout << std::move(out).finish() << std::endl;
  return 0;
}
