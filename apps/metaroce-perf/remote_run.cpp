#include "metaroce-perf/remote_run.hpp"

#include <rte_cycles.h>

#include <algorithm>
#include <chrono>
#include <atomic>
#include <csignal>
#include <cmath>
#include <unordered_map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cm/manager.hpp"
#include "common/run_control.hpp"
#include "stack/endpoint.hpp"
#include "engine/engine_host.hpp"
#include "metaroce-perf/message_pattern.hpp"
#include "wire/byte_order.hpp"

namespace metaroce::perf {

namespace {

constexpr std::uint64_t slot_budget_bytes = 64ull << 20;  // as the loopback
constexpr std::uint64_t drain_limit_ns = 5'000'000'000;
constexpr std::uint64_t peak_window_ns = 100'000'000;
constexpr std::uint64_t no_message = ~std::uint64_t{0};
// What a server's host and connection manager allow; --max-connections,
// at most this, is enforced by the server itself.
constexpr std::uint32_t max_server_connections = 16384;
// The server answers repeated DREQs this long after the client's last one.
constexpr std::uint64_t server_linger_ns = 200'000'000;

std::atomic<bool> interrupted{false};
extern "C" void on_signal(int) { interrupted.store(true); }

// --- private data of the CM messages (big-endian) -------------------------

// REQ: what the client will send on this connection, and which of the
// client's -q connections of this size it is (for the server's log; each
// connection numbers its own messages 0, 1, ...).
struct Offer {
  PerfOp op = PerfOp::write;
  bool verify = false;
  std::uint32_t slots = 0;
  std::uint64_t size = 0;
  std::uint32_t receives_per_stream = 0;
  std::uint16_t connection = 0;   // 0..connections-1
  std::uint16_t connections = 1;  // the client's -q
};
std::vector<std::uint8_t> encode(const Offer& o) {
  std::vector<std::uint8_t> b(24, 0);
  b[0] = static_cast<std::uint8_t>(o.op);
  b[1] = o.verify ? 1 : 0;
  wire::store_be32(b.data() + 4, o.slots);
  wire::store_be64(b.data() + 8, o.size);
  wire::store_be32(b.data() + 16, o.receives_per_stream);
  wire::store_be16(b.data() + 20, o.connection);
  wire::store_be16(b.data() + 22, o.connections);
  return b;
}
bool decode(const std::vector<std::uint8_t>& b, Offer& o) {
  if (b.size() < 20 || b[0] > static_cast<std::uint8_t>(PerfOp::send)) return false;
  o.op = static_cast<PerfOp>(b[0]);
  o.verify = b[1] != 0;
  o.slots = wire::load_be32(b.data() + 4);
  o.size = wire::load_be64(b.data() + 8);
  o.receives_per_stream = wire::load_be32(b.data() + 16);
  if (b.size() >= 24) {  // a client from before -q sends 20 bytes: its only connection
    o.connection = wire::load_be16(b.data() + 20);
    o.connections = wire::load_be16(b.data() + 22);
  }
  return o.size >= 1 && o.size <= (std::uint64_t{1} << 30) && o.slots >= 1 &&
         o.slots * o.size <= 2 * slot_budget_bytes + o.size && o.receives_per_stream <= 65536 &&
         o.connections >= 1 && o.connection < o.connections;
}
// " (connection 2 of 4)" for a client's -q connection, "" for its only one.
std::string which_of(const Offer& o) {
  return o.connections > 1 ? fmt::format(" (connection {} of {})", o.connection + 1, o.connections) : std::string();
}

// REP: where to write.
struct Target {
  std::uint64_t addr = 0;
  std::uint32_t rkey = 0;
};
std::vector<std::uint8_t> encode(const Target& t) {
  std::vector<std::uint8_t> b(12, 0);
  wire::store_be64(b.data(), t.addr);
  wire::store_be32(b.data() + 8, t.rkey);
  return b;
}

// DREQ: what the client did; DREP: what the server found.
struct ClientSummary {
  std::uint64_t completed = 0;  // messages of this connection completed successfully at the client, 0..completed-1
  bool last = false;            // no more connections follow: the client's last DREQ, sent once every other
                                // connection of its has its DREP
};
struct ServerSummary {
  std::uint64_t received = 0;  // messages completed (write-imm, send) or checked (write) at the server
  std::uint64_t wrong = 0;
  std::uint64_t first_wrong = no_message;
};
std::vector<std::uint8_t> encode(const ClientSummary& s) {
  std::vector<std::uint8_t> b(9, 0);
  wire::store_be64(b.data(), s.completed);
  b[8] = s.last ? 1 : 0;
  return b;
}
std::vector<std::uint8_t> encode(const ServerSummary& s) {
  std::vector<std::uint8_t> b(24, 0);
  wire::store_be64(b.data(), s.received);
  wire::store_be64(b.data() + 8, s.wrong);
  wire::store_be64(b.data() + 16, s.first_wrong);
  return b;
}
template <class T>
bool decode_summary(const std::vector<std::uint8_t>& b, T& s);
template <>
bool decode_summary(const std::vector<std::uint8_t>& b, ClientSummary& s) {
  if (b.size() < 9) return false;
  s.completed = wire::load_be64(b.data());
  s.last = b[8] != 0;
  return true;
}
template <>
bool decode_summary(const std::vector<std::uint8_t>& b, ServerSummary& s) {
  if (b.size() < 24) return false;
  s.received = wire::load_be64(b.data());
  s.wrong = wire::load_be64(b.data() + 8);
  s.first_wrong = wire::load_be64(b.data() + 16);
  return true;
}

std::vector<std::pair<std::string, std::uint64_t>> cm_counters(const cm::Counters& c) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
#define METAROCE_PERF_CM(name, what) out.emplace_back(#name, c.name);
  METAROCE_CM_COUNTERS(METAROCE_PERF_CM)
#undef METAROCE_PERF_CM
  return out;
}

using stack::Endpoint;
using stack::mac_string;
using stack::parse_ipv4;
using stack::parse_mac;

stack::EndpointConfig remote_port_options(const PerfOptions& o) {
  stack::EndpointConfig r;
  r.program = "metaroce-perf";
  r.preset_path = o.preset_path;
  r.iface = o.iface;
  r.port_name = o.port_name;
  r.eal_args = o.eal_args;
  r.local_ip = o.local_ip;
  r.host_name = o.role == PerfRole::server ? "server" : "client";
  r.mtu = o.mtu;
  r.idle_sleep_us = o.idle_sleep_us;
  r.cm_timeout_s = o.cm_timeout_s;
  // The server's own check refuses beyond --max-connections, saying so: its
  // host and connection manager must not refuse first.
  r.max_connections = o.role == PerfRole::server ? max_server_connections : o.qps;
  return r;
}

// ---------------------------------------------------------------- server ---

struct Session {
  transport::Connection* connection = nullptr;
  Offer offer;
  std::vector<std::uint8_t> write_region;
  std::vector<std::uint8_t> receive_region;
  std::uint32_t write_key = 0, receive_key = 0;
  std::vector<std::uint64_t> expected_next;  // per stream
  std::vector<transport::Completion> completions;
  ServerSummary summary;
  std::uint16_t streams = 1;
  std::uint64_t started_ns = 0;
  std::string problem;

