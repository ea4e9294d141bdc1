// tools/bench loss-sweep (and the main job, tools/run): goodput under loss
// over DPDK ports, metaroce against rocev2 go-back-N, in one process.
//
// EAL starts once (2 lcores, no hugepages, no PCI); every row is one
// metaroce-perf --loopback run (apps/metaroce-perf/loopback_run.hpp) with
// its own fresh loopback: the sender on lcore 0, the receiver on lcore 1,
// an inline lib/fabric impairment in each direction between them. Each
// fabric is an emulated link of `--link-gbps` (by default 5, or 40 % of
// the CPU-only row's rate when that is lower; 24 bytes of preamble, IFG and
// FCS per frame), well below what the two cores carry
// with every byte verified (measured first, in a row without the rate
// limit), so the link, not the CPU, sets the lossless goodput; each row
// prints the sender lcore's busy share to show it, and the share of the
// machine's CPU other processes took (the VM is shared). 1 MiB WRITEs,
// MTU 4096, every byte verified, the fixed windows of the virtual-time
// sweep (16 packets a path, 96 a connection).
//
// Rows ("op":"write"): random loss 0, 0.1, 0.5, 1, 2, 5, 10 % on both directions; a burst
// row (Gilbert-Elliott, 0.99 % average loss in bursts of 4 frames on
// average); a reordering row (8 fabric paths by UDP source port, path k
// k x 100/7 us slower than path 0, no loss). Both modes, interleaved, so
// a neighbour's load hits both alike. Then "op":"read" rows: 1 MiB READs of
// the receiver's bytes at 0, 1 and 10 % loss, both modes (their goodput
// against the lossless READ row). Human-readable lines, then one JSON
// object as the last line; exit 1 when any row lost or damaged a message.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_lcore.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cc/registry.hpp"
#include "common/json_line.hpp"
#include "engine/eal.hpp"
#include "fabric/spec.hpp"
#include "metaroce-perf/loopback_run.hpp"
#include "metaroce-perf/perf_options.hpp"
#include "wire/headers.hpp"

