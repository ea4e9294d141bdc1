#include "engine/node.hpp"

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <fmt/format.h>

namespace metaroce::engine {

std::unique_ptr<Node> Node::create(const NodeConfig& config, std::string& error) {
  if (config.lcores < 1 || config.lcores > max_node_lcores) {
    error = fmt::format("node '{}': {} lcores is outside 1..{}", config.name, config.lcores, max_node_lcores);
    return nullptr;
  }
  if (config.management_lcore >= config.lcores) {
    error = fmt::format("node '{}': management lcore {} is not one of its {} lcores", config.name,
                        config.management_lcore, config.lcores);
    return nullptr;
  }
  if (config.lcores > 1 && !config.hosts.more_ports.empty()) {
    error = fmt::format("node '{}': several lcores drive one port each; a port per plane (hosts.more_ports) "
                        "needs one lcore",
                        config.name);
    return nullptr;
  }
  std::unique_ptr<Node> node(new Node(config));
  node->slots_ = std::vector<LcoreSlot>(config.lcores);
  const int socket = rte_eth_dev_socket_id(config.port_id);
  // One consumer (lcore i), any producer. DPDK names are process-wide and
  // 31 bytes at most: the node's address is unique while it lives.
  const auto make_ring = [&](const char* prefix, const char* what, std::uint32_t size, std::uint16_t i) {
    const std::string name =
        fmt::format("{}{:x}.{}", prefix, reinterpret_cast<std::uintptr_t>(node.get()) & 0xffffffffff, i);
    rte_ring* ring = rte_ring_create(name.c_str(), size, socket < 0 ? SOCKET_ID_ANY : socket, RING_F_SC_DEQ);
    if (ring == nullptr)
      error = fmt::format("node '{}': cannot create {} ring '{}' of {}: {} (a power of two, and EAL memory left?)",
                          config.name, what, name, size, rte_strerror(rte_errno));
    return ring;
  };
  for (std::uint16_t i = 0; i < config.lcores; ++i) {
    LcoreSlot& slot = node->slots_[i];
    EngineHostConfig hc = config.hosts;
    hc.name = config.lcores == 1 ? config.name : fmt::format("{}.{}", config.name, i);
    hc.port_id = config.port_id;
    hc.queue = i;
    hc.queues = config.lcores;
    slot.host = EngineHost::create(hc, error);
    if (!slot.host) return nullptr;
    slot.commands = make_ring("cmd", "command", config.command_ring_size, i);
    if (slot.commands == nullptr) return nullptr;
    if (!config.software_handoff) continue;
    slot.handoff = make_ring("hof", "hand-off", config.handoff_ring_size, i);
    if (slot.handoff == nullptr) return nullptr;
  }
  if (config.software_handoff) {
    RxHandoff handoff;
    for (const LcoreSlot& slot : node->slots_) handoff.rings.push_back(slot.handoff);
    handoff.management_lcore = config.management_lcore;
    for (std::uint16_t i = 0; i < config.lcores; ++i) {
      handoff.self = i;
      node->slots_[i].host->set_rx_handoff(handoff);
    }
  }
  return node;
}

Node::~Node() {
  // Frames handed off and not yet received go back to their port's pools.
  for (LcoreSlot& slot : slots_) {
    if (slot.handoff == nullptr) continue;
    void* m = nullptr;
    while (rte_ring_sc_dequeue(slot.handoff, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(slot.handoff);
  }
  for (LcoreSlot& slot : slots_) {
    if (slot.commands == nullptr) continue;
    void* item = nullptr;
    while (rte_ring_sc_dequeue(slot.commands, &item) == 0) delete static_cast<Command*>(item);
    rte_ring_free(slot.commands);
  }
}

bool Node::post(std::uint16_t lcore, Command work) {
  LcoreSlot& slot = slots_[lcore];
  auto* item = new Command(std::move(work));
  if (rte_ring_mp_enqueue(slot.commands, item) != 0) {
    delete item;
    slot.commands_refused.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

std::size_t Node::run_commands(std::uint16_t lcore) {
  LcoreSlot& slot = slots_[lcore];
  constexpr unsigned batch = 16;
  void* items[batch];
  const unsigned n = rte_ring_sc_dequeue_burst(slot.commands, items, batch, nullptr);
  for (unsigned i = 0; i < n; ++i) {
    std::unique_ptr<Command> command(static_cast<Command*>(items[i]));
    (*command)(*slot.host);
  }
  slot.commands_run += n;
  return n;
}

NodeLcoreCounters Node::counters(std::uint16_t lcore) const noexcept {
  const LcoreSlot& slot = slots_[lcore];
  return {slot.commands_run, slot.commands_refused.load(std::memory_order_relaxed)};
}

}  // namespace metaroce::engine
