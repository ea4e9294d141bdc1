// One ethdev port: N rx and N tx queues, a receive mempool per queue sized
// from the preset, started and stopped (as often as wanted), its link read. net_ring
// ports come in pairs made in process with rte_eth_from_rings: tx queue i of
// one port is rx queue i of the other.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wire/headers.hpp"

struct rte_mempool;
struct rte_ring;

namespace metaroce::engine {

struct PortSetup {
  std::uint16_t queues = 1;
  std::uint16_t rx_desc = 1024;
  std::uint16_t tx_desc = 1024;
  std::uint32_t mbufs = 16384;       // receive mbufs, split over one mempool per queue (1024 each at least)
  std::uint16_t mbuf_data_room = 0;  // 0: from mtu
  std::uint32_t mtu = 9000;          // L3 MTU; ignored by PMDs that cannot set it
  // create_ring_pair only: every tx queue of each port feeds the other's rx
  // queue 0, as a PMD that cannot steer by QPN (tests and benchmarks of the
  // software hand-off); otherwise tx queue i is the peer's rx queue i.
  bool ring_unsteered = false;
};

// A port's link: what the PMD reports and, for a port on a kernel interface
// (net_af_packet, net_tap: the device's if_index), that interface's flags.
struct LinkState {
  bool pmd_up = false;             // rte_eth_link_get_nowait
  std::uint32_t speed_mbps = 0;    // as the PMD reports it (0: none or unknown)
  std::string interface;           // the kernel interface, "" when the port has none
  bool interface_up = false;       // IFF_UP: `ip link set dev IF up` was done
  bool interface_running = false;  // IFF_RUNNING: up with a carrier (a veth's peer is up too)
  // Frames can flow: the PMD says up and so does the interface, if any.
  // (net_af_packet in DPDK 22.11 reports up from start to stop whatever its
  // interface's state, hence the interface's own flags.)
  [[nodiscard]] bool up() const noexcept { return pmd_up && (interface.empty() || interface_running); }
};

// The link of port `port_id` (what Port::link() says, for a port the caller
// knows by id only, as an engine host's link poll does).
[[nodiscard]] LinkState port_link(std::uint16_t port_id);

// The data room an mbuf needs for one whole frame at `mtu` (L3 bytes), with
// Ethernet + VLAN header and DPDK's headroom.
[[nodiscard]] std::uint16_t data_room_for_mtu(std::uint32_t mtu) noexcept;

class Port {
 public:
  // A device EAL already probed (a vdev or an allowed PCI device), by name.
  static std::unique_ptr<Port> open(const std::string& device_name, const PortSetup& setup, std::string& error);
  // Two net_ring ports named `name_a` and `name_b`, wired to each other.
  static bool create_ring_pair(const std::string& name_a, const std::string& name_b, const PortSetup& setup,
                               std::unique_ptr<Port>& a, std::unique_ptr<Port>& b, std::string& error);
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  // Start and stop may alternate any number of times; each is a no-op on a
  // port already in that state. While stopped, DPDK 22.11 points the port's
  // rx and tx burst functions at dummies that take and give nothing (and log
  // one error with a stack trace per direction per stop): polling a stopped
  // port is safe, and what waits in its queues stays there (net_ring: the
  // rings keep their frames, and a running peer fills the stopped port's rx
  // ring to its capacity, then sees it full).
  bool start(std::string& error);
  // False when the PMD refused (the port is still started).
  bool stop() noexcept;
  // Before the last stop of a net_memif port in server role: waits, idle,
  // for the client end to leave first (at most 2 s; port.cpp says why).
  void wait_for_memif_peer_departure() const noexcept;
  [[nodiscard]] bool started() const noexcept { return started_; }
  [[nodiscard]] LinkState link() const;

  [[nodiscard]] std::uint16_t id() const noexcept { return port_id_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  // The PMD's name (rte_eth_dev_info.driver_name): "net_af_packet", "mlx5_pci", ...
  [[nodiscard]] const std::string& driver() const noexcept { return driver_; }
  [[nodiscard]] std::uint16_t queues() const noexcept { return setup_.queues; }
  [[nodiscard]] wire::MacAddress mac() const noexcept { return mac_; }
  // The PMD chains mbufs on transmit (RTE_ETH_TX_OFFLOAD_MULTI_SEGS).
  [[nodiscard]] bool multi_segment_tx() const noexcept { return multi_segment_tx_; }
  // Queue q's receive mempool (on the port's NUMA socket).
  [[nodiscard]] rte_mempool* rx_pool(std::uint16_t queue = 0) const noexcept { return rx_pools_[queue]; }
  // Receives and frees whatever waits on every rx queue; returns how many.
  // Used before tearing down so no mbuf outlives its mempool. A stopped
  // port receives nothing: a stopped net_ring port is drained from its rings
  // directly, any other keeps what it holds until it is closed.
  std::size_t drain_rx() noexcept;
  // Frames rx could not take for lack of mbufs (rte_eth_stats.rx_nombuf).
  [[nodiscard]] std::uint64_t rx_mempool_empty() const noexcept;

 private:
  Port() = default;
  bool configure(const PortSetup& setup, std::string& error);

  std::uint16_t port_id_ = 0;
  std::string name_;
  std::string driver_;
  PortSetup setup_;
  wire::MacAddress mac_{};
  bool multi_segment_tx_ = false;
  bool started_ = false;
  bool ring_port_ = false;
  std::vector<rte_mempool*> rx_pools_;  // one per queue
  std::vector<rte_ring*> owned_rings_;  // net_ring: the rings this port receives from
};

}  // namespace metaroce::engine
