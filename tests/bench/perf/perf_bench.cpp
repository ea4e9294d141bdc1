// tools/bench perf: metaroce-perf over the loopback set beside what this
// machine's kernel TCP and memory do, in one run (about 35 s):
//   1. metaroce-perf --loopback, 1 MiB WRITEs for 5 s: goodput, and the
//      sender lcore's busy TSC cycles per data packet;
//   2. iperf3 over 127.0.0.1, one TCP stream, 5 s (`iperf3 -s -1` in the
//      background, the client's -J output parsed): the kernel's loopback;
//   3. memcpy on one core, 64 MiB buffers (beyond the caches): the ceiling
//      of anything that copies each byte once, as net_ring loopback does;
//   4. metaroce-perf 64 B WRITEs for 3 s: message rate (window of 128), and
//      each lcore's busy TSC cycles per message;
//   5. the same with --raw: frames of a 64 B WRITE's size over the same
//      rings between the same two lcores, no transport (perftest's
//      raw_ethernet_bw): the most any protocol gets from this loopback on
//      this machine, and metaroce's share of it;
//   6. the same 64 B WRITEs with both ends on one lcore: each end's own
//      cycles per message with no cache line crossing cores (the sender's
//      turns timed apart from the receiver's), and from the sender's the
//      messages per second its lcore can originate;
//   7. metaroce-perf --test lat 64 B for 3 s: post-to-completion p50/p99
//      (one round trip, one message in flight).
// Human-readable lines, then one JSON object as the last line. A figure
// that could not be measured is null, and a line says why.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "../common/program_runner.hpp"

#ifndef METAROCE_PERF_PATH
#error "METAROCE_PERF_PATH: the metaroce-perf executable, set by meson"
#endif

namespace {

using metaroce::bench::Figure;
using metaroce::bench::json_number;
using metaroce::bench::json_value;
using metaroce::bench::read_file;
using metaroce::bench::run;
using metaroce::bench::show;

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && executable(dir + "/" + name)) return dir + "/" + name;
  return "";
}

struct PerfRun {
  bool ok = false;
  std::string json;  // metaroce-perf --json
};

PerfRun metaroce_perf(const std::string& args, const std::string& json_path) {
  const std::string command = fmt::format("{} --json {} {}", METAROCE_PERF_PATH, json_path, args);  // args may end in `-- EAL`
  std::printf("  $ %s\n", command.c_str());
  PerfRun r;
  r.ok = run(command) == 0;
  r.json = read_file(json_path);
  if (!r.ok) std::printf("  metaroce-perf failed (exit status above); its figures are null\n");
  return r;
}

