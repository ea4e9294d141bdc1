// metaroce-perf --loopback: both ends in one process (engine::Loopback), the
// sender on the main lcore, the receiver on a worker lcore (or both on one
// when EAL has a single lcore), one fresh loopback per message size. With
// --lcores N each side is a node of N lcores: lane k (sender host k and
// receiver host k, each on an lcore of its own) carries the connections
// of queue k and its share of the messages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine_counters.hpp"
#include "fabric/counters.hpp"
#include "metaroce-perf/perf_options.hpp"
#include "transport/counters.hpp"

namespace metaroce::perf {

// One lcore's poll turns: all of them, the busy ones (that moved or handled
// something), and the TSC cycles of each kind.
struct TurnCounts {
  std::uint64_t turns = 0, busy_turns = 0, busy_cycles = 0, cycles = 0;
  void add(std::uint64_t spent, bool busy) noexcept {
    ++turns;
    cycles += spent;
    if (busy) {
      ++busy_turns;
      busy_cycles += spent;
    }
  }
};

// One lcore of one side (--loopback): its connections, the data packets it
// sent (sender) or placed (receiver), its turns and their cost, by the TSC
// (busy turns) and by its thread's CPU time (CLOCK_THREAD_CPUTIME_ID: with
// more lcores than CPUs, TSC cycles include the time another thread had
// the CPU).
struct LcoreResult {
  const char* side = "sender";  // "sender" | "receiver"
  unsigned lcore = 0;           // EAL lcore id
  std::uint32_t connections = 0;
  std::uint64_t data_packets = 0;
  std::uint64_t busy_cycles = 0;
  std::uint64_t turns = 0, busy_turns = 0;
  std::uint64_t cpu_ns = 0;
  // This lcore's part of its port's receive share at the end (several
  // lcores with a receive share: cc::PortShareBoard); 0 otherwise.
  std::uint64_t receive_part_bps = 0;
  [[nodiscard]] double busy_cycles_per_packet() const noexcept {
    return data_packets != 0 ? double(busy_cycles) / double(data_packets) : 0.0;
  }
  [[nodiscard]] double idle_share() const noexcept {
    return turns != 0 ? 1.0 - double(busy_turns) / double(turns) : 0.0;
  }
};

struct SizeResult {
  std::uint64_t size = 0;
  std::uint64_t messages = 0;  // completed successfully
  double seconds = 0.0;
  double peak_bps = 0.0;       // best 100 ms window
  double average_bps = 0.0;
  double message_rate = 0.0;   // messages per second
  std::uint64_t wrong_messages = 0;    // --verify: a byte differed
  std::uint64_t missing_messages = 0;  // posted, never completed (or completed in error)
  std::string first_problem;           // what went wrong first, if anything
  // The sender lcore's cost: TSC cycles of its turns that did something
  // (polled frames, completions, posts), per data packet it sent.
  std::uint64_t sender_busy_cycles = 0;
  std::uint64_t sender_turns = 0, sender_busy_turns = 0;
  std::uint64_t packets_sent = 0;      // data packets, first transmissions and retransmissions
  double cycles_per_packet = 0.0;
  // The receiving side's turns, counted the same way (--loopback): on its
  // own lcore, or inside the sender's turns when both share one lcore (then
  // sender_busy_cycles leaves them out, so it is the sender's own cost).
  std::uint64_t receiver_busy_cycles = 0;
  std::uint64_t receiver_turns = 0, receiver_busy_turns = 0;
  double receiver_cycles_per_packet = 0.0;
  bool shared_lcore = false;  // both sides on one lcore
  // --loopback: each lcore, sender lanes and receiver lanes in turn
  // (--lcores N: 2N entries; the sums over them are the totals above).
  std::vector<LcoreResult> lcores;
  // --loopback: this process's resident memory before the connections were
  // created (ports, pools and hosts up), just after, and after the traffic
  // (apps/common/process_memory.hpp). Both ends are here: 2 x -q connection
  // ends.
  std::uint64_t resident_before_bytes = 0, resident_connected_bytes = 0, resident_after_bytes = 0;
  // Bytes the connections held when the timed window ended, by the hosts'
  // own count (Connection::memory_bytes summed), sender's and receiver's end.
  std::uint64_t connection_memory_sender_bytes = 0, connection_memory_receiver_bytes = 0;
  // --client: the connections of this size set up through the connection
  // manager per second (from the first REQ to the last REP).
  double cm_setup_per_s = 0.0;
  std::uint32_t connections = 0;  // -q
  // --test lat: post-to-completion time of each message (one round trip:
  // the WRITE out, its ACK back), in microseconds.
  double lat_min_us = 0.0, lat_p50_us = 0.0, lat_p99_us = 0.0, lat_max_us = 0.0, lat_avg_us = 0.0;
};

// --planes: one plane of the sender's connections, summed over them and
// the sizes (Connection::plane_info), and the frames its port took.
struct PlaneResult {
  std::uint16_t plane = 0;
  std::uint64_t data_packets = 0;  // first transmissions and retransmissions
  std::uint64_t retransmits = 0;
  std::uint64_t failures = 0;      // times the plane was declared failed
  std::uint64_t sender_port_frames = 0;  // the sender host's port for this plane (rte_eth_stats.opackets)
  std::uint64_t fabric_dropped = 0;      // frames its inline fabric dropped, both ways (--fabric, --fabric-plane)
  // At the end of the last size: "failed" when a sender connection still
  // has the plane failed, else "active".
  const char* state = "active";
};

// --server/--client --lcores N: one lane (an lcore driving queue k of the
// port, with a host and connection manager of its own) over the whole run.
struct LaneReport {
  LcoreResult lcore;           // side, lane index, connections, data packets, turns and cycles, CPU time
  std::uint64_t messages = 0;  // completed (client) or received (server)
  std::uint64_t rx_frames = 0, rx_misdirected = 0;  // its host's
};

struct RunResult {
  std::vector<SizeResult> sizes;
  std::vector<LaneReport> lanes;  // --server/--client --lcores N (N > 1): each lane
  std::vector<PlaneResult> planes;  // --loopback: one per plane
  engine::EngineCounters host_a{}, host_b{};  // summed over the sizes
  transport::ConnectionCounters connection_a{}, connection_b{};
  fabric::FabricCounters forward{}, backward{};
  std::uint64_t retransmitted = 0;
  // --client: connections set up through the connection manager over all
  // sizes, and the seconds that took (first REQ to last REP of each size).
  std::uint64_t cm_connections_set_up = 0, cm_connections_torn_down = 0;
  double cm_setup_seconds = 0.0, cm_teardown_seconds = 0.0;
  // --server, --client: the connection manager's counters (cm::Counters), by name.
  std::vector<std::pair<std::string, std::uint64_t>> cm_counters;
  std::string error;  // setup failed (nothing ran)
  [[nodiscard]] bool failed() const noexcept {
    if (!error.empty()) return true;
    for (const auto& s : sizes)
      if (s.wrong_messages != 0 || s.missing_messages != 0) return true;
    return false;
  }
};

// min/p50/avg/p99/max of the samples (ns) into `result` in microseconds,
// percentiles by nearest rank; sorts `latencies_ns`. Nothing when empty.
void summarize_latencies(std::vector<std::uint64_t>& latencies_ns, SizeResult& result);

using FrameTap = std::function<void(std::span<const std::uint8_t>, std::uint64_t)>;

// The threshold the loopback's hosts use: payloads copied unless
// --zero-copy-threshold asks for attaching (engine::zero_copy_never).
[[nodiscard]] std::uint32_t loopback_zero_copy_threshold(const PerfOptions& options) noexcept;

// The RTO floor of the loopback's connections (run_loopback): above the
// usual stall of a software end on a shared core, a few milliseconds.
inline constexpr std::uint64_t loopback_min_rto_ns = 2'000'000;

// Needs a started EAL. Progress lines go to `progress` once a second.
RunResult run_loopback(const PerfOptions& options, const FrameTap& tap, std::FILE* progress);

}  // namespace metaroce::perf
