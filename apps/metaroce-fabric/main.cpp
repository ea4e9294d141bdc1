// metaroce-fabric: a two-port impairment node between any two DPDK ports
// (doc/APPS.md, "metaroce-fabric"; doc/FABRIC.md, "metaroce-fabric").
//
// Frames received on port A go through the a-to-b fabric model and leave on
// port B, and the other way round. One lcore forwards both directions; when
// EAL gives a second lcore (-l 0-1), B -> A runs there. The delay lines hold
// the received mbufs themselves (engine/impaired_link.hpp).
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/eal.hpp"
#include "engine/impaired_link.hpp"
#include "engine/port.hpp"
#include "engine/tsc_clock.hpp"
#include "fabric/spec.hpp"
#include "metaroce-fabric/fabric_node.hpp"
#include "metaroce-fabric/fabric_options.hpp"
#include "metaroce-fabric/fabric_report.hpp"
#include "metaroce-fabric/fabric_telemetry.hpp"

namespace {

using namespace metaroce;

constexpr int exit_ok = 0;
constexpr int exit_failed = 1;
constexpr int exit_usage = 2;

volatile std::sig_atomic_t signalled = 0;
void on_signal(int) { signalled = 1; }

// The port as configured by its driver, but with room for jumbo frames in
// every mbuf (a frame must fit one segment to be impaired without a copy).
engine::PortSetup port_setup(const std::string& name, std::uint32_t mbufs) {
  engine::PortSetup setup;
  setup.mbufs = mbufs;
  std::uint16_t port_id = 0;
  std::uint16_t mtu = 1500;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) == 0) rte_eth_dev_get_mtu(port_id, &mtu);
  setup.mtu = mtu;  // keep the device's MTU (af_packet would change the interface's)
  setup.mbuf_data_room = engine::data_room_for_mtu(std::max<std::uint32_t>(mtu, 9000));
  return setup;
}

struct Worker {
  std::vector<fabric_app::Direction*> directions;
  const engine::TscClock* clock = nullptr;
  fabric_app::NodeControl* control = nullptr;
};

int worker_main(void* arg) {
  auto& w = *static_cast<Worker*>(arg);
  fabric_app::run_directions_st(w.directions, *w.clock, *w.control, {});
  return 0;
}

std::vector<fabric_app::DirectionReport> reports(const std::vector<std::unique_ptr<fabric_app::Direction>>& ds) {
  std::vector<fabric_app::DirectionReport> out;
  for (const auto& d : ds) out.push_back({d->name(), d->label(), d->spec(), d->snapshot()});
  return out;
}

// Stop checks every millisecond at most: a signal, --duration, --exit-when-idle.
struct StopCheck {
  const fabric_app::FabricOptions& options;
  fabric_app::NodeControl& control;
  std::string stopped_by = "signal";
  std::uint64_t next_check_ns = 0;

  static std::uint64_t ns(double s) { return static_cast<std::uint64_t>(s * 1e9); }
  // `last_busy()`: when the node last received or held a frame.
  template <class LastBusy>
  void operator()(std::uint64_t now, LastBusy&& last_busy) {
    if (now < next_check_ns) return;
    next_check_ns = now + 1'000'000;
    if (signalled != 0) {
      stopped_by = "signal";
      control.stop.store(true);
    } else if (options.duration_s > 0 && now >= ns(options.duration_s)) {
      stopped_by = "duration";
      control.stop.store(true);
    } else if (options.exit_when_idle_s > 0) {
      const std::uint64_t busy = last_busy();
      if (now > busy && now - busy >= ns(options.exit_when_idle_s)) {
        stopped_by = "idle";
        control.stop.store(true);
      }
    }
  }
};

