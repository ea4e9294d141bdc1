#include "metaroce-gen/gen_options.hpp"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "common/port_options.hpp"

namespace po = boost::program_options;

namespace metaroce::apps::gen {

namespace {

po::options_description describe() {
  po::options_description d("Options (EAL arguments go after `--`)");
  d.add_options()
      ("help,h", "print this help and exit")
      ("sink", po::value<std::string>(), "the metaroce-sink's address, IPv4 (A.B.C.D) or IPv6, of the family "
                                         "of --local-ip")
      ("gateway", po::value<std::string>(), "the router towards the sink when it is not on this link: its MAC "
                                            "is asked for instead of the sink's")
      ("peer-mac", po::value<std::string>(), "MAC of the next hop towards the sink (the sink's own when "
                                             "metaroce-fabric or a switch is in between); default: asked for by "
                                             "ARP (IPv4) or neighbour solicitation (IPv6)");
  add_port_options(d);
  d.add_options()
      ("cm-timeout", po::value<double>(), "seconds to repeat connection requests before giving up (default 3)")
      ("connections,c", po::value<std::uint32_t>(), "connections to the sink, 1..4096 (default 1)")
      ("qps,q", po::value<std::uint32_t>(), "the same as --connections, spelled as metaroce-perf and perftest "
                                            "spell it")
      ("paths", po::value<std::uint16_t>(), "paths (UDP source ports) per connection, 1..64 (default 4)")
      ("streams", po::value<std::uint16_t>(), "ordered streams per connection, 1..256 (default 1); message m "
                                              "goes on stream m mod streams")
      ("path-window", po::value<std::uint32_t>(), "packets in flight per path, 1..256 (default 32)")
      ("mode", po::value<std::string>(), "metaroce | rocev2 (default metaroce)")
      ("mtu", po::value<std::uint32_t>(), "payload bytes per packet, 256..9000 (default 4096); --mode rocev2: "
                                          "an IB MTU, 256, 512, 1024, 2048 or 4096")
      ("cc", po::value<std::string>(), "congestion control: metaroce | dcqcn | fixed (default none: the path "
                                       "window bounds each path)")
      ("size,s", po::value<std::string>(), "message sizes in bytes: N, MIN-MAX (uniform), A,B,C (each alike) or "
                                           "A:W,B:W (weighted); each 32..1G, as 65536, 64k or 1M (k = 1024; "
                                           "default 65536)")
      ("size-file", po::value<std::string>(), "message sizes from a CSV FILE of SIZE[,WEIGHT] lines")
      ("mix", po::value<std::string>(), "operation mix, OP:WEIGHT,... of write, write-imm, send, read "
                                        "(default write:1,write-imm:1,send:1); a read reads the sink's "
                                        "pattern region and is checked here")
      ("gbps", po::value<double>(), "limit: payload Gb/s, all connections together (default none)")
      ("msg-rate", po::value<double>(), "limit: messages per second, all connections together (default none)")
      ("open-loop", "messages arrive at the rate (--gbps or --msg-rate; Poisson) whether or not earlier ones "
                    "completed; latency counts the wait. Default: closed loop (--tx-depth in flight per "
                    "connection, paced by the limits)")
      ("iters,n", po::value<std::uint64_t>(), "messages per connection (default 1000)")
      ("duration,D", po::value<double>(), "seconds of posting instead of a message count")
      ("tx-depth,t", po::value<std::uint32_t>(), "messages in flight per connection, 1..4096 (default 32)")
      ("seed", po::value<std::uint64_t>(), "seed of sizes, operations and arrivals (default 1)")
      ("drain-timeout", po::value<double>(), "seconds to wait for outstanding completions without progress "
                                             "after the last post (default 10)")
      ("json", po::value<std::string>(), "write the summary as JSON to FILE")
      ("quiet", "no progress line each second");
  add_rocev2_options(d);
  return d;
}

bool positive(const po::variables_map& vm, const char* key, double max, double& out, std::string& message) {
  if (!vm.count(key)) return true;
  const double v = vm[key].as<double>();
  if (!(v > 0.0 && v <= max)) {
    message = fmt::format("--{} {} is out of range: give a number in (0, {}]", key, v, max);
    return false;
  }
  out = v;
  return true;
}

bool parse_mix(const std::string& text, std::array<double, traffic::op_count>& mix, std::string& message) {
  std::array<double, traffic::op_count> m{};
  std::string_view rest = text;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const auto colon = item.find(':');
    const std::string_view name = item.substr(0, colon);
    double weight = 1.0;
    if (colon != std::string_view::npos) {
      const std::string_view w = item.substr(colon + 1);
      const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), weight);
      if (ec != std::errc() || end != w.data() + w.size() || w.empty() || !(weight >= 0.0) || !std::isfinite(weight)) {
        message = fmt::format("--mix: '{}' has no usable weight: give OP:WEIGHT with a number >= 0", item);
        return false;
      }
    }
    const int op = name == "write" ? 0 : name == "write-imm" ? 1 : name == "send" ? 2 : name == "read" ? 3 : -1;
    if (op < 0) {
      message = fmt::format("--mix: '{}' is not an operation: give write, write-imm, send or read", name);
      return false;
    }
    m[static_cast<std::size_t>(op)] = weight;
  }
  if (!(m[0] + m[1] + m[2] + m[3] > 0.0)) {
    message = "--mix gives every operation weight 0: give at least one a positive weight";
    return false;
  }
  mix = m;
  return true;
}

}  // namespace