namespace {

using namespace metaroce;

constexpr int exit_ok = 0;
constexpr int exit_failed = 1;
constexpr int exit_usage = 2;

constexpr std::uint64_t message_bytes = 1 << 20;
constexpr std::uint32_t mtu = 4096;
// 1 MiB messages in flight (--tx-depth): 8 MiB, 20 times what the windows
// let onto the link (96 packets), so the windows, not the application,
// bound a row; and little enough that a slow rocev2 row drains its last
// messages in a second or two.
constexpr std::uint32_t default_tx_depth = 8;
// Per frame on the emulated wire besides the frame: preamble, IFG and FCS.
constexpr std::uint32_t link_overhead_bytes = 24;
// The link without --link-gbps: 5 Gb/s, or this share of the CPU-only
// row's goodput when that is lower (never below 0.5 Gb/s).
constexpr double default_link_gbps = 5.0;
constexpr double link_share_of_cpu = 0.4;
constexpr double min_auto_link_gbps = 0.5;
// metaroce sprays over 8 paths: their 8 consecutive UDP source ports land on
// the 8 distinct paths of the reordering row's fabric (path_of_port).
constexpr std::uint16_t metaroce_paths = 8;
// Both modes get the fixed windows of the virtual-time sweep (sim-loss):
// 16 packets a path, 96 a connection (cc::CcConfig's `fixed`). Without a
// congestion controller a rocev2 connection's window is its whole PSN
// window (16,384 packets): every posted message would sit in the link's
// queue and each loss would send all of it again.
constexpr std::string_view window_algorithm = "fixed";
// Burst loss: Gilbert-Elliott p = 0.25 %, r = 25 %, every frame lost in the
// bad state, none in the good: average loss p / (p + r) = 0.990 %, bursts of
// 1 / r = 4 frames on average.
constexpr std::string_view burst_model = "loss gemodel 0.25% 25%";
constexpr double burst_average_loss_pct = 100.0 * 0.0025 / (0.0025 + 0.25);
// Reordering: 8 paths, path k delayed by k x spread / 7.
constexpr std::string_view reorder_model = "paths 8 spread 100us";

constexpr const char* usage =
    "usage: metaroce-bench-loss-sweep [--duration S] [--quick] [--link-gbps G] [--tx-depth N] [--json FILE]\n"
    "  --duration S    seconds of posting per row (default 5; 1.5 with --quick)\n"
    "  --quick         metaroce only, lossless, 1 % and 10 % loss (the suite's test)\n"
    "  --link-gbps G   rate of the emulated link, Gb/s (default 5, or 40 % of what the CPU carries if lower)\n"
    "  --tx-depth N    1 MiB messages in flight, 1..64 (default 8)\n"
    "  --json FILE     write every figure and counter of every row to FILE\n";

struct Options {
  std::uint32_t tx_depth = default_tx_depth;
  double duration_s = 5.0;
  bool duration_given = false;
  bool quick = false;
  // With every byte verified, the two vCPUs of the VM this was written on
  // carry 15 to 21 Gb/s of 1 MiB WRITEs through the inline fabric: 5 Gb/s
  // is a quarter to a third of it, the sender lcore busy 40 to 67 % of its
  // cycles; 10 Gb/s keeps it 65 to 90 % busy, too close to the CPU's limit
  // for the rows to measure the link alone.
  // A slower host (or a busier neighbour) gets a slower link: without
  // --link-gbps the sweep takes 40 % of what its CPU-only row carried when
  // that is below 5 Gb/s, so the link stays the bottleneck.
  double link_gbps = default_link_gbps;
  bool link_given = false;
  std::string json_path;
};

enum class RowKind : std::uint8_t { random, burst, reorder };

struct Row {
  transport::Mode mode = transport::Mode::metaroce;
  perf::PerfOp op = perf::PerfOp::write;  // or read: the receiver's bytes read back, every byte verified
  RowKind kind = RowKind::random;
  double loss_pct = 0.0;  // random: the loss; burst: the model's average
  std::string fabric;     // the spec each direction gets
  // Results.
  bool ran = false;
  bool ok = false;
  std::string problem;
  double seconds = 0.0;
  std::uint64_t messages = 0;
  double goodput_gbps = 0.0;
  double pct_of_lossless = 0.0;
  std::uint64_t retransmits = 0;
  std::uint64_t spurious = 0;
  std::uint64_t dropped_forward = 0, dropped_backward = 0;
  std::uint64_t frames_forward = 0;
  double cpu_busy_share = 0.0;
  // Of the machine's CPU time during the row, the share other processes
  // took: this machine is shared, and a row they disturbed says so.
  double others_cpu_share = 0.0;
  // The most payload the link can carry with this mode's frames (headers,
  // ICRC and 24 bytes of preamble, IFG and FCS per MTU of payload), and the
  // share of it this row's goodput is.
  double payload_ceiling_gbps = 0.0;
  double link_share = 0.0;
  // Turns of either side's lcore that began 1 ms or more after the one
  // before (poll_stalls), and the longest gap: a stall longer than the RTO
  // fires the sender's timer with nothing lost.
  std::uint64_t lcore_stalls = 0;
  double longest_stall_ms = 0.0;
  metaroce::perf::RunResult run;
};

std::string mode_name(transport::Mode m) { return std::string(transport::to_string(m)); }

const char* kind_name(RowKind k) {
  return k == RowKind::random ? "random" : k == RowKind::burst ? "burst" : "reorder";
}

std::string row_label(const Row& r) {
  switch (r.kind) {
    case RowKind::random: return fmt::format("{:g}%", r.loss_pct);
    case RowKind::burst: return fmt::format("burst {:.2f}%", r.loss_pct);
    case RowKind::reorder: return "8-path reorder";
  }
  return "?";
}

// A whole-string number, or false.
bool parse_number(const char* text, double& out) {
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  out = std::strtod(text, &end);
  return end != nullptr && *end == '\0' && std::isfinite(out);
}

// One-line message on error.
bool parse_options(int argc, char** argv, Options& o, std::string& message) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    // tools/bench passes Google Benchmark's flags (--benchmark_color=false).
    if (a.starts_with("--benchmark")) continue;
    if (a == "--help" || a == "-h") {
      message = "help";
      return false;
    }
    if (a == "--quick") {
      o.quick = true;
      continue;
    }
    const bool takes_value = a == "--duration" || a == "--link-gbps" || a == "--tx-depth" || a == "--json";
    if (!takes_value) {
      message = fmt::format("unknown argument '{}'", a);
      return false;
    }
    if (i + 1 >= argc) {
      message = fmt::format("{} needs a value", a);
      return false;
    }
    const char* value = argv[++i];
    if (a == "--json") {
      o.json_path = value;
      if (o.json_path.empty()) {
        message = "--json needs a file name";
        return false;
      }
      continue;
    }
    double v = 0;
    if (a == "--duration") {
      if (!parse_number(value, v) || v < 0.2 || v > 600) {
        message = fmt::format("--duration '{}' is not a number of seconds in 0.2..600", value);
        return false;
      }
      o.duration_s = v;
      o.duration_given = true;
    } else if (a == "--tx-depth") {
      if (!parse_number(value, v) || v < 1 || v > 64 || v != std::floor(v)) {
        message = fmt::format("--tx-depth '{}' is not a whole number of messages in 1..64", value);
        return false;
      }
      o.tx_depth = static_cast<std::uint32_t>(v);
    } else {
      if (!parse_number(value, v) || v < 0.1 || v > 100) {
        message = fmt::format("--link-gbps '{}' is not a rate in 0.1..100 Gb/s", value);
        return false;
      }
      o.link_gbps = v;
      o.link_given = true;
    }
  }
  if (o.quick && !o.duration_given) o.duration_s = 1.5;
  return true;
}

