// A host's receive share (Host::set_receive_share): attached to exactly the
// connections whose controller follows the rate hint in metaroce mode, fed
// one arrival per data packet, and its hint is what the sender paces at.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cc/fair_share.hpp"
#include "cc/registry.hpp"
#include "host/host.hpp"
#include "host_test_support.hpp"

namespace metaroce::test {
namespace {

using transport::Connection;

// `controller`, when given, is set to the connection's congestion control.
Connection& add(host::Host& h, const transport::ConnectionConfig& config, const std::string& cc,
                transport::CongestionControl** controller = nullptr) {
  std::string error;
  cc::CcConfig cc_config;
  cc_config.metaroce.paths = config.paths;
  std::unique_ptr<transport::CongestionControl> made = cc.empty() ? nullptr : cc::make(cc, cc_config, error);
  if (controller != nullptr) *controller = made.get();
  Connection* c = h.add_connection(config, std::move(made), error);
  if (c == nullptr) throw std::invalid_argument(error);
  c->connect();
  return *c;
}

TEST(HostReceiveShare, AttachedToMetaroceControlledConnectionsOnly) {
  host::Host a(host::HostConfig{.name = "A"});
  host::Host b(host::HostConfig{.name = "B"});
  cc::FairShareParams params;
  params.capacity_bps = 2'000'000'000;
  cc::FairShare share(params);
  b.set_receive_share(&share);
  transport::ConnectionConfig base;
  base.paths = 4;
  transport::ConnectionConfig rocev2 = base;
  rocev2.mode = transport::Mode::rocev2;
  rocev2.paths = 1;
  const std::vector<std::pair<transport::ConnectionConfig, std::string>> ends = {
      {base, "metaroce"}, {base, "fixed"}, {base, ""}, {base, "dcqcn"}, {rocev2, "metaroce"}};
  std::vector<Connection*> senders, receivers;
  transport::CongestionControl* sender_cc = nullptr;
  for (std::uint32_t i = 0; i < ends.size(); ++i) {
    senders.push_back(&add(a, pair_end(ends[i].first, i, true), ends[i].second, i == 0 ? &sender_cc : nullptr));
    receivers.push_back(&add(b, pair_end(ends[i].first, i, false), ends[i].second));
  }
  EXPECT_EQ(share.listeners(), 1u);  // only connection 0 receives with metaroce's controller
  EXPECT_EQ(a.receive_share(), nullptr);

  // 40 KiB on connection 0: 10 packets, each reported once; the ACKs carry
  // the whole capacity (the only sender) and the sender paces at it.
  std::vector<std::uint8_t> src(40960), dst(40960, 0);
  fill_pattern(3, src.data(), src.size());
  transport::SendRequest r;
  r.wr_id = 3;
  r.op = transport::SendOp::write;
  r.local_addr = src.data();
  r.length = src.size();
  r.lkey = a.memory().register_region(src.data(), src.size(), transport::access_local_write);
  r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
  r.rkey = b.memory().register_region(dst.data(), dst.size(),
                                      transport::access_local_write | transport::access_remote_write);
  ASSERT_EQ(senders[0]->post_send(r), transport::PostResult::ok);
  CountedSink sink_a(1u << 20);
  CountedSink sink_b(1u << 20);
  std::uint64_t now = 1'000;
  for (int turn = 0; turn < 200; ++turn) {
    now += 10'000;
    a.advance(now);
    a.transmit(now, sink_a);
    for (const auto& f : sink_a.take_frames()) b.receive(now, f);
    b.advance(now);
    b.transmit(now, sink_b);
    for (const auto& f : sink_b.take_frames()) a.receive(now, f);
    sink_a.next_turn();
    sink_b.next_turn();
  }
  EXPECT_EQ(first_mismatch(3, dst.data(), dst.size()), dst.size());
  EXPECT_EQ(receivers[0]->counters().data_packets_received, 10u);
  EXPECT_EQ(share.counters().arrivals, 10u);
  EXPECT_EQ(share.counters().hints, receivers[0]->counters().acks_sent);
  EXPECT_GT(share.counters().hints, 0u);
  EXPECT_EQ(share.counters().max_active_senders, 1u);
  ASSERT_NE(sender_cc, nullptr);
  EXPECT_EQ(sender_cc->pacing_rate_bps(now), 2'000'000'000u);

  // Taken off the host: connections made from now on are not attached.
  b.set_receive_share(nullptr);
  add(b, pair_end(base, 9, false), "metaroce");
  EXPECT_EQ(share.listeners(), 1u);
}

}  // namespace
}  // namespace metaroce::test
