// tools/bench scale: what many connections cost, in one run (about 75 s):
//   1. at 1, 16, 256, 1,024 and 4,096 connections over the loopback, in
//      five rounds (1, 16, .., 4,096, then again), each figure the median
//      of its five, and the targets' ratios the median of the rounds' own
//      ratios (a shared host's slow spells last seconds: within a round
//      the two points are closest in time)
//      (metaroce-perf --loopback -q N, one host per end, messages
//      round-robin over the connections, -t 128 per connection):
//        - the 64 B WRITE message rate (1 s),
//        - the 64 KiB WRITE goodput (1 s),
//        - bytes per connection: the process's resident memory once its
//          connections are created less just before (ports, pools and hosts
//          already up), over the 2 x N connection ends (what one host pays
//          per connection; apps/common/process_memory.hpp). A connection's
//          windows are allocated and zeroed when it is created; what traffic
//          touches later is mostly the pools' mbufs, not the connections';
//   2. the connection manager's setup rate: metaroce-perf --server and
//      --client -q 4096 as two processes over net_memif, one 64 B message
//      per connection (the client's cm_setup_per_s: first REQ to last REP).
// A point whose memory would pass half of MemAvailable (from the last
// point's bytes per connection) is skipped, and a line says so. Targets,
// printed beside the figures: at 4,096 connections the message rate >= 80%
// and the goodput >= 90% of the 1-connection figures of the same run,
// bytes per connection <= 65,536, setup >= 10,000 connections/s.
// Human-readable table, then one JSON object as the last line; a figure
// that could not be measured is null.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "../common/program_runner.hpp"

#ifndef METAROCE_PERF_PATH
#error "METAROCE_PERF_PATH: the metaroce-perf executable, set by meson"
#endif

