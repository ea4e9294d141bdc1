#include "metaroce-sink/sink_options.hpp"

#include <fmt/format.h>

#include "common/port_options.hpp"

namespace po = boost::program_options;

namespace metaroce::apps::sink {

namespace {

// Connections open at once (from any number of generators); more are
// refused, as is one that would pass --memory-mb.
constexpr std::uint32_t max_sink_connections = 16384;

po::options_description describe() {
  po::options_description d("Options (EAL arguments go after `--`)");
  d.add_options()("help,h", "print this help and exit");
  add_port_options(d);
  d.add_options()
      ("runs", po::value<std::uint32_t>(), "exit once this many metaroce-gen runs closed all their connections "
                                           "(default 1; 0: serve until SIGINT/SIGTERM)")
      ("duration", po::value<double>(), "exit after this many seconds whatever happens (default: no limit); "
                                        "connections still open then count as failures")
      ("max-connection-memory", po::value<std::uint64_t>(),
       "bytes one connection request may make the sink allocate and register, 65536..1099511627776 (default "
       "1073741824, 1 GiB); a request for more is refused, and the generator fails saying so")
      ("memory-mb", po::value<std::uint64_t>(), "refuse a connection whose write slots and receive buffers "
                                                "would take the total beyond this (default 4096)")
      ("mtu", po::value<std::uint32_t>(), "--port: the largest payload per packet a generator may use, "
                                          "256..9000 (default 9000)")
      ("json", po::value<std::string>(), "write the summary as JSON to FILE")
      ("quiet", "no progress line each second");
  add_rocev2_options(d);
  return d;
}

}  // namespace

ParseOutcome parse_sink_options(int argc, const char* const* argv, SinkOptions& out, std::string& message) {
  po::variables_map vm;
  std::vector<std::string> eal_args;
  const ParseOutcome parsed = parse_command_line(
      argc, argv, describe(),
      "Usage: metaroce-sink --local-ip ADDR (--preset FILE [--iface NAME] | --port NAME)\n"
      "                     [OPTIONS] [-- EAL-ARGS]\n"
      "Accepts metaroce-gen's connections (up to 16384 at once), keeps receives posted and\n"
      "checks every byte of every message against its pattern; per connection: goodput,\n"
      "completion latency\n"
      "(the generator's post time to the completion here: both on one host), wrong bytes\n"
      "and the first bad offset, missing and duplicated messages. A progress line each\n"
      "second; with --json the summary. Exit status: 0 every message of every connection\n"
      "arrived once with every byte right, 1 anything else, 2 bad options.\n",
      vm, eal_args, message);
  if (parsed != ParseOutcome::run) return parsed;
  SinkOptions o;
  o.port.program = "metaroce-sink";
  o.port.name = "sink";
  o.port.mtu = 9000;
  o.port.max_connections = max_sink_connections;
  if (!read_port_options(vm, std::move(eal_args), o.port, message) || !read_lcores(vm, o.lcores, message))
    return ParseOutcome::error;
  if (!read_in_range<std::uint32_t>(vm, "runs", 0, 1'000'000, o.runs, message) ||
      !read_in_range<double>(vm, "duration", 0.001, 31'536'000.0, o.duration_s, message) ||
      !read_in_range<std::uint64_t>(vm, "memory-mb", 1, std::uint64_t{1} << 24, o.memory_mb, message) ||
      !read_in_range<std::uint64_t>(vm, "max-connection-memory", 65536, std::uint64_t{1} << 40,
                                    o.max_connection_memory, message) ||
      !read_in_range<std::uint32_t>(vm, "mtu", 256, 9000, o.port.mtu, message) ||
      !read_rocev2_options(vm, true, o.rocev2, message))  // for the generators' rocev2 connections
    return ParseOutcome::error;
  o.port.pkey = o.rocev2.pkey;
  o.port.ibta_cm = o.rocev2.ibta_cm;
  if (vm.count("json")) o.json_path = vm["json"].as<std::string>();
  o.quiet = vm.count("quiet") != 0;
  out = std::move(o);
  return ParseOutcome::run;
}

}  // namespace metaroce::apps::sink
