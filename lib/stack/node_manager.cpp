#include "stack/node_manager.hpp"

#include <fmt/format.h>

namespace metaroce::stack {

namespace {
cm::ManagerConfig with_queues(cm::ManagerConfig config, std::uint16_t lcores) {
  config.queues = lcores;
  return config;
}
}  // namespace

NodeManager::NodeManager(engine::Node& node, cm::ManagerConfig config, Factory factory, Created on_created)
    : node_(node),
      manager_(with_queues(std::move(config), node.lcores())),
      factory_(std::move(factory)),
      on_created_(std::move(on_created)) {
  node_.host(node_.config().management_lcore)
      .set_management_handler([this](std::uint64_t now, const wire::ParsedFrame& frame) { manager_.on_frame(now, frame); });
}

NodeManagerCounters NodeManager::counters() const noexcept {
  return {handed_.load(std::memory_order_relaxed), created_here_.load(std::memory_order_relaxed),
          refused_.load(std::memory_order_relaxed)};
}

bool NodeManager::hand_to_owner(const transport::ConnectionConfig& config) {
  const std::uint16_t owner = node_.owner_of(config.local_qpn);
  auto create = [this, config, owner](engine::EngineHost& host) {
    std::string error;
    transport::Connection* c = host.add_connection(config, factory_ ? factory_(config) : nullptr, error);
    if (c != nullptr) c->connect();  // the handshake is done: READY
    if (on_created_) on_created_(owner, host, c, error);
  };
  if (owner == node_.config().management_lcore) {
    create(node_.host(owner));
    created_here_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (!node_.post(owner, std::move(create))) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  handed_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void NodeManager::listen(cm::AcceptFn accept) {
  manager_.listen([this, accept = std::move(accept)](const transport::ConnectionConfig& config,
                                                     const cm::Message& request, std::vector<std::uint8_t>& reply) {
    const cm::RejectReason verdict = accept ? accept(config, request, reply) : cm::RejectReason::none;
    if (verdict != cm::RejectReason::none) return verdict;
    return hand_to_owner(config) ? cm::RejectReason::none : cm::RejectReason::no_resources;
  });
}

std::uint64_t NodeManager::connect(const cm::ConnectRequest& request, std::string& error) {
  cm::ConnectRequest r = request;
  r.queue = next_queue_;
  const std::uint64_t id = manager_.connect(node_.host(node_.config().management_lcore).now_ns(), r, error);
  if (id != 0) next_queue_ = static_cast<std::uint16_t>((next_queue_ + 1) % node_.lcores());
  return id;
}

std::size_t NodeManager::turn() {
  engine::EngineHost& host = node_.host(node_.config().management_lcore);
  frames_.clear();
  manager_.poll(host.now_ns(), frames_);
  for (const auto& f : frames_) host.send_frame(f);
  const std::size_t first = events_.size();
  manager_.take_events(events_);
  for (std::size_t i = first; i < events_.size(); ++i) {
    cm::Event& ev = events_[i];
    if (ev.kind != cm::EventKind::established) continue;
    if (hand_to_owner(ev.config)) continue;
    ev.kind = cm::EventKind::failed;
    ev.error = fmt::format("lcore {}'s command ring is full: the connection (QP {:#x}) was not created; raise the "
                           "node's command_ring_size",
                           node_.owner_of(ev.config.local_qpn), ev.config.local_qpn);
  }
  return frames_.size();
}

}  // namespace metaroce::stack
