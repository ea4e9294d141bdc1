// Drivers-config presets: how to bring up a port (driver, queues, mbufs,
// offloads) and EAL, from a key=value INI file. Every key is documented in
// drivers-config/README.md; unknown keys and bad values are errors that name
// the file, the key and what is accepted.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include "engine/eal.hpp"
#include "engine/engine_host.hpp"
#include "engine/port.hpp"

namespace metaroce::engine {

enum class Driver : std::uint8_t { net_ring, net_pcap, net_af_packet, net_af_xdp, net_tap, mlx5, ice, i40e };

[[nodiscard]] std::string_view to_string(Driver d) noexcept;
// True for the drivers that are DPDK virtual devices (created with --vdev).
[[nodiscard]] bool is_vdev(Driver d) noexcept;

enum class MultiSegmentTx : std::uint8_t { auto_detect, yes, no };

struct PortPreset {
  Driver driver = Driver::net_ring;
  std::string vdev_args;   // appended to "<driver>0," for vdevs
  std::string pci;         // PCI address of a real NIC, e.g. 0000:3b:00.0
  std::uint16_t queues = 1;         // rx and tx queues (one per lcore)
  std::uint16_t rx_desc = 1024;
  std::uint16_t tx_desc = 1024;
  std::uint32_t mbufs = 16384;      // per mempool
  std::uint16_t mbuf_data_room = 0;  // 0: sized from mtu
  std::uint32_t mtu = 9000;         // the port's L3 MTU
  bool icrc_offload = false;        // the NIC checks the ICRC on receive
  MultiSegmentTx multi_segment_tx = MultiSegmentTx::auto_detect;
  std::uint32_t zero_copy_threshold = 0;  // 0: the engine's measured default
};

struct EalPreset {
  std::string lcores = "0-1";
  std::uint32_t memory_mb = 512;
  HugepagePolicy hugepages = HugepagePolicy::auto_detect;
  std::string log_level = "warning";
};

struct DriverPreset {
  std::string source;  // file name, for messages
  PortPreset port;
  EalPreset eal;
};

// Parses INI text; `source` names it in error messages. False with a
// one-line error naming the source, the key and the accepted values.
bool parse_preset(std::istream& in, const std::string& source, DriverPreset& out, std::string& error);
bool load_preset(const std::string& path, DriverPreset& out, std::string& error);

// EAL options for a preset: its lcores, memory and hugepages, the vdev it
// needs (net_ring needs none: the engine creates the pair in process) or its
// PCI address.
[[nodiscard]] EalOptions eal_options(const DriverPreset& preset);

// How to configure the port: queues, descriptors, mbufs, data room, MTU.
[[nodiscard]] PortSetup port_setup(const DriverPreset& preset);

// An engine host's transmit and receive settings for a port of this preset
// that does (or does not) chain mbufs on transmit (Port::multi_segment_tx):
// ICRC offload, multi-segment transmit (auto: what the port says), the
// zero-copy threshold (0: the engine default; 65535: never attach), and the
// mbufs. Name, port and queue are the caller's.
[[nodiscard]] EngineHostConfig host_config(const DriverPreset& preset, bool port_multi_segment_tx);

// The --vdev string of a vdev preset, e.g. "net_pcap0,rx_pcap=in.pcap".
[[nodiscard]] std::string vdev_string(const DriverPreset& preset);

}  // namespace metaroce::engine
