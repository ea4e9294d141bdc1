#include "engine/loopback.hpp"

#include <atomic>

#include <fmt/format.h>

namespace metaroce::engine {

bool impairs(const fabric::FabricConfig& config) { return !(config == fabric::FabricConfig{}); }

std::unique_ptr<Loopback> Loopback::create(const LoopbackConfig& config, std::string& error) {
  static std::atomic<unsigned> instance{0};
  const unsigned id = instance.fetch_add(1);
  std::unique_ptr<Loopback> lb(new Loopback());
  const bool linked = config.inline_link || config.tap || impairs(config.forward) || impairs(config.backward);
  if (config.lcores < 1 || config.lcores > max_node_lcores) {
    error = fmt::format("lcores {} is outside 1..{}", config.lcores, max_node_lcores);
    return nullptr;
  }
  if (linked && config.lcores > 1) {
    error = "the inline fabric and the frame tap forward one queue: use one lcore per side with them";
    return nullptr;
  }
  if (linked && config.software_handoff) {
    error = "the inline fabric and the frame tap forward one queue: software hand-off needs none of them";
    return nullptr;
  }
  if (config.planes < 1 || config.planes > transport::max_planes) {
    error = fmt::format("planes {} is outside 1..{}", config.planes, transport::max_planes);
    return nullptr;
  }
  if (config.planes > 1 && (linked || config.lcores > 1)) {
    error = "several planes run on one lcore per side without inline fabric or tap: drop --lcores, --fabric and --capture";
    return nullptr;
  }
  PortSetup ports = config.ports;
  ports.queues = config.lcores;
  ports.ring_unsteered = config.software_handoff;
  if (linked) {
    if (!Port::create_ring_pair(fmt::format("lo{}a", id), fmt::format("lo{}la", id), ports, lb->port_a_,
                                lb->port_la_, error) ||
        !Port::create_ring_pair(fmt::format("lo{}lb", id), fmt::format("lo{}b", id), ports, lb->port_lb_,
                                lb->port_b_, error))
      return nullptr;
  } else if (!Port::create_ring_pair(fmt::format("lo{}a", id), fmt::format("lo{}b", id), ports, lb->port_a_,
                                     lb->port_b_, error)) {
    return nullptr;
  }
  for (std::uint16_t k = 1; k < config.planes; ++k) {
    std::unique_ptr<Port> a, b;
    if (!Port::create_ring_pair(fmt::format("lo{}a{}", id, k), fmt::format("lo{}b{}", id, k), ports, a, b, error))
      return nullptr;
    lb->plane_ports_a_.push_back(std::move(a));
    lb->plane_ports_b_.push_back(std::move(b));
  }
  for (Port* p : {lb->port_a_.get(), lb->port_b_.get(), lb->port_la_.get(), lb->port_lb_.get()})
    if (p != nullptr && !p->start(error)) return nullptr;
  for (std::uint16_t k = 1; k < config.planes; ++k)
    if (!lb->plane_ports_a_[k - 1]->start(error) || !lb->plane_ports_b_[k - 1]->start(error)) return nullptr;

  // Whole frames of this connection: the payload MTU plus headers, or an
  // ACK carrying one block per path.
  const std::uint32_t frame_l3 = std::max<std::uint32_t>(config.connection.mtu + 256,
                                                         config.connection.paths * 44u + 256);
  const std::uint16_t data_room = data_room_for_mtu(frame_l3);
  const auto make_node = [&](const char* side, const Port& port, const std::vector<std::unique_ptr<Port>>& more,
                             std::unique_ptr<Node>& out) {
    NodeConfig nc;
    nc.name = fmt::format("lo{}{}", id, side);
    nc.port_id = port.id();
    nc.lcores = config.lcores;
    nc.software_handoff = config.software_handoff;
    nc.hosts = config.hosts;
    nc.hosts.more_ports.clear();
    for (const auto& p : more) nc.hosts.more_ports.push_back(EnginePortQueue{p->id(), 0});
    if (nc.hosts.tx_data_room == 0) nc.hosts.tx_data_room = data_room;
    nc.hosts.multi_segment_tx = nc.hosts.multi_segment_tx && port.multi_segment_tx();
    out = Node::create(nc, error);
    return out != nullptr;
  };
  if (!make_node("A", *lb->port_a_, lb->plane_ports_a_, lb->node_a_) ||
      !make_node("B", *lb->port_b_, lb->plane_ports_b_, lb->node_b_))
    return nullptr;
  if (config.receive_share) {
    for (std::uint16_t k = 0; k < config.lcores; ++k) {
      lb->shares_a_.push_back(config.receive_share(lb->port_a_->link().speed_mbps / config.lcores));
      lb->shares_b_.push_back(config.receive_share(lb->port_b_->link().speed_mbps / config.lcores));
      lb->node_a_->host(k).host().set_receive_share(lb->shares_a_.back().get());
      lb->node_b_->host(k).host().set_receive_share(lb->shares_b_.back().get());
    }
    if (config.lcores > 1) {
      const auto board = [&](const std::vector<std::unique_ptr<cc::FairShare>>& fronts) {
        std::uint64_t port = 0;
        for (const auto& f : fronts) port += f->capacity_bps();
        return std::make_unique<cc::PortShareBoard>(port, fronts.size());
      };
      lb->board_a_ = board(lb->shares_a_);
      lb->board_b_ = board(lb->shares_b_);
    }
  }

  if (linked) {
    ImpairedLinkConfig fwd;
    fwd.name = fmt::format("lo{}f", id);
    fwd.from_port = lb->port_la_->id();
    fwd.to_port = lb->port_lb_->id();
    fwd.fabric = config.forward;
    fwd.data_room = data_room;
    fwd.mbufs = config.hosts.tx_mbufs;
    fwd.tap = config.tap;
    ImpairedLinkConfig bwd = fwd;
    bwd.name = fmt::format("lo{}r", id);
    bwd.from_port = lb->port_lb_->id();
    bwd.to_port = lb->port_la_->id();
    bwd.fabric = config.backward;
    if (bwd.fabric.seed == fwd.fabric.seed) bwd.fabric.seed = fwd.fabric.seed + 0x9e3779b9;  // independent streams
    lb->forward_ = ImpairedLink::create(std::move(fwd), error);
    if (!lb->forward_) return nullptr;
    lb->backward_ = ImpairedLink::create(std::move(bwd), error);
    if (!lb->backward_) return nullptr;
  }

  // Ring ports have an all-zero MAC: give captures locally administered
  // addresses that tell the two ends apart.
  const auto mac_or = [](wire::MacAddress mac, std::uint8_t last) {
    return mac == wire::MacAddress{} ? wire::MacAddress{0x02, 0, 0, 0, 0, last} : mac;
  };
  if (config.qps < 1 || config.qps > max_loopback_qps) {
    error = fmt::format("qps {} is outside 1..{}", config.qps, max_loopback_qps);
    return nullptr;
  }
  // Frames reach the lcore that owns their QPN (net_ring: tx queue i is
  // the peer's rx queue i; or the software hand-off), checked by a probe per
  // queue each way before there is any connection. (Through inline links
  // only their forwarders move frames: the nodes alone cannot probe.)
  if (config.lcores > 1 && !linked) {
    if (!check_steering(*lb->node_a_, *lb->node_b_, lb->steering_ab_, error) ||
        !check_steering(*lb->node_b_, *lb->node_a_, lb->steering_ba_, error)) {
      error = "steering check: " + error;
      return nullptr;
    }
  }
  if (config.before_connections) config.before_connections();
  lb->connections_a_.reserve(config.qps);
  lb->connections_b_.reserve(config.qps);
  for (std::uint32_t i = 0; i < config.qps; ++i) {
    transport::ConnectionConfig a = config.connection;
    a.endpoints.local_mac = mac_or(lb->port_a_->mac(), 0x0a);
    a.endpoints.peer_mac = mac_or(lb->port_b_->mac(), 0x0b);
    a.endpoints.local_ipv4 = 0x0a000001;
    a.endpoints.peer_ipv4 = 0x0a000002;
    a.planes = config.planes;
    // Plane 0's addresses are the endpoints'; plane k's MACs tell the
    // ends and planes apart in captures, its IPs are 10.0.k.1 and 10.0.k.2.
    for (std::uint16_t k = 1; k < config.planes; ++k) {
      transport::PlaneAddresses& pa = a.plane[k];
      pa.port = k;
      const auto kk = static_cast<std::uint8_t>(k);
      const wire::MacAddress ma = lb->plane_ports_a_[k - 1]->mac(), mb = lb->plane_ports_b_[k - 1]->mac();
      pa.local_mac = ma == wire::MacAddress{} ? wire::MacAddress{0x02, 0, 0, 0, kk, 0x0a} : ma;
      pa.peer_mac = mb == wire::MacAddress{} ? wire::MacAddress{0x02, 0, 0, 0, kk, 0x0b} : mb;
      pa.local_ipv4 = 0x0a000001u + (static_cast<std::uint32_t>(k) << 8);
      pa.peer_ipv4 = 0x0a000002u + (static_cast<std::uint32_t>(k) << 8);
    }
    a.local_qpn = 0x000101 + i;
    // One lcore keeps the QPNs it always had; several need both ends on
    // the same queue (QPNs equal modulo lcores).
    a.peer_qpn = config.lcores == 1 ? 0x000202 + i : a.local_qpn + 0x100u * config.lcores;
    a.initial_psn = (0x10000 + id + i * 0x1000) & wire::psn_mask;
    a.peer_initial_psn = (0x20000 + id + i * 0x1000) & wire::psn_mask;
    transport::ConnectionConfig b = a;
    std::swap(b.endpoints.local_mac, b.endpoints.peer_mac);
    std::swap(b.endpoints.local_ipv4, b.endpoints.peer_ipv4);
    std::swap(b.local_qpn, b.peer_qpn);
    std::swap(b.initial_psn, b.peer_initial_psn);
    for (auto& pb : b.plane) {
      std::swap(pb.local_mac, pb.peer_mac);
      std::swap(pb.local_ipv4, pb.peer_ipv4);
    }
    if (config.secure_pair && !config.secure_pair(a, b, error)) return nullptr;
    const std::uint16_t lcore = lb->node_a_->owner_of(a.local_qpn);
    auto* ca = lb->node_a_->host(lcore).add_connection(a, config.congestion ? config.congestion() : nullptr, error);
    if (ca == nullptr) return nullptr;
    auto* cb = lb->node_b_->host(lcore).add_connection(b, config.congestion ? config.congestion() : nullptr, error);
    if (cb == nullptr) return nullptr;
    ca->connect();
    cb->connect();
    lb->connections_a_.push_back(ca);
    lb->connections_b_.push_back(cb);
  }
  return lb;
}

Loopback::~Loopback() {
  // Every mbuf back to its pool before the pools go: what waits in the
  // rings, then what the links and hosts still hold (their destructors). The
  // links first: their delay lines hold the hosts' transmit mbufs.
  const auto drain = [this] {
    for (Port* p : {port_a_.get(), port_b_.get(), port_la_.get(), port_lb_.get()})
      if (p != nullptr) p->drain_rx();
    for (auto& p : plane_ports_a_) p->drain_rx();
    for (auto& p : plane_ports_b_) p->drain_rx();
  };
  drain();
  forward_.reset();
  backward_.reset();
  node_a_.reset();
  node_b_.reset();
  drain();
  port_a_.reset();
  port_b_.reset();
  port_la_.reset();
  port_lb_.reset();
  plane_ports_a_.clear();
  plane_ports_b_.clear();
}

std::size_t Loopback::poll_side(Node& node, cc::PortShareBoard* board, std::vector<std::unique_ptr<cc::FairShare>>& shares,
                                ImpairedLink* out, std::uint16_t lcore) {
  std::size_t work = node.poll(lcore);
  if (board == nullptr && out == nullptr) return work;
  const std::uint64_t now = node.host(lcore).now_ns();
  if (board != nullptr) {
    board->front_turn(lcore, *shares[lcore], now);
    if (lcore == 0) board->rebalance_turn(now);
  }
  if (out != nullptr) work += out->forward_once(now);
  return work;
}

std::size_t Loopback::poll_side_a(std::uint16_t lcore) {
  return poll_side(*node_a_, board_a_.get(), shares_a_, forward_.get(), lcore);
}

std::size_t Loopback::poll_side_b(std::uint16_t lcore) {
  return poll_side(*node_b_, board_b_.get(), shares_b_, backward_.get(), lcore);
}

}  // namespace metaroce::engine
