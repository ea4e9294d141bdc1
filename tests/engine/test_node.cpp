// Nodes: one engine host per lcore on a port of as many queues, and the
// command rings that carry work across lcores. Threads stand in for lcores
// (rte_ring's multi-producer enqueue is safe from any thread); the owners
// run only what was posted to them, on their own thread, in order.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "engine/loopback.hpp"
#include "engine/node.hpp"
#include "engine/port.hpp"

namespace metaroce::engine {
namespace {

struct RingNode {
  std::unique_ptr<Port> a, b;
  std::unique_ptr<Node> node;

  bool create(std::uint16_t lcores, std::uint32_t ring_size, std::string& error) {
    static int pairs = 0;
    const std::string n = std::to_string(pairs++);
    PortSetup s;
    s.queues = lcores;
    if (!Port::create_ring_pair("nd_a" + n, "nd_b" + n, s, a, b, error) || !a->start(error) || !b->start(error))
      return false;
    NodeConfig c;
    c.name = "node" + n;
    c.port_id = a->id();
    c.lcores = lcores;
    c.hosts.tx_mbufs = 1024;
    c.command_ring_size = ring_size;
    node = Node::create(c, error);
    return node != nullptr;
  }
  ~RingNode() {
    for (Port* p : {a.get(), b.get()})
      if (p) p->drain_rx();
    node.reset();
    a.reset();
    b.reset();
  }
};

TEST(Node, OneHostPerLcoreEachOnItsOwnQueueAndCacheLine) {
  RingNode n;
  std::string error;
  ASSERT_TRUE(n.create(4, 64, error)) << error;
  ASSERT_EQ(n.node->lcores(), 4);
  for (std::uint16_t i = 0; i < 4; ++i) {
    EXPECT_EQ(n.node->host(i).config().queue, i);
    EXPECT_EQ(n.node->host(i).config().queues, 4);
    EXPECT_EQ(n.node->host(i).config().name, n.node->config().name + "." + std::to_string(i));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(&n.node->host(i)) % 64, 0u);
  }
  // QPN q belongs to lcore q % 4, and only that host takes the connection.
  EXPECT_EQ(n.node->owner_of(0x101), 1);
  EXPECT_EQ(n.node->owner_of(0x104), 0);
  transport::ConnectionConfig c;
  c.local_qpn = 0x107;
  c.peer_qpn = 0x20b;
  EXPECT_EQ(n.node->host(0).add_connection(c, nullptr, error), nullptr);
  EXPECT_NE(n.node->host(n.node->owner_of(0x107)).add_connection(c, nullptr, error), nullptr) << error;
}

TEST(Node, CommandsPostedFromOtherThreadsRunOnTheOwnerInOrder) {
  RingNode n;
  std::string error;
  ASSERT_TRUE(n.create(2, 1024, error)) << error;
  constexpr int posters = 3, per_poster = 200;
  // Written only by lcore 1's thread (the owner), read after it joined.
  std::vector<std::vector<int>> seen(posters);
  std::atomic<bool> wrong_host{false};
  std::atomic<int> posted{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < posters; ++p)
    threads.emplace_back([&, p] {
      for (int i = 0; i < per_poster; ++i) {
        while (!n.node->post(1, [&, p, i](EngineHost& h) {
          if (&h != &n.node->host(1)) wrong_host = true;
          seen[p].push_back(i);
        })) {
          std::this_thread::yield();  // full: the owner has not caught up yet
        }
        posted.fetch_add(1);
      }
    });
  std::size_t ran = 0;
  std::thread owner([&] {
    while (ran < std::size_t{posters} * per_poster) ran += n.node->run_commands(1);
  });
  for (auto& t : threads) t.join();
  owner.join();
  EXPECT_FALSE(wrong_host);
  EXPECT_EQ(ran, std::size_t{posters} * per_poster);
  for (int p = 0; p < posters; ++p) {
    ASSERT_EQ(seen[p].size(), std::size_t{per_poster});
    for (int i = 0; i < per_poster; ++i) EXPECT_EQ(seen[p][i], i);
  }
  EXPECT_EQ(n.node->counters(1).commands_run, std::uint64_t{posters} * per_poster);
  EXPECT_EQ(n.node->counters(0).commands_run, 0u);
}

TEST(Node, AFullRingRefusesAndCountsAndUnrunCommandsAreFreed) {
  RingNode n;
  std::string error;
  ASSERT_TRUE(n.create(1, 4, error)) << error;
  auto token = std::make_shared<int>(7);
  // A ring of 4 holds 3.
  int accepted = 0;
  for (int i = 0; i < 5; ++i) accepted += n.node->post(0, [token](EngineHost&) {}) ? 1 : 0;
  EXPECT_EQ(accepted, 3);
  EXPECT_EQ(n.node->counters(0).commands_refused, 2u);
  EXPECT_EQ(token.use_count(), 4);
  EXPECT_EQ(n.node->run_commands(0), 3u);
  EXPECT_EQ(token.use_count(), 1);
  // Left unrun: the node's destructor frees them (ASan checks the leak).
  ASSERT_TRUE(n.node->post(0, [token](EngineHost&) {}));
  n.node.reset();
  EXPECT_EQ(token.use_count(), 1);
}

TEST(Node, AConnectionSetUpOnOneLcoreIsCreatedByItsOwner) {
  // The connection manager's lcore (0) hands a new connection to its owner
  // (lcore 1): the owner's thread creates it on its own host and wheel.
  RingNode n;
  std::string error;
  ASSERT_TRUE(n.create(2, 64, error)) << error;
  transport::ConnectionConfig c;
  c.local_qpn = 0x305;
  c.peer_qpn = 0x409;
  const std::uint16_t owner = n.node->owner_of(c.local_qpn);
  ASSERT_EQ(owner, 1);
  std::atomic<std::thread::id> created_on{};
  ASSERT_TRUE(n.node->post(owner, [&](EngineHost& h) {
    std::string e;
    if (h.add_connection(c, nullptr, e) != nullptr) created_on = std::this_thread::get_id();
  }));
  std::thread::id owner_thread;
  std::thread t([&] {
    owner_thread = std::this_thread::get_id();
    while (n.node->poll(owner) == 0) {
    }
  });
  t.join();
  EXPECT_EQ(created_on.load(), owner_thread);
  EXPECT_NE(n.node->host(owner).connection(0x305), nullptr);
  EXPECT_EQ(n.node->host(0).connection(0x305), nullptr);
  EXPECT_EQ(n.node->host(owner).host().connection_count(), 1u);
}

TEST(Node, LoopbackLanesSpreadConnectionsEvenly) {
  LoopbackConfig config;
  config.connection.mtu = 1024;
  config.lcores = 2;
  config.qps = 8;
  config.hosts.tx_mbufs = 1024;
  config.hosts.max_connections = 8;
  std::string error;
  auto lb = Loopback::create(config, error);
  ASSERT_NE(lb, nullptr) << error;
  std::array<int, 2> per_lcore{};
  for (std::size_t i = 0; i < lb->qps(); ++i) {
    const std::uint16_t k = lb->lcore_of(i);
    ++per_lcore[k];
    EXPECT_EQ(lb->host_a(k).connection(lb->connection_a(i).config().local_qpn), &lb->connection_a(i));
    EXPECT_EQ(lb->host_b(k).connection(lb->connection_b(i).config().local_qpn), &lb->connection_b(i));
  }
  EXPECT_EQ(per_lcore[0], 4);
  EXPECT_EQ(per_lcore[1], 4);
  config.inline_link = true;
  EXPECT_EQ(Loopback::create(config, error), nullptr);
  EXPECT_NE(error.find("use one lcore per side"), std::string::npos) << error;
}

}  // namespace
}  // namespace metaroce::engine
