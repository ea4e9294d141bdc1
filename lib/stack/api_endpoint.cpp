// The public Endpoint (include/metaroce/endpoint.hpp) on lib/stack's
// endpoint: a port, its engine host, the connection manager and telemetry.

#include <sys/random.h>

#include <atomic>
#include <unordered_map>

#include <algorithm>

#include <fmt/format.h>

#include "cm/message.hpp"
#include "engine/eal.hpp"
#include "engine/node.hpp"
#include "engine/steering.hpp"
#include "stack/api_internal.hpp"
#include "stack/endpoint.hpp"

namespace metaroce {

namespace {

std::string peer_address(const transport::Endpoints& e) {
  return wire::to_string(e.ip_version == 6 ? wire::IpAddress::v6(e.peer_ipv6) : wire::IpAddress::v4(e.peer_ipv4));
}

}  // namespace

struct Endpoint::Impl final : ConnectionOwner {
  stack::Endpoint endpoint;
  double connect_timeout_s = 3.0;
  std::uint16_t pkey = 0xffff;  // EndpointConfig::pkey
  std::unordered_map<std::uint32_t, std::unique_ptr<Connection>> connections;  // by local QPN
  std::deque<Connection*> accepted;                                            // not yet taken by accept()
  AcceptFunction accept_function;
  ListenOptions listen_options;
  std::unordered_map<std::uint64_t, cm::Event> client_events;  // by connect() handle
  std::vector<transport::Completion> scratch;
  std::atomic<bool> stop{false};
  std::function<void(Connection&, bool)> peer_close_handler;
  std::vector<cm::Event> events;  // this turn's, handled after its completions

  Connection* adopt(transport::Connection& c, std::uint64_t cm_id, bool server, std::vector<std::uint8_t> peer) {
    auto owned = Connection::Impl::wrap(*this, c, std::move(peer));
    owned->impl().cm_id = cm_id;
    owned->impl().server = server;
    Connection* raw = owned.get();
    connections[c.config().local_qpn] = std::move(owned);
    return raw;
  }

  Connection* find(std::uint64_t local_qpn) {
    const auto at = connections.find(static_cast<std::uint32_t>(local_qpn));
    return at == connections.end() ? nullptr : at->second.get();
  }

  std::size_t turn() {
    std::size_t work = endpoint.turn();
    // Completions first: a close handler sees every message that came before the close.
    work += deliver_completions(endpoint.host->host(), scratch);
    events.swap(endpoint.events);  // handlers may turn (close_all): they fill endpoint.events anew
    for (cm::Event& ev : events) {
      switch (ev.kind) {
        case cm::EventKind::established:
        case cm::EventKind::failed: client_events[ev.id] = std::move(ev); break;
        case cm::EventKind::disconnected: {
          Connection* c = find(ev.id);
          if (c != nullptr && c->impl().server) {  // the client's DREQ: the DREP goes at the next turn
            Connection::Impl& i = c->impl();
            i.closed_by_peer = true;
            i.peer_close_data = std::move(ev.peer_private_data);
            if (!i.close_reply.empty()) endpoint.cm->set_disconnect_reply(c->qpn(), i.close_reply);
            if (peer_close_handler) peer_close_handler(*c, false);
          } else {
            client_events[ev.id] = std::move(ev);  // the server's DREP (or its absence)
          }
          break;
        }
        case cm::EventKind::superseded:
          if (Connection* c = find(ev.id)) {
            c->impl().closed_by_peer = true;
            if (peer_close_handler) peer_close_handler(*c, true);
          }
          break;
        case cm::EventKind::ready: break;
      }
    }
    events.clear();
    return work;
  }

  bool turn_until(const std::function<bool()>& done, double seconds) override {
    const auto deadline = deadline_after(seconds);
    while (!done()) {
      if (Clock::now() >= deadline || stop.load(std::memory_order_relaxed)) return false;
      endpoint.idle(turn());
    }
    return true;
  }

