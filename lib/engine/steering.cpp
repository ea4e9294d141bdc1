#include "engine/steering.hpp"

#include <fmt/format.h>

#include "wire/byte_order.hpp"
#include "wire/headers.hpp"

namespace metaroce::engine {

const char* to_string(SteeringMethod m) noexcept {
  switch (m) {
    case SteeringMethod::tx_queue: return "tx_queue";
    case SteeringMethod::software_handoff: return "software_handoff";
    case SteeringMethod::bth_flow_rule: return "bth_flow_rule";
  }
  return "?";
}

SteeringMethod steering_method(Driver driver) noexcept {
  switch (driver) {
    case Driver::net_ring: return SteeringMethod::tx_queue;
    // A capture file, a kernel socket or a tap device has no flow engine.
    case Driver::net_pcap:
    case Driver::net_af_packet:
    case Driver::net_af_xdp:
    case Driver::net_tap: return SteeringMethod::software_handoff;
    case Driver::mlx5:
    case Driver::ice:
    case Driver::i40e: return SteeringMethod::bth_flow_rule;
  }
  return SteeringMethod::software_handoff;
}

bool build_bth_queue_rule(std::uint16_t queue, std::uint16_t queues, bool ipv6, BthQueueRule& out,
                          std::string& error) {
  if (queues < 1 || queues > max_rule_queues || (queues & (queues - 1)) != 0) {
    error = fmt::format("{} queues: a rule on the QPN's low byte needs a power of two of queues, 1..{}; set queues= "
                        "in the preset to one",
                        queues, max_rule_queues);
    return false;
  }
  if (queue >= queues) {
    error = fmt::format("queue {} is not one of the port's {} queues", queue, queues);
    return false;
  }
  out = BthQueueRule{};
  out.ipv6 = ipv6;
  out.mask = static_cast<std::uint8_t>(queues - 1);
  out.value = static_cast<std::uint8_t>(queue);
  out.queue = queue;
  return true;
}

std::string testpmd_command(std::uint16_t port, const BthQueueRule& rule) {
  return fmt::format(
      "flow create {} ingress pattern eth / {} / udp dst is {} / raw relative is 1 offset is {} pattern_hex spec "
      "{:02x} pattern_hex mask {:02x} / end actions queue index {} / end",
      port, rule.ipv6 ? "ipv6" : "ipv4", rule.udp_dst, rule.offset, rule.value, rule.mask, rule.queue);
}

}  // namespace metaroce::engine
