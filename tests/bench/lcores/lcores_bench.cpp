// tools/bench lcores: what a data packet costs the node's lcores at 1 and
// at 2 lcores per side, in one run. metaroce-perf --loopback -q 8, 64 KiB
// WRITEs, idle sleep on, once with --lcores 1 and once with --lcores 2.
//
// The cost is CPU time, not TSC cycles: each lcore's thread CPU time
// (CLOCK_THREAD_CPUTIME_ID, "lcores_cpu_ns" in metaroce-perf's --json),
// summed over every lcore of both sides, at the TSC rate, per data packet
// sent. With more lcore threads than CPUs (4 on a 2-CPU machine), TSC
// cycles between two reads include the time another thread held the CPU;
// thread CPU time does not. Idle turns count too (a poll that finds
// nothing, then a sleep): they are the price of an lcore that waits.
//
// Target: at 2 lcores per side, at most 1.15x the 1-lcore figure (the
// per-packet cost does not grow with lcores: nothing is shared between
// them). Human-readable lines, then one JSON object as the last line.
//
// A third run prices the software hand-off: --lcores 2 --software-handoff,
// the pair delivering every frame to queue 0 (a PMD that cannot steer) and
// lcore 0 of each side passing lcore 1's frames to it over a ring. Its
// figure against the steered 2-lcore one is "handoff_ratio" (a figure, no
// target).
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
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

constexpr double target_ratio = 1.15;

// Cycles per data packet at `lcores` per side; null when the run failed.
Figure cycles_per_packet(unsigned lcores, bool handoff, const std::string& work) {
  const std::string json_path = fmt::format("{}/lcores{}{}.json", work, lcores, handoff ? "h" : "");
  const std::string command =
      fmt::format("{} --loopback --lcores {}{} -q 8 -s 65536 -n 20000 --idle-sleep-us 20 --json {}",
                  METAROCE_PERF_PATH, lcores, handoff ? " --software-handoff" : "", json_path);
  std::printf("  $ %s\n", command.c_str());
  if (run(command) != 0) {
    std::printf("  metaroce-perf failed (exit status above): no figure\n");
    return std::nullopt;
  }
  const std::string json = read_file(json_path);
  const Figure cpu_ns = json_number(json, "lcores_cpu_ns");
  const Figure packets = json_number(json, "packets_sent");
  const Figure tsc_hz = json_number(json, "tsc_hz");
  if (!cpu_ns || !packets || !tsc_hz || *packets <= 0) return std::nullopt;
  const double cycles = *cpu_ns * *tsc_hz / 1e9 / *packets;
  std::printf("  %u lcore(s) per side%s: %.0f data packets, %.3f s of lcore CPU time, %.0f cycles per data packet\n",
              lcores, handoff ? ", software hand-off" : "", *packets, *cpu_ns / 1e9, cycles);
  return cycles;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  const std::optional<std::string> scratch = metaroce::bench::start_benchmark("lcores", argc, argv, exit_code);
  if (!scratch) return exit_code;
  const std::string& work = *scratch;
  std::printf("busy cost per data packet by thread CPU time (CLOCK_THREAD_CPUTIME_ID) at the TSC rate, both sides\n");
  std::vector<Figure> rows;
  for (unsigned lcores : {1u, 2u}) rows.push_back(cycles_per_packet(lcores, false, work));
  const Figure handoff = cycles_per_packet(2, true, work);
  const Figure ratio = rows[0] && rows[1] && *rows[0] > 0 ? Figure(*rows[1] / *rows[0]) : std::nullopt;
  std::printf("  2 lcores / 1 lcore: %s (target <= %.2f): %s\n", json_value(ratio, 3).c_str(), target_ratio,
              !ratio ? "not measured" : *ratio <= target_ratio ? "met" : "MISSED");
  const Figure handoff_ratio = handoff && rows[1] && *rows[1] > 0 ? Figure(*handoff / *rows[1]) : std::nullopt;
  std::printf("  2 lcores, software hand-off / steered: %s\n", json_value(handoff_ratio, 3).c_str());
  if (std::system(fmt::format("rm -rf '{}'", work).c_str()) != 0) std::printf("  (could not remove %s)\n", work.c_str());
  std::printf("{\"bench\":\"lcores\",\"rows\":[{\"lcores\":1,\"cycles_per_packet\":%s},{\"lcores\":2,"
              "\"cycles_per_packet\":%s},{\"lcores\":2,\"software_handoff\":true,\"cycles_per_packet\":%s}],"
              "\"ratio\":%s,\"target_ratio\":%.2f,\"handoff_ratio\":%s,\"clock\":\"thread_cputime\"}\n",
              json_value(rows[0], 0).c_str(), json_value(rows[1], 0).c_str(), json_value(handoff, 0).c_str(),
              json_value(ratio, 3).c_str(), target_ratio, json_value(handoff_ratio, 3).c_str());
  return ratio && *ratio <= target_ratio ? 0 : 1;
}
