// Property tests: the wheel against a reference model (a multimap of
// deadlines plus per-timer state) over millions of seeded random operations,
// with callbacks that arm, re-arm and cancel timers, including due ones.
//
// Checked for every firing: the model has the timer armed with that deadline
// (so cancelled and re-armed timers never fire); never early (deadline <=
// now); the wheel fires it at exactly its expiry (deadline rounded up to its
// level's slot width) and expiries never decrease within an advance.
// Checked after every advance: no pending timer is past its expiry (so the
// fired set is exact), and the wheel's pending count equals the model's.
// Checked at every arm: the level is the finest that reaches the deadline.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "timer/wheel.hpp"

namespace metaroce::timer {
namespace {

constexpr Tick kHour = 3'600'000'000'000;  // in ns ticks

// Sanitized builds run 4x fewer operations to stay within CI's budget;
// METAROCE_TIMER_OPS_SCALE (a percentage) overrides both.
double ops_scale() {
    if (const char* scale = std::getenv("METAROCE_TIMER_OPS_SCALE")) {
        return std::strtod(scale, nullptr) / 100.0;
    }
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
    return 0.25;
#else
    return 1.0;
#endif
}

Tick round_up(Tick deadline, Tick granularity) {
    return (deadline + granularity - 1) / granularity * granularity;
}

struct Scenario {
    std::uint64_t seed;
    int timers;
    long operations;
    // Deadlines drawn from a few spots so that many timers share a slot.
    bool crowd_slots;
    // Percentage of firings whose callback also acts on the wheel.
    int callback_action_percent;
};

class ModelHarness {
  public:
    explicit ModelHarness(const Scenario& scenario)
        : scenario_(scenario), rng_(scenario.seed), models_(scenario.timers) {
        for (int id = 0; id < scenario.timers; ++id) {
            entries_.push_back(std::make_unique<Entry>(this, id));
        }
    }

    ~ModelHarness() {
        for (auto& entry : entries_) wheel_.cancel(entry->timer);
    }

    void run() {
        for (long op = 0; op < scenario_.operations && failures_ < kMaxFailures; ++op) {
            const unsigned pick = draw(100);
            if (pick < 45) {
                arm(random_id(), draw_deadline(last_now_));
            } else if (pick < 62) {
                cancel(random_id());
            } else {
                advance(last_now_ + draw_step());
            }
            check(wheel_.pending() == model_by_deadline_.size(), "pending count");
            if ((op & 255) == 0) check_next_deadline();
        }
        // Drain: everything pending fires within one big jump.
        draining_ = true;
        advance(last_now_ + 2 * Wheel::kRange + (Tick{1} << 41));
        check(wheel_.pending() == 0, "drained");
        EXPECT_EQ(failures_, 0);
        EXPECT_GT(fired_total_, scenario_.operations / 20);
    }

  private:
    static constexpr int kMaxFailures = 10;

    struct Entry {
        Timer timer;
        ModelHarness* harness;
        int id;
        Entry(ModelHarness* owner, int index)
            : timer(&Entry::on_fire, this), harness(owner), id(index) {}
        static void on_fire(Timer& timer, Wheel&, Tick now) {
            auto* entry = static_cast<Entry*>(timer.owner());
            entry->harness->on_fire(entry->id, now);
        }
    };

    struct Model {
        bool armed = false;
        Tick deadline = 0;
        std::uint64_t arm_phase = 0;
        std::multimap<Tick, int>::iterator where;
    };

    void check(bool ok, const std::string& what) {
        if (ok) return;
        if (++failures_ <= kMaxFailures) {
            ADD_FAILURE() << "seed " << scenario_.seed << ": " << what << " (now " << last_now_
                          << ", phase " << phase_ << ")";
        }
    }

    unsigned draw(unsigned bound) {
        return static_cast<unsigned>(rng_() % bound);
    }
    Tick draw_range(Tick low, Tick high) {  // inclusive
        return low + rng_() % (high - low + 1);
    }
    int random_id() { return static_cast<int>(draw(static_cast<unsigned>(scenario_.timers))); }

    Tick draw_deadline(Tick base) {
        if (scenario_.crowd_slots) {
            // Three spots on different levels; base rounded so that the
            // same spot repeats across many arms.
            static constexpr Tick kSpots[] = {64, 4096, 1 << 20};
            const Tick spot = kSpots[draw(3)];
            return (base / spot + 1 + draw(2)) * spot;
        }
        const unsigned pick = draw(100);
        if (pick < 10) return base - std::min<Tick>(base, draw(100));  // past or now
        if (pick < 40) return base + draw_range(1, 64);
        if (pick < 65) return base + draw_range(1, 4096);
        if (pick < 85) return base + draw_range(1, Tick{1} << 24);
        if (pick < 95) return base + draw_range(1, Tick{1} << 33);
        return base + draw_range(Tick{1} << 33, Tick{1} << 40);  // beyond range
    }

