// metaroce-fabric on DPDK's telemetry socket (rte_telemetry):
//
//   /metaroce/fabric   port_a, port_b, uptime_ns, lanes, and per direction
//                      (a_to_b, b_to_a) every counter of DirectionTotals
//                      summed over its lanes, the spec (canonical; DPDK cuts
//                      strings at 127 characters) and snapshot_age_ns (the
//                      oldest lane's); with --lcores N above 1 also per lane
//                      (a_to_b_lane0, ...) its counters, lcore and spec;
//                      with --ports N: uptime_ns, ports and
//                      per port (port0, port1, ...) its in, out and queue
//                      counters (the switch constructor's comment)
//
// Read with `dpdk-telemetry.py -f PREFIX` (the EAL --file-prefix,
// metaroce-fabric by default). The callback reads the directions'
// published snapshots (fabric_node.hpp), never the live counters.
#pragma once

#include <string>
#include <vector>

#include "engine/tsc_clock.hpp"
#include "metaroce-fabric/fabric_node.hpp"
#include "metaroce-fabric/fabric_report.hpp"
#include "metaroce-fabric/switch_node.hpp"

namespace metaroce::fabric_app {

class FabricTelemetry {
 public:
  // Registers the command (once per process) and makes `directions` what it
  // shows until destruction; they must outlive this object.
  FabricTelemetry(std::vector<DirectionLanes> directions, std::string port_a, std::string port_b,
                  const engine::TscClock& clock);
  // The switch form: per port `portI` with in_*, out_* (a direction's
  // counters), queue_p50/p99/max_bytes, snapshot_age_ns, name and spec.
  FabricTelemetry(const SwitchNode& node, const engine::TscClock& clock);
  // Waits for a reply in progress, then the command answers {"error": ...}.
  ~FabricTelemetry();
  FabricTelemetry(const FabricTelemetry&) = delete;
  FabricTelemetry& operator=(const FabricTelemetry&) = delete;

  [[nodiscard]] bool registered() const noexcept { return registered_; }

 private:
  bool registered_ = false;
};

}  // namespace metaroce::fabric_app
