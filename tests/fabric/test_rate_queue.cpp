// RateQueue: serialisation to the nanosecond, tail drop, ECN marking.
#include <gtest/gtest.h>

#include <vector>

#include "fabric/random.hpp"
#include "fabric/rate_queue.hpp"

namespace metaroce::fabric {
namespace {

constexpr std::uint64_t gbit = 1'000'000'000;

TEST(RateQueue, SerialisesBackToBackFramesToTheNanosecond) {
  Random random(1);
  RateQueue queue(25 * gbit, 0, 0, {});
  // 1000 bytes at 25 Gb/s: 320 ns each.
  EXPECT_EQ(queue.offer(0, 1000, false, random).departure_ns, 320u);
  EXPECT_EQ(queue.offer(0, 1000, false, random).departure_ns, 640u);
  EXPECT_EQ(queue.offer(100, 1000, false, random).departure_ns, 960u);
  EXPECT_EQ(queue.queued_bytes(100), 3000u);
  EXPECT_EQ(queue.queued_bytes(320), 2000u);
  EXPECT_EQ(queue.queued_bytes(960), 0u);
  // Idle port: starts at once.
  EXPECT_EQ(queue.offer(5000, 1000, false, random).departure_ns, 5320u);
}

TEST(RateQueue, FractionalSerialisationTimesDoNotDrift) {
  Random random(1);
  RateQueue queue(25 * gbit, 0, 0, {});
  // 1001 bytes: 320.32 ns; departures are the exact sums rounded up.
  EXPECT_EQ(queue.offer(0, 1001, false, random).departure_ns, 321u);   // 320.32
  EXPECT_EQ(queue.offer(0, 1001, false, random).departure_ns, 641u);   // 640.64
  EXPECT_EQ(queue.offer(0, 1001, false, random).departure_ns, 961u);   // 960.96
  EXPECT_EQ(queue.offer(0, 1001, false, random).departure_ns, 1282u);  // 1281.28
  std::uint64_t last = 0;
  for (int i = 4; i < 1000; ++i) last = queue.offer(0, 1001, false, random).departure_ns;
  EXPECT_EQ(last, 320'320u);  // 1000 * 320.32 exactly
}

TEST(RateQueue, OverheadCountsOnTheWire) {
  Random random(1);
  RateQueue queue(10 * gbit, 24, 0, {});
  EXPECT_EQ(queue.offer(0, 1000, false, random).departure_ns, 820u);  // 1024 B: 819.2 ns
  EXPECT_EQ(queue.queued_bytes(0), 1024u);
}

TEST(RateQueue, TailDropsAboveTheLimit) {
  Random random(1);
  RateQueue queue(25 * gbit, 0, 3000, {});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(queue.offer(0, 1000, false, random).accepted);
  const RateQueue::Admission full = queue.offer(0, 1000, false, random);
  EXPECT_FALSE(full.accepted);
  EXPECT_EQ(full.queued_bytes_before, 3000u);
  EXPECT_FALSE(queue.offer(319, 1000, false, random).accepted);
  // The first frame's last bit leaves at 320: room for one more, behind the other two.
  const RateQueue::Admission next = queue.offer(320, 1000, false, random);
  EXPECT_TRUE(next.accepted);
  EXPECT_EQ(next.departure_ns, 1280u);
  EXPECT_FALSE(queue.offer(320, 1, false, random).accepted);
}

TEST(RateQueue, UnlimitedRateNeverQueues) {
  Random random(1);
  RateQueue queue(0, 0, 100, {true, 0, 0, 1.0});
  for (int i = 0; i < 10; ++i) {
    const RateQueue::Admission a = queue.offer(7, 1000, true, random);
    EXPECT_TRUE(a.accepted);
    EXPECT_FALSE(a.mark_ce);
    EXPECT_EQ(a.departure_ns, 7u);
  }
}

TEST(RateQueue, EcnStepMarksEctFramesFindingMoreThanTheThreshold) {
  Random random(1);
  RateQueue queue(25 * gbit, 0, 0, {true, 1500, 1500, 1.0});
  // Occupancy found: 0, 500, 1000, 1500, 2000, 2500.
  const std::vector<bool> expected = {false, false, false, false, true, true};
  for (bool mark : expected) EXPECT_EQ(queue.offer(0, 500, true, random).mark_ce, mark);
  EXPECT_FALSE(queue.offer(0, 500, false, random).mark_ce);  // not ECT: never marked
}

TEST(RateQueue, RedMarksNothingBelowMinEverythingAboveMaxAndAFractionBetween) {
  std::uint64_t marked_between = 0;
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    Random random(seed);
    RateQueue queue(1000, 0, 0, {true, 1000, 3000, 0.5});  // 1 kb/s: nothing leaves
    for (int i = 0; i < 40; ++i) {
      const std::uint64_t found = static_cast<std::uint64_t>(i) * 100;
      const bool mark = queue.offer(0, 100, true, random).mark_ce;
      if (found <= 1000) {
        EXPECT_FALSE(mark);
      }
      if (found >= 3000) {
        EXPECT_TRUE(mark);
      }
      if (found == 2000) marked_between += mark;  // probability 0.5 * 0.5
    }
  }
  EXPECT_GT(marked_between, 70u);
  EXPECT_LT(marked_between, 130u);
}

TEST(RateQueue, RateChangeAppliesToLaterFrames) {
  Random random(1);
  RateQueue queue(25 * gbit, 0, 0, {});
  EXPECT_EQ(queue.offer(0, 1000, false, random).departure_ns, 320u);
  queue.set_rate(10 * gbit);
  EXPECT_EQ(queue.offer(0, 1000, false, random).departure_ns, 1120u);  // + 800
}

}  // namespace
}  // namespace metaroce::fabric