std::string link_spec(double link_gbps) {
  // Decimal, as tc: 10gbit = 1e10 b/s; in mbit so fractional rates parse.
  return fmt::format("rate {}mbit overhead {}", static_cast<std::uint64_t>(std::llround(link_gbps * 1000)),
                     link_overhead_bytes);
}

std::vector<Row> plan_rows(const Options& o) {
  const std::string link = link_spec(o.link_gbps);
  std::vector<Row> specs;
  const auto random_row = [&](double pct) {
    Row r;
    r.kind = RowKind::random;
    r.loss_pct = pct;
    r.fabric = pct == 0.0 ? link : fmt::format("{} loss {:g}%", link, pct);
    return r;
  };
  const std::vector<double> losses =
      o.quick ? std::vector<double>{0, 1, 10} : std::vector<double>{0, 0.1, 0.5, 1, 2, 5, 10};
  for (const double pct : losses) specs.push_back(random_row(pct));
  if (!o.quick) {
    Row burst;
    burst.kind = RowKind::burst;
    burst.loss_pct = burst_average_loss_pct;
    burst.fabric = fmt::format("{} {}", link, burst_model);
    specs.push_back(burst);
    Row reorder;
    reorder.kind = RowKind::reorder;
    reorder.fabric = fmt::format("{} {}", link, reorder_model);
    specs.push_back(reorder);
  }
  // Both modes of a row back to back: a neighbour's load on this shared
  // machine then weighs on both alike.
  std::vector<Row> rows;
  for (const Row& spec : specs)
    for (const transport::Mode mode :
         o.quick ? std::vector<transport::Mode>{transport::Mode::metaroce}
                 : std::vector<transport::Mode>{transport::Mode::metaroce, transport::Mode::rocev2}) {
      Row r = spec;
      r.mode = mode;
      rows.push_back(r);
    }
  // READ rows: lossless, 1 % and 10 %, both modes (metaroce only with --quick).
  for (const double pct : {0.0, 1.0, 10.0})
    for (const transport::Mode mode :
         o.quick ? std::vector<transport::Mode>{transport::Mode::metaroce}
                 : std::vector<transport::Mode>{transport::Mode::metaroce, transport::Mode::rocev2}) {
      Row r = random_row(pct);
      r.mode = mode;
      r.op = perf::PerfOp::read;
      rows.push_back(r);
    }
  return rows;
}

// The payload rate of a link full of one mode's data frames of a 1 MiB
// WRITE over IPv4: Ethernet, IPv4, UDP, BTH, the ICRC and the link's
// per-frame overhead around each MTU of payload; metaroce adds its data and
// placement headers (MDH, MWH) to every packet, rocev2 a RETH to the first
// packet of each message.
double payload_ceiling_gbps(double link_gbps, transport::Mode mode) {
  constexpr double packets = double(message_bytes) / mtu;
  double per_packet = wire::ethernet_header_size + wire::ipv4_header_size + wire::udp_header_size + wire::bth_size +
                      wire::icrc_size + link_overhead_bytes;
  per_packet += mode == transport::Mode::metaroce ? double(wire::mr_data_header_size + wire::mr_write_header_size)
                                                  : double(wire::reth_size) / packets;
  return link_gbps * mtu / (mtu + per_packet);
}

