// metaroce-fabric: a two-port impairment node between any two DPDK ports
// (doc/APPS.md, "metaroce-fabric"; doc/FABRIC.md, "metaroce-fabric").
//
// Frames received on port A go through the a-to-b fabric model and leave on
// port B, and the other way round. One lcore forwards both directions; when
// EAL gives a second lcore (-l 0-1), B -> A runs there. With --lcores N each
// port has N queues and each direction N lanes (queue k to queue k), spread
// over EAL's lcores. The delay lines hold
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
#include <thread>
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
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  if (!engine::start_eal_with_arguments(fabric_app::eal_command_line(options.eal_args, options.lanes, cpus), error)) {
    std::fprintf(stderr, "metaroce-fabric: %s\n", error.c_str());
    return exit_failed;
  }
  if (options.ports != 0) return run_switch(options);
  const std::uint16_t lanes = options.lanes;
  engine::PortSetup setup_a = port_setup(options.port_a, options.mbufs);
  engine::PortSetup setup_b = port_setup(options.port_b, options.mbufs);
  setup_a.queues = setup_b.queues = lanes;
  std::unique_ptr<engine::Port> port_a = engine::Port::open(options.port_a, setup_a, error);
  std::unique_ptr<engine::Port> port_b = port_a ? engine::Port::open(options.port_b, setup_b, error) : nullptr;
  if (!port_a || !port_b || !port_a->start(error) || !port_b->start(error)) {
    std::fprintf(stderr, "metaroce-fabric: %s\n", error.c_str());
    return exit_failed;
  }

  // Lane k of each direction: rx queue k of one port, tx queue k of the
  // other. In `lanes_of` order: a->b lane 0, b->a lane 0, a->b lane 1, ...
  std::vector<std::unique_ptr<fabric_app::Direction>> units;
  std::vector<fabric_app::DirectionLanes> directions = {
      {"a_to_b", "a->b", fabric::to_spec(options.a_to_b), {}},
      {"b_to_a", "b->a", fabric::to_spec(options.b_to_a), {}},
  };
  for (std::uint16_t k = 0; k < lanes; ++k)
    for (const bool forward : {true, false}) {
      const engine::Port& from = forward ? *port_a : *port_b;
      const engine::Port& to = forward ? *port_b : *port_a;
      const fabric::FabricConfig config = fabric_app::lane_config(forward ? options.a_to_b : options.b_to_a, lanes, k);
      engine::ImpairedLinkConfig c;
      c.name = lanes == 1 ? (forward ? "fab_ab" : "fab_ba") : fmt::format("{}{}", forward ? "fab_ab" : "fab_ba", k);
      c.from_port = from.id();
      c.from_queue = k;
      c.to_port = to.id();
      c.to_queue = k;
      c.fabric = config;
      c.mbufs = std::max<std::uint32_t>(1024, options.mbufs / 4 / lanes);
      c.data_room = (forward ? setup_a : setup_b).mbuf_data_room;
      std::unique_ptr<engine::ImpairedLink> link = engine::ImpairedLink::create(std::move(c), error);
      if (!link) {
        std::fprintf(stderr, "metaroce-fabric: %s%s\n", lanes == 1 ? "" : fmt::format("lane {}: ", k).c_str(),
                     error.c_str());
        return exit_failed;
      }
      fabric_app::DirectionLanes& d = directions[forward ? 0 : 1];
      units.push_back(std::make_unique<fabric_app::Direction>(d.name, d.label, from.id(), std::move(link),
                                                              fabric::to_spec(config), false, k));
      d.lanes.push_back(units.back().get());
    }

  // Unit i on the i-th lcore of EAL's (main first), round robin when they
  // are fewer: with one lcore everything runs here, with two B -> A runs on
  // the second, with 2 x lanes every lane of each direction has its own.
  std::vector<unsigned> lcores = {rte_get_main_lcore()};
  for (unsigned l = rte_get_next_lcore(-1, 1, 0); l < RTE_MAX_LCORE; l = rte_get_next_lcore(l, 1, 0))
    lcores.push_back(l);
  lcores.resize(std::min(lcores.size(), units.size()));
  std::vector<Worker> workers(lcores.size());
  for (std::size_t i = 0; i < units.size(); ++i) {
    units[i]->set_lcore(lcores[i % lcores.size()]);
    workers[i % lcores.size()].directions.push_back(units[i].get());
  }

  fabric_app::NodeControl control;
  control.idle_sleep_us = options.idle_sleep_us;
  const engine::TscClock clock;  // time 0 of the specs (blackhole ... at T)
  for (auto& u : units) u->publish_st(0, true);
  const fabric_app::FabricTelemetry telemetry(directions, options.port_a, options.port_b, clock);
  if (!telemetry.registered())
    std::fprintf(stderr, "metaroce-fabric: warning: /metaroce/fabric could not be registered with rte_telemetry "
                         "(the stats lines and --json still work)\n");

  std::vector<unsigned> launched;
  for (std::size_t w = 1; w < workers.size(); ++w) {
    workers[w].clock = &clock;
    workers[w].control = &control;
    if (rte_eal_remote_launch(worker_main, &workers[w], lcores[w]) == 0) {
      launched.push_back(lcores[w]);
    } else {  // then this lcore turns them
      for (fabric_app::Direction* d : workers[w].directions) {
        d->set_lcore(lcores[0]);
        workers[0].directions.push_back(d);
      }
    }
  }
  const std::vector<fabric_app::Direction*>& here = workers[0].directions;

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const std::uint64_t stats_interval_ns = StopCheck::ns(options.stats_interval_s);
  std::uint64_t next_stats_ns = stats_interval_ns;
  StopCheck check{options, control};
  std::vector<fabric_app::DirectionReport> previous = fabric_app::direction_reports(directions);
  const auto on_turn = [&](std::uint64_t now) {
    const std::uint64_t checked = check.next_check_ns;
    check(now, [&] {
      std::uint64_t last_busy = 0;
      for (const auto& u : units) last_busy = std::max(last_busy, u->snapshot().last_busy_ns);
      return last_busy;
    });
    if (check.next_check_ns == checked) return;  // at most every millisecond, as the checks
    if (stats_interval_ns != 0 && now >= next_stats_ns) {
      for (fabric_app::Direction* d : here) d->publish_st(now, false);
      std::vector<fabric_app::DirectionReport> current = fabric_app::direction_reports(directions);
      fabric_app::print_stats_line(stdout, static_cast<double>(now) / 1e9, current, previous);
      previous = std::move(current);
      next_stats_ns += stats_interval_ns;
      if (next_stats_ns <= now) next_stats_ns = now + stats_interval_ns;  // after a long stall
    }
  };
  fabric_app::run_directions_st(here, clock, control, on_turn);
  for (const unsigned l : launched) rte_eal_wait_lcore(l);
  const double elapsed_s = static_cast<double>(clock.now_ns()) / 1e9;

  fabric_app::RunSummary summary;
  summary.port_a = options.port_a;
  summary.port_b = options.port_b;
  summary.duration_s = elapsed_s;
  summary.lcores = static_cast<unsigned>(1 + launched.size());
  summary.lanes = lanes;
  summary.stopped_by = check.stopped_by;
  summary.directions = fabric_app::direction_reports(directions);
  for (const fabric_app::DirectionReport& d : summary.directions) {
    const fabric_app::DirectionTotals& t = d.snapshot.totals;
    fmt::print(stdout,
               "{}: received {}, forwarded {}, dropped {} (random_loss {}, burst_loss {}, queue_full {}, blackhole {}, "
               "no_mbuf {}), ecn_marked {}, duplicated {}, corrupted {}, in flight {}\n",
               d.label, t.received, t.forwarded, t.dropped(), t.dropped_random_loss, t.dropped_burst_loss,
               t.dropped_queue_full, t.dropped_blackhole, t.dropped_no_mbuf, t.ecn_marked, t.duplicated, t.corrupted,
               t.in_flight);
    if (lanes > 1)
      for (const fabric_app::LaneReport& l : d.lanes)
        fmt::print(stdout, "  lane {} (lcore {}): received {}, forwarded {}, dropped {}, ecn_marked {}, in flight {}\n",
                   l.lane, l.lcore, l.snapshot.totals.received, l.snapshot.totals.forwarded,
                   l.snapshot.totals.dropped(), l.snapshot.totals.ecn_marked, l.snapshot.totals.in_flight);
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
  for (auto& u : units) u->destroy_link_st();
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
