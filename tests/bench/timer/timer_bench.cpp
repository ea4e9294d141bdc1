// `tools/bench timer`: the timing wheel against DPDK's rte_timer and a
// std::multimap, for arm+cancel, re-arm and arm+fire at 1k, 100k and 1M
// pending timers. Prints Google Benchmark's table, then one JSON line.
//
// Patterns (identical for the three where time allows):
//  * arm_cancel: N timers pending, spread over the next kSpread ticks; each
//    iteration arms one more timer at a random delay and cancels it;
//  * rearm: each iteration moves a random pending timer to a new random
//    deadline;
//  * fire: the N timers are periodic (each callback re-arms its timer one
//    period later) and time advances by kSpread/1024 per iteration, firing
//    about N/1024 timers each time; the figure is ns per fired timer,
//    re-arm included. rte_timer reads the TSC and cannot run in virtual
//    time: there every timer is due at once and each rte_timer_manage()
//    fires (and re-arms) all N.
#include <benchmark/benchmark.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_timer.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "timer/wheel.hpp"

namespace {

using metaroce::timer::Tick;
using metaroce::timer::Timer;
using metaroce::timer::Wheel;

constexpr Tick kSpread = Tick{1} << 20;  // ~1 ms of ns ticks: RTO-like
constexpr Tick kFireStep = kSpread / 1024;
constexpr std::size_t kRandomCount = 1 << 16;  // power of two

// Pre-drawn random delays and indexes so the loops time the timers only.
struct RandomTable {
    std::vector<Tick> delays;
    std::vector<std::uint32_t> indexes;
    RandomTable(std::size_t pending, std::uint64_t seed) : delays(kRandomCount), indexes(kRandomCount) {
        std::mt19937_64 rng(seed);
        for (auto& delay : delays) delay = 1 + rng() % kSpread;
        for (auto& index : indexes) index = static_cast<std::uint32_t>(rng() % pending);
    }
};

std::size_t pending_arg(const benchmark::State& state) {
    return static_cast<std::size_t>(state.range(0));
}

// Seconds per fired timer (the console prints it with an SI prefix, "7.9n").
benchmark::Counter per_timer(std::size_t fired) {
    return benchmark::Counter(static_cast<double>(fired),
                              benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// ---- timing wheel -------------------------------------------------------

struct WheelTimer {
    Timer timer{&WheelTimer::on_fire};
    static void on_fire(Timer& timer, Wheel& wheel, Tick) {
        wheel.arm(timer, timer.deadline() + kSpread);  // periodic
    }
};

struct WheelWorld {
    // Declared first so the wheel, destroyed first, disarms them all.
    std::unique_ptr<WheelTimer[]> timers;
    Wheel wheel{1};
    explicit WheelWorld(std::size_t pending, const RandomTable& random)
        : timers(new WheelTimer[pending]) {
        for (std::size_t i = 0; i < pending; ++i) {
            wheel.arm(timers[i].timer, wheel.now() + random.delays[i % kRandomCount] +
                                           (i / kRandomCount) % 3);
        }
    }
};

void wheel_arm_cancel(benchmark::State& state) {
    const RandomTable random(pending_arg(state), 1);
    WheelWorld world(pending_arg(state), random);
    WheelTimer probe;
    std::size_t i = 0;
    for (auto _ : state) {
        world.wheel.arm(probe.timer, world.wheel.now() + random.delays[i++ & (kRandomCount - 1)]);
        world.wheel.cancel(probe.timer);
    }
    benchmark::DoNotOptimize(world.wheel.pending());
}

void wheel_rearm(benchmark::State& state) {
    const RandomTable random(pending_arg(state), 2);
    WheelWorld world(pending_arg(state), random);
    std::size_t i = 0;
    for (auto _ : state) {
        const std::size_t pick = i++ & (kRandomCount - 1);
        world.wheel.rearm(world.timers[random.indexes[pick]].timer,
                          world.wheel.now() + random.delays[pick]);
    }
    benchmark::DoNotOptimize(world.wheel.pending());
}

void wheel_fire(benchmark::State& state) {
    const RandomTable random(pending_arg(state), 3);
    WheelWorld world(pending_arg(state), random);
    Tick now = world.wheel.now();
    std::size_t fired = 0;
    for (auto _ : state) {
        now += kFireStep;
        fired += world.wheel.advance(now);
    }
    state.counters["per_timer"] = per_timer(fired);
}

// ---- rte_timer ----------------------------------------------------------

struct RteTimer {
    rte_timer timer;
    RteTimer() { rte_timer_init(&timer); }
};

void rte_rearm_now(rte_timer* timer, void*) {
    rte_timer_reset(timer, 0, SINGLE, rte_lcore_id(), &rte_rearm_now, nullptr);
}

void rte_noop(rte_timer*, void*) {}

struct RteWorld {
    std::unique_ptr<RteTimer[]> timers;
    std::size_t pending;
    RteWorld(std::size_t count, const RandomTable& random) : timers(new RteTimer[count]), pending(count) {
        for (std::size_t i = 0; i < count; ++i) {
            rte_timer_reset(&timers[i].timer, random.delays[i % kRandomCount], SINGLE,
                            rte_lcore_id(), &rte_noop, nullptr);
        }
    }
    ~RteWorld() {
        for (std::size_t i = 0; i < pending; ++i) rte_timer_stop(&timers[i].timer);
    }
};

void rte_arm_cancel(benchmark::State& state) {
    const RandomTable random(pending_arg(state), 1);
    RteWorld world(pending_arg(state), random);
    RteTimer probe;
    std::size_t i = 0;
    for (auto _ : state) {
        rte_timer_reset(&probe.timer, random.delays[i++ & (kRandomCount - 1)], SINGLE,
                        rte_lcore_id(), &rte_noop, nullptr);
        rte_timer_stop(&probe.timer);
    }
}

void rte_rearm(benchmark::State& state) {
    const RandomTable random(pending_arg(state), 2);
    RteWorld world(pending_arg(state), random);
    std::size_t i = 0;
    for (auto _ : state) {
        const std::size_t pick = i++ & (kRandomCount - 1);
        rte_timer_reset(&world.timers[random.indexes[pick]].timer, random.delays[pick], SINGLE,
                        rte_lcore_id(), &rte_noop, nullptr);
    }
}

void rte_fire(benchmark::State& state) {
    const std::size_t pending = pending_arg(state);
    std::unique_ptr<RteTimer[]> timers(new RteTimer[pending]);
    for (std::size_t i = 0; i < pending; ++i) rte_rearm_now(&timers[i].timer, nullptr);
    std::size_t fired = 0;
    for (auto _ : state) {
        rte_timer_manage();
        fired += pending;
    }
    for (std::size_t i = 0; i < pending; ++i) rte_timer_stop(&timers[i].timer);
    state.counters["per_timer"] = per_timer(fired);
}

// ---- std::multimap ------------------------------------------------------

struct MapWorld {
    using Map = std::multimap<Tick, std::size_t>;
    Map map;
    std::vector<Map::iterator> where;
    Tick now = 1;
    MapWorld(std::size_t pending, const RandomTable& random) : where(pending) {
        for (std::size_t i = 0; i < pending; ++i) {
            where[i] = map.emplace(now + random.delays[i % kRandomCount], i);
        }
    }
};

void map_arm_cancel(benchmark::State& state) {
    const RandomTable random(pending_arg(state), 1);
    MapWorld world(pending_arg(state), random);
    std::size_t i = 0;
    for (auto _ : state) {
        const auto it = world.map.emplace(world.now + random.delays[i++ & (kRandomCount - 1)], 0);
        world.map.erase(it);
    }
}

void map_rearm(benchmark::State& state) {
    const RandomTable random(pending_arg(state), 2);
    MapWorld world(pending_arg(state), random);
    std::size_t i = 0;
    for (auto _ : state) {
        const std::size_t pick = i++ & (kRandomCount - 1);
        const std::size_t index = random.indexes[pick];
        world.map.erase(world.where[index]);
        world.where[index] = world.map.emplace(world.now + random.delays[pick], index);
    }
}

void map_fire(benchmark::State& state) {
    const RandomTable random(pending_arg(state), 3);
    MapWorld world(pending_arg(state), random);
    std::size_t fired = 0;
    for (auto _ : state) {
        world.now += kFireStep;
        while (!world.map.empty() && world.map.begin()->first <= world.now) {
            auto node = world.map.extract(world.map.begin());
            node.key() += kSpread;  // periodic, like the wheel's callback
            world.where[node.mapped()] = world.map.insert(std::move(node));
            ++fired;
        }
    }
    state.counters["per_timer"] = per_timer(fired);
}

// ---- reporting ----------------------------------------------------------

// Keeps each run's figure in ns (per operation, or per fired timer).
class FigureReporter : public benchmark::ConsoleReporter {
  public:
    std::map<std::string, double> figures;

    // Colours only on a terminal: tools/bench reads the last line as JSON.
    FigureReporter()
        : ConsoleReporter(isatty(STDOUT_FILENO) != 0 ? OO_ColorTabular : OO_Tabular) {}

    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        for (const Run& run : runs) {
            if (run.run_type != Run::RT_Iteration) continue;
            const auto per_timer = run.counters.find("per_timer");
            figures[run.benchmark_name()] = per_timer != run.counters.end()
                                                ? per_timer->second.value * 1e9
                                                : run.GetAdjustedRealTime();
        }
    }
};

struct Suite {
    const char* name;
    void (*function)(benchmark::State&);
    // Iterations per pending count (1k, 100k, 1M): fixed, so each world is
    // built once and the whole run stays within two minutes.
    std::int64_t iterations[3];
};

void register_all() {
    const Suite suites[] = {
        {"wheel/arm_cancel", &wheel_arm_cancel, {20'000'000, 20'000'000, 10'000'000}},
        {"wheel/rearm", &wheel_rearm, {20'000'000, 10'000'000, 4'000'000}},
        {"wheel/fire", &wheel_fire, {400'000, 8192, 4096}},
        {"rte_timer/arm_cancel", &rte_arm_cancel, {2'000'000, 1'000'000, 500'000}},
        {"rte_timer/rearm", &rte_rearm, {2'000'000, 1'000'000, 500'000}},
        {"rte_timer/fire", &rte_fire, {2000, 20, 3}},
        {"multimap/arm_cancel", &map_arm_cancel, {5'000'000, 2'000'000, 1'000'000}},
        {"multimap/rearm", &map_rearm, {5'000'000, 2'000'000, 1'000'000}},
        {"multimap/fire", &map_fire, {400'000, 8192, 4096}},
    };
    const std::int64_t pendings[3] = {1'000, 100'000, 1'000'000};
    for (const Suite& suite : suites) {
        for (int size = 0; size < 3; ++size) {
            benchmark::RegisterBenchmark(suite.name, suite.function)
                ->Arg(pendings[size])
                ->Iterations(suite.iterations[size])
                ->Unit(benchmark::kNanosecond);
        }
    }
}

// Figures at 100k pending; a benchmark filtered out reads as null.
std::string json_line(const std::map<std::string, double>& figures) {
    const auto figure = [&](const std::string& name) {
        for (const auto& [key, value] : figures) {
            if (key.rfind(name + "/100000/", 0) == 0) return value;
        }
        return -1.0;
    };
    const auto number = [](double value) {
        if (value < 0) return std::string("null");
        char text[32];
        std::snprintf(text, sizeof text, "%.2f", value);
        return std::string(text);
    };
    const double arm_cancel = figure("wheel/arm_cancel");
    const double rte_arm_cancel = figure("rte_timer/arm_cancel");
    const std::pair<const char*, double> fields[] = {
        {"arm_cancel_ns", arm_cancel},
        {"rearm_ns", figure("wheel/rearm")},
        {"fire_ns_per_timer", figure("wheel/fire")},
        {"rte_timer_arm_cancel_ns", rte_arm_cancel},
        {"multimap_arm_cancel_ns", figure("multimap/arm_cancel")},
        {"rte_timer_rearm_ns", figure("rte_timer/rearm")},
        {"rte_timer_fire_ns_per_timer", figure("rte_timer/fire")},
        {"multimap_rearm_ns", figure("multimap/rearm")},
        {"multimap_fire_ns_per_timer", figure("multimap/fire")},
        {"speedup_vs_rte_timer_arm_cancel",
         arm_cancel > 0 && rte_arm_cancel > 0 ? rte_arm_cancel / arm_cancel : -1.0},
    };
    std::string line = "{\"bench\":\"timer\",\"pending\":100000";
    for (const auto& [key, value] : fields) {
        line += ",\"";
        line += key;
        line += "\":" + number(value);
    }
    return line + "}";
}

}  // namespace

int main(int argc, char** argv) {
    // EAL gets fixed arguments: rte_timer needs it, nothing else does.
    char program[] = "metaroce-bench-timer";
    char cores[] = "-l";
    char core_list[] = "0";
    char no_huge[] = "--no-huge";
    char memory[] = "-m";
    char memory_mb[] = "512";
    char no_shconf[] = "--no-shconf";
    char no_pci[] = "--no-pci";
    char log_level[] = "--log-level=warning";
    char* eal_args[] = {program, cores, core_list, no_huge, memory, memory_mb,
                        no_shconf, no_pci, log_level};
    if (rte_eal_init(static_cast<int>(std::size(eal_args)), eal_args) < 0) {
        std::cerr << "rte_eal_init failed: run where --no-huge EAL can start (see DPDK logs)\n";
        return 1;
    }
    if (rte_timer_subsystem_init() < 0) {
        std::cerr << "rte_timer_subsystem_init failed\n";
        return 1;
    }
    benchmark::Initialize(&argc, argv);
    register_all();
    FigureReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    std::cout << json_line(reporter.figures) << std::endl;
    rte_timer_subsystem_finalize();
    rte_eal_cleanup();
    return 0;
}
