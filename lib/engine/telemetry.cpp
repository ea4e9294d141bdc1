#include "engine/telemetry.hpp"

#include <rte_lcore.h>
#include <rte_telemetry.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace metaroce::engine {

namespace {

// Every live publisher. Leaked on purpose: EAL's telemetry thread is never
// joined and may still run a callback while static destructors run at exit.
struct Registry {
  std::mutex mutex;
  std::vector<const TelemetryPublisher*> publishers;
};

Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

// rte_telemetry accepts dict keys of [A-Za-z0-9_/] only (and rejects the
// whole entry otherwise): the engine's "rx_parse_error.bad_icrc" becomes
// "rx_parse_error/bad_icrc".
std::string telemetry_key(std::string_view name) {
  std::string key(name);
  std::replace(key.begin(), key.end(), '.', '/');
  return key;
}

void add_u64(rte_tel_data* d, std::string_view name, std::uint64_t value) {
  rte_tel_data_add_dict_u64(d, telemetry_key(name).c_str(), value);
}

void add_string(rte_tel_data* d, const char* name, std::string_view value) {
  rte_tel_data_add_dict_string(d, name, std::string(value).c_str());
}

// A nested dict; rte_telemetry frees it with its parent (keep = 0). Nesting
// is one level deep at most: DPDK 22.11 does not format a container inside a
// container.
rte_tel_data* new_dict() {
  rte_tel_data* d = rte_tel_data_alloc();
  if (d != nullptr) rte_tel_data_start_dict(d);
  return d;
}

std::uint64_t age_ns(const EngineHost& host, const HostSnapshot& s) {
  const std::uint64_t now = host.now_ns();
  return now > s.taken_ns ? now - s.taken_ns : 0;
}

// The scalar fields of one connection, shared by /metaroce/conns and /metaroce/conn.
void add_connection_fields(rte_tel_data* d, const TelemetryPublisher& p, const HostSnapshot& s,
                           const ConnectionSnapshot& c) {
  add_string(d, "host", p.host().config().name);
  add_u64(d, "qpn", c.local_qpn);
  add_u64(d, "peer_qpn", c.peer_qpn);
  add_string(d, "mode", transport::to_string(c.mode));
  add_string(d, "state", transport::to_string(c.state));
  add_u64(d, "paths", c.paths);
  add_u64(d, "packets_outstanding", c.packets_outstanding);
  add_u64(d, "lcore", s.lcore_id);
  add_u64(d, "snapshot_age_ns", age_ns(p.host(), s));
}

int stats_command(const char*, const char*, rte_tel_data* info) {
  rte_tel_data_start_dict(info);
  std::lock_guard lock(registry().mutex);
  for (const TelemetryPublisher* p : registry().publishers) {
    rte_tel_data* host = new_dict();
    if (host == nullptr) return -ENOMEM;
    // A racy copy of plain counters the lcore keeps writing (see the header).
    const EngineCounters counters = p->host().counters();
    counters.visit([&](const std::string& name, std::uint64_t value) { add_u64(host, name, value); });
    add_u64(host, "dropped", counters.dropped());
    rte_tel_data_add_dict_container(info, p->host().config().name.c_str(), host, 0);
  }
  return 0;
}

int lcores_command(const char*, const char*, rte_tel_data* info) {
  rte_tel_data_start_dict(info);
  std::lock_guard lock(registry().mutex);
  for (const TelemetryPublisher* p : registry().publishers) {
    rte_tel_data* host = new_dict();
    if (host == nullptr) return -ENOMEM;
    const HostSnapshot s = p->snapshot();
    const EngineCounters& counters = p->host().counters();  // racy reads, see the header
    add_u64(host, "lcore", s.lcore_id);
    // A node's host i drives queue i of its port and owns these connections.
    add_u64(host, "queue", p->host().config().queue);
    add_u64(host, "connections", s.connections.size());
    add_u64(host, "polls", counters.polls);
    add_u64(host, "idle_polls", counters.idle_polls);
    add_u64(host, "idle_sleeps", counters.idle_sleeps);
    add_u64(host, "max_poll_gap_ns", counters.max_poll_gap_ns);
    add_u64(host, "publications", s.publications);
    add_u64(host, "snapshot_age_ns", age_ns(p->host(), s));
    rte_tel_data_add_dict_container(info, p->host().config().name.c_str(), host, 0);
  }
  return 0;
}

// A dict keyed "<host>/<qpn>" rather than a list: DPDK 22.11 takes only
// arrays of scalars into an array (a dict added to one is dropped), and a
// QPN is unique per host, not per process.
int conns_command(const char*, const char*, rte_tel_data* info) {
  rte_tel_data_start_dict(info);
  std::lock_guard lock(registry().mutex);
  for (const TelemetryPublisher* p : registry().publishers) {
    const HostSnapshot s = p->snapshot();
    for (const ConnectionSnapshot& c : s.connections) {
      rte_tel_data* conn = new_dict();
      if (conn == nullptr) return -ENOMEM;
      add_connection_fields(conn, *p, s, c);
      rte_tel_data_add_dict_container(info, fmt::format("{}/{}", p->host().config().name, c.local_qpn).c_str(),
                                      conn, 0);
    }
  }
  return 0;
}

const char* path_state_name(transport::PathState s) {
  return s == transport::PathState::active ? "active" : "failed";
}

// params: "<qpn>" (decimal or 0x hex) and optionally ",<host>" when two
// hosts use the same QPN. An unknown QPN answers {"error": "..."}, which
// says more to a person at dpdk-telemetry.py than a null reply.
int conn_command(const char*, const char* params, rte_tel_data* info) {
  rte_tel_data_start_dict(info);
  const std::string_view all = params != nullptr ? params : "";
  const std::size_t comma = all.find(',');
  const std::string qpn_text(all.substr(0, comma));
  const std::string host_name = comma == std::string_view::npos ? "" : std::string(all.substr(comma + 1));
  char* end = nullptr;
  const unsigned long qpn = std::strtoul(qpn_text.c_str(), &end, 0);
  if (qpn_text.empty() || end == nullptr || *end != '\0') {
    add_string(info, "error", "give a QPN: /metaroce/conn,<qpn>[,<host>] (/metaroce/conns lists them)");
    return 0;
  }
  std::lock_guard lock(registry().mutex);
  for (const TelemetryPublisher* p : registry().publishers) {
    if (!host_name.empty() && p->host().config().name != host_name) continue;
    const HostSnapshot s = p->snapshot();
    for (const ConnectionSnapshot& c : s.connections) {
      if (c.local_qpn != qpn) continue;
      add_connection_fields(info, *p, s, c);
      rte_tel_data* counters = new_dict();
      if (counters == nullptr) return -ENOMEM;
      c.counters.for_each([&](std::string_view name, std::uint64_t value) { add_u64(counters, name, value); });
      rte_tel_data_add_dict_container(info, "counters", counters, 0);
      for (std::size_t i = 0; i < c.path_info.size(); ++i) {
        const transport::PathInfo& pi = c.path_info[i];
        rte_tel_data* path = new_dict();
        if (path == nullptr) return -ENOMEM;
        add_u64(path, "src_port", pi.src_port);
        add_string(path, "state", path_state_name(pi.state));
        add_u64(path, "in_flight", pi.in_flight);
        add_u64(path, "next_seq", pi.next_seq);
        add_u64(path, "srtt_ns", pi.srtt);
        add_u64(path, "rto_ns", pi.rto);
        add_u64(path, "sent", pi.sent);
        add_u64(path, "retransmitted", pi.retransmitted);
        add_u64(path, "declared_lost", pi.declared_lost);
        add_u64(path, "timeouts", pi.timeouts);
        add_u64(path, "ecn_marks", pi.ce_marks);
        add_u64(path, "entropy_changes", pi.entropy_changes);
        rte_tel_data_add_dict_container(info, fmt::format("path_{}", i).c_str(), path, 0);
      }
      return 0;
    }
  }
  add_string(info, "error",
             fmt::format("no connection with QPN {} ({:#x}){}{}: /metaroce/conns lists them", qpn, qpn,
                         host_name.empty() ? "" : " on host ", host_name));
  return 0;
}

}  // namespace