  // A request for `options`; false and `error` for a bad address or MAC.
  bool request_for(const std::string& peer_ip, const ConnectOptions& o, cm::ConnectRequest& request,
                   std::string& error) {
    if (!mode_of(o.mode, request.connection.mode, error)) return false;
    if (request.connection.mode == transport::Mode::rocev2 && !transport::is_ib_mtu(o.mtu)) {
      error = fmt::format("mtu {} is not an IB MTU: rocev2 takes {}", o.mtu, transport::ib_mtu_names);
      return false;
    }
    request.connection.mtu = o.mtu;
    request.connection.paths = o.paths;
    request.connection.streams = o.streams;
    // Every plane this endpoint has, as far as the paths go round.
    request.connection.planes =
        static_cast<std::uint16_t>(std::min<std::size_t>(1 + endpoint.more_ports.size(), std::max<std::uint16_t>(o.paths, 1)));
    if (o.path_window != 0) request.connection.path_window = o.path_window;
    if (o.psn_window != 0) request.connection.psn_window = o.psn_window;
    if (o.first_src_port != 0) request.connection.base_src_port = o.first_src_port;
    stack::tolerate_stalls(request.connection);
    if (request.connection.mode == transport::Mode::rocev2 && o.local_ack_timeout != 0) {
      const transport::IbtaTimers timers{o.local_ack_timeout, o.retry_count, o.rnr_retry};
      if (error = transport::validate(timers); !error.empty()) return false;
      transport::apply(timers, request.connection);
    }
    // The next hop's MAC: given, or asked for (once: cached).
    stack::NextHop hop;
    if (!stack::resolve_next_hop(endpoint, peer_ip, o.gateway, o.peer_mac, hop, error, stop)) return false;
    stack::set_peer(request.connection.endpoints, hop);
    request.cc = o.congestion == "none" ? "" : o.congestion;
    request.private_data = o.private_data;
    request.queue = endpoint.queue;  // a lane's connections live on its queue
    return true;
  }

  // The client's connection for an established event; nullptr and `error`.
  Connection* establish(cm::Event& ev, std::string& error) {
    auto congestion = stack::make_congestion_control(ev.cc, ev.config, error);
    if (!error.empty()) return nullptr;
    transport::Connection* c = endpoint.add_connection(ev.config, std::move(congestion), error);
    if (c == nullptr) return nullptr;
    Connection* out = adopt(*c, ev.id, false, std::move(ev.peer_private_data));
    c->connect();
    return out;
  }