    Tick draw_step() {
        const unsigned pick = draw(100);
        if (pick < 20) return 0;  // empty advance
        if (pick < 60) return draw_range(1, 16);
        if (pick < 80) return draw_range(1, 4096);
        if (pick < 95) return draw_range(1, Tick{1} << 24);
        if (pick < 99) return draw_range(1, Tick{1} << 34);
        return kHour + draw_range(0, kHour);  // hours in one advance
    }

    void model_disarm(int id) {
        Model& model = models_[static_cast<std::size_t>(id)];
        model_by_deadline_.erase(model.where);
        model.armed = false;
    }

    void arm(int id, Tick deadline) {
        Timer& timer = entries_[static_cast<std::size_t>(id)]->timer;
        Model& model = models_[static_cast<std::size_t>(id)];
        if (model.armed) model_disarm(id);
        wheel_.rearm(timer, deadline);
        model.armed = true;
        model.deadline = deadline;
        model.arm_phase = phase_;
        model.where = model_by_deadline_.emplace(deadline, id);
        check_placement(timer, deadline);
    }

    void cancel(int id) {
        Timer& timer = entries_[static_cast<std::size_t>(id)]->timer;
        const bool was_armed = models_[static_cast<std::size_t>(id)].armed;
        check(wheel_.cancel(timer) == was_armed, "cancel result");
        if (was_armed) model_disarm(id);
        check(!timer.armed(), "armed after cancel");
    }

    // The level must be the finest whose 64 slots reach the deadline.
    void check_placement(const Timer& timer, Tick deadline) {
        const Tick horizon = in_advance_ ? advance_now_ : last_now_;
        const Tick g = timer.granularity();
        if (deadline <= horizon) {
            check(g == 0, "due timer not on the due list");
            return;
        }
        const Tick wheel_now = wheel_.now();
        check(g != 0, "future timer on the due list");
        if (g == 0) return;
        const Tick top = Wheel::level_granularity(Wheel::kLevels - 1);
        const bool fits = round_up(deadline, g) / g - wheel_now / g <= Wheel::kSlotsPerLevel;
        check(fits || g == top, "level does not reach the deadline");
        // The next finer level must not have reached it.
        check(g == 1 || 62 * g < 8 * (deadline - wheel_now), "coarser level than needed");
    }

    void on_fire(int id, Tick now) {
        ++fired_total_;
        ++fired_in_advance_;
        Model& model = models_[static_cast<std::size_t>(id)];
        const Timer& timer = entries_[static_cast<std::size_t>(id)]->timer;
        check(in_advance_ && now == advance_now_, "fired outside advance");
        check(model.armed, "fired a timer the model has cancelled");
        if (!model.armed) return;
        check(timer.deadline() == model.deadline, "fired with a stale deadline");
        check(model.deadline <= now, "fired early");
        const Tick g = timer.granularity();
        if (g == 0) {
            check(model.arm_phase < advance_start_phase_, "due timer armed in this advance fired");
            check(!wheel_fired_in_advance_, "due list fired after wheel timers");
        } else {
            const Tick expiry = round_up(model.deadline, g);
            check(model.arm_phase < advance_start_phase_, "timer armed in this advance fired");
            check(wheel_.now() == expiry, "fired away from its expiry");
            check(expiry >= last_expiry_, "fired out of expiry order");
            check(expiry - model.deadline <= g - 1, "lateness bound");
            last_expiry_ = expiry;
            wheel_fired_in_advance_ = true;
        }
        model_disarm(id);

        if (draining_ ||
            draw(100) >= static_cast<unsigned>(scenario_.callback_action_percent)) {
            return;
        }
        // Deadlines relative to the advance's now; some are already due.
        switch (draw(5)) {
            case 0:
                arm(id, draw_deadline(now));  // re-arm itself
                break;
            case 1:
                cancel(random_id());  // often a timer due in this advance
                break;
            case 2:
                arm(random_id(), draw_deadline(now));
                break;
            case 3:
                arm(id, now);  // itself, for "now": must wait for the next advance
                break;
            default: {
                // Cancel and re-arm the next timer in deadline order, which
                // is likely due in this same advance.
                auto next = model_by_deadline_.lower_bound(now > 64 ? now - 64 : 0);
                if (next != model_by_deadline_.end()) {
                    const int other = next->second;
                    if (draw(2) == 0) {
                        cancel(other);
                    } else {
                        arm(other, draw_deadline(now));
                    }
                }
                break;
            }
        }
    }

