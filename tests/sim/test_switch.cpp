// sim::Network switches: an incast port's serialisation, queue, tail drops and
// CE marks to the byte and nanosecond; ECMP over a trunk; a link slowed at a
// given time; routing across two switches; determinism of a switched run.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include "fabric/frame_peek.hpp"
#include "sim/network.hpp"
#include "sim/topology.hpp"
#include "test_frames.hpp"
#include "wire/frame.hpp"
#include "wire/opcode.hpp"
#include "wire_samples.hpp"

namespace metaroce::sim {
namespace {

constexpr std::uint64_t never = ~std::uint64_t{0};
constexpr std::uint64_t gbit = 1'000'000'000;

// A valid metaroce WRITE (ECT(0), ICRC included) from `src` to `dst`.
std::vector<std::uint8_t> frame_between(const HostAddress& src, const HostAddress& dst, std::uint16_t sport,
                                        std::uint32_t psn, std::size_t payload_len) {
  wire::FrameSpec spec = test::sample_spec(wire::opcode::mr_write, 4, false);
  spec.eth.src = src.mac;
  spec.eth.dst = dst.mac;
  spec.ipv4.src = src.ipv4;
  spec.ipv4.dst = dst.ipv4;
  spec.udp.src_port = sport;
  spec.bth.psn = psn;
  std::vector<std::uint8_t> payload(payload_len, 0x5a);
  std::vector<std::uint8_t> bytes(payload_len + 256);
  bytes.resize(wire::build_frame(spec, payload, bytes));
  return bytes;
}

// A payload length whose frame serialises in a whole number of ns at 100 Gb/s
// (frame bytes a multiple of 125), so the expected times below are exact.
std::size_t payload_for_whole_ns_at_100g() {
  for (std::size_t payload = 900; payload < 1400; ++payload) {
    if (frame_between({}, {}, 1, 0, payload).size() % 125 == 0) return payload;
  }
  throw std::logic_error("no payload length gives a multiple of 125 bytes");
}

struct Arrival {
  std::uint64_t time;
  std::vector<std::uint8_t> bytes;
};

// Hands all its frames to the network at `start`: the NIC then sends them
// back to back at its line rate. Records what arrives; can echo it back to
// its sender (addresses swapped; the ICRC is then stale, which no switch checks).
class Blaster : public Endpoint {
 public:
  std::vector<std::vector<std::uint8_t>> frames;
  std::uint64_t start = 0;
  bool echo = false;
  std::vector<Arrival> arrivals;

  void on_frame(std::uint64_t now, std::span<const std::uint8_t> frame) override {
    arrivals.push_back({now, {frame.begin(), frame.end()}});
    if (echo) {
      std::vector<std::uint8_t> back(frame.begin(), frame.end());
      std::swap_ranges(back.begin(), back.begin() + 6, back.begin() + 6);                // MACs
      std::swap_ranges(back.begin() + 26, back.begin() + 30, back.begin() + 30);         // IPv4
      echoes_.push_back(std::move(back));
    }
  }
  void poll(std::uint64_t now, std::vector<std::vector<std::uint8_t>>& out) override {
    if (!sent_ && now >= start) {
      for (auto& frame : frames) out.push_back(std::move(frame));
      sent_ = true;
    }
    for (auto& frame : echoes_) out.push_back(std::move(frame));
    echoes_.clear();
  }
  std::uint64_t next_wakeup() const override { return sent_ || frames.empty() ? never : start; }

