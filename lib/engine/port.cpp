#include "engine/port.hpp"

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace metaroce::engine {

namespace {
// DPDK object names are process-global: make every one unique.
std::string unique_name(const std::string& base) {
  static std::atomic<unsigned> next{0};
  return fmt::format("{}_{}", base.substr(0, 16), next.fetch_add(1));
}
}  // namespace

std::uint16_t data_room_for_mtu(std::uint32_t mtu) noexcept {
  const std::uint32_t room = mtu + 18 /* Ethernet + VLAN */ + 4 /* FCS room */ + RTE_PKTMBUF_HEADROOM;
  return static_cast<std::uint16_t>(std::min<std::uint32_t>((room + 63) & ~63u, 65535u));
}

std::unique_ptr<Port> Port::open(const std::string& device_name, const PortSetup& setup, std::string& error) {
  std::unique_ptr<Port> port(new Port());
  port->name_ = device_name;
  if (rte_eth_dev_get_port_by_name(device_name.c_str(), &port->port_id_) != 0) {
    error = fmt::format("port '{}' does not exist: pass it to EAL (--vdev {} or -a <pci>) and check the EAL log",
                        device_name, device_name);
    return nullptr;
  }
  if (!port->configure(setup, error)) return nullptr;
  return port;
}

bool Port::create_ring_pair(const std::string& name_a, const std::string& name_b, const PortSetup& setup,
                            std::unique_ptr<Port>& a, std::unique_ptr<Port>& b, std::string& error) {
  // Ring a_to_b[i] is tx queue i of a and rx queue i of b, and back; when
  // unsteered, every tx queue of a is a_to_b[0] (which then has several
  // producers) and b's other rx queues stay empty.
  std::vector<rte_ring*> a_to_b, b_to_a;
  const unsigned ring_size = rte_align32pow2(std::max<unsigned>(setup.rx_desc, setup.tx_desc));
  for (unsigned q = 0; q < setup.queues; ++q) {
    for (auto* rings : {&a_to_b, &b_to_a}) {
      const std::string ring_name = unique_name("ring_" + name_a);
      const unsigned flags = setup.ring_unsteered ? RING_F_SC_DEQ : RING_F_SP_ENQ | RING_F_SC_DEQ;
      rte_ring* r = rte_ring_create(ring_name.c_str(), ring_size, static_cast<int>(rte_socket_id()), flags);
      if (r == nullptr) {
        error = fmt::format("cannot create ring '{}': {}; give EAL more memory (-m / memory_mb)", ring_name,
                            rte_strerror(rte_errno));
        return false;
      }
      rings->push_back(r);
    }
  }
  std::vector<rte_ring*> a_tx = a_to_b, b_tx = b_to_a;
  if (setup.ring_unsteered) {
    a_tx.assign(setup.queues, a_to_b[0]);
    b_tx.assign(setup.queues, b_to_a[0]);
  }
  // net_ring never allocates on receive (it hands over the sender's mbufs),
  // but rx queue setup wants a mempool: give it a token one.
  PortSetup ring_setup = setup;
  ring_setup.mbufs = 1024;
  ring_setup.mbuf_data_room = RTE_MBUF_DEFAULT_BUF_SIZE;
  const auto make = [&](const std::string& name, std::vector<rte_ring*>& rx, std::vector<rte_ring*>& tx,
                        std::unique_ptr<Port>& out) {
    const int id = rte_eth_from_rings(name.c_str(), rx.data(), setup.queues, tx.data(), setup.queues,
                                      static_cast<unsigned>(rte_socket_id()));
    if (id < 0) {
      error = fmt::format("rte_eth_from_rings('{}') failed: {}; is librte_net_ring linked, and the name unused?",
                          name, rte_strerror(rte_errno));
      return false;
    }
    out.reset(new Port());
    out->port_id_ = static_cast<std::uint16_t>(id);
    out->name_ = name;
    out->owned_rings_ = rx;
    out->ring_port_ = true;
    return out->configure(ring_setup, error);
  };
  return make(name_a, b_to_a, a_tx, a) && make(name_b, a_to_b, b_tx, b);
}

bool Port::configure(const PortSetup& setup, std::string& error) {
  setup_ = setup;
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port_id_, &info) != 0) {
    error = fmt::format("port '{}': rte_eth_dev_info_get failed; is the device probed?", name_);
    return false;
  }
  if (setup.queues > info.max_rx_queues || setup.queues > info.max_tx_queues) {
    error = fmt::format("port '{}' has at most {} rx / {} tx queues: set queues= to at most that", name_,
                        info.max_rx_queues, info.max_tx_queues);
    return false;
  }
  if (info.driver_name != nullptr) driver_ = info.driver_name;
  rte_eth_conf conf{};
  multi_segment_tx_ = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
  if (multi_segment_tx_) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  if (int rc = rte_eth_dev_configure(port_id_, setup.queues, setup.queues, &conf); rc != 0) {
    error = fmt::format("port '{}': rte_eth_dev_configure failed: {}; check queues= against the NIC", name_,
                        rte_strerror(-rc));
    return false;
  }
  // Not every PMD can set an MTU (net_ring cannot): that is not an error.
  // net_af_packet reports a 1518-byte frame limit that ethdev enforces on
  // set_mtu, yet carries whatever the kernel interface's MTU and the
  // socket ring's framesz allow: there the interface's MTU rules.
  const bool af_packet = driver_ == "net_af_packet";
  const bool skip_mtu = af_packet && setup.mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN > info.max_rx_pktlen;
  if (int rc = skip_mtu ? 0 : rte_eth_dev_set_mtu(port_id_, static_cast<std::uint16_t>(setup.mtu));
      rc != 0 && rc != -ENOTSUP) {
    error = fmt::format("port '{}': cannot set mtu {}: {}; lower mtu= in the preset (max {})", name_, setup.mtu,
                        rte_strerror(-rc), info.max_mtu);
    return false;
  }
  const std::uint16_t data_room = setup.mbuf_data_room != 0 ? setup.mbuf_data_room : data_room_for_mtu(setup.mtu);
  // A pool per queue, on the port's NUMA socket: each queue's lcore refills
  // from its own pool (no pool shared between lcores), and the port's
  // mbufs are split evenly over them.
  const int socket = rte_eth_dev_socket_id(port_id_);
  const std::uint32_t per_queue = std::max<std::uint32_t>(1024, setup.mbufs / setup.queues);
  for (std::uint16_t q = 0; q < setup.queues; ++q) {
    const std::string pool_name = unique_name(fmt::format("rx{}_{}", q, name_));
    rte_mempool* pool = rte_pktmbuf_pool_create(pool_name.c_str(), per_queue, 256, 0, data_room, socket);
    if (pool == nullptr) {
      error = fmt::format("port '{}': cannot create a mempool of {} mbufs of {} bytes for queue {}: {}; lower mbufs= "
                          "or give EAL more memory (memory_mb=)",
                          name_, per_queue, data_room, q, rte_strerror(rte_errno));
      return false;
    }
    rx_pools_.push_back(pool);
  }
  std::uint16_t rx_desc = setup.rx_desc, tx_desc = setup.tx_desc;
  rte_eth_dev_adjust_nb_rx_tx_desc(port_id_, &rx_desc, &tx_desc);
  for (std::uint16_t q = 0; q < setup.queues; ++q) {
    if (int rc = rte_eth_rx_queue_setup(port_id_, q, rx_desc, static_cast<unsigned>(socket), nullptr, rx_pools_[q]);
        rc != 0) {
      error = fmt::format("port '{}': rx queue {} setup failed: {}; check rx_desc=", name_, q, rte_strerror(-rc));
      return false;
    }
    rte_eth_txconf txconf = info.default_txconf;
    txconf.offloads = conf.txmode.offloads;
    if (int rc = rte_eth_tx_queue_setup(port_id_, q, tx_desc, static_cast<unsigned>(socket), &txconf); rc != 0) {
      error = fmt::format("port '{}': tx queue {} setup failed: {}; check tx_desc=", name_, q, rte_strerror(-rc));
      return false;
    }
  }
  rte_ether_addr addr{};
  rte_eth_macaddr_get(port_id_, &addr);
  for (std::size_t i = 0; i < mac_.size(); ++i) mac_[i] = addr.addr_bytes[i];
  return true;
}

