// The connection manager of a node of several lcores: a connection set up
// on the management lcore lands on its owner (created by the owner's
// thread, on the owner's host), proven by exact counts at both ends, and
// carries a SEND there. Two nodes of 2 lcores over a net_ring pair of 2
// queues (tx queue i feeds the peer's rx queue i), a thread per lcore.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/node.hpp"
#include "engine/port.hpp"
#include "stack/node_manager.hpp"

namespace metaroce::stack {
namespace {

constexpr std::uint32_t client_ip = 0x0a000001;
constexpr std::uint32_t server_ip = 0x0a000002;
constexpr std::uint64_t message_bytes = 64;

// One side: its node, its manager and what each lcore saw.
struct Side {
  std::unique_ptr<engine::Node> node;
  std::unique_ptr<NodeManager> manager;
  bool server = false;
  struct alignas(64) PerLcore {
    std::vector<transport::Connection*> created;  // by this lcore's thread only
    std::thread::id creator{};
    std::uint64_t completed = 0;  // successful SENDs (client) or receives of message_bytes (server)
    std::uint64_t failed = 0;
    std::vector<std::uint8_t> buffer = std::vector<std::uint8_t>(message_bytes * 64);
    std::uint32_t key = 0;
  };
  std::array<PerLcore, 2> lcore{};
  std::array<std::atomic<std::thread::id>, 2> thread_of{};

  void on_created(std::uint16_t k, engine::EngineHost& host, transport::Connection* c, const std::string& error) {
    PerLcore& l = lcore[k];
    l.creator = std::this_thread::get_id();
    ASSERT_NE(c, nullptr) << error;
    ASSERT_EQ(&host, &node->host(k));
    const std::uint64_t slot = l.created.size();
    l.created.push_back(c);
    if (l.key == 0)
      l.key = host.memory().register_region(l.buffer.data(), l.buffer.size(), transport::access_local_write);
    if (server) {
      transport::ReceiveRequest r;
      r.wr_id = slot;
      r.addr = l.buffer.data() + slot * message_bytes;
      r.length = message_bytes;
      r.lkey = l.key;
      ASSERT_EQ(c->post_receive(r), transport::PostResult::ok);
    } else {
      std::memset(l.buffer.data() + slot * message_bytes, int(c->config().local_qpn & 0xff), message_bytes);
      transport::SendRequest s;
      s.wr_id = slot;
      s.op = transport::SendOp::send;
      s.local_addr = l.buffer.data() + slot * message_bytes;
      s.length = message_bytes;
      s.lkey = l.key;
      ASSERT_EQ(c->post_send(s), transport::PostResult::ok);
    }
  }
};

struct Pair {
  std::unique_ptr<engine::Port> a, b;
  Side client, server;
  std::atomic<bool> stop{false};

