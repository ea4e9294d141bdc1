#include "metaroce-perf/perf_report.hpp"

#include <rte_cycles.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/json_line.hpp"
#include "engine/mbuf_frames.hpp"
#include "wire/frame.hpp"
#include "wire/neighbour.hpp"
#include "metaroce-perf/raw_run.hpp"

namespace metaroce::perf {

namespace {

// "" when nothing was dropped; otherwise " (rx_unknown_qpn 3, ...)": the
// largest causes of engine::EngineCounters::dropped(), at most three, by the
// names --json and telemetry give them.
std::string drop_causes(const engine::EngineCounters& c) {
  std::vector<std::pair<std::string, std::uint64_t>> causes = {
      {"rx_unknown_qpn", c.rx_unknown_qpn},     {"rx_misdirected", c.rx_misdirected},
      {"rx_vlan_mismatch", c.rx_vlan_mismatch}, {"rx_mempool_empty", c.rx_mempool_empty},
      {"rx_handoff_ring_full", c.rx_handoff_ring_full}, {"tx_frame_too_large", c.tx_frame_too_large},
      {"tx_no_such_port", c.tx_no_such_port},   {"tx_dropped_link_down", c.tx_dropped_link_down}};
  for (std::size_t i = 1; i < wire::parse_error_count; ++i)
    causes.emplace_back("rx_parse_error." + std::string(wire::to_string(static_cast<wire::ParseError>(i))),
                        c.rx_parse_errors[i]);
  for (std::size_t i = 1; i < wire::neighbour_parse_error_count; ++i)
    causes.emplace_back("neighbour." + std::string(wire::to_string(static_cast<wire::NeighbourParseError>(i))),
                        c.neighbour.rx_errors[i]);
  std::stable_sort(causes.begin(), causes.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string text;
  for (std::size_t i = 0; i < causes.size() && i < 3 && causes[i].second != 0; ++i)
    text += fmt::format("{}{} {}", text.empty() ? " (" : ", ", causes[i].first, causes[i].second);
  return text.empty() ? text : text + ")";
}

constexpr const char* rule =
    "---------------------------------------------------------------------------------------\n";

double bandwidth(const PerfOptions& o, double bits_per_second) {
  // perftest: Gb/s = 10^9 bits; MB/s = 2^20 bytes.
  return o.report_gbits ? bits_per_second / 1e9 : bits_per_second / 8.0 / 1048576.0;
}

// Connections set up per second over the run's sizes (0: none).
double cm_setup_rate(const RunResult& run) {
  return run.cm_setup_seconds > 0 ? double(run.cm_connections_set_up) / run.cm_setup_seconds : 0.0;
}

}  // namespace

namespace {
const char* security_line(const PerfOptions& o) {
  if (o.key_file.empty()) return "off";
  return o.auth_only ? "AES-256-GCM tag on every packet, payload in the clear (--secure=auth-only)"
                     : "AES-256-GCM on every packet, payload encrypted (--secure)";
}
}  // namespace

void print_header(std::FILE* out, const PerfOptions& o) {
  std::fputs(rule, out);
  if (o.raw) {
    std::fprintf(out, "                    Raw frames over net_ring (metaroce-perf --raw, no transport)\n");
    std::fprintf(out, " Frames        : the size of one %s WRITE packet per message size (payload + headers + ICRC)\n",
                 std::string(transport::to_string(o.mode)).c_str());
    std::fprintf(out, " Verify        : %s\n", o.verify ? "order and every byte" : "off (every byte read)");
    std::fputs(rule, out);
    std::fflush(out);
    return;
  }
  if (o.role == PerfRole::server) {
    // The client chooses these in its connection request, per connection:
    // a line for each connection below says what it asked.
    std::fprintf(out, "                    RDMA Test (metaroce-perf, server)\n");
    std::fprintf(out, " Operation     : as each client asks (a line per connection below)\n");
    std::fprintf(out, " Mode          : as each client asks\n");
    std::fprintf(out, " Paths/Streams : as each client asks\n");
    std::fprintf(out, " MTU           : %u [B] payload per packet on this port\n", o.mtu);
    std::fprintf(out, " Connections   : up to %u at once (--max-connections), %llu bytes each at most "
                 "(--max-connection-memory)\n",
                 o.max_connections, static_cast<unsigned long long>(o.max_connection_memory));
    std::fprintf(out, " Verify        : as each client asks (its --verify)\n");
    std::fprintf(out, " Congestion    : as each client asks (its --cc)\n");
    std::fprintf(out, " Security      : %s\n", security_line(o));
  } else {
    std::fprintf(out, "                    RDMA_%s %s Test (metaroce-perf, %s)\n",
                 [&] {
                   constexpr const char* titles[] = {"Write", "Write_Imm", "Send", "Read", "Fetch_Add", "Cmp_Swap"};
                   return titles[static_cast<int>(o.op)];
                 }(),
                 o.test == PerfTest::lat ? "Latency" : "BW",
                 o.role == PerfRole::client ? "client" : "loopback over net_ring");
    std::fprintf(out, " Mode          : %s\n", std::string(transport::to_string(o.mode)).c_str());
    std::fprintf(out, " Paths/Streams : %u / %u\n", o.paths, o.streams);
    std::fprintf(out, " MTU           : %u [B] payload per packet\n", o.mtu);
    std::fprintf(out, " TX depth      : %u per connection\n", o.tx_depth);
    std::fprintf(out, " Connections   : %u\n", o.qps);
    std::fprintf(out, " Verify        : %s\n", !o.verify ? "off" : is_atomic(o.op) ? "every returned value" : "every byte");
    std::fprintf(out, " Security      : %s\n", security_line(o));
    if (o.role == PerfRole::loopback) {
      std::fprintf(out, " Fabric        : %s%s\n", o.fabric_spec.empty() ? "none" : o.fabric_spec.c_str(),
                   o.planes > 1 && !o.fabric_spec.empty() ? " (every plane)" : "");
      for (const auto& [plane, spec] : o.fabric_plane_specs)
        std::fprintf(out, " Fabric plane %u: %s\n", unsigned{plane}, spec.c_str());
    }
    else
      std::fprintf(out, " Congestion    : %s\n", o.cc.empty() ? "none (path window)" : o.cc.c_str());
  }
  const std::uint32_t threshold = loopback_zero_copy_threshold(o);
  if (o.role != PerfRole::loopback)
    std::fprintf(out, " Zero copy     : as the port's preset says (zero_copy_threshold)\n");
  else if (threshold == engine::zero_copy_never)
    std::fprintf(out, " Zero copy     : off, payloads copied (faster over net_ring; --zero-copy-threshold N)\n");
  else
    std::fprintf(out, " Zero copy     : payloads >= %u B attached in place\n", threshold);
  std::fputs(rule, out);
  std::fflush(out);
}

void print_table(std::FILE* out, const PerfOptions& o, const RunResult& run) {
  const char* unit = o.report_gbits ? "Gb/sec" : "MB/sec";
  std::fputs(rule, out);
  if (o.test == PerfTest::lat) {
    // Unlike ib_write_lat (half a ping-pong), one full round trip: the
    // WRITE to the receiver and its ACK back, measured by the sender's clock.
    std::fprintf(out, " #bytes #iterations    t_min[usec]    t_p50[usec]    t_avg[usec]    t_p99[usec]    t_max[usec]"
                      "   (post to completion: one round trip)\n");
    for (const auto& s : run.sizes)
      std::fprintf(out, " %-6llu %-14llu %-14.2f %-14.2f %-14.2f %-14.2f %.2f\n",
                   static_cast<unsigned long long>(s.size), static_cast<unsigned long long>(s.messages), s.lat_min_us,
                   s.lat_p50_us, s.lat_avg_us, s.lat_p99_us, s.lat_max_us);
    std::fputs(rule, out);
  }
  std::fprintf(out, " #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]\n", unit, unit);
  for (const auto& s : run.sizes)
    std::fprintf(out, " %-10llu %-14llu %-18.2f %-20.2f %.6f\n", static_cast<unsigned long long>(s.size),
                 static_cast<unsigned long long>(s.messages), bandwidth(o, s.peak_bps), bandwidth(o, s.average_bps),
                 s.message_rate / 1e6);
  std::fputs(rule, out);
  if (o.raw) {
    std::fprintf(out, " raw: #iterations are frames received; BW counts their payload bytes (-s), not headers\n");
    for (const auto& s : run.sizes)
      std::fprintf(out, " size %llu: frames of %u bytes (a %s WRITE packet of that payload)\n",
                   static_cast<unsigned long long>(s.size),
                   write_frame_bytes(o.mode, static_cast<std::uint32_t>(s.size)),
                   std::string(transport::to_string(o.mode)).c_str());
  } else {
    engine::EngineCounters both = run.host_a;
    both += run.host_b;
    std::fprintf(out,
               " retransmitted %llu packets; fabric dropped %llu forward, %llu backward; engine dropped %llu%s; "
               "zero-copy %llu, copied %llu frames\n",
               static_cast<unsigned long long>(run.retransmitted),
               static_cast<unsigned long long>(run.forward.dropped()),
               static_cast<unsigned long long>(run.backward.dropped()),
               static_cast<unsigned long long>(both.dropped()), drop_causes(both).c_str(),
               static_cast<unsigned long long>(run.host_a.tx_zero_copy + run.host_b.tx_zero_copy),
               static_cast<unsigned long long>(run.host_a.tx_copied + run.host_b.tx_copied));
  }
  for (const auto& s : run.sizes) {
    if (s.wrong_messages == 0 && s.missing_messages == 0) continue;
    std::fprintf(out, " size %llu: %llu wrong, %llu missing messages; first: %s\n",
                 static_cast<unsigned long long>(s.size), static_cast<unsigned long long>(s.wrong_messages),
                 static_cast<unsigned long long>(s.missing_messages), s.first_problem.c_str());
  }
  for (const auto& s : run.sizes) {
    if (o.role == PerfRole::server) break;  // the server sends no data: no sender cost to show
    std::fprintf(out, " size %llu: sender%s busy %.0f TSC cycles per data packet (%llu packets, %.1f per busy turn, %.1f%% of turns busy)\n",
                 static_cast<unsigned long long>(s.size), s.shared_lcore ? " (receiver on the same lcore, its turns left out)" : " lcore",
                 s.cycles_per_packet, static_cast<unsigned long long>(s.packets_sent),
                 s.sender_busy_turns != 0 ? double(s.packets_sent) / double(s.sender_busy_turns) : 0.0,
                 s.sender_turns != 0 ? 100.0 * double(s.sender_busy_turns) / double(s.sender_turns) : 0.0);
    if (s.receiver_turns != 0)
      std::fprintf(out, " size %llu: receiver%s busy %.0f TSC cycles per data packet (%.1f%% of turns busy)\n",
                   static_cast<unsigned long long>(s.size), s.shared_lcore ? " (on the sender's lcore)" : " lcore",
                   s.receiver_cycles_per_packet, 100.0 * double(s.receiver_busy_turns) / double(s.receiver_turns));
  }
  // --lcores N: every lcore of each side, its packets and what they cost
  // (TSC cycles of its busy turns; CPU ns from its thread's CPU time).
  for (const auto& s : run.sizes) {
    if (s.lcores.size() <= 2) break;
    std::fprintf(out, " size %llu: #side     lcore  connections  data packets  busy cycles/packet  CPU ns/packet  idle share\n",
                 static_cast<unsigned long long>(s.size));
    for (const LcoreResult& l : s.lcores)
      std::fprintf(out, " size %llu:  %-9s %-6u %-12u %-13llu %-19.0f %-14.1f %.1f%%\n",
                   static_cast<unsigned long long>(s.size), l.side, l.lcore, l.connections,
                   static_cast<unsigned long long>(l.data_packets), l.busy_cycles_per_packet(),
                   l.data_packets != 0 ? double(l.cpu_ns) / double(l.data_packets) : 0.0, 100.0 * l.idle_share());
  }
  // --server/--client --lcores N: each lane over the whole run (data
  // packets sent by a client's lane, placed by a server's).
  if (!run.lanes.empty()) {
    std::fprintf(out, " #side     lcore  connections  messages    data packets  busy cycles/packet  CPU ns/packet  "
                      "idle share  rx frames  misdirected\n");
    for (const LaneReport& r : run.lanes) {
      const LcoreResult& l = r.lcore;
      std::fprintf(out, "  %-9s %-6u %-12u %-11llu %-13llu %-19.0f %-14.1f %-11.1f %-10llu %llu\n", l.side, l.lcore,
                   l.connections, static_cast<unsigned long long>(r.messages),
                   static_cast<unsigned long long>(l.data_packets), l.busy_cycles_per_packet(),
                   l.data_packets != 0 ? double(l.cpu_ns) / double(l.data_packets) : 0.0, 100.0 * l.idle_share(),
                   static_cast<unsigned long long>(r.rx_frames), static_cast<unsigned long long>(r.rx_misdirected));
    }
  }
  if (run.planes.size() > 1) {
    std::fprintf(out, " #plane  data packets  retransmits  failures  sender port frames  fabric dropped  state\n");
    for (const PlaneResult& p : run.planes)
      std::fprintf(out, "  %-6u %-13llu %-12llu %-9llu %-19llu %-15llu %s\n", unsigned{p.plane},
                   static_cast<unsigned long long>(p.data_packets), static_cast<unsigned long long>(p.retransmits),
                   static_cast<unsigned long long>(p.failures), static_cast<unsigned long long>(p.sender_port_frames),
                   static_cast<unsigned long long>(p.fabric_dropped), p.state);
  }
  if (o.role == PerfRole::client && run.cm_connections_set_up != 0)
    std::fprintf(out, " connection manager: %llu connections set up in %.3f s (%.0f connections/s), %llu torn down in "
                      "%.3f s\n",
                 static_cast<unsigned long long>(run.cm_connections_set_up), run.cm_setup_seconds, cm_setup_rate(run),
                 static_cast<unsigned long long>(run.cm_connections_torn_down), run.cm_teardown_seconds);
  if (o.verify && !run.failed())
    std::fputs(is_atomic(o.op) ? " verify: every value returned checked, all correct\n"
                               : " verify: every byte of every message checked, all correct\n",
               out);
  std::fflush(out);
}

bool write_json(const std::string& path, const PerfOptions& o, const RunResult& run, std::string& error) {
  apps::JsonLine j;
  j.add("tool", "metaroce-perf")
      .add("loopback", o.role == PerfRole::loopback)
      .add("role", o.role == PerfRole::server ? "server" : o.role == PerfRole::client ? "client" : "loopback")
      .add("mode", std::string(transport::to_string(o.mode)))
      .add("security", o.key_file.empty() ? "off" : o.auth_only ? "auth" : "encrypt")
      .add("op", to_string(o.op))
      .add("test", o.test == PerfTest::lat ? "lat" : "bw")
      .add("paths", unsigned{o.paths})
      .add("streams", unsigned{o.streams})
      .add("qps", o.qps)
      .add("lcores_per_side", unsigned{o.lcores})
      .add("planes_per_connection", unsigned{o.planes})
      .add("mtu", o.mtu)
      .add("tx_depth", o.tx_depth)
      .add("verify", o.verify)
      .add("fabric", o.fabric_spec)
      .add("raw", o.raw)
      .add("tsc_hz", rte_get_tsc_hz())
      .add("ok", !run.failed());
  j.begin_array("results");
  for (const auto& s : run.sizes) {
    j.begin_array_object()
        .add("bytes", s.size)
        .add("iterations", s.messages)
        .add("seconds", s.seconds)
        .add("bw_peak_gbps", s.peak_bps / 1e9)
        .add("bw_average_gbps", s.average_bps / 1e9)
        .add("msg_rate_mpps", s.message_rate / 1e6)
        .add("wrong_messages", s.wrong_messages)
        .add("missing_messages", s.missing_messages)
        .add("sender_busy_cycles", s.sender_busy_cycles)
        .add("packets_sent", s.packets_sent)
        .add("sender_cycles_per_packet", s.cycles_per_packet)
        .add("receiver_busy_cycles", s.receiver_busy_cycles)
        .add("receiver_cycles_per_packet", s.receiver_cycles_per_packet)
        .add("shared_lcore", s.shared_lcore)
        .add("tsc_hz", std::uint64_t{rte_get_tsc_hz()})
        .add("connections", s.connections);
    if (!s.lcores.empty()) {
      std::uint64_t cpu_ns = 0;
      for (const LcoreResult& l : s.lcores) cpu_ns += l.cpu_ns;
      j.add("lcores_cpu_ns", cpu_ns);  // thread CPU time of every lcore of both sides
      j.begin_array("lcores");
      for (const LcoreResult& l : s.lcores)
        j.begin_array_object()
            .add("side", l.side)
            .add("lcore", l.lcore)
            .add("connections", l.connections)
            .add("data_packets", l.data_packets)
            .add("busy_cycles", l.busy_cycles)
            .add("busy_cycles_per_packet", l.busy_cycles_per_packet())
            .add("turns", l.turns)
            .add("busy_turns", l.busy_turns)
            .add("idle_share", l.idle_share())
            .add("cpu_ns", l.cpu_ns)
            .add("receive_part_bps", l.receive_part_bps)
            .end_object();
      j.end_array();
    }
    if (o.role == PerfRole::loopback && !o.raw)
      j.add("resident_before_bytes", s.resident_before_bytes)
          .add("resident_connected_bytes", s.resident_connected_bytes)
          .add("resident_after_bytes", s.resident_after_bytes)
          .add("connection_memory_sender_bytes", s.connection_memory_sender_bytes)
          .add("connection_memory_receiver_bytes", s.connection_memory_receiver_bytes);
    if (o.role == PerfRole::client) j.add("cm_setup_per_s", s.cm_setup_per_s);
    if (o.test == PerfTest::lat)
      j.add("lat_min_us", s.lat_min_us)
          .add("lat_p50_us", s.lat_p50_us)
          .add("lat_avg_us", s.lat_avg_us)
          .add("lat_p99_us", s.lat_p99_us)
          .add("lat_max_us", s.lat_max_us);
    j.end_object();
  }
  j.end_array();
  j.add("retransmitted", run.retransmitted);
  if (!run.lanes.empty()) {
    j.begin_array("lcores");
    for (const LaneReport& r : run.lanes)
      j.begin_array_object()
          .add("side", r.lcore.side)
          .add("lcore", r.lcore.lcore)
          .add("connections", r.lcore.connections)
          .add("messages", r.messages)
          .add("data_packets", r.lcore.data_packets)
          .add("busy_cycles", r.lcore.busy_cycles)
          .add("busy_cycles_per_packet", r.lcore.busy_cycles_per_packet())
          .add("turns", r.lcore.turns)
          .add("busy_turns", r.lcore.busy_turns)
          .add("idle_share", r.lcore.idle_share())
          .add("cpu_ns", r.lcore.cpu_ns)
          .add("rx_frames", r.rx_frames)
          .add("rx_misdirected", r.rx_misdirected)
          .end_object();
    j.end_array();
  }
  if (!run.planes.empty()) {
    j.begin_array("planes");
    for (const PlaneResult& p : run.planes) {
      // The plane's fabric: its own --fabric-plane (the last one), else --fabric.
      std::string_view spec = o.fabric_spec;
      for (const auto& [plane, plane_spec] : o.fabric_plane_specs)
        if (plane == p.plane) spec = plane_spec;
      j.begin_array_object()
          .add("plane", unsigned{p.plane})
          .add("fabric", spec)
          .add("data_packets", p.data_packets)
          .add("retransmits", p.retransmits)
          .add("failures", p.failures)
          .add("sender_port_frames", p.sender_port_frames)
          .add("fabric_dropped", p.fabric_dropped)
          .add("state", p.state)
          .end_object();
    }
    j.end_array();
  }
  if (o.role == PerfRole::client)
    j.add("cm_connections_set_up", run.cm_connections_set_up)
        .add("cm_connections_torn_down", run.cm_connections_torn_down)
        .add("cm_setup_seconds", run.cm_setup_seconds)
        .add("cm_teardown_seconds", run.cm_teardown_seconds)
        .add("cm_setup_per_s", cm_setup_rate(run))
        .add("cm_teardown_per_s", run.cm_teardown_seconds > 0
                                      ? double(run.cm_connections_torn_down) / run.cm_teardown_seconds
                                      : 0.0);
  const auto engine_counters = [&](const char* key, const engine::EngineCounters& c) {
    j.begin_object(key);
    c.visit([&](const std::string& name, std::uint64_t v) { j.add(name, v); });
    j.end_object();
  };
  engine_counters("host_a", run.host_a);
  engine_counters("host_b", run.host_b);
  const auto connection_counters = [&](const char* key, const transport::ConnectionCounters& c) {
    j.begin_object(key);
    c.for_each([&](std::string_view name, std::uint64_t v) { j.add(name, v); });
    j.end_object();
  };
  if (o.role != PerfRole::loopback) {
    j.begin_object("cm");
    for (const auto& [name, value] : run.cm_counters) j.add(name, value);
    j.end_object();
  }
  connection_counters("connection_a", run.connection_a);
  connection_counters("connection_b", run.connection_b);
  const auto fabric_counters = [&](const char* key, const fabric::FabricCounters& c) {
    j.begin_object(key);
    c.visit([&](auto name, std::uint64_t v) { j.add(name, v); });
    j.end_object();
  };
  fabric_counters("fabric_forward", run.forward);
  fabric_counters("fabric_backward", run.backward);
  std::ofstream f(path);
  f << std::move(j).finish() << '\n';
  if (!f) {
    error = fmt::format("cannot write --json file '{}': check the directory exists and is writable", path);
    return false;
  }
  return true;
}

}  // namespace metaroce::perf
