// metaroce-sink's command line: the app's options before `--`, EAL's after.
#pragma once

#include <cstdint>
#include <string>

#include <metaroce/endpoint.hpp>

#include "common/port_options.hpp"
#include "common/rocev2_options.hpp"
#include "common/run_control.hpp"

namespace metaroce::apps::sink {

struct SinkOptions {
  metaroce::EndpointConfig port;  // --preset/--iface or --port, --local-ip, --idle-sleep-us
  std::uint16_t lcores = 1;   // --lcores: lanes on the port, a thread each
  std::uint32_t runs = 1;     // exit once this many generator runs closed all their connections; 0: never
  double duration_s = 0.0;    // exit after this long whatever happens; 0: no limit
  Rocev2Options rocev2;  // its rocev2 connections: --pkey (also in port.pkey) and its own IBTA timers
  std::uint64_t memory_mb = 4096;  // refuse connections beyond this much receive memory
  std::uint64_t max_connection_memory = std::uint64_t{1} << 30;  // bytes one connection request may commit
  std::string json_path;
  bool quiet = false;
};

ParseOutcome parse_sink_options(int argc, const char* const* argv, SinkOptions& out, std::string& message);

}  // namespace metaroce::apps::sink
