// One ethdev port: N rx and N tx queues, a receive mempool sized from the
// preset, started and stopped. net_ring ports come in pairs made in process
// with rte_eth_from_rings: tx queue i of one port is rx queue i of the other.
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
  std::uint32_t mbufs = 16384;       // receive mempool
  std::uint16_t mbuf_data_room = 0;  // 0: from mtu
  std::uint32_t mtu = 9000;          // L3 MTU; ignored by PMDs that cannot set it
};

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

  bool start(std::string& error);
  void stop() noexcept;

  [[nodiscard]] std::uint16_t id() const noexcept { return port_id_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::uint16_t queues() const noexcept { return setup_.queues; }
  [[nodiscard]] wire::MacAddress mac() const noexcept { return mac_; }
  // The PMD chains mbufs on transmit (RTE_ETH_TX_OFFLOAD_MULTI_SEGS).
  [[nodiscard]] bool multi_segment_tx() const noexcept { return multi_segment_tx_; }
  [[nodiscard]] rte_mempool* rx_pool() const noexcept { return rx_pool_; }
  // Receives and frees whatever waits on every rx queue; returns how many.
  // Used before tearing down so no mbuf outlives its mempool.
  std::size_t drain_rx() noexcept;
  // Frames rx could not take for lack of mbufs (rte_eth_stats.rx_nombuf).
  [[nodiscard]] std::uint64_t rx_mempool_empty() const noexcept;

 private:
  Port() = default;
  bool configure(const PortSetup& setup, std::string& error);

  std::uint16_t port_id_ = 0;
  std::string name_;
  PortSetup setup_;
  wire::MacAddress mac_{};
  bool multi_segment_tx_ = false;
  bool started_ = false;
  bool ring_port_ = false;
  rte_mempool* rx_pool_ = nullptr;
  std::vector<rte_ring*> owned_rings_;  // net_ring: the rings this port receives from
};

}  // namespace metaroce::engine