// Single-core memcpy bandwidth in Gb/s over buffers of `bytes`, best of
// several passes (the first touches the pages).
double memcpy_gbps(std::size_t bytes, double seconds) {
  std::vector<char> from(bytes, 1), to(bytes, 0);
  double best = 0;
  const auto stop = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  do {
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t copied = 0;
    while (copied < (std::size_t{256} << 20)) {
      std::memcpy(to.data(), from.data(), bytes);
      copied += bytes;
      from[copied % bytes] ^= to[(copied / 2) % bytes];  // keep the copies observable
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(copied) * 8.0 / ns);
  } while (std::chrono::steady_clock::now() < stop);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  const auto scratch = metaroce::bench::start_benchmark("perf", argc, argv, exit_code);
  if (!scratch) return exit_code;
  const std::string work = *scratch;
  const char* dir = work.c_str();

  std::printf("1. metaroce-perf loopback (net_ring pair, 2 lcores), 1 MiB WRITEs, 5 s\n");
  const PerfRun bw = metaroce_perf("--loopback -s 1048576 -D 5 --report-gbits", work + "/bw.json");
  const Figure metaroce_gbps = bw.ok ? json_number(bw.json, "bw_average_gbps") : std::nullopt;
  const Figure cycles_per_packet = bw.ok ? json_number(bw.json, "sender_cycles_per_packet") : std::nullopt;

  std::printf("2. iperf3 TCP over 127.0.0.1, one stream, 5 s\n");
  Figure tcp_gbps;
  const std::string iperf = find_in_path("iperf3");
  if (iperf.empty()) {
    std::printf("  iperf3 is not installed (tools/setup installs it): TCP figure null\n");
  } else {
    // A port of our own, and a server that goes away even if the client never comes.
    const int port = 5201 + static_cast<int>(::getpid() % 500);
    if (std::system(fmt::format("timeout 20 {} -s -1 -p {} >/dev/null 2>&1 &", iperf, port).c_str()) != 0)
      std::printf("  starting the iperf3 server failed\n");
    const std::string out = work + "/iperf3.json";
    int status = -1;
    for (int attempt = 0; attempt < 20 && status != 0; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));  // the server binds
      status = std::system(fmt::format("{} -c 127.0.0.1 -p {} -t 5 -J >{} 2>&1", iperf, port, out).c_str());
      if (status != 0 && read_file(out).find("connect") == std::string::npos) break;  // not a connect race
    }
    const std::string json = read_file(out);
    const std::size_t received = json.find("\"sum_received\"");
    if (status == 0 && received != std::string::npos) {
      if (const Figure bps = json_number(json, "bits_per_second", received)) tcp_gbps = *bps / 1e9;
    }
    if (!tcp_gbps) std::printf("  iperf3 failed: %s\n", json.substr(0, 300).c_str());
  }
  std::printf("  TCP received: %s\n", show(tcp_gbps, "Gb/s").c_str());

  std::printf("3. memcpy, one core, 64 MiB buffers (and 1 MiB, cache-hot, for reference)\n");
  const Figure memcpy_dram = memcpy_gbps(std::size_t{64} << 20, 1.0);
  const Figure memcpy_hot = memcpy_gbps(std::size_t{1} << 20, 0.5);
  std::printf("  memcpy: %s (64 MiB), %s (1 MiB)\n", show(memcpy_dram, "Gb/s").c_str(),
              show(memcpy_hot, "Gb/s").c_str());

  std::printf("4. metaroce-perf 64 B WRITEs, 128 in flight, 3 s\n");
  const PerfRun rate = metaroce_perf("--loopback -s 64 -D 3", work + "/rate.json");
  const Figure msg_rate_mps = rate.ok ? json_number(rate.json, "msg_rate_mpps") : std::nullopt;
  const Figure sender_cycles = rate.ok ? json_number(rate.json, "sender_cycles_per_packet") : std::nullopt;
  const Figure receiver_cycles = rate.ok ? json_number(rate.json, "receiver_cycles_per_packet") : std::nullopt;

  std::printf("5. metaroce-perf --raw: frames of a 64 B WRITE's size, same rings and lcores, no transport, 3 s\n");
  const PerfRun raw = metaroce_perf("--loopback --raw -s 64 -D 3", work + "/raw.json");
  const Figure raw_mps = raw.ok ? json_number(raw.json, "msg_rate_mpps") : std::nullopt;
  const Figure share_of_raw = msg_rate_mps && raw_mps && *raw_mps > 0 ? Figure(*msg_rate_mps / *raw_mps) : std::nullopt;

  std::printf("6. metaroce-perf 64 B WRITEs, both ends on one lcore (each end's own cost), 3 s\n");
  const PerfRun one = metaroce_perf("--loopback -s 64 -D 3 -- -l 0 --no-huge -m 512 --no-shconf --no-pci",
                                    work + "/one.json");
  const Figure own_sender = one.ok ? json_number(one.json, "sender_cycles_per_packet") : std::nullopt;
  const Figure own_receiver = one.ok ? json_number(one.json, "receiver_cycles_per_packet") : std::nullopt;
  const double tsc_hz = one.ok ? json_number(one.json, "tsc_hz").value_or(0.0) : 0.0;
  const Figure sender_capacity =
      own_sender.value_or(0) > 0 && tsc_hz > 0 ? Figure(tsc_hz / own_sender.value_or(1) / 1e6) : std::nullopt;

  std::printf("7. metaroce-perf --test lat, 64 B WRITE, one in flight, 3 s\n");
  const PerfRun lat = metaroce_perf("--loopback --test lat -s 64 -D 3", work + "/lat.json");
  const Figure lat_p50 = lat.ok ? json_number(lat.json, "lat_p50_us") : std::nullopt;
  const Figure lat_p99 = lat.ok ? json_number(lat.json, "lat_p99_us") : std::nullopt;

  const Figure ratio = metaroce_gbps && tcp_gbps && *tcp_gbps > 0 ? Figure(*metaroce_gbps / *tcp_gbps) : std::nullopt;
  std::printf("\nsummary\n");
  std::printf("  metaroce loopback goodput, 1 MiB : %s (%s per data packet on the sender lcore)\n",
              show(metaroce_gbps, "Gb/s").c_str(), show(cycles_per_packet, "TSC cycles", 0).c_str());
  std::printf("  kernel TCP loopback, 1 stream    : %s (metaroce / TCP = %s)\n", show(tcp_gbps, "Gb/s").c_str(),
              show(ratio, "x").c_str());
  std::printf("  memcpy, one core, 64 MiB         : %s\n", show(memcpy_dram, "Gb/s").c_str());
  std::printf("  64 B WRITE message rate          : %s (busy cycles per message: sender lcore %s, receiver lcore %s)\n",
              show(msg_rate_mps, "M msg/s", 3).c_str(), json_value(sender_cycles, 0).c_str(),
              json_value(receiver_cycles, 0).c_str());
  std::printf("  64 B raw frames, no transport    : %s (metaroce's message rate is %s of it)\n", show(raw_mps, "M frames/s", 3).c_str(),
              share_of_raw ? fmt::format("{:.0f}%", *share_of_raw * 100).c_str() : "?");
  std::printf("  own cost, both ends on one lcore : sender %s, receiver %s TSC cycles per 64 B message\n",
              json_value(own_sender, 0).c_str(), json_value(own_receiver, 0).c_str());
  std::printf("  one sender lcore's capacity      : %s (TSC %s / the sender's own cycles)\n",
              show(sender_capacity, "M msg/s", 2).c_str(), tsc_hz > 0 ? fmt::format("{:.3f} GHz", tsc_hz / 1e9).c_str() : "?");
  std::printf("  64 B WRITE latency p50 / p99     : %s / %s (post to completion, one round trip)\n",
              show(lat_p50, "us").c_str(), show(lat_p99, "us").c_str());

  if (std::system(fmt::format("rm -rf '{}'", work).c_str()) != 0) std::printf("  (could not remove %s)\n", dir);
  std::printf(
      "{\"bench\":\"perf\",\"metaroce_gbps\":%s,\"tcp_gbps\":%s,\"ratio_vs_tcp\":%s,\"memcpy_gbps\":%s,"
      "\"msg_rate_64b_mps\":%s,\"lat_64b_p50_us\":%s,\"lat_64b_p99_us\":%s,\"sender_cycles_per_packet_1mib\":%s,"
      "\"raw_64b_mps\":%s,\"msg_rate_64b_vs_raw\":%s,\"sender_cycles_64b\":%s,\"receiver_cycles_64b\":%s,"
      "\"sender_own_cycles_64b\":%s,\"receiver_own_cycles_64b\":%s,\"sender_capacity_64b_mps\":%s}\n",
      json_value(metaroce_gbps, 3).c_str(), json_value(tcp_gbps, 3).c_str(), json_value(ratio, 3).c_str(),
      json_value(memcpy_dram, 3).c_str(), json_value(msg_rate_mps, 4).c_str(), json_value(lat_p50, 2).c_str(),
      json_value(lat_p99, 2).c_str(), json_value(cycles_per_packet, 0).c_str(), json_value(raw_mps, 3).c_str(),
      json_value(share_of_raw, 3).c_str(), json_value(sender_cycles, 0).c_str(), json_value(receiver_cycles, 0).c_str(),
      json_value(own_sender, 0).c_str(), json_value(own_receiver, 0).c_str(), json_value(sender_capacity, 2).c_str());
  return metaroce_gbps && msg_rate_mps && lat_p50 ? 0 : 1;
}
