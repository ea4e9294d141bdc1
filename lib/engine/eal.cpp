#include "engine/eal.hpp"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace metaroce::engine {

namespace {
bool g_eal_started = false;
bool g_eal_attempted = false;
}  // namespace

HugepageStatus detect_hugepages() {
  HugepageStatus status;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t value = 0;
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream in(line);
    if (!(in >> key >> value)) continue;
    if (key == "HugePages_Free:") status.free_pages = value;
    if (key == "Hugepagesize:") status.page_size_kb = value;
  }
  std::ifstream mounts("/proc/mounts");
  while (std::getline(mounts, line)) {
    std::istringstream in(line);
    std::string device, mount_point, type;
    if (in >> device >> mount_point >> type && type == "hugetlbfs") status.hugetlbfs_mounted = true;
  }
  return status;
}

std::string vdev_device_name(const std::string& vdev) {
  return vdev.substr(0, vdev.find(','));
}

std::vector<std::string> eal_arguments(const EalOptions& options, const HugepageStatus& hugepages,
                                       std::string& error) {
  // A list that maps lcores onto CPUs ("(0-3)@(0-1)": more lcores than
  // CPUs) is EAL's --lcores; a plain list of CPUs is -l.
  const bool mapped = options.lcores.find('@') != std::string::npos;
  std::vector<std::string> args = {options.program_name, mapped ? "--lcores" : "-l", options.lcores};
  bool use_hugepages = false;
  switch (options.hugepages) {
    case HugepagePolicy::auto_detect: use_hugepages = hugepages.usable(); break;
    case HugepagePolicy::no: use_hugepages = false; break;
    case HugepagePolicy::yes:
      if (!hugepages.usable()) {
        error = fmt::format(
            "hugepages requested (hugepages=yes) but {}: run `{}` as root, or set hugepages=no",
            hugepages.free_pages == 0 ? "none are free" : "hugetlbfs is not mounted",
            hugepage_setup_command);
        return {};
      }
      use_hugepages = true;
      break;
  }
  if (use_hugepages) {
    // Without --in-memory EAL would create files under /var/run; tests and
    // several apps on one machine must not collide there.
    args.insert(args.end(), {"--in-memory", "-m", std::to_string(options.memory_mb)});
  } else {
    // --in-memory does not combine with --no-huge; --no-shconf gives the same
    // isolation (no runtime files shared between processes).
    args.insert(args.end(), {"--no-huge", "-m", std::to_string(options.memory_mb), "--no-shconf"});
  }
  if (options.pci_allow.empty()) {
    args.emplace_back("--no-pci");
  } else {
    for (const auto& pci : options.pci_allow) args.insert(args.end(), {"-a", pci});
  }
  for (const auto& vdev : options.vdevs) args.insert(args.end(), {"--vdev", vdev});
  if (!options.log_level.empty()) args.push_back("--log-level=" + options.log_level);
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  return args;
}

bool start_eal_with_arguments(const std::vector<std::string>& args, std::string& error) {
  if (g_eal_attempted) {
    error = g_eal_started ? "EAL is already running in this process: start it once (one EAL per process)"
                          : "EAL initialisation already failed in this process: fix the first error and restart";
    return false;
  }
  g_eal_attempted = true;
  // rte_eal_init may permute argv: give it copies that live for the process.
  static std::vector<std::string> storage;
  static std::vector<char*> argv;
  storage = args;
  argv.clear();
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int consumed = rte_eal_init(static_cast<int>(storage.size()), argv.data());
  if (consumed < 0) {
    std::string line;
    for (const auto& a : args) line += (line.empty() ? "" : " ") + a;
    error = fmt::format("EAL initialisation failed: {} (arguments: {}); check the EAL arguments, "
                        "or use hugepages=no / --no-huge -m 512 --no-shconf --no-pci on a machine without hugepages",
                        rte_strerror(rte_errno), line);
    return false;
  }
  g_eal_started = true;
  // EAL carries on when a vdev fails to probe; we do not.
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string vdev;
    if (args[i] == "--vdev" && i + 1 < args.size()) vdev = args[i + 1];
    if (args[i].rfind("--vdev=", 0) == 0) vdev = args[i].substr(7);
    if (vdev.empty()) continue;
    std::uint16_t port = 0;
    const std::string name = vdev_device_name(vdev);
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port) != 0) {
      error = fmt::format("vdev '{}' did not probe: check its arguments (files exist, interface is up) "
                          "and that its PMD library (librte_{}) is linked; the EAL log above says why",
                          vdev, name.substr(0, name.find_last_not_of("0123456789") + 1));
      return false;
    }
  }
  return true;
}

bool start_eal(const EalOptions& options, std::string& error) {
  const auto args = eal_arguments(options, detect_hugepages(), error);
  if (args.empty()) return false;
  return start_eal_with_arguments(args, error);
}

bool eal_started() noexcept { return g_eal_started; }

void stop_eal() noexcept {
  static bool stopped = false;
  if (!g_eal_started || stopped) return;
  stopped = true;
  rte_eal_cleanup();
}

}  // namespace metaroce::engine