  void destroy(Connection* c) {
    const std::uint32_t qpn = c->qpn();
    const bool server = c->impl().server;
    std::erase(accepted, c);
    connections.erase(qpn);  // untags the transport connection first
    endpoint.remove_connection(qpn);
    if (server) endpoint.cm->forget(qpn);
  }
};

Endpoint::Endpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Endpoint::~Endpoint() {
  if (!impl_) return;
  // No handler runs from here on: what they refer to may be gone already.
  impl_->peer_close_handler = {};
  for (auto& [qpn, c] : impl_->connections) c->impl().handler = {};
  impl_->endpoint.turn();         // answers due leave (a DREP for a connection closed just now)
  impl_->connections.clear();     // the public connections go before the host's
}

namespace {
// The library's endpoint settings for the public ones; false and `error`
// for a setting that cannot be.
bool stack_config(const EndpointConfig& config, stack::EndpointConfig& c, std::string& error) {
  c.program = config.program;
  c.host_name = config.name;
  c.zero_copy_threshold = config.zero_copy_threshold;
  c.preset_path = config.preset;
  c.iface = config.iface;
  c.port_name = config.port;
  c.eal_args = config.eal_args;
  c.local_ip = config.local_ip;
  for (const EndpointConfig::PlanePort& plane : config.more_planes) {
    if (plane.preset.empty() != config.preset.empty() || plane.port.empty() != config.port.empty()) {
      error = "give every further plane's port as the first one's: EndpointConfig::PlanePort::preset with a preset, "
              "PlanePort::port with a port";
      return false;
    }
    c.more_planes.push_back({plane.preset, plane.iface, plane.port, plane.local_ip});
  }
  c.mtu = config.mtu;
  c.mbufs = config.mbufs;
  c.max_connections = config.max_connections;
  c.idle_sleep_us = config.idle_sleep_us;
  c.cm_timeout_s = config.connect_timeout_s;
  c.receive_capacity_bps = config.receive_capacity_bps;
  c.key_file = config.key_file;
  c.auth_only = config.auth_only;
  c.pkey = config.pkey;
  c.ibta_cm = config.ibta_cm;
  if (c.ibta_cm && !c.key_file.empty()) {
    error = "the IBTA CM carries no security extension: EndpointConfig::ibta_cm and a key file do not go together";
    return false;
  }
  if ((c.pkey & 0x7fff) == 0) {
    error = fmt::format("P_Key {:#06x} is invalid (its low 15 bits must not be 0): give 0xffff, the default "
                        "partition, or the peer's", c.pkey);
    return false;
  }
  if (c.preset_path.empty() == c.port_name.empty()) {
    error = "give a port: EndpointConfig::preset (a drivers-config file) or EndpointConfig::port with the EAL "
            "arguments that create it";
    return false;
  }
  wire::IpAddress ip;
  if (!wire::parse_ip(c.local_ip, ip)) {
    error = fmt::format("local address '{}' is not an IP address: give A.B.C.D, or an IPv6 address such as "
                        "fd00::1", c.local_ip);
    return false;
  }
  return true;
}
}  // namespace

std::unique_ptr<Endpoint> Endpoint::open(const EndpointConfig& config, std::string& error) {
  stack::EndpointConfig c;
  if (!stack_config(config, c, error)) return nullptr;
  if (!engine::eal_started() && !stack::start_eal(c, error)) return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->connect_timeout_s = config.connect_timeout_s;
  impl->pkey = config.pkey;
  if (!stack::open_endpoint(c, impl->endpoint, error)) return nullptr;
  return std::unique_ptr<Endpoint>(new Endpoint(std::move(impl)));  // requests are refused until listen()
}

std::vector<std::unique_ptr<Endpoint>> Endpoint::open_lanes(const EndpointConfig& config, std::uint16_t lanes,
                                                            std::string& error) {
  std::vector<std::unique_ptr<Endpoint>> out;
  stack::EndpointConfig c;
  if (!stack_config(config, c, error)) return out;
  if (lanes < 1 || lanes > engine::max_node_lcores) {
    error = fmt::format("{} lcores: give 1..{}", lanes, engine::max_node_lcores);
    return out;
  }
  if (lanes > 1 && !c.more_planes.empty()) {
    error = fmt::format("{} lcores with {} planes: the lcores share one port; give one port (one --port or "
                        "--preset) or one lcore",
                        lanes, 1 + c.more_planes.size());
    return out;
  }
  if (!engine::eal_started() && !stack::start_eal(c, error)) return out;
  c.queues = lanes;
  for (std::uint16_t k = 0; k < lanes; ++k) {
    c.queue = k;
    c.shared_port = k == 0 ? nullptr : out[0]->impl_->endpoint.port;
    if (lanes > 1) c.host_name = fmt::format("{}.{}", config.name, k);
    auto impl = std::make_unique<Impl>();
    impl->connect_timeout_s = config.connect_timeout_s;
    if (!stack::open_endpoint(c, impl->endpoint, error)) {
      out.clear();
      return out;
    }
    out.push_back(std::unique_ptr<Endpoint>(new Endpoint(std::move(impl))));
  }
  // A driver whose transmit queue k is the peer's receive queue k (net_memif,
  // net_ring) brings each lane its own frames. Any other spreads them over
  // the queues its own way (the kernel's fanout, a NIC's RSS): the lanes
  // hand them on to their owners, QP 1's by the QPN the CM message
  // concerns, and share the rest (ARP, ND: lane 0 answers requests).
  const stack::Endpoint& first = out[0]->impl_->endpoint;
  const std::string& driver = first.port->driver();
  // One receive share for the port: the lanes' shares are fronts of a
  // board that divides the port's capacity among them.
  if (lanes > 1) {
    const auto board = std::make_shared<cc::PortShareBoard>(first.receive_share->capacity_bps(), lanes);
    for (auto& lane : out) lane->impl_->endpoint.share_board = board;
  }
  if (lanes > 1 && (driver == "net_memif" || driver == "net_ring"))
    for (auto& lane : out) lane->impl_->endpoint.steering = "queue pairs: lane k's frames arrive on queue k";
  if (lanes > 1 && driver != "net_memif" && driver != "net_ring") {
    if (c.ibta_cm) {
      error = fmt::format("{} lcores on {} ({}) with the IBTA CM: its messages do not say which lane they are for "
                          "on a driver that does not pair queues (only net_memif, net_ring); give one lcore",
                          lanes, first.port->name(), driver);
      out.clear();
      return out;
    }
    std::shared_ptr<stack::LaneRings> rings = stack::make_lane_rings(first.port->name(), lanes, error);
    if (!rings) {
      out.clear();
      return out;
    }
    // A NIC that takes a flow rule per queue on the BTH destination QP puts
    // each connection's frames on its lane's queue; the rest is handed on.
    std::string refused;
    rings->port_id = first.port->id();
    const bool ruled =
        engine::install_bth_queue_rules(first.port->id(), lanes, first.local_address.version == 6, rings->rules, refused);
    const std::string steering =
        ruled ? std::string("flow rules on the BTH destination QP, one per queue; QP 1, ARP and ND handed on")
              : fmt::format("software hand-off ({} took no flow rule: {})", driver, refused);
    for (std::uint16_t k = 0; k < lanes; ++k) {
      stack::Endpoint& e = out[k]->impl_->endpoint;
      e.lane_rings = rings;
      e.steering = steering;
      engine::RxHandoff h;
      h.rings = rings->rings;
      h.self = k;
      h.management_lcore = 0;
      h.management_owner = &cm::peek_owner_qpn;
      h.share_other_frames = true;
      e.host->set_rx_handoff(std::move(h));
      host::Neighbours* n = e.host->host().neighbours();
      if (k != 0 && n != nullptr) {
        host::NeighbourConfig quiet = n->config();
        quiet.answer_requests = false;
        e.host->host().enable_neighbours(quiet);
      }
    }
  }
  return out;
}

MemoryRegion Endpoint::register_memory(void* addr, std::size_t length, std::uint32_t access, std::string& error) {
  return register_region(impl_->endpoint.host->memory(), addr, length, access, error);
}

bool Endpoint::deregister_memory(const MemoryRegion& region) {
  return impl_->endpoint.host->memory().deregister(region.key);
}

bool Endpoint::next_hop(const std::string& peer_ip, const ConnectOptions& o, NextHop& out, std::string& error) {
  stack::NextHop hop;
  if (!stack::resolve_next_hop(impl_->endpoint, peer_ip, o.gateway, o.peer_mac, hop, error, impl_->stop)) return false;
  out.address = wire::to_string(hop.via);
  out.mac = stack::mac_string(hop.mac);
  out.learned = hop.given ? "given" : hop.via.version == 4 ? "ARP" : "neighbour discovery";
  return true;
}

std::string Endpoint::next_hop_mac(const std::string& peer_ip, const ConnectOptions& o, std::string& error) {
  stack::NextHop hop;
  if (!stack::resolve_next_hop(impl_->endpoint, peer_ip, o.gateway, o.peer_mac, hop, error, impl_->stop)) return {};
  return stack::mac_string(hop.mac);
}

Connection* Endpoint::connect(const std::string& peer_ip, const ConnectOptions& o, std::string& error) {
  const std::vector<Connection*> made = connect_all(peer_ip, {o}, error);
  return made.empty() ? nullptr : made.front();
}

std::vector<Connection*> Endpoint::connect_all(const std::string& peer_ip, const std::vector<ConnectOptions>& options,
                                               std::string& error) {
  const std::vector<ConnectResult> results = connect_each(peer_ip, options);
  std::vector<Connection*> made, opened;
  for (std::size_t k = 0; k < results.size(); ++k) {
    if (results[k].connection != nullptr) opened.push_back(results[k].connection);
    if (results[k].connection == nullptr && error.empty())
      error = (options.size() > 1 ? fmt::format("connection {} of {}: ", k + 1, options.size()) : std::string()) +
              results[k].error;
    made.push_back(results[k].connection);
  }
  if (opened.size() == results.size()) return made;
  close_all(opened);
  return {};
}

std::vector<ConnectResult> Endpoint::connect_each(const std::string& peer_ip,
                                                  const std::vector<ConnectOptions>& options) {
  stack::Endpoint& e = impl_->endpoint;
  std::vector<ConnectResult> results(options.size());
  std::vector<std::uint64_t> ids(options.size(), 0);  // 0: the request itself was refused
  for (std::size_t k = 0; k < options.size(); ++k) {
    cm::ConnectRequest request;
    if (impl_->request_for(peer_ip, options[k], request, results[k].error))
      ids[k] = e.cm->connect(e.host->now_ns(), request, results[k].error);
  }
  const double wait_s = impl_->connect_timeout_s + 1.0;  // the manager gives up first, with its reason
  std::size_t answered = 0;
  impl_->turn_until([&] {
    while (answered < ids.size() && (ids[answered] == 0 || impl_->client_events.contains(ids[answered]))) ++answered;
    return answered == ids.size();
  }, wait_s);
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] == 0) continue;
    const auto at = impl_->client_events.find(ids[k]);
    if (at == impl_->client_events.end()) {
      results[k].error = impl_->stop ? std::string("interrupted")
                                     : fmt::format("no answer from {} in {} s: is a server listening there?",
                                                   peer_ip, wait_s);
      continue;
    }
    cm::Event ev = std::move(at->second);
    impl_->client_events.erase(at);
    if (ev.kind != cm::EventKind::established) {
      results[k].error = std::move(ev.error);
      continue;
    }
    results[k].connection = impl_->establish(ev, results[k].error);
  }
  return results;
}