 private:
  bool sent_ = false;
  std::vector<std::vector<std::uint8_t>> echoes_;
};

std::uint32_t source_ipv4(std::span<const std::uint8_t> frame) { return wire::load_be32(frame.data() + 14 + 12); }

std::uint16_t source_port(std::span<const std::uint8_t> frame) { return fabric::peek_frame(frame).udp_src_port; }

// ---------------------------------------------------------------------------

TEST(Switch, IncastPortSerialisesQueuesDropsAndMarksExactly) {
  const std::size_t payload = payload_for_whole_ns_at_100g();
  const std::uint64_t frame_bytes = frame_between({}, {}, 1, 0, payload).size();
  const std::uint64_t ser = frame_bytes * 8 / 100;  // ns at 100 Gb/s
  constexpr std::uint32_t senders = 4, frames_each = 20;
  const std::uint64_t limit = 10 * frame_bytes, ecn_threshold = 4 * frame_bytes;

  IncastStarConfig config;
  config.sender_host.nic_rate_bps = 100 * gbit;
  config.receiver_host.nic_rate_bps = 100 * gbit;
  config.uplink.delay_ns = 1000;
  config.to_senders.rate_bps = 100 * gbit;
  config.to_receiver = LinkConfig{100 * gbit, 0, limit, fabric::EcnMarking{true, ecn_threshold, ecn_threshold, 1.0},
                                  2000, 1};
  // Two identical runs: one sampled throughout, one with a window opened midway.
  struct Run {
    std::vector<Blaster> blasters{senders};
    Blaster receiver;
    Network net;
    IncastStar star;
  };
  auto build = [&](Run& run) {
    std::vector<Endpoint*> refs;
    for (Blaster& b : run.blasters) refs.push_back(&b);
    run.star = incast_star(run.net, refs, run.receiver, config);
    const HostAddress to = numbered_host_address(run.star.receiver);
    for (std::uint32_t i = 0; i < senders; ++i) {
      const HostAddress from = numbered_host_address(run.star.senders[i]);
      for (std::uint32_t k = 0; k < frames_each; ++k)
        run.blasters[i].frames.push_back(frame_between(from, to, static_cast<std::uint16_t>(49152 + i), k, payload));
    }
  };
  Run sampled, windowed_run;
  build(sampled);
  build(windowed_run);
  Network& net = sampled.net;
  const IncastStar& star = sampled.star;
  const Blaster& receiver = sampled.receiver;

  // Reference: sender i's frame k leaves its NIC at (k+1)*ser and reaches the
  // switch 1 us later, together with the other senders' k-th frames, taken in
  // connect order. The port's occupancy q is the bytes accepted whose last bit
  // has not left; drop when q + frame > limit, mark when q > threshold.
  struct Expected {
    std::uint32_t sender, psn;
    std::uint64_t accepted, departure;
    bool marked;
  };
  std::vector<Expected> expected;
  std::uint64_t busy = 0, peak = 0, dropped = 0;
  std::pair<std::uint32_t, std::uint32_t> first_drop{99, 99}, first_mark{99, 99};
  for (std::uint32_t k = 0; k < frames_each; ++k) {
    const std::uint64_t now = (k + 1) * ser + 1000;
    for (std::uint32_t i = 0; i < senders; ++i) {
      const std::uint64_t queued = frame_bytes * static_cast<std::uint64_t>(std::count_if(
                                       expected.begin(), expected.end(), [&](const Expected& e) { return e.departure > now; }));
      if (queued + frame_bytes > limit) {
        if (dropped++ == 0) first_drop = {k, i};
        continue;
      }
      const bool marked = queued > ecn_threshold;
      if (marked && first_mark.first == 99) first_mark = {k, i};
      busy = std::max(busy, now) + ser;
      expected.push_back({i, k, now, busy, marked});
      peak = std::max(peak, queued + frame_bytes);
    }
  }
  // By hand: instant k finds 3k + i frames queued (k have left), until the limit.
  EXPECT_EQ(first_mark, (std::pair<std::uint32_t, std::uint32_t>{1, 2}));  // 5 queued > 4
  EXPECT_EQ(first_drop, (std::pair<std::uint32_t, std::uint32_t>{3, 1}));  // 10 queued + 1 > 10
  EXPECT_EQ(peak, limit);

  // Sample the queue every 37 ns against the reference.
  const std::uint64_t end = busy + 5000;
  for (std::uint64_t t = 0; t < end; t += 37) {
    net.run_until(t);
    const std::uint64_t queued = frame_bytes * static_cast<std::uint64_t>(std::count_if(
                                     expected.begin(), expected.end(),
                                     [&](const Expected& e) { return e.accepted <= t && e.departure > t; }));
    ASSERT_EQ(net.queued_bytes(star.sw, star.bottleneck), queued) << "t=" << t;
  }
  // Time-weighted average over [0, mid], then over a window [mid, end].
  const std::uint64_t mid = 1000 + 8 * ser;
  auto byte_ns = [&](std::uint64_t from, std::uint64_t until) {
    std::uint64_t sum = 0;
    for (const Expected& e : expected) {
      const std::uint64_t lo = std::max(e.accepted, from), hi = std::min(e.departure, until);
      if (hi > lo) sum += frame_bytes * (hi - lo);
    }
    return sum;
  };
  net.run_until(end);
  const SwitchPort& port = net.port(star.sw, star.bottleneck);
  EXPECT_DOUBLE_EQ(port.average_queued_bytes(end), static_cast<double>(byte_ns(0, end)) / static_cast<double>(end));
  EXPECT_EQ(port.window_peak_bytes(), limit);

  // Counters.
  const std::uint64_t marked = static_cast<std::uint64_t>(
      std::count_if(expected.begin(), expected.end(), [](const Expected& e) { return e.marked; }));
  EXPECT_EQ(port.counters().enqueued, expected.size());
  EXPECT_EQ(port.counters().forwarded, expected.size());
  EXPECT_EQ(port.counters().dropped_queue_full, dropped);
  EXPECT_EQ(port.counters().ecn_marked, marked);
  EXPECT_EQ(port.counters().peak_queued_bytes, limit);
  EXPECT_EQ(expected.size() + dropped, std::uint64_t{senders} * frames_each);
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(net.switch_counters(star.sw).received, std::uint64_t{senders} * frames_each);

  // The receiver: every accepted frame, in acceptance order, at departure +
  // 2 us; CE exactly where expected, and the ICRC still valid.
  ASSERT_EQ(receiver.arrivals.size(), expected.size());
  std::map<std::uint32_t, std::uint32_t> next_psn_of_sender;
  for (std::size_t n = 0; n < expected.size(); ++n) {
    const Arrival& got = receiver.arrivals[n];
    const Expected& want = expected[n];
    EXPECT_EQ(got.time, want.departure + 2000) << n;
    wire::ParsedFrame parsed;
    ASSERT_EQ(wire::parse_frame(got.bytes, parsed), wire::ParseError::ok) << n;
    EXPECT_EQ(parsed.ecn(), want.marked ? fabric::ecn::ce : fabric::ecn::ect0) << n;
    EXPECT_EQ(parsed.bth.psn, want.psn) << n;
    EXPECT_EQ(source_port(got.bytes), 49152 + want.sender) << n;
    // Per input port FIFO: each sender's surviving PSNs only grow.
    std::uint32_t& next = next_psn_of_sender[want.sender];
    EXPECT_GE(parsed.bth.psn, next) << n;
    next = parsed.bth.psn + 1;
  }

  // The same run with a window opened at `mid`: average and peak over [mid, end].
  Network& windowed_net = windowed_run.net;
  const IncastStar& windowed_star = windowed_run.star;
  windowed_net.run_until(mid);
  EXPECT_DOUBLE_EQ(windowed_net.port(windowed_star.sw, windowed_star.bottleneck).average_queued_bytes(mid),
                   static_cast<double>(byte_ns(0, mid)) / static_cast<double>(mid));
  windowed_net.port(windowed_star.sw, windowed_star.bottleneck).start_window(mid);
  windowed_net.run_until(end);
  const SwitchPort& windowed = windowed_net.port(windowed_star.sw, windowed_star.bottleneck);
  EXPECT_EQ(windowed.window_start(), mid);
  EXPECT_DOUBLE_EQ(windowed.average_queued_bytes(end),
                   static_cast<double>(byte_ns(mid, end)) / static_cast<double>(end - mid));
  EXPECT_EQ(windowed.counters(), port.counters());
  EXPECT_EQ(windowed_run.receiver.arrivals.size(), receiver.arrivals.size());
}

TEST(Switch, EcmpKeepsEachSourcePortOnOneTrunkLinkInOrder) {
  Blaster consecutive, one_per_link, receiver;
  std::vector<Endpoint*> left{&consecutive, &one_per_link}, right{&receiver};
  TwoTierConfig config;
  config.host.nic_rate_bps = 100 * gbit;
  config.uplink.delay_ns = 1000;
  config.to_hosts = LinkConfig{100 * gbit, 0, 0, {}, 500, 1};
  config.trunk = LinkConfig{25 * gbit, 0, 0, {}, 700, 1};
  Network net;
  const TwoTier topology = two_tier(net, left, right, 8, config);
  const HostAddress to = numbered_host_address(topology.right_hosts[0]);
  constexpr std::uint32_t rounds = 10;
  std::vector<std::uint16_t> consecutive_ports, hashed_ports;
  for (std::uint32_t k = 0; k < 8; ++k) {
    consecutive_ports.push_back(static_cast<std::uint16_t>(49152 + k));
    hashed_ports.push_back(test::port_on_path(k, 8));
  }
  for (std::uint32_t r = 0; r < rounds; ++r) {
    for (std::uint32_t k = 0; k < 8; ++k) {
      consecutive.frames.push_back(frame_between(numbered_host_address(topology.left_hosts[0]), to,
                                                 consecutive_ports[k], r * 8 + k, 200));
      one_per_link.frames.push_back(frame_between(numbered_host_address(topology.left_hosts[1]), to,
                                                  hashed_ports[k], r * 8 + k, 200));
    }
  }
  net.run_until(1'000'000);

  // Each link carries exactly the frames whose source port hashes onto it.
  std::vector<std::uint64_t> expected_per_link(8, rounds);  // one hashed port per link
  for (std::uint16_t port : consecutive_ports) expected_per_link[fabric::path_of_port(port, 8)] += rounds;
  for (std::uint32_t k = 0; k < 8; ++k) {
    EXPECT_EQ(net.port(topology.left, topology.trunk.a_port(k)).counters().enqueued, expected_per_link[k]) << k;
    EXPECT_EQ(net.port(topology.right, topology.trunk.b_port(k)).counters().enqueued, 0u) << k;
  }
  // The hash puts 8 consecutive ports on 8 different links.
  EXPECT_EQ(expected_per_link, std::vector<std::uint64_t>(8, 2 * rounds));

  // Every frame arrives; per (sender, source port) in sending order.
  ASSERT_EQ(receiver.arrivals.size(), 2u * 8 * rounds);
  std::map<std::pair<std::uint32_t, std::uint16_t>, std::int64_t> last_psn;
  for (const Arrival& got : receiver.arrivals) {
    const auto key = std::make_pair(source_ipv4(got.bytes), source_port(got.bytes));
    const auto psn = static_cast<std::int64_t>(test::psn_of(got.bytes));
    const auto [it, fresh] = last_psn.emplace(key, psn);
    if (!fresh) {
      EXPECT_GT(psn, it->second);
      it->second = psn;
    }
  }
  EXPECT_EQ(last_psn.size(), 16u);
  // Frames of one port arrive 8 frames apart, one link time apart at least.
  std::map<std::uint16_t, std::uint64_t> last_time;
  const std::uint64_t link_time = (test::make_frame(1, 0, 200).size() * 8 + 24) / 25;  // >= ser at 25 Gb/s
  for (const Arrival& got : receiver.arrivals) {
    if (source_ipv4(got.bytes) != numbered_host_address(topology.left_hosts[1]).ipv4) continue;
    const auto [it, fresh] = last_time.emplace(source_port(got.bytes), got.time);
    if (!fresh) {
      EXPECT_GE(got.time - it->second, link_time - 1);
      it->second = got.time;
    }
  }
}

TEST(Switch, SlowedTrunkLinkSerialisesAtTheNewRateFromTimeT) {
  Blaster sender, receiver;
  std::vector<Endpoint*> left{&sender}, right{&receiver};
  const std::size_t payload = payload_for_whole_ns_at_100g();
  const std::uint64_t frame_bytes = frame_between({}, {}, 1, 0, payload).size();
  const std::uint64_t ser = frame_bytes * 8 / 100;
  TwoTierConfig config;
  config.host.nic_rate_bps = 100 * gbit;
  config.uplink.delay_ns = 1000;
  config.to_hosts = LinkConfig{100 * gbit, 0, 0, {}, 300, 1};
  config.trunk = LinkConfig{100 * gbit, 0, 0, {}, 500, 1};
  Network net;
  const TwoTier topology = two_tier(net, left, right, 8, config);
  const std::uint16_t on_link_3 = test::port_on_path(3, 8), on_link_4 = test::port_on_path(4, 8);
  constexpr std::uint32_t frames = 30, slowed_from = 10;
  const HostAddress from = numbered_host_address(0), to = numbered_host_address(1);
  for (std::uint32_t k = 0; k < frames; ++k)
    sender.frames.push_back(frame_between(from, to, k % 3 != 2 ? on_link_3 : on_link_4, k, payload));
  // Frame k reaches the left switch at (k+1)*ser + 1 us; T is frame 10's arrival.
  const std::uint64_t slow_at = (slowed_from + 1) * ser + 1000;
  net.set_port_rate(topology.left, topology.trunk.a_port(3), 50 * gbit, slow_at);
  EXPECT_EQ(net.next_event_time(), 0u);  // the sender's first poll
  net.run_until(slow_at - 1);
  EXPECT_EQ(net.port(topology.left, topology.trunk.a_port(3)).rate_bps(), 100 * gbit);
  net.run_until(1'000'000);
  EXPECT_EQ(net.port(topology.left, topology.trunk.a_port(3)).rate_bps(), 50 * gbit);
  EXPECT_EQ(net.port(topology.left, topology.trunk.a_port(4)).rate_bps(), 100 * gbit);

  // Reference: link 3 (k % 3 != 2) serialises at 2*ser from T on, link 4 stays at
  // ser; the right switch's port toward the receiver serialises at ser.
  std::uint64_t busy3 = 0, busy4 = 0;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> at_right;  // (arrival at right switch, psn)
  for (std::uint32_t k = 0; k < frames; ++k) {
    const std::uint64_t arrival = (k + 1) * ser + 1000;
    const bool link_3 = k % 3 != 2;
    std::uint64_t& busy = link_3 ? busy3 : busy4;
    busy = std::max(busy, arrival) + (link_3 && arrival >= slow_at ? 2 * ser : ser);
    at_right.emplace_back(busy + 500, k);
  }
  std::stable_sort(at_right.begin(), at_right.end());  // same instant: link 3's port comes first
  ASSERT_EQ(receiver.arrivals.size(), frames);
  std::uint64_t busy_down = 0;
  for (std::size_t n = 0; n < frames; ++n) {
    busy_down = std::max(busy_down, at_right[n].first) + ser;
    EXPECT_EQ(receiver.arrivals[n].time, busy_down + 300) << n;
    EXPECT_EQ(test::psn_of(receiver.arrivals[n].bytes), at_right[n].second) << n;
  }
  // Only the slowed link builds a queue: 2 frames per 3*ser offered, 4*ser to serve them.
  const PortCounters& slowed = net.port(topology.left, topology.trunk.a_port(3)).counters();
  const PortCounters& other = net.port(topology.left, topology.trunk.a_port(4)).counters();
  EXPECT_EQ(slowed.enqueued, 2 * frames / 3);
  EXPECT_EQ(other.enqueued, frames / 3);
  EXPECT_EQ(other.peak_queued_bytes, frame_bytes);
  EXPECT_GT(slowed.peak_queued_bytes, frame_bytes);
}

TEST(Switch, TwoTierRoutesWithinAndAcrossSwitches) {
  std::vector<Blaster> hosts(4);
  std::vector<Endpoint*> left{&hosts[0], &hosts[1]}, right{&hosts[2], &hosts[3]};
  TwoTierConfig config;
  config.uplink.delay_ns = 1000;
  config.to_hosts.delay_ns = 200;
  config.trunk.delay_ns = 700;
  config.switch_config.forwarding_latency_ns = 100;
  Network net;
  const TwoTier topology = two_tier(net, left, right, 2, config);
  HostAddress nobody = numbered_host_address(77);
  for (std::uint32_t from = 0; from < 4; ++from) {
    for (std::uint32_t to = 0; to < 4; ++to) {
      if (to != from)
        hosts[from].frames.push_back(
            frame_between(numbered_host_address(from), numbered_host_address(to), 49152, from * 4 + to, 64));
    }
    hosts[from].frames.push_back(frame_between(numbered_host_address(from), nobody, 49152, 99, 64));
  }
  // Route by IPv4 when the MAC is unknown: host 3 by IP only.
  hosts[0].frames.push_back(frame_between(numbered_host_address(0), numbered_host_address(3), 49152, 3, 64));
  std::fill(hosts[0].frames.back().begin(), hosts[0].frames.back().begin() + 6, 0xee);
  std::vector<Delivery> deliveries;
  net.on_delivery([&](const Delivery& d) { deliveries.push_back({d.time, d.from, d.to, {}}); });
  net.run_until(100'000);

  for (std::uint32_t to = 0; to < 4; ++to) {
    ASSERT_EQ(hosts[to].arrivals.size(), to == 3 ? 4u : 3u) << to;
    for (const Arrival& got : hosts[to].arrivals) {
      const std::uint32_t from = test::psn_of(got.bytes) / 4;
      const bool same_switch = (from < 2) == (to < 2);
      // uplink + forwarding + [trunk + forwarding] + down link
      EXPECT_EQ(got.time, same_switch ? 1000u + 100 + 200 : 1000u + 100 + 700 + 100 + 200) << from << "->" << to;
      EXPECT_EQ(test::psn_of(got.bytes) % 4, to == 3 && from == 0 ? 3u : to);
    }
  }
  ASSERT_EQ(deliveries.size(), 13u);
  for (const Delivery& d : deliveries) EXPECT_NE(d.from, d.to);
  EXPECT_EQ(deliveries.front().time, 1300u);
  std::uint64_t across_left = 0, across_right = 0;
  for (std::uint32_t k = 0; k < 2; ++k) {
    across_left += net.port(topology.left, topology.trunk.a_port(k)).counters().forwarded;
    across_right += net.port(topology.right, topology.trunk.b_port(k)).counters().forwarded;
  }
  EXPECT_EQ(across_left, 5u);  // 0->2, 0->3 (twice), 1->2, 1->3
  EXPECT_EQ(across_right, 4u);
  EXPECT_EQ(net.switch_counters(topology.left).unroutable, 2u);
  EXPECT_EQ(net.switch_counters(topology.right).unroutable, 2u);
  EXPECT_EQ(net.counters().unroutable, 4u);
  EXPECT_EQ(net.uplink(0, topology.left).counters().received, 5u);
  EXPECT_EQ(net.next_event_time(), never);
}

TEST(Switch, BadTopologiesAreRefusedAndChangeNothing) {
  Blaster a, b;
  Network net;
  const EndpointId ia = net.add(a), ib = net.add(b);
  const SwitchId s0 = net.add_switch(), s1 = net.add_switch();
  EXPECT_EQ(net.connect_host(ia, s0, {}, {}), 0u);
  EXPECT_THROW(net.connect_host(ia, s0, {}, {}), std::invalid_argument);
  EXPECT_THROW(net.connect_host(ia, 7, {}, {}), std::invalid_argument);
  EXPECT_THROW(net.connect_host(9, s0, {}, {}), std::invalid_argument);
  fabric::FabricConfig bad_wire;
  bad_wire.paths = 0;
  EXPECT_THROW(net.connect_host(ib, s0, bad_wire, {}), std::invalid_argument);
  LinkConfig bad_ecn;
  bad_ecn.ecn = fabric::EcnMarking{true, 2000, 1000, 1.0};
  EXPECT_THROW(net.connect_host(ib, s0, {}, bad_ecn), std::invalid_argument);
  EXPECT_EQ(net.port_count(s0), 1u);
  EXPECT_THROW((void)net.uplink(ib, s0), std::invalid_argument);
  EXPECT_THROW(net.connect_switches(s0, s0, 2, {}), std::invalid_argument);
  EXPECT_THROW(net.connect_switches(s0, s1, 0, {}), std::invalid_argument);
  EXPECT_THROW(net.connect_switches(s0, s1, 257, {}), std::invalid_argument);
  const Trunk trunk = net.connect_switches(s0, s1, 4, {});
  EXPECT_EQ(trunk.a_port(0), 1u);
  EXPECT_EQ(trunk.b_port(3), 3u);
  EXPECT_EQ(net.port_count(s0), 5u);
  EXPECT_THROW(net.set_port_rate(s0, 5, gbit, 0), std::invalid_argument);
  EXPECT_THROW(net.set_port_rate(s0, 1, 0, 0), std::invalid_argument);
  EXPECT_THROW((void)net.port_toward(s1, ia), std::invalid_argument);
  EXPECT_EQ(net.port_toward(s0, ia), 0u);
}

// 8 senders into one port with RED marking, lossy jittery uplinks, a
// forwarding latency, a receiver that echoes every frame back through the
// switch and a rate change mid-run: the whole delivery sequence, hashed.
std::uint64_t switched_run_fingerprint(std::uint64_t seed) {
  constexpr std::uint32_t senders = 8, frames_each = 300;
  std::vector<Blaster> blasters(senders);
  Blaster receiver;
  receiver.echo = true;
  std::vector<Endpoint*> refs;
  for (Blaster& b : blasters) refs.push_back(&b);
  IncastStarConfig config;
  config.sender_host = HostConfig{{}, 25 * gbit, 24};
  config.receiver_host = HostConfig{{}, 100 * gbit, 24};
  config.uplink.delay_ns = 1000;
  config.uplink.jitter_ns = 300;
  config.uplink.loss = 0.02;
  config.uplink.seed = seed;
  config.to_senders = LinkConfig{100 * gbit, 24, 0, {}, 1000, seed};
  config.to_receiver = LinkConfig{100 * gbit, 24, 60'000, fabric::EcnMarking{true, 5'000, 40'000, 0.5}, 1000, seed};
  config.switch_config.forwarding_latency_ns = 250;
  Network net;
  const IncastStar star = incast_star(net, refs, receiver, config);
  for (std::uint32_t i = 0; i < senders; ++i) {
    blasters[i].start = 100 * i;
    for (std::uint32_t k = 0; k < frames_each; ++k)
      blasters[i].frames.push_back(frame_between(numbered_host_address(star.senders[i]),
                                                 numbered_host_address(star.receiver),
                                                 static_cast<std::uint16_t>(49152 + k % 4), k, 1000));
  }
  net.set_port_rate(star.sw, star.bottleneck, 40 * gbit, 50'000);
  std::uint64_t hash = test::fnv1a_basis;
  net.on_delivery([&](const Delivery& d) {
    hash = test::fnv1a(test::fnv1a(test::fnv1a(hash, d.time), d.from * 64 + d.to), d.frame);
  });
  net.run_until(5'000'000);
  const PortCounters& bottleneck = net.port(star.sw, star.bottleneck).counters();
  EXPECT_GT(bottleneck.ecn_marked, 0u);
  EXPECT_GT(bottleneck.dropped_queue_full, 0u);
  EXPECT_LT(bottleneck.ecn_marked, bottleneck.enqueued);
  EXPECT_EQ(receiver.arrivals.size(), bottleneck.forwarded);
  std::uint64_t echoed = 0;
  for (const Blaster& b : blasters) echoed += b.arrivals.size();
  EXPECT_GT(echoed, 0u);
  EXPECT_LT(echoed, receiver.arrivals.size());  // echoes lost on the receiver's uplink
  hash = test::fnv1a(hash, bottleneck.ecn_marked);
  return hash;
}

TEST(Switch, SameSeedsGiveTheSameSwitchedRun) {
  const std::uint64_t first = switched_run_fingerprint(7);
  EXPECT_EQ(switched_run_fingerprint(7), first);
  EXPECT_NE(switched_run_fingerprint(8), first);
}

}  // namespace
}  // namespace metaroce::sim