  bool create(std::string& error) {
    engine::PortSetup s;
    s.queues = 2;
    if (!engine::Port::create_ring_pair("nm_a", "nm_b", s, a, b, error) || !a->start(error) || !b->start(error))
      return false;
    return make(client, *a, client_ip, "nm_client", 11, error) && make(server, *b, server_ip, "nm_server", 22, error);
  }
  bool make(Side& side, engine::Port& port, std::uint32_t ip, const char* name, std::uint64_t seed,
            std::string& error) {
    engine::NodeConfig c;
    c.name = name;
    c.port_id = port.id();
    c.lcores = 2;
    c.hosts.tx_mbufs = 1024;
    side.node = engine::Node::create(c, error);
    if (!side.node) return false;
    cm::ManagerConfig m;
    m.local.local_mac = port.mac();
    m.local.local_ipv4 = ip;
    m.seed = seed;
    m.retry_interval = 20'000'000;
    m.retries = 100;
    side.server = &side == &server;
    side.manager = std::make_unique<NodeManager>(
        *side.node, m, nullptr,
        [&side](std::uint16_t k, engine::EngineHost& h, transport::Connection* conn, const std::string& e) {
          side.on_created(k, h, conn, e);
        });
    return true;
  }
  // Lcore k of a side: its commands and host; the management lcore's
  // manager too; completions of its own connections.
  void run(Side& side, std::uint16_t k) {
    side.thread_of[k] = std::this_thread::get_id();
    std::vector<transport::Completion> scratch;
    while (!stop.load()) {
      std::size_t work = side.node->poll(k);
      if (k == side.node->config().management_lcore) work += side.manager->turn();
      work += side.node->host(k).host().poll_completions(scratch, [&](transport::Connection&, const auto& got) {
        for (const auto& x : got) {
          const bool ok = x.status == transport::CompletionStatus::success &&
                          (!side.server || x.byte_len == message_bytes);
          ++(ok ? side.lcore[k].completed : side.lcore[k].failed);
        }
      });
      if (work == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  ~Pair() {
    for (engine::Port* p : {a.get(), b.get()})
      if (p) p->drain_rx();
    client.manager.reset();
    server.manager.reset();
    client.node.reset();
    server.node.reset();
    a.reset();
    b.reset();
  }
};

TEST(NodeManager, ConnectionsSetUpOnTheManagementLcoreLandOnTheirOwners) {
  Pair p;
  std::string error;
  ASSERT_TRUE(p.create(error)) << error;
  p.server.manager->listen(nullptr);
  constexpr int connections = 6;
  // Before the threads start: the manager is the management lcore's.
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < connections; ++i) {
    cm::ConnectRequest r;
    r.connection.mode = transport::Mode::metaroce;
    r.connection.mtu = 1024;
    r.connection.paths = 4;
    r.connection.streams = 1;
    r.connection.endpoints.peer_ipv4 = server_ip;
    r.connection.endpoints.peer_mac = p.b->mac();
    r.cc = "none";
    ids.push_back(p.client.manager->connect(r, error));
    ASSERT_NE(ids.back(), 0u) << error;
  }
  std::vector<std::thread> threads;
  for (Side* side : {&p.client, &p.server})
    for (std::uint16_t k = 0; k < 2; ++k) threads.emplace_back([&p, side, k] { p.run(*side, k); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  const auto done = [&] {
    std::uint64_t n = 0;
    for (const auto& l : p.server.lcore) n += l.completed;
    for (const auto& l : p.client.lcore) n += l.completed;
    return n;
  };
  // Racy reads of plain counters while the threads run are only a
  // progress check; the assertions below come after join.
  while (done() < 2 * connections && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  p.stop = true;
  for (auto& t : threads) t.join();

  for (Side* side : {&p.client, &p.server}) {
    const NodeManagerCounters c = side->manager->counters();
    // Round-robin over 2 lcores: half on lcore 1 (handed over), half on
    // the management lcore 0 (created there).
    EXPECT_EQ(c.connections_handed_to_owner, std::uint64_t{connections / 2});
    EXPECT_EQ(c.connections_created_by_manager, std::uint64_t{connections / 2});
    EXPECT_EQ(c.handoffs_refused, 0u);
    EXPECT_EQ(side->node->counters(1).commands_run, std::uint64_t{connections / 2});
    EXPECT_EQ(side->node->counters(0).commands_run, 0u);
    for (std::uint16_t k = 0; k < 2; ++k) {
      const Side::PerLcore& l = side->lcore[k];
      EXPECT_EQ(side->node->host(k).host().connection_count(), std::size_t{connections / 2}) << "lcore " << k;
      ASSERT_EQ(l.created.size(), std::size_t{connections / 2}) << "lcore " << k;
      EXPECT_EQ(l.creator, side->thread_of[k].load()) << "lcore " << k << " created by another thread";
      for (const transport::Connection* c : l.created) {
        EXPECT_EQ(side->node->owner_of(c->config().local_qpn), k);
        EXPECT_EQ(side->node->host(k).connection(c->config().local_qpn), c);
        EXPECT_EQ(side->node->host(1 - k).connection(c->config().local_qpn), nullptr);
      }
      EXPECT_EQ(l.completed, std::uint64_t{connections / 2}) << "lcore " << k;
      EXPECT_EQ(l.failed, 0u);
      EXPECT_EQ(side->node->host(k).counters().rx_misdirected, 0u);
    }
  }
  // Every message arrived whole: its bytes are its client QPN's low byte,
  // and each server connection's peer is a client connection of the same
  // lcore.
  for (std::uint16_t k = 0; k < 2; ++k)
    for (std::size_t i = 0; i < p.server.lcore[k].created.size(); ++i) {
      const transport::Connection* s = p.server.lcore[k].created[i];
      const std::uint8_t* got = p.server.lcore[k].buffer.data() + i * message_bytes;
      EXPECT_EQ(p.client.node->owner_of(s->config().peer_qpn), k);
      for (std::uint64_t j = 0; j < message_bytes; ++j)
        ASSERT_EQ(got[j], std::uint8_t(s->config().peer_qpn & 0xff)) << "connection " << i << " byte " << j;
    }
  EXPECT_EQ(p.client.manager->manager().counters().established, std::uint64_t{connections});
  EXPECT_EQ(p.server.manager->manager().counters().established, std::uint64_t{connections});
}

}  // namespace
}  // namespace metaroce::stack