// Clock ticks since boot: all CPUs' total and busy time (/proc/stat), and
// this process's, every thread included (/proc/self/stat utime + stime).
struct CpuTimes {
  bool valid = false;
  std::uint64_t total = 0, busy = 0, self = 0;
};

CpuTimes read_cpu_times() {
  CpuTimes t;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  std::uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu")
    return t;
  t.busy = user + nice + system + irq + softirq + steal;
  t.total = t.busy + idle + iowait;
  std::ifstream self("/proc/self/stat");
  std::string line;
  std::getline(self, line);
  // Fields after the command name, which is in parentheses and may hold
  // blanks: state is field 3, utime 14, stime 15.
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return t;
  const char* p = line.c_str() + close + 1;
  std::uint64_t field[16] = {};
  for (int f = 3; f <= 15; ++f) {
    while (*p == ' ') ++p;
    char* end = nullptr;
    field[f] = f == 3 ? 0 : std::strtoull(p, &end, 10);
    if (f == 3) {
      while (*p != '\0' && *p != ' ') ++p;
    } else {
      if (end == p) return t;
      p = end;
    }
  }
  t.self = field[14] + field[15];
  t.valid = true;
  return t;
}

perf::PerfOptions row_options(const Options& o, const Row& r) {
  perf::PerfOptions p;
  p.loopback = true;
  p.sizes = {message_bytes};
  p.duration_s = o.duration_s;
  p.tx_depth = o.tx_depth;
  p.mode = r.mode;
  p.paths = r.mode == transport::Mode::rocev2 ? 1 : metaroce_paths;
  p.cc = std::string(window_algorithm);
  p.mtu = mtu;
  p.op = r.op;
  p.verify = true;
  p.report_gbits = true;
  p.fabric_spec = r.fabric;
  return p;
}

void run_row(const Options& o, Row& r) {
  const CpuTimes before = read_cpu_times();
  r.run = perf::run_loopback(row_options(o, r), {}, nullptr);
  const CpuTimes after = read_cpu_times();
  if (after.valid && before.valid && after.total > before.total) {
    const double machine_busy = double(after.busy - before.busy);
    const double ours = double(after.self - before.self);
    r.others_cpu_share = std::clamp((machine_busy - ours) / double(after.total - before.total), 0.0, 1.0);
  }
  r.ran = true;
  if (!r.run.error.empty() || r.run.sizes.empty()) {
    r.problem = r.run.error.empty() ? "nothing ran" : r.run.error;
    return;
  }
  const perf::SizeResult& s = r.run.sizes.front();
  r.ok = !r.run.failed() && s.messages != 0;
  if (s.wrong_messages != 0 || s.missing_messages != 0)
    r.problem = fmt::format("{} wrong, {} missing messages; first: {}", s.wrong_messages, s.missing_messages,
                            s.first_problem);
  else if (s.messages == 0)
    r.problem = "no message completed";
  r.seconds = s.seconds;
  r.messages = s.messages;
  r.goodput_gbps = s.average_bps / 1e9;
  r.retransmits = r.run.connection_a.retransmitted_packets;
  r.spurious = r.run.connection_b.spurious_retransmissions;
  r.lcore_stalls = r.run.host_a.poll_stalls + r.run.host_b.poll_stalls;
  r.longest_stall_ms = double(std::max(r.run.host_a.max_poll_gap_ns, r.run.host_b.max_poll_gap_ns)) / 1e6;
  r.dropped_forward = r.run.forward.dropped();
  r.dropped_backward = r.run.backward.dropped();
  r.frames_forward = r.run.forward.received;
  const double elapsed_cycles = s.seconds * double(rte_get_tsc_hz());
  r.payload_ceiling_gbps = payload_ceiling_gbps(o.link_gbps, r.mode);
  r.link_share = r.goodput_gbps / r.payload_ceiling_gbps;
  r.cpu_busy_share = elapsed_cycles > 0 ? std::min(1.0, double(s.sender_busy_cycles) / elapsed_cycles) : 0.0;
}