ParseOutcome parse_gen_options(int argc, const char* const* argv, GenOptions& out, std::string& message) {
  po::variables_map vm;
  std::vector<std::string> eal_args;
  const ParseOutcome parsed = parse_command_line(
      argc, argv, describe(),
      "Usage: metaroce-gen --sink ADDR --local-ip ADDR [--gateway ADDR] [--peer-mac MAC]\n"
      "                    (--preset FILE [--iface NAME] | --port NAME) [OPTIONS] [-- EAL-ARGS]\n"
      "Traffic for metaroce-sink: N connections of P paths, messages of the given sizes and\n"
      "operations, each filled with a pattern of (connection, message, offset) that the sink\n"
      "checks byte by byte. A progress line each second; at the end the sink's verdict for\n"
      "every connection (in its disconnect reply) and, with --json, the summary.\n"
      "Exit status: 0 every message completed and the sink verified every byte, 1 anything\n"
      "else (a failed completion, a wrong or missing byte, a duplicate), 2 bad options.\n",
      vm, eal_args, message);
  if (parsed != ParseOutcome::run) return parsed;
  GenOptions o;
  o.port.program = "metaroce-gen";
  o.port.name = "gen";
  // Frames are immutable once built: a retransmission still queued when its
  // message completes (and its buffer takes the next message) would
  // otherwise leave with the next message's bytes and fail its ICRC.
  o.port.zero_copy_threshold = 65535;
  if (!read_port_options(vm, std::move(eal_args), o.port, message) || !read_lcores(vm, o.lcores, message))
    return ParseOutcome::error;
  if (!vm.count("sink")) {
    message = "give the sink's address: --sink ADDR (A.B.C.D, or IPv6)";
    return ParseOutcome::error;
  }
  o.sink_address = vm["sink"].as<std::string>();
  if (!check_address_family("--sink", o.sink_address, o.port.local_ip, message)) return ParseOutcome::error;
  if (vm.count("gateway")) {
    o.gateway = vm["gateway"].as<std::string>();
    if (!check_address_family("--gateway", o.gateway, o.port.local_ip, message)) return ParseOutcome::error;
  }
  if (vm.count("peer-mac")) {
    o.peer_mac = vm["peer-mac"].as<std::string>();
    wire::MacAddress mac{};
    if (!stack::parse_mac(o.peer_mac, mac)) {
      message = fmt::format("--peer-mac '{}' is not a MAC address: give xx:xx:xx:xx:xx:xx", o.peer_mac);
      return ParseOutcome::error;
    }
  }
  if (vm.count("connections") && vm.count("qps")) {
    message = "--connections and --qps are the same option: give one";
    return ParseOutcome::error;
  }
  if (!read_in_range<std::uint32_t>(vm, "connections", 1, 4096, o.connections, message) ||
      !read_in_range<std::uint32_t>(vm, "qps", 1, 4096, o.connections, message) ||
      !read_in_range<std::uint16_t>(vm, "paths", 1, 64, o.paths, message) ||
      !read_in_range<std::uint16_t>(vm, "streams", 1, 256, o.streams, message) ||
      !read_in_range<std::uint32_t>(vm, "path-window", 1, 256, o.path_window, message) ||
      !read_in_range<std::uint32_t>(vm, "mtu", 256, 9000, o.port.mtu, message) ||
      !read_in_range<std::uint32_t>(vm, "tx-depth", 1, 4096, o.tx_depth, message) ||
      !read_in_range<std::uint64_t>(vm, "iters", 1, std::uint64_t{1} << 40, o.iterations, message) ||
      !positive(vm, "cm-timeout", 3600.0, o.port.connect_timeout_s, message) ||
      !positive(vm, "gbps", 10000.0, o.gbps, message) || !positive(vm, "msg-rate", 1e9, o.msg_rate, message) ||
      !positive(vm, "duration", 86400.0, o.duration_s, message) ||
      !positive(vm, "drain-timeout", 3600.0, o.drain_timeout_s, message))
    return ParseOutcome::error;
  o.port.max_connections = o.connections;
  if (o.lcores > o.connections) {
    message = fmt::format("--lcores {} with --connections {}: lcore {} would carry no connection; give --connections "
                          "{} at least",
                          o.lcores, o.connections, o.connections, o.lcores);
    return ParseOutcome::error;
  }
  if (vm.count("iters") && vm.count("duration")) {
    message = "--iters and --duration exclude each other: give one";
    return ParseOutcome::error;
  }
  if (vm.count("mode")) o.mode = vm["mode"].as<std::string>();
  if (o.mode != "metaroce" && o.mode != "rocev2") {
    message = fmt::format("--mode '{}' is not a mode: give metaroce or rocev2", o.mode);
    return ParseOutcome::error;
  }
  if (o.mode == "rocev2") {
    if ((vm.count("paths") && o.paths != 1) || (vm.count("streams") && o.streams != 1)) {
      message = "--mode rocev2 has one path and one stream: drop --paths/--streams or give 1";
      return ParseOutcome::error;
    }
    o.paths = 1;
    o.streams = 1;
  }
  if (!read_rocev2_options(vm, o.mode == "rocev2", o.rocev2, message) ||
      !check_rocev2_mtu(o.mode == "rocev2", o.port.mtu, message))
    return ParseOutcome::error;
  o.port.pkey = o.rocev2.pkey;
  o.port.ibta_cm = o.rocev2.ibta_cm;
  if (vm.count("cc")) o.cc = vm["cc"].as<std::string>();
  if (vm.count("size") && vm.count("size-file")) {
    message = "--size and --size-file exclude each other: give one";
    return ParseOutcome::error;
  }
  if (vm.count("size-file")) {
    if (!traffic::SizeDistribution::load_csv(vm["size-file"].as<std::string>(), o.sizes, message))
      return ParseOutcome::error;
  } else if (!traffic::SizeDistribution::parse(vm.count("size") ? vm["size"].as<std::string>() : "65536", o.sizes,
                                               message)) {
    return ParseOutcome::error;
  }
  if (vm.count("mix")) {
    o.mix_text = vm["mix"].as<std::string>();
    if (!parse_mix(o.mix_text, o.mix, message)) return ParseOutcome::error;
  }
  o.open_loop = vm.count("open-loop") != 0;
  if (o.open_loop && o.gbps == 0.0 && o.msg_rate == 0.0) {
    message = "--open-loop needs an arrival rate: give --gbps G or --msg-rate M";
    return ParseOutcome::error;
  }
  if (vm.count("seed")) o.seed = vm["seed"].as<std::uint64_t>();
  if (vm.count("json")) o.json_path = vm["json"].as<std::string>();
  o.quiet = vm.count("quiet") != 0;
  out = std::move(o);
  return ParseOutcome::run;
}

}  // namespace metaroce::apps::gen
