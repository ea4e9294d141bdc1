#include "metaroce-fabric/fabric_telemetry.hpp"

#include <rte_telemetry.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>

namespace metaroce::fabric_app {

namespace {

int fabric_command(const char*, const char*, rte_tel_data* d);

struct Shown {
  std::vector<DirectionLanes> directions;
  std::string port_a, port_b;
  const engine::TscClock* clock = nullptr;
  const SwitchNode* node = nullptr;  // the switch form instead of the directions
};

void add_switch(rte_tel_data* d, const SwitchNode& node, std::uint64_t now) {
  const std::vector<SwitchPortSnapshot> ports = node.snapshot();
  rte_tel_data_add_dict_u64(d, "ports", ports.size());
  for (std::size_t i = 0; i < ports.size(); ++i) {
    const SwitchPortSnapshot& p = ports[i];
    rte_tel_data* inner = rte_tel_data_alloc();
    if (inner == nullptr) continue;
    rte_tel_data_start_dict(inner);
    rte_tel_data_add_dict_string(inner, "name", p.name.c_str());
    rte_tel_data_add_dict_u64(inner, "in_received", p.in.received);
    rte_tel_data_add_dict_u64(inner, "in_dropped_no_route", p.in.dropped_no_route);
    rte_tel_data_add_dict_u64(inner, "in_rx_missed", p.in.rx_missed);
    p.out.visit([&](const char* name, std::uint64_t value) {
      rte_tel_data_add_dict_u64(inner, (std::string("out_") + name).c_str(), value);
    });
    rte_tel_data_add_dict_u64(inner, "queue_p50_bytes", p.queue.p50_bytes);
    rte_tel_data_add_dict_u64(inner, "queue_p99_bytes", p.queue.p99_bytes);
    rte_tel_data_add_dict_u64(inner, "queue_max_bytes", p.queue.max_bytes);
    rte_tel_data_add_dict_u64(inner, "snapshot_age_ns", now > p.taken_ns ? now - p.taken_ns : 0);
    rte_tel_data_add_dict_string(inner, "spec", p.spec.c_str());  // cut at 127 characters
    rte_tel_data_add_dict_container(d, ("port" + std::to_string(i)).c_str(), inner, 0);
  }
}

bool register_command() {
  static const bool registered =
      rte_telemetry_register_cmd("/metaroce/fabric", fabric_command,
                                 "metaroce-fabric, per direction or switch port: received, forwarded, drops by "
                                 "cause, marked, queue. No parameters") == 0;  // help: < 128 characters
  return registered;
}

// What the command shows; nullptr when no node is running. The mutex is held
// by the callback for the whole reply, so the destructor waits for it.
std::mutex shown_mutex;
std::unique_ptr<Shown> shown;

int fabric_command(const char*, const char*, rte_tel_data* d) {
  rte_tel_data_start_dict(d);
  std::lock_guard lock(shown_mutex);
  if (shown == nullptr) {
    rte_tel_data_add_dict_string(d, "error", "no fabric is running");
    return 0;
  }
  const std::uint64_t now = shown->clock->now_ns();
  if (shown->node != nullptr) {
    rte_tel_data_add_dict_u64(d, "uptime_ns", now);
    add_switch(d, *shown->node, now);
    return 0;
  }
  rte_tel_data_add_dict_string(d, "port_a", shown->port_a.c_str());
  rte_tel_data_add_dict_string(d, "port_b", shown->port_b.c_str());
  rte_tel_data_add_dict_u64(d, "uptime_ns", now);
  const std::vector<DirectionReport> reports = direction_reports(shown->directions);
  const std::size_t lanes = reports.empty() ? 0 : reports.front().lanes.size();
  rte_tel_data_add_dict_u64(d, "lanes", lanes);
  // One dict of counters: the direction's sums, or a lane's.
  const auto add = [&](const std::string& name, const DirectionTotals& totals, std::uint64_t taken_ns,
                       const std::string& spec, const LaneReport* lane) {
    rte_tel_data* inner = rte_tel_data_alloc();
    if (inner == nullptr) return;
    rte_tel_data_start_dict(inner);
    totals.visit([&](const char* counter, std::uint64_t value) { rte_tel_data_add_dict_u64(inner, counter, value); });
    rte_tel_data_add_dict_u64(inner, "snapshot_age_ns", now > taken_ns ? now - taken_ns : 0);
    if (lane != nullptr) rte_tel_data_add_dict_u64(inner, "lcore", lane->lcore);
    rte_tel_data_add_dict_string(inner, "spec", spec.c_str());  // cut at 127 characters
    rte_tel_data_add_dict_container(d, name.c_str(), inner, 0);
  };
  for (const DirectionReport& r : reports) {
    std::uint64_t oldest = r.snapshot.taken_ns;
    for (const LaneReport& l : r.lanes) oldest = std::min(oldest, l.snapshot.taken_ns);
    add(r.name, r.snapshot.totals, oldest, r.spec, nullptr);
    if (lanes > 1)
      for (const LaneReport& l : r.lanes)
        add(r.name + "_lane" + std::to_string(l.lane), l.snapshot.totals, l.snapshot.taken_ns, l.spec, &l);
  }
  return 0;
}

}  // namespace

FabricTelemetry::FabricTelemetry(std::vector<DirectionLanes> directions, std::string port_a, std::string port_b,
                                 const engine::TscClock& clock) {
  registered_ = register_command();
  std::lock_guard lock(shown_mutex);
  shown = std::make_unique<Shown>(Shown{std::move(directions), std::move(port_a), std::move(port_b), &clock, nullptr});
}

FabricTelemetry::FabricTelemetry(const SwitchNode& node, const engine::TscClock& clock) {
  registered_ = register_command();
  std::lock_guard lock(shown_mutex);
  shown = std::make_unique<Shown>(Shown{{}, {}, {}, &clock, &node});
}

FabricTelemetry::~FabricTelemetry() {
  std::lock_guard lock(shown_mutex);
  shown.reset();
}

}  // namespace metaroce::fabric_app