  void wrong(std::uint64_t m) {
    ++summary.wrong;
    if (summary.first_wrong == no_message) summary.first_wrong = m;
  }
  bool post_receive(std::uint64_t index, std::uint16_t stream) {
    transport::ReceiveRequest r;
    r.wr_id = index;
    r.stream = stream;
    r.addr = receive_region.data() + index * (offer.op == PerfOp::send ? offer.size : 0);
    r.length = offer.op == PerfOp::send ? offer.size : 0;
    r.lkey = receive_key;
    return connection->post_receive(r) == transport::PostResult::ok;
  }
  // Completions of write-imm and send, checked as they come.
  // Polls this connection's completions and checks them.
  std::size_t poll() {
    if (offer.op == PerfOp::write) return 0;
    completions.clear();
    connection->poll_completions(completions);
    return check(completions);
  }
  // Checks receive completions (polled here or by the host).
  std::size_t check(const std::vector<transport::Completion>& got) {
    for (const auto& c : got) {
      if (c.status != transport::CompletionStatus::success) {
        if (problem.empty()) problem = fmt::format("receive completion {}", transport::to_string(c.status));
        continue;
      }
      const std::uint64_t m = expected_next[c.stream];
      expected_next[c.stream] += streams;
      bool ok = true;
      if (offer.op == PerfOp::write_imm) {
        ok = c.has_imm && c.imm == static_cast<std::uint32_t>(m);
        if (ok && offer.verify) ok = check_pattern(write_region.data() + (m % offer.slots) * offer.size, offer.size, m);
      } else {
        ok = c.byte_len == offer.size;
        if (ok && offer.verify) ok = check_pattern(receive_region.data() + c.wr_id * offer.size, offer.size, m);
      }
      if (!ok) wrong(m);
      ++summary.received;
      if (!post_receive(c.wr_id, c.stream) && problem.empty()) problem = "re-posting a receive was refused";
    }
    return got.size();
  }
  // Plain WRITEs complete nothing here: at the end, each slot must hold the
  // last message the client wrote into it.
  void check_final_writes(std::uint64_t completed) {
    if (offer.op != PerfOp::write) return;
    const std::uint64_t slots = std::min<std::uint64_t>(offer.slots, completed);
    for (std::uint64_t j = 0; j < slots; ++j) {
      const std::uint64_t m = j + ((completed - 1 - j) / offer.slots) * offer.slots;
      if (offer.verify && !check_pattern(write_region.data() + j * offer.size, offer.size, m)) wrong(m);
      ++summary.received;
    }
  }
};

}  // namespace

