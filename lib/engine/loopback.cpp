#include "engine/loopback.hpp"

#include <atomic>

#include <fmt/format.h>

namespace metaroce::engine {

bool impairs(const fabric::FabricConfig& config) { return !(config == fabric::FabricConfig{}); }

std::unique_ptr<Loopback> Loopback::create(const LoopbackConfig& config, std::string& error) {
  static std::atomic<unsigned> instance{0};
  const unsigned id = instance.fetch_add(1);
  std::unique_ptr<Loopback> lb(new Loopback());
  if (config.planes < 1 || config.planes > transport::max_planes) {
    error = fmt::format("planes {} is outside 1..{}", config.planes, transport::max_planes);
    return nullptr;
  }
  // Plane k's fabric each way: the shared one or its own, seeds apart.
  std::vector<fabric::FabricConfig> forward(config.planes, config.forward), backward(config.planes, config.backward);
  for (const LoopbackConfig::PlaneFabric& pf : config.plane_fabrics) {
    if (pf.plane >= config.planes) {
      error = fmt::format("a fabric for plane {}, but the planes are 0..{}", pf.plane, config.planes - 1);
      return nullptr;
    }
    forward[pf.plane] = pf.forward;
    backward[pf.plane] = pf.backward;
  }
  bool linked = config.inline_link || static_cast<bool>(config.tap);
  for (std::uint16_t k = 0; k < config.planes; ++k) linked = linked || impairs(forward[k]) || impairs(backward[k]);
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
  if (config.planes > 1 && config.lcores > 1) {
    error = "several planes run on one lcore per side: drop --lcores or --planes";
    return nullptr;
  }
  PortSetup ports = config.ports;
  ports.queues = config.lcores;
  ports.ring_unsteered = config.software_handoff;
  lb->planes_.resize(config.planes);
  for (std::uint16_t k = 0; k < config.planes; ++k) {
    Plane& pl = lb->planes_[k];
    // Plane 0 keeps the names it had before there were planes.
    const std::string tag = k == 0 ? fmt::format("lo{}", id) : fmt::format("lo{}p{}", id, k);
    if (linked) {
      if (!Port::create_ring_pair(tag + "a", tag + "la", ports, pl.a, pl.la, error) ||
          !Port::create_ring_pair(tag + "lb", tag + "b", ports, pl.lb, pl.b, error))
        return nullptr;
    } else if (!Port::create_ring_pair(tag + "a", tag + "b", ports, pl.a, pl.b, error)) {
      return nullptr;
    }
  }
  for (Plane& pl : lb->planes_)
    for (Port* p : {pl.a.get(), pl.b.get(), pl.la.get(), pl.lb.get()})
      if (p != nullptr && !p->start(error)) return nullptr;

  // Whole frames of this connection: the payload MTU plus headers, or an
  // ACK carrying one block per path.
  const std::uint32_t frame_l3 = std::max<std::uint32_t>(config.connection.mtu + 256,
                                                         config.connection.paths * 44u + 256);
  const std::uint16_t data_room = data_room_for_mtu(frame_l3);
  // A side's node: its port on plane 0, the others' as more_ports.
  const auto make_node = [&](const char* side, const std::vector<const Port*>& plane_ports,
                             std::unique_ptr<Node>& out) {
    NodeConfig nc;
    nc.name = fmt::format("lo{}{}", id, side);
    nc.port_id = plane_ports[0]->id();
    nc.lcores = config.lcores;
    nc.software_handoff = config.software_handoff;
    nc.hosts = config.hosts;
    nc.hosts.more_ports.clear();
    for (std::size_t k = 1; k < plane_ports.size(); ++k)
      nc.hosts.more_ports.push_back(EnginePortQueue{plane_ports[k]->id(), 0});
    if (nc.hosts.tx_data_room == 0) nc.hosts.tx_data_room = data_room;
    nc.hosts.multi_segment_tx = nc.hosts.multi_segment_tx && plane_ports[0]->multi_segment_tx();
    out = Node::create(nc, error);
    return out != nullptr;
  };
  std::vector<const Port*> ports_a, ports_b;
  for (const Plane& pl : lb->planes_) {
    ports_a.push_back(pl.a.get());
    ports_b.push_back(pl.b.get());
  }
  if (!make_node("A", ports_a, lb->node_a_) || !make_node("B", ports_b, lb->node_b_)) return nullptr;
  if (config.receive_share) {
    for (std::uint16_t k = 0; k < config.lcores; ++k) {
      lb->shares_a_.push_back(config.receive_share(lb->planes_[0].a->link().speed_mbps / config.lcores));
      lb->shares_b_.push_back(config.receive_share(lb->planes_[0].b->link().speed_mbps / config.lcores));
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
    // The links' own pools (copies, clones) shared out over the planes.
    const std::uint32_t link_mbufs = std::max<std::uint32_t>(1024, config.hosts.tx_mbufs / config.planes);
    for (std::uint16_t k = 0; k < config.planes; ++k) {
      Plane& pl = lb->planes_[k];
      const std::string tag = k == 0 ? fmt::format("lo{}", id) : fmt::format("lo{}p{}", id, k);
      ImpairedLinkConfig fwd;
      fwd.name = tag + "f";
      fwd.from_port = pl.la->id();
      fwd.to_port = pl.lb->id();
      fwd.fabric = forward[k];
      fwd.fabric.seed += std::uint64_t{k} * 0x632be5ab;
      fwd.data_room = data_room;
      fwd.mbufs = link_mbufs;
      fwd.tap = config.tap;
      ImpairedLinkConfig bwd = fwd;
      bwd.name = tag + "r";
      bwd.from_port = pl.lb->id();
      bwd.to_port = pl.la->id();
      bwd.fabric = backward[k];
      bwd.fabric.seed += std::uint64_t{k} * 0x632be5ab;
      if (bwd.fabric.seed == fwd.fabric.seed) bwd.fabric.seed = fwd.fabric.seed + 0x9e3779b9;  // independent streams
      pl.forward = ImpairedLink::create(std::move(fwd), error);
      if (!pl.forward) return nullptr;
      pl.backward = ImpairedLink::create(std::move(bwd), error);
      if (!pl.backward) return nullptr;
      lb->forward_links_.push_back(pl.forward.get());
      lb->backward_links_.push_back(pl.backward.get());
    }
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
    a.endpoints.local_mac = mac_or(lb->planes_[0].a->mac(), 0x0a);
    a.endpoints.peer_mac = mac_or(lb->planes_[0].b->mac(), 0x0b);
    a.endpoints.local_ipv4 = 0x0a000001;
    a.endpoints.peer_ipv4 = 0x0a000002;
    a.planes = config.planes;
    // Plane 0's addresses are the endpoints'; plane k's MACs tell the
    // ends and planes apart in captures, its IPs are 10.0.k.1 and 10.0.k.2.
    for (std::uint16_t k = 1; k < config.planes; ++k) {
      transport::PlaneAddresses& pa = a.plane[k];
      pa.port = k;
      const auto kk = static_cast<std::uint8_t>(k);
      const wire::MacAddress ma = lb->planes_[k].a->mac(), mb = lb->planes_[k].b->mac();
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
    for (Plane& pl : planes_)
      for (Port* p : {pl.a.get(), pl.b.get(), pl.la.get(), pl.lb.get()})
        if (p != nullptr) p->drain_rx();
  };
  drain();
  forward_links_.clear();
  backward_links_.clear();
  for (Plane& pl : planes_) {
    pl.forward.reset();
    pl.backward.reset();
  }
  node_a_.reset();
  node_b_.reset();
  drain();
  planes_.clear();
}

std::size_t Loopback::poll_side(Node& node, cc::PortShareBoard* board, std::vector<std::unique_ptr<cc::FairShare>>& shares,
                                const std::vector<ImpairedLink*>& out, std::uint16_t lcore) {
  std::size_t work = node.poll(lcore);
  if (board == nullptr && out.empty()) return work;
  const std::uint64_t now = node.host(lcore).now_ns();
  if (board != nullptr) {
    board->front_turn(lcore, *shares[lcore], now);
    if (lcore == 0) board->rebalance_turn(now);
  }
  for (ImpairedLink* link : out) work += link->forward_once(now);
  return work;
}

std::size_t Loopback::poll_side_a(std::uint16_t lcore) {
  return poll_side(*node_a_, board_a_.get(), shares_a_, forward_links_, lcore);
}

std::size_t Loopback::poll_side_b(std::uint16_t lcore) {
  return poll_side(*node_b_, board_b_.get(), shares_b_, backward_links_, lcore);
}

}  // namespace metaroce::engine
