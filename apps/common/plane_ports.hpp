// --preset, --iface, --port and --local-ip, each repeatable (declared as
// std::vector<std::string>, composing): a --preset or a --port per plane,
// plane 0's first, an --iface per --preset or none, --local-ip once
// (every plane's) or once per plane. metaroce-perf, metaroce-gen and
// metaroce-sink read them alike.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "common/preset_iface.hpp"
#include "wire/ip_address.hpp"

namespace metaroce::apps {

// One plane after the first: its preset (and iface) or its device, and
// this end's address there (empty: plane 0's).
struct PlanePortOptions {
  std::string preset, iface, port, local_ip;
};

// Plane 0's into the four strings, the others' into `more`; false with one
// line naming the fix.
inline bool read_plane_ports(const boost::program_options::variables_map& vm, std::string& preset,
                             std::string& iface, std::string& port, std::string& local_ip,
                             std::vector<PlanePortOptions>& more, std::string& message) {
  const auto all = [&](const char* key) {
    return vm.count(key) ? vm[key].as<std::vector<std::string>>() : std::vector<std::string>{};
  };
  const std::vector<std::string> presets = all("preset"), ifaces = all("iface"), ports = all("port"),
                                 ips = all("local-ip");
  if (!presets.empty() && !ports.empty()) {
    message = "give the ports as --preset FILE or as --port NAME (one per plane), not both";
    return false;
  }
  const std::size_t planes = std::max(presets.size(), ports.size());
  if (planes > 8) {
    message = fmt::format("{} ports: a connection has at most 8 planes: give 8 --preset or --port at most", planes);
    return false;
  }
  if (!ifaces.empty() && ifaces.size() != presets.size()) {
    message = !presets.empty()
                  ? fmt::format("{} --iface for {} --preset: give one per --preset, in their order, or none",
                                ifaces.size(), presets.size())
                  : std::string("--iface goes with --preset (its iface=); with --port give iface= in the --vdev "
                                "after `--`");
    return false;
  }
  if (ips.size() > 1 && ips.size() != planes) {
    message = fmt::format("{} --local-ip for {} ports: give one (every plane's) or one per plane, in their order",
                          ips.size(), planes);
    return false;
  }
  if (!presets.empty()) preset = presets[0];
  if (!ifaces.empty()) iface = ifaces[0];
  if (!ports.empty()) port = ports[0];
  if (!ips.empty()) local_ip = ips[0];
  more.clear();
  wire::IpAddress first{}, other{};
  const bool first_ok = wire::parse_ip(local_ip, first);
  for (std::size_t k = 1; k < planes; ++k) {
    PlanePortOptions plane;
    if (k < presets.size()) plane.preset = presets[k];
    if (k < ifaces.size()) plane.iface = ifaces[k];
    if (k < ports.size()) plane.port = ports[k];
    if (k < ips.size()) plane.local_ip = ips[k];
    if (!plane.preset.empty() && !check_preset_iface(plane.preset, plane.iface, message)) return false;
    if (!plane.local_ip.empty() &&
        (!wire::parse_ip(plane.local_ip, other) || (first_ok && other.version != first.version))) {
      message = fmt::format("--local-ip '{}' (plane {}): give an IP address of plane 0's family ({})", plane.local_ip,
                            k, local_ip);
      return false;
    }
    more.push_back(std::move(plane));
  }
  return true;
}

}  // namespace metaroce::apps