bool start_remote_eal(const PerfOptions& o, std::string& error) {
  return stack::start_eal(remote_port_options(o), error);
}

RunResult run_server(const PerfOptions& o, std::FILE* progress) {
  RunResult run;
  Endpoint e;
  if (!stack::open_endpoint(remote_port_options(o), e, run.error)) return run;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::unordered_map<std::uint32_t, std::unique_ptr<Session>> sessions;  // by local QPN
  std::vector<transport::Completion> scratch;  // the host's, for each connection with completions
  const auto drop = [&](decltype(sessions)::iterator it) { sessions.erase(it); };
  engine::EngineHost& host = *e.host;
  e.cm->listen([&](const transport::ConnectionConfig& config, const cm::Message& request,
                   std::vector<std::uint8_t>& reply) {
    Offer offer;
    if (!decode(request.private_data, offer)) return cm::RejectReason::bad_parameters;
    if (sessions.size() >= o.max_connections) {
      if (progress != nullptr)
        std::fprintf(progress, " refused QP %#x%s: %zu connections open, the most --max-connections allows (%u): "
                     "raise it, or lower the client's -q\n",
                     config.peer_qpn, which_of(offer).c_str(), sessions.size(), o.max_connections);
      return cm::RejectReason::no_resources;
    }
    std::string error;
    auto congestion = stack::make_congestion_control(request.cc, config, error);
    if (!error.empty()) return cm::RejectReason::bad_parameters;
    auto s = std::make_unique<Session>();
    s->offer = offer;
    s->streams = config.streams;
    s->started_ns = host.now_ns();
    if (offer.op != PerfOp::send) s->write_region.assign(offer.slots * offer.size, 0);
    const std::uint64_t receives = std::uint64_t{config.streams} * offer.receives_per_stream;
    s->receive_region.assign(offer.op == PerfOp::send ? std::max<std::uint64_t>(receives * offer.size, 64) : 64, 0);
    transport::ConnectionConfig c = config;
    stack::tolerate_stalls(c);  // as the loopback
    c.path_window = o.path_window;
    c.psn_window = o.psn_window;
    s->connection = e.add_connection(c, std::move(congestion), error);
    if (s->connection == nullptr) {
      if (progress != nullptr) std::fprintf(progress, " refused QP %#x: %s\n", config.peer_qpn, error.c_str());
      return cm::RejectReason::no_resources;
    }
    s->connection->connect();
    if (!s->write_region.empty())
      s->write_key = host.memory().register_region(s->write_region.data(), s->write_region.size(),
                                                   transport::access_local_write | transport::access_remote_write);
    s->receive_key = host.memory().register_region(s->receive_region.data(), s->receive_region.size(),
                                                   transport::access_local_write);
    s->expected_next.resize(config.streams);
    for (std::uint16_t k = 0; k < config.streams; ++k) s->expected_next[k] = k;
    const auto give_up = [&] {
      e.remove_connection(c.local_qpn);
      if (s->write_key != 0) host.memory().deregister(s->write_key);
      host.memory().deregister(s->receive_key);
      return cm::RejectReason::no_resources;
    };
    if (offer.op != PerfOp::write)
      for (std::uint16_t k = 0; k < config.streams; ++k)
        for (std::uint32_t j = 0; j < offer.receives_per_stream; ++j)
          if (!s->post_receive(std::uint64_t{k} * offer.receives_per_stream + j, k)) return give_up();
    reply = encode(Target{reinterpret_cast<std::uint64_t>(s->write_region.data()), s->write_key});
    // Many connections: the first and the last of the client's say it.
    if (progress != nullptr && (offer.connections <= 16 || offer.connection == 0 ||
                                offer.connection + 1 == offer.connections))
      std::fprintf(progress, " connection %#x from QP %#x%s: %s, %llu B messages, %u paths, %u streams, cc %s\n",
                   c.local_qpn, c.peer_qpn, which_of(offer).c_str(), to_string(offer.op),
                   static_cast<unsigned long long>(offer.size), c.paths, c.streams,
                   request.cc.empty() ? "none" : request.cc.c_str());
    sessions[c.local_qpn] = std::move(s);
    return cm::RejectReason::none;
  });
  if (progress != nullptr) {
    std::fprintf(progress, " Waiting for clients on %s (MAC %s, IPv4 %s), at most %u connections at once; "
                 "Ctrl-C stops\n", e.port->name().c_str(), mac_string(e.port->mac()).c_str(), o.local_ip.c_str(),
                 o.max_connections);
    std::fflush(progress);
  }
  bool finished = false;
  std::uint64_t finish_at = 0;
  const auto close_session = [&](std::uint32_t qpn, const Session& s) {
    run.host_b = host.counters();
    stack::add_counters(run.connection_b, s.connection->counters());
    e.remove_connection(qpn);
    if (s.write_key != 0) host.memory().deregister(s.write_key);
    host.memory().deregister(s.receive_key);
    e.cm->forget(qpn);
  };
  while (!interrupted.load()) {
    std::size_t work = e.turn();
    // Only the connections with completions.
    work += host.host().poll_completions(
        scratch, [&](transport::Connection& c, const std::vector<transport::Completion>& got) {
          const auto it = sessions.find(c.config().local_qpn);
          if (it != sessions.end() && it->second->offer.op != PerfOp::write) it->second->check(got);
        });
    for (const auto& ev : e.events) {
      const auto qpn = static_cast<std::uint32_t>(ev.id);
      const auto it = sessions.find(qpn);
      if (it == sessions.end()) continue;
      Session& s = *it->second;
      if (ev.kind == cm::EventKind::disconnected) {
        ClientSummary client;
        if (!decode_summary(ev.peer_private_data, client)) s.problem = "the client's disconnect carried no summary";
        s.poll();
        s.check_final_writes(client.completed);
        e.cm->set_disconnect_reply(qpn, encode(s.summary));
        SizeResult r;
        r.size = s.offer.size;
        r.messages = s.summary.received;
        r.seconds = double(host.now_ns() - s.started_ns) / 1e9;
        r.average_bps = r.seconds > 0 ? double(s.summary.received) * double(r.size) * 8.0 / r.seconds : 0.0;
        r.peak_bps = r.average_bps;
        r.message_rate = r.seconds > 0 ? double(s.summary.received) / r.seconds : 0.0;
        r.wrong_messages = s.summary.wrong;
        if (s.offer.op != PerfOp::write && s.summary.received < client.completed)
          r.missing_messages = client.completed - s.summary.received;
        r.first_problem = !s.problem.empty() ? s.problem
                          : s.summary.wrong != 0
                              ? fmt::format("message {} arrived with wrong bytes", s.summary.first_wrong)
                              : r.missing_messages != 0 ? fmt::format("{} messages never arrived", r.missing_messages)
                                                        : std::string();
        if (progress != nullptr && (s.offer.connections <= 16 || s.offer.connection == 0 ||
                                    s.offer.connection + 1 == s.offer.connections || !r.first_problem.empty()))
          std::fprintf(progress, " connection %#x%s closed: %llu messages %s, %llu wrong%s%s\n", qpn,
                       which_of(s.offer).c_str(),
                       static_cast<unsigned long long>(s.summary.received),
                       s.offer.verify ? "checked" : "received (not verified: the client did not ask)",
                       static_cast<unsigned long long>(s.summary.wrong), r.first_problem.empty() ? "" : ": ",
                       r.first_problem.c_str());
        run.sizes.push_back(r);
        close_session(qpn, s);
        drop(it);
        if (client.last && o.server_once) {
          finished = true;
          finish_at = host.now_ns() + server_linger_ns;  // answer duplicate DREQs for a while
        }
      } else if (ev.kind == cm::EventKind::superseded) {
        if (progress != nullptr)
          std::fprintf(progress, " connection %#x: its client started over; closing the old one\n", qpn);
        close_session(qpn, s);
        drop(it);
      }
    }
    e.events.clear();
    if (finished && host.now_ns() >= finish_at) break;
    e.idle(work);
  }
  if (interrupted.load() && progress != nullptr) std::fprintf(progress, " interrupted\n");
  for (auto& [qpn, s] : sessions) stack::add_counters(run.connection_b, s->connection->counters());
  host.refresh_port_counters();
  run.host_b = host.counters();
  run.cm_counters = cm_counters(e.cm->counters());
  return run;
}

