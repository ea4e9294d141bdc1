// Engine hosts and their connections, readable from outside the process
// through DPDK's telemetry socket (rte_telemetry, dpdk-telemetry.py):
//
//   /metaroce/stats          every host's EngineCounters (each drop reason by name)
//   /metaroce/conns          every connection: qpn, peer qpn, mode, state, paths, outstanding
//   /metaroce/conn,<qpn>[,<host>]  one connection: every ConnectionCounters field and each
//                            path's Connection::path_info
//   /metaroce/lcores         per host: lcore, queue, connections, polls, idle polls, idle sleeps, max poll gap
//
// Threading. The callbacks run on EAL's telemetry thread, concurrently with
// the lcores, and take no lock the lcores wait for:
//   - EngineCounters are read live: plain u64s written by the one owning
//     lcore, read without synchronisation. A value may be a few turns old,
//     and a torn read is possible in principle (an aligned 8-byte load is
//     not torn on x86-64 or arm64); acceptable for monitoring, and formally
//     a data race (TSan reports it).
//   - A publication costs O(connections) on the lcore, so with thousands of
//     them the period stretches to keep it under 1% of the lcore's time
//     (publish_cost_factor times the last publication's own duration).
//   - Connections are never touched by the telemetry thread: their maps,
//     paths and windows change under the lcore. The owning lcore copies
//     what the commands show into a snapshot (TelemetryPublisher::publish,
//     every publish_period_ns via maybe_publish) and hands it over with a
//     try_lock: when a reader holds the snapshot, the lcore skips this
//     publication instead of waiting. Readers see data at most one period
//     old (plus the time the lcore is descheduled); each reply says how old
//     (snapshot_age_ns).
// Lifetime: a publisher registers its host on construction and unregisters
// on destruction, waiting for a callback in progress; the host must outlive
// it, and so must each connection while it is in the publisher's list. A
// host whose connections come and go (the remote apps: one per message
// size, or per client) gives the publisher its new list with
// set_connections (or one at a time, add_connection / remove_connection, in
// O(1)), on the owning lcore, before destroying a connection: the telemetry
// thread only ever reads snapshots, never the list.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine_host.hpp"
#include "transport/connection.hpp"

namespace metaroce::engine {

// What /metaroce/conns and /metaroce/conn show of one connection, copied on
// its owning lcore.
struct ConnectionSnapshot {
  std::uint32_t local_qpn = 0;
  std::uint32_t peer_qpn = 0;
  transport::Mode mode = transport::Mode::metaroce;
  transport::ConnectionState state = transport::ConnectionState::init;
  std::uint16_t paths = 0;
  std::uint64_t packets_outstanding = 0;
  transport::ConnectionCounters counters{};
  std::vector<transport::PathInfo> path_info;  // one per path
};

struct HostSnapshot {
  unsigned lcore_id = ~0u;      // the lcore that published it (rte_lcore_id())
  std::uint64_t taken_ns = 0;   // host clock
  std::uint64_t publications = 0;
  std::vector<ConnectionSnapshot> connections;
};

class TelemetryPublisher {
 public:
  // 10 ms: fresh enough for a human or a scraper, 100 copies a second
  // (a few hundred bytes per connection) cost the lcore nothing measurable.
  static constexpr std::uint64_t default_publish_period_ns = 10'000'000;
  // A publication waits at least this many times its predecessor's own
  // duration, so copying thousands of connections takes at most 1% of the
  // lcore (and a list changed on every turn, while thousands of connections
  // are set up, is not copied whole on every turn).
  static constexpr std::uint64_t publish_cost_factor = 100;
  // A publication of at most this many connections is never held back
  // (its copy costs microseconds; counted, not timed, so that a slow build
  // such as a sanitizer's publishes as promptly as a fast one).
  static constexpr std::size_t cheap_publish_connections = 64;

  // Registers `host` (and the /metaroce commands, once per process) and
  // publishes a first snapshot from the calling thread, which must own the
  // host at that moment (before its lcore is launched).
  TelemetryPublisher(EngineHost& host, std::vector<transport::Connection*> connections,
                     std::uint64_t publish_period_ns = default_publish_period_ns);
  ~TelemetryPublisher();
  TelemetryPublisher(const TelemetryPublisher&) = delete;
  TelemetryPublisher& operator=(const TelemetryPublisher&) = delete;

  // Owning lcore only: the connections to show from now on (replacing the
  // list; empty for none). Call it before a connection the old list names
  // is destroyed. The set is published at maybe_publish's next clock check
  // (within 64 turns, so a connection just added has been connected by
  // then): until that publication, readers see the old set, as copies.
  void set_connections(std::vector<transport::Connection*> connections) {
    connections_ = std::move(connections);
    index_.clear();
    for (std::size_t i = 0; i < connections_.size(); ++i) index_[connections_[i]] = i;
    publish_due_ = true;
  }
  // Owning lcore only: adds one connection to the list, or takes one out
  // (the list's order changes: the last takes its place). O(1) each.
  void add_connection(transport::Connection* c);
  void remove_connection(const transport::Connection* c);
  // Owning lcore only: the list set last.
  [[nodiscard]] const std::vector<transport::Connection*>& connections() const noexcept { return connections_; }

  // Owning lcore only: copies the connections into the snapshot now.
  void publish();
  // Owning lcore only, once per poll turn: publishes when the period has
  // passed, the connections changed, or the last publication found a reader
  // holding the snapshot. Reads the clock every 64th call, so it costs a
  // counter increment on most turns.
  void maybe_publish() {
    if ((++calls_ & 63u) != 0) return;
    const std::uint64_t since = host_.now_ns() - last_publish_ns_;
    if ((connections_.size() <= cheap_publish_connections || since >= publish_cost_factor * last_publish_cost_ns_) &&
        (publish_due_ || since >= publish_period_ns_))
      publish();
  }

  // Telemetry thread (or tests): the host and a copy of its last snapshot.
  [[nodiscard]] const EngineHost& host() const noexcept { return host_; }
  [[nodiscard]] HostSnapshot snapshot() const;

 private:
  EngineHost& host_;
  std::vector<transport::Connection*> connections_;  // owner's list: only the owner reads it
  std::unordered_map<const transport::Connection*, std::size_t> index_;  // where each is in connections_
  std::uint64_t publish_period_ns_;
  std::uint64_t last_publish_cost_ns_ = 0;  // how long the last publish() took
  std::uint64_t calls_ = 0;
  std::uint64_t last_publish_ns_ = 0;
  std::uint64_t publications_ = 0;
  bool publish_due_ = false;        // the list changed, or the last publish() could not swap its snapshot in
  HostSnapshot scratch_;            // filled by the owner, then swapped in
  mutable std::mutex published_mutex_;
  HostSnapshot published_;          // guarded by published_mutex_
};

// Registers the /metaroce commands with rte_telemetry (idempotent; the
// publisher does it). False when rte_telemetry refused one (a name taken).
bool register_telemetry_commands();

}  // namespace metaroce::engine
