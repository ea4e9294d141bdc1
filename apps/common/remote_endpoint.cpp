#include "common/remote_endpoint.hpp"

#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "cc/registry.hpp"
#include "engine/eal.hpp"
#include "engine/preset.hpp"

namespace metaroce::apps {

namespace {

// The preset with --iface applied.
bool load_remote_preset(const RemotePortOptions& o, engine::DriverPreset& preset, std::string& error) {
  if (!engine::load_preset(o.preset_path, preset, error)) return false;
  if (!o.iface.empty()) {
    std::string args = preset.port.vdev_args;
    const auto at = args.find("iface=");
    if (at == std::string::npos) {
      args = "iface=" + o.iface + (args.empty() ? "" : "," + args);
    } else {
      const auto end = args.find(',', at);
      args.replace(at, end == std::string::npos ? std::string::npos : end - at, "iface=" + o.iface);
    }
    preset.port.vdev_args = args;
  }
  return true;
}

}  // namespace

bool start_remote_eal(const RemotePortOptions& o, std::string& error) {
  const std::string prefix = fmt::format("--file-prefix={}-{}", o.program, ::getpid());
  if (!o.preset_path.empty()) {
    engine::DriverPreset preset;
    if (!load_remote_preset(o, preset, error)) return false;
    engine::EalOptions eal = engine::eal_options(preset);
    eal.program_name = o.program;
    eal.extra_args.push_back(prefix);
    return engine::start_eal(eal, error);
  }
  std::vector<std::string> args = {o.program};
  const bool own_prefix = std::any_of(o.eal_args.begin(), o.eal_args.end(),
                                      [](const std::string& a) { return a.rfind("--file-prefix", 0) == 0; });
  if (!own_prefix) args.push_back(prefix);
  args.insert(args.end(), o.eal_args.begin(), o.eal_args.end());
  return engine::start_eal_with_arguments(args, error);
}

Endpoint::~Endpoint() {
  host.reset();  // connections and tx mbufs first
  if (port) port->stop();
}

std::size_t Endpoint::turn() {
  cm_frames.clear();
  cm->poll(host->now_ns(), cm_frames);
  for (const auto& f : cm_frames) host->send_frame(f);
  const std::size_t work = host->poll_once();
  cm->take_events(events);
  return work + cm_frames.size();
}

void Endpoint::idle(std::size_t work) const {
  if (work == 0 && idle_sleep_us != 0) std::this_thread::sleep_for(std::chrono::microseconds(idle_sleep_us));
}

bool open_endpoint(const RemotePortOptions& o, Endpoint& e, std::string& error) {
  engine::PortSetup setup;
  engine::EngineHostConfig host_config;
  std::string device = o.port_name;
  if (!o.preset_path.empty()) {
    engine::DriverPreset preset;
    if (!load_remote_preset(o, preset, error)) return false;
    setup = engine::port_setup(preset);
    device = engine::is_vdev(preset.port.driver) ? fmt::format("{}0", engine::to_string(preset.port.driver))
                                                 : preset.port.pci;
    e.port = engine::Port::open(device, setup, error);
    if (!e.port) return false;
    host_config = engine::host_config(preset, e.port->multi_segment_tx());
  } else {
    setup.mtu = std::max<std::uint32_t>(o.mtu + 128, 1500);
    setup.mbufs = o.mbufs;
    e.port = engine::Port::open(device, setup, error);
    if (!e.port) return false;
    host_config.multi_segment_tx = e.port->multi_segment_tx();
    host_config.tx_mbufs = o.mbufs;
    if (o.zero_copy_threshold != 0) host_config.zero_copy_threshold = o.zero_copy_threshold;
    host_config.tx_data_room = engine::data_room_for_mtu(setup.mtu);
  }
  if (!e.port->start(error)) return false;
  host_config.name = o.host_name;
  host_config.port_id = e.port->id();
  host_config.queue = 0;
  host_config.idle_sleep_us = o.idle_sleep_us;
  e.idle_sleep_us = o.idle_sleep_us;
  e.host = engine::EngineHost::create(host_config, error);
  if (!e.host) return false;
  cm::ManagerConfig cm_config;
  cm_config.local.local_mac = e.port->mac();
  if (!parse_ipv4(o.local_ip, cm_config.local.local_ipv4)) {
    error = fmt::format("--local-ip '{}' is not an IPv4 address (give A.B.C.D)", o.local_ip);
    return false;
  }
  cm_config.retry_interval = 100'000'000;
  cm_config.retries = static_cast<std::uint32_t>(std::max(1.0, std::ceil(o.cm_timeout_s * 10.0)));
  cm_config.max_mtu = 9000;
  e.cm = std::make_unique<cm::Manager>(cm_config);
  e.host->set_management_handler(
      [cm = e.cm.get()](std::uint64_t now, const wire::ParsedFrame& frame) { cm->on_frame(now, frame); });
  return true;
}

bool wait_for_event(Endpoint& e, std::uint64_t id, cm::EventKind kind, cm::Event& out,
                    const std::atomic<bool>& interrupted) {
  for (;;) {
    const std::size_t work = e.turn();
    for (auto& ev : e.events) {
      if (ev.id != id) continue;
      if (ev.kind == kind || ev.kind == cm::EventKind::failed) {
        out = std::move(ev);
        e.events.clear();
        return out.kind == kind;
      }
    }
    e.events.clear();
    if (interrupted.load()) {
      out.error = "interrupted";
      return false;
    }
    e.idle(work);
  }
}

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

void tolerate_stalls(transport::ConnectionConfig& c) noexcept {
  c.initial_rto = 5'000'000;
  c.min_rto = 2'000'000;
  c.retry_limit = 50;
  c.rnr_retry_limit = 50;
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

bool parse_ipv4(const std::string& text, std::uint32_t& out) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) return false;
  out = ntohl(a.s_addr);
  return true;
}

bool parse_mac(const std::string& text, wire::MacAddress& out) {
  unsigned v[6];
  char tail = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
    return false;
  for (int i = 0; i < 6; ++i) {
    if (v[i] > 255) return false;
    out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v[i]);
  }
  return true;
}

std::string mac_string(const wire::MacAddress& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
}

std::unique_ptr<transport::CongestionControl> make_congestion_control(const std::string& name,
                                                                     const transport::ConnectionConfig& connection,
                                                                     std::string& error) {
  if (name.empty() || name == "none") return nullptr;
  cc::CcConfig config;
  config.metaroce.paths = connection.paths;  // one window per path of this connection
  return cc::make(name, config, error);
}

void add_counters(transport::ConnectionCounters& a, const transport::ConnectionCounters& b) {
#define METAROCE_APPS_ADD(name, what) a.name += b.name;
  METAROCE_CONNECTION_COUNTERS(METAROCE_APPS_ADD)
#undef METAROCE_APPS_ADD
}

std::uint64_t path_retransmissions(const transport::Connection& c) {
  std::uint64_t n = 0;
  for (std::uint16_t p = 0; p < c.config().paths; ++p) n += c.path_info(p).retransmitted;
  return n;
}

}  // namespace metaroce::apps
