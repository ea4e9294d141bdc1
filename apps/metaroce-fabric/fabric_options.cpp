#include "metaroce-fabric/fabric_options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <initializer_list>
#include <string_view>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "fabric/spec.hpp"

namespace po = boost::program_options;

namespace metaroce::fabric_app {

namespace {

po::options_description describe() {
  po::options_description d("Options (EAL arguments go after `--`)");
  d.add_options()
      ("help,h", "print this help and exit")
      ("port-a", po::value<std::string>(), "the first port, by EAL device name (a --vdev name such as net_pcap0, "
                                           "or a PCI address given to EAL with -a)")
      ("port-b", po::value<std::string>(), "the second port")
      ("a-to-b", po::value<std::string>(), "impairments of frames received on port A and sent out of port B, "
                                           "e.g. \"loss 1% delay 10us\" (grammar: doc/FABRIC.md)")
      ("b-to-a", po::value<std::string>(), "impairments of frames from port B to port A")
      ("both", po::value<std::string>(), "the same impairments both ways (b-to-a draws with seed + 1); "
                                         "--a-to-b / --b-to-a override it for their direction")
      ("duration", po::value<double>(), "seconds to run (default 0: until SIGINT or SIGTERM)")
      ("exit-when-idle", po::value<double>(), "exit after this many seconds with nothing received and nothing "
                                              "in flight (for net_pcap input and tests; default 0: never)")
      ("stats-interval", po::value<double>(), "seconds between stats lines (default 1; 0: none)")
      ("idle-sleep-us", po::value<std::uint32_t>(), "sleep up to this long when a turn found nothing to do, "
                                                    "never past the next frame's release (default 0: busy poll)")
      ("json", po::value<std::string>(), "write the summary (per direction: counters, drops by cause, spec) "
                                         "as JSON to FILE at exit")
      ("lcores", po::value<unsigned>(), "lanes per direction, 1..16 (default 1): each port gets N queues and "
                                        "lane k forwards queue k of one port to queue k of the other on an lcore "
                                        "of its own, with 1/N of the rate, limit and ECN thresholds")
      ("mbufs", po::value<std::uint32_t>(), "receive mbufs per port, 1024..1048576 (default 8192): frames wait "
                                            "in the delay line in the mbufs they arrived in, so this bounds "
                                            "the frames in flight")
      ("ports", po::value<unsigned>(), "the switch form: N ports (2..64) given by --port, frames forwarded by "
                                       "destination address (--route, --routes) to their output port's queue "
                                       "(--out, --out-port); instead of --port-a/--port-b")
      ("port", po::value<std::vector<std::string>>(), "with --ports: the next port by EAL device name (give N; "
                                                      "the first is port 0)")
      ("route", po::value<std::vector<std::string>>(), "with --ports: ADDRESS=PORT, frames to ADDRESS (IPv4 or "
                                                       "IPv6; ARP and neighbour solicitations by their target) "
                                                       "leave on PORT; repeatable")
      ("routes", po::value<std::string>(), "with --ports: a FILE of ADDRESS=PORT lines (# comments)")
      ("out", po::value<std::string>(), "with --ports: every output port's queue and impairments, e.g. "
                                        "\"rate 2gbit limit 200kb ecn 30kb\" (port i draws with seed + i)")
      ("out-port", po::value<std::vector<std::string>>(), "with --ports: I=SPEC, output port I's own (replaces "
                                                          "--out there); repeatable");
  return d;
}

bool parse_spec(const po::variables_map& vm, const char* key, fabric::FabricConfig& out, std::string& message) {
  if (!vm.count(key)) return true;
  const fabric::FabricSpecResult r = fabric::parse_fabric_spec(vm[key].as<std::string>());
  if (!r.ok()) {
    message = fmt::format("--{}: {}", key, r.error);
    return false;
  }
  out = r.config;
  return true;
}

bool seconds(const po::variables_map& vm, const char* key, double& out, std::string& message) {
  if (!vm.count(key)) return true;
  const double v = vm[key].as<double>();
  if (!(v >= 0.0 && v <= 31'536'000.0)) {
    message = fmt::format("--{} {} is out of range: give seconds between 0 and 31536000", key, v);
    return false;
  }
  out = v;
  return true;
}

bool parse_two_ports(const po::variables_map& vm, FabricOptions& o, std::string& message);
bool parse_switch(const po::variables_map& vm, FabricOptions& o, std::string& message);

bool starts_with_any(std::string_view arg, std::initializer_list<std::string_view> options) {
  return std::any_of(options.begin(), options.end(), [&](std::string_view o) {
    // "-l", "-l0-1", "--lcores", "--lcores=0-1"
    if (arg == o) return true;
    if (o.size() == 2) return arg.size() > 2 && arg.substr(0, 2) == o;
    return arg.size() > o.size() && arg.substr(0, o.size()) == o && arg[o.size()] == '=';
  });
}

}  // namespace

ParseOutcome parse_fabric_options(int argc, const char* const* argv, FabricOptions& out, std::string& message) {
  FabricOptions o;
  po::variables_map vm;
  const ParseOutcome parsed = apps::parse_command_line(
      argc, argv, describe(),
      "Usage: metaroce-fabric --port-a NAME --port-b NAME [--a-to-b SPEC] [--b-to-a SPEC] [--both SPEC]\n"
      "                       [OPTIONS] [-- EAL-ARGS]\n"
      "       metaroce-fabric --ports N --port NAME (N times) --route ADDRESS=PORT ... [--out SPEC]\n"
      "                       [--out-port I=SPEC] [OPTIONS] [-- EAL-ARGS]\n"
      "A two-port impairment node: frames received on port A leave on port B through the\n"
      "--a-to-b impairments, frames from B leave on A through --b-to-a (loss, Gilbert-Elliott\n"
      "bursts, delay and jitter, rate, queue limit and ECN marking, duplication, corruption,\n"
      "ECMP paths with unequal delays, blackholes; grammar in doc/FABRIC.md). Times in the\n"
      "specs (blackhole ... at T) count from the start of forwarding.\n"
      "EAL gets -l 0 --no-huge -m 512 --no-shconf --no-pci --file-prefix metaroce-fabric\n"
      "--log-level error, then the EAL arguments (which replace the defaults of their kind);\n"
      "the ports are vdevs there, e.g.\n"
      "  -- --vdev net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap --vdev net_pcap1,tx_pcap=back.pcap\n"
      "With two lcores (-l 0-1) B -> A runs on the second one. --lcores N gives each port N\n"
      "queues and each direction N lanes (queue k to queue k), spread over the EAL lcores (by\n"
      "default 2N of them). A stats line per direction each second; telemetry:\n"
      "/metaroce/fabric (dpdk-telemetry.py -f metaroce-fabric).\n"
      "With --ports N it is a small switch on one lcore: each frame leaves on the port its\n"
      "destination address is routed to (ARP and neighbour solicitations by their target),\n"
      "through that output port's queue and impairments; a stats line per port.\n"
      "Exit status: 0 success, 1 a run-time failure (EAL, ports, JSON file), 2 bad options.\n",
      vm, o.eal_args, message);
  if (parsed != ParseOutcome::run) return parsed;
  if (vm.count("ports")) {
    if (!parse_switch(vm, o, message)) return ParseOutcome::error;
  } else if (vm.count("port") || vm.count("route") || vm.count("routes") || vm.count("out") || vm.count("out-port")) {
    message = fmt::format("--{} is for the switch form: give --ports N too (or --port-a/--port-b without it)",
                          vm.count("port") ? "port" : vm.count("route") ? "route" : vm.count("routes") ? "routes"
                                                    : vm.count("out")   ? "out" : "out-port");
    return ParseOutcome::error;
  } else if (!parse_two_ports(vm, o, message)) {
    return ParseOutcome::error;
  }
  if (!seconds(vm, "duration", o.duration_s, message) || !seconds(vm, "exit-when-idle", o.exit_when_idle_s, message) ||
      !seconds(vm, "stats-interval", o.stats_interval_s, message))
    return ParseOutcome::error;
  if (vm.count("idle-sleep-us")) {
    o.idle_sleep_us = vm["idle-sleep-us"].as<std::uint32_t>();
    if (o.idle_sleep_us > 1'000'000) {
      message = fmt::format("--idle-sleep-us {} is out of range: give 0..1000000", o.idle_sleep_us);
      return ParseOutcome::error;
    }
  }
  if (vm.count("mbufs")) {
    o.mbufs = vm["mbufs"].as<std::uint32_t>();
    if (o.mbufs < 1024 || o.mbufs > 1'048'576) {
      message = fmt::format("--mbufs {} is out of range: give 1024..1048576", o.mbufs);
      return ParseOutcome::error;
    }
  }
  if (vm.count("lcores")) {
    const unsigned n = vm["lcores"].as<unsigned>();
    if (n < 1 || n > max_lanes) {
      message = fmt::format("--lcores {} is out of range: give 1..{} (lanes per direction)", n, max_lanes);
      return ParseOutcome::error;
    }
    if (n > 1 && o.ports != 0) {
      message = "--lcores is for the two-port form: the switch (--ports) runs on one lcore";
      return ParseOutcome::error;
    }
    o.lanes = static_cast<std::uint16_t>(n);
  }
  if (vm.count("json")) o.json_path = vm["json"].as<std::string>();
  out = std::move(o);
  return ParseOutcome::run;
}

namespace {

bool parse_two_ports(const po::variables_map& vm, FabricOptions& o, std::string& message) {
  if (!vm.count("port-a") || !vm.count("port-b")) {
    message = fmt::format("--{} is required: name both ports by their EAL device names, e.g. --port-a net_pcap0 "
                          "--port-b net_pcap1 -- --vdev net_pcap0,rx_pcap=in.pcap --vdev net_pcap1,tx_pcap=out.pcap",
                          vm.count("port-a") ? "port-b" : "port-a");
    return false;
  }
  o.port_a = vm["port-a"].as<std::string>();
  o.port_b = vm["port-b"].as<std::string>();
  if (o.port_a == o.port_b) {
    message = fmt::format("--port-a and --port-b are both '{}': give two different ports", o.port_a);
    return false;
  }
  if (!parse_spec(vm, "both", o.a_to_b, message)) return false;
  if (vm.count("both")) {
    o.b_to_a = o.a_to_b;
    o.b_to_a.seed = o.a_to_b.seed + 1;  // the same impairments, drawn independently
  }
  if (!parse_spec(vm, "a-to-b", o.a_to_b, message) || !parse_spec(vm, "b-to-a", o.b_to_a, message)) return false;
  return true;
}

bool parse_switch(const po::variables_map& vm, FabricOptions& o, std::string& message) {
  for (const char* two : {"port-a", "port-b", "a-to-b", "b-to-a", "both"})
    if (vm.count(two)) {
      message = fmt::format("--{} is for the two-port form: with --ports give --port NAME per port and --out / "
                            "--out-port I=SPEC", two);
      return false;
    }
  const unsigned n = vm["ports"].as<unsigned>();
  if (n < 2 || n > max_switch_ports) {
    message = fmt::format("--ports {} is out of range: give 2..{}", n, max_switch_ports);
    return false;
  }
  o.ports = static_cast<std::uint16_t>(n);
  if (vm.count("port")) o.port_names = vm["port"].as<std::vector<std::string>>();
  if (o.port_names.size() != n) {
    message = fmt::format("--ports {} needs {} --port NAME (one per port, port 0 first); {} given", n, n,
                          o.port_names.size());
    return false;
  }
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = i + 1; k < n; ++k)
      if (o.port_names[i] == o.port_names[k]) {
        message = fmt::format("--port '{}' is ports {} and {}: give {} different ports", o.port_names[i], i, k, n);
        return false;
      }
  fabric::FabricConfig all{};
  if (!parse_spec(vm, "out", all, message)) return false;
  o.out.assign(n, all);
  for (std::uint16_t i = 0; i < n; ++i) o.out[i].seed = all.seed + i;  // the same impairments, drawn independently
  if (vm.count("out-port"))
    for (const std::string& entry : vm["out-port"].as<std::vector<std::string>>()) {
      const std::size_t eq = entry.find('=');
      unsigned port = 0;
      const auto [end, ec] = std::from_chars(entry.data(), entry.data() + (eq == std::string::npos ? 0 : eq), port);
      if (eq == std::string::npos || eq == 0 || ec != std::errc{} || end != entry.data() + eq || port >= n) {
        message = fmt::format("--out-port '{}': give I=SPEC with I one of the ports 0..{}, e.g. --out-port "
                              "\"{}=rate 2gbit limit 200kb\"", entry, n - 1, n - 1);
        return false;
      }
      const fabric::FabricSpecResult r = fabric::parse_fabric_spec(entry.substr(eq + 1));
      if (!r.ok()) {
        message = fmt::format("--out-port {}: {}", port, r.error);
        return false;
      }
      o.out[port] = r.config;
    }
  o.table = fabric::ForwardingTable(o.ports);
  if (vm.count("route"))
    for (const std::string& entry : vm["route"].as<std::vector<std::string>>())
      if (!o.table.add(entry, message)) {
        message = "--route: " + message;
        return false;
      }
  if (vm.count("routes")) {
    const std::string path = vm["routes"].as<std::string>();
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      message = fmt::format("--routes: cannot read '{}': give a readable file of ADDRESS=PORT lines", path);
      return false;
    }
    if (!o.table.add_lines(text.str(), path, message)) {
      message = "--routes: " + message;
      return false;
    }
  }
  if (o.table.size() == 0) {
    message = "--ports: no routes, so every frame would be dropped: give --route ADDRESS=PORT per host (or --routes "
              "FILE)";
    return false;
  }
  return true;
}

}  // namespace

