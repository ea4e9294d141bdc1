// Collective jobs: the shapes of ring all-reduce, all-to-all and incast, and
// the dependency rule that a host's step s waits for every step s - 1
// transfer it takes part in.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "sim/workload.hpp"

namespace metaroce::sim {
namespace {

TEST(Workload, RingAllreduceShape) {
  const std::vector<std::uint32_t> ranks = {0, 1, 2, 3};
  const CollectiveJob job = ring_allreduce(ranks, 1000);
  ASSERT_EQ(job.steps.size(), 6u);
  for (const auto& step : job.steps) {
    ASSERT_EQ(step.size(), 4u);
    EXPECT_EQ(step[3].src, 3u);
    EXPECT_EQ(step[3].dst, 0u);
    EXPECT_EQ(step[3].bytes, 250u);
  }
  EXPECT_EQ(job.total_bytes(), 6u * 4u * 250u);
  EXPECT_THROW(ring_allreduce(std::vector<std::uint32_t>{7}, 10), std::invalid_argument);
}

TEST(Workload, AllToAllAndIncastShape) {
  const CollectiveJob a2a = all_to_all({{0, 1, 2}, {3, 4, 5}}, 100);
  ASSERT_EQ(a2a.steps.size(), 1u);
  EXPECT_EQ(a2a.transfer_count(), 12u);
  EXPECT_EQ(a2a.total_bytes(), 1200u);
  const std::vector<std::uint32_t> senders = {1, 2, 3};
  const CollectiveJob in = incast(senders, 0, 64, 2);
  EXPECT_EQ(in.steps.size(), 2u);
  EXPECT_EQ(in.transfer_count(), 6u);
}

TEST(Workload, RingStepWaitsForTheChunkFromThePredecessor) {
  const std::vector<std::uint32_t> ranks = {0, 1, 2};
  JobTracker tracker(ring_allreduce(ranks, 300), 3);  // steps of 0->1 (id 3s), 1->2 (3s+1), 2->0 (3s+2)
  std::vector<std::size_t> ready;
  tracker.initial(ready);
  EXPECT_EQ(ready, (std::vector<std::size_t>{0, 1, 2}));
  for (std::size_t id : ready) tracker.start(id, 0);
  std::vector<std::size_t> released;
  tracker.finish(0, 10, released);  // 0 -> 1 done: 0 still waits for 2 -> 0, 1 for its own send
  EXPECT_TRUE(released.empty());
  tracker.finish(2, 20, released);  // 2 -> 0 done: host 0 is free of step 0
  EXPECT_EQ(released, (std::vector<std::size_t>{3}));
  released.clear();
  tracker.finish(1, 30, released);  // hosts 1 and 2 free
  EXPECT_EQ(released, (std::vector<std::size_t>{4, 5}));
  EXPECT_EQ(tracker.step_end()[0], 30u);
  EXPECT_EQ(tracker.finished(), 3u);
  EXPECT_THROW(tracker.finish(1, 40, released), std::logic_error);
  EXPECT_THROW(tracker.finish(4, 40, released), std::logic_error);  // not started
  EXPECT_FALSE(tracker.done());
}

// Host 2 only receives in step 0 and sends in step 1: that finishing early
// does not release host 2's step 2 while its step 1 send runs.
TEST(Workload, AHostPassesOnlyStepsItIsDoneWith) {
  CollectiveJob job;
  job.steps = {{{0, 2, 1}}, {{2, 0, 1}}, {{2, 1, 1}}};
  JobTracker tracker(job, 3);
  std::vector<std::size_t> ready;
  tracker.initial(ready);
  EXPECT_EQ(ready, (std::vector<std::size_t>{0}));
  tracker.start(0, 0);
  std::vector<std::size_t> released;
  tracker.finish(0, 5, released);
  EXPECT_EQ(released, (std::vector<std::size_t>{1}));
  released.clear();
  tracker.start(1, 5);
  tracker.finish(1, 9, released);
  EXPECT_EQ(released, (std::vector<std::size_t>{2}));
  released.clear();
  tracker.start(2, 9);
  tracker.finish(2, 12, released);
  EXPECT_TRUE(released.empty());
  EXPECT_TRUE(tracker.done());
  EXPECT_EQ(tracker.step_end(), (std::vector<std::uint64_t>{5, 9, 12}));
}

TEST(Workload, PercentileNearestRank) {
  EXPECT_EQ(percentile({}, 99), 0.0);
  EXPECT_EQ(percentile({5, 1, 3, 2, 4}, 50), 3.0);
  EXPECT_EQ(percentile({5, 1, 3, 2, 4}, 99), 5.0);
  EXPECT_EQ(percentile({5, 1, 3, 2, 4}, 0), 1.0);
}

TEST(Workload, RejectsTransfersOutsideTheHosts) {
  CollectiveJob job;
  job.steps = {{{0, 5, 1}}};
  EXPECT_THROW(JobTracker(job, 3), std::invalid_argument);
  job.steps = {{{1, 1, 1}}};
  EXPECT_THROW(JobTracker(job, 3), std::invalid_argument);
}

}  // namespace
}  // namespace metaroce::sim
