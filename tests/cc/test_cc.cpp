// Congestion-control algorithms, event by event, with exact outcomes.
#include <cmath>

#include <gtest/gtest.h>

#include "cc/dcqcn.hpp"
#include "cc/fair_share.hpp"
#include "cc/port_share_board.hpp"
#include "cc/metaroce_cc.hpp"
#include "cc/registry.hpp"

namespace {

using namespace metaroce;
using namespace metaroce::cc;

MetaroceCcParams four_paths() {
  MetaroceCcParams p;
  p.paths = 4;
  p.initial_window = 40;  // 10 per path
  return p;
}

TEST(MetaroceCc, AdditiveIncreaseIsOnePacketPerWindowAcked) {
  MetaroceCc cc(four_paths());
  // A full window of ACKs without marks: +1 packet (10 acks of 1/w each, w growing).
  for (int i = 0; i < 10; ++i) cc.on_ack(0, 1, 0, 10'000, 1'000);
  EXPECT_NEAR(cc.window(0), 10.95, 0.01);
  EXPECT_EQ(cc.path_window(0), 10u);
  EXPECT_EQ(cc.window(1), 10.0);  // other paths untouched
  EXPECT_EQ(cc.connection_window(), 40u);
}

TEST(MetaroceCc, MarksTrimOnlyThePathThatSawThem) {
  MetaroceCc cc(four_paths());
  // Round 1 on path 2: 10 acked, 5 marked. alpha = (1-1/16)*1 + 1/16*0.5.
  cc.on_ack(2, 10, 5, 10'000, 0);
  const double alpha = (1 - 1.0 / 16) * 1 + (1.0 / 16) * 0.5;
  EXPECT_DOUBLE_EQ(cc.alpha(2), alpha);
  EXPECT_DOUBLE_EQ(cc.window(2), 10 * (1 - alpha / 2));
  EXPECT_EQ(cc.window(0), 10.0);
  EXPECT_EQ(cc.window(1), 10.0);
  EXPECT_EQ(cc.window(3), 10.0);
  // A clear round decays alpha and cuts nothing.
  cc.on_ack(2, 10, 0, 10'000, 20'000);
  EXPECT_DOUBLE_EQ(cc.alpha(2), (1 - 1.0 / 16) * alpha);
  EXPECT_GT(cc.window(2), 10 * (1 - alpha / 2));
}

TEST(MetaroceCc, RandomLossLeavesWindowsAlone) {
  MetaroceCc cc(four_paths());
  for (int i = 0; i < 100; ++i) cc.on_loss(1, static_cast<transport::Time>(i) * 1000);
  EXPECT_EQ(cc.window(1), 10.0);
  EXPECT_EQ(cc.connection_window(), 40u);
}

TEST(MetaroceCc, ReceiverHintBecomesThePacingRate) {
  MetaroceCc cc(four_paths());
  EXPECT_EQ(cc.pacing_rate_bps(0), 0u);  // unpaced until told
  cc.on_rate_hint(6250, 0);
  EXPECT_EQ(cc.pacing_rate_bps(0), 6'250'000'000u);
}

TEST(MetaroceCc, WindowsStayWithinBounds) {
  MetaroceCcParams p = four_paths();
  p.max_path_window = 12;
  MetaroceCc cc(p);
  for (int i = 0; i < 1000; ++i) cc.on_ack(0, 1, 0, 10'000, 0);
  EXPECT_EQ(cc.window(0), 12.0);
  for (int i = 0; i < 100; ++i) cc.on_ack(1, 10, 10, 1'000, static_cast<transport::Time>(i) * 1'000'000);
  EXPECT_EQ(cc.window(1), 1.0);
}

TEST(Dcqcn, FirstCnpCutsByAlphaHalfAndRecoveryClimbsBack) {
  DcqcnParams p;
  p.line_rate_bps = 100'000'000'000;
  Dcqcn cc(p);
  EXPECT_EQ(cc.pacing_rate_bps(0), 100'000'000'000u);
  cc.on_congestion_notification(1'000);
  // alpha = 1023/1024: cut to (1 - alpha/2) of the rate (min_decrease, 50%,
  // is the floor a cut may not go below).
  const double after_cut = 100e9 * (1 - (1023.0 / 1024) / 2);
  EXPECT_DOUBLE_EQ(cc.current_rate_bps(), after_cut);
  EXPECT_DOUBLE_EQ(cc.target_rate_bps(), 100e9);
  EXPECT_EQ(cc.cuts(), 1u);
  // A second CNP within rate_reduce_period (4 us) does not cut again.
  cc.on_congestion_notification(3'000);
  EXPECT_EQ(cc.cuts(), 1u);
  // One timer event (300 us): timer 1 = threshold 1, bytes 0: additive:
  // target + 5 Mb/s is capped at line rate; current halfway to it.
  EXPECT_EQ(cc.pacing_rate_bps(1'000 + 300'000), static_cast<std::uint64_t>((after_cut + 100e9) / 2));
}

TEST(Dcqcn, AlphaDecaysWithoutNotifications) {
  DcqcnParams p;
  Dcqcn cc(p);
  cc.on_congestion_notification(0);
  const double a0 = cc.alpha();
  (void)cc.pacing_rate_bps(10'000);  // 10 alpha periods, the first holds the CNP
  EXPECT_NEAR(cc.alpha(), a0 * std::pow(1 - p.g, 9), 1e-12);
}

TEST(Dcqcn, ByteCounterDrivesIncreaseAndHyperIncrease) {
  DcqcnParams p;
  p.line_rate_bps = 100'000'000'000;
  p.threshold = 1;
  Dcqcn cc(p);
  cc.on_congestion_notification(0);
  cc.on_congestion_notification(10'000);  // second cut: target = 50G, current lower
  const double target = cc.target_rate_bps();
  // One byte event: bytes 1, timer 0: max = threshold: additive.
  cc.on_send(0, static_cast<std::uint32_t>(p.increase_bytes), 10'001);
  EXPECT_DOUBLE_EQ(cc.target_rate_bps(), target + 5e6);
  // A timer event then two more byte events: min(T=1, B=3) = 1, not > 1:
  // additive again; the timer's second event makes T=2, B=3: hyper.
  (void)cc.pacing_rate_bps(10'000 + 300'000);
  EXPECT_DOUBLE_EQ(cc.target_rate_bps(), target + 10e6);
  cc.on_send(0, static_cast<std::uint32_t>(2 * p.increase_bytes), 310'001);
  EXPECT_DOUBLE_EQ(cc.target_rate_bps(), target + 20e6);
  (void)cc.pacing_rate_bps(10'000 + 600'000);
  EXPECT_DOUBLE_EQ(cc.target_rate_bps(), target + 20e6 + 50e6);  // hyper: (min(2,3) - 1) x 50 Mb/s
}

TEST(FairShare, EqualSplitAmongActiveSenders) {
  FairShareParams p;
  p.capacity_bps = 100'000'000'000;
  FairShare share(p);
  // 16 senders start at once: nobody measured yet, all equal.
  for (std::uint32_t s = 1; s <= 16; ++s) share.on_arrival(s, 4000, 1'000);
  EXPECT_EQ(share.active_senders(1'000), 16u);
  EXPECT_EQ(share.share_mbps(3, 1'000), 6250u);
  // Senders 9..16 stop; 1..8 keep sending at their share (15.6 kB per 20 us
  // is 6.25 Gb/s): after the active window only those 8 count.
  for (transport::Time t = 20'000; t <= 60'000; t += 20'000)
    for (std::uint32_t s = 1; s <= 8; ++s) share.on_arrival(s, 15'625, t);
  EXPECT_EQ(share.active_senders(60'000), 8u);
  EXPECT_EQ(share.share_mbps(3, 60'000), 12500u);
}

TEST(FairShare, LightSendersKeepWhatTheyUseAndTheRestIsShared) {
  FairShareParams p;
  p.capacity_bps = 100'000'000'000;
  p.measure_period = 10'000;
  FairShare share(p);
  // Over one 10 us period: sender 1 sends 1 Gb/s worth (1250 bytes), senders
  // 2 and 3 much more.
  share.on_arrival(1, 1250, 0);
  share.on_arrival(2, 100'000, 0);
  share.on_arrival(3, 100'000, 0);
  // Each was told the equal split, a third of the port.
  for (std::uint32_t s = 1; s <= 3; ++s) EXPECT_EQ(share.share_mbps(s, 0), 33333u);
  share.on_arrival(2, 1, 10'000);  // rolls the period: rates measured
  share.on_arrival(1, 1, 10'000);
  share.on_arrival(3, 1, 10'000);
  EXPECT_EQ(share.share_mbps(1, 10'000), 1250u);              // 1 Gb/s x 1.25 headroom
  EXPECT_EQ(share.share_mbps(2, 10'000), (100'000 - 1250) / 2);  // the rest, split
}

// A sender alone at a port that used little of what it was told (a ring
// rank waiting for its next chunk, a sender recovering a loss) is light,
// but nobody else wants the port: it is told the whole port, not its past
// use plus headroom. (Told 1.25 x its use, it was paced at the rate of its
// idle time, used less again, and shrank to the 1 Mb/s floor: one 4 KiB
// frame per 33.5 ms.)
TEST(FairShare, ALightSenderAloneIsToldTheWholePort) {
  FairShareParams p;
  p.capacity_bps = 100'000'000'000;
  p.measure_period = 10'000;
  FairShare share(p);
  share.on_arrival(1, 1250, 0);
  EXPECT_EQ(share.share_mbps(1, 0), 100'000u);
  share.on_arrival(1, 1, 10'000);  // rolls the period: it used 1 Gb/s of 100
  const std::vector<Allocation> a = share.allocations(10'000);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(a[0].light);
  EXPECT_EQ(share.share_mbps(1, 10'000), 100'000u);
  // A front's demand still counts only its use: the port's other fronts
  // are not starved by a light sender's hint.
  EXPECT_DOUBLE_EQ(share.demand(10'000).light_bps, 1.25e9);
  // Two light senders split what they leave: each its use x 1.25 plus half
  // the rest.
  share.on_arrival(2, 1250, 10'000);
  (void)share.share_mbps(2, 10'000);  // told half the port
  share.on_arrival(1, 1249, 10'000);  // 1,250 bytes in the period with the one that rolled it
  share.on_arrival(1, 1, 20'000);  // both used 1 Gb/s
  share.on_arrival(2, 1, 20'000);
  EXPECT_EQ(share.share_mbps(1, 20'000), 1'250u + (100'000u - 2 * 1'250u) / 2);
}

// Light senders told large shares in the last period can claim more than
// the port (their use x 1.25 sums to 1.25 Gb/s of 1 Gb/s here); a heavy
// sender still gets an equal split of the port, never the 1 Mb/s floor.
TEST(FairShare, AHeavySenderGetsAtLeastAnEqualSplit) {
  FairShareParams p;
  p.capacity_bps = 1'000'000'000;
  p.measure_period = 10'000;
  FairShare share(p);
  // Senders 1..4 start one after the other, each told the equal split of
  // those active then, and each uses 48% of it.
  const std::uint32_t bytes[] = {600, 300, 200, 150};
  const std::uint32_t told[] = {1000, 500, 333, 250};
  for (std::uint32_t s = 1; s <= 4; ++s) {
    share.on_arrival(s, bytes[s - 1], 0);
    EXPECT_EQ(share.share_mbps(s, 0), told[s - 1]);
  }
  share.on_arrival(5, 1000, 0);  // never told anything: heavy
  for (std::uint32_t s = 1; s <= 5; ++s) share.on_arrival(s, 1, 10'000);
  const ShareDemand d = share.demand(10'000);
  EXPECT_EQ(d.heavy, 1u);
  EXPECT_DOUBLE_EQ(d.light_bps, 1.25e9);
  EXPECT_EQ(share.share_mbps(5, 10'000), 200u);  // 1 Gb/s / 5
}

// What the share hands out sums to its capacity: light senders keep their
// use plus headroom, the heavy ones split exactly the rest.
TEST(FairShare, AllocationsSumToTheCapacity) {
  FairShareParams p;
  p.capacity_bps = 2'000'000'000;
  p.measure_period = 10'000;
  FairShare share(p);
  for (std::uint32_t s = 1; s <= 5; ++s) share.on_arrival(s, s == 1 ? 125 : 10'000, 0);
  for (std::uint32_t s = 1; s <= 5; ++s) (void)share.share_mbps(s, 0);  // each told 400 Mb/s
  for (std::uint32_t s = 1; s <= 5; ++s) share.on_arrival(s, 1, 10'000);  // measured: 1 used 100 Mb/s
  const std::vector<Allocation> a = share.allocations(10'000);
  ASSERT_EQ(a.size(), 5u);
  double sum = 0;
  for (const Allocation& x : a) sum += x.bps;
  EXPECT_DOUBLE_EQ(sum, 2e9);
  EXPECT_TRUE(a[0].light);
  EXPECT_DOUBLE_EQ(a[0].bps, 125e6);  // 100 Mb/s x 1.25
  EXPECT_DOUBLE_EQ(a[1].bps, (2e9 - 125e6) / 4);
  const ShareDemand d = share.demand(10'000);
  EXPECT_EQ(d.heavy, 4u);
  EXPECT_DOUBLE_EQ(d.light_bps, 125e6);
}

TEST(FairShare, CountsArrivalsHintsAndStarts) {
  FairShare share(FairShareParams{});
  share.on_arrival(7, 1000, 0);
  share.on_arrival(8, 500, 0);
  share.on_arrival(7, 1000, 1'000);
  (void)share.share_mbps(7, 1'000);
  share.on_arrival(7, 1000, 1'000'000);  // back after the active window: a start again
  const FairShareCounters& c = share.counters();
  EXPECT_EQ(c.arrivals, 4u);
  EXPECT_EQ(c.arrival_bytes, 3500u);
  EXPECT_EQ(c.hints, 1u);
  EXPECT_EQ(c.generations, 3u);
  EXPECT_EQ(c.max_active_senders, 2u);
}

TEST(FairShare, PortCapacityFromTheOptionOrTheLink) {
  EXPECT_EQ(port_receive_capacity(2'000'000'000, 100'000), 2'000'000'000u);  // given: as given
  EXPECT_EQ(port_receive_capacity(0, 10'000), 9'700'000'000u);             // the link less 3%
  EXPECT_EQ(port_receive_capacity(0, 0), FairShareParams{}.capacity_bps);   // no link rate reported
  EXPECT_EQ(make_receive_share(0, 25'000)->capacity_bps(), 24'250'000'000u);
}

// Two lcores' fronts on one port: 3 heavy senders on one, 1 on the other
// and a light one; every heavy sender gets the same share whichever front
// it is on, and the fronts' capacities sum to the port's.
TEST(PortShare, DividesThePortAmongFrontsBySenders) {
  const PortShare port(2'000'000'000);
  const std::vector<std::uint64_t> parts = port.rebalance({{3, 0}, {1, 100e6}, {0, 0}});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0] + parts[1] + parts[2], 2'000'000'000u);
  EXPECT_EQ(parts[0], 1'425'000'000u);             // 3 x (2 G - 100 M) / 4
  EXPECT_EQ(parts[1], 100'000'000u + 475'000'000u);  // its light sender's use + one heavy part
  EXPECT_EQ(parts[2], 0u);                          // nobody there while others are heavy
  // Nobody heavy anywhere: the idle front gets what the light ones leave.
  const std::vector<std::uint64_t> idle = port.rebalance({{0, 300e6}, {0, 0}});
  EXPECT_EQ(idle[0], 300'000'000u);
  EXPECT_EQ(idle[1], 1'700'000'000u);
  // A front set to its part gives each of its heavy senders the same share.
  FairShareParams p;
  p.capacity_bps = parts[0];
  FairShare front(p);
  for (std::uint32_t s = 1; s <= 3; ++s) front.on_arrival(s, 1000, 0);
  EXPECT_EQ(front.share_mbps(1, 0), 475u);
  EXPECT_TRUE(port.rebalance({}).empty());
}

// A port with two receiving lcores (two fronts), driven as their lcores
// drive it: each front publishes and applies once a period, one rebalances.
// 2 heavy senders on front 0 and 1 on front 1 get equal shares once the
// parts reach the fronts, and the parts add up to the port.
TEST(PortShareBoard, FrontsTakeTheirPartOfThePortBySenders) {
  constexpr std::uint64_t port = 1'500'000'000;
  constexpr transport::Time period = real_time_measure_period;
  // 64 KiB a period: about 1 Gb/s, more than any share here (heavy).
  constexpr std::uint32_t burst = 65536;
  PortShareBoard board(port, 2);
  EXPECT_EQ(board.part_bps(0), port / 2);  // equal parts until the first rebalance
  EXPECT_EQ(board.part_bps(1), port / 2);
  auto front0 = make_receive_share(port / 2, 0);
  auto front1 = make_receive_share(port / 2, 0);
  const auto arrivals = [&](transport::Time now, bool third) {
    front0->on_arrival(1, burst, now);
    front0->on_arrival(2, burst, now);
    if (third) front1->on_arrival(3, burst, now);
  };
  // t = 0: both publish (2 and 1 heavy), then the rebalance divides by
  // them; the fronts still hold equal parts.
  arrivals(0, true);
  EXPECT_TRUE(board.front_turn(0, *front0, 0));
  EXPECT_TRUE(board.front_turn(1, *front1, 0));
  EXPECT_TRUE(board.rebalance_turn(0));
  EXPECT_EQ(board.rebalances(), 1u);
  EXPECT_EQ(board.part_bps(0), 1'000'000'000u);
  EXPECT_EQ(board.part_bps(1), 500'000'000u);
  EXPECT_EQ(front0->capacity_bps(), port / 2);
  EXPECT_EQ(front0->share_mbps(1, 0), 375u);  // 750 M / 2: unequal before
  EXPECT_EQ(front1->share_mbps(3, 0), 750u);
  // Within the period nothing moves.
  EXPECT_FALSE(board.front_turn(0, *front0, period - 1));
  EXPECT_FALSE(board.rebalance_turn(period - 1));
  // Next period: each front takes its part; every sender gets 500 Mb/s.
  arrivals(period, true);
  EXPECT_TRUE(board.front_turn(0, *front0, period));
  EXPECT_TRUE(board.front_turn(1, *front1, period));
  EXPECT_EQ(front0->capacity_bps(), 1'000'000'000u);
  EXPECT_EQ(front1->capacity_bps(), 500'000'000u);
  EXPECT_EQ(front0->share_mbps(1, period), 500u);
  EXPECT_EQ(front0->share_mbps(2, period), 500u);
  EXPECT_EQ(front1->share_mbps(3, period), 500u);
  EXPECT_TRUE(board.rebalance_turn(period));
  EXPECT_EQ(board.rebalances(), 2u);
  // Front 1's sender stops; once it has been gone longer than the active
  // window, front 0's two heavy senders get the whole port between them.
  transport::Time now = period;
  while (now <= period + real_time_active_window + period) {
    now += period;
    arrivals(now, false);
    EXPECT_TRUE(board.front_turn(0, *front0, now));
    EXPECT_TRUE(board.front_turn(1, *front1, now));
    EXPECT_TRUE(board.rebalance_turn(now));
  }
  EXPECT_EQ(front1->demand(now).heavy, 0u);
  EXPECT_EQ(board.part_bps(0), port);
  EXPECT_EQ(board.part_bps(1), 0u);
  now += period;
  arrivals(now, false);
  EXPECT_TRUE(board.front_turn(0, *front0, now));
  EXPECT_EQ(front0->capacity_bps(), port);
  EXPECT_EQ(front0->share_mbps(1, now), 750u);
  EXPECT_EQ(front0->share_mbps(2, now), 750u);
}

TEST(Registry, MakesEachAlgorithmByName) {
  std::string error;
  CcConfig config;
  for (std::string_view name : algorithm_names()) {
    auto cc = make(name, config, error);
    ASSERT_TRUE(cc) << name;
    EXPECT_EQ(cc->name(), name);
  }
  EXPECT_FALSE(make("cubic", config, error));
  EXPECT_EQ(error, "unknown congestion control 'cubic': use metaroce, dcqcn or fixed");
}

}  // namespace
