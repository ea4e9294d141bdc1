#include "engine/preset.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

namespace po = boost::program_options;

namespace metaroce::engine {

namespace {

constexpr std::array<std::pair<std::string_view, Driver>, 8> driver_names = {{
    {"net_ring", Driver::net_ring},
    {"net_pcap", Driver::net_pcap},
    {"net_af_packet", Driver::net_af_packet},
    {"net_af_xdp", Driver::net_af_xdp},
    {"net_tap", Driver::net_tap},
    {"mlx5", Driver::mlx5},
    {"ice", Driver::ice},
    {"i40e", Driver::i40e},
}};

// One key: its name ("section.key"), what it accepts (for messages) and how
// a string becomes the value. apply() returns false when the value is bad.
struct KeyRule {
  std::string_view name;
  std::string_view accepted;
  std::function<bool(const std::string&, DriverPreset&)> apply;
};

template <class T>
bool parse_unsigned(const std::string& s, T min, T max, T& out) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) return false;
  if (v < min || v > max) return false;
  out = static_cast<T>(v);
  return true;
}

bool parse_bool(const std::string& s, bool& out) {
  if (s == "true" || s == "yes" || s == "1") return out = true, true;
  if (s == "false" || s == "no" || s == "0") return out = false, true;
  return false;
}

bool parse_driver(const std::string& s, Driver& out) {
  for (const auto& [name, d] : driver_names)
    if (s == name) return out = d, true;
  return false;
}

bool parse_hugepages(const std::string& s, HugepagePolicy& out) {
  if (s == "auto") return out = HugepagePolicy::auto_detect, true;
  if (s == "yes") return out = HugepagePolicy::yes, true;
  if (s == "no") return out = HugepagePolicy::no, true;
  return false;
}

bool parse_multi_segment(const std::string& s, MultiSegmentTx& out) {
  if (s == "auto") return out = MultiSegmentTx::auto_detect, true;
  if (s == "yes") return out = MultiSegmentTx::yes, true;
  if (s == "no") return out = MultiSegmentTx::no, true;
  return false;
}

bool parse_log_level(const std::string& s, std::string& out) {
  static constexpr std::array<std::string_view, 8> levels = {
      "emergency", "alert", "critical", "error", "warning", "notice", "info", "debug"};
  for (const auto l : levels)
    if (s == l) return out = s, true;
  return false;
}

const std::vector<KeyRule>& key_rules() {
  static const std::vector<KeyRule> rules = {
      {"port.driver", "net_ring, net_pcap, net_af_packet, net_af_xdp, net_tap, mlx5, ice, i40e",
       [](const std::string& v, DriverPreset& p) { return parse_driver(v, p.port.driver); }},
      {"port.vdev_args", "the PMD's devargs, e.g. rx_pcap=in.pcap,tx_pcap=out.pcap",
       [](const std::string& v, DriverPreset& p) { return p.port.vdev_args = v, true; }},
      {"port.pci", "a PCI address such as 0000:3b:00.0",
       [](const std::string& v, DriverPreset& p) { return !v.empty() && (p.port.pci = v, true); }},
      {"port.queues", "an integer 1..64",
       [](const std::string& v, DriverPreset& p) { return parse_unsigned<std::uint16_t>(v, 1, 64, p.port.queues); }},
      {"port.rx_desc", "an integer 64..16384",
       [](const std::string& v, DriverPreset& p) { return parse_unsigned<std::uint16_t>(v, 64, 16384, p.port.rx_desc); }},
      {"port.tx_desc", "an integer 64..16384",
       [](const std::string& v, DriverPreset& p) { return parse_unsigned<std::uint16_t>(v, 64, 16384, p.port.tx_desc); }},
      {"port.mbufs", "an integer 1024..1048576",
       [](const std::string& v, DriverPreset& p) { return parse_unsigned<std::uint32_t>(v, 1024, 1048576, p.port.mbufs); }},
      {"port.mbuf_data_room", "0 (sized from mtu) or an integer 512..65000",
       [](const std::string& v, DriverPreset& p) {
         return parse_unsigned<std::uint16_t>(v, 0, 65000, p.port.mbuf_data_room) &&
                (p.port.mbuf_data_room == 0 || p.port.mbuf_data_room >= 512);
       }},
      {"port.mtu", "an integer 576..9600",
       [](const std::string& v, DriverPreset& p) { return parse_unsigned<std::uint32_t>(v, 576, 9600, p.port.mtu); }},
      {"port.icrc_offload", "true or false",
       [](const std::string& v, DriverPreset& p) { return parse_bool(v, p.port.icrc_offload); }},
      {"port.multi_segment_tx", "auto, yes or no",
       [](const std::string& v, DriverPreset& p) { return parse_multi_segment(v, p.port.multi_segment_tx); }},
      {"port.zero_copy_threshold", "0 (engine default) or payload bytes 1..65535 (65535: always copy)",
       [](const std::string& v, DriverPreset& p) {
         return parse_unsigned<std::uint32_t>(v, 0, 65535, p.port.zero_copy_threshold);
       }},
      {"eal.lcores", "an EAL lcore list such as 0-1 or 2,4",
       [](const std::string& v, DriverPreset& p) {
         return !v.empty() && v.find_first_not_of("0123456789,-@()") == std::string::npos &&
                (p.eal.lcores = v, true);
       }},
      {"eal.memory_mb", "an integer 64..1048576",
       [](const std::string& v, DriverPreset& p) { return parse_unsigned<std::uint32_t>(v, 64, 1048576, p.eal.memory_mb); }},
      {"eal.hugepages", "auto, yes or no",
       [](const std::string& v, DriverPreset& p) { return parse_hugepages(v, p.eal.hugepages); }},
      {"eal.log_level", "emergency, alert, critical, error, warning, notice, info or debug",
       [](const std::string& v, DriverPreset& p) { return parse_log_level(v, p.eal.log_level); }},
  };
  return rules;
}