bool register_telemetry_commands() {
  static const bool registered = [] {
    bool ok = true;
    ok &= rte_telemetry_register_cmd("/metaroce/stats", stats_command,
                                     "Engine counters of every metaroce host: frames, bytes, every drop by reason. "
                                     "No parameters") == 0;
    ok &= rte_telemetry_register_cmd("/metaroce/conns", conns_command,
                                     "Every metaroce connection: qpn, peer qpn, mode, state, paths, packets "
                                     "outstanding. No parameters") == 0;
    ok &= rte_telemetry_register_cmd("/metaroce/conn", conn_command,
                                     "One metaroce connection: every counter and each path. Parameters: "
                                     "qpn[,host]") == 0;
    ok &= rte_telemetry_register_cmd("/metaroce/lcores", lcores_command,
                                     "Per metaroce host: lcore, queue, connections, polls, idle polls, max poll gap. No parameters") == 0;
    return ok;
  }();
  return registered;
}

TelemetryPublisher::TelemetryPublisher(EngineHost& host, std::vector<transport::Connection*> connections,
                                       std::uint64_t publish_period_ns)
    : host_(host), publish_period_ns_(publish_period_ns) {
  set_connections(std::move(connections));
  register_telemetry_commands();
  publish();
  std::lock_guard lock(registry().mutex);
  registry().publishers.push_back(this);
}

