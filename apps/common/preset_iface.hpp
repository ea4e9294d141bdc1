// Before EAL starts: the Linux interface a net_af_packet preset drives
// (--iface, or the preset's own iface=) exists, so a missing --iface is an
// option error naming the fix rather than the PMD's "ioctl failed".
#pragma once

#include <net/if.h>

#include <string>

#include <fmt/format.h>

#include "engine/preset.hpp"

namespace metaroce::apps {

// False with one line naming the fix when the preset at `preset_path` is a
// net_af_packet one and the interface it would open is not there. A preset
// that does not load is left to the run, which reports why.
inline bool check_preset_iface(const std::string& preset_path, const std::string& iface, std::string& message) {
  engine::DriverPreset preset;
  std::string ignored;
  if (!engine::load_preset(preset_path, preset, ignored) || preset.port.driver != engine::Driver::net_af_packet)
    return true;
  std::string name = iface;
  if (name.empty()) {
    const std::string& args = preset.port.vdev_args;
    const auto at = args.find("iface=");
    if (at == std::string::npos) return true;
    const auto end = args.find(',', at);
    name = args.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
  }
  if (if_nametoindex(name.c_str()) != 0) return true;
  if (iface.empty())
    message = fmt::format("--preset {} opens interface {} (its iface=), which does not exist here: give the "
                          "interface with --iface NAME",
                          preset_path, name);
  else
    message = fmt::format("--iface {}: no such interface here: give one that `ip link` lists (e.g. one end of a "
                          "veth pair)",
                          name);
  return false;
}

}  // namespace metaroce::apps
