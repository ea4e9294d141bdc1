// metaroce-sink's run: listens, accepts each metaroce-gen connection (its
// write slots and receive buffers as the generator's offer lays them out),
// keeps receives posted, checks every message (connection_verifier.hpp),
// and answers each DREQ with its verdict.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <metaroce/counters.hpp>

#include "common/latency_histogram.hpp"
#include "common/run_control.hpp"
#include "common/traffic_handshake.hpp"
#include "metaroce-sink/connection_verifier.hpp"
#include "metaroce-sink/sink_options.hpp"

namespace metaroce::apps::sink {

struct SessionResult {
  std::uint32_t qpn = 0;
  std::uint32_t connection = 0;  // the generator's index
  std::uint64_t run = 0;
  traffic::VerifierTotals totals;
  LatencyHistogram latency;  // the header's post time to the completion here (write-imm, send)
  std::uint64_t failed_completions = 0;
  bool closed = false;  // the generator's DREQ came
  bool gen_reported = false;
  traffic::GenReport gen;
  double seconds = 0.0;  // established to the last message
  std::string problem;
  metaroce::CounterGroup counters;  // the connection's, at its close

  // Arrived once, every byte right, every posted message seen.
  [[nodiscard]] bool ok() const noexcept;
};

// One lcore's share (--lcores): its connections, the messages it verified,
// the data packets they placed, the frames its queue received.
using apps::LaneResult;

struct SinkResult {
  std::string error;  // the sink could not start
  std::vector<SessionResult> sessions;
  std::uint32_t runs_completed = 0;
  std::uint64_t refused = 0;  // connection requests rejected (memory, a bad offer)
  bool interrupted = false;
  std::vector<metaroce::CounterGroup> endpoint;  // the endpoint's at the end: host, cm, connection
  metaroce::CounterGroup counters;               // the sessions' connections', summed
  std::vector<LaneResult> lanes;                 // one per lcore

  [[nodiscard]] bool ok() const noexcept;
};

SinkResult run_sink(const SinkOptions& options, std::FILE* progress);

std::string sink_json(const SinkOptions& options, const SinkResult& result);
void print_sink_summary(std::FILE* out, const SinkResult& result);

}  // namespace metaroce::apps::sink
