// metaroce-gen's command line: the app's options before `--`, EAL's after.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <metaroce/endpoint.hpp>

#include "common/port_options.hpp"
#include "common/rocev2_options.hpp"
#include "common/run_control.hpp"
#include "common/traffic_message.hpp"
#include "metaroce-gen/size_distribution.hpp"

namespace metaroce::apps::gen {

struct GenOptions {
  metaroce::EndpointConfig port;  // --preset/--iface or --port, --local-ip, --idle-sleep-us, --cm-timeout
  std::string sink_address;  // --sink ADDR (IPv4 or IPv6, the family of --local-ip)
  std::string gateway;       // --gateway ADDR: the router towards the sink when it is not on this link
  std::string peer_mac;      // --peer-mac: the next hop's MAC (empty: asked for by ARP or ND)
  std::uint16_t lcores = 1;  // --lcores: lanes on the port, a thread each; connection i on lane i % lcores
  std::uint32_t connections = 1;
  std::uint16_t paths = 4;
  std::uint16_t streams = 1;
  std::uint32_t path_window = 32;
  std::string mode = "metaroce";  // or rocev2
  Rocev2Options rocev2;           // --pkey (also in port.pkey), --qp-timeout, --retry-count, --rnr-retry
  std::string cc;  // empty: none
  traffic::SizeDistribution sizes;
  // Relative weights of write, write-imm, send (index: traffic::Op).
  std::array<double, traffic::op_count> mix = {1.0, 1.0, 1.0, 0.0};  // write, write-imm, send, read
  std::string mix_text = "write:1,write-imm:1,send:1";
  double gbps = 0.0;      // 0: no byte-rate limit
  double msg_rate = 0.0;  // messages per second, all connections together; 0: none
  bool open_loop = false;
  std::uint64_t iterations = 1000;  // messages per connection (unless duration)
  double duration_s = 0.0;
  std::uint32_t tx_depth = 32;      // messages in flight per connection
  std::uint64_t seed = 1;
  double drain_timeout_s = 10.0;    // after the last post: how long to wait for completions without progress
  std::string json_path;
  bool quiet = false;               // no progress lines
};

// `message` is the help text (help) or one line saying what is wrong (error).
ParseOutcome parse_gen_options(int argc, const char* const* argv, GenOptions& out, std::string& message);

}  // namespace metaroce::apps::gen
