// What every app's run needs beside the endpoint: a stop flag that SIGINT
// and SIGTERM set, one clock for every process on a host, and a run's
// counters as JSON.
#pragma once

#include <atomic>
#include <cstdint>

#include <metaroce/counters.hpp>
#include <metaroce/endpoint.hpp>

#include <vector>

#include "cm/manager.hpp"
#include "common/json_line.hpp"
#include "engine/engine_counters.hpp"
#include "transport/counters.hpp"

namespace metaroce::apps {

// SIGINT and SIGTERM from now on set the flag stop_requested() reads.
void catch_stop_signals();
[[nodiscard]] bool stop_requested() noexcept;
[[nodiscard]] const std::atomic<bool>& stop_flag() noexcept;

// CLOCK_MONOTONIC in ns: one clock for every process on a host (a
// generator's post time read by the sink), unlike the engine's TSC clock.
[[nodiscard]] std::uint64_t monotonic_ns() noexcept;

// A run's counters as three objects of a JSON summary:
// "connection_counters", "engine", "cm".
void add_counters_json(JsonLine& j, const transport::ConnectionCounters& connections,
                       const engine::EngineCounters& engine, const cm::Counters& cm);
// The same from the public API's counters: `connections` summed over the
// run's connections, `endpoint` as Endpoint::counters gives them ("host"
// becomes "engine").
void add_counters_json(JsonLine& j, const metaroce::CounterGroup& connections,
                       const std::vector<metaroce::CounterGroup>& endpoint);

// Lanes on a driver that spreads frames over the port's queues its own way
// (net_af_packet's fanout, a NIC's RSS) hand each frame on to the lane that
// owns it: every lane must go on reading its queue until the last one is
// done, or a lane that stopped would strand the frames for the others that
// land there (a DREP, an ACK). Counts this lane done, then turns `endpoint`
// (sleeping 20 us after a turn with nothing to do) until `lanes` are; a
// lane whose endpoint is gone (nullptr) only counts itself done.
void turn_until_lanes_done(metaroce::Endpoint* endpoint, std::atomic<unsigned>& done, unsigned lanes);

// One lane's (--lcores: a queue, host and connection manager per lcore)
// share of a metaroce-gen or metaroce-sink run.
struct LaneResult {
  std::uint16_t lcore = 0;
  std::uint64_t connections = 0, messages = 0, data_packets = 0, rx_frames = 0, tx_frames = 0, rx_misdirected = 0;
};
// The "lcores" array of a summary, each lane's entry naming `side`
// ("sender" or "receiver").
void add_lanes_json(JsonLine& j, const char* side, const std::vector<LaneResult>& lanes);

}  // namespace metaroce::apps