Connection* Endpoint::connect_static(const std::string& peer_ip, const StaticConnectOptions& o, std::string& error) {
  stack::Endpoint& e = impl_->endpoint;
  cm::ConnectRequest request;
  if (!impl_->request_for(peer_ip, o.connection, request, error)) return nullptr;
  transport::ConnectionConfig c = request.connection;
  c.endpoints.local_mac = e.port->mac();
  c.endpoints.local_ipv4 = e.local_address.ipv4;
  c.endpoints.local_ipv6 = e.local_address.ipv6;
  if (c.mode == transport::Mode::rocev2) c.pkey = impl_->pkey;
  const auto random24 = [] {
    std::uint32_t v = 0;
    while (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
    }
    return v & wire::qpn_mask;
  };
  c.local_qpn = o.local_qpn;
  while (c.local_qpn <= 1) c.local_qpn = random24();
  c.initial_psn = o.local_psn_given ? o.local_psn : random24();
  c.peer_qpn = o.peer_qpn;
  c.peer_initial_psn = o.peer_psn;
  if (c.peer_qpn <= 1 || c.peer_qpn > wire::qpn_mask || c.local_qpn > wire::qpn_mask) {
    error = fmt::format("QPNs {:#x} (here) and {:#x} (the peer) must be 0x2..0xffffff", c.local_qpn, c.peer_qpn);
    return nullptr;
  }
  if (e.host->host().connection(c.local_qpn) != nullptr) {
    error = fmt::format("QPN {:#x} is in use here: give another, or none (one is drawn)", c.local_qpn);
    return nullptr;
  }
  auto congestion = stack::make_congestion_control(request.cc, c, error);
  if (!error.empty()) return nullptr;
  transport::Connection* t = e.add_connection(c, std::move(congestion), error);
  if (t == nullptr) return nullptr;
  Connection* out = impl_->adopt(*t, 0, false, {});
  out->impl().by_hand = true;
  t->connect();
  return out;
}

