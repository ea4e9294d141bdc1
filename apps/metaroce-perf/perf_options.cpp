#include "metaroce-perf/perf_options.hpp"


#include <utility>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "common/byte_size.hpp"
#include "common/plane_ports.hpp"
#include "common/secure_options.hpp"
#include "common/preset_iface.hpp"
#include "common/receive_capacity.hpp"
#include "fabric/spec.hpp"
#include "secure/keys.hpp"
#include "stack/address.hpp"
#include "wire/ip_address.hpp"

namespace po = boost::program_options;

namespace metaroce::perf {

namespace {

po::options_description describe() {
  po::options_description d("Options (EAL arguments go after `--`)");
  d.add_options()
      ("help,h", "print this help and exit")
      ("loopback", "both ends in this process on two lcores over a net_ring pair (the default when no port is given)")
      ("server", "the receiving end on a real port: waits for a client, answers its connection requests, "
                 "verifies what arrives (with --verify on the client), exits after the client's last size")
      ("client", po::value<std::string>(), "the sending end: connect to the server at ADDR (IPv4 or IPv6) over a "
                                           "real port")
      ("preset", po::value<std::vector<std::string>>()->composing(),
       "drivers-config FILE for the port and EAL (drivers-config/*.ini); repeated: one per plane, plane 0's first "
       "(a connection spreads over every plane both ends have)")
      ("iface", po::value<std::vector<std::string>>()->composing(),
       "the Linux interface of a net_af_packet or net_tap preset (its iface=); one per --preset when repeated")
      ("port", po::value<std::vector<std::string>>()->composing(),
       "instead of --preset: the EAL device NAME to use, created by EAL arguments after `--` (e.g. --vdev "
       "net_af_packet0,iface=veth0); what they leave out gets a preset's defaults: -l 0, --no-pci, --no-huge -m "
       "512 --no-shconf (--in-memory -m 512 when hugepages are free); repeated: one per plane, plane 0's first")
      ("local-ip", po::value<std::vector<std::string>>()->composing(),
       "this end's address, IPv4 (A.B.C.D) or IPv6 (--server, --client): the port answers ARP or neighbour "
       "solicitations for it; with several planes once (all of them) or once per plane")
      ("gateway", po::value<std::string>(), "--client: the router towards the server when the server is not on "
                                            "this link (its MAC is asked for instead of the server's)")
      ("peer-mac", po::value<std::string>(), "--client: MAC of the next hop towards the server (the server "
                                             "itself, or the router between); default: asked for by ARP (IPv4) "
                                             "or neighbour solicitation (IPv6)")
      ("cm-timeout", po::value<double>(), "--client: seconds to repeat connection requests before giving up (default 3)")
      ("cc", po::value<std::string>(), "congestion control: metaroce | dcqcn | fixed (default: none, "
                                       "--path-window bounds each path)")
      ("size,s", po::value<std::string>(), "message size in bytes, 1..1G: 65536, 64k, 1M (k = 1024; default 65536)")
      ("all-sizes,a", "every power of two from 2 B to 8 MiB")
      ("iters,n", po::value<std::uint64_t>(), "messages per size (default 5000)")
      ("duration,D", po::value<double>(), "seconds per size instead of a message count")
      ("tx-depth,t", po::value<std::uint32_t>(), "messages in flight per connection, 1..4096 (default 128; as "
                                                 "perftest's -t, per QP: -q N has up to N times as many in "
                                                 "flight in all)")
      ("paths", po::value<std::uint16_t>(), "paths (UDP source ports) of the connection, 1..64 (default 4)")
      ("streams", po::value<std::uint16_t>(), "ordered streams, 1..1024 (default 1; metaroce mode only)")
      ("qps,q", po::value<std::uint32_t>(), "connections (QP pairs), 1..16384 (default 1); -n counts "
                                            "the messages of them all. --loopback posts as perftest does, a "
                                            "burst of up to -t to each connection in turn; --client one "
                                            "message to each in turn. --client opens them "
                                            "to the server for each size (a REQ/REP/RTU each, all at once) and "
                                            "closes each with its summary")
      ("max-connections", po::value<std::uint32_t>(), "--server: connections open at once, 1..16384 (default 256); "
                                                      "more are refused, and the client fails saying so")
      ("max-connection-memory", po::value<std::uint64_t>(),
       "--server: bytes one connection request may make the server allocate and register (its message slots "
       "and receives), 65536..1099511627776 (default 268435456, 256 MiB); a request for more is refused, and "
       "the client fails saying so")
      ("psn-window", po::value<std::uint32_t>(), "each connection's PSN window, a power of two 256..16384 "
                                                 "(default 16384): packets sent and not yet acknowledged, and "
                                                 "most of a connection's memory; smaller for many connections")
      ("path-window", po::value<std::uint32_t>(), "packets in flight per path, 1..256 (default 32): the window "
                                                  "without --cc, and a ceiling with it; metaroce mode only")
      ("mode", po::value<std::string>(), "metaroce | rocev2 (default metaroce)")
      ("mtu", po::value<std::uint32_t>(), "payload bytes per packet, 256..9000 (default 4096); --mode rocev2: "
                                          "an IB MTU, 256, 512, 1024, 2048 or 4096")
      ("op", po::value<std::string>(), "write | write-imm | send | read | fetch-add | cmp-swap (default write); "
                                       "the atomics work on 8 bytes (-s 8); with --server/--client the server "
                                       "offers the region they read or update")
      ("test", po::value<std::string>(), "bw | lat (default bw). lat: one message in flight per connection "
                                         "(tx depth 1), each message's post-to-completion time, "
                                         "min/p50/p99/max")
      ("verify", "fill every message with its own pattern and check every byte on completion; "
                 "exit 1 on a wrong byte or a missing message. Each message in flight gets its own buffer "
                 "slot; without it messages share one buffer (a 4 KiB page cycle when smaller), as in perftest")
      ("report-gbits", "bandwidth in Gb/s (default MB/s, 1 MB = 2^20 bytes)")
      ("json", po::value<std::string>(), "write the results and counters as JSON to FILE")
      ("fabric", po::value<std::string>(), "an inline fabric in each direction, e.g. \"loss 1% delay 10us\" "
                                           "(grammar: doc/FABRIC.md); with --planes, on every plane")
      ("fabric-plane", po::value<std::vector<std::string>>()->multitoken()->composing(),
       "K SPEC: --loopback --planes: plane K (0-based) gets inline fabric SPEC each way instead of --fabric's, "
       "e.g. --fabric-plane 1 \"blackhole at 500ms for 1s\" (times from the start of each size); repeatable")
      ("capture", po::value<std::string>(), "write every frame, both ways, to FILE.pcap")
      ("zero-copy-threshold", po::value<std::uint32_t>(),
       "payload bytes from which the payload is attached in place instead of copied (default: always copy, "
       "the faster over net_ring)")
      ("lcores", po::value<std::uint16_t>(), "lcores per side, 1..16 (default 1); connections spread evenly over "
                                              "them, each lcore owning its own queue, connections and share of -n "
                                              "(-q at least N). --loopback: not with --fabric, --capture or --raw. "
                                              "--server/--client: a thread per lcore, each driving queue k of the "
                                              "port with its own connection manager (give both ends the same N; "
                                              "where the PMD does not pair queues, lanes hand frames on); "
                                              "not with --by-hand, --oob, --test lat or planes")
      ("planes", po::value<std::uint16_t>(), "--loopback: planes, 1..8 (default 1): a net_ring pair per plane, each "
                                              "host with a port on every one, connections spread over all "
                                              "(--paths at least N; not with --lcores or --raw)")
      ("software-handoff", "--loopback --lcores N: the pair delivers every frame to queue 0, as a PMD that cannot "
                           "steer by QPN, and lcore 0 hands each other lcore's frames to it (rx_handed_off)")
      ("idle-sleep-us", po::value<std::uint32_t>(), "sleep this long when a poll turn found nothing (default 0: busy poll)")
      ("receive-capacity", po::value<std::string>(), apps::receive_capacity_help)
      ("raw", "--loopback without the transport, like perftest's raw_ethernet_bw: frames the size of each "
              "size's WRITE packet (headers, payload, ICRC) go over the same net_ring pair and the other lcore "
              "reads every byte; the loopback's ceiling on this machine. --verify checks order and bytes");
  apps::add_secure_options(d);
  apps::add_rocev2_options(d);
  d.add_options()
      ("peer-qpn", po::value<std::string>(), "--server/--client --mode rocev2 set up by hand, without the "
                                             "connection manager: the peer's QPN (0x2..0xffffff; hex with 0x)")
      ("peer-psn", po::value<std::string>(), "with --peer-qpn: the peer's first PSN (24 bits)")
      ("qpn", po::value<std::string>(), "with --peer-qpn: this end's QPN (default: drawn at random; printed)")
      ("psn", po::value<std::string>(), "with --peer-qpn: this end's first PSN (default: drawn at random; printed)")
      ("remote-addr", po::value<std::string>(), "--client with --peer-qpn: the server's buffer address (its VAddr)")
      ("rkey", po::value<std::string>(), "--client with --peer-qpn: the server's buffer R_Key (its RKey)")
      ("peer-ip", po::value<std::string>(), "--server with --peer-qpn: the client's address")
      ("oob-port", po::value<unsigned>(), "--server --mode rocev2: take the client's QPN, PSN and GID by perftest's "
                                          "out-of-band TCP exchange on this port (instead of --peer-qpn ...), "
                                          "then answer with ours")
      ("oob", po::value<std::string>(), "--client --mode rocev2: the server's out-of-band exchange, ADDR:PORT "
                                        "(its --oob-port; a kernel address, not --client's)");
  return d;
}

// -q and --max-connections: "thousands of connections per host".
constexpr std::uint32_t max_qps = 16384;
// --lcores: 2 x 16 lcore threads fit EAL's 128.
constexpr std::uint16_t max_lcores = 16;

// --KEY as a number up to `max`, decimal or 0x-hex; false with one line.
bool read_number(const po::variables_map& vm, const char* key, std::uint64_t max, std::uint64_t& out,
                 std::string& message) {
  const std::string text = vm[key].as<std::string>();
  std::size_t used = 0;
  std::uint64_t v = 0;
  try {
    v = std::stoull(text, &used, 0);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != text.size() || text[0] == '-' || v > max) {
    message = fmt::format("--{} '{}' is not a number up to {:#x}: give it in decimal or as 0x hex", key, text, max);
    return false;
  }
  out = v;
  return true;
}

// The options of a connection set up by hand, and what goes with them.
bool read_by_hand(const po::variables_map& vm, PerfOptions& o, std::string& message) {
  const char* keys[] = {"peer-qpn", "peer-psn", "qpn", "psn", "remote-addr", "rkey", "peer-ip", "oob", "oob-port"};
  bool any = false;
  for (const char* k : keys) any |= vm.count(k) != 0;
  if (!any) return true;
  const bool oob = vm.count("oob") || vm.count("oob-port");
  if (oob) {
    for (const char* k : {"peer-qpn", "peer-psn", "remote-addr", "rkey", "peer-ip"}) {
      if (!vm.count(k)) continue;
      message = fmt::format("--{} comes from the out-of-band exchange: drop it, or --oob/--oob-port", k);
      return false;
    }
    if (vm.count("oob") && o.role != PerfRole::client) {
      message = "--oob is for --client: the server listens with --oob-port PORT";
      return false;
    }
    if (vm.count("oob-port") && o.role != PerfRole::server) {
      message = "--oob-port is for --server: the client connects with --oob ADDR:PORT";
      return false;
    }
  }
  if (!oob && (!vm.count("peer-qpn") || !vm.count("peer-psn"))) {
    message = "a connection set up by hand needs the peer's --peer-qpn and --peer-psn (it prints its own at start)";
    return false;
  }
  if (o.role == PerfRole::loopback || o.mode != transport::Mode::rocev2) {
    message = "--peer-qpn, --oob and the other set-up options are for --server/--client --mode rocev2";
    return false;
  }
  std::uint64_t v = 0;
  if (oob) {
    if (vm.count("oob")) o.oob_address = vm["oob"].as<std::string>();
    if (vm.count("oob-port")) {
      const unsigned port = vm["oob-port"].as<unsigned>();
      if (port < 1 || port > 65535) {
        message = fmt::format("--oob-port {} is out of range: give 1..65535 (perftest's default is 18515)", port);
        return false;
      }
      o.oob_port = static_cast<std::uint16_t>(port);
    }
  } else {
    if (!read_number(vm, "peer-qpn", wire::qpn_mask, v, message)) return false;
    o.peer_qpn = static_cast<std::uint32_t>(v);
    if (!read_number(vm, "peer-psn", wire::psn_mask, v, message)) return false;
    o.peer_psn = static_cast<std::uint32_t>(v);
  }
  if (!oob && o.peer_qpn < 2) {
    message = fmt::format("--peer-qpn {:#x} is a special QP: give 0x2..0xffffff", o.peer_qpn);
    return false;
  }
  if (vm.count("qpn")) {
    if (!read_number(vm, "qpn", wire::qpn_mask, v, message)) return false;
    o.qpn = static_cast<std::uint32_t>(v);
    if (o.qpn < 2) {
      message = fmt::format("--qpn {:#x} is a special QP: give 0x2..0xffffff", o.qpn);
      return false;
    }
  }
  if (vm.count("psn")) {
    if (!read_number(vm, "psn", wire::psn_mask, v, message)) return false;
    o.psn = static_cast<std::uint32_t>(v);
    o.psn_given = true;
  }
  if (oob && o.sizes.size() != 1) {
    message = "perftest's exchange here runs one size: drop --all-sizes (give -s)";
    return false;
  }
  if (!oob && (o.sizes.size() != 1 || vm.count("qps"))) {
    message = "a connection set up by hand is one connection of one size: drop --all-sizes and --qps "
              "(perftest's exchange, --oob/--oob-port, takes --qps)";
    return false;
  }
  if (o.role == PerfRole::client) {
    if (vm.count("peer-ip")) {
      message = "--peer-ip is for --server: the client's peer is its --client ADDR";
      return false;
    }
    if (o.op != PerfOp::write && o.op != PerfOp::write_imm && o.op != PerfOp::send) {
      message = "a connection set up by hand carries --op write, write-imm or send";
      return false;
    }
    if (!oob && o.op != PerfOp::send && (!vm.count("remote-addr") || !vm.count("rkey"))) {
      message = fmt::format("--op {} set up by hand needs the server's buffer: give --remote-addr and --rkey "
                            "(the VAddr and RKey it printed)", to_string(o.op));
      return false;
    }
    if (vm.count("remote-addr")) {
      if (!read_number(vm, "remote-addr", ~std::uint64_t{0}, o.remote_addr, message)) return false;
    }
    if (vm.count("rkey")) {
      if (!read_number(vm, "rkey", 0xffff'ffffu, v, message)) return false;
      o.rkey = static_cast<std::uint32_t>(v);
    }
  } else {
    if (vm.count("remote-addr") || vm.count("rkey")) {
      message = "--remote-addr and --rkey are for --client: the server prints its own";
      return false;
    }
    if (!oob && !vm.count("peer-ip")) {
      message = "--server set up by hand needs the client's address: give --peer-ip ADDR";
      return false;
    }
    if (vm.count("duration")) {
      message = "--server set up by hand stops after -n messages: give -n as the client's, not --duration";
      return false;
    }
    if (!oob && o.op != PerfOp::write_imm && o.op != PerfOp::send) {
      message = "--server set up by hand counts what completes there: give --op write-imm or send (as the client)";
      return false;
    }
    if (oob && o.op != PerfOp::write && o.op != PerfOp::write_imm && o.op != PerfOp::send) {
      message = "--oob-port speaks ib_write_bw's or ib_send_bw's exchange: give --op write, write-imm or send "
                "(as the client)";
      return false;
    }
    if (oob && o.op == PerfOp::write && vm.count("verify")) {
      message = "--verify at an --oob-port server needs messages that complete there: give --op write-imm or send, "
                "or drop --verify (a plain WRITE is counted by the client's report)";
      return false;
    }
    if (vm.count("peer-ip")) o.peer_ip = vm["peer-ip"].as<std::string>();
  }
  o.by_hand = true;
  return true;
}

template <class T>
bool in_range(const po::variables_map& vm, const char* key, T min, T max, T& out, std::string& message) {
  if (!vm.count(key)) return true;
  const T v = vm[key].as<T>();
  if (v < min || v > max) {
    message = fmt::format("--{} {} is out of range: give {}..{}", key, v, min, max);
    return false;
  }
  out = v;
  return true;
}

}  // namespace

ParseOutcome parse_perf_options(int argc, const char* const* argv, PerfOptions& out, std::string& message) {
  PerfOptions o;
  po::variables_map vm;
  const ParseOutcome parsed = apps::parse_command_line(
      argc, argv, describe(),
      "Usage: metaroce-perf [OPTIONS] [-- EAL-ARGS]\n"
      "The ib_write_bw of metaroce: messages from one end to the other, verified on request,\n"
      "with a perftest-style table at the end. --loopback (the default) runs both ends in this\n"
      "process on two lcores over a net_ring pair; without EAL arguments it starts EAL with\n"
      "-l 0-1 --no-huge -m 512 --no-shconf --no-pci (or hugepages when some are free).\n"
      "--server and --client wait up to 2 s for the port's link, then fail naming the fix.\n"
      "Exit status: 0 success, 1 a run failed or --verify found a wrong byte or a missing\n"
      "message, 2 bad options.\n",
      vm, o.eal_args, message);
  if (parsed != ParseOutcome::run) return parsed;
  if (vm.count("size") && vm.count("all-sizes")) {
    message = "--size and --all-sizes exclude each other: give one";
    return ParseOutcome::error;
  }
  if (vm.count("iters") && vm.count("duration")) {
    message = "--iters and --duration exclude each other: give one";
    return ParseOutcome::error;
  }
  if (vm.count("size")) {
    const std::string text = vm["size"].as<std::string>();
    std::uint64_t s = 0;
    if (!apps::parse_byte_size(text, s)) {
      message = fmt::format("--size '{}' is not a size: give {}", text, apps::byte_size_forms);
      return ParseOutcome::error;
    }
    if (s < 1 || s > (std::uint64_t{1} << 30)) {
      message = fmt::format("--size {} is out of range: give 1..1073741824 bytes (1G)", text);
      return ParseOutcome::error;
    }
    o.sizes = {s};
  }
  if (vm.count("all-sizes")) {
    o.sizes.clear();
    for (std::uint64_t s = 2; s <= (std::uint64_t{8} << 20); s *= 2) o.sizes.push_back(s);
  }
  if (!in_range<std::uint64_t>(vm, "iters", 1, std::uint64_t{1} << 40, o.iterations, message) ||
      !in_range<std::uint32_t>(vm, "tx-depth", 1, 4096, o.tx_depth, message) ||
      !in_range<std::uint16_t>(vm, "paths", 1, 64, o.paths, message) ||
      !in_range<std::uint16_t>(vm, "streams", 1, 1024, o.streams, message) ||
      !in_range<std::uint32_t>(vm, "qps", 1, max_qps, o.qps, message) ||
      !in_range<std::uint32_t>(vm, "max-connections", 1, max_qps, o.max_connections, message) ||
      !in_range<std::uint64_t>(vm, "max-connection-memory", 65536, std::uint64_t{1} << 40, o.max_connection_memory,
                               message) ||
      !in_range<std::uint32_t>(vm, "psn-window", 256, 16384, o.psn_window, message) ||
      !in_range<std::uint32_t>(vm, "path-window", 1, 256, o.path_window, message) ||
      !in_range<std::uint32_t>(vm, "mtu", 256, 9000, o.mtu, message) ||
      !in_range<std::uint32_t>(vm, "zero-copy-threshold", 1, 65535, o.zero_copy_threshold, message) ||
      !in_range<std::uint32_t>(vm, "idle-sleep-us", 0, 1'000'000, o.idle_sleep_us, message) ||
      !in_range<std::uint16_t>(vm, "lcores", 1, max_lcores, o.lcores, message) ||
      !in_range<std::uint16_t>(vm, "planes", 1, 8, o.planes, message) ||
      !apps::read_receive_capacity(vm, o.receive_capacity_bps, message))
    return ParseOutcome::error;
  if ((o.psn_window & (o.psn_window - 1)) != 0) {
    message = fmt::format("--psn-window {} is not a power of two: give 256, 512, ... 16384", o.psn_window);
    return ParseOutcome::error;
  }
  if (vm.count("duration")) {
    o.duration_s = vm["duration"].as<double>();
    if (!(o.duration_s > 0.0 && o.duration_s <= 86400.0)) {
      message = fmt::format("--duration {} is out of range: give seconds in (0, 86400]", o.duration_s);
      return ParseOutcome::error;
    }
  }
  if (vm.count("mode") && !transport::mode_from_string(vm["mode"].as<std::string>(), o.mode)) {
    message = fmt::format("--mode '{}' is not a mode: give metaroce or rocev2", vm["mode"].as<std::string>());
    return ParseOutcome::error;
  }
  // An RC queue pair has one path and one receive queue, consumed in
  // posting order: there are no streams to complete independently (for N
  // ordered queues, give -q N connections, as perftest does).
  if (o.mode == transport::Mode::rocev2) {
    if (vm.count("paths") && o.paths != 1) {
      message = "--mode rocev2 has exactly one path: drop --paths or give --paths 1";
      return ParseOutcome::error;
    }
    if (vm.count("streams") && o.streams != 1) {
      message = "--mode rocev2 has one ordered receive queue per connection: drop --streams or give --streams 1 "
                "(for N queues, give -q N)";
      return ParseOutcome::error;
    }
    o.paths = 1;
    o.streams = 1;
  }
  if (!apps::read_rocev2_options(vm, o.mode == transport::Mode::rocev2, o.rocev2, message) ||
      !apps::check_rocev2_mtu(o.mode == transport::Mode::rocev2, o.mtu, message))
    return ParseOutcome::error;
  if (vm.count("op")) {
    const std::string op = vm["op"].as<std::string>();
    bool known = false;
    for (const PerfOp candidate : {PerfOp::write, PerfOp::write_imm, PerfOp::send, PerfOp::read, PerfOp::fetch_add,
                                   PerfOp::cmp_swap}) {
      if (op != to_string(candidate)) continue;
      o.op = candidate;
      known = true;
    }
    if (!known) {
      message = fmt::format(
          "--op '{}' is not an operation: give write, write-imm, send, read, fetch-add or cmp-swap", op);
      return ParseOutcome::error;
    }
    if (is_atomic(o.op)) {
      if (vm.count("all-sizes") || (vm.count("size") && o.sizes != std::vector<std::uint64_t>{8})) {
        message = fmt::format("--op {} works on 8 bytes: drop --size and --all-sizes, or give -s 8", op);
        return ParseOutcome::error;
      }
      o.sizes = {8};
    }
  }
  if (vm.count("test")) {
    const std::string t = vm["test"].as<std::string>();
    if (t == "bw") o.test = PerfTest::bw;
    else if (t == "lat") o.test = PerfTest::lat;
    else {
      message = fmt::format("--test '{}' is not a test: give bw or lat", t);
      return ParseOutcome::error;
    }
  }
  if (o.test == PerfTest::lat) {
    if (vm.count("tx-depth") && o.tx_depth != 1) {
      message = "--test lat has one message in flight: drop --tx-depth or give --tx-depth 1";
      return ParseOutcome::error;
    }
    o.tx_depth = 1;
  }
  if (vm.count("fabric")) {
    o.fabric_spec = vm["fabric"].as<std::string>();
    const auto spec = fabric::parse_fabric_spec(o.fabric_spec);
    if (!spec.ok()) {
      message = fmt::format("--fabric: {}", spec.error);
      return ParseOutcome::error;
    }
  }
  if (vm.count("fabric-plane")) {
    const auto& words = vm["fabric-plane"].as<std::vector<std::string>>();
    if (words.size() % 2 != 0) {
      message = "--fabric-plane takes a plane and a spec: give --fabric-plane K SPEC (the spec quoted), e.g. "
                "--fabric-plane 1 \"blackhole at 500ms for 1s\"";
      return ParseOutcome::error;
    }
    for (std::size_t i = 0; i < words.size(); i += 2) {
      std::uint16_t plane = 0;
      const std::string& k = words[i];
      if (k.empty() || k.size() > 1 || k[0] < '0' || k[0] > '7') {
        message = fmt::format("--fabric-plane '{}' is not a plane: give K SPEC with K 0..7 (below --planes), the "
                              "spec quoted", k);
        return ParseOutcome::error;
      }
      plane = static_cast<std::uint16_t>(k[0] - '0');
      const auto spec = fabric::parse_fabric_spec(words[i + 1]);
      if (!spec.ok()) {
        message = fmt::format("--fabric-plane {}: {}", plane, spec.error);
        return ParseOutcome::error;
      }
      o.fabric_plane_specs.emplace_back(plane, words[i + 1]);
    }
  }
  const int roles = int(vm.count("loopback")) + int(vm.count("server")) + int(vm.count("client"));
  if (roles > 1) {
    message = "--loopback, --server and --client exclude each other: give one";
    return ParseOutcome::error;
  }
  if (vm.count("server")) o.role = PerfRole::server;
  if (vm.count("client")) {
    o.role = PerfRole::client;
    o.server_address = vm["client"].as<std::string>();
  }
  o.loopback = o.role == PerfRole::loopback;
  if (!apps::read_plane_ports(vm, o.preset_path, o.iface, o.port_name, o.local_ip, o.more_planes, message))
    return ParseOutcome::error;
  if (vm.count("peer-mac")) o.peer_mac = vm["peer-mac"].as<std::string>();
  if (vm.count("gateway")) o.gateway = vm["gateway"].as<std::string>();
  if (vm.count("cc")) {
    o.cc = vm["cc"].as<std::string>();
    if (o.cc != "none" && o.cc != "metaroce" && o.cc != "dcqcn" && o.cc != "fixed") {
      message = fmt::format("--cc '{}' is not a congestion control: give metaroce, dcqcn, fixed or none", o.cc);
      return ParseOutcome::error;
    }
  }
  if (vm.count("cm-timeout")) {
    o.cm_timeout_s = vm["cm-timeout"].as<double>();
    if (!(o.cm_timeout_s > 0.0 && o.cm_timeout_s <= 3600.0)) {
      message = fmt::format("--cm-timeout {} is out of range: give seconds in (0, 3600]", o.cm_timeout_s);
      return ParseOutcome::error;
    }
  }
  if (o.role != PerfRole::loopback) {
    const char* role = o.role == PerfRole::server ? "--server" : "--client";
    if (o.preset_path.empty() == o.port_name.empty()) {
      message = fmt::format("{} needs a port: give --preset FILE (drivers-config/*.ini) or --port NAME with its "
                            "EAL device after `--`", role);
      return ParseOutcome::error;
    }
    if (!o.preset_path.empty() && !apps::check_preset_iface(o.preset_path, o.iface, message))
      return ParseOutcome::error;
    if (o.local_ip.empty()) {
      message = fmt::format("{} needs this end's address: give --local-ip ADDR (A.B.C.D, or IPv6)", role);
      return ParseOutcome::error;
    }
    wire::IpAddress local, peer;
    if (!wire::parse_ip(o.local_ip, local)) {
      message = fmt::format("--local-ip '{}' is not an IP address: give A.B.C.D, or an IPv6 address such as "
                            "fd00::1", o.local_ip);
      return ParseOutcome::error;
    }
    for (const auto& [option, text] : {std::pair<const char*, const std::string*>{"--client", &o.server_address},
                                       {"--gateway", &o.gateway}}) {
      if (text->empty()) continue;
      if (!wire::parse_ip(*text, peer)) {
        message = fmt::format("{} '{}' is not an IP address: give A.B.C.D, or an IPv6 address such as fd00::1",
                              option, *text);
        return ParseOutcome::error;
      }
      if (peer.version != local.version) {
        message = fmt::format("{} {} is IPv{} but --local-ip {} is IPv{}: give both of one family", option, *text,
                              peer.version, o.local_ip, local.version);
        return ParseOutcome::error;
      }
    }
    wire::MacAddress mac{};
    if (!o.peer_mac.empty() && !stack::parse_mac(o.peer_mac, mac)) {
      message = fmt::format("--peer-mac '{}' is not a MAC address: give xx:xx:xx:xx:xx:xx", o.peer_mac);
      return ParseOutcome::error;
    }
    if (o.role == PerfRole::server && !vm.count("peer-qpn") && !vm.count("oob-port") && (!o.peer_mac.empty() || !o.gateway.empty())) {
      message = "--peer-mac and --gateway are for --client: the server answers each client at the MAC its "
                "frames came from";
      return ParseOutcome::error;
    }
    if (o.role == PerfRole::server && vm.count("qps") && !vm.count("oob-port")) {
      message = "--qps is for the client (or --loopback): the server takes as many connections as the client "
                "opens, up to --max-connections (with --oob-port, perftest's -q: as many as its client's)";
      return ParseOutcome::error;
    }
    if (!o.fabric_spec.empty() || !o.fabric_plane_specs.empty()) {
      const char* option = o.fabric_spec.empty() ? "--fabric-plane" : "--fabric";
      message = fmt::format("{} is for --loopback only: impair the real link instead (e.g. tc or "
                            "metaroce-fabric), or drop {}", option, option);
      return ParseOutcome::error;
    }
  }
  if (o.role != PerfRole::server && vm.count("max-connections")) {
    message = "--max-connections is for --server: it bounds the connections the server keeps open at once";
    return ParseOutcome::error;
  }
  if (o.role != PerfRole::server && vm.count("max-connection-memory")) {
    message = "--max-connection-memory is for --server: it bounds the memory one connection request may commit";
    return ParseOutcome::error;
  }
  if (o.role == PerfRole::loopback && (!o.preset_path.empty() || !o.port_name.empty() || !o.local_ip.empty() ||
                                      !o.peer_mac.empty() || !o.gateway.empty() || !o.iface.empty())) {
    message = "--preset, --port, --iface, --local-ip, --gateway and --peer-mac are for --server/--client: "
              "--loopback makes its own net_ring pair";
    return ParseOutcome::error;
  }
  o.raw = vm.count("raw") != 0;
  o.software_handoff = vm.count("software-handoff") != 0;
  if (o.software_handoff && (o.role != PerfRole::loopback || o.lcores < 2 || o.raw || vm.count("fabric") ||
                             vm.count("fabric-plane") || vm.count("capture"))) {
    message = "--software-handoff is for --loopback --lcores 2 or more (without --fabric, --capture or --raw)";
    return ParseOutcome::error;
  }
  if (o.lcores > 1) {
    const char* clash = o.role != PerfRole::loopback ? nullptr  // checked below, once --by-hand is read
                        : vm.count("fabric")          ? "--fabric (the inline fabric forwards one queue)"
                        : vm.count("fabric-plane")    ? "--fabric-plane (the inline fabric forwards one queue)"
                        : vm.count("capture")         ? "--capture (the capture forwards one queue)"
                        : o.raw                       ? "--raw"
                                                      : nullptr;
    if (clash != nullptr) {
      message = fmt::format("--lcores {} is for --loopback with several queues: drop {}, or --lcores", o.lcores, clash);
      return ParseOutcome::error;
    }
    if (o.qps < o.lcores && o.role != PerfRole::server) {
      message = fmt::format("--lcores {} with -q {}: every lcore needs a connection: give -q {} or more", o.lcores,
                            o.qps, o.lcores);
      return ParseOutcome::error;
    }
  }
  if (o.planes > 1) {
    const char* clash = o.role != PerfRole::loopback ? "--server/--client (give a --preset or --port per plane there)"
                        : o.lcores > 1                ? "--lcores"
                        : o.raw                       ? "--raw"
                                                      : nullptr;
    if (clash != nullptr) {
      message = fmt::format("--planes {} is for --loopback over a net_ring pair per plane: drop {}, or --planes",
                            o.planes, clash);
      return ParseOutcome::error;
    }
    if (o.paths < o.planes) {
      message = fmt::format("--planes {} with --paths {}: every plane needs a path: give --paths {} or more", o.planes,
                            o.paths, o.planes);
      return ParseOutcome::error;
    }
  }
  for (const auto& [plane, spec] : o.fabric_plane_specs)
    if (plane >= o.planes) {
      message = fmt::format("--fabric-plane {}: the planes are 0..{} (--planes {}): give a plane below --planes, "
                            "or more --planes", plane, o.planes - 1, o.planes);
      return ParseOutcome::error;
    }
  if (o.raw) {
    const char* clash = o.role != PerfRole::loopback ? "--server/--client"
                        : vm.count("fabric")          ? "--fabric"
                        : vm.count("fabric-plane")    ? "--fabric-plane"
                        : vm.count("capture")         ? "--capture"
                        : vm.count("cc")              ? "--cc"
                        : vm.count("qps")             ? "--qps"
                        : vm.count("zero-copy-threshold") ? "--zero-copy-threshold"
                        : o.test != PerfTest::bw      ? "--test lat"
                        : o.op != PerfOp::write       ? "--op (other than write)"
                                                      : nullptr;
    if (clash != nullptr) {
      message = fmt::format("--raw sends bare frames between the loopback's two lcores, with no transport: drop {}",
                            clash);
      return ParseOutcome::error;
    }
  }
  if (!apps::read_secure_options(vm, o.key_file, o.auth_only, message, &o.psk)) return ParseOutcome::error;
  if (o.raw && !o.key_file.empty()) {
    message = "--raw sends bare frames with no transport: drop --secure";
    return ParseOutcome::error;
  }
  o.verify = vm.count("verify") != 0;
  if (!read_by_hand(vm, o, message)) return ParseOutcome::error;
  if (o.lcores > 1 && o.role != PerfRole::loopback) {
    // Lanes (metaroce::Endpoint::open_lanes): each lcore drives queue k of
    // one port with its own connection manager.
    const char* clash = o.by_hand                   ? "--by-hand/--oob (connections set up without the manager)"
                        : o.test == PerfTest::lat   ? "--test lat (one connection's round trips)"
                        : !o.more_planes.empty()    ? "a second plane (the lcores share one port)"
                                                    : nullptr;
    if (clash != nullptr) {
      message = fmt::format("--lcores {} with --{}: drop {}, or --lcores", o.lcores,
                            o.role == PerfRole::server ? "server" : "client", clash);
      return ParseOutcome::error;
    }
  }
  if (o.by_hand && o.role == PerfRole::server && !o.peer_ip.empty()) {
    wire::IpAddress peer, local;
    if (!wire::parse_ip(o.peer_ip, peer) || !wire::parse_ip(o.local_ip, local) || peer.version != local.version) {
      message = fmt::format("--peer-ip '{}' is not an IP address of --local-ip's family: give A.B.C.D, or IPv6",
                            o.peer_ip);
      return ParseOutcome::error;
    }
  }
  o.report_gbits = vm.count("report-gbits") != 0;
  if (vm.count("json")) o.json_path = vm["json"].as<std::string>();
  if (vm.count("capture")) o.capture_path = vm["capture"].as<std::string>();
  out = std::move(o);
  return ParseOutcome::run;
}

}  // namespace metaroce::perf