// ---------------------------------------------------------------- client ---

namespace {

// One of the client's -q connections of one size. Message m of the size goes
// to connection m % qps as that connection's message m / qps: each
// connection numbers its own messages 0, 1, ... (immediate, pattern, slot),
// so the server checks each one as it would a lone connection.
struct ClientConnection {
  std::uint64_t cm_id = 0;
  bool established = false;                     // the handshake completed: a DREQ closes it
  transport::Connection* connection = nullptr;  // on the host, once established
  std::uint32_t local_qpn = 0;
  std::uint64_t remote_base = 0;
  std::uint32_t rkey = 0;
  std::uint64_t completed = 0;  // its messages completed successfully
  ServerSummary theirs;         // the server's, from the DREP
};

// DREQs for every established connection, each carrying its count of
// completed messages, and the server's summaries from the DREPs. The one
// that says `last` goes only once every other has its answer, so a server
// that exits on it has closed them all. The first problem, or "".
std::string close_connections(Endpoint& e, std::vector<ClientConnection>& conns, bool last,
                              std::uint64_t& torn_down) {
  std::string problem;
  const auto note = [&](std::string what) {
    if (problem.empty()) problem = std::move(what);
  };
  std::vector<std::size_t> open;
  for (std::size_t k = 0; k < conns.size(); ++k)
    if (conns[k].established) open.push_back(k);
  const auto close = [&](std::span<const std::size_t> which, bool with_last) {
    std::vector<std::uint64_t> ids;
    std::vector<std::size_t> closing;
    for (const std::size_t k : which) {
      ClientSummary mine;
      mine.completed = conns[k].completed;
      mine.last = with_last;
      std::string error;
      if (!e.cm->disconnect(e.host->now_ns(), conns[k].cm_id, encode(mine), error)) {
        note(error);
        continue;
      }
      ids.push_back(conns[k].cm_id);
      closing.push_back(k);
    }
    std::vector<cm::Event> closed;
    stack::wait_for_events(e, ids, cm::EventKind::disconnected, closed, interrupted);
    for (std::size_t i = 0; i < closing.size(); ++i) {
      if (!closed[i].error.empty())
        note(closed[i].error);
      else if (!decode_summary(closed[i].peer_private_data, conns[closing[i]].theirs))
        note("the server's disconnect reply carried no summary");
      else
        ++torn_down;
    }
  };
  if (!open.empty()) {
    const std::span<const std::size_t> all(open);
    close(all.first(all.size() - 1), false);
    close(all.last(1), last);
  }
  return problem;
}

void remove_connections(Endpoint& e, std::vector<ClientConnection>& conns) {
  for (auto& c : conns) {
    if (c.connection != nullptr) e.remove_connection(c.local_qpn);
    c.connection = nullptr;
  }
}

// Opens the -q connections of one size, all handshakes at once. On failure,
// closes those the server accepted (their DREQs say `last`: this client is
// done) and says which connection failed and why.
bool open_connections(const PerfOptions& o, Endpoint& e, cm::ConnectRequest request, Offer offer,
                      std::vector<ClientConnection>& conns, RunResult& run, std::string& error) {
  const std::uint32_t qps = o.qps;
  conns.assign(qps, ClientConnection{});
  const auto which = [&](std::size_t k) {
    return qps > 1 ? fmt::format("connection {} of {} (-q {}) for {} B messages: ", k + 1, qps, qps, offer.size)
                   : std::string();
  };
  std::vector<std::uint64_t> ids;
  ids.reserve(qps);
  const std::uint64_t setup_start = e.host->now_ns();
  for (std::uint32_t k = 0; k < qps; ++k) {
    offer.connection = static_cast<std::uint16_t>(k);  // -q is at most 16384: the offer's 16 bits hold it
    offer.connections = static_cast<std::uint16_t>(qps);
    request.private_data = encode(offer);
    std::string connect_error;
    const std::uint64_t id = e.cm->connect(e.host->now_ns(), request, connect_error);
    if (id == 0) {  // the request itself is bad: the same for every connection, so k is 0
      error = which(k) + connect_error;
      return false;
    }
    conns[k].cm_id = id;
    ids.push_back(id);
  }
  std::vector<cm::Event> answers;
  const bool all_established = stack::wait_for_events(e, ids, cm::EventKind::established, answers, interrupted);
  if (all_established) {
    run.cm_connections_set_up += qps;
    run.cm_setup_seconds += double(e.host->now_ns() - setup_start) / 1e9;
  }
  std::string problem;
  for (std::size_t k = 0; k < qps; ++k) {
    cm::Event& ev = answers[k];
    if (ev.kind != cm::EventKind::established || !ev.error.empty() || ev.id != ids[k]) {
      if (problem.empty()) {
        problem = which(k) + ev.error;
        // The server's connection limit (or memory) when it is a -q run.
        if (qps > 1 && ev.error.find(cm::to_string(cm::RejectReason::no_resources)) != std::string::npos)
          problem += fmt::format(": lower -q {}, or raise the server's --max-connections", qps);
      }
      continue;
    }
    ClientConnection& c = conns[k];
    c.established = true;
    if (!problem.empty()) continue;  // closed below without a connection of ours
    if (ev.peer_private_data.size() < 12) {
      problem = which(k) + "the server's reply carried no buffer address: is it a metaroce-perf --server?";
      continue;
    }
    c.remote_base = wire::load_be64(ev.peer_private_data.data());
    c.rkey = wire::load_be32(ev.peer_private_data.data() + 8);
    std::string cc_error;
    auto congestion = stack::make_congestion_control(ev.cc, ev.config, cc_error);
    if (!cc_error.empty()) {
      problem = which(k) + cc_error;
      continue;
    }
    c.connection = e.add_connection(ev.config, std::move(congestion), cc_error);
    if (c.connection == nullptr) {
      problem = which(k) + cc_error;
      continue;
    }
    c.local_qpn = ev.config.local_qpn;
    c.connection->connect();
  }
  if (problem.empty()) return true;
  std::uint64_t closed = 0;
  close_connections(e, conns, true, closed);
  remove_connections(e, conns);
  error = problem;
  return false;
}

bool client_size(const PerfOptions& o, Endpoint& e, std::uint64_t size, bool last, std::FILE* progress,
                 RunResult& run) {
  engine::EngineHost& host = *e.host;
  const std::uint32_t qps = o.qps;
  // As in the loopback: up to tx_depth slots per connection, within the
  // slot budget for the whole size (at least one each).
  const auto slots = static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(slot_budget_bytes / (size * qps), 1, o.tx_depth));  // per connection
  Offer offer;
  offer.op = o.op;
  offer.verify = o.verify;
  offer.slots = slots;
  offer.size = size;
  const std::uint64_t per_stream_in_flight = (slots + o.streams - 1) / o.streams;
  offer.receives_per_stream = static_cast<std::uint32_t>(std::max<std::uint64_t>(
      per_stream_in_flight + 1,
      std::min<std::uint64_t>(2 * per_stream_in_flight + 16,
                              o.op == PerfOp::send ? 2 * slot_budget_bytes / (size * o.streams * qps) : ~0ull)));