void Endpoint::listen(AcceptFunction accept, const ListenOptions& options) {
  impl_->accept_function = std::move(accept);
  impl_->listen_options = options;
  Impl* impl = impl_.get();
  impl->endpoint.cm->listen([impl](const transport::ConnectionConfig& config, const cm::Message& request,
                                   std::vector<std::uint8_t>& reply) {
    IncomingRequest in;
    in.peer_ip = peer_address(config.endpoints);
    in.peer_qpn = config.peer_qpn;
    in.mode = std::string(transport::to_string(config.mode));
    in.congestion = request.cc;
    in.paths = config.paths;
    in.streams = config.streams;
    in.mtu = config.mtu;
    in.private_data = request.private_data;
    std::string error;
    auto congestion = stack::make_congestion_control(request.cc, config, error);
    if (!error.empty()) return cm::RejectReason::bad_parameters;
    transport::ConnectionConfig c = config;
    stack::tolerate_stalls(c);
    const ListenOptions& lo = impl->listen_options;
    if (c.mode == transport::Mode::rocev2 && lo.local_ack_timeout != 0) {
      const transport::IbtaTimers timers{lo.local_ack_timeout, lo.retry_count, lo.rnr_retry};
      if (!transport::validate(timers).empty()) return cm::RejectReason::bad_parameters;
      transport::apply(timers, c);
    }
    if (impl->listen_options.path_window != 0) c.path_window = impl->listen_options.path_window;
    if (impl->listen_options.psn_window != 0) c.psn_window = impl->listen_options.psn_window;
    transport::Connection* t = impl->endpoint.add_connection(c, std::move(congestion), error);
    if (t == nullptr) return cm::RejectReason::no_resources;
    Connection* out = impl->adopt(*t, 0, true, in.private_data);
    const std::uint32_t qpn = c.local_qpn;
    out->impl().on_close_reply = [impl, qpn](const std::vector<std::uint8_t>& data) {
      impl->endpoint.cm->set_disconnect_reply(qpn, data);
    };
    t->connect();
    const Verdict verdict = impl->accept_function ? impl->accept_function(in, *out, reply) : Verdict::accept;
    if (verdict != Verdict::accept) {
      impl->connections.erase(qpn);
      impl->endpoint.remove_connection(qpn);
      switch (verdict) {
        case Verdict::refuse_bad_request: return cm::RejectReason::bad_parameters;
        case Verdict::refuse_no_room: return cm::RejectReason::no_resources;
        case Verdict::refuse_too_much_memory: return cm::RejectReason::memory_limit;
        default: return cm::RejectReason::refused;
      }
    }
    if (impl->listen_options.queue_for_accept) impl->accepted.push_back(out);
    return cm::RejectReason::none;
  });
}

