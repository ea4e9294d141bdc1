#include "metaroce-fabric/fabric_telemetry.hpp"

#include <rte_telemetry.h>

#include <memory>
#include <mutex>

namespace metaroce::fabric_app {

namespace {

struct Shown {
  std::vector<const Direction*> directions;
  std::string port_a, port_b;
  const engine::TscClock* clock = nullptr;
};

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
  rte_tel_data_add_dict_string(d, "port_a", shown->port_a.c_str());
  rte_tel_data_add_dict_string(d, "port_b", shown->port_b.c_str());
  rte_tel_data_add_dict_u64(d, "uptime_ns", now);
  for (const Direction* direction : shown->directions) {
    const DirectionSnapshot s = direction->snapshot();
    rte_tel_data* inner = rte_tel_data_alloc();
    if (inner == nullptr) continue;
    rte_tel_data_start_dict(inner);
    s.totals.visit([&](const char* name, std::uint64_t value) { rte_tel_data_add_dict_u64(inner, name, value); });
    rte_tel_data_add_dict_u64(inner, "snapshot_age_ns", now > s.taken_ns ? now - s.taken_ns : 0);
    rte_tel_data_add_dict_string(inner, "spec", direction->spec().c_str());  // cut at 127 characters
    rte_tel_data_add_dict_container(d, direction->name().c_str(), inner, 0);
  }
  return 0;
}

}  // namespace

FabricTelemetry::FabricTelemetry(std::vector<const Direction*> directions, std::string port_a, std::string port_b,
                                 const engine::TscClock& clock) {
  static const bool command_registered =
      rte_telemetry_register_cmd("/metaroce/fabric", fabric_command,
                                 "metaroce-fabric, per direction: received, forwarded, drops by cause, marked, "
                                 "in flight. No parameters") == 0;  // help: < 128 characters
  registered_ = command_registered;
  std::lock_guard lock(shown_mutex);
  shown = std::make_unique<Shown>(Shown{std::move(directions), std::move(port_a), std::move(port_b), &clock});
}

FabricTelemetry::~FabricTelemetry() {
  std::lock_guard lock(shown_mutex);
  shown.reset();
}

}  // namespace metaroce::fabric_app