// --ports N: the switch, on this lcore.
int run_switch(const fabric_app::FabricOptions& options) {
  std::string error;
  std::vector<std::unique_ptr<engine::Port>> ports;
  for (const std::string& name : options.port_names) {
    ports.push_back(engine::Port::open(name, port_setup(name, options.mbufs), error));
    if (!ports.back() || !ports.back()->start(error)) {
      std::fprintf(stderr, "metaroce-fabric: %s\n", error.c_str());
      return exit_failed;
    }
  }
  std::vector<std::unique_ptr<fabric_app::Direction>> out;
  std::vector<std::uint16_t> ids;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    engine::ImpairedLinkConfig c;
    c.name = fmt::format("sw_out{}", i);
    c.from_port = ports[i]->id();  // not read: the switch feeds it
    c.to_port = ports[i]->id();
    c.fabric = options.out[i];
    c.mbufs = std::max<std::uint32_t>(1024, options.mbufs / 4);
    c.data_room = port_setup(ports[i]->name(), options.mbufs).mbuf_data_room;
    std::unique_ptr<engine::ImpairedLink> link = engine::ImpairedLink::create(std::move(c), error);
    if (!link) {
      std::fprintf(stderr, "metaroce-fabric: %s\n", error.c_str());
      return exit_failed;
    }
    out.push_back(std::make_unique<fabric_app::Direction>(fmt::format("port{}_out", i), fmt::format("p{}", i),
                                                          ports[i]->id(), std::move(link),
                                                          fabric::to_spec(options.out[i]), true));
    ids.push_back(ports[i]->id());
  }
  fabric_app::SwitchNode node(ids, options.port_names, std::move(out), options.table);
  fabric_app::NodeControl control;
  control.idle_sleep_us = options.idle_sleep_us;
  const engine::TscClock clock;
  node.publish_st(0, true);
  const fabric_app::FabricTelemetry telemetry(node, clock);
  if (!telemetry.registered())
    std::fprintf(stderr, "metaroce-fabric: warning: /metaroce/fabric could not be registered with rte_telemetry "
                         "(the stats lines and --json still work)\n");

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const std::uint64_t stats_interval_ns = StopCheck::ns(options.stats_interval_s);
  std::uint64_t next_stats_ns = stats_interval_ns;
  StopCheck check{options, control};
  std::vector<fabric_app::SwitchPortSnapshot> previous = node.snapshot();
  const auto on_turn = [&](std::uint64_t now) {
    check(now, [&] { return node.snapshot().front().last_busy_ns; });
    if (stats_interval_ns != 0 && now >= next_stats_ns) {
      node.publish_st(now, true);
      std::vector<fabric_app::SwitchPortSnapshot> current = node.snapshot();
      fabric_app::print_switch_stats_line(stdout, static_cast<double>(now) / 1e9, current, previous);
      previous = std::move(current);
      next_stats_ns += stats_interval_ns;
      if (next_stats_ns <= now) next_stats_ns = now + stats_interval_ns;
    }
  };
  fabric_app::run_switch_st(node, clock, control, on_turn);

  fabric_app::SwitchSummary summary;
  summary.duration_s = static_cast<double>(clock.now_ns()) / 1e9;
  summary.stopped_by = check.stopped_by;
  summary.routes = node.table().size();
  summary.ports = node.snapshot();
  for (std::size_t i = 0; i < summary.ports.size(); ++i) {
    const fabric_app::SwitchPortSnapshot& p = summary.ports[i];
    const fabric_app::DirectionTotals& t = p.out;
    fmt::print(stdout,
               "port {} ({}): received {}, no route {}; out: routed here {}, forwarded {}, dropped {} (random_loss {}, "
               "burst_loss {}, queue_full {}, blackhole {}, no_mbuf {}), ecn_marked {}, in flight {}, queue p50 {} "
               "p99 {} max {} bytes\n",
               i, p.name, p.in.received, p.in.dropped_no_route, t.received, t.forwarded, t.dropped(),
               t.dropped_random_loss, t.dropped_burst_loss, t.dropped_queue_full, t.dropped_blackhole,
               t.dropped_no_mbuf, t.ecn_marked, t.in_flight, p.queue.p50_bytes, p.queue.p99_bytes, p.queue.max_bytes);
  }
  int status = exit_ok;
  if (!options.json_path.empty() &&
      !fabric_app::write_json_file(options.json_path, fabric_app::switch_summary_json(summary), error)) {
    std::fprintf(stderr, "metaroce-fabric: %s\n", error.c_str());
    status = exit_failed;
  }
  for (auto& p : ports) p->stop();
  node.destroy_links_st();
  return status;
}

