#include "stack/endpoint.hpp"

#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <initializer_list>
#include <string_view>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "cc/registry.hpp"
#include "secure/keys.hpp"
#include "secure/trailer.hpp"
#include "engine/eal.hpp"
#include "engine/preset.hpp"
#include "engine/steering.hpp"

namespace metaroce::stack {

namespace {

// The preset with --iface applied.
bool load_remote_preset(const std::string& path, const std::string& iface, engine::DriverPreset& preset,
                        std::string& error) {
  if (!engine::load_preset(path, preset, error)) return false;
  if (!iface.empty()) {
    std::string args = preset.port.vdev_args;
    const auto at = args.find("iface=");
    if (at == std::string::npos) {
      args = "iface=" + iface + (args.empty() ? "" : "," + args);
    } else {
      const auto end = args.find(',', at);
      args.replace(at, end == std::string::npos ? std::string::npos : end - at, "iface=" + iface);
    }
    preset.port.vdev_args = args;
  }
  return true;
}
bool load_remote_preset(const EndpointConfig& o, engine::DriverPreset& preset, std::string& error) {
  return load_remote_preset(o.preset_path, o.iface, preset, error);
}

// The EAL device of plane k's preset: a vdev numbered k (net_af_packet1
// next to plane 0's net_af_packet0), or the preset's PCI address.
std::string preset_device(const engine::DriverPreset& preset, std::size_t plane) {
  return engine::is_vdev(preset.port.driver) ? fmt::format("{}{}", engine::to_string(preset.port.driver), plane)
                                             : preset.port.pci;
}

// Bytes of a frame that are not payload, at the most: Ethernet, VLAN, IPv6,
// UDP, BTH and its extensions, the trailers and the ICRC. A port of L3 MTU
// m carries m - headers_budget payload bytes per packet.
constexpr std::uint32_t headers_budget = 128;

// How long a port's link may take to come up after start.
constexpr auto link_wait = std::chrono::seconds(2);

// Drivers whose link is their connection to a peer process, which may
// start later (net_memif, net_vhost): not a setup error; if the peer never
// comes, the connection manager's timeout says so.
bool link_waits_for_a_peer(const std::string& driver) { return driver == "net_memif" || driver == "net_vhost"; }

// Waits up to link_wait for the port's link; false with one line naming the
// fix. net_af_packet reports its link up from start whatever its interface's
// state (DPDK 22.11): Port::link() adds the interface's own flags.
bool wait_for_link(const engine::Port& port, std::string& error) {
  if (link_waits_for_a_peer(port.driver())) return true;
  const auto deadline = std::chrono::steady_clock::now() + link_wait;
  engine::LinkState link = port.link();
  while (!link.up() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    link = port.link();
  }
  if (link.up()) return true;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(link_wait).count();
  if (!link.interface.empty() && !link.interface_up) {
    error = fmt::format("port '{}': its interface {} is down: run `ip link set dev {} up` (for a veth, bring up "
                        "the other end too)",
                        port.name(), link.interface, link.interface);
  } else if (!link.interface.empty()) {
    error = fmt::format("port '{}': its interface {} is up but has no carrier {} s after start: bring up the "
                        "other end (for a veth, `ip link set dev PEER up` in the peer's namespace) or check the "
                        "cable",
                        port.name(), link.interface, seconds);
  } else {
    error = fmt::format("port '{}' ({}): link down {} s after start: check the cable and the switch port (or "
                        "the other end of a virtual device)",
                        port.name(), port.driver(), seconds);
  }
  return false;
}

}  // namespace

std::vector<std::string> port_eal_arguments(const std::string& program, const std::vector<std::string>& user,
                                            const engine::HugepageStatus& hugepages, int pid) {
  // "-l", "-l0-1", "--lcores", "--lcores=0-1", "--lcores" "0-1".
  const auto user_gives = [&](std::initializer_list<std::string_view> options) {
    return std::any_of(user.begin(), user.end(), [&](std::string_view arg) {
      return std::any_of(options.begin(), options.end(), [&](std::string_view o) {
        if (arg == o) return true;
        if (o.size() == 2) return arg.size() > 2 && arg.substr(0, 2) == o;
        return arg.size() > o.size() && arg.substr(0, o.size()) == o && arg[o.size()] == '=';
      });
    });
  };
  std::vector<std::string> args = {program};
  if (!user_gives({"--file-prefix"})) args.push_back(fmt::format("--file-prefix={}-{}", program, pid));
  if (!user_gives({"-l", "-c", "--lcores"})) args.insert(args.end(), {"-l", "0"});
  // As engine::eal_arguments does for a preset with hugepages=auto.
  if (!user_gives({"-m", "--socket-mem", "--no-huge", "--in-memory", "--huge-dir"})) {
    if (hugepages.usable()) {
      args.insert(args.end(), {"--in-memory", "-m", "512"});
    } else {
      args.insert(args.end(), {"--no-huge", "-m", "512"});
      if (!user_gives({"--no-shconf"})) args.emplace_back("--no-shconf");
    }
  }
  if (!user_gives({"-a", "--allow", "-b", "--block", "--no-pci"})) args.emplace_back("--no-pci");
  args.insert(args.end(), user.begin(), user.end());
  return args;
}

bool start_eal(const EndpointConfig& o, std::string& error) {
  if (!o.preset_path.empty()) {
    engine::DriverPreset preset;
    if (!load_remote_preset(o, preset, error)) return false;
    engine::EalOptions eal = engine::eal_options(preset);
    // The other planes' devices too (their presets' EAL sections aside).
    for (std::size_t k = 1; k <= o.more_planes.size(); ++k) {
      const EndpointConfig::PlanePort& plane = o.more_planes[k - 1];
      engine::DriverPreset more;
      if (!load_remote_preset(plane.preset_path, plane.iface, more, error)) return false;
      if (!engine::is_vdev(more.port.driver))
        eal.pci_allow.push_back(more.port.pci);
      else if (more.port.driver != engine::Driver::net_ring)
        eal.vdevs.push_back(preset_device(more, k) + (more.port.vdev_args.empty() ? "" : "," + more.port.vdev_args));
    }
    eal.program_name = o.program;
    eal.extra_args.push_back(fmt::format("--file-prefix={}-{}", o.program, ::getpid()));
    return engine::start_eal(eal, error);
  }
  return engine::start_eal_with_arguments(
      port_eal_arguments(o.program, o.eal_args, engine::detect_hugepages(), ::getpid()), error);
}

LaneRings::~LaneRings() {
  engine::remove_flow_rules(port_id, rules);
  for (rte_ring* r : rings) {
    void* frame = nullptr;
    while (rte_ring_dequeue(r, &frame) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(frame));
    rte_ring_free(r);
  }
}

std::shared_ptr<LaneRings> make_lane_rings(const std::string& port_name, std::uint16_t lanes, std::string& error) {
  static std::atomic<unsigned> made{0};
  auto out = std::make_shared<LaneRings>();
  const unsigned id = made++;
  for (std::uint16_t k = 0; k < lanes; ++k) {
    const std::string name = fmt::format("lanes{}.{}", id, k);  // RTE_RING_NAMESIZE: short
    rte_ring* r = rte_ring_create(name.c_str(), 4096, SOCKET_ID_ANY, RING_F_SC_DEQ);
    if (r == nullptr) {
      error = fmt::format("port {}: cannot create the hand-off ring of lane {}: {} (EAL memory left? give -m more)",
                          port_name, k, rte_strerror(rte_errno));
      return nullptr;
    }
    out->rings.push_back(r);
  }
  return out;
}

Endpoint::~Endpoint() {
  telemetry.reset();  // it reads the host: unregistered first
  host.reset();       // connections and tx mbufs before the port stops
  if (port && port.use_count() == 1) {  // the last lane of the port
    port->wait_for_memif_peer_departure();
    port->stop();
  }
  for (auto& p : more_ports) {
    p->wait_for_memif_peer_departure();
    p->stop();
  }
}

transport::Connection* Endpoint::add_connection(const transport::ConnectionConfig& config,
                                                std::unique_ptr<transport::CongestionControl> congestion,
                                                std::string& error) {
  transport::Connection* c = host->add_connection(config, std::move(congestion), error);
  if (c != nullptr && telemetry) telemetry->add_connection(c);
  return c;
}

bool Endpoint::remove_connection(std::uint32_t local_qpn) {
  const transport::Connection* c = host->connection(local_qpn);
  if (c == nullptr) return false;
  if (telemetry) telemetry->remove_connection(c);  // before the connection goes
  return host->remove_connection(local_qpn);
}

std::size_t Endpoint::turn() {
  cm_frames.clear();
  cm->poll(host->now_ns(), cm_frames);
  for (const auto& f : cm_frames) host->send_frame(f);
  const std::size_t work = host->poll_once();
  if (share_board) {
    const std::uint64_t now = host->now_ns();
    share_board->front_turn(queue, *receive_share, now);
    if (queue == 0) share_board->rebalance_turn(now);
  }
  if (telemetry) telemetry->maybe_publish();
  cm->take_events(events);
  return work + cm_frames.size();
}

void Endpoint::idle(std::size_t work) const {
  if (work == 0 && idle_sleep_us != 0) std::this_thread::sleep_for(std::chrono::microseconds(idle_sleep_us));
}

bool open_endpoint(const EndpointConfig& o, Endpoint& e, std::string& error) {
  engine::PortSetup setup;
  engine::EngineHostConfig host_config;
  std::string device = o.port_name;
  const bool own_port = o.shared_port == nullptr;
  if (!o.preset_path.empty()) {
    engine::DriverPreset preset;
    if (!load_remote_preset(o, preset, error)) return false;
    setup = engine::port_setup(preset);
    device = engine::is_vdev(preset.port.driver) ? fmt::format("{}0", engine::to_string(preset.port.driver))
                                                 : preset.port.pci;
    if (o.queues > 1) setup.queues = o.queues;
    e.port = own_port ? std::shared_ptr<engine::Port>(engine::Port::open(device, setup, error)) : o.shared_port;
    if (!e.port) return false;
    host_config = engine::host_config(preset, e.port->multi_segment_tx());
  } else {
    setup.mtu = std::max<std::uint32_t>(o.mtu + headers_budget, 1500);
    setup.mbufs = o.mbufs;
    setup.queues = o.queues;
    e.port = own_port ? std::shared_ptr<engine::Port>(engine::Port::open(device, setup, error)) : o.shared_port;
    if (!e.port) return false;
    host_config.multi_segment_tx = e.port->multi_segment_tx();
    host_config.tx_mbufs = o.mbufs;
    if (o.zero_copy_threshold != 0) host_config.zero_copy_threshold = o.zero_copy_threshold;
    host_config.tx_data_room = engine::data_room_for_mtu(setup.mtu);
  }
  if (own_port && (!e.port->start(error) || !wait_for_link(*e.port, error))) return false;
  // Planes 1..: a port each, sized as its preset says (or as plane 0's
  // with --port), a queue of the same host.
  std::uint32_t port_mtu = setup.mtu;
  for (std::size_t k = 1; k <= o.more_planes.size(); ++k) {
    const EndpointConfig::PlanePort& plane = o.more_planes[k - 1];
    engine::PortSetup plane_setup = setup;
    std::string plane_device = plane.port_name;
    if (!plane.preset_path.empty()) {
      engine::DriverPreset preset;
      if (!load_remote_preset(plane.preset_path, plane.iface, preset, error)) return false;
      plane_setup = engine::port_setup(preset);
      plane_device = preset_device(preset, k);
    }
    auto port = engine::Port::open(plane_device, plane_setup, error);
    if (!port) return false;
    if (!port->start(error) || !wait_for_link(*port, error)) {
      error = fmt::format("plane {}: {}", k, error);
      return false;
    }
    host_config.more_ports.push_back(engine::EnginePortQueue{port->id(), 0});
    host_config.multi_segment_tx = host_config.multi_segment_tx && port->multi_segment_tx();
    port_mtu = std::min(port_mtu, plane_setup.mtu);
    e.more_ports.push_back(std::move(port));
  }
  host_config.name = o.host_name;
  host_config.port_id = e.port->id();
  host_config.queue = o.queue;
  host_config.queues = std::max<std::uint16_t>(o.queues, 1);
  e.queue = o.queue;
  host_config.idle_sleep_us = o.idle_sleep_us;
  host_config.max_connections = o.max_connections;
  e.idle_sleep_us = o.idle_sleep_us;
  e.host = engine::EngineHost::create(host_config, error);
  if (!e.host) return false;
  e.receive_share = cc::make_receive_share(o.receive_capacity_bps, e.port->link().speed_mbps);
  e.host->host().set_receive_share(e.receive_share.get());
  cm::ManagerConfig cm_config;
  cm_config.local.local_mac = e.port->mac();
  if (!wire::parse_ip(o.local_ip, e.local_address)) {
    error = fmt::format("--local-ip '{}' is not an IP address (give A.B.C.D, or an IPv6 address such as fd00::1)",
                        o.local_ip);
    return false;
  }
  cm_config.local.ip_version = e.local_address.version;
  cm_config.local.local_ipv4 = e.local_address.ipv4;
  cm_config.local.local_ipv6 = e.local_address.ipv6;
  // A plane per port: port index k, that port's MAC and the plane's address
  // (offered to the peer in REQ and REP; plane 0's are the frames').
  cm_config.planes = static_cast<std::uint16_t>(1 + e.more_ports.size());
  if (cm_config.planes > cm::max_cm_planes(e.local_address.version)) {
    error = fmt::format("{} ports: the connection manager offers at most {} planes over IPv{}", cm_config.planes,
                        cm::max_cm_planes(e.local_address.version), e.local_address.version);
    return false;
  }
  for (std::uint16_t k = 0; k < cm_config.planes; ++k) {
    transport::PlaneAddresses& a = cm_config.local_planes[k];
    a.port = k;
    a.local_mac = k == 0 ? e.port->mac() : e.more_ports[k - 1]->mac();
    wire::IpAddress ip = e.local_address;
    const std::string& text = k == 0 ? o.local_ip : o.more_planes[k - 1].local_ip;
    if (k > 0 && !text.empty() && (!wire::parse_ip(text, ip) || ip.version != e.local_address.version)) {
      error = fmt::format("plane {}: address '{}' is not an IPv{} address like --local-ip {}: give one of its family",
                          k, text, e.local_address.version, o.local_ip);
      return false;
    }
    a.local_ipv4 = ip.ipv4;
    a.local_ipv6 = ip.ipv6;
  }
  // ARP and neighbour discovery on this port: the kernel of a router (or
  // a peer) learns our MAC from our answers, and resolve_next_hop learns its.
  host::NeighbourConfig neighbours;
  neighbours.port_name = e.port->name();
  neighbours.local_mac = e.port->mac();
  neighbours.ipv4_present = e.local_address.version == 4;
  neighbours.local_ipv4 = e.local_address.ipv4;
  neighbours.ipv6_present = e.local_address.version == 6;
  neighbours.local_ipv6 = e.local_address.ipv6;
  neighbours.tries = std::max<std::uint32_t>(o.neighbour_tries, 1);
  neighbours.retry_interval = static_cast<std::uint64_t>(std::max(0.001, o.neighbour_retry_s) * 1e9);
  e.host->host().enable_neighbours(neighbours);
  cm_config.retry_interval = 100'000'000;
  cm_config.retries = static_cast<std::uint32_t>(std::max(1.0, std::ceil(o.cm_timeout_s * 10.0)));
  // The payload per packet this port carries: a server agrees to no more,
  // a client asks no more (a preset's mtu= may be smaller than --mtu).
  cm_config.max_mtu = port_mtu > headers_budget + 256 ? port_mtu - headers_budget : 256;
  cm_config.max_connections = o.max_connections;
  if (!o.key_file.empty()) {
    if (!secure::load_psk(o.key_file, cm_config.psk, error)) return false;
    cm_config.secure = true;
    cm_config.protection = o.auth_only ? secure::Protection::auth_only : secure::Protection::encrypt;
    // Every frame carries the trailer: the payload per packet leaves it room.
    cm_config.max_mtu -= static_cast<std::uint32_t>(secure::trailer_bytes);
  }
  cm_config.pkey = o.pkey;
  cm_config.queues = std::max<std::uint16_t>(o.queues, 1);
  cm_config.own_queue_only = o.queues > 1;  // a lane's manager
  cm_config.queue = o.queue;
  cm_config.ibta_cm = o.ibta_cm;
  e.cm = std::make_unique<cm::Manager>(cm_config);
  e.host->set_management_handler(
      [cm = e.cm.get()](std::uint64_t now, const wire::ParsedFrame& frame) { cm->on_frame(now, frame); });
  e.telemetry = std::make_unique<engine::TelemetryPublisher>(*e.host, std::vector<transport::Connection*>{});
  return true;
}

bool resolve_next_hop(Endpoint& e, const std::string& peer, const std::string& gateway, const std::string& peer_mac,
                      NextHop& out, std::string& error, const std::atomic<bool>& interrupted) {
  const std::uint8_t family = e.local_address.version;
  if (!wire::parse_ip(peer, out.peer)) {
    error = fmt::format("'{}' is not an IP address: give A.B.C.D, or an IPv6 address such as fd00::1", peer);
    return false;
  }
  if (out.peer.version != family) {
    error = fmt::format("{} is IPv{} but --local-ip {} is IPv{}: give both of one family", peer, out.peer.version,
                        wire::to_string(e.local_address), family);
    return false;
  }
  out.via = out.peer;
  if (!gateway.empty()) {
    if (!wire::parse_ip(gateway, out.via)) {
      error = fmt::format("--gateway '{}' is not an IP address: give A.B.C.D, or an IPv6 address such as fd00::1",
                          gateway);
      return false;
    }
    if (out.via.version != family) {
      error = fmt::format("--gateway {} is IPv{} but --local-ip {} is IPv{}: give a gateway of the same family",
                          gateway, out.via.version, wire::to_string(e.local_address), family);
      return false;
    }
  }
  host::Neighbours& neighbours = *e.host->host().neighbours();
  out.given = !peer_mac.empty();
  if (out.given) {
    if (!parse_mac(peer_mac, out.mac)) {
      error = fmt::format("--peer-mac '{}' is not a MAC address: give xx:xx:xx:xx:xx:xx", peer_mac);
      return false;
    }
    neighbours.set_permanent(out.via, out.mac);
    return true;
  }
  for (;;) {
    const host::Resolution r = neighbours.resolve(e.host->now_ns(), out.via);
    if (r.usable()) {
      out.mac = r.mac;
      return true;
    }
    if (r.state == host::NeighbourState::failed) {
      error = fmt::format("{}: check the address{} and the link, or give --peer-mac", r.error,
                          gateway.empty() ? " (a peer on another subnet needs --gateway)" : "");
      return false;
    }
    if (interrupted.load()) {
      error = fmt::format("interrupted while resolving {}", wire::to_string(out.via));
      return false;
    }
    e.idle(e.turn());
  }
}

void set_peer(transport::Endpoints& endpoints, const NextHop& hop) noexcept {
  endpoints.ip_version = hop.peer.version;
  endpoints.peer_ipv4 = hop.peer.ipv4;
  endpoints.peer_ipv6 = hop.peer.ipv6;
  endpoints.peer_mac = hop.mac;
}

bool wait_for_events(Endpoint& e, const std::vector<std::uint64_t>& ids, cm::EventKind kind,
                     std::vector<cm::Event>& out, const std::atomic<bool>& interrupted) {
  out.assign(ids.size(), cm::Event{});
  std::vector<bool> answered(ids.size(), false);
  std::unordered_map<std::uint64_t, std::size_t> where;  // id -> i: thousands of ids at once
  where.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) where.emplace(ids[i], i);
  std::size_t waiting = ids.size();
  bool all_ok = true;
  while (waiting != 0) {
    const std::size_t work = e.turn();
    for (auto& ev : e.events) {
      if (ev.kind != kind && ev.kind != cm::EventKind::failed) continue;
      const auto at = where.find(ev.id);
      if (at == where.end()) continue;
      const std::size_t i = at->second;
      if (answered[i]) continue;
      answered[i] = true;
      --waiting;
      all_ok &= ev.kind == kind;
      out[i] = std::move(ev);
    }
    e.events.clear();
    if (waiting != 0 && interrupted.load()) {
      for (std::size_t i = 0; i < ids.size(); ++i)
        if (!answered[i]) out[i].error = "interrupted";
      return false;
    }
    e.idle(work);
  }
  return all_ok;
}

void tolerate_stalls(transport::ConnectionConfig& c) noexcept {
  c.initial_rto = 5'000'000;
  c.min_rto = 2'000'000;
  c.retry_limit = 50;
  c.rnr_retry_limit = 50;
}

std::unique_ptr<transport::CongestionControl> make_congestion_control(const std::string& name,
                                                                     const transport::ConnectionConfig& connection,
                                                                     std::string& error) {
  if (name.empty() || name == "none") return nullptr;
  cc::CcConfig config;
  config.metaroce.paths = connection.paths;  // one window per path of this connection
  return cc::make(name, config, error);
}

void add_counters(transport::ConnectionCounters& a, const transport::ConnectionCounters& b) {
#define METAROCE_APPS_ADD(name, what) a.name += b.name;
  METAROCE_CONNECTION_COUNTERS(METAROCE_APPS_ADD)
#undef METAROCE_APPS_ADD
}

std::uint64_t path_retransmissions(const transport::Connection& c) {
  std::uint64_t n = 0;
  for (std::uint16_t p = 0; p < c.config().paths; ++p) n += c.path_info(p).retransmitted;
  return n;
}

}  // namespace metaroce::stack
