// Unit tests of the timing wheel: each contract clause on a hand-picked case.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "timer/wheel.hpp"

namespace metaroce::timer {
namespace {

// Records every firing as (timer index, advance's now).
struct FireLog {
    struct Fired {
        int id;
        Tick now;
    };
    std::vector<Fired> fired;
};

struct Probe {
    Timer timer;
    FireLog* log;
    int id;
    Probe(FireLog* fire_log, int index)
        : timer(&Probe::on_fire, this), log(fire_log), id(index) {}
    static void on_fire(Timer& timer, Wheel&, Tick now) {
        auto* probe = static_cast<Probe*>(timer.owner());
        probe->log->fired.push_back({probe->id, now});
    }
};

Tick round_up(Tick deadline, Tick granularity) {
    return (deadline + granularity - 1) / granularity * granularity;
}

TEST(TimerWheel, FiresAtDeadlineOnLevelZero) {
    FireLog log;
    Wheel wheel(1000);
    Probe probe(&log, 7);
    wheel.arm(probe.timer, 1010);
    EXPECT_TRUE(probe.timer.armed());
    EXPECT_EQ(probe.timer.granularity(), 1u);
    EXPECT_EQ(wheel.pending(), 1u);
    EXPECT_EQ(wheel.next_deadline(), 1010u);
    EXPECT_EQ(wheel.advance(1009), 0u);
    EXPECT_TRUE(log.fired.empty());
    EXPECT_EQ(wheel.advance(1010), 1u);
    ASSERT_EQ(log.fired.size(), 1u);
    EXPECT_EQ(log.fired[0].id, 7);
    EXPECT_EQ(log.fired[0].now, 1010u);
    EXPECT_FALSE(probe.timer.armed());
    EXPECT_EQ(wheel.pending(), 0u);
    EXPECT_EQ(wheel.next_deadline(), kNever);
}

// For every level: never before the deadline, exactly at the rounded-up
// expiry, and the level is the finest that reaches the deadline.
TEST(TimerWheel, EachLevelFiresAtRoundedUpExpiry) {
    for (unsigned level = 0; level < Wheel::kLevels; ++level) {
        const Tick g = Wheel::level_granularity(level);
        for (const Tick delta : {g * 63 - 1, g * 50 + 3, g * 40 + g / 2}) {
            FireLog log;
            const Tick start = 123456789;
            Wheel wheel(start);
            Probe probe(&log, 1);
            const Tick deadline = start + delta;
            wheel.arm(probe.timer, deadline);
            ASSERT_EQ(probe.timer.granularity(), g) << "level " << level << " delta " << delta;
            const Tick expiry = round_up(deadline, g);
            EXPECT_EQ(wheel.next_deadline(), expiry);
            if (deadline > start + 1) {
                wheel.advance(deadline - 1);
                EXPECT_TRUE(log.fired.empty());
            }
            if (expiry > deadline) {
                wheel.advance(expiry - 1);
                EXPECT_TRUE(log.fired.empty()) << "fired before expiry at level " << level;
            }
            wheel.advance(expiry);
            ASSERT_EQ(log.fired.size(), 1u) << "level " << level;
            EXPECT_LE(expiry - deadline, g - 1);
        }
    }
}

TEST(TimerWheel, CancelAndRearm) {
    FireLog log;
    Wheel wheel;
    Probe first(&log, 1);
    Probe second(&log, 2);
    wheel.arm(first.timer, 100);
    wheel.arm(second.timer, 200);
    EXPECT_TRUE(wheel.cancel(first.timer));
    EXPECT_FALSE(wheel.cancel(first.timer));
    EXPECT_EQ(wheel.pending(), 1u);
    wheel.rearm(second.timer, 50);
    wheel.rearm(first.timer, 60);
    EXPECT_EQ(wheel.pending(), 2u);
    wheel.advance(1000);
    ASSERT_EQ(log.fired.size(), 2u);
    EXPECT_EQ(log.fired[0].id, 2);
    EXPECT_EQ(log.fired[1].id, 1);
}

TEST(TimerWheel, DeadlineInThePastFiresAtNextAdvance) {
    FireLog log;
    Wheel wheel(500);
    Probe probe(&log, 1);
    wheel.arm(probe.timer, 10);
    EXPECT_EQ(probe.timer.granularity(), 0u);
    EXPECT_EQ(wheel.next_deadline(), 500u);
    wheel.advance(500);  // same time: still fires, it was due
    ASSERT_EQ(log.fired.size(), 1u);
}

TEST(TimerWheel, HoursInOneAdvance) {
    constexpr Tick kHour = 3'600'000'000'000;  // ns
    FireLog log;
    Wheel wheel;
    std::vector<std::unique_ptr<Probe>> probes;
    for (int i = 0; i < 64; ++i) {
        probes.push_back(std::make_unique<Probe>(&log, i));
        // Spread from 1 ns to far beyond the range.
        wheel.arm(probes.back()->timer, Tick{1} << (i % 42));
    }
    wheel.advance(kHour);
    EXPECT_EQ(log.fired.size(), 64u);
    for (const auto& fired : log.fired) EXPECT_EQ(fired.now, kHour);
    EXPECT_EQ(wheel.pending(), 0u);
}

TEST(TimerWheel, BeyondRangeIsParkedNotEarly) {
    FireLog log;
    Wheel wheel;
    Probe probe(&log, 1);
    const Tick deadline = Wheel::kRange * 5 + 12345;
    wheel.arm(probe.timer, deadline);
    EXPECT_LT(wheel.next_deadline(), deadline);
    // Step through in coarse strides: each parking slot re-files it.
    Tick now = 0;
    while (now + Wheel::kRange / 7 < deadline) {
        now += Wheel::kRange / 7;
        wheel.advance(now);
        ASSERT_TRUE(log.fired.empty()) << "fired early at " << now;
        ASSERT_TRUE(probe.timer.armed());
    }
    wheel.advance(deadline - 1);
    ASSERT_TRUE(log.fired.empty());
    const Tick g = probe.timer.granularity();
    ASSERT_GT(g, 0u);
    wheel.advance(round_up(deadline, g));
    ASSERT_EQ(log.fired.size(), 1u);
    EXPECT_LE(log.fired[0].now - deadline, g - 1);
}

// A callback that re-arms itself for "now" must not loop inside one advance.
TEST(TimerWheel, SelfRearmForNowWaitsForNextAdvance) {
    struct Repeater {
        Timer timer{&Repeater::on_fire, this};
        int count = 0;
        static void on_fire(Timer& timer, Wheel& wheel, Tick now) {
            ++static_cast<Repeater*>(timer.owner())->count;
            wheel.arm(timer, now);
        }
    } repeater;
    Wheel wheel;
    wheel.arm(repeater.timer, 10);
    wheel.advance(100);
    EXPECT_EQ(repeater.count, 1);
    wheel.advance(100);
    EXPECT_EQ(repeater.count, 2);
    wheel.cancel(repeater.timer);
}

// A timer due in the same advance but cancelled by an earlier callback
// does not fire, even when it shares the slot being fired.
TEST(TimerWheel, CancelInCallbackPreventsDueTimer) {
    struct Canceller {
        Timer timer{&Canceller::on_fire, this};
        std::vector<Timer*> victims;
        int fired = 0;
        static void on_fire(Timer& timer, Wheel& wheel, Tick) {
            auto* self = static_cast<Canceller*>(timer.owner());
            ++self->fired;
            for (Timer* victim : self->victims) wheel.cancel(*victim);
        }
    };
    Wheel wheel;
    std::vector<std::unique_ptr<Canceller>> timers;
    for (int i = 0; i < 10; ++i) timers.push_back(std::make_unique<Canceller>());
    // All ten share slot 1000; whichever fires first cancels the nine others.
    for (auto& canceller : timers) {
        for (auto& other : timers) {
            if (other != canceller) canceller->victims.push_back(&other->timer);
        }
        wheel.arm(canceller->timer, 1000);
    }
    EXPECT_EQ(wheel.advance(2000), 1u);
    int total = 0;
    for (auto& canceller : timers) total += canceller->fired;
    EXPECT_EQ(total, 1);
    EXPECT_EQ(wheel.pending(), 0u);
}

TEST(TimerWheel, NextDeadlineTracksEarliest) {
    FireLog log;
    Wheel wheel;
    Probe a(&log, 1);
    Probe b(&log, 2);
    wheel.arm(a.timer, 40);
    wheel.arm(b.timer, 20);
    EXPECT_EQ(wheel.next_deadline(), 20u);
    wheel.cancel(b.timer);
    EXPECT_EQ(wheel.next_deadline(), 40u);
    wheel.cancel(a.timer);
    EXPECT_EQ(wheel.next_deadline(), kNever);
}

TEST(TimerWheel, DestroyingWheelDisarmsTimers) {
    FireLog log;
    Probe probe(&log, 1);
    {
        Wheel wheel;
        wheel.arm(probe.timer, 5);
    }
    EXPECT_FALSE(probe.timer.armed());
}

}  // namespace
}  // namespace metaroce::timer
