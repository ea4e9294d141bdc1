// metaroce-fabric's output: a stats line per interval and the JSON summary.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "metaroce-fabric/fabric_node.hpp"

namespace metaroce::fabric_app {

struct DirectionReport {
  std::string name;   // a_to_b
  std::string label;  // a->b
  std::string spec;   // canonical
  DirectionSnapshot snapshot;
};

// "[   2.0 s] a->b rx N fwd N drop N mark N in flight N X.XX Gb/s | b->a ...":
// counts since the start, Gb/s of the frames forwarded since `previous`.
void print_stats_line(std::FILE* out, double elapsed_s, const std::vector<DirectionReport>& now,
                      const std::vector<DirectionReport>& previous);

struct RunSummary {
  std::string port_a, port_b;
  double duration_s = 0.0;
  unsigned lcores = 1;
  std::string stopped_by;  // duration, idle, signal
  std::vector<DirectionReport> directions;
};

// One JSON object (one line): per direction received, forwarded, dropped by
// cause, ecn_marked, duplicated, corrupted, reordered, in_flight, bytes, spec.
std::string summary_json(const RunSummary& summary);
bool write_summary(const std::string& path, const RunSummary& summary, std::string& error);

}  // namespace metaroce::fabric_app
