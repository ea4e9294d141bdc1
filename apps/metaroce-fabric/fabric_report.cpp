#include "metaroce-fabric/fabric_report.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/json_line.hpp"

namespace metaroce::fabric_app {

namespace {

void add_json_totals(apps::JsonLine& j, const DirectionTotals& t);

// Gb/s of the bytes forwarded between two snapshots (0 without a later one).
double gbps_between(std::uint64_t bytes, std::uint64_t taken_ns, std::uint64_t bytes_before,
                    std::uint64_t taken_before_ns) {
  if (taken_ns <= taken_before_ns) return 0.0;
  return static_cast<double>(bytes - bytes_before) * 8.0 / static_cast<double>(taken_ns - taken_before_ns);
}

void put_line(std::FILE* out, std::string& line) {
  line.push_back('\n');
  std::fputs(line.c_str(), out);
  std::fflush(out);
}

}  // namespace

void print_stats_line(std::FILE* out, double elapsed_s, const std::vector<DirectionReport>& now,
                      const std::vector<DirectionReport>& previous) {
  std::string line = fmt::format("[{:6.1f} s]", elapsed_s);
  for (std::size_t i = 0; i < now.size(); ++i) {
    const DirectionTotals& t = now[i].snapshot.totals;
    const DirectionSnapshot* before = i < previous.size() ? &previous[i].snapshot : nullptr;
    const double gbps = before == nullptr ? 0.0
                                          : gbps_between(t.forwarded_bytes, now[i].snapshot.taken_ns,
                                                         before->totals.forwarded_bytes, before->taken_ns);
    fmt::format_to(std::back_inserter(line), "{} {} rx {} fwd {} drop {} mark {} in flight {} {:.2f} Gb/s",
                   i == 0 ? "" : " |", now[i].label, t.received, t.forwarded, t.dropped(), t.ecn_marked,
                   t.in_flight, gbps);
  }
  put_line(out, line);
}

std::vector<DirectionReport> direction_reports(const std::vector<DirectionLanes>& directions) {
  std::vector<DirectionReport> out;
  for (const DirectionLanes& d : directions) {
    DirectionReport r{d.name, d.label, d.spec, {}, {}};
    for (const Direction* lane : d.lanes) {
      const DirectionSnapshot s = lane->snapshot();
      add_totals(r.snapshot.totals, s.totals);
      r.snapshot.taken_ns = std::max(r.snapshot.taken_ns, s.taken_ns);
      r.snapshot.last_busy_ns = std::max(r.snapshot.last_busy_ns, s.last_busy_ns);
      r.lanes.push_back({lane->lane(), lane->lcore(), lane->spec(), s});
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string summary_json(const RunSummary& summary) {
  apps::JsonLine j;
  j.add("app", "metaroce-fabric");
  j.add("port_a", summary.port_a);
  j.add("port_b", summary.port_b);
  j.add("duration_s", summary.duration_s);
  j.add("lcores", summary.lcores);
  j.add("lanes", summary.lanes);
  j.add("stopped_by", summary.stopped_by);
  j.add("invariant", "received + duplicated == forwarded + dropped.total + in_flight");
  for (const DirectionReport& d : summary.directions) {
    j.begin_object(d.name);
    j.add("spec", d.spec);
    add_json_totals(j, d.snapshot.totals);
    j.begin_array("lanes");
    for (const LaneReport& l : d.lanes) {
      j.begin_array_object();
      j.add("lane", l.lane);
      j.add("lcore", l.lcore);
      j.add("spec", l.spec);
      add_json_totals(j, l.snapshot.totals);
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  return std::move(j).finish();
}

namespace {

void add_json_totals(apps::JsonLine& j, const DirectionTotals& t) {
    j.add("received", t.received);
    j.add("forwarded", t.forwarded);
    j.begin_object("dropped");
    j.add("total", t.dropped());
    j.add("random_loss", t.dropped_random_loss);
    j.add("burst_loss", t.dropped_burst_loss);
    j.add("queue_full", t.dropped_queue_full);
    j.add("blackhole", t.dropped_blackhole);
    j.add("no_mbuf", t.dropped_no_mbuf);
    j.end_object();
    j.add("ecn_marked", t.ecn_marked);
    j.add("duplicated", t.duplicated);
    j.add("corrupted", t.corrupted);
    j.add("reordered", t.reordered);
    j.add("reordered_in_path", t.reordered_in_path);
    j.add("in_flight", t.in_flight);
    j.add("received_bytes", t.received_bytes);
    j.add("forwarded_bytes", t.forwarded_bytes);
    j.add("rx_missed", t.rx_missed);
    j.add("tx_deferred", t.tx_deferred);
    j.add("rx_linearized", t.rx_linearized);
    j.add("clones", t.clones);
    j.add("private_copies", t.private_copies);
}

}  // namespace

bool write_summary(const std::string& path, const RunSummary& summary, std::string& error) {
  return write_json_file(path, summary_json(summary), error);
}

bool write_json_file(const std::string& path, const std::string& json, std::string& error) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    error = fmt::format("--json: cannot open '{}' for writing: {}; check the directory exists and is writable", path,
                        std::strerror(errno));
    return false;
  }
  const std::string text = json + "\n";
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) {
    error = fmt::format("--json: writing '{}' failed (disk full?)", path);
    return false;
  }
  return true;
}

}  // namespace metaroce::fabric_app

namespace metaroce::fabric_app {

void print_switch_stats_line(std::FILE* out, double elapsed_s, const std::vector<SwitchPortSnapshot>& now,
                             const std::vector<SwitchPortSnapshot>& previous) {
  std::string line = fmt::format("[{:6.1f} s]", elapsed_s);
  for (std::size_t i = 0; i < now.size(); ++i) {
    const SwitchPortSnapshot& p = now[i];
    const double gbps = i < previous.size() ? gbps_between(p.out.forwarded_bytes, p.taken_ns,
                                                           previous[i].out.forwarded_bytes, previous[i].taken_ns)
                                            : 0.0;
    fmt::format_to(std::back_inserter(line), "{} p{} rx {} no route {} out {} drop {} mark {} q99 {} B {:.2f} Gb/s",
                   i == 0 ? "" : " |", i, p.in.received, p.in.dropped_no_route, p.out.forwarded, p.out.dropped(),
                   p.out.ecn_marked, p.queue.p99_bytes, gbps);
  }
  put_line(out, line);
}

std::string switch_summary_json(const SwitchSummary& summary) {
  apps::JsonLine j;
  j.add("app", "metaroce-fabric");
  j.add("ports", summary.ports.size());
  j.add("routes", summary.routes);
  j.add("duration_s", summary.duration_s);
  j.add("lcores", 1u);
  j.add("stopped_by", summary.stopped_by);
  j.add("invariant", "per port: out.received + out.duplicated == out.forwarded + out.dropped.total + out.in_flight; "
                     "sum of in.received == sum of out.received + sum of in.dropped_no_route");
  j.begin_array("port");
  for (std::size_t i = 0; i < summary.ports.size(); ++i) {
    const SwitchPortSnapshot& p = summary.ports[i];
    j.begin_array_object();
    j.add("index", i);
    j.add("name", p.name);
    j.add("spec", p.spec);
    j.begin_object("in");
    j.add("received", p.in.received);
    j.add("received_bytes", p.in.received_bytes);
    j.add("dropped_no_route", p.in.dropped_no_route);
    j.add("rx_missed", p.in.rx_missed);
    j.end_object();
    j.begin_object("out");
    add_json_totals(j, p.out);
    j.end_object();
    j.begin_object("queue_bytes");
    j.add("p50", p.queue.p50_bytes);
    j.add("p99", p.queue.p99_bytes);
    j.add("max", p.queue.max_bytes);
    j.add("samples", p.queue.samples);
    j.end_object();
    j.end_object();
  }
  j.end_array();
  return std::move(j).finish();
}

}  // namespace metaroce::fabric_app
