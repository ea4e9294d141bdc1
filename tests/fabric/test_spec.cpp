// The tc-netem-like spec string: every item, units, error messages, round trip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "fabric/spec.hpp"

namespace metaroce::fabric {
namespace {

using ::testing::HasSubstr;

FabricConfig parse_ok(std::string_view spec) {
  FabricSpecResult result = parse_fabric_spec(spec);
  EXPECT_TRUE(result.ok()) << result.error;
  return result.config;
}

std::string parse_error(std::string_view spec) {
  FabricSpecResult result = parse_fabric_spec(spec);
  EXPECT_FALSE(result.ok()) << "accepted: " << spec;
  return result.error;
}

TEST(FabricSpec, ParsesTheFullExample) {
  const FabricConfig c = parse_ok(
      "loss 1% delay 10us jitter 2us rate 25gbit paths 8 spread 20us duplicate 0.5% corrupt 0.1% "
      "limit 1000000 ecn 100000 reorder 0.1% gemodel 1% 10% 70% 0.1% blackhole 3 at 5ms for 2ms");
  EXPECT_DOUBLE_EQ(c.loss, 0.01);
  EXPECT_EQ(c.delay_ns, 10'000u);
  EXPECT_EQ(c.jitter_ns, 2'000u);
  EXPECT_EQ(c.rate_bps, 25'000'000'000u);
  EXPECT_EQ(c.paths, 8u);
  EXPECT_EQ(c.spread_ns, 20'000u);
  EXPECT_DOUBLE_EQ(c.duplicate, 0.005);
  EXPECT_DOUBLE_EQ(c.corrupt, 0.001);
  EXPECT_EQ(c.limit_bytes, 1'000'000u);
  EXPECT_EQ(c.ecn, (EcnMarking{true, 100'000, 100'000, 1.0}));
  EXPECT_DOUBLE_EQ(c.reorder, 0.001);
  EXPECT_EQ(c.reorder_gap_ns, 10'000u);
  EXPECT_DOUBLE_EQ(c.gemodel.p, 0.01);
  EXPECT_DOUBLE_EQ(c.gemodel.r, 0.10);
  EXPECT_DOUBLE_EQ(c.gemodel.loss_in_bad, 0.70);
  EXPECT_DOUBLE_EQ(c.gemodel.loss_in_good, 0.001);
  ASSERT_EQ(c.blackholes.size(), 1u);
  EXPECT_EQ(c.blackholes[0], (Blackhole{3, 5'000'000, 2'000'000}));
  // path k: 10us + k * 20us / 7
  EXPECT_EQ(c.path_delay_ns(0), 10'000u);
  EXPECT_EQ(c.path_delay_ns(1), 12'857u);
  EXPECT_EQ(c.path_delay_ns(7), 30'000u);
}

TEST(FabricSpec, EmptySpecIsAPerfectWire) { EXPECT_EQ(parse_ok("  "), FabricConfig{}); }

TEST(FabricSpec, NetemForms) {
  FabricConfig c = parse_ok("delay 10us 2us loss random 3%");
  EXPECT_EQ(c.jitter_ns, 2'000u);
  EXPECT_DOUBLE_EQ(c.loss, 0.03);
  c = parse_ok("loss gemodel 2%");  // r = 1 - p, 1-h = 100%, 1-k = 0%
  EXPECT_DOUBLE_EQ(c.gemodel.p, 0.02);
  EXPECT_DOUBLE_EQ(c.gemodel.r, 0.98);
  EXPECT_DOUBLE_EQ(c.gemodel.loss_in_bad, 1.0);
  EXPECT_DOUBLE_EQ(c.gemodel.loss_in_good, 0.0);
  c = parse_ok("loss gemodel 1% 30% delay 1ms");
  EXPECT_DOUBLE_EQ(c.gemodel.r, 0.30);
  EXPECT_EQ(c.delay_ns, 1'000'000u);
}

TEST(FabricSpec, Units) {
  EXPECT_EQ(parse_ok("delay 1.5ms").delay_ns, 1'500'000u);
  EXPECT_EQ(parse_ok("delay 100ns").delay_ns, 100u);
  EXPECT_EQ(parse_ok("delay 2s").delay_ns, 2'000'000'000u);
  EXPECT_EQ(parse_ok("delay 0.5us").delay_ns, 500u);
  EXPECT_EQ(parse_ok("rate 100mbit").rate_bps, 100'000'000u);
  EXPECT_EQ(parse_ok("rate 1tbit").rate_bps, 1'000'000'000'000u);
  EXPECT_EQ(parse_ok("rate 9600bit").rate_bps, 9'600u);
  EXPECT_EQ(parse_ok("rate 2.5kbit").rate_bps, 2'500u);
  EXPECT_EQ(parse_ok("limit 64kib").limit_bytes, 65'536u);
  EXPECT_EQ(parse_ok("limit 2mb").limit_bytes, 2'000'000u);
  EXPECT_EQ(parse_ok("limit 3k").limit_bytes, 3'000u);
  EXPECT_EQ(parse_ok("limit 1500b").limit_bytes, 1'500u);
}

TEST(FabricSpec, OtherItems) {
  FabricConfig c = parse_ok(
      "paths 3 delays 1us,2us,5us queue per-path overhead 24 ecn-red 1000 5000 20% reorder 1% gap 3us "
      "blackhole 1 at 0ns blackhole 2 at 1ms for 1us seed 77");
  EXPECT_EQ(c.path_delays_ns, (std::vector<std::uint64_t>{1'000, 2'000, 5'000}));
  EXPECT_EQ(c.path_delay_ns(2), 5'000u);
  EXPECT_EQ(c.queue_mode, QueueMode::per_path);
  EXPECT_EQ(c.overhead_bytes, 24u);
  EXPECT_EQ(c.ecn, (EcnMarking{true, 1000, 5000, 0.2}));
  EXPECT_EQ(c.reorder_gap_ns, 3'000u);
  ASSERT_EQ(c.blackholes.size(), 2u);
  EXPECT_EQ(c.blackholes[0], (Blackhole{1, 0, forever}));
  EXPECT_EQ(c.blackholes[1], (Blackhole{2, 1'000'000, 1'000}));
  EXPECT_EQ(c.seed, 77u);
}

// Every impairment metaroce-fabric offers, in the words of its specification.
TEST(FabricSpec, TheIssueVocabulary) {
  FabricConfig c = parse_ok(
      "loss random 2% delay 10us jitter 2us rate 10gbit duplicate 1% corrupt 0.1% paths 4 spread 30us "
      "limit 100000 ecn 20000 blackhole path 3 at 5ms for 2ms");
  EXPECT_DOUBLE_EQ(c.loss, 0.02);
  EXPECT_EQ(c.delay_ns, 10'000u);
  EXPECT_EQ(c.jitter_ns, 2'000u);
  EXPECT_EQ(c.rate_bps, 10'000'000'000u);
  EXPECT_DOUBLE_EQ(c.duplicate, 0.01);
  EXPECT_DOUBLE_EQ(c.corrupt, 0.001);
  EXPECT_EQ(c.paths, 4u);
  EXPECT_EQ(c.path_delay_ns(3), 40'000u);
  EXPECT_EQ(c.limit_bytes, 100'000u);
  EXPECT_EQ(c.ecn, (EcnMarking{true, 20'000, 20'000, 1.0}));
  ASSERT_EQ(c.blackholes.size(), 1u);
  EXPECT_EQ(c.blackholes[0], (Blackhole{3, 5'000'000, 2'000'000}));
  EXPECT_EQ(parse_ok("loss gemodel 1% 10% 70% 0.1%").gemodel, (GilbertElliott{0.01, 0.1, 0.7, 0.001}));
  EXPECT_EQ(parse_ok("paths 2 blackhole path 1 at 0s"), parse_ok("paths 2 blackhole 1 at 0s"));
  // Without a path: every path, whatever paths says.
  ASSERT_EQ(parse_ok("blackhole at 500ms for 1s paths 4").blackholes.size(), 1u);
  EXPECT_EQ(parse_ok("blackhole at 500ms for 1s paths 4").blackholes[0],
            (Blackhole{Blackhole::every_path, 500'000'000, 1'000'000'000}));
  EXPECT_EQ(to_spec(parse_ok("blackhole at 500ms for 1s")), "paths 1 delay 0ns blackhole at 500ms for 1s");
  EXPECT_THAT(parse_error("blackhole path x at 1ms"), HasSubstr("'x' (token 3) after 'blackhole'"));
}

TEST(FabricSpec, ErrorsNameTheBadTokenAndWhatWasExpected) {
  EXPECT_EQ(parse_error("delay 10us loss 1"),
            "fabric spec: bad token '1' (token 4) after 'loss': expected a percentage between 0% and "
            "100%, such as 1% or 0.05%");
  EXPECT_EQ(parse_error("delay 10"),
            "fabric spec: bad token '10' (token 2) after 'delay': expected a time with a unit: ns, us, "
            "ms or s (such as 10us or 1.5ms)");
  EXPECT_EQ(parse_error("loss"),
            "fabric spec: spec ends too early after 'loss': expected a percentage between 0% and 100%, "
            "such as 1% or 0.05%");
  EXPECT_THAT(parse_error("rate 25gbps"), HasSubstr("bad token '25gbps' (token 2) after 'rate'"));
  EXPECT_THAT(parse_error("paths 0"), HasSubstr("bad token '0' (token 2) after 'paths': expected a path count"));
  EXPECT_THAT(parse_error("paths 257"), HasSubstr("'257'"));
  EXPECT_THAT(parse_error("loss 1% bogus 3"), HasSubstr("bad token 'bogus' (token 3): expected a keyword"));
  EXPECT_THAT(parse_error("loss 101%"), HasSubstr("'101%'"));
  EXPECT_THAT(parse_error("loss -1%"), HasSubstr("'-1%'"));
  EXPECT_THAT(parse_error("queue sideways"), HasSubstr("'sideways' (token 2) after 'queue': expected 'shared' or 'per-path'"));
  EXPECT_THAT(parse_error("ecn-red 5000 1000 10%"), HasSubstr("'1000' (token 3) after 'ecn-red': expected a max above min"));
  EXPECT_THAT(parse_error("blackhole 2 5ms"), HasSubstr("'5ms' (token 3) after 'blackhole': expected 'at TIME'"));
  EXPECT_THAT(parse_error("delays 1us,x"), HasSubstr("'1us,x'"));
  EXPECT_EQ(parse_error("paths 8 blackhole 9 at 1ms"),
            "fabric spec: blackhole path 9 does not exist: paths are 0..7 (set paths first)");
  EXPECT_EQ(parse_error("paths 2 delays 1us,2us,3us"),
            "fabric spec: delays lists 3 paths but paths is 2: give one delay per path");
  EXPECT_THROW((void)parse_fabric_spec_or_throw("loss"), std::invalid_argument);
}

TEST(FabricSpec, CanonicalSpecRoundTrips) {
  for (std::string_view spec :
       {"", "loss 1% delay 10us jitter 2us rate 25gbit paths 8 spread 20us duplicate 0.5% corrupt 0.1% "
            "limit 1000000 ecn 100000 reorder 0.1% gemodel 1% 10% 70% 0.1% blackhole 3 at 5ms for 2ms",
        "paths 3 delays 1us,2us,5us queue per-path overhead 24 ecn-red 1000 5000 20% seed 9",
        "loss 0.333% rate 123456789bit delay 1234567ns reorder 0% gap 1ms blackhole 0 at 1s",
        "paths 4 blackhole at 2ms for 3ms blackhole 1 at 0s"}) {
    const FabricConfig config = parse_ok(spec);
    const std::string canonical = to_spec(config);
    EXPECT_EQ(parse_ok(canonical), config) << spec << " -> " << canonical;
  }
  EXPECT_EQ(to_spec(parse_ok("delay 2ms rate 25gbit loss 1%")), "paths 1 delay 2ms rate 25gbit loss 1%");
}

}  // namespace
}  // namespace metaroce::fabric