Connection* Endpoint::accept(double timeout_s, std::string& error) {
  if (!impl_->turn_until([&] { return !impl_->accepted.empty(); }, timeout_s)) {
    error = fmt::format("no connection request in {} s", timeout_s);
    return nullptr;
  }
  Connection* c = impl_->accepted.front();
  impl_->accepted.pop_front();
  return c;
}

bool Endpoint::close(Connection* c, std::string& error) {
  const std::vector<CloseResult> r = close_all({c});
  error = r.front().error;
  return r.front().answered && error.empty();
}

std::vector<CloseResult> Endpoint::close_all(const std::vector<Connection*>& connections,
                                             const std::vector<std::vector<std::uint8_t>>& request_data) {
  stack::Endpoint& e = impl_->endpoint;
  std::vector<CloseResult> results(connections.size());
  std::vector<std::uint64_t> waiting(connections.size(), 0);  // client: the handle whose answer we wait for
  for (std::size_t k = 0; k < connections.size(); ++k) {
    Connection* c = connections[k];
    if (c == nullptr || impl_->find(c->qpn()) != c) {
      results[k].error = "close: not a connection of this endpoint";
      continue;
    }
    if (c->impl().server || c->impl().by_hand) {
      results[k].answered = true;  // nothing to ask; a DREP due leaves at the next turn
      continue;
    }
    std::vector<std::uint8_t> data = k < request_data.size() ? request_data[k] : std::vector<std::uint8_t>{};
    if (e.cm->disconnect(e.host->now_ns(), c->impl().cm_id, std::move(data), results[k].error))
      waiting[k] = c->impl().cm_id;
  }
  const double wait_s = impl_->connect_timeout_s + 1.0;
  std::size_t scanned = 0;
  impl_->turn_until([&] {
    while (scanned < waiting.size() && (waiting[scanned] == 0 || impl_->client_events.contains(waiting[scanned])))
      ++scanned;
    return scanned == waiting.size();
  }, wait_s);
  for (std::size_t k = 0; k < connections.size(); ++k) {
    if (waiting[k] != 0) {
      const auto at = impl_->client_events.find(waiting[k]);
      if (at == impl_->client_events.end()) {
        results[k].error = impl_->stop ? std::string("interrupted")
                                       : fmt::format("the server did not answer the disconnect request in {} s", wait_s);
      } else {
        results[k].error = std::move(at->second.error);
        results[k].reply_data = std::move(at->second.peer_private_data);
        results[k].answered = results[k].error.empty();
        impl_->client_events.erase(at);
      }
    }
    Connection* c = connections[k];
    if (c == nullptr || impl_->find(c->qpn()) != c) continue;
    c->impl().connection->close();
  }
  deliver_completions(e.host->host(), impl_->scratch);  // the flushed ones, to handlers and queues
  for (std::size_t k = 0; k < connections.size(); ++k) {
    Connection* c = connections[k];
    if (c == nullptr || impl_->find(c->qpn()) != c) continue;
    results[k].counters = c->counters();
    impl_->destroy(c);
  }
  return results;
}