  cm::ConnectRequest request;
  request.connection.mode = o.mode;
  request.connection.mtu = o.mtu;
  request.connection.paths = o.paths;
  request.connection.streams = o.streams;
  request.connection.path_window = o.path_window;
  request.connection.psn_window = o.psn_window;
  stack::tolerate_stalls(request.connection);
  if (!parse_ipv4(o.server_address, request.connection.endpoints.peer_ipv4)) {
    run.error = fmt::format("--client '{}' is not an IPv4 address (give A.B.C.D)", o.server_address);
    return false;
  }
  if (!parse_mac(o.peer_mac, request.connection.endpoints.peer_mac)) {
    run.error = fmt::format("--peer-mac '{}' is not a MAC address (give xx:xx:xx:xx:xx:xx)", o.peer_mac);
    return false;
  }
  request.cc = o.cc;
  std::vector<ClientConnection> conns;
  const double setup_before = run.cm_setup_seconds;
  if (!open_connections(o, e, request, offer, conns, run, run.error)) return false;
  const double setup_seconds = run.cm_setup_seconds - setup_before;

  // Connection k's slots are k * slots .. (k + 1) * slots - 1 of the source.
  std::vector<std::uint8_t> source(std::uint64_t{slots} * qps * size, 0x5a);
  const std::uint32_t lkey =
      host.memory().register_region(source.data(), source.size(), transport::access_local_write);
  SizeResult result;
  result.size = size;
  result.connections = qps;
  result.cm_setup_per_s = setup_seconds > 0 ? double(qps) / setup_seconds : 0.0;
  std::vector<std::uint8_t> slot_busy(std::size_t{slots} * qps, 0);
  std::vector<std::uint64_t> slot_posted_ns(std::size_t{slots} * qps, 0);
  std::vector<std::uint64_t> latencies_ns;
  std::vector<transport::Completion> completions;
  std::uint64_t posted = 0, completed = 0, failed = 0;
  std::vector<transport::Completion> polled;  // one connection's, then appended to completions
  const std::uint64_t t0 = host.now_ns();
  const std::uint64_t duration_ns = static_cast<std::uint64_t>(o.duration_s * 1e9);
  std::uint64_t last_progress = t0, last_event = t0, window_start = t0, window_done = 0, end = t0, progress_done = 0;
  bool posting = true;
  std::string problem;
  // Message m: connection m % qps, its message m / qps, in its slot
  // (m / qps) % slots.
  const auto slot_of = [&](std::uint64_t m) {
    return static_cast<std::size_t>((m % qps) * slots + (m / qps) % slots);
  };
  const auto data_packets = [&] {
    std::uint64_t n = 0;
    for (const auto& c : conns) n += c.connection->counters().data_packets_sent + c.connection->counters().retransmitted_packets;
    return n;
  };
  const auto retransmissions = [&] {
    std::uint64_t n = 0;
    for (const auto& c : conns) n += stack::path_retransmissions(*c.connection);
    return n;
  };
  const std::uint64_t sent_before = data_packets();
  for (;;) {
    const std::uint64_t turn_start = rte_rdtsc();
    const std::uint64_t posted_before = posted;
    std::size_t work = e.turn();
    e.events.clear();
    const std::uint64_t now = host.now_ns();
    // Only the connections with completions.
    completions.clear();
    work += host.host().poll_completions(
        polled, [&](transport::Connection&, const std::vector<transport::Completion>& got) {
          completions.insert(completions.end(), got.begin(), got.end());
        });
    for (const auto& c : completions) {
      const std::size_t slot = slot_of(c.wr_id);
      slot_busy[slot] = false;
      last_event = end = now;
      if (o.test == PerfTest::lat) latencies_ns.push_back(now - slot_posted_ns[slot]);
      if (c.status != transport::CompletionStatus::success) {
        ++failed;
        if (problem.empty())
          problem = fmt::format("message {} completed with {}", c.wr_id, transport::to_string(c.status));
        continue;
      }
      ++completed;
      ++conns[c.wr_id % qps].completed;
    }
    if (posting && (duration_ns != 0 ? now - t0 >= duration_ns : posted >= o.iterations)) posting = false;
    if (interrupted.load()) posting = false;
    // Each connection has its `slots` (at most tx_depth) messages in flight.
    while (posting && (duration_ns != 0 || posted < o.iterations) && !slot_busy[slot_of(posted)] && failed == 0) {
      const std::uint64_t m = posted;
      const std::uint64_t own = m / qps;  // the connection's own message number
      ClientConnection& c = conns[m % qps];
      const std::size_t slot = slot_of(m);
      std::uint8_t* buffer = source.data() + slot * size;
      if (o.verify) fill_pattern(buffer, size, own);
      transport::SendRequest r;
      r.wr_id = m;
      r.op = o.op == PerfOp::write ? transport::SendOp::write
             : o.op == PerfOp::write_imm ? transport::SendOp::write_imm : transport::SendOp::send;
      r.stream = static_cast<std::uint16_t>(own % o.streams);
      r.local_addr = buffer;
      r.length = size;
      r.lkey = lkey;
      r.remote_addr = c.remote_base + (own % slots) * size;
      r.rkey = c.rkey;
      r.imm = static_cast<std::uint32_t>(own);
      const auto pr = c.connection->post_send(r);
      if (pr != transport::PostResult::ok) {
        problem = fmt::format("post_send refused message {}: {}", m, transport::to_string(pr));
        posting = false;
        break;
      }
      slot_busy[slot] = true;
      slot_posted_ns[slot] = now;
      ++posted;
      last_event = now;
    }
    if (now - window_start >= peak_window_ns) {
      result.peak_bps = std::max(result.peak_bps, double(completed - window_done) * double(size) * 8e9 /
                                                      double(now - window_start));
      window_start = now;
      window_done = completed;
    }
    if (progress != nullptr && now - last_progress >= 1'000'000'000) {
      std::fprintf(progress, "[%6.1f s] %llu B: %.2f Gb/s, %llu messages, %llu retransmitted\n",
                   double(now - t0) / 1e9, static_cast<unsigned long long>(size),
                   double(completed - progress_done) * double(size) * 8.0 / double(now - last_progress),
                   static_cast<unsigned long long>(completed), static_cast<unsigned long long>(retransmissions()));
      std::fflush(progress);
      last_progress = now;
      progress_done = completed;
    }
    if (!posting && completed + failed == posted) break;
    ++result.sender_turns;
    if (work != 0 || posted != posted_before) {
      ++result.sender_busy_turns;
      result.sender_busy_cycles += rte_rdtsc() - turn_start;
    }
    if (!posting && now - last_event > drain_limit_ns) {
      if (problem.empty()) problem = fmt::format("{} messages never completed", posted - completed - failed);
      break;
    }
    e.idle(work);
  }

