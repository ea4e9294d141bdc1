// The connection manager of a node of several lcores (doc/ENGINE.md,
// "Nodes"). It runs on the node's management lcore, where QP 1's frames
// arrive, and draws each connection's QPN on a queue (qpn % lcores): a
// client's round-robin over the lcores, a server's on its client's queue.
// A connection it sets up is created by its owner, never by the management
// lcore for another: the owner's command ring carries the connection's
// config, and the owner's thread creates it on its own host (its timers,
// windows and pools), then calls on_created there, where the application
// starts using it.
//
//   management lcore                     owner lcore k
//   REQ in -> accept -> REP out    ---> post(k): add_connection, on_created
//   REP in -> established event    ---> post(k): add_connection, on_created
//
// A server's REP leaves before the owner has run the command: the owner
// runs its commands before every receive burst, so the client's first
// frames find the connection unless they come back within one turn of the
// owner (then they are dropped as for an unknown QPN and resent).
//
// Threading: everything here runs on the management lcore's thread except
// the factory and on_created, which run on the owner's. counters() is a
// racy snapshot from elsewhere.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cm/manager.hpp"
#include "engine/node.hpp"
#include "transport/connection.hpp"

namespace metaroce::stack {

struct NodeManagerCounters {
  // Connections set up here and created by another lcore's thread, through
  // its command ring.
  std::uint64_t connections_handed_to_owner = 0;
  // Connections the management lcore owns itself, created on it directly.
  std::uint64_t connections_created_by_manager = 0;
  // Owner's command ring full: a server refused the REQ (no_resources), a
  // client dropped the established connection (its event says failed), or
  // a close waited for room (it is posted again next turn).
  std::uint64_t handoffs_refused = 0;
  // Connections closed by DREQ/DREP (either role) and removed by their
  // owner's thread, through its command ring or, on the management lcore,
  // directly.
  std::uint64_t connections_removed_by_owner = 0;
};

class NodeManager {
 public:
  // On the owner's lcore: the connection's congestion control (nullptr:
  // none).
  using Factory = std::function<std::unique_ptr<transport::CongestionControl>(const transport::ConnectionConfig&)>;
  // On the owner's lcore, after the connection was created on `host` (or
  // failed: connection nullptr, error says why), READY to post on.
  using Created = std::function<void(std::uint16_t lcore, engine::EngineHost& host, transport::Connection* connection,
                                     const std::string& error)>;
  // On the owner's lcore, just before a closed connection is destroyed:
  // the application lets go of it.
  using Removed = std::function<void(std::uint16_t lcore, engine::EngineHost& host, transport::Connection& connection)>;

  // The node's management lcore's host takes QP 1's frames from now on;
  // config.queues becomes the node's lcores.
  NodeManager(engine::Node& node, cm::ManagerConfig config, Factory factory, Created on_created,
              Removed on_removed = nullptr);

  // Server: accept REQs `accept` accepts; each accepted connection is
  // created by its owner.
  void listen(cm::AcceptFn accept);
  // Client: an attempt on the next lcore in turn (0, 1, .., 0, ..); its
  // established connection is created by its owner. 0 and `error` as
  // cm::Manager::connect.
  std::uint64_t connect(const cm::ConnectRequest& request, std::string& error);
  // Client: closes connection `id` (connect()'s) with a DREQ carrying
  // `private_data`; at the disconnected event its owner removes it. The
  // owner should have stopped posting on it (its work in flight completes
  // as flushed). False as cm::Manager::disconnect.
  bool disconnect(std::uint64_t id, std::vector<std::uint8_t> private_data, std::string& error);
  // The local QPN of client connection `id` once established (0 before).
  [[nodiscard]] std::uint32_t qpn_of(std::uint64_t id) const;

  // Management lcore, each turn (besides Node::poll): what the manager has
  // to send goes out of the management host; events to events(). Returns
  // frames sent.
  std::size_t turn();
  [[nodiscard]] std::vector<cm::Event>& events() noexcept { return events_; }

  [[nodiscard]] cm::Manager& manager() noexcept { return manager_; }
  [[nodiscard]] NodeManagerCounters counters() const noexcept;
  // The lcore that owns (or will own) the connection with this QPN.
  [[nodiscard]] std::uint16_t owner_of(std::uint32_t qpn) const noexcept { return node_.owner_of(qpn); }

 private:
  // False when the owner's ring is full.
  bool hand_to_owner(const transport::ConnectionConfig& config);
  bool remove_on_owner(std::uint32_t qpn);

  engine::Node& node_;
  cm::Manager manager_;
  Factory factory_;
  Created on_created_;
  Removed on_removed_;
  std::uint16_t next_queue_ = 0;
  std::map<std::uint64_t, std::uint32_t> client_qpns_;  // connect() id -> local QPN, once established
  // Removals the owner's full ring refused: QPN, and whether the server's
  // manager forgets it once queued.
  std::vector<std::pair<std::uint32_t, bool>> removals_waiting_;
  std::vector<std::vector<std::uint8_t>> frames_;
  std::vector<cm::Event> events_;
  std::atomic<std::uint64_t> handed_{0}, created_here_{0}, refused_{0}, removed_{0};
};

}  // namespace metaroce::stack
