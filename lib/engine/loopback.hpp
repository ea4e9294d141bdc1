// Both ends of one or more connections in one process: two engine hosts over
// net_ring pairs, optionally through an inline fabric (one ImpairedLink per
// direction and plane), with the connections set up directly in memory (QPNs, PSNs and
// addresses exchanged by assignment; two processes use the in-band
// connection manager, lib/cm, instead).
//
//   no fabric:  host A [port a] <==ring pair==> [port b] host B
//   fabric:     host A [a] <==> [la] -forward link-> [lb] <==> [b] host B
//                                    <-backward link-
//
// Side A = host A + the forward link; side B = host B + the backward link.
// Each side touches only its own rings, so the two sides can run on two
// lcores, or alternate on one thread (tests).
//
// With `planes` > 1 each plane is a drawing as above of its own: its own
// pair (or two pairs and two links), host A's and B's port k on plane k.
// With a fabric on any plane every plane goes through links of its own
// (an unimpaired one forwards as a perfect wire), so the planes' round
// trips stay alike; side A drives every forward link, side B every
// backward one.
//
// With `lcores` > 1 each side is a node of that many hosts (engine/node.hpp)
// on a pair with as many queues (no fabric): host i of A and host i of B
// drive queue i of their ports, and connection pair i lives on host
// steering_queue(QPN) of both sides, so connections spread evenly over the
// lcores and each lane (host i of A + host i of B) can run on lcores of its
// own.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>
#include <memory>
#include <span>
#include <string>

#include "cc/fair_share.hpp"
#include "cc/port_share_board.hpp"
#include "engine/steering_check.hpp"
#include "engine/engine_host.hpp"
#include "engine/impaired_link.hpp"
#include "engine/node.hpp"
#include "engine/port.hpp"
#include "fabric/config.hpp"
#include "transport/config.hpp"

namespace metaroce::engine {

inline constexpr std::uint32_t max_loopback_qps = 16384;

struct LoopbackConfig {
  // Mode, mtu, paths, streams, windows and timers; endpoints, QPNs and PSNs
  // are filled in.
  transport::ConnectionConfig connection{};
  PortSetup ports{};
  EngineHostConfig hosts{};  // name, port and queue are filled in
  // Hosts per side (queues of the pair), 1..max_node_lcores; more than one
  // needs no fabric, tap or inline link (the links forward one queue).
  std::uint16_t lcores = 1;
  // The pair built unsteered (every tx queue feeds the peer's rx queue 0,
  // as a PMD that cannot steer by QPN) and the nodes hand frames off in
  // software: what the hand-off costs, against the steered pair.
  bool software_handoff = false;
  // Planes, 1..transport::max_planes: a net_ring pair per plane, each host
  // with a port on every one (EngineHostConfig::more_ports), and
  // connections with that many planes (plane k on port index k, its own
  // MACs and IPs 10.0.k.1 and 10.0.k.2). More than one needs one lcore.
  std::uint16_t planes = 1;
  // Connections (QP pairs) between the two sides, perftest's -q, 1..16384
  // (hosts.max_connections must allow as many per host): pair i has QPNs
  // 0x101 + i (A) and 0x202 + i (B) with one lcore; with several,
  // 0x101 + i and 0x101 + i + 0x100 x lcores, two QPNs of the same queue.
  std::uint32_t qps = 1;
  // The congestion control of each connection end (called once per end);
  // empty: none (path_window bounds each path).
  std::function<std::unique_ptr<transport::CongestionControl>()> congestion;
  // Each host's receive share, made once its port is up (from its link
  // rate, divided by lcores); empty: none. Connections with a controller that follows the
  // rate hint are attached to their host's (Host::set_receive_share).
  // With several lcores, one port's hosts are fronts of one share of the
  // port (cc::PortShareBoard): their capacities add up to the port's and
  // are divided by the senders each front sees, every 500 us.
  std::function<std::unique_ptr<cc::FairShare>(std::uint32_t link_speed_mbps)> receive_share;
  bool inline_link = false;  // put the links in even without impairment (for the tap)
  // Every plane's fabric, unless plane_fabrics names the plane. Plane k > 0
  // draws from seeds of its own: seed + k x 0x632be5ab (so the same spec on
  // two planes loses different frames).
  fabric::FabricConfig forward{};   // A -> B
  fabric::FabricConfig backward{};  // B -> A
  // Plane `plane` (< planes) gets these instead (a later entry for the same
  // plane wins): e.g. one plane blackholed while the others are clean.
  struct PlaneFabric {
    std::uint16_t plane = 0;
    fabric::FabricConfig forward{}, backward{};
  };
  std::vector<PlaneFabric> plane_fabrics;
  std::function<void(std::span<const std::uint8_t>, std::uint64_t)> tap;  // every frame, both ways
  // Called once the ports, pools and hosts exist, just before the
  // connections are created (an app measuring what they cost reads its
  // memory here).
  std::function<void()> before_connections;
  // Called for each pair's two configs (A's, B's) before they are created:
  // how an app makes the pair secure (their `security`). False and `error`
  // stops the creation.
  std::function<bool(transport::ConnectionConfig& a, transport::ConnectionConfig& b, std::string& error)> secure_pair;
};

class Loopback {
 public:
  static std::unique_ptr<Loopback> create(const LoopbackConfig& config, std::string& error);
  // Drains the rings and frees every mempool: call it with both sides stopped.
  ~Loopback();
  Loopback(const Loopback&) = delete;
  Loopback& operator=(const Loopback&) = delete;