int run(const fabric_app::FabricOptions& options) {
  std::string error;
  if (!engine::start_eal_with_arguments(fabric_app::eal_command_line(options.eal_args), error)) {
    std::fprintf(stderr, "metaroce-fabric: %s\n", error.c_str());
    return exit_failed;
  }
  if (options.ports != 0) return run_switch(options);
  std::unique_ptr<engine::Port> port_a = engine::Port::open(options.port_a, port_setup(options.port_a, options.mbufs), error);
  std::unique_ptr<engine::Port> port_b =
      port_a ? engine::Port::open(options.port_b, port_setup(options.port_b, options.mbufs), error) : nullptr;
  if (!port_a || !port_b || !port_a->start(error) || !port_b->start(error)) {
    std::fprintf(stderr, "metaroce-fabric: %s\n", error.c_str());
    return exit_failed;
  }

  const auto make_link = [&](const char* name, const engine::Port& from, const engine::Port& to,
                             const fabric::FabricConfig& config) {
    engine::ImpairedLinkConfig c;
    c.name = name;
    c.from_port = from.id();
    c.to_port = to.id();
    c.fabric = config;
    c.mbufs = std::max<std::uint32_t>(1024, options.mbufs / 4);
    c.data_room = port_setup(from.name(), options.mbufs).mbuf_data_room;
    return engine::ImpairedLink::create(std::move(c), error);
  };
  std::vector<std::unique_ptr<fabric_app::Direction>> directions;
  for (const bool forward : {true, false}) {
    const engine::Port& from = forward ? *port_a : *port_b;
    const engine::Port& to = forward ? *port_b : *port_a;
    const fabric::FabricConfig& config = forward ? options.a_to_b : options.b_to_a;
    std::unique_ptr<engine::ImpairedLink> link = make_link(forward ? "fab_ab" : "fab_ba", from, to, config);
    if (!link) {
      std::fprintf(stderr, "metaroce-fabric: %s\n", error.c_str());
      return exit_failed;
    }
    directions.push_back(std::make_unique<fabric_app::Direction>(
        forward ? "a_to_b" : "b_to_a", forward ? "a->b" : "b->a", from.id(), std::move(link), fabric::to_spec(config)));
  }

  fabric_app::NodeControl control;
  control.idle_sleep_us = options.idle_sleep_us;
  const engine::TscClock clock;  // time 0 of the specs (blackhole ... at T)
  for (auto& d : directions) d->publish_st(0, true);
  const fabric_app::FabricTelemetry telemetry({directions[0].get(), directions[1].get()}, options.port_a,
                                              options.port_b, clock);
  if (!telemetry.registered())
    std::fprintf(stderr, "metaroce-fabric: warning: /metaroce/fabric could not be registered with rte_telemetry "
                         "(the stats lines and --json still work)\n");

  // B -> A on a worker lcore when EAL gave one.
  Worker worker{{directions[1].get()}, &clock, &control};
  std::vector<fabric_app::Direction*> here = {directions[0].get()};
  const unsigned worker_lcore = rte_get_next_lcore(-1, 1, 0);
  const bool threaded = worker_lcore < RTE_MAX_LCORE && rte_eal_remote_launch(worker_main, &worker, worker_lcore) == 0;
  if (!threaded) here.push_back(directions[1].get());

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const std::uint64_t stats_interval_ns = StopCheck::ns(options.stats_interval_s);
  std::uint64_t next_stats_ns = stats_interval_ns;
  StopCheck check{options, control};
  std::vector<fabric_app::DirectionReport> previous = reports(directions);
  const auto on_turn = [&](std::uint64_t now) {
    const std::uint64_t checked = check.next_check_ns;
    check(now, [&] {
      std::uint64_t last_busy = 0;
      for (const auto& d : directions) last_busy = std::max(last_busy, d->snapshot().last_busy_ns);
      return last_busy;
    });
    if (check.next_check_ns == checked) return;  // at most every millisecond, as the checks
    if (stats_interval_ns != 0 && now >= next_stats_ns) {
      for (fabric_app::Direction* d : here) d->publish_st(now, false);
      std::vector<fabric_app::DirectionReport> current = reports(directions);
      fabric_app::print_stats_line(stdout, static_cast<double>(now) / 1e9, current, previous);
      previous = std::move(current);
      next_stats_ns += stats_interval_ns;
      if (next_stats_ns <= now) next_stats_ns = now + stats_interval_ns;  // after a long stall
    }
  };
  fabric_app::run_directions_st(here, clock, control, on_turn);
  if (threaded) rte_eal_wait_lcore(worker_lcore);
  const double elapsed_s = static_cast<double>(clock.now_ns()) / 1e9;

  fabric_app::RunSummary summary;
  summary.port_a = options.port_a;
  summary.port_b = options.port_b;
  summary.duration_s = elapsed_s;
  summary.lcores = threaded ? 2 : 1;
  summary.stopped_by = check.stopped_by;
  summary.directions = reports(directions);
  for (const fabric_app::DirectionReport& d : summary.directions) {
    const fabric_app::DirectionTotals& t = d.snapshot.totals;
    fmt::print(stdout,
               "{}: received {}, forwarded {}, dropped {} (random_loss {}, burst_loss {}, queue_full {}, blackhole {}, "
               "no_mbuf {}), ecn_marked {}, duplicated {}, corrupted {}, in flight {}\n",
               d.label, t.received, t.forwarded, t.dropped(), t.dropped_random_loss, t.dropped_burst_loss,
               t.dropped_queue_full, t.dropped_blackhole, t.dropped_no_mbuf, t.ecn_marked, t.duplicated, t.corrupted,
               t.in_flight);
  }
  int status = exit_ok;
  if (!options.json_path.empty() && !fabric_app::write_summary(options.json_path, summary, error)) {
    std::fprintf(stderr, "metaroce-fabric: %s\n", error.c_str());
    status = exit_failed;
  }

  // Teardown: the ports stop first (a NIC's tx queue gives its mbufs back),
  // then the links free what they hold, then the ports' pools go.
  port_a->stop();
  port_b->stop();
  for (auto& d : directions) d->destroy_link_st();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  fabric_app::FabricOptions options;
  std::string message;
  switch (fabric_app::parse_fabric_options(argc, argv, options, message)) {
    case fabric_app::ParseOutcome::help:
      std::fputs(message.c_str(), stdout);
      return exit_ok;
    case fabric_app::ParseOutcome::error:
      std::fprintf(stderr, "metaroce-fabric: %s\nTry 'metaroce-fabric --help'.\n", message.c_str());
      return exit_usage;
    case fabric_app::ParseOutcome::run:
      break;
  }
  const int status = run(options);
  if (engine::eal_started()) rte_eal_cleanup();
  return status;
}