// v to `decimals` places, for the JSON line (the division keeps 0.99 from
// printing as 0.9900000000000001).
double round_to(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

void add_row_fields(apps::JsonLine& j, const Row& r) {
  j.add("mode", mode_name(r.mode))
      .add("op", perf::to_string(r.op))
      .add("loss", round_to(r.loss_pct, 3))
      .add("goodput_gbps", round_to(r.goodput_gbps, 3))
      .add("pct_of_lossless", round_to(r.pct_of_lossless, 1))
      .add("retransmits", r.retransmits)
      .add("spurious", r.spurious)
      .add("row", kind_name(r.kind))
      .add("cpu_busy_share", round_to(r.cpu_busy_share, 3))
      .add("link_share", round_to(r.link_share, 3))
      .add("others_cpu_share", round_to(r.others_cpu_share, 3))
      .add("lcore_stalls", r.lcore_stalls)
      .add("longest_stall_ms", round_to(r.longest_stall_ms, 2))
      .add("ok", r.ok);
}

std::string rows_json(const std::vector<Row>& rows) {
  std::string out = "[";
  for (const Row& r : rows) {
    if (!r.ran) continue;
    apps::JsonLine j;
    add_row_fields(j, r);
    if (out.size() > 1) out += ',';
    out += std::move(j).finish();
  }
  return out + "]";
}

// --json: the summary plus, per row, the fabric spec, the drops, and every
// counter of both connections and both fabric directions.
bool write_full_json(const std::string& path, const std::string& summary_fields, const std::vector<Row>& rows,
                     std::string& error) {
  apps::JsonLine j;
  j.begin_array("rows");
  for (const Row& r : rows) {
    if (!r.ran) continue;
    j.begin_array_object();
    add_row_fields(j, r);
    j.add("fabric", r.fabric)
        .add("seconds", r.seconds)
        .add("messages", r.messages)
        .add("fabric_dropped_forward", r.dropped_forward)
        .add("fabric_dropped_backward", r.dropped_backward)
        .add("fabric_frames_forward", r.frames_forward)
        .add("problem", r.problem);
    if (!r.run.sizes.empty()) {
      const perf::SizeResult& s = r.run.sizes.front();
      j.add("sender_busy_cycles", s.sender_busy_cycles)
          .add("packets_sent", s.packets_sent)
          .add("sender_cycles_per_packet", s.cycles_per_packet)
          .add("bw_peak_gbps", s.peak_bps / 1e9)
          .add("payload_ceiling_gbps", r.payload_ceiling_gbps);
    }
    const auto connection = [&](const char* key, const transport::ConnectionCounters& c) {
      j.begin_object(key);
      c.for_each([&](std::string_view name, std::uint64_t v) { j.add(name, v); });
      j.end_object();
    };
    connection("connection_sender", r.run.connection_a);
    connection("connection_receiver", r.run.connection_b);
    const auto fabric_counters = [&](const char* key, const fabric::FabricCounters& c) {
      j.begin_object(key);
      c.visit([&](auto name, std::uint64_t v) { j.add(name, v); });
      j.end_object();
    };
    fabric_counters("fabric_forward", r.run.forward);
    fabric_counters("fabric_backward", r.run.backward);
    j.end_object();
  }
  j.end_array();
  std::string text = std::move(j).finish();
  // The summary's fields first, then the detailed rows.
  text = summary_fields + "," + text.substr(1);
  std::ofstream f(path);
  f << text << '\n';
  if (!f) {
    error = fmt::format("cannot write --json file '{}': check the directory exists and is writable", path);
    return false;
  }
  return true;
}

const Row* find_row(const std::vector<Row>& rows, transport::Mode mode, RowKind kind, double loss_pct,
                    perf::PerfOp op = perf::PerfOp::write) {
  for (const Row& r : rows)
    if (r.ran && r.mode == mode && r.kind == kind && r.loss_pct == loss_pct && r.op == op) return &r;
  return nullptr;
}

void print_table(const std::vector<Row>& rows, bool two_modes, perf::PerfOp op) {
  std::printf("\n%-15s | %-44s", op == perf::PerfOp::read ? "READ loss" : "WRITE loss",
              "metaroce: Gb/s  of lossless  retransmits  spurious");
  if (two_modes) std::printf(" | %-44s", "rocev2: Gb/s  of lossless  retransmits  spurious");
  std::printf("\n");
  for (const Row& m : rows) {
    if (m.mode != transport::Mode::metaroce || !m.ran || m.op != op) continue;
    std::printf("%-15s | %14.2f %11.1f%% %12llu %9llu", row_label(m).c_str(), m.goodput_gbps, m.pct_of_lossless,
                static_cast<unsigned long long>(m.retransmits), static_cast<unsigned long long>(m.spurious));
    if (two_modes) {
      const Row* r = find_row(rows, transport::Mode::rocev2, m.kind, m.loss_pct, op);
      if (r != nullptr)
        std::printf(" | %12.2f %11.1f%% %12llu %9llu", r->goodput_gbps, r->pct_of_lossless,
                    static_cast<unsigned long long>(r->retransmits), static_cast<unsigned long long>(r->spurious));
    }
    std::printf("\n");
  }
}

bool start_eal(std::string& error) {
  engine::EalOptions eal;
  eal.program_name = "metaroce-bench-loss-sweep";
  eal.lcores = std::thread::hardware_concurrency() >= 2 ? "0-1" : "0";
  eal.hugepages = engine::HugepagePolicy::no;
  eal.log_level = "error";
  return engine::start_eal(eal, error);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string message;
  if (!parse_options(argc, argv, o, message)) {
    if (message == "help") {
      std::fputs(usage, stdout);
      return exit_ok;
    }
    std::fprintf(stderr, "metaroce-bench-loss-sweep: %s\nTry 'metaroce-bench-loss-sweep --help'.\n",
                 message.c_str());
    return exit_usage;
  }
  std::vector<Row> rows = plan_rows(o);
  for (const Row& r : rows) {
    const auto spec = fabric::parse_fabric_spec(r.fabric);
    if (!spec.ok()) {
      std::fprintf(stderr, "metaroce-bench-loss-sweep: fabric '%s': %s\n", r.fabric.c_str(), spec.error.c_str());
      return exit_failed;
    }
  }
  std::string error;
  if (!start_eal(error)) {
    std::fprintf(stderr, "metaroce-bench-loss-sweep: %s\n", error.c_str());
    return exit_failed;
  }
  const unsigned lcores = rte_lcore_count();
  std::printf("# loss-sweep over DPDK net_ring, one process, %u lcores (sender, receiver), no hugepages\n", lcores);
  const cc::CcConfig windows;
  std::printf("# 1 MiB WRITEs (READ rows: 1 MiB READs), MTU %u, tx depth %u, every byte verified; metaroce %u paths, rocev2 1;"
              " fixed windows of %u packets a path, %u a connection; %g s of posting per row\n",
              mtu, o.tx_depth, metaroce_paths, windows.fixed_path_window, windows.fixed_connection_window,
              o.duration_s);
  std::printf("# burst row: '%s' (%.2f%% average); reorder row: '%s'\n", std::string(burst_model).c_str(),
              burst_average_loss_pct, std::string(reorder_model).c_str());
  std::printf("# cpu_busy = the sender lcore's busy TSC cycles / elapsed cycles (it also runs the forward link);\n"
              "# others = the share of this machine's CPU time other processes took during the row\n");
  std::printf("# of_link = goodput / the most payload the link carries in this mode's frames\n");
  std::printf("# stalls = turns of either lcore that began >= 1 ms after the one before (the longest, ms)\n");
  std::printf("%-9s %-5s %-15s %10s %11s %8s %12s %9s %11s %9s %7s %12s\n", "mode", "op", "loss", "goodput",
              "of_lossless", "of_link", "retransmits", "spurious", "fabric_drop", "cpu_busy", "others", "stalls");
  std::fflush(stdout);

  bool all_ok = true;
  // What the CPU alone sustains: lossless metaroce with the same settings and
  // the fabric in (its copies included), but no rate limit. The link must be
  // well below it for the rows to measure the link.
  Options cpu_options = o;
  cpu_options.duration_s = std::min(o.duration_s, 3.0);
  Row cpu;
  cpu.fabric = fmt::format("overhead {}", link_overhead_bytes);
  run_row(cpu_options, cpu);
  std::printf("%-9s %-5s %-15s %5.2f Gb/s %11s %8s %12llu %9llu %11s %8.0f%% %6.0f%%%s\n", "metaroce", "write",
              "no rate limit",
              cpu.goodput_gbps, "", "", static_cast<unsigned long long>(cpu.retransmits),
              static_cast<unsigned long long>(cpu.spurious), "", 100 * cpu.cpu_busy_share, 100 * cpu.others_cpu_share,
              cpu.ok ? "  (what the CPU carries)" : "  FAILED");
  if (!cpu.ok) {
    std::printf("#   %s\n", cpu.problem.c_str());
    all_ok = false;
  }
  if (!o.link_given && cpu.goodput_gbps * link_share_of_cpu < o.link_gbps) {
    // In steps of 0.5 Gb/s, so reruns on one machine mostly share a rate.
    o.link_gbps = std::max(min_auto_link_gbps, std::floor(cpu.goodput_gbps * link_share_of_cpu * 2) / 2);
    rows = plan_rows(o);
    std::printf("# the CPU carries less than %g Gb/s here: the link is %g%% of it, rounded down\n",
                default_link_gbps / link_share_of_cpu, 100 * link_share_of_cpu);
  }
  std::printf("# link: %g Gb/s each way (%s), inline lib/fabric in both directions\n", o.link_gbps,
              link_spec(o.link_gbps).c_str());
  std::fflush(stdout);

  double lossless[2][2] = {{0, 0}, {0, 0}};  // [write, read][metaroce, rocev2]
  double max_busy = 0, max_others = 0;
  for (Row& r : rows) {
    run_row(o, r);
    const int m = r.mode == transport::Mode::rocev2 ? 1 : 0;
    const int op = r.op == perf::PerfOp::read ? 1 : 0;
    if (r.kind == RowKind::random && r.loss_pct == 0.0) lossless[op][m] = r.goodput_gbps;
    r.pct_of_lossless = lossless[op][m] > 0 ? 100.0 * r.goodput_gbps / lossless[op][m] : 0.0;
    max_busy = std::max(max_busy, r.cpu_busy_share);
    max_others = std::max(max_others, r.others_cpu_share);
    std::printf("%-9s %-5s %-15s %5.2f Gb/s %10.1f%% %7.1f%% %12llu %9llu %11llu %8.0f%% %6.0f%% %4llu (%4.1f)%s\n",
                mode_name(r.mode).c_str(), perf::to_string(r.op), row_label(r).c_str(), r.goodput_gbps, r.pct_of_lossless, 100 * r.link_share,
                static_cast<unsigned long long>(r.retransmits), static_cast<unsigned long long>(r.spurious),
                static_cast<unsigned long long>(r.dropped_forward + r.dropped_backward), 100 * r.cpu_busy_share,
                100 * r.others_cpu_share, static_cast<unsigned long long>(r.lcore_stalls), r.longest_stall_ms,
                r.ok ? "" : "  FAILED");
    if (!r.ok) {
      std::printf("#   %s\n", r.problem.c_str());
      all_ok = false;
    }
    std::fflush(stdout);
  }

  print_table(rows, !o.quick, perf::PerfOp::write);
  print_table(rows, !o.quick, perf::PerfOp::read);
  // The link is the bottleneck when lossless metaroce fills it and the CPU
  // alone carries more.
  const Row* m0 = find_row(rows, transport::Mode::metaroce, RowKind::random, 0.0);
  const bool link_bound = m0 != nullptr && m0->link_share >= 0.9 && cpu.goodput_gbps > m0->payload_ceiling_gbps;
  std::printf("\nlink %g Gb/s, %.0f%% of the %.2f Gb/s the CPU carries without it: lossless metaroce carried %.2f Gb/s,"
              " %.1f%% of the %.2f Gb/s of payload the link fits; the sender lcore was busy at most %.0f%% of its"
              " cycles in any row:\n%s\n",
              o.link_gbps, cpu.goodput_gbps > 0 ? 100 * o.link_gbps / cpu.goodput_gbps : 0.0, cpu.goodput_gbps,
              m0 != nullptr ? m0->goodput_gbps : 0.0, m0 != nullptr ? 100 * m0->link_share : 0.0,
              m0 != nullptr ? m0->payload_ceiling_gbps : 0.0, 100 * max_busy,
              link_bound ? "the link, not the CPU, is the bottleneck"
                         : "the CPU (or a neighbour on it) limited some rows: give a lower --link-gbps or a quiet machine");
  // Two busy-polling lcores on a 2-vCPU machine: a neighbour's process
  // takes turns from them, and a stalled lcore looks like loss to the peer.
  constexpr double disturbed_share = 0.1;
  if (max_others >= disturbed_share)
    std::printf("other processes took up to %.0f%% of this machine's CPU during a row: those rows measure the"
                " contention, not only the link; rerun with nothing else running\n",
                100 * max_others);
  else
    std::printf("other processes took at most %.0f%% of this machine's CPU in any row\n", 100 * max_others);
  // Spurious resends: each row that has them, and the stalls of its lcores.
  for (const Row& r : rows) {
    if (!r.ran || r.spurious == 0) continue;
    std::printf("%s %s %s: %llu spurious resends with %llu lcore stalls, the longest %.1f ms: %s\n",
                mode_name(r.mode).c_str(), perf::to_string(r.op), row_label(r).c_str(),
                static_cast<unsigned long long>(r.spurious), static_cast<unsigned long long>(r.lcore_stalls),
                r.longest_stall_ms,
                r.longest_stall_ms * 1e6 >= double(perf::loopback_min_rto_ns)
                    ? "a stall outlasted the RTO floor, so a timer fired with nothing lost"
                    : "no stall outlasted the RTO floor");
  }
  const Row* m1 = find_row(rows, transport::Mode::metaroce, RowKind::random, 1.0);
  const Row* m10 = find_row(rows, transport::Mode::metaroce, RowKind::random, 10.0);
  if (m1 != nullptr && m10 != nullptr)
    std::printf("targets: metaroce >= 95%% of lossless at 1%% loss: %.1f%% (%s); >= 80%% at 10%%: %.1f%% (%s)\n",
                m1->pct_of_lossless, m1->pct_of_lossless >= 95 ? "met" : "NOT met", m10->pct_of_lossless,
                m10->pct_of_lossless >= 80 ? "met" : "NOT met");
  const Row* r1 = find_row(rows, transport::Mode::metaroce, RowKind::random, 1.0, perf::PerfOp::read);
  const Row* r10 = find_row(rows, transport::Mode::metaroce, RowKind::random, 10.0, perf::PerfOp::read);
  if (r1 != nullptr && r10 != nullptr)
    std::printf("READ targets: metaroce >= 95%% of lossless at 1%% loss: %.1f%% (%s); >= 80%% at 10%%: %.1f%% (%s)\n",
                r1->pct_of_lossless, r1->pct_of_lossless >= 95 ? "met" : "NOT met", r10->pct_of_lossless,
                r10->pct_of_lossless >= 80 ? "met" : "NOT met");
  std::printf(all_ok ? "verify: every byte of every message in every row checked, all correct\n"
                     : "verify: some row lost or damaged messages (FAILED above)\n");

  apps::JsonLine summary;
  summary.add("bench", "loss-sweep")
      .add("link_gbps", o.link_gbps)
      .add("link_from_cpu", !o.link_given && o.link_gbps < default_link_gbps)
      .add("cpu_busy_share", round_to(max_busy, 3))
      .add("cpu_gbps", round_to(cpu.goodput_gbps, 3))
      .add("link_bound", link_bound)
      .add("others_cpu_share", round_to(max_others, 3))
      .add("duration_s", o.duration_s)
      .add("message_bytes", message_bytes)
      .add("mtu", mtu)
      .add("metaroce_paths", unsigned{metaroce_paths})
      .add("tx_depth", o.tx_depth)
      .add("ok", all_ok);
  std::string summary_text = std::move(summary).finish();
  summary_text.pop_back();  // the closing brace: rows follow
  if (!o.json_path.empty() && !write_full_json(o.json_path, summary_text, rows, error)) {
    std::fprintf(stderr, "metaroce-bench-loss-sweep: %s\n", error.c_str());
    all_ok = false;
  }
  std::printf("%s,\"rows\":%s}\n", summary_text.c_str(), rows_json(rows).c_str());
  std::fflush(stdout);
  rte_eal_cleanup();
  return all_ok ? exit_ok : exit_failed;
}
