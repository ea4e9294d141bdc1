// metaroce-perf: the ib_write_bw of metaroce. --loopback: both ends in one
// process over a net_ring pair; --server / --client: one end each over a real
// port (see doc/APPS.md, "metaroce-perf").
#include <rte_eal.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "common/pcap_file.hpp"
#include "engine/eal.hpp"
#include "metaroce-perf/loopback_run.hpp"
#include "metaroce-perf/raw_run.hpp"
#include "metaroce-perf/perf_options.hpp"
#include "metaroce-perf/perf_report.hpp"
#include "metaroce-perf/remote_run.hpp"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_failed = 1;
constexpr int exit_usage = 2;

bool start_eal(const metaroce::perf::PerfOptions& o, std::string& error) {
  if (!o.eal_args.empty()) {
    std::vector<std::string> args = {"metaroce-perf"};
    args.insert(args.end(), o.eal_args.begin(), o.eal_args.end());
    return metaroce::engine::start_eal_with_arguments(args, error);
  }
  metaroce::engine::EalOptions eal;
  eal.program_name = "metaroce-perf";
  // A sender and a receiver lcore per --lcores, mapped onto the CPUs there
  // are when they are fewer (threads then share CPUs: use --idle-sleep-us).
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  const unsigned wanted = 2u * o.lcores;
  if (o.lcores == 1) eal.lcores = cpus >= 2 ? "0-1" : "0";
  else if (wanted <= cpus) eal.lcores = fmt::format("0-{}", wanted - 1);
  else eal.lcores = fmt::format("(0-{})@(0-{})", wanted - 1, cpus - 1);
  eal.log_level = "error";
  return metaroce::engine::start_eal(eal, error);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace metaroce;
  perf::PerfOptions options;
  std::string message;
  switch (perf::parse_perf_options(argc, argv, options, message)) {
    case perf::ParseOutcome::help:
      std::fputs(message.c_str(), stdout);
      return exit_ok;
    case perf::ParseOutcome::error:
      std::fprintf(stderr, "metaroce-perf: %s\nTry 'metaroce-perf --help'.\n", message.c_str());
      return exit_usage;
    case perf::ParseOutcome::run:
      break;
  }

  if (options.role != perf::PerfRole::loopback && !options.capture_path.empty()) {
    std::fprintf(stderr, "metaroce-perf: --capture is for --loopback; on a real port capture the interface "
                         "(e.g. tcpdump -i IFACE -w FILE udp port 4791)\n");
    return exit_usage;
  }
  apps::PcapWriter capture;
  std::mutex capture_mutex;
  perf::FrameTap tap;
  if (!options.capture_path.empty()) {
    std::string error;
    if (!capture.open(options.capture_path, error)) {
      std::fprintf(stderr, "metaroce-perf: --capture: %s\n", error.c_str());
      return exit_usage;
    }
    // Both lcores transmit: one writer, one lock (captures cost throughput).
    tap = [&](std::span<const std::uint8_t> frame, std::uint64_t ns) {
      std::lock_guard lock(capture_mutex);
      capture.write(frame, ns);
    };
  }

  std::string error;
  // --server/--client start EAL in their endpoint (metaroce::Endpoint::open).
  if (options.role == perf::PerfRole::loopback && !start_eal(options, error)) {
    std::fprintf(stderr, "metaroce-perf: %s\n", error.c_str());
    return exit_failed;
  }
  perf::print_header(stdout, options);
  const perf::RunResult run = options.role == perf::PerfRole::server   ? perf::run_server(options, stdout)
                              : options.role == perf::PerfRole::client ? perf::run_client(options, stdout)
                              : options.raw ? perf::run_raw(options, stdout)
                                            : perf::run_loopback(options, tap, stdout);
  int status = exit_ok;
  if (!run.error.empty()) {
    std::fprintf(stderr, "metaroce-perf: %s\n", run.error.c_str());
    status = exit_failed;
  }
  if (!run.sizes.empty()) perf::print_table(stdout, options, run);
  if (run.failed()) status = exit_failed;
  if (!options.json_path.empty() && !perf::write_json(options.json_path, options, run, error)) {
    std::fprintf(stderr, "metaroce-perf: %s\n", error.c_str());
    status = exit_failed;
  }
  if (!options.capture_path.empty() && !capture.close()) {
    std::fprintf(stderr, "metaroce-perf: --capture: writing '%s' failed (disk full?)\n", options.capture_path.c_str());
    status = exit_failed;
  }
  if (metaroce::engine::eal_started()) metaroce::engine::stop_eal();
  return status;
}