fabric::FabricConfig lane_config(const fabric::FabricConfig& whole, std::uint16_t lanes, std::uint16_t lane) {
  fabric::FabricConfig c = whole;
  if (lanes <= 1) return c;
  // A share that is not 0 stays at least 1 (0 means unlimited or off).
  const auto share = [lanes](std::uint64_t v) { return v == 0 ? 0 : std::max<std::uint64_t>(1, v / lanes); };
  c.rate_bps = share(whole.rate_bps);
  c.limit_bytes = share(whole.limit_bytes);
  c.ecn.min_bytes = share(whole.ecn.min_bytes);
  c.ecn.max_bytes = share(whole.ecn.max_bytes);
  c.seed = whole.seed + std::uint64_t{lane} * 0x9e3779b97f4a7c15;  // apart from --both's seed + 1
  return c;
}

std::vector<std::string> eal_command_line(const std::vector<std::string>& user_args, std::uint16_t lanes,
                                          unsigned cpus) {
  const auto user_gives = [&](std::initializer_list<std::string_view> options) {
    return std::any_of(user_args.begin(), user_args.end(),
                       [&](const std::string& a) { return starts_with_any(a, options); });
  };
  std::vector<std::string> args = {"metaroce-fabric"};
  if (!user_gives({"-l", "-c", "--lcores"})) {
    const unsigned wanted = 2u * lanes;
    cpus = std::max(1u, cpus);
    if (lanes <= 1) args.insert(args.end(), {"-l", "0"});
    else if (wanted <= cpus) args.insert(args.end(), {"-l", fmt::format("0-{}", wanted - 1)});
    else args.insert(args.end(), {"--lcores", fmt::format("(0-{})@(0-{})", wanted - 1, cpus - 1)});
  }
  if (!user_gives({"-m", "--socket-mem", "--no-huge", "--in-memory", "--huge-dir"}))
    args.insert(args.end(), {"--no-huge", "-m", "512"});
  if (!user_gives({"--in-memory"})) args.emplace_back("--no-shconf");
  if (!user_gives({"-a", "--allow", "-b", "--block", "--no-pci"})) args.emplace_back("--no-pci");
  if (!user_gives({"--file-prefix"})) args.insert(args.end(), {"--file-prefix", "metaroce-fabric"});
  if (!user_gives({"--log-level"})) args.insert(args.end(), {"--log-level", "error"});
  args.insert(args.end(), user_args.begin(), user_args.end());
  return args;
}

}  // namespace metaroce::fabric_app
