#include "engine/steering.hpp"

#include <rte_byteorder.h>
#include <rte_errno.h>
#include <rte_flow.h>

#include <array>

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
  out.mask[0] = static_cast<std::uint8_t>(queues - 1);
  out.value[0] = static_cast<std::uint8_t>(queue);
  out.queue = queue;
  return true;
}

BthQueueRule management_rule(std::uint16_t queue, bool ipv6) noexcept {
  BthQueueRule r;
  r.ipv6 = ipv6;
  r.offset = bth_dest_qp_first_byte;
  r.length = 3;
  r.value = {0, 0, 1};
  r.mask = {0xff, 0xff, 0xff};
  r.queue = queue;
  r.priority = 0;
  return r;
}

std::string testpmd_command(std::uint16_t port, const BthQueueRule& rule) {
  std::string value, mask;
  for (std::uint8_t i = 0; i < rule.length; ++i) {
    value += fmt::format("{:02x}", rule.value[i]);
    mask += fmt::format("{:02x}", rule.mask[i]);
  }
  return fmt::format(
      "flow create {} priority {} ingress pattern eth / {} / udp dst is {} / raw relative is 1 offset is {} "
      "pattern_hex spec {} pattern_hex mask {} / end actions queue index {} / end",
      port, rule.priority, rule.ipv6 ? "ipv6" : "ipv4", rule.udp_dst, rule.offset, value, mask, rule.queue);
}

namespace {

// One queue's rule as rte_flow items: eth / ipv4|ipv6 / udp dst 4791 / raw
// at the UDP payload's byte `offset`, under the rule's mask.
struct FlowRule {
  rte_flow_attr attr{};
  rte_flow_item_udp udp_spec{}, udp_mask{};
  std::array<std::uint8_t, 3> value{}, mask{};
  rte_flow_item_raw raw_spec{}, raw_mask{};
  std::array<rte_flow_item, 5> pattern{};
  rte_flow_action_queue queue{};
  std::array<rte_flow_action, 2> actions{};

  // Not copyable: the items point into the object.
  explicit FlowRule(const BthQueueRule& r) {
    attr.ingress = 1;
    attr.priority = r.priority;
    udp_spec.hdr.dst_port = rte_cpu_to_be_16(r.udp_dst);
    udp_mask.hdr.dst_port = 0xffff;
    value = r.value;
    mask = r.mask;
    raw_spec.relative = 1;
    raw_spec.offset = r.offset;
    raw_spec.length = r.length;
    raw_spec.pattern = value.data();
    raw_mask.relative = 1;
    raw_mask.offset = -1;  // every bit of the offset and length matter
    raw_mask.length = 0xffff;
    raw_mask.pattern = mask.data();
    pattern[0].type = RTE_FLOW_ITEM_TYPE_ETH;
    pattern[1].type = r.ipv6 ? RTE_FLOW_ITEM_TYPE_IPV6 : RTE_FLOW_ITEM_TYPE_IPV4;
    pattern[2].type = RTE_FLOW_ITEM_TYPE_UDP;
    pattern[2].spec = &udp_spec;
    pattern[2].mask = &udp_mask;
    pattern[3].type = RTE_FLOW_ITEM_TYPE_RAW;
    pattern[3].spec = &raw_spec;
    pattern[3].mask = &raw_mask;
    pattern[4].type = RTE_FLOW_ITEM_TYPE_END;
    queue.index = r.queue;
    actions[0].type = RTE_FLOW_ACTION_TYPE_QUEUE;
    actions[0].conf = &queue;
    actions[1].type = RTE_FLOW_ACTION_TYPE_END;
  }
  FlowRule(const FlowRule&) = delete;
  FlowRule& operator=(const FlowRule&) = delete;
};

std::string flow_error_text(const rte_flow_error& e, int status) {
  return e.message != nullptr ? std::string(e.message) : fmt::format("error {}", status);
}

}  // namespace

bool install_bth_queue_rules(std::uint16_t port_id, std::uint16_t queues, bool ipv6, std::vector<rte_flow*>& out,
                             std::string& error) {
  std::vector<BthQueueRule> rules = {management_rule(0, ipv6)};
  for (std::uint16_t q = 0; q < queues; ++q) {
    BthQueueRule rule;
    if (!build_bth_queue_rule(q, queues, ipv6, rule, error)) return false;
    rules.push_back(rule);
  }
  std::vector<rte_flow*> made;
  for (const BthQueueRule& rule : rules) {
    const FlowRule f(rule);
    rte_flow_error e{};
    int status = rte_flow_validate(port_id, &f.attr, f.pattern.data(), f.actions.data(), &e);
    rte_flow* flow = status == 0 ? rte_flow_create(port_id, &f.attr, f.pattern.data(), f.actions.data(), &e) : nullptr;
    if (flow == nullptr) {
      error = fmt::format("the rule for {} was refused: {}",
                          rule.priority == 0 ? std::string("QP 1") : fmt::format("queue {}", rule.queue),
                          flow_error_text(e, status != 0 ? status : -rte_errno));
      remove_flow_rules(port_id, made);
      return false;
    }
    made.push_back(flow);
  }
  out.insert(out.end(), made.begin(), made.end());
  return true;
}

void remove_flow_rules(std::uint16_t port_id, std::vector<rte_flow*>& rules) noexcept {
  for (rte_flow* f : rules) {
    rte_flow_error e{};
    rte_flow_destroy(port_id, f, &e);
  }
  rules.clear();
}

}  // namespace metaroce::engine