std::string accepted_keys() {
  std::string keys;
  for (const auto& r : key_rules()) keys += (keys.empty() ? "" : ", ") + std::string(r.name);
  return keys;
}

}  // namespace

std::string_view to_string(Driver d) noexcept {
  for (const auto& [name, driver] : driver_names)
    if (driver == d) return name;
  return "invalid";
}

bool is_vdev(Driver d) noexcept {
  return d == Driver::net_ring || d == Driver::net_pcap || d == Driver::net_af_packet ||
         d == Driver::net_af_xdp || d == Driver::net_tap;
}

bool parse_preset(std::istream& in, const std::string& source, DriverPreset& out, std::string& error) {
  po::options_description description;
  for (const auto& rule : key_rules())
    description.add_options()(std::string(rule.name).c_str(), po::value<std::string>());
  po::parsed_options parsed(&description);
  try {
    parsed = po::parse_config_file(in, description, /*allow_unregistered=*/true);
  } catch (const po::error& e) {
    error = fmt::format("{}: {}: write one `key=value` per line under [port] or [eal]", source, e.what());
    return false;
  }
  DriverPreset preset;
  preset.source = source;
  std::vector<std::string> seen;
  for (const auto& option : parsed.options) {
    if (option.unregistered) {
      error = fmt::format("{}: unknown key '{}'; accepted keys: {}", source, option.string_key, accepted_keys());
      return false;
    }
    const std::string value = option.value.empty() ? std::string() : option.value.front();
    for (const auto& rule : key_rules()) {
      if (option.string_key != rule.name) continue;
      if (std::find(seen.begin(), seen.end(), option.string_key) != seen.end()) {
        error = fmt::format("{}: key '{}' is set twice; keep one", source, option.string_key);
        return false;
      }
      seen.push_back(option.string_key);
      if (!rule.apply(value, preset)) {
        error = fmt::format("{}: bad value '{}' for '{}'; accepted: {}", source, value, rule.name, rule.accepted);
        return false;
      }
    }
  }
  if (!is_vdev(preset.port.driver) && preset.port.pci.empty()) {
    error = fmt::format("{}: driver '{}' is a PCI NIC: set 'pci' under [port] to its address (lspci -D)", source,
                        to_string(preset.port.driver));
    return false;
  }
  if (preset.port.driver == Driver::net_pcap && preset.port.vdev_args.empty()) {
    error = fmt::format("{}: driver 'net_pcap' needs 'vdev_args' under [port], e.g. rx_pcap=in.pcap,tx_pcap=out.pcap",
                        source);
    return false;
  }
  const bool kernel_socket = preset.port.driver == Driver::net_af_packet || preset.port.driver == Driver::net_af_xdp;
  if (kernel_socket && preset.port.vdev_args.find("iface=") == std::string::npos) {
    error = fmt::format("{}: driver '{}' needs 'vdev_args' with iface=<interface> under [port], e.g. iface=veth0", source,
                        to_string(preset.port.driver));
    return false;
  }
  out = std::move(preset);
  return true;
}

bool load_preset(const std::string& path, DriverPreset& out, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = fmt::format("{}: cannot open the preset file: check the path (presets live in drivers-config/)", path);
    return false;
  }
  return parse_preset(in, path, out, error);
}

std::string vdev_string(const DriverPreset& preset) {
  std::string s = fmt::format("{}0", to_string(preset.port.driver));
  if (!preset.port.vdev_args.empty()) s += "," + preset.port.vdev_args;
  return s;
}

PortSetup port_setup(const DriverPreset& preset) {
  PortSetup s;
  s.queues = preset.port.queues;
  s.rx_desc = preset.port.rx_desc;
  s.tx_desc = preset.port.tx_desc;
  s.mbufs = preset.port.mbufs;
  s.mbuf_data_room = preset.port.mbuf_data_room;
  s.mtu = preset.port.mtu;
  return s;
}

EngineHostConfig host_config(const DriverPreset& preset, bool port_multi_segment_tx) {
  EngineHostConfig c;
  c.queues = preset.port.queues;
  c.icrc_offload = preset.port.icrc_offload;
  switch (preset.port.multi_segment_tx) {
    case MultiSegmentTx::auto_detect: c.multi_segment_tx = port_multi_segment_tx; break;
    case MultiSegmentTx::yes: c.multi_segment_tx = true; break;
    case MultiSegmentTx::no: c.multi_segment_tx = false; break;
  }
  const std::uint32_t t = preset.port.zero_copy_threshold;
  c.zero_copy_threshold = t == 0 ? default_zero_copy_threshold : t == 65535 ? zero_copy_never : t;
  c.tx_mbufs = preset.port.mbufs;
  c.tx_data_room = preset.port.mbuf_data_room != 0 ? preset.port.mbuf_data_room : data_room_for_mtu(preset.port.mtu);
  return c;
}

EalOptions eal_options(const DriverPreset& preset) {
  EalOptions options;
  options.lcores = preset.eal.lcores;
  options.memory_mb = preset.eal.memory_mb;
  options.hugepages = preset.eal.hugepages;
  options.log_level = preset.eal.log_level;
  // net_ring ports are made in process with rte_eth_from_rings: no vdev.
  if (is_vdev(preset.port.driver) && preset.port.driver != Driver::net_ring)
    options.vdevs.push_back(vdev_string(preset));
  if (!is_vdev(preset.port.driver)) options.pci_allow.push_back(preset.port.pci);
  return options;
}

}  // namespace metaroce::engine