namespace {

using metaroce::bench::Figure;
using metaroce::bench::json_number;
using metaroce::bench::json_value;
using metaroce::bench::read_file;
using metaroce::bench::run;

constexpr unsigned connection_counts[] = {1, 16, 256, 1024, 4096};
constexpr unsigned cm_connections = 4096;
constexpr int rounds = 5;

struct Row {
  unsigned connections = 0;
  Figure msg_rate_mps, goodput_gbps, bytes_per_connection, rss_bytes_per_connection;
  bool skipped = false;
};

// metaroce-perf with --json FILE; the file's text, or "" when it failed.
std::string metaroce_perf(const std::string& args, const std::string& json_path) {
  const std::string command = fmt::format("{} --json {} {}", METAROCE_PERF_PATH, json_path, args);
  std::printf("  $ %s\n", command.c_str());
  if (run(command) != 0) {
    std::printf("  metaroce-perf failed (exit status above); its figures are null\n");
    return "";
  }
  return read_file(json_path);
}

// MemAvailable of /proc/meminfo in bytes; 0 when unknown.
double memory_available() {
  const std::string info = read_file("/proc/meminfo");
  const std::size_t at = info.find("MemAvailable:");
  if (at == std::string::npos) return 0;
  return std::strtod(info.c_str() + at + 13, nullptr) * 1024.0;
}

Row measure(unsigned n, const std::string& work) {
  Row row;
  row.connections = n;
  std::printf("%u connection%s\n", n, n == 1 ? "" : "s");
  const std::string rate =
      metaroce_perf(fmt::format("--loopback -q {} -s 64 -D 1", n), fmt::format("{}/rate-{}.json", work, n));
  if (!rate.empty()) {
    row.msg_rate_mps = json_number(rate, "msg_rate_mpps");
    const Figure before = json_number(rate, "resident_before_bytes");
    const Figure after = json_number(rate, "resident_connected_bytes");
    if (before && after && *after >= *before) row.rss_bytes_per_connection = (*after - *before) / (2.0 * n);
    // The hosts' own count while the traffic is in flight (the end of the
    // timed window): both ends' connections, over 2 x N connection ends.
    const Figure sender = json_number(rate, "connection_memory_sender_bytes");
    const Figure receiver = json_number(rate, "connection_memory_receiver_bytes");
    if (sender && receiver) row.bytes_per_connection = (*sender + *receiver) / (2.0 * n);
  }
  const std::string bw = metaroce_perf(fmt::format("--loopback -q {} -s 65536 -D 1 --report-gbits", n),
                                       fmt::format("{}/bw-{}.json", work, n));
  if (!bw.empty()) row.goodput_gbps = json_number(bw, "bw_average_gbps");
  return row;
}

// Two processes over net_memif; the client's cm_setup_per_s.
Figure cm_setup_rate(const std::string& work) {
  std::printf("connection manager: %u connections between two processes over net_memif\n", cm_connections);
  const std::string eal = "--lcores '0@(0-1)' --no-huge -m 512 --no-shconf --no-pci --log-level=error";
  const std::string memif = fmt::format("socket={}/cm.sock,socket-abstract=no,bsize=10240", work);
  const std::string server = fmt::format(
      "timeout 120 {} --server --port net_memif0 --local-ip 10.97.0.2 --max-connections {} --idle-sleep-us 20 "
      "--json {}/server.json -- {} --file-prefix mr-bench-scale-{}-s --vdev net_memif0,role=server,{},"
      "mac=02:00:00:00:00:22 >{}/server.out 2>&1 &",
      METAROCE_PERF_PATH, cm_connections, work, eal, ::getpid(), memif, work);
  std::printf("  $ %s\n", server.c_str());
  if (std::system(server.c_str()) != 0) return std::nullopt;
  for (int i = 0; i < 100 && ::access((work + "/cm.sock").c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string client = metaroce_perf(
      fmt::format("--client 10.97.0.2 --peer-mac 02:00:00:00:00:22 --port net_memif0 --local-ip 10.97.0.1 -q {} "
                  "-s 64 -n {} --idle-sleep-us 20 -- {} --file-prefix mr-bench-scale-{}-c "
                  "--vdev net_memif0,role=client,{},mac=02:00:00:00:00:21",
                  cm_connections, cm_connections, eal, ::getpid(), memif),
      work + "/client.json");
  // The server exits after the client's last connection.
  for (int i = 0; i < 100 && read_file(work + "/server.json").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (client.empty()) return std::nullopt;
  const Figure set_up = json_number(client, "cm_connections_set_up");
  if (!set_up || *set_up != cm_connections) return std::nullopt;
  return json_number(client, "cm_setup_per_s");
}

// The median of the figures measured (null when none was).
Figure median(std::vector<Figure> figures) {
  std::erase_if(figures, [](const Figure& f) { return !f; });
  if (figures.empty()) return std::nullopt;
  std::sort(figures.begin(), figures.end());
  return figures[figures.size() / 2];
}

// Each figure of a point: the median over the rounds that measured it.
Row median_row(const std::vector<Row>& of_point) {
  Row r = of_point.front();
  std::vector<Figure> rate, goodput, bytes, rss;
  for (const Row& x : of_point) {
    rate.push_back(x.msg_rate_mps);
    goodput.push_back(x.goodput_gbps);
    bytes.push_back(x.bytes_per_connection);
    rss.push_back(x.rss_bytes_per_connection);
  }
  r.msg_rate_mps = median(rate);
  r.goodput_gbps = median(goodput);
  r.bytes_per_connection = median(bytes);
  r.rss_bytes_per_connection = median(rss);
  return r;
}

std::string share(const Figure& part, const Figure& whole) {
  return part && whole && *whole > 0 ? fmt::format("{:.0f}%", 100.0 * *part / *whole) : "?";
}

// Each round's figure at `most` over its figure at `one` (`which` picks the
// figure), and their median.
template <class Pick>
Figure round_ratio(const std::vector<Row>& one, const std::vector<Row>& most, Pick which, std::string& each) {
  std::vector<Figure> ratios;
  for (std::size_t r = 0; r < std::min(one.size(), most.size()); ++r) {
    const Figure& a = which(one[r]);
    const Figure& b = which(most[r]);
    const Figure ratio = a && b && *a > 0 ? Figure(*b / *a) : std::nullopt;
    ratios.push_back(ratio);
    each += fmt::format("{}{}", each.empty() ? "" : ", ", ratio ? fmt::format("{:.0f}%", 100.0 * *ratio) : "?");
  }
  return median(ratios);
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  const auto scratch = metaroce::bench::start_benchmark("scale", argc, argv, exit_code);
  if (!scratch) return exit_code;
  const std::string work = *scratch;
  const char* dir = work.c_str();

  // measured[i]: point i's rows, one per round. A point skipped for its
  // memory in the first round is skipped in every round.
  constexpr std::size_t points = std::size(connection_counts);
  std::vector<std::vector<Row>> measured(points);
  for (int round = 1; round <= rounds; ++round) {
    std::printf("round %d of %d\n", round, rounds);
    for (std::size_t i = 0; i < points; ++i) {
      const unsigned n = connection_counts[i];
      if (round == 1 && i > 0 && measured[i - 1].front().bytes_per_connection) {
        const double per_end = *measured[i - 1].front().bytes_per_connection;
        const double needed = per_end * 2.0 * n;
        const double available = memory_available();
        if (available > 0 && needed > available / 2) {
          std::printf("%u connections: skipped, they would take about %.1f GiB (%.0f KiB per connection end, both "
                      "ends here), more than half of the %.1f GiB available\n",
                      n, needed / double(1u << 30), per_end / 1024.0, available / double(1u << 30));
          Row skipped;
          skipped.connections = n;
          skipped.skipped = true;
          measured[i].push_back(skipped);
          continue;
        }
      }
      if (!measured[i].empty() && measured[i].front().skipped) continue;
      measured[i].push_back(measure(n, work));
    }
  }
  std::vector<Row> rows;
  for (const std::vector<Row>& of_point : measured) rows.push_back(median_row(of_point));
  const Figure setup = cm_setup_rate(work);

  const Row& one = rows.front();
  const Row& most = rows.back();
  std::printf("\nround by round (64 B msg rate [M msg/s] / 64 KiB goodput [Gb/s])\n");
  for (std::size_t i = 0; i < points; ++i) {
    std::printf("  %-13u", connection_counts[i]);
    for (const Row& r : measured[i])
      std::printf(" %s / %s  ", r.skipped ? "skipped" : json_value(r.msg_rate_mps, 3).c_str(),
                  r.skipped ? "skipped" : json_value(r.goodput_gbps, 2).c_str());
    std::printf("\n");
  }
  std::printf("\nsummary, medians of %d rounds (loopback: both ends in one process over net_ring, 2 lcores; -t 128 per "
              "connection)\n", rounds);
  std::printf("  connections   64 B msg rate [M msg/s]   64 KiB goodput [Gb/s]   bytes per connection   "
              "(RSS at creation)\n");
  for (const Row& r : rows)
    std::printf("  %-13u %-25s %-23s %-22s %s\n", r.connections,
                r.skipped ? "skipped" : json_value(r.msg_rate_mps, 3).c_str(),
                r.skipped ? "skipped" : json_value(r.goodput_gbps, 2).c_str(),
                r.skipped ? "skipped" : json_value(r.bytes_per_connection, 0).c_str(),
                r.skipped ? "skipped" : json_value(r.rss_bytes_per_connection, 0).c_str());
  std::printf("  bytes per connection: what the connections hold by the hosts' own count (Connection::memory_bytes) "
              "at the end of the 64 B run's timed window, traffic in flight, over 2 x N connection ends; RSS at "
              "creation: resident memory the connections took when created, over 2 x N\n");
  std::string rate_rounds, goodput_rounds;
  const Figure rate_ratio = round_ratio(measured.front(), measured.back(),
                                        [](const Row& r) -> const Figure& { return r.msg_rate_mps; }, rate_rounds);
  const Figure goodput_ratio = round_ratio(measured.front(), measured.back(),
                                           [](const Row& r) -> const Figure& { return r.goodput_gbps; }, goodput_rounds);
  const Figure whole = 1.0;
  std::printf("  at %u connections, the median of the rounds' own ratios to 1 connection: message rate %s (target >= "
              "80%%; rounds %s), goodput %s (target >= 90%%; rounds %s); %s bytes per connection (target <= 65536)\n",
              most.connections, share(rate_ratio, whole).c_str(), rate_rounds.c_str(),
              share(goodput_ratio, whole).c_str(), goodput_rounds.c_str(),
              json_value(most.bytes_per_connection, 0).c_str());
  std::printf("  connection manager over net_memif, two processes, %u connections: %s connections/s (target >= "
              "10000)\n",
              cm_connections, json_value(setup, 0).c_str());

  if (std::system(fmt::format("rm -rf '{}'", work).c_str()) != 0) std::printf("  (could not remove %s)\n", dir);
  std::string json = "{\"bench\":\"scale\",\"rows\":[";
  for (std::size_t i = 0; i < rows.size(); ++i)
    json += fmt::format("{}{{\"connections\":{},\"msg_rate_64b_mps\":{},\"goodput_64k_gbps\":{},"
                        "\"bytes_per_connection\":{},\"rss_bytes_per_connection\":{}}}",
                        i == 0 ? "" : ",", rows[i].connections, json_value(rows[i].msg_rate_mps, 4),
                        json_value(rows[i].goodput_gbps, 3), json_value(rows[i].bytes_per_connection, 0),
                        json_value(rows[i].rss_bytes_per_connection, 0));
  json += fmt::format("],\"rounds\":{},\"msg_rate_ratio\":{},\"goodput_ratio\":{},\"cm_setup_per_s\":{}}}", rounds,
                      json_value(rate_ratio, 3), json_value(goodput_ratio, 3), json_value(setup, 0));
  std::printf("%s\n", json.c_str());
  return one.msg_rate_mps && setup ? 0 : 1;
}