bool Port::start(std::string& error) {
  if (started_) return true;
  if (int rc = rte_eth_dev_start(port_id_); rc != 0) {
    error = fmt::format("port '{}': rte_eth_dev_start failed: {}; see the EAL log", name_, rte_strerror(-rc));
    return false;
  }
  started_ = true;
  return true;
}

bool Port::stop() noexcept {
  if (!started_) return true;
  if (rte_eth_dev_stop(port_id_) != 0) return false;
  started_ = false;
  return true;
}

LinkState Port::link() const { return port_link(port_id_); }

LinkState port_link(std::uint16_t port_id) {
  LinkState state;
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(port_id, &link) == 0) {
    state.pmd_up = link.link_status == RTE_ETH_LINK_UP;
    state.speed_mbps = link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : link.link_speed;
  }
  // A port on a kernel interface names it (net_af_packet, net_tap); its
  // flags are the truth net_af_packet does not report.
  rte_eth_dev_info info{};
  std::array<char, IF_NAMESIZE> name{};
  if (rte_eth_dev_info_get(port_id, &info) != 0 || info.if_index == 0 ||
      if_indextoname(info.if_index, name.data()) == nullptr)
    return state;
  state.interface = name.data();
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return state;
  ifreq request{};
  std::memcpy(request.ifr_name, name.data(), sizeof(request.ifr_name));
  if (::ioctl(fd, SIOCGIFFLAGS, &request) == 0) {
    state.interface_up = (request.ifr_flags & IFF_UP) != 0;
    state.interface_running = (request.ifr_flags & IFF_RUNNING) != 0;
  }
  ::close(fd);
  return state;
}

