#include "stack/node_manager.hpp"

#include <fmt/format.h>

namespace metaroce::stack {

namespace {
cm::ManagerConfig with_queues(cm::ManagerConfig config, std::uint16_t lcores) {
  config.queues = lcores;
  return config;
}
}  // namespace

NodeManager::NodeManager(engine::Node& node, cm::ManagerConfig config, Factory factory, Created on_created,
                         Removed on_removed)
    : node_(node),
      manager_(with_queues(std::move(config), node.lcores())),
      factory_(std::move(factory)),
      on_created_(std::move(on_created)),
      on_removed_(std::move(on_removed)) {
  node_.host(node_.config().management_lcore)
      .set_management_handler([this](std::uint64_t now, const wire::ParsedFrame& frame) { manager_.on_frame(now, frame); });
}

NodeManagerCounters NodeManager::counters() const noexcept {
  return {handed_.load(std::memory_order_relaxed), created_here_.load(std::memory_order_relaxed),
          refused_.load(std::memory_order_relaxed), removed_.load(std::memory_order_relaxed)};
}

bool NodeManager::remove_on_owner(std::uint32_t qpn) {
  const std::uint16_t owner = node_.owner_of(qpn);
  auto remove = [this, qpn, owner](engine::EngineHost& host) {
    transport::Connection* c = host.connection(qpn);
    if (c == nullptr) return;
    if (on_removed_) on_removed_(owner, host, *c);
    if (host.remove_connection(qpn)) removed_.fetch_add(1, std::memory_order_relaxed);
  };
  if (owner == node_.config().management_lcore) {
    remove(node_.host(owner));
    return true;
  }
  if (node_.post(owner, std::move(remove))) return true;
  refused_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

bool NodeManager::disconnect(std::uint64_t id, std::vector<std::uint8_t> private_data, std::string& error) {
  return manager_.disconnect(node_.host(node_.config().management_lcore).now_ns(), id, std::move(private_data), error);
}

std::uint32_t NodeManager::qpn_of(std::uint64_t id) const {
  const auto at = client_qpns_.find(id);
  return at == client_qpns_.end() ? 0 : at->second;
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
  // Removals a full ring refused last turn, in their order.
  std::vector<std::pair<std::uint32_t, bool>> waiting;
  waiting.swap(removals_waiting_);
  for (const auto& [qpn, server] : waiting) {
    if (!remove_on_owner(qpn)) {
      removals_waiting_.emplace_back(qpn, server);
    } else if (server) {
      manager_.forget(qpn);
    }
  }
  const std::size_t first = events_.size();
  manager_.take_events(events_);
  for (std::size_t i = first; i < events_.size(); ++i) {
    cm::Event& ev = events_[i];
    if (ev.kind == cm::EventKind::disconnected || ev.kind == cm::EventKind::superseded) {
      // Server: the id is the local QPN, forgotten once its removal is
      // queued (the owner runs it before any later creation with that QPN,
      // which the same owner would get). Client: the QPN it was given.
      const bool server = client_qpns_.find(ev.id) == client_qpns_.end();
      const std::uint32_t qpn = server ? static_cast<std::uint32_t>(ev.id) : client_qpns_[ev.id];
      if (!server) client_qpns_.erase(ev.id);
      if (!remove_on_owner(qpn)) {
        removals_waiting_.emplace_back(qpn, server);
      } else if (server) {
        manager_.forget(qpn);
      }
      continue;
    }
    if (ev.kind != cm::EventKind::established) continue;
    client_qpns_[ev.id] = ev.config.local_qpn;
    if (hand_to_owner(ev.config)) continue;
    ev.kind = cm::EventKind::failed;
    ev.error = fmt::format("lcore {}'s command ring is full: the connection (QP {:#x}) was not created; raise the "
                           "node's command_ring_size",
                           node_.owner_of(ev.config.local_qpn), ev.config.local_qpn);
  }
  return frames_.size();
}

}  // namespace metaroce::stack
