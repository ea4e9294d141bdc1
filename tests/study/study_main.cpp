// metaroce-study NAME [--short] [--json PATH] [--variant N] [--wall-limit S]
// [--progress] [--buffer-kb KB] [--k K --bytes B] [--cdf NAME|FILE --load L
// --background-ms MS]: runs a named fabric study (tools/study), prints a
// table and, as its last line, one JSON object:
// {"study":NAME,"rows":[...],"events_per_s":..,"peak_rss_mb":..}.
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include <sys/resource.h>

#include "common/json_line.hpp"
#include "study.hpp"

using namespace metaroce;

namespace {

constexpr const char* usage =
    "usage: metaroce-study NAME [--short] [--json PATH] [--variant N] [--wall-limit S] [--progress] [--buffer-kb KB] "
    "[--k K --bytes B (alltoall)] [--cdf NAME|FILE --load L --background-ms MS (a background load of random flows)]; "
    "studies: allreduce-128 alltoall-1024 link-failure background-128";

// A number from the command line, or a message naming the option.
double number(const std::string& option, const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || !(v >= 0))
    throw std::invalid_argument(option + " wants a number of at least 0, got '" + text + "'");
  return v;
}

// A whole number from the command line, at most `max`, or a message
// naming the option.
std::uint64_t whole(const std::string& option, const std::string& text, std::uint64_t max) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty() || v > max)
    throw std::invalid_argument(option + " wants a whole number from 0 to " + std::to_string(max) + ", got '" +
                                text + "'");
  return v;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string name, json_path;
  bool short_form = false;
  int only = -1;
  double wall_limit = 0;
  bool progress = false;
  std::uint32_t k = 0;          // alltoall: fat-tree k
  std::uint64_t bytes = 0;      // alltoall: bytes per peer
  std::uint64_t buffer_kb = 0;  // egress buffer per switch port (0: the study's)
  std::string cdf;              // background: flow sizes (empty: the study's)
  double load = -1;             // background: share of each host's link (< 0: the study's)
  double background_ms = -1;    // background: how long flows start for (< 0: the study's)
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    const auto value = [&] {
      if (!has_value) throw std::invalid_argument(arg + " wants a value");
      return std::string(argv[++i]);
    };
    if (arg == "--short") {
      short_form = true;
    } else if (arg == "--json") {
      json_path = value();
    } else if (arg == "--wall-limit") {
      wall_limit = number(arg, value());
    } else if (arg == "--k") {
      k = static_cast<std::uint32_t>(whole(arg, value(), 1024));
    } else if (arg == "--bytes") {
      bytes = whole(arg, value(), std::uint64_t{1} << 30);
    } else if (arg == "--buffer-kb") {
      buffer_kb = whole(arg, value(), 1'000'000);
    } else if (arg == "--cdf") {
      cdf = value();
    } else if (arg == "--load") {
      load = number(arg, value());
    } else if (arg == "--background-ms") {
      background_ms = number(arg, value());
    } else if (arg == "--progress") {
      progress = true;
    } else if (arg == "--variant") {
      only = static_cast<int>(whole(arg, value(), 1000));
    } else if (name.empty() && !arg.empty() && arg[0] != '-') {
      name = arg;
    } else {
      std::cerr << "metaroce-study: unknown argument '" << arg << "'\n" << usage << "\n";
      return 2;
    }
  }
  study::StudySpec spec;
  std::vector<study::Variant> variants;
  if (name == "allreduce-128") {
    spec = study::allreduce_128(short_form);
    variants = study::allreduce_variants();
  } else if (name == "link-failure") {
    spec = study::link_failure(short_form);
    variants = study::link_failure_variants();
  } else if (name == "alltoall-1024") {
    spec = study::alltoall_1024(short_form, k, bytes);
    variants = study::alltoall_variants();
  } else if (name == "background-128") {
    spec = study::background_128(short_form);
    variants = study::background_variants();
  } else {
    std::cerr << usage << "\n";
    return 2;
  }
  if (!cdf.empty() || load >= 0 || background_ms >= 0) {
    // A background load on any study: what is not given is the
    // background-128 study's (web-search, 50%, 5 ms).
    study::Background& b = spec.background;
    if (b.load == 0) {
      b.load = 0.5;
      b.sizes_name = "web-search";
      b.duration_ns = 5'000'000;
    }
    if (!cdf.empty()) b.sizes_name = cdf;
    b.sizes = study::flow_sizes(b.sizes_name);
    if (load >= 0) b.load = load;
    if (background_ms >= 0) b.duration_ns = static_cast<std::uint64_t>(background_ms * 1e6);
    if (!(b.load > 0 && b.load <= 1)) throw std::invalid_argument("--load wants a share of the link in (0, 1]");
  }
  if (only >= 0 && static_cast<std::size_t>(only) >= variants.size())
    throw std::invalid_argument("--variant " + std::to_string(only) + ": this study has variants 0.." +
                                std::to_string(variants.size() - 1));
  spec.wall_limit_s = wall_limit;
  if (buffer_kb != 0) spec.buffer_bytes = buffer_kb * 1000;
  spec.progress = progress;
  apps::JsonLine line;
  line.add("study", name);
  line.begin_array("rows");
  std::uint64_t events = 0;
  std::uint64_t hosts = 0;
  double wall = 0;
  std::printf("# %s%s\n", spec.name.c_str(), short_form ? " (short form)" : "");
  if (spec.background.load > 0)
    std::printf("# background: %s flow sizes (mean %.0f bytes) at %.0f%% of every host's link, flows starting for %.3f ms\n",
                spec.background.sizes_name.c_str(), spec.background.sizes.mean(), spec.background.load * 100,
                static_cast<double>(spec.background.duration_ns) / 1e6);
  std::printf("%-9s %-9s %-5s %-4s %5s %9s %13s %9s %9s %9s %8s %10s %8s %6s %7s\n", "mode", "cc", "share", "pfc", "loss", "done",
              "completion_ms", "p50_slow", "p99_slow", "gbit/s", "retx", "pause_us", "pauses", "drops", "wall_s");
  for (std::size_t i = 0; i < variants.size(); ++i) {
    if (only >= 0 && static_cast<std::size_t>(only) != i) continue;
    const study::StudyResult r = study::run(spec, variants[i]);
    events += r.fabric.events;
    hosts = r.hosts;
    wall += r.wall_s;
    const std::uint64_t drops = r.ports.dropped_queue_full + r.ports.dropped_loss + r.ports.dropped_link_down;
    std::printf("%-9s %-9s %-5s %-4s %4.1f%% %9s %13.3f %9.2f %9.2f %9.1f %8llu %10.1f %8llu %6llu %7.1f\n",
                r.variant.mode.c_str(), r.variant.cc.c_str(),
                r.variant.mode == "metaroce" ? (r.variant.receive_share ? "on" : "off") : "-", r.variant.pfc ? "on" : "off", r.variant.loss * 100,
                r.completed ? "yes" : "NO", static_cast<double>(r.completion_ns) / 1e6,
                r.transfers != 0 ? r.p50_fct_slowdown : r.background_p50_slowdown,
                r.transfers != 0 ? r.p99_fct_slowdown : r.background_p99_slowdown, r.goodput_gbps, static_cast<unsigned long long>(r.retransmitted_packets),
                static_cast<double>(r.ports.paused_ns) / 1e3, static_cast<unsigned long long>(r.ports.pauses_sent),
                static_cast<unsigned long long>(drops), r.wall_s);
    if (r.background_flows != 0) {
      std::printf("          background: %llu of %llu flows done; FCT slowdown p50 / p99 by size:",
                  static_cast<unsigned long long>(r.background_done),
                  static_cast<unsigned long long>(r.background_flows));
      for (const study::SizeBin& b : r.background_bins) {
        if (b.flows == 0) continue;
        std::printf(" %s%s %llu: %.2f / %.2f;", b.max_bytes != 0 ? "<=" : ">",
                    b.max_bytes != 0 ? std::to_string(b.max_bytes).c_str() : "10000000",
                    static_cast<unsigned long long>(b.flows), b.p50_slowdown, b.p99_slowdown);
      }
      std::printf("\n");
    }
    std::fflush(stdout);
    // Collective completion time of each step: when its last transfer finished (ms).
    std::string steps = "[";
    for (std::size_t k = 0; k < r.step_end_ns.size(); ++k) {
      char number[32];
      std::snprintf(number, sizeof number, "%s%.6f", k == 0 ? "" : ",", static_cast<double>(r.step_end_ns[k]) / 1e6);
      steps += number;
    }
    steps += "]";
    line.begin_array_object()
        .add("mode", r.variant.mode)
        .add("cc", r.variant.cc)
        .add("pfc", r.variant.pfc)
        .add("receive_share", r.variant.mode == "metaroce" && r.variant.receive_share)
        .add("loss", r.variant.loss)
        .add("completed", r.completed)
        .add("completion_ms", static_cast<double>(r.completion_ns) / 1e6)
        .add_raw("step_end_ms", steps)
        .add("p50_fct_slowdown", r.transfers != 0 ? r.p50_fct_slowdown : r.background_p50_slowdown)
        .add("p99_fct_slowdown", r.transfers != 0 ? r.p99_fct_slowdown : r.background_p99_slowdown)
        .add("goodput_gbps", r.goodput_gbps)
        .add("job_bytes", r.job_bytes)
        .add("bytes_placed", r.bytes_placed)
        .add("retransmitted_packets", r.retransmitted_packets)
        .add("rto_timeouts", r.rto_timeouts)
        .add("dropped_link_down", r.ports.dropped_link_down)
        .add("reroutes", r.fabric.reroutes)
        .add("pause_time_us", static_cast<double>(r.ports.paused_ns) / 1e3)
        .add("pauses_sent", r.ports.pauses_sent)
        .add("pauses_received", r.ports.pauses_received)
        .add("drops_queue_full", r.ports.dropped_queue_full)
        .add("drops_loss", r.ports.dropped_loss)
        .add("ecn_marked", r.ports.ecn_marked)
        .add("peak_queue_kb", static_cast<double>(r.ports.peak_queued_bytes) / 1e3)
        .add("peak_pfc_ingress_kb", static_cast<double>(r.ports.peak_ingress_bytes) / 1e3)
        .add("connections", r.connections)
        .add("bytes_per_connection", r.connections ? r.connection_bytes / r.connections : 0)
        .add("events", r.fabric.events)
        .add("peak_pending_events", r.fabric.peak_pending_events)
        .add("peak_frames", r.fabric.peak_frames)
        .add("transfers", r.transfers)
        .add("transfers_done", r.transfers_done)
        .add("failed_completions", r.failed_completions)
        .add("connections_in_error", r.connections_in_error)
        .add("setup_s", r.setup_s)
        .add("wall_s", r.wall_s);
    if (r.background_flows != 0) {
      line.begin_object("background")
          .add("cdf", spec.background.sizes_name)
          .add("load", spec.background.load)
          .add("duration_ms", static_cast<double>(spec.background.duration_ns) / 1e6)
          .add("flows", r.background_flows)
          .add("done", r.background_done)
          .add("bytes", r.background_bytes)
          .add("p50_slowdown", r.background_p50_slowdown)
          .add("p99_slowdown", r.background_p99_slowdown)
          .begin_array("bins");
      for (const study::SizeBin& bin : r.background_bins) {
        line.begin_array_object()
            .add("max_bytes", bin.max_bytes)
            .add("flows", bin.flows)
            .add("done", bin.done)
            .add("p50_slowdown", bin.p50_slowdown)
            .add("p99_slowdown", bin.p99_slowdown)
            .end_object();
      }
      line.end_array().end_object();
    }
    line.end_object();
  }
  line.end_array();
  line.add("events_per_s", wall > 0 ? static_cast<double>(events) / wall : 0.0);
  // CPU time: steadier than wall time on a machine shared with other jobs.
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  line.add("cpu_s", cpu);
  line.add("events_per_cpu_s", cpu > 0 ? static_cast<double>(events) / cpu : 0.0);
  line.add("peak_rss_mb", study::peak_rss_mb());
  // The whole process (fabric, frames, hosts, connections) per host.
  line.add("peak_rss_per_host_kb", hosts != 0 ? study::peak_rss_mb() * 1024 / static_cast<double>(hosts) : 0.0);
  const std::string json = std::move(line).finish();
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << json << '\n';
    if (!out) {
      std::cerr << "metaroce-study: cannot write " << json_path << "\n";
      return 1;
    }
  }
  std::printf("%s\n", json.c_str());
  return 0;
} catch (const std::exception& e) {
  std::cerr << "metaroce-study: " << e.what() << "\n";
  return 2;
}