    void advance(Tick now) {
        advance_start_phase_ = ++phase_;
        in_advance_ = true;
        advance_now_ = now;
        last_expiry_ = 0;
        wheel_fired_in_advance_ = false;
        fired_in_advance_ = 0;
        const std::size_t fired = wheel_.advance(now);
        in_advance_ = false;
        ++phase_;
        check(fired == fired_in_advance_, "advance's fired count");
        if (now > last_now_) last_now_ = now;
        check(wheel_.now() == last_now_, "wheel time after advance");

        // Exactness: whatever is still pending with a deadline <= now was
        // either armed during this advance (then it is on the due list) or
        // is held late within its level's granularity.
        for (auto it = model_by_deadline_.begin();
             it != model_by_deadline_.end() && it->first <= now; ++it) {
            const Model& model = models_[static_cast<std::size_t>(it->second)];
            const Tick g = entries_[static_cast<std::size_t>(it->second)]->timer.granularity();
            if (model.arm_phase >= advance_start_phase_) {
                check(g == 0, "timer armed in the past during advance is not due");
            } else {
                check(g != 0 && round_up(model.deadline, g) > now, "missed a due timer");
            }
        }
    }

    void check_next_deadline() {
        Tick earliest = kNever;
        bool any_due = false;
        bool any_top = false;
        const Tick top = Wheel::level_granularity(Wheel::kLevels - 1);
        for (const auto& [deadline, id] : model_by_deadline_) {
            const Tick g = entries_[static_cast<std::size_t>(id)]->timer.granularity();
            if (g == 0) {
                any_due = true;
                continue;
            }
            any_top |= g == top;
            earliest = std::min(earliest, round_up(deadline, g));
        }
        const Tick next = wheel_.next_deadline();
        if (any_due) {
            check(next == wheel_.now(), "next_deadline with due timers");
        } else if (any_top) {
            check(next <= earliest, "next_deadline later than a timer");  // parked ones
        } else {
            check(next == earliest, "next_deadline not the earliest expiry");
        }
    }

    Scenario scenario_;
    std::mt19937_64 rng_;
    Wheel wheel_;
    std::vector<std::unique_ptr<Entry>> entries_;
    std::vector<Model> models_;
    std::multimap<Tick, int> model_by_deadline_;
    Tick last_now_ = 0;
    std::uint64_t phase_ = 0;  // +1 at each advance's start and end
    std::uint64_t advance_start_phase_ = 0;
    bool in_advance_ = false;
    Tick advance_now_ = 0;
    Tick last_expiry_ = 0;
    bool wheel_fired_in_advance_ = false;
    std::size_t fired_in_advance_ = 0;
    long fired_total_ = 0;
    int failures_ = 0;
    bool draining_ = false;
};

long scaled(long operations) {
    const long ops = static_cast<long>(static_cast<double>(operations) * ops_scale());
    return ops > 1000 ? ops : 1000;
}

TEST(TimerWheelProperty, ManyTimersMixedDeadlines) {
    for (const std::uint64_t seed : {1u, 2u, 3u}) {
        ModelHarness({seed, 1000, scaled(3'000'000), false, 30}).run();
    }
}

TEST(TimerWheelProperty, FewTimersHeavyRearmInCallbacks) {
    for (const std::uint64_t seed : {11u, 12u}) {
        ModelHarness({seed, 16, scaled(2'000'000), false, 90}).run();
    }
}

TEST(TimerWheelProperty, CrowdedSlots) {
    for (const std::uint64_t seed : {21u, 22u}) {
        ModelHarness({seed, 5000, scaled(1'000'000), true, 50}).run();
    }
}

// 100k timers on one deadline; callbacks cancel and re-arm others of the
// same slot while it fires.
TEST(TimerWheelProperty, OneSlotStorm) {
    struct Storm {
        std::vector<std::unique_ptr<Timer>> timers;
        std::mt19937_64 rng{31};
        Tick deadline = 0;
        long fired = 0;
        long cancelled = 0;
    } storm;
    const int count = static_cast<int>(scaled(100'000));
    Wheel wheel;
    auto on_fire = [](Timer& timer, Wheel& owner_wheel, Tick now) {
        auto* state = static_cast<Storm*>(timer.owner());
        ++state->fired;
        EXPECT_GE(now, state->deadline);
        const std::size_t victim = state->rng() % state->timers.size();
        Timer& other = *state->timers[victim];
        if (state->rng() % 2 == 0) {
            state->cancelled += owner_wheel.cancel(other) ? 1 : 0;
        } else if (other.armed()) {
            owner_wheel.rearm(other, now + 1000);  // pushed out of this advance
        }
    };
    for (int i = 0; i < count; ++i) {
        storm.timers.push_back(std::make_unique<Timer>(+on_fire, &storm));
    }
    storm.deadline = 5000;
    for (auto& timer : storm.timers) wheel.arm(*timer, storm.deadline);
    const std::size_t fired = wheel.advance(6000);
    EXPECT_EQ(static_cast<long>(fired), storm.fired);
    // Every timer either fired once, was cancelled, or was pushed later.
    const std::size_t pushed = wheel.pending();
    EXPECT_GT(pushed, 0u);
    EXPECT_EQ(storm.fired + storm.cancelled + static_cast<long>(pushed), count);
    wheel.advance(6000);
    EXPECT_EQ(wheel.pending(), pushed);  // none due yet
    for (auto& timer : storm.timers) wheel.cancel(*timer);
    EXPECT_EQ(wheel.pending(), 0u);
}

}  // namespace
}  // namespace metaroce::timer
