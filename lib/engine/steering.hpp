// How a port's frames reach the lcore that owns their connection, by PMD
// (doc/ENGINE.md, "Steering by destination QPN"), and the flow rule a NIC
// takes for it.
//
// A connection with QPN q belongs to queue q % queues (steering_queue).
// With a power-of-two number of queues that is the QPN's low bits, which
// are the last byte of the BTH's destination QP: bytes 5..7 of the BTH, the
// first bytes of the UDP payload (port 4791). DPDK 22.11 has no BTH flow
// item, so the rule matches a RAW item at UDP payload offset 7 under a mask
// of queues - 1. Never RSS on the UDP source port: each metaroce path is a
// source port, so RSS would split one connection over lcores.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/preset.hpp"

struct rte_flow;

namespace metaroce::engine {

enum class SteeringMethod : std::uint8_t {
  tx_queue,       // the sender's tx queue is the receiver's rx queue (net_ring)
  // Nothing steers by QPN: a frame lands on whatever queue the PMD picks
  // (one for pcap and tap, the kernel's fanout for af_packet), and the lcore
  // that takes it passes it to its owner (Node, rx_handed_off).
  software_handoff,
  bth_flow_rule,  // one rte_flow rule per queue on the BTH destination QP (a NIC)
};

[[nodiscard]] const char* to_string(SteeringMethod m) noexcept;

// What each preset's PMD takes.
[[nodiscard]] SteeringMethod steering_method(Driver driver) noexcept;

// Byte of the UDP payload (the BTH) holding the destination QP's low byte.
inline constexpr std::uint8_t bth_dest_qp_low_byte = 7;
inline constexpr std::uint16_t rocev2_udp_port = 4791;
// Queues a RAW rule on one byte can tell apart.
inline constexpr std::uint16_t max_rule_queues = 256;

// Bytes 5..7 of the UDP payload (the BTH) are the destination QP.
inline constexpr std::uint8_t bth_dest_qp_first_byte = 5;

// The match of one rule: UDP destination port 4791, then, relative to the
// UDP payload at `offset`, `length` bytes with (byte & mask) == value; the
// action sends the frame to rx queue `queue`. Of two rules that match, the
// one of lower `priority` wins (rte_flow's order).
struct BthQueueRule {
  bool ipv6 = false;
  std::uint16_t udp_dst = rocev2_udp_port;
  std::uint8_t offset = bth_dest_qp_low_byte;
  std::uint8_t length = 1;  // 1: the QPN's low byte; 3: the whole QPN
  std::array<std::uint8_t, 3> value{};
  std::array<std::uint8_t, 3> mask{};
  std::uint16_t queue = 0;
  std::uint32_t priority = 1;
  // True when the rule matches the frame for `qpn`.
  [[nodiscard]] bool matches(std::uint32_t qpn) const noexcept {
    const std::array<std::uint8_t, 3> qp = {static_cast<std::uint8_t>(qpn >> 16), static_cast<std::uint8_t>(qpn >> 8),
                                            static_cast<std::uint8_t>(qpn)};
    for (std::uint8_t i = 0; i < length; ++i)
      if ((qp[offset - bth_dest_qp_first_byte + i] & mask[i]) != value[i]) return false;
    return true;
  }
};

// The rule for queue `queue` of `queues` (a power of two, 1..256; its QPNs'
// low byte under queues - 1, priority 1); false with a one-line error
// otherwise.
bool build_bth_queue_rule(std::uint16_t queue, std::uint16_t queues, bool ipv6, BthQueueRule& out,
                          std::string& error);
// The rule that sends QP 1's frames (the connection manager's) to `queue`,
// whatever the queue rules say: all three QPN bytes, priority 0.
[[nodiscard]] BthQueueRule management_rule(std::uint16_t queue, bool ipv6) noexcept;

// The same rule as a dpdk-testpmd command for port `port`, for an operator
// to try on a NIC: `flow create PORT ingress pattern eth / ipv4 / udp dst
// is 4791 / raw relative is 1 offset is 7 pattern_hex spec VV pattern_hex
// mask MM / end actions queue index Q / end`.
[[nodiscard]] std::string testpmd_command(std::uint16_t port, const BthQueueRule& rule);

// Installs QP 1's rule (to queue 0) and the rule of every queue of port
// `port_id` (a started port of `queues` queues; IPv4 or IPv6 frames): each
// validated first (rte_flow_validate), then created. True with the rules in `out`; false
// with the PMD's reason in `error` and nothing left installed (a PMD
// without a flow engine, or one that does not take a RAW item).
bool install_bth_queue_rules(std::uint16_t port_id, std::uint16_t queues, bool ipv6, std::vector<rte_flow*>& out,
                             std::string& error);
// Destroys rules install_bth_queue_rules made, and empties `rules`.
void remove_flow_rules(std::uint16_t port_id, std::vector<rte_flow*>& rules) noexcept;

}  // namespace metaroce::engine
