// metaroce-fabric's command line: the app's options before `--`, EAL's after.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/command_line.hpp"

#include "fabric/config.hpp"
#include "fabric/forwarding_table.hpp"

namespace metaroce::fabric_app {

using ParseOutcome = apps::ParseOutcome;

struct FabricOptions {
  std::string port_a, port_b;       // EAL device names
  fabric::FabricConfig a_to_b{}, b_to_a{};
  double duration_s = 0.0;          // 0: until SIGINT / SIGTERM
  std::uint32_t idle_sleep_us = 0;  // 0: busy poll
  std::string json_path;
  double stats_interval_s = 1.0;    // 0: no stats lines
  double exit_when_idle_s = 0.0;    // 0: never
  std::uint32_t mbufs = 8192;       // receive pool per port: bounds the frames in flight
  // Lanes per direction (--lcores N, two-port form): each port has N queues,
  // lane k forwards rx queue k of one port to tx queue k of the other, with
  // 1/N of the rate, queue limit and ECN thresholds (lane_config).
  std::uint16_t lanes = 1;
  std::vector<std::string> eal_args;  // what came after `--`

  // The switch form (--ports N; 0: the two-port form above): port i is the
  // i-th --port, its output queue and impairments out[i] (--out, then
  // --out-port I=SPEC), frames routed by `table` (--route, --routes).
  std::uint16_t ports = 0;
  std::vector<std::string> port_names;
  std::vector<fabric::FabricConfig> out;
  fabric::ForwardingTable table{0};
};

inline constexpr std::uint16_t max_switch_ports = 64;
inline constexpr std::uint16_t max_lanes = 16;

// Lane `lane` of `lanes` of a direction whose impairments are `whole`: the
// same impairments with 1/lanes of the rate, the queue limit and the ECN
// thresholds (each lane is a queue of its own, as a NIC's per-queue
// shapers are), drawn with a seed of its own (lane 0 keeps `whole`'s, so
// one lane is the whole direction).
[[nodiscard]] fabric::FabricConfig lane_config(const fabric::FabricConfig& whole, std::uint16_t lanes,
                                               std::uint16_t lane);

// `message` is the help text (help) or a one-line error (error).
ParseOutcome parse_fabric_options(int argc, const char* const* argv, FabricOptions& out, std::string& message);

// The EAL command line (program name first): the defaults
//   -l 0 (with `lanes` above 1: an lcore per lane and direction, 2 x lanes,
//         mapped onto the `cpus` there are: --lcores (0-2N-1)@(0-CPUS-1)
//         when they are fewer)
//   --no-huge -m 512 --no-shconf --no-pci --file-prefix metaroce-fabric --log-level error
// then the user's EAL arguments. A default is left out when the user gives
// an option of its kind: -l/-c/--lcores; -m/--socket-mem/--no-huge/--in-memory/
// --huge-dir (memory); -a/--allow/-b/--block (PCI); --file-prefix; --log-level.
std::vector<std::string> eal_command_line(const std::vector<std::string>& user_args, std::uint16_t lanes = 1,
                                          unsigned cpus = 1);

}  // namespace metaroce::fabric_app
