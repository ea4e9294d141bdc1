// metaroce-gen's run: connects to the sink (one CM connection per generator
// connection), posts messages until the count or the duration, waits for
// their completions, then closes every connection with a DREQ carrying what
// it posted and completed; the sink's DREP carries its verdict.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <metaroce/counters.hpp>

#include "common/latency_histogram.hpp"
#include "common/run_control.hpp"
#include "common/traffic_handshake.hpp"
#include "metaroce-gen/gen_options.hpp"

namespace metaroce::apps::gen {

struct ConnectionResult {
  std::uint32_t index = 0;
  std::uint32_t qpn = 0;
  std::uint64_t posted = 0;
  std::uint64_t completed = 0;
  std::uint64_t failed = 0;
  std::uint64_t completed_bytes = 0;
  std::uint64_t forced_fences = 0;  // plain writes posted as write-imm so the sink could check the ring
  std::array<std::uint64_t, traffic::op_count> ops{};  // posted, by operation
  // READs of the sink's read region, checked here (the sink sees none of
  // them; posted, completed and completed_bytes count the others).
  std::uint64_t read_bytes_posted = 0;
  std::uint64_t reads_completed = 0;
  std::uint64_t reads_verified = 0;  // every byte right
  std::uint64_t read_bytes_verified = 0;
  std::uint64_t reads_wrong = 0;
  std::uint64_t read_wrong_bytes = 0;
  std::uint64_t retransmitted = 0;
  LatencyHistogram latency;  // post (open loop: arrival) to completion here
  bool sink_reported = false;
  traffic::SinkReport sink;
  std::string problem;  // the first, in words
  metaroce::CounterGroup counters;
};

// One lcore's share (--lcores): its connections, the messages they posted,
// their first transmissions, the frames its queue received.
using apps::LaneResult;

struct GenResult {
  std::string error;  // the run could not start (port, EAL, connections)
  std::uint64_t run = 0;
  std::vector<ConnectionResult> connections;
  double seconds = 0.0;  // first post to last completion
  bool interrupted = false;
  std::uint64_t arrivals_unsent = 0;  // open loop: arrived, never posted (the run ended first)
  std::uint64_t max_backlog = 0;      // open loop: most arrivals waiting at once
  std::vector<metaroce::CounterGroup> endpoint;  // the endpoint's at the end: host, cm, connection
  metaroce::CounterGroup counters;               // summed over the connections
  std::vector<LaneResult> lanes;                 // one per lcore

  // Every message completed here and the sink verified every one: no wrong
  // byte, nothing missing, no duplicate; every READ completed and every
  // byte it read right.
  [[nodiscard]] bool ok() const noexcept;
};

// Needs a started EAL. Progress lines go to `progress` (nullptr: none).
GenResult run_gen(const GenOptions& options, std::FILE* progress);

// The summary as one JSON object.
std::string gen_json(const GenOptions& options, const GenResult& result);
// The human summary: totals, the sink's verdict, the first problems.
void print_gen_summary(std::FILE* out, const GenOptions& options, const GenResult& result);

}  // namespace metaroce::apps::gen
