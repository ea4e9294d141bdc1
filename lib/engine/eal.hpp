// Starting DPDK's EAL from an options struct, with defaults that work on a
// machine without hugepages, a NIC or kernel modules.
//
// rte_eal_init can run once per process: start_eal refuses a second call
// (a test binary shares one EAL through a gtest Environment).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace metaroce::engine {

enum class HugepagePolicy : std::uint8_t {
  auto_detect,  // use hugepages when some are free and hugetlbfs is mounted
  yes,          // require them: an error that says how to reserve them
  no,           // --no-huge -m memory_mb --no-shconf
};

struct EalOptions {
  std::string program_name = "metaroce";
  // EAL -l list, e.g. "0-1", or an --lcores map of lcores onto CPUs,
  // e.g. "(0-3)@(0-1)" (four lcore threads sharing two CPUs).
  std::string lcores = "0";
  std::uint32_t memory_mb = 512;
  HugepagePolicy hugepages = HugepagePolicy::auto_detect;
  std::vector<std::string> vdevs;      // "net_ring0", "net_pcap0,rx_pcap=in.pcap"
  std::vector<std::string> pci_allow;  // empty: --no-pci (no device is touched)
  std::string log_level = "warning";   // EAL --log-level
  std::vector<std::string> extra_args;  // appended verbatim
};

struct HugepageStatus {
  std::uint64_t free_pages = 0;
  std::uint64_t page_size_kb = 0;
  bool hugetlbfs_mounted = false;
  [[nodiscard]] bool usable() const noexcept { return free_pages > 0 && hugetlbfs_mounted; }
};

// Reads /proc/meminfo (HugePages_Free, Hugepagesize) and /proc/mounts.
[[nodiscard]] HugepageStatus detect_hugepages();

// The command line EAL is given for `options` on a machine in state
// `hugepages`. Empty with `error` set when hugepages are required but missing.
[[nodiscard]] std::vector<std::string> eal_arguments(const EalOptions& options,
                                                     const HugepageStatus& hugepages,
                                                     std::string& error);

// The vdev's device name: what comes before the first ','.
[[nodiscard]] std::string vdev_device_name(const std::string& vdev);

// rte_eal_init with eal_arguments(options, detect_hugepages()), then checks
// that every vdev probed. False with a one-line error that names the fix.
bool start_eal(const EalOptions& options, std::string& error);

// rte_eal_init with an explicit command line (args[0] is the program name),
// for apps whose user passed EAL arguments after `--`.
bool start_eal_with_arguments(const std::vector<std::string>& args, std::string& error);

// True once rte_eal_init succeeded in this process.
[[nodiscard]] bool eal_started() noexcept;

// rte_eal_cleanup, once, after every port is closed; EAL cannot start again
// in this process (eal_started() stays true).
void stop_eal() noexcept;

// The exact command that reserves and mounts 512 hugepages of 2 MiB.
inline constexpr const char* hugepage_setup_command =
    "echo 512 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages && "
    "mount -t hugetlbfs none /dev/hugepages";

}  // namespace metaroce::engine
