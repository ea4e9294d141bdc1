// sim::Network: timing of deliveries and polls, routing, run_until, and the
// determinism of a whole lossy, reordering run.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "fabric/spec.hpp"
#include "sim/network.hpp"
#include "test_frames.hpp"

namespace metaroce::sim {
namespace {

using fabric::FabricConfig;
using fabric::parse_fabric_spec_or_throw;
using test::make_frame;
using test::psn_of;

constexpr std::uint64_t never = ~std::uint64_t{0};

struct Arrival {
  std::uint64_t time;
  std::vector<std::uint8_t> bytes;
};

// Sends scripted frames at scripted times; records arrivals and polls; can echo.
class StubEndpoint : public Endpoint {
 public:
  void send_at(std::uint64_t time, std::vector<std::uint8_t> frame) {
    script_.emplace(time, std::move(frame));
  }
  void wake_at(std::uint64_t time) { wakeups_.insert(time); }

  void on_frame(std::uint64_t now, std::span<const std::uint8_t> frame) override {
    arrivals.push_back({now, {frame.begin(), frame.end()}});
    if (echo) pending_echo_.emplace_back(frame.begin(), frame.end());
  }
  void poll(std::uint64_t now, std::vector<std::vector<std::uint8_t>>& out) override {
    polls.push_back(now);
    while (!script_.empty() && script_.begin()->first <= now) {
      out.push_back(std::move(script_.begin()->second));
      script_.erase(script_.begin());
    }
    while (!wakeups_.empty() && *wakeups_.begin() <= now) wakeups_.erase(wakeups_.begin());
    for (auto& frame : pending_echo_) out.push_back(std::move(frame));
    pending_echo_.clear();
  }
  std::uint64_t next_wakeup() const override {
    std::uint64_t next = never;
    if (!script_.empty()) next = script_.begin()->first;
    if (!wakeups_.empty()) next = std::min(next, *wakeups_.begin());
    return next;
  }

  bool echo = false;
  std::vector<Arrival> arrivals;
  std::vector<std::uint64_t> polls;