  // The server's view of each connection: what it received and verified.
  const std::uint64_t teardown_start = host.now_ns();
  std::uint64_t torn_down = 0;
  const std::string closing = close_connections(e, conns, last, torn_down);
  run.cm_connections_torn_down += torn_down;
  run.cm_teardown_seconds += double(host.now_ns() - teardown_start) / 1e9;
  if (problem.empty()) problem = closing;
  result.messages = completed;
  result.seconds = double(end - t0) / 1e9;
  result.average_bps = result.seconds > 0 ? double(completed) * double(size) * 8.0 / result.seconds : 0.0;
  result.peak_bps = std::max(result.peak_bps, result.average_bps);
  result.message_rate = result.seconds > 0 ? double(completed) / result.seconds : 0.0;
  result.missing_messages = posted - completed;
  std::uint64_t first_wrong = no_message;
  for (std::uint32_t k = 0; k < qps; ++k) {
    const ClientConnection& c = conns[k];
    if (c.theirs.received < c.completed &&
        (o.op != PerfOp::write || c.theirs.received < std::min<std::uint64_t>(c.completed, slots)))
      result.missing_messages += c.completed - c.theirs.received;
    result.wrong_messages += c.theirs.wrong;
    if (c.theirs.wrong != 0) first_wrong = std::min(first_wrong, c.theirs.first_wrong * qps + k);  // as numbered here
  }
  if (problem.empty() && result.wrong_messages != 0)
    problem = fmt::format("the server found wrong bytes in {} messages, the first message {}", result.wrong_messages,
                          first_wrong);
  result.first_problem = problem;
  result.packets_sent = data_packets() - sent_before;
  if (result.packets_sent != 0)
    result.cycles_per_packet = double(result.sender_busy_cycles) / double(result.packets_sent);
  summarize_latencies(latencies_ns, result);
  for (const auto& c : conns) stack::add_counters(run.connection_a, c.connection->counters());
  run.retransmitted += retransmissions();
  run.sizes.push_back(result);
  remove_connections(e, conns);
  host.memory().deregister(lkey);
  return true;
}

}  // namespace

RunResult run_client(const PerfOptions& o, std::FILE* progress) {
  RunResult run;
  Endpoint e;
  if (!stack::open_endpoint(remote_port_options(o), e, run.error)) return run;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  for (std::size_t i = 0; i < o.sizes.size(); ++i)
    if (!client_size(o, e, o.sizes[i], i + 1 == o.sizes.size(), progress, run)) break;
  // Let the last RTU / DREQ answers out before the port stops.
  for (int i = 0; i < 100; ++i) e.turn();
  e.host->refresh_port_counters();
  run.host_a = e.host->counters();
  // DPDK 22.11's memif unmaps a departed peer's rings on its interrupt
  // thread, racing with an lcore in rx burst (a crash, seen with thousands
  // of connections): stop polling and let the server, which lingers
  // server_linger_ns after the last connection, go first.
  if (e.port->driver() == "net_memif")
    std::this_thread::sleep_for(std::chrono::nanoseconds(2 * server_linger_ns + 100'000'000));
  run.cm_counters = cm_counters(e.cm->counters());
  return run;
}

}  // namespace metaroce::perf
