// Impairment: each model alone with exact outcomes, then together.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "fabric/frame_peek.hpp"
#include "fabric/impairment.hpp"
#include "fabric/spec.hpp"
#include "test_frames.hpp"
#include "wire/frame.hpp"
#include "wire_samples.hpp"

namespace metaroce::fabric {
namespace {

using test::make_frame;
using test::port_on_path;
using test::psn_of;

// Releases everything, each frame at its own due time.
std::vector<ReleasedFrame> drain(Impairment& fabric) {
  std::vector<ReleasedFrame> out;
  while (fabric.in_flight() != 0) fabric.release(fabric.next_release_time(), out);
  return out;
}

// Submits at `now` after releasing what is due before it (as a real-time loop would).
void submit_at(Impairment& fabric, std::uint64_t now, std::vector<std::uint8_t> frame,
               std::vector<ReleasedFrame>& out) {
  while (fabric.next_release_time() < now) fabric.release(fabric.next_release_time(), out);
  fabric.submit(now, std::move(frame));
}

FabricConfig spec(std::string_view text) { return parse_fabric_spec_or_throw(text); }

void expect_conservation(const Impairment& fabric) {
  const FabricCounters& c = fabric.counters();
  EXPECT_EQ(c.received + c.duplicated, c.forwarded + c.dropped() + fabric.in_flight());
}

TEST(Impairment, DelaysEveryFrameExactlyAndChangesNothing) {
  Impairment fabric(spec("delay 10us"));
  std::vector<ReleasedFrame> out;
  std::vector<std::vector<std::uint8_t>> sent;
  for (std::uint32_t i = 0; i < 5; ++i) {
    sent.push_back(make_frame(50000, i));
    submit_at(fabric, 1000 * i, sent.back(), out);
  }
  EXPECT_EQ(fabric.next_release_time(), 10'000u);
  EXPECT_EQ(fabric.release(9'999, out), 0u);
  const auto rest = drain(fabric);
  out.insert(out.end(), rest.begin(), rest.end());
  ASSERT_EQ(out.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(out[i].due_ns, 10'000 + 1000 * i);
    EXPECT_EQ(out[i].bytes, sent[i]);
  }
  EXPECT_EQ(fabric.next_release_time(), ~std::uint64_t{0});
  EXPECT_EQ(fabric.counters().forwarded, 5u);
  EXPECT_EQ(fabric.counters().reordered, 0u);
}

TEST(Impairment, SerialisesAtTheRateThenAddsTheDelay) {
  Impairment fabric(spec("rate 25gbit delay 10us"));
  const auto frame = make_frame(50000, 0, 1156);
  ASSERT_EQ(frame.size(), 1250u);  // 90 B of headers + 1156 + ICRC 4: 400 ns at 25 Gb/s
  for (int i = 0; i < 4; ++i) fabric.submit(0, frame);
  fabric.submit(100'000, frame);
  const auto out = drain(fabric);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].due_ns, 10'400u);
  EXPECT_EQ(out[1].due_ns, 10'800u);
  EXPECT_EQ(out[2].due_ns, 11'200u);
  EXPECT_EQ(out[3].due_ns, 11'600u);
  EXPECT_EQ(out[4].due_ns, 110'400u);
}

TEST(Impairment, EachPathHasItsOwnDelay) {
  Impairment fabric(spec("paths 4 delay 10us spread 30us"));
  for (std::uint32_t k = 0; k < 4; ++k) fabric.submit(0, make_frame(port_on_path(k, 4), k));
  const auto out = drain(fabric);
  ASSERT_EQ(out.size(), 4u);
  for (std::uint32_t k = 0; k < 4; ++k) {
    EXPECT_EQ(out[k].path, k);
    EXPECT_EQ(out[k].due_ns, 10'000 + 10'000 * k);
    EXPECT_EQ(psn_of(out[k].bytes), k);
  }
  Impairment listed(spec("paths 3 delays 5us,1us,3us"));
  for (std::uint32_t k = 0; k < 3; ++k) listed.submit(0, make_frame(port_on_path(k, 3), k));
  const auto by_delay = drain(listed);
  ASSERT_EQ(by_delay.size(), 3u);
  EXPECT_EQ(psn_of(by_delay[0].bytes), 1u);
  EXPECT_EQ(by_delay[0].due_ns, 1'000u);
  EXPECT_EQ(psn_of(by_delay[1].bytes), 2u);
  EXPECT_EQ(psn_of(by_delay[2].bytes), 0u);
  EXPECT_EQ(listed.counters().reordered, 1u);  // psn 0, after 1 and 2; psn 1 before 2 is in order
}

TEST(Impairment, NonRoceFramesTakePathZero) {
  Impairment fabric(spec("paths 4 delays 1us,2us,3us,4us"));
  auto frame = make_frame(port_on_path(3, 4), 0);
  EXPECT_EQ(fabric.path_of(frame), 3u);
  frame[14 + 20 + 3] = 53;  // UDP destination port 53
  EXPECT_EQ(fabric.path_of(frame), 0u);
  fabric.submit(0, frame);
  const auto out = drain(fabric);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].due_ns, 1'000u);
}

TEST(Impairment, JitterNeverReordersAPath) {
  Impairment fabric(spec("delay 20us jitter 15us seed 3"));
  std::vector<ReleasedFrame> out;
  constexpr std::uint32_t count = 20'000;
  const auto frame = make_frame(50000, 0);
  for (std::uint32_t i = 0; i < count; ++i) {
    auto copy = frame;
    copy[copy.size() - 5] = static_cast<std::uint8_t>(i);  // payload bytes only
    copy[copy.size() - 6] = static_cast<std::uint8_t>(i >> 8);
    submit_at(fabric, 100 * i, std::move(copy), out);
  }
  const auto rest = drain(fabric);
  out.insert(out.end(), rest.begin(), rest.end());
  ASSERT_EQ(out.size(), count);
  std::set<std::uint64_t> distinct_delays;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint32_t index = (std::uint32_t{out[i].bytes[out[i].bytes.size() - 6]} << 8) |
                                out[i].bytes[out[i].bytes.size() - 5];
    ASSERT_EQ(index, i & 0xffff) << "frame " << i << " reordered";
    const std::uint64_t sent = 100ull * i;
    EXPECT_GE(out[i].due_ns, sent + 5'000);
    if (i > 0) {
      ASSERT_GE(out[i].due_ns, out[i - 1].due_ns);
      // Above 35 us only when held behind the previous frame.
      if (out[i].due_ns > sent + 35'000) {
        EXPECT_EQ(out[i].due_ns, out[i - 1].due_ns);
      }
    }
    distinct_delays.insert(out[i].due_ns - sent);
  }
  EXPECT_GT(distinct_delays.size(), 1000u);
  EXPECT_EQ(fabric.counters().reordered, 0u);
}

TEST(Impairment, SpreadReordersAcrossPathsButEachPathStaysFifo) {
  Impairment fabric(spec("paths 4 spread 30us jitter 2us seed 5"));
  std::vector<ReleasedFrame> out;
  for (std::uint32_t i = 0; i < 4000; ++i) submit_at(fabric, 1000 * i, make_frame(port_on_path(i % 4, 4), i), out);
  const auto rest = drain(fabric);
  out.insert(out.end(), rest.begin(), rest.end());
  ASSERT_EQ(out.size(), 4000u);
  std::map<std::uint32_t, std::uint32_t> last_psn_on_path;
  std::uint64_t late = 0;
  std::uint32_t highest = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint32_t psn = psn_of(out[i].bytes);
    EXPECT_EQ(out[i].path, psn % 4);
    if (auto it = last_psn_on_path.find(out[i].path); it != last_psn_on_path.end()) {
      EXPECT_GT(psn, it->second);
    }
    last_psn_on_path[out[i].path] = psn;
    if (i > 0 && psn < highest) ++late;
    highest = std::max(highest, psn);
  }
  EXPECT_EQ(fabric.counters().reordered, late);
  EXPECT_GT(late, 2000u);  // paths 1..3 lag path 0 by 10, 20, 30 frames
}

TEST(Impairment, RandomLossDropsExactlyTheCountedFrames) {
  Impairment fabric(spec("loss 10% seed 42"));
  constexpr std::uint32_t count = 100'000;
  std::set<std::uint32_t> sent_psns;
  std::vector<ReleasedFrame> out;
  const auto frame = make_frame(50000, 0);
  for (std::uint32_t i = 0; i < count; ++i) fabric.submit(i, frame);
  out = drain(fabric);
  const std::uint64_t missing = count - out.size();
  EXPECT_EQ(fabric.counters().dropped_random_loss, missing);
  EXPECT_EQ(fabric.counters().dropped(), missing);
  EXPECT_NEAR(static_cast<double>(missing) / count, 0.10, 0.005);
  expect_conservation(fabric);
}

TEST(Impairment, GilbertElliottLongRunLossRate) {
  FabricConfig config = spec("gemodel 1% 10% 70% 0.1% seed 11");
  Impairment fabric(config);
  constexpr std::uint32_t count = 1'000'000;
  const auto frame = make_frame(50000, 0, 16);
  std::vector<ReleasedFrame> out;
  std::uint64_t released = 0;
  std::uint64_t longest_gap = 0, gap = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    fabric.submit(i, frame);
    out.clear();
    if (fabric.release(i, out) == 0) {
      longest_gap = std::max(longest_gap, ++gap);
    } else {
      released += out.size();
      gap = 0;
    }
  }
  const std::uint64_t missing = count - released;
  EXPECT_EQ(fabric.counters().dropped_burst_loss, missing);
  EXPECT_EQ(fabric.counters().dropped(), missing);
  // pi_bad = 1/11: 0.0909 * 0.7 + 0.9091 * 0.001 = 0.064545
  EXPECT_NEAR(config.gemodel.stationary_loss(), 0.0645454, 1e-6);
  EXPECT_NEAR(static_cast<double>(missing) / count, config.gemodel.stationary_loss(), 0.003);
  EXPECT_GE(longest_gap, 8u);  // bursts, not independent losses (which would give ~5 at most)
  expect_conservation(fabric);
}

TEST(Impairment, BlackholeDropsExactlyItsPathInItsWindow) {
  Impairment fabric(spec("paths 4 delay 1us blackhole 2 at 1ms for 500us"));
  std::set<std::uint32_t> expected_missing;
  std::vector<ReleasedFrame> out;
  for (std::uint32_t i = 0; i < 3000; ++i) {
    const std::uint64_t t = 1000ull * i;
    if (i % 4 == 2 && t >= 1'000'000 && t < 1'500'000) expected_missing.insert(i);
    submit_at(fabric, t, make_frame(port_on_path(i % 4, 4), i), out);
  }
  const auto rest = drain(fabric);
  out.insert(out.end(), rest.begin(), rest.end());
  std::set<std::uint32_t> missing;
  for (std::uint32_t i = 0; i < 3000; ++i) missing.insert(i);
  for (const ReleasedFrame& f : out) missing.erase(psn_of(f.bytes));
  EXPECT_EQ(missing, expected_missing);
  EXPECT_EQ(expected_missing.size(), 125u);
  EXPECT_EQ(fabric.counters().dropped_blackhole, 125u);

  // Without 'for': from then on; added at run time.
  Impairment forever_hole(spec("paths 2"));
  forever_hole.add_blackhole({1, 10, forever});
  forever_hole.submit(9, make_frame(port_on_path(1, 2), 0));
  forever_hole.submit(10, make_frame(port_on_path(1, 2), 1));
  forever_hole.submit(1'000'000'000, make_frame(port_on_path(1, 2), 2));
  forever_hole.submit(1'000'000'000, make_frame(port_on_path(0, 2), 3));
  EXPECT_EQ(forever_hole.counters().dropped_blackhole, 2u);
  EXPECT_THROW(forever_hole.add_blackhole({2, 0, 1}), std::invalid_argument);

  // Every path (no path in the spec): all of them in its window, none outside.
  Impairment every(spec("paths 4 blackhole at 1ms for 500us"));
  out.clear();
  for (std::uint32_t i = 0; i < 3000; ++i) submit_at(every, 1000ull * i, make_frame(port_on_path(i % 4, 4), i), out);
  EXPECT_EQ(every.counters().dropped_blackhole, 500u);
  auto every_rest = drain(every);
  EXPECT_EQ(out.size() + every_rest.size(), 2500u);
  for (std::vector<ReleasedFrame>* frames : {&out, &every_rest})
    for (const ReleasedFrame& f : *frames) {
      const std::uint32_t i = psn_of(f.bytes);
      EXPECT_TRUE(i < 1000 || i >= 1500) << "frame " << i << " went through the blackhole";
    }
}

TEST(Impairment, CorruptedFramesAreExactlyTheOnesTheReceiverRejects) {
  Impairment fabric(spec("corrupt 5% seed 8"));
  std::vector<std::vector<std::uint8_t>> sent;
  for (int round = 0; round < 50; ++round) {
    for (std::vector<std::uint8_t>& frame : test::sample_frames()) sent.push_back(std::move(frame));
  }
  for (std::size_t i = 0; i < sent.size(); ++i) fabric.submit(i, sent[i]);
  const auto out = drain(fabric);
  ASSERT_EQ(out.size(), sent.size());
  std::uint64_t changed = 0, rejected = 0;
  std::map<wire::ParseError, std::uint64_t> reasons;
  for (std::size_t i = 0; i < out.size(); ++i) {
    wire::ParsedFrame parsed;
    const wire::ParseError error = wire::parse_frame(out[i].bytes, parsed);
    const bool differs = out[i].bytes != sent[i];
    changed += differs;
    rejected += error != wire::ParseError::ok;
    EXPECT_EQ(differs, error != wire::ParseError::ok) << "frame " << i;
    ++reasons[error];
  }
  EXPECT_EQ(fabric.counters().corrupted, changed);
  EXPECT_EQ(rejected, changed);
  EXPECT_NEAR(static_cast<double>(changed) / sent.size(), 0.05, 0.01);
  EXPECT_GT(reasons[wire::ParseError::bad_icrc], changed / 2);
}

TEST(Impairment, EcnMarksExactlyTheFramesEnqueuedAboveTheThreshold) {
  Impairment fabric(spec("rate 10gbit ecn 3000"));
  std::vector<bool> expect_ce;
  std::uint64_t queued = 0;  // nothing leaves before t = 1 ns
  for (std::uint32_t i = 0; i < 20; ++i) {
    const bool ect = i % 5 != 4;
    auto frame = make_frame(test::TestFrame{50000, i, 500, i % 2 == 0 ? 4 : 6, ect ? std::uint8_t{2} : std::uint8_t{0}});
    expect_ce.push_back(ect && queued > 3000);
    queued += frame.size();
    fabric.submit(0, std::move(frame));
  }
  const auto out = drain(fabric);
  ASSERT_EQ(out.size(), 20u);
  std::uint64_t marked = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    wire::ParsedFrame parsed;
    ASSERT_EQ(wire::parse_frame(out[i].bytes, parsed), wire::ParseError::ok) << "ICRC or checksum broken";
    EXPECT_EQ(parsed.ecn() == ecn::ce, expect_ce[i]) << "frame " << i;
    marked += expect_ce[i];
  }
  EXPECT_EQ(fabric.counters().ecn_marked, marked);
  EXPECT_GT(marked, 5u);
}

TEST(Impairment, TailDropCountsQueueFull) {
  Impairment fabric(spec("rate 10gbit limit 5000"));
  const auto frame = make_frame(50000, 0, 1156);  // 1250 B
  for (int i = 0; i < 12; ++i) fabric.submit(0, frame);
  EXPECT_EQ(fabric.counters().dropped_queue_full, 8u);
  EXPECT_EQ(drain(fabric).size(), 4u);
}

TEST(Impairment, PerPathQueuesSerialiseInParallel) {
  const auto on0 = make_frame(port_on_path(0, 2), 0, 1156);  // 1250 B: 1 us at 10 Gb/s
  const auto on1 = make_frame(port_on_path(1, 2), 1, 1156);
  Impairment shared(spec("paths 2 rate 10gbit"));
  shared.submit(0, on0);
  shared.submit(0, on1);
  auto out = drain(shared);
  EXPECT_EQ(out[0].due_ns, 1000u);
  EXPECT_EQ(out[1].due_ns, 2000u);
  Impairment parallel(spec("paths 2 rate 10gbit queue per-path"));
  parallel.submit(0, on0);
  parallel.submit(0, on1);
  out = drain(parallel);
  EXPECT_EQ(out[0].due_ns, 1000u);
  EXPECT_EQ(out[1].due_ns, 1000u);
}

TEST(Impairment, DuplicatesFollowTheirOriginal) {
  Impairment fabric(spec("duplicate 10% delay 1us seed 4"));
  for (std::uint32_t i = 0; i < 10'000; ++i) fabric.submit(10ull * i, make_frame(50000, i));
  const auto out = drain(fabric);
  EXPECT_EQ(out.size(), 10'000 + fabric.counters().duplicated);
  EXPECT_NEAR(static_cast<double>(fabric.counters().duplicated), 1000.0, 100.0);
  std::uint64_t copies = 0;
  std::uint32_t expected_psn = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint32_t psn = psn_of(out[i].bytes);
    if (i > 0 && out[i].bytes == out[i - 1].bytes) {
      ++copies;
      EXPECT_EQ(out[i].due_ns, out[i - 1].due_ns);
      continue;
    }
    EXPECT_EQ(psn, expected_psn++);
  }
  EXPECT_EQ(copies, fabric.counters().duplicated);
  EXPECT_EQ(fabric.counters().reordered, 0u);
}

TEST(Impairment, ReorderHoldsAFrameBackByTheGapAndLetsItsPathOvertakeIt) {
  Impairment fabric(spec("delay 10us reorder 1% gap 5us seed 6"));
  std::vector<ReleasedFrame> out;
  constexpr std::uint32_t count = 20'000;
  for (std::uint32_t i = 0; i < count; ++i) submit_at(fabric, 100ull * i, make_frame(50000, i), out);
  const auto rest = drain(fabric);
  out.insert(out.end(), rest.begin(), rest.end());
  ASSERT_EQ(out.size(), count);
  std::uint64_t held = 0, late = 0;
  std::uint32_t highest = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint32_t psn = psn_of(out[i].bytes);
    const std::uint64_t delay = out[i].due_ns - 100ull * psn;
    EXPECT_TRUE(delay == 10'000 || delay == 15'000) << delay;
    held += delay == 15'000;
    if (i > 0 && psn < highest) ++late;
    highest = std::max(highest, psn);
  }
  EXPECT_EQ(fabric.counters().reordered_in_path, held);
  EXPECT_EQ(fabric.counters().reordered, late);
  EXPECT_NEAR(static_cast<double>(held), 200.0, 50.0);
  EXPECT_GE(late, held - 1);  // every held frame is overtaken but maybe the very last
}

std::uint64_t run_fingerprint(std::uint64_t seed) {
  FabricConfig config = spec(
      "loss 1% delay 10us jitter 2us rate 25gbit paths 8 spread 20us duplicate 0.5% corrupt 0.1% "
      "limit 100000 ecn 20000 reorder 0.1% gemodel 1% 10% 70% 0.1% blackhole 3 at 5ms for 2ms");
  config.seed = seed;
  Impairment fabric(config);
  std::vector<ReleasedFrame> out;
  for (std::uint32_t i = 0; i < 20'000; ++i) submit_at(fabric, 500ull * i, make_frame(static_cast<std::uint16_t>(49152 + i % 64), i, 900), out);
  const auto rest = drain(fabric);
  out.insert(out.end(), rest.begin(), rest.end());
  expect_conservation(fabric);
  std::uint64_t hash = test::fnv1a_basis;
  for (const ReleasedFrame& f : out) hash = test::fnv1a(test::fnv1a(test::fnv1a(hash, f.due_ns), f.path), f.bytes);
  fabric.counters().visit([&](const char*, std::uint64_t value) { hash = test::fnv1a(hash, value); });
  return hash;
}

TEST(Impairment, SameSeedSameRunOtherSeedOtherRun) {
  const std::uint64_t first = run_fingerprint(1);
  EXPECT_EQ(run_fingerprint(1), first);
  EXPECT_NE(run_fingerprint(2), first);
}

TEST(Impairment, RejectsBadConfigs) {
  FabricConfig config;
  config.paths = 0;
  EXPECT_THROW(Impairment{config}, std::invalid_argument);
  config.paths = 2;
  config.loss = 1.5;
  EXPECT_THROW(Impairment{config}, std::invalid_argument);
}

}  // namespace
}  // namespace metaroce::fabric