  [[nodiscard]] std::uint16_t lcores() const noexcept { return node_a_->lcores(); }
  [[nodiscard]] EngineHost& host_a(std::uint16_t lcore = 0) noexcept { return node_a_->host(lcore); }
  [[nodiscard]] EngineHost& host_b(std::uint16_t lcore = 0) noexcept { return node_b_->host(lcore); }
  [[nodiscard]] Node& node_a() noexcept { return *node_a_; }
  [[nodiscard]] Node& node_b() noexcept { return *node_b_; }
  // The lcore (host index, on both sides) of connection pair i.
  [[nodiscard]] std::uint16_t lcore_of(std::size_t i) const noexcept {
    return node_a_->owner_of(connections_a_[i]->config().local_qpn);
  }
  [[nodiscard]] transport::Connection& connection_a(std::size_t i = 0) noexcept { return *connections_a_[i]; }
  [[nodiscard]] transport::Connection& connection_b(std::size_t i = 0) noexcept { return *connections_b_[i]; }
  [[nodiscard]] std::size_t qps() const noexcept { return connections_a_.size(); }
  // Host `lcore` of A's and B's receive shares (nullptr without config.receive_share).
  [[nodiscard]] const transport::ReceiveShare* receive_share_a(std::uint16_t lcore = 0) const noexcept {
    return shares_a_.empty() ? nullptr : shares_a_[lcore].get();
  }
  [[nodiscard]] const transport::ReceiveShare* receive_share_b(std::uint16_t lcore = 0) const noexcept {
    return shares_b_.empty() ? nullptr : shares_b_[lcore].get();
  }
  // Side A's and B's port shares: nullptr with one lcore or without
  // config.receive_share.
  [[nodiscard]] const cc::PortShareBoard* port_share_a() const noexcept { return board_a_.get(); }
  [[nodiscard]] const cc::PortShareBoard* port_share_b() const noexcept { return board_b_.get(); }
  // With several lcores: the start-up steering checks (A's probes to B,
  // B's to A; check_steering), run before the connections exist.
  [[nodiscard]] const SteeringCheck& steering_a_to_b() const noexcept { return steering_ab_; }
  [[nodiscard]] const SteeringCheck& steering_b_to_a() const noexcept { return steering_ba_; }
  // Plane k's port on side A and B (k < planes).
  [[nodiscard]] std::uint16_t plane_port_a(std::uint16_t k) const noexcept { return planes_[k].a->id(); }
  [[nodiscard]] std::uint16_t plane_port_b(std::uint16_t k) const noexcept { return planes_[k].b->id(); }
  [[nodiscard]] std::uint16_t planes() const noexcept { return static_cast<std::uint16_t>(planes_.size()); }
  // Plane k's links (nullptr without an inline fabric).
  [[nodiscard]] const ImpairedLink* forward_link(std::uint16_t k = 0) const noexcept {
    return planes_[k].forward.get();
  }
  [[nodiscard]] const ImpairedLink* backward_link(std::uint16_t k = 0) const noexcept {
    return planes_[k].backward.get();
  }

  // One turn of side A's host `lcore` (with the forward link) or side B's
  // (with the backward link), its node's commands first.
  std::size_t poll_side_a(std::uint16_t lcore = 0);
  std::size_t poll_side_b(std::uint16_t lcore = 0);

 private:
  Loopback() = default;
  // One turn of a side: its node's host `lcore`, then the port share (one
  // clock reading for both) and the outgoing link where there are any.
  static std::size_t poll_side(Node& node, cc::PortShareBoard* board,
                               std::vector<std::unique_ptr<cc::FairShare>>& shares,
                               const std::vector<ImpairedLink*>& out, std::uint16_t lcore);
  // One plane: host A's port a and host B's port b, joined directly or
  // through la -forward-> lb and back.
  struct Plane {
    std::unique_ptr<Port> a, b, la, lb;
    std::unique_ptr<ImpairedLink> forward, backward;
  };
  std::vector<Plane> planes_;
  std::vector<ImpairedLink*> forward_links_, backward_links_;  // every plane's, side A's and B's to drive
  // One per host, outliving the hosts' connections. A host's share is its
  // own (a share is written by its lcore only); with several lcores the
  // board sets each one's part of the port (its lcore applies it).
  std::vector<std::unique_ptr<cc::FairShare>> shares_a_, shares_b_;
  std::unique_ptr<cc::PortShareBoard> board_a_, board_b_;
  SteeringCheck steering_ab_, steering_ba_;
  std::unique_ptr<Node> node_a_, node_b_;
  std::vector<transport::Connection*> connections_a_, connections_b_;
};

// True when the config impairs anything (a fabric must be put in).
[[nodiscard]] bool impairs(const fabric::FabricConfig& config);

}  // namespace metaroce::engine