std::uint64_t Port::rx_mempool_empty() const noexcept {
  rte_eth_stats stats{};
  return rte_eth_stats_get(port_id_, &stats) == 0 ? stats.rx_nombuf : 0;
}

std::size_t Port::drain_rx() noexcept {
  std::size_t drained = 0;
  std::array<rte_mbuf*, 64> burst{};
  if (!started_) {
    // The rx burst of a stopped port is a dummy: empty our rings directly.
    for (rte_ring* r : owned_rings_) {
      while (const unsigned n = rte_ring_dequeue_burst(r, reinterpret_cast<void**>(burst.data()), burst.size(),
                                                       nullptr)) {
        rte_pktmbuf_free_bulk(burst.data(), n);
        drained += n;
      }
    }
    return drained;
  }
  for (std::uint16_t q = 0; q < setup_.queues; ++q) {
    while (const std::uint16_t n = rte_eth_rx_burst(port_id_, q, burst.data(), burst.size())) {
      rte_pktmbuf_free_bulk(burst.data(), n);
      drained += n;
    }
  }
  return drained;
}

namespace {

// net_memif's role from the device's arguments: "server" unless
// role=client is given (the driver's default).
bool memif_server(std::uint16_t port_id) {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port_id, &info) != 0 || info.device == nullptr) return false;
  const rte_devargs* args = rte_dev_devargs(info.device);
  const std::string_view text = args != nullptr && args->args != nullptr ? args->args : "";
  return text.find("role=client") == std::string_view::npos;
}

}  // namespace

// DPDK 22.11's net_memif handles its peer's departure on the interrupt
// thread, unmapping the shared rings and freeing the control channel with no
// lock against the lcore or against our own close. A process that polls,
// stops or closes its port while the peer departs can crash (seen at exit
// in about 1 run of 6 of two processes over memif). So the two ends leave
// in turn: the client's end goes at once, and the server's end waits, idle,
// until the client has gone (link down) before it stops, for at most
// memif_peer_departure_wait.
void Port::wait_for_memif_peer_departure() const noexcept {
  if (!started_ || driver_ != "net_memif" || !memif_server(port_id_)) return;
  constexpr auto memif_peer_departure_wait = std::chrono::seconds(2);
  constexpr auto settle = std::chrono::milliseconds(20);  // the departure's handler finishing
  const auto deadline = std::chrono::steady_clock::now() + memif_peer_departure_wait;
  rte_eth_link link{};
  while (rte_eth_link_get_nowait(port_id_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(settle);
}

Port::~Port() {
  wait_for_memif_peer_departure();
  stop();
  if (ring_port_) {
    // Ports we made: close them and free the rings they receive from (each
    // ring is the rx ring of exactly one port). Their peer must be gone or
    // going too: Loopback destroys both.
    rte_eth_dev_close(port_id_);
    for (rte_ring* r : owned_rings_) {
      rte_mbuf* m = nullptr;
      while (rte_ring_dequeue(r, reinterpret_cast<void**>(&m)) == 0) rte_pktmbuf_free(m);
      rte_ring_free(r);
    }
  }
  for (rte_mempool* pool : rx_pools_) rte_mempool_free(pool);
}

}  // namespace metaroce::engine