TelemetryPublisher::~TelemetryPublisher() {
  // Waits for a callback in progress: it holds the registry's mutex.
  std::lock_guard lock(registry().mutex);
  auto& list = registry().publishers;
  list.erase(std::remove(list.begin(), list.end(), this), list.end());
}

void TelemetryPublisher::add_connection(transport::Connection* c) {
  if (index_.contains(c)) return;
  index_[c] = connections_.size();
  connections_.push_back(c);
  publish_due_ = true;
}

void TelemetryPublisher::remove_connection(const transport::Connection* c) {
  const auto it = index_.find(c);
  if (it == index_.end()) return;
  const std::size_t i = it->second;
  index_.erase(it);
  if (i + 1 != connections_.size()) {
    connections_[i] = connections_.back();
    index_[connections_[i]] = i;
  }
  connections_.pop_back();
  publish_due_ = true;
}

void TelemetryPublisher::publish() {
  last_publish_ns_ = host_.now_ns();
  scratch_.lcore_id = rte_lcore_id();
  scratch_.taken_ns = last_publish_ns_;
  scratch_.publications = ++publications_;
  // resize keeps the vectors' storage from the last swap: no allocation
  // once the shapes are stable.
  scratch_.connections.resize(connections_.size());
  for (std::size_t i = 0; i < connections_.size(); ++i) {
    const transport::Connection& c = *connections_[i];
    ConnectionSnapshot& s = scratch_.connections[i];
    s.local_qpn = c.config().local_qpn;
    s.peer_qpn = c.config().peer_qpn;
    s.mode = c.config().mode;
    s.state = c.state();
    s.paths = c.config().paths;
    s.packets_outstanding = c.packets_outstanding();
    s.counters = c.counters();
    s.path_info.resize(s.paths);
    for (std::uint16_t path = 0; path < s.paths; ++path) s.path_info[path] = c.path_info(path);
  }
  last_publish_cost_ns_ = host_.now_ns() - last_publish_ns_;
  // Never wait for a reader: if one holds the snapshot, maybe_publish's next clock check tries again.
  std::unique_lock lock(published_mutex_, std::try_to_lock);
  publish_due_ = !lock.owns_lock();
  if (lock.owns_lock()) std::swap(scratch_, published_);
}

HostSnapshot TelemetryPublisher::snapshot() const {
  std::lock_guard lock(published_mutex_);
  return published_;
}

}  // namespace metaroce::engine
