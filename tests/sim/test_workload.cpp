// Collective jobs: the shapes of ring all-reduce, all-to-all and incast, and
// the dependency rule that a host's step s waits for every step s - 1
// transfer it takes part in.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <stdexcept>
#include <string>
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

// A CDF file: comments, blank lines, extra columns, percent, units.
TEST(FlowSizeCdf, ParsesFilesInBytesOrPacketsAndPercent) {
  const FlowSizeCdf bytes = FlowSizeCdf::parse("# size cdf\n\n100 0\n100 0.5 x\n1100 1 # tail\n", "t");
  ASSERT_EQ(bytes.points().size(), 3u);
  EXPECT_EQ(bytes.points()[2].bytes, 1100.0);
  EXPECT_EQ(bytes.points()[1].probability, 0.5);
  const FlowSizeCdf packets = FlowSizeCdf::parse("1 0\n1 50\n2 100\n", "p", 1460);
  EXPECT_EQ(packets.points()[0].bytes, 1460.0);
  EXPECT_EQ(packets.points()[2].bytes, 2920.0);
  EXPECT_EQ(packets.points()[1].probability, 0.5);
  EXPECT_EQ(packets.points()[2].probability, 1.0);
}

// Each bad file names its source, the line and what to fix.
TEST(FlowSizeCdf, RejectsBadFilesNamingTheLine) {
  const auto error = [](const std::string& text) {
    try {
      (void)FlowSizeCdf::parse(text, "f.cdf");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("100 0\n200 x\n"), "f.cdf:2: probability 'x' is not a number");
  EXPECT_EQ(error("100 0\n200\n"), "f.cdf:2: want SIZE PROBABILITY, found only '200'");
  EXPECT_EQ(error("100 1\n"), "f.cdf: flow-size CDF: needs at least 2 points, has 1");
  EXPECT_EQ(error("200 0\n100 1\n"), "f.cdf: flow-size CDF: point 2: sizes must not fall");
  EXPECT_EQ(error("100 0.6\n200 0.5\n300 1\n"), "f.cdf: flow-size CDF: point 2: probabilities must not fall");
  EXPECT_EQ(error("100 0\n200 0.9\n"), "f.cdf: flow-size CDF: point 2: the last probability must be 1");
  EXPECT_EQ(error("100 0\n200 1.5\n"), "f.cdf: flow-size CDF: point 2: probability 1.5 outside [0, 1]");
  EXPECT_EQ(error("0 0.5\n200 1\n"), "f.cdf: flow-size CDF: point 1: a size below 1 byte with probability above 0");
  EXPECT_THROW((void)FlowSizeCdf::load("/nonexistent/f.cdf"), std::invalid_argument);
}

// Inverting the CDF: a step is a point mass, a slope is linear.
TEST(FlowSizeCdf, SamplesByInversionAndKnowsItsMean) {
  const FlowSizeCdf cdf({{100, 0}, {100, 0.5}, {1100, 1}});
  EXPECT_EQ(cdf.sample(0.0), 100u);
  EXPECT_EQ(cdf.sample(0.25), 100u);
  EXPECT_EQ(cdf.sample(0.5), 100u);
  EXPECT_EQ(cdf.sample(0.75), 600u);
  EXPECT_EQ(cdf.sample(0.999999), 1100u);
  // Half the flows at 100 bytes, half uniform on [100, 1100]: 0.5 * 100 + 0.5 * 600.
  EXPECT_DOUBLE_EQ(cdf.mean(), 350.0);
}

// Poisson arrivals per host at the load asked for, destinations among the
// others, sorted, within the duration, the same for the same seed.
TEST(BackgroundFlows, OfferTheLoadToOtherHostsDeterministically) {
  const FlowSizeCdf cdf({{1000, 0}, {1000, 0.5}, {3000, 1}});  // mean 1500 bytes
  const std::vector<std::uint32_t> hosts = {3, 5, 7, 9};
  constexpr std::uint64_t rate = 100'000'000'000, duration = 10'000'000;  // 10 ms
  const std::vector<BackgroundFlow> flows = background_flows(hosts, cdf, 0.5, rate, duration, 42);
  // 0.5 * 100 Gb/s over 10 ms is 62.5 MB per host: 41,667 flows of 1,500 bytes on average.
  std::map<std::uint32_t, std::uint64_t> offered;
  std::set<std::uint32_t> destinations;
  std::uint64_t last = 0;
  for (const BackgroundFlow& f : flows) {
    EXPECT_NE(f.src, f.dst);
    EXPECT_GE(f.start_ns, last);
    EXPECT_LT(f.start_ns, duration);
    EXPECT_GE(f.bytes, 1000u);
    EXPECT_LE(f.bytes, 3000u);
    last = f.start_ns;
    offered[f.src] += f.bytes;
    destinations.insert(f.dst);
  }
  EXPECT_EQ(destinations, (std::set<std::uint32_t>{3, 5, 7, 9}));
  ASSERT_EQ(offered.size(), 4u);
  for (const auto& [host, bytes] : offered) {
    SCOPED_TRACE(host);
    EXPECT_GT(bytes, 61'000'000u);  // within 2.5% of 62.5 MB (about 5 standard deviations)
    EXPECT_LT(bytes, 64'000'000u);
  }
  const std::vector<BackgroundFlow> again = background_flows(hosts, cdf, 0.5, rate, duration, 42);
  ASSERT_EQ(again.size(), flows.size());
  EXPECT_EQ(again.back().start_ns, flows.back().start_ns);
  EXPECT_EQ(again.back().bytes, flows.back().bytes);
  EXPECT_NE(background_flows(hosts, cdf, 0.5, rate, duration, 43).size(), flows.size());
  EXPECT_THROW((void)background_flows(std::vector<std::uint32_t>{1}, cdf, 0.5, rate, duration, 1),
               std::invalid_argument);
  EXPECT_THROW((void)background_flows(hosts, cdf, 0.0, rate, duration, 1), std::invalid_argument);
  EXPECT_THROW((void)background_flows(hosts, cdf, 1.5, rate, duration, 1), std::invalid_argument);
  EXPECT_THROW((void)background_flows(hosts, FlowSizeCdf{}, 0.5, rate, duration, 1), std::invalid_argument);
}

}  // namespace
}  // namespace metaroce::sim