 private:
  std::multimap<std::uint64_t, std::vector<std::uint8_t>> script_;
  std::set<std::uint64_t> wakeups_;
  std::vector<std::vector<std::uint8_t>> pending_echo_;
};

FabricConfig spec(std::string_view text) { return parse_fabric_spec_or_throw(text); }

TEST(Network, DeliveryTimeIsNicSerialisationPlusFabricDelay) {
  StubEndpoint a, b;
  Network net;
  const EndpointId ia = net.add(a, HostConfig{{}, 10'000'000'000, 0});
  const EndpointId ib = net.add(b);
  net.connect(ia, ib, spec("delay 5us"), spec("delay 5us"));
  // 1250 B frames: 1 us each at 10 Gb/s.
  for (std::uint32_t i = 0; i < 3; ++i) a.send_at(1000, make_frame(50000, i, 1156));
  net.run_until(100'000);
  EXPECT_EQ(net.now(), 100'000u);
  ASSERT_EQ(b.arrivals.size(), 3u);
  EXPECT_EQ(b.arrivals[0].time, 1000u + 1000 + 5000);
  EXPECT_EQ(b.arrivals[1].time, 1000u + 2000 + 5000);
  EXPECT_EQ(b.arrivals[2].time, 1000u + 3000 + 5000);
  EXPECT_EQ(psn_of(b.arrivals[2].bytes), 2u);
  EXPECT_EQ(b.polls, (std::vector<std::uint64_t>{7000, 8000, 9000}));  // polled after each arrival
  EXPECT_EQ(net.counters().sent, 3u);
  EXPECT_EQ(net.counters().delivered, 3u);
}

TEST(Network, PingPongTakesTwoOneWayDelays) {
  StubEndpoint a, b;
  b.echo = true;
  Network net;
  net.connect(net.add(a), net.add(b), spec("delay 3us"), spec("delay 4us"));
  a.send_at(10, make_frame(50000, 1));
  net.run_until(1'000'000);
  ASSERT_EQ(a.arrivals.size(), 1u);
  EXPECT_EQ(a.arrivals[0].time, 10u + 3000 + 4000);
  EXPECT_EQ(a.arrivals[0].bytes, make_frame(50000, 1));
}

TEST(Network, WakeupsArePolledAtTheirExactTimes) {
  StubEndpoint a, b;
  Network net;
  net.connect(net.add(a), net.add(b), {}, {});
  for (std::uint64_t t : {100u, 250u, 1000u}) a.wake_at(t);
  net.run_until(500);
  EXPECT_EQ(a.polls, (std::vector<std::uint64_t>{100, 250}));
  EXPECT_TRUE(b.polls.empty());
  EXPECT_EQ(net.next_event_time(), 1000u);
  net.run_until(2000);
  EXPECT_EQ(a.polls, (std::vector<std::uint64_t>{100, 250, 1000}));
  EXPECT_EQ(net.next_event_time(), never);
}

TEST(Network, RunUntilPredicateStopsAtTheInstantItHolds) {
  StubEndpoint a, b;
  Network net;
  net.connect(net.add(a), net.add(b), spec("delay 1us"), spec("delay 1us"));
  for (std::uint32_t i = 0; i < 10; ++i) a.send_at(100ull * i, make_frame(50000, i));
  EXPECT_TRUE(net.run_until([&] { return b.arrivals.size() >= 4; }, 1'000'000));
  EXPECT_EQ(net.now(), 1000u + 300);
  EXPECT_EQ(b.arrivals.size(), 4u);
  EXPECT_FALSE(net.run_until([&] { return b.arrivals.size() >= 11; }, 50'000));
  EXPECT_EQ(net.now(), 50'000u);
  EXPECT_EQ(b.arrivals.size(), 10u);
}

TEST(Network, LossAtTheReceiverEqualsTheFabricsCount) {
  StubEndpoint a, b;
  Network net;
  const EndpointId ia = net.add(a), ib = net.add(b);
  net.connect(ia, ib, spec("loss 5% gemodel 1% 20% 50% 0% delay 2us seed 12"), {});
  for (std::uint32_t i = 0; i < 10'000; ++i) a.send_at(100ull * i, make_frame(50000, i));
  net.run_until(10'000'000);
  const fabric::FabricCounters& c = net.fabric(ia, ib).counters();
  EXPECT_EQ(c.received, 10'000u);
  EXPECT_EQ(10'000 - b.arrivals.size(), c.dropped_random_loss + c.dropped_burst_loss);
  EXPECT_GT(c.dropped_random_loss, 0u);
  EXPECT_GT(c.dropped_burst_loss, 0u);
}

TEST(Network, RoutesByDestinationMacAmongSeveralLinks) {
  StubEndpoint hub, left, right;
  Network net;
  const EndpointId ih = net.add(hub);
  HostAddress left_address, right_address;
  left_address.mac = {0x02, 0, 0, 0, 0, 0x0a};
  right_address.ipv4 = 0x0a00000b;
  const EndpointId il = net.add(left, HostConfig{left_address, 0, 0});
  const EndpointId ir = net.add(right, HostConfig{right_address, 0, 0});
  net.connect(ih, il, spec("delay 1us"), {});
  net.connect(ih, ir, spec("delay 2us"), {});
  auto to_left = make_frame(50000, 1);
  std::copy(left_address.mac.begin(), left_address.mac.end(), to_left.begin());
  auto to_right = make_frame(50000, 2);  // by IPv4 destination 10.0.0.11
  to_right[14 + 19] = 0x0b;
  auto to_nobody = make_frame(50000, 3);  // 10.0.0.2, MAC 02:..:02
  hub.send_at(0, to_left);
  hub.send_at(0, to_right);
  hub.send_at(0, to_nobody);
  net.run_until(1'000'000);
  ASSERT_EQ(left.arrivals.size(), 1u);
  EXPECT_EQ(left.arrivals[0].time, 1000u);
  EXPECT_EQ(psn_of(left.arrivals[0].bytes), 1u);
  ASSERT_EQ(right.arrivals.size(), 1u);
  EXPECT_EQ(right.arrivals[0].time, 2000u);
  EXPECT_EQ(net.counters().unroutable, 1u);
  EXPECT_THROW(net.connect(il, ih, {}, {}), std::invalid_argument);
  FabricConfig bad;
  bad.paths = 0;
  EXPECT_THROW(net.connect(il, ir, {}, bad), std::invalid_argument);
  EXPECT_THROW((void)net.fabric(il, ir), std::invalid_argument);  // nothing half-built
  EXPECT_THROW((void)net.fabric(il, ir), std::invalid_argument);
}

// A sender that paces one frame per microsecond over 16 ports until `count`,
// and a receiver that echoes everything: both directions impaired.
std::uint64_t whole_run_fingerprint(std::uint64_t seed) {
  struct PacedSender : StubEndpoint {
    std::uint32_t next_psn = 0;
    std::uint32_t count = 5000;
    void poll(std::uint64_t now, std::vector<std::vector<std::uint8_t>>& out) override {
      StubEndpoint::poll(now, out);
      while (next_psn < count && 1000ull * next_psn <= now) {
        out.push_back(make_frame(static_cast<std::uint16_t>(49152 + next_psn % 16), next_psn, 700));
        ++next_psn;
      }
    }
    std::uint64_t next_wakeup() const override {
      return next_psn < count ? 1000ull * next_psn : StubEndpoint::next_wakeup();
    }
  };
  PacedSender a;
  StubEndpoint b;
  b.echo = true;
  FabricConfig forward = spec(
      "loss 1% delay 10us jitter 2us rate 25gbit paths 8 spread 20us duplicate 0.5% corrupt 0.1% "
      "limit 100000 ecn 20000 reorder 0.5% gemodel 1% 10% 70% 0.1% blackhole 3 at 2ms for 1ms");
  FabricConfig backward = spec("loss 2% delay 12us jitter 3us paths 4 spread 5us reorder 1%");
  forward.seed = seed;
  backward.seed = seed + 1000;
  Network net;
  const EndpointId ia = net.add(a, HostConfig{{}, 100'000'000'000, 24});
  const EndpointId ib = net.add(b);
  net.connect(ia, ib, forward, backward);
  std::uint64_t hash = test::fnv1a_basis;
  net.on_delivery([&](const Delivery& d) {
    hash = test::fnv1a(test::fnv1a(test::fnv1a(hash, d.time), d.from * 2 + d.to), d.frame);
  });
  net.run_until(20'000'000);
  EXPECT_GT(b.arrivals.size(), 4500u);
  EXPECT_GT(a.arrivals.size(), 4000u);
  EXPECT_EQ(net.counters().delivered, a.arrivals.size() + b.arrivals.size());
  EXPECT_GT(net.fabric(ia, ib).counters().reordered, 0u);
  EXPECT_GT(net.fabric(ia, ib).counters().dropped_blackhole, 0u);
  return hash;
}

TEST(Network, SameSeedsGiveTheSameRunToTheByteAndNanosecond) {
  const std::uint64_t first = whole_run_fingerprint(7);
  EXPECT_EQ(whole_run_fingerprint(7), first);
  EXPECT_NE(whole_run_fingerprint(8), first);
}

TEST(Network, GivesUpWhenTimeCannotAdvance) {
  struct Insomniac : StubEndpoint {
    std::uint64_t next_wakeup() const override { return 0; }
  };
  Insomniac a;
  StubEndpoint b;
  Network net;
  net.connect(net.add(a), net.add(b), {}, {});
  EXPECT_THROW(net.run_until(10), std::runtime_error);
}

}  // namespace
}  // namespace metaroce::sim
