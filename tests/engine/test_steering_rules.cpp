// Steering per preset: every drivers-config preset's PMD has a steering
// method, and the NIC presets' flow rules (one per queue, a RAW match on
// the BTH destination QP's low byte) send each QPN to exactly the queue
// steering_queue picks, at the byte where the wire format puts it. The
// rules are not run here (no NIC): this checks the rule each one builds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/preset.hpp"
#include "engine/steering.hpp"
#include "host/host.hpp"
#include "wire/frame.hpp"

namespace metaroce::engine {
namespace {

TEST(SteeringRules, EveryPresetHasItsMethodAndTheNicRulesCoverEveryQpnOnce) {
  const std::vector<std::pair<std::string, SteeringMethod>> presets = {
      {"net_ring", SteeringMethod::tx_queue},        {"net_pcap", SteeringMethod::software_handoff},
      {"net_af_packet", SteeringMethod::software_handoff}, {"net_af_xdp", SteeringMethod::software_handoff},
      {"net_tap", SteeringMethod::software_handoff},
      {"mlx5", SteeringMethod::bth_flow_rule},       {"ice", SteeringMethod::bth_flow_rule},
      {"i40e", SteeringMethod::bth_flow_rule}};
  for (const auto& [name, method] : presets) {
    DriverPreset p;
    std::string error;
    ASSERT_TRUE(load_preset(std::string(DRIVERS_CONFIG_DIR) + "/" + name + ".ini", p, error)) << error;
    EXPECT_EQ(steering_method(p.port.driver), method) << name;
    if (method == SteeringMethod::software_handoff) {
      EXPECT_EQ(p.port.queues, 1) << name << ": nothing steers its queues (a node hands frames off in software)";
    }
    if (method != SteeringMethod::bth_flow_rule) continue;
    const std::uint16_t queues = p.port.queues;
    std::vector<BthQueueRule> rules(queues);
    for (std::uint16_t q = 0; q < queues; ++q) ASSERT_TRUE(build_bth_queue_rule(q, queues, false, rules[q], error)) << error;
    const BthQueueRule qp1 = management_rule(0, false);
    for (std::uint32_t qpn : {0u, 1u, 2u, 3u, 255u, 256u, 257u, 4095u, 0x10001u, 0xffffffu}) EXPECT_EQ(qp1.matches(qpn), qpn == 1) << qpn;
    for (std::uint32_t qpn = 0; qpn < 4096; ++qpn) {
      int matched = 0;
      for (const BthQueueRule& r : rules)
        if (r.matches(qpn)) {
          ++matched;
          EXPECT_EQ(r.queue, host::steering_queue(qpn, queues)) << name << " qpn " << qpn;
          EXPECT_GT(r.priority, qp1.priority);  // QP 1's rule wins where both match
        }
      EXPECT_EQ(matched, 1) << name << " qpn " << qpn;
    }
  }
}

TEST(SteeringRules, TheRuleLooksAtTheByteWhereTheWireFormatPutsTheQpn) {
  wire::FrameSpec s;
  s.bth.opcode = 0xc5;
  s.bth.dest_qp = 0xabcd13;
  std::vector<std::uint8_t> frame(256);
  frame.resize(wire::build_frame(s, {}, frame));
  ASSERT_EQ(frame[12], 0x08);  // IPv4
  ASSERT_EQ(frame[13], 0x00);
  const std::size_t udp = 14 + std::size_t(frame[14] & 0x0f) * 4;
  ASSERT_EQ((frame[udp + 2] << 8) | frame[udp + 3], rocev2_udp_port);
  BthQueueRule r;
  std::string error;
  ASSERT_TRUE(build_bth_queue_rule(3, 4, false, r, error)) << error;
  EXPECT_EQ(frame[udp + 8 + r.offset], 0x13);
  EXPECT_EQ(frame[udp + 8 + r.offset] & r.mask[0], r.value[0]);  // 0x13 % 4 == 3
  EXPECT_TRUE(r.matches(s.bth.dest_qp));
  // QP 1's rule reads the three QPN bytes there.
  const BthQueueRule m = management_rule(0, false);
  EXPECT_EQ(m.offset + 2, r.offset);
  EXPECT_FALSE(m.matches(s.bth.dest_qp));
  s.bth.dest_qp = 1;
  frame.assign(256, 0);
  frame.resize(wire::build_frame(s, {}, frame));
  for (std::uint8_t i = 0; i < m.length; ++i) EXPECT_EQ(frame[udp + 8 + m.offset + i] & m.mask[i], m.value[i]);
}

TEST(SteeringRules, TestpmdCommandAndRefusedQueueCounts) {
  BthQueueRule r;
  std::string error;
  ASSERT_TRUE(build_bth_queue_rule(1, 2, true, r, error)) << error;
  EXPECT_EQ(testpmd_command(0, r),
            "flow create 0 priority 1 ingress pattern eth / ipv6 / udp dst is 4791 / raw relative is 1 offset is 7 "
            "pattern_hex spec 01 pattern_hex mask 01 / end actions queue index 1 / end");
  EXPECT_EQ(testpmd_command(0, management_rule(0, false)),
            "flow create 0 priority 0 ingress pattern eth / ipv4 / udp dst is 4791 / raw relative is 1 offset is 5 "
            "pattern_hex spec 000001 pattern_hex mask ffffff / end actions queue index 0 / end");
  EXPECT_FALSE(build_bth_queue_rule(0, 3, false, r, error));
  EXPECT_NE(error.find("power of two"), std::string::npos) << error;
  EXPECT_FALSE(build_bth_queue_rule(2, 2, false, r, error));
  EXPECT_FALSE(build_bth_queue_rule(0, 512, false, r, error));
}

}  // namespace
}  // namespace metaroce::engine
