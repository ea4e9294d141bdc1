#include "common/run_control.hpp"

#include <chrono>
#include <thread>

#include <time.h>

#include <csignal>
#include <string>
#include <string_view>

namespace metaroce::apps {

namespace {
std::atomic<bool> stop_signalled{false};
extern "C" void on_stop_signal(int) { stop_signalled.store(true); }
}  // namespace

void catch_stop_signals() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}
bool stop_requested() noexcept { return stop_signalled.load(); }
const std::atomic<bool>& stop_flag() noexcept { return stop_signalled; }

std::uint64_t monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

void add_counters_json(JsonLine& j, const transport::ConnectionCounters& connections,
                       const engine::EngineCounters& engine, const cm::Counters& cm) {
  j.begin_object("connection_counters");
  connections.for_each([&](std::string_view name, std::uint64_t v) { j.add(name, v); });
  j.end_object();
  j.begin_object("engine");
  engine.visit([&](const std::string& name, std::uint64_t v) { j.add(name, v); });
  j.end_object();
  j.begin_object("cm");
#define METAROCE_APPS_CM(name, what) j.add(#name, cm.name);
  METAROCE_CM_COUNTERS(METAROCE_APPS_CM)
#undef METAROCE_APPS_CM
  j.end_object();
}

void add_counters_json(JsonLine& j, const metaroce::CounterGroup& connections,
                       const std::vector<metaroce::CounterGroup>& endpoint) {
  const auto object = [&](const char* name, const metaroce::CounterGroup& g) {
    j.begin_object(name);
    for (const metaroce::Counter& c : g.counters) j.add(c.name, c.value);
    j.end_object();
  };
  object("connection_counters", connections);
  for (const metaroce::CounterGroup& g : endpoint) {
    if (g.name == "host") object("engine", g);
    if (g.name == "cm") object("cm", g);
    if (g.name == "receive_share") object("receive_share", g);
  }
}

void turn_until_lanes_done(metaroce::Endpoint* endpoint, std::atomic<unsigned>& done, unsigned lanes) {
  done.fetch_add(1);
  if (endpoint == nullptr) return;
  while (done.load() < lanes)
    if (endpoint->poll() == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
}

void add_lanes_json(JsonLine& j, const char* side, const std::vector<LaneResult>& lanes) {
  j.begin_array("lcores");
  for (const LaneResult& l : lanes) {
    j.begin_array_object();
    j.add("side", side);
    j.add("lcore", unsigned{l.lcore});
    j.add("connections", l.connections);
    j.add("messages", l.messages);
    j.add("data_packets", l.data_packets);
    j.add("rx_frames", l.rx_frames);
    j.add("tx_frames", l.tx_frames);
    j.add("rx_misdirected", l.rx_misdirected);
    j.end_object();
  }
  j.end_array();
}

}  // namespace metaroce::apps
