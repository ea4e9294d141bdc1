// metaroce-fabric's output: a stats line per interval and the JSON summary.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "metaroce-fabric/fabric_node.hpp"
#include "metaroce-fabric/switch_node.hpp"

namespace metaroce::fabric_app {

struct LaneReport {
  std::uint16_t lane = 0;  // the queue it forwards
  unsigned lcore = 0;
  std::string spec;  // canonical, with the lane's share
  DirectionSnapshot snapshot;
};

struct DirectionReport {
  std::string name;   // a_to_b
  std::string label;  // a->b
  std::string spec;   // canonical
  DirectionSnapshot snapshot;  // the lanes' summed (taken_ns, last_busy_ns: the latest lane's)
  std::vector<LaneReport> lanes;
};

// The reports of `directions` from their lanes' published snapshots.
std::vector<DirectionReport> direction_reports(const std::vector<DirectionLanes>& directions);

// "[   2.0 s] a->b rx N fwd N drop N mark N in flight N X.XX Gb/s | b->a ...":
// counts since the start, Gb/s of the frames forwarded since `previous`.
void print_stats_line(std::FILE* out, double elapsed_s, const std::vector<DirectionReport>& now,
                      const std::vector<DirectionReport>& previous);

struct RunSummary {
  std::string port_a, port_b;
  double duration_s = 0.0;
  unsigned lcores = 1;      // EAL lcores that forwarded
  std::uint16_t lanes = 1;  // per direction (--lcores)
  std::string stopped_by;  // duration, idle, signal
  std::vector<DirectionReport> directions;
};

// One JSON object (one line): per direction received, forwarded, dropped by
// cause, ecn_marked, duplicated, corrupted, reordered, in_flight, bytes, spec,
// and "lanes": the same per lane (lane, lcore, its spec).
std::string summary_json(const RunSummary& summary);
bool write_summary(const std::string& path, const RunSummary& summary, std::string& error);
// `json` and a newline to `path`; false with one line naming the fix.
bool write_json_file(const std::string& path, const std::string& json, std::string& error);

// The switch form (--ports N): "[   2.0 s] p0 rx N no route N out N drop N
// mark N q99 N B X.XX Gb/s | p1 ...", counts since the start, Gb/s of the
// frames port i sent out since `previous`.
void print_switch_stats_line(std::FILE* out, double elapsed_s, const std::vector<SwitchPortSnapshot>& now,
                             const std::vector<SwitchPortSnapshot>& previous);

struct SwitchSummary {
  double duration_s = 0.0;
  std::string stopped_by;
  std::size_t routes = 0;
  std::vector<SwitchPortSnapshot> ports;
};
// One JSON object: per port (array "port") its name, spec, in (received,
// dropped_no_route, ...), out (as a direction's counters), queue_bytes
// (p50, p99, max, samples).
std::string switch_summary_json(const SwitchSummary& summary);

}  // namespace metaroce::fabric_app