void Endpoint::set_peer_close_handler(std::function<void(Connection&, bool)> handler) {
  impl_->peer_close_handler = std::move(handler);
}

void Endpoint::request_stop() noexcept { impl_->stop.store(true, std::memory_order_relaxed); }
bool Endpoint::stop_requested() const noexcept { return impl_->stop.load(std::memory_order_relaxed); }

std::size_t Endpoint::poll() { return impl_->turn(); }
void Endpoint::idle(std::size_t work) const { impl_->endpoint.idle(work); }

bool Endpoint::run_until(const std::function<bool()>& done, double timeout_s) {
  return impl_->turn_until(done, timeout_s);
}

std::vector<CounterGroup> Endpoint::counters() const {
  std::vector<CounterGroup> out(4);
  impl_->endpoint.host->refresh_port_counters();
  out[0] = host_group(impl_->endpoint.host->counters());
  out[1].name = "cm";
  const cm::Counters& cm = impl_->endpoint.cm->counters();
#define METAROCE_PUBLIC_CM(name, what) out[1].counters.push_back({#name, cm.name});
  METAROCE_CM_COUNTERS(METAROCE_PUBLIC_CM)
#undef METAROCE_PUBLIC_CM
  transport::ConnectionCounters sum;
  for (const auto& [qpn, c] : impl_->connections) stack::add_counters(sum, c->impl().connection->counters());
  out[2] = {"connection", counter_list(sum)};
  const cc::FairShare& share = *impl_->endpoint.receive_share;
  out[3].name = "receive_share";
  out[3].counters.push_back({"capacity_mbps", share.capacity_bps() / 1'000'000});
  // This endpoint's part of the port's capacity: a lane's as its port's
  // board last set it (the lanes' parts add up to the port's capacity),
  // else the whole.
  const auto& board = impl_->endpoint.share_board;
  out[3].counters.push_back(
      {"port_part_bps", board ? board->part_bps(impl_->endpoint.queue) : share.capacity_bps()});
  out[3].counters.push_back({"connections", share.listeners()});
  share.counters().visit([&](const std::string& name, std::uint64_t v) { out[3].counters.push_back({name, v}); });
  return out;
}

void release_eal() {
  if (engine::eal_started()) engine::stop_eal();
}

std::string Endpoint::mac() const { return stack::mac_string(impl_->endpoint.port->mac()); }
std::string Endpoint::port_name() const { return impl_->endpoint.port->name(); }
std::string Endpoint::driver() const { return impl_->endpoint.port->driver(); }
std::string Endpoint::steering() const { return impl_->endpoint.steering; }
std::size_t Endpoint::connections() const noexcept { return impl_->connections.size(); }

}  // namespace metaroce
