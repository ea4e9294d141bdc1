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
#include <map>
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
    static int pairs = 0;  // ring names are process-wide
    const std::string n = std::to_string(pairs++);
    if (!engine::Port::create_ring_pair("nm_a" + n, "nm_b" + n, s, a, b, error) || !a->start(error) ||
        !b->start(error))
      return false;
    return make(client, *a, client_ip, ("nm_client" + n).c_str(), 11, error) &&
           make(server, *b, server_ip, ("nm_server" + n).c_str(), 22, error);
  }
  bool make(Side& side, engine::Port& port, std::uint32_t ip, const std::string& name, std::uint64_t seed,
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


// Load: every connection keeps `depth` SENDs in flight, each message's
// bytes (peer QPN + its number) checked at the server. Under it, one
// connection per lcore is closed (its owner stops posting and drains, then
// DREQ/DREP) and two are opened again, while the others carry on.
struct Load {
  static constexpr std::uint64_t depth = 4;
  struct Conn {
    transport::Connection* c = nullptr;
    std::vector<std::uint8_t> buffer = std::vector<std::uint8_t>(depth * message_bytes);
    std::uint32_t key = 0;
    std::uint64_t seq = 0;        // client: next to post; server: next expected
    std::uint64_t completed = 0;  // client: SENDs done; server: receives checked
    std::uint64_t outstanding = 0;
    bool stopping = false;
  };
  struct alignas(64) PerLcore {
    std::map<std::uint32_t, std::unique_ptr<Conn>> conns;  // by local QPN: the owner's only
    std::vector<std::unique_ptr<Conn>> gone;                // removed (their buffers stay registered)
    std::atomic<std::uint64_t> completed{0};
    std::atomic<std::uint64_t> outstanding{0};
    std::uint64_t wrong = 0, failed = 0;
  };
  std::array<PerLcore, 2> client, server;
  std::atomic<int> drained{0};
  std::atomic<bool> stop_posting{false};
  std::mutex totals_mutex;
  std::map<std::uint32_t, std::uint64_t> sent, received;  // by client QPN: at removal or the end

  static std::uint8_t pattern(std::uint32_t client_qpn, std::uint64_t seq) {
    return static_cast<std::uint8_t>(client_qpn + seq);
  }
  void post(PerLcore& l, Conn& x) {
    while (!x.stopping && !stop_posting.load(std::memory_order_relaxed) && x.outstanding < depth) {
      std::uint8_t* at = x.buffer.data() + (x.seq % depth) * message_bytes;
      std::memset(at, pattern(x.c->config().local_qpn, x.seq), message_bytes);
      transport::SendRequest r;
      r.wr_id = x.seq;
      r.op = transport::SendOp::send;
      r.local_addr = at;
      r.length = message_bytes;
      r.lkey = x.key;
      if (x.c->post_send(r) != transport::PostResult::ok) return;
      ++x.seq;
      ++x.outstanding;
      l.outstanding.fetch_add(1);
    }
  }
  void post_receive(Conn& x, std::uint64_t slot) {
    transport::ReceiveRequest r;
    r.wr_id = slot;
    r.addr = x.buffer.data() + slot * message_bytes;
    r.length = message_bytes;
    r.lkey = x.key;
    (void)x.c->post_receive(r);
  }
  void created(bool is_server, std::uint16_t k, engine::EngineHost& h, transport::Connection* c) {
    ASSERT_NE(c, nullptr);
    PerLcore& l = (is_server ? server : client)[k];
    auto x = std::make_unique<Conn>();
    x->c = c;
    x->key = h.memory().register_region(x->buffer.data(), x->buffer.size(), transport::access_local_write);
    Conn& ref = *x;
    l.conns[c->config().local_qpn] = std::move(x);
    if (is_server) {
      for (std::uint64_t slot = 0; slot < depth; ++slot) post_receive(ref, slot);
    } else {
      post(l, ref);
    }
  }
  void removed(bool is_server, std::uint16_t k, transport::Connection& c) {
    PerLcore& l = (is_server ? server : client)[k];
    const auto at = l.conns.find(c.config().local_qpn);
    ASSERT_NE(at, l.conns.end());
    {
      const std::lock_guard<std::mutex> lock(totals_mutex);
      (is_server ? received[c.config().peer_qpn] : sent[c.config().local_qpn]) = at->second->completed;
    }
    l.gone.push_back(std::move(at->second));
    l.conns.erase(at);
  }
  // Owner lcore k: its connections' completions.
  void complete(bool is_server, std::uint16_t k, transport::Connection& c,
                const std::vector<transport::Completion>& got) {
    PerLcore& l = (is_server ? server : client)[k];
    const auto at = l.conns.find(c.config().local_qpn);
    if (at == l.conns.end()) return;
    Conn& x = *at->second;
    for (const transport::Completion& done : got) {
      if (done.status != transport::CompletionStatus::success) {
        ++l.failed;
        continue;
      }
      if (is_server) {
        const std::uint8_t* bytes = x.buffer.data() + done.wr_id * message_bytes;
        const std::uint8_t want = pattern(c.config().peer_qpn, x.seq);
        for (std::uint64_t j = 0; j < message_bytes; ++j) l.wrong += bytes[j] != want ? 1 : 0;
        if (done.byte_len != message_bytes) ++l.wrong;
        ++x.seq;
        ++x.completed;
        l.completed.fetch_add(1);
        post_receive(x, done.wr_id);
      } else {
        ++x.completed;
        --x.outstanding;
        l.outstanding.fetch_sub(1);
        l.completed.fetch_add(1);
      }
    }
    if (!is_server) {
      if (x.stopping && x.outstanding == 0) {
        x.stopping = false;  // drained once
        x.outstanding = ~std::uint64_t{0} >> 1;  // never posts again
        drained.fetch_add(1);
      }
      post(l, x);
    }
  }
};

TEST(NodeManager, ConnectionsClosedAndOpenedAgainUnderLoadStayOnTheirOwners) {
  Load load;
  Pair p;
  std::string error;
  ASSERT_TRUE(p.create(error)) << error;
  // The managers again, with the load's callbacks.
  for (Side* side : {&p.client, &p.server}) {
    const bool is_server = side == &p.server;
    cm::ManagerConfig m;
    m.local.local_mac = (is_server ? p.b : p.a)->mac();
    m.local.local_ipv4 = is_server ? server_ip : client_ip;
    m.seed = is_server ? 33 : 44;
    m.retry_interval = 20'000'000;
    m.retries = 100;
    side->manager.reset();
    side->manager = std::make_unique<NodeManager>(
        *side->node, m, nullptr,
        [&load, is_server](std::uint16_t k, engine::EngineHost& h, transport::Connection* c, const std::string&) {
          load.created(is_server, k, h, c);
        },
        [&load, is_server](std::uint16_t k, engine::EngineHost&, transport::Connection& c) {
          load.removed(is_server, k, c);
        });
  }
  p.server.manager->listen(nullptr);
  cm::ConnectRequest r;
  r.connection.mode = transport::Mode::metaroce;
  r.connection.mtu = 1024;
  r.connection.paths = 4;
  r.connection.streams = 1;
  r.connection.endpoints.peer_ipv4 = server_ip;
  r.connection.endpoints.peer_mac = p.b->mac();
  r.cc = "none";
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(p.client.manager->connect(r, error));
    ASSERT_NE(ids.back(), 0u) << error;
  }
  std::atomic<bool> stop{false};
  std::atomic<int> phase{0};
  std::uint64_t during_close = 0, closed_at = 0;
  std::string control_error;
  const auto total = [&](std::array<Load::PerLcore, 2>& side) {
    return side[0].completed.load() + side[1].completed.load();
  };
  // Lcore k of a side; the client's management lcore also drives the test.
  const auto run = [&](Side& side, bool is_server, std::uint16_t k) {
    std::vector<transport::Completion> scratch;
    while (!stop.load()) {
      std::size_t work = side.node->poll(k);
      if (k == 0) work += side.manager->turn();
      work += side.node->host(k).host().poll_completions(scratch, [&](transport::Connection& c, const auto& got) {
        load.complete(is_server, k, c, got);
      });
      if (!is_server && k == 0) {
        NodeManager& nm = *side.manager;
        switch (phase.load()) {
          case 0:  // load on both lcores: close connection 0 (lcore 0) and 1 (lcore 1)
            if (load.client[0].completed.load() < 200 || load.client[1].completed.load() < 200) break;
            for (std::uint64_t id : {ids[0], ids[1]}) {
              const std::uint32_t qpn = nm.qpn_of(id);
              // The owner stops posting on it and says when it drained.
              while (!side.node->post(nm.owner_of(qpn), [&load, qpn, k = nm.owner_of(qpn)](engine::EngineHost&) {
                auto& x = *load.client[k].conns.at(qpn);
                x.stopping = true;
                if (x.outstanding == 0) {
                  x.outstanding = ~std::uint64_t{0} >> 1;
                  load.drained.fetch_add(1);
                }
              })) {
              }
            }
            phase = 1;
            break;
          case 1:
            if (load.drained.load() < 2) break;
            for (std::uint64_t id : {ids[0], ids[1]})
              if (!nm.disconnect(id, {}, control_error)) stop = true;
            closed_at = total(load.client);
            phase = 2;
            break;
          case 2:  // both gone at both ends: open two again (round-robin: lcore 0, then 1)
            if (nm.counters().connections_removed_by_owner < 2 ||
                p.server.manager->counters().connections_removed_by_owner < 2)
              break;
            during_close = total(load.client) - closed_at;
            for (int i = 0; i < 2; ++i)
              if (nm.connect(r, control_error) == 0) stop = true;
            phase = 3;
            break;
          case 3:  // the new ones carry their share too, then everything drains
            if (nm.counters().connections_handed_to_owner < 3 || nm.counters().connections_created_by_manager < 3 ||
                total(load.client) < closed_at + during_close + 2000)
              break;
            load.stop_posting = true;
            phase = 4;
            break;
          case 4:
            if (load.client[0].outstanding.load() + load.client[1].outstanding.load() == 0 &&
                total(load.server) == total(load.client))
              stop = true;
            break;
        }
      }
      if (work == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  };
  std::vector<std::thread> threads;
  for (std::uint16_t k = 0; k < 2; ++k) {
    threads.emplace_back([&, k] { run(p.client, false, k); });
    threads.emplace_back([&, k] { run(p.server, true, k); });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!stop.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop = true;
  for (auto& t : threads) t.join();
  ASSERT_EQ(phase.load(), 4) << control_error;
  EXPECT_TRUE(control_error.empty()) << control_error;

  for (Side* side : {&p.client, &p.server}) {
    const NodeManagerCounters c = side->manager->counters();
    EXPECT_EQ(c.connections_handed_to_owner, 3u);     // 2 at first, 1 again on lcore 1
    EXPECT_EQ(c.connections_created_by_manager, 3u);  // the same on lcore 0
    EXPECT_EQ(c.connections_removed_by_owner, 2u);    // one per lcore
    EXPECT_EQ(c.handoffs_refused, 0u);
    for (std::uint16_t k = 0; k < 2; ++k) {
      EXPECT_EQ(side->node->host(k).host().connection_count(), 2u) << "lcore " << k;
      EXPECT_EQ(side->node->host(k).counters().rx_misdirected, 0u);
    }
  }
  // Commands each lcore ran: client lcore 0 the stop of its closed one;
  // client lcore 1 two creations, a stop, a removal, a creation; the
  // server's lcore 1 two creations, a removal, a creation; lcore 0 none
  // (the management lcore creates and removes its own directly).
  EXPECT_EQ(p.client.node->counters(0).commands_run, 1u);
  EXPECT_EQ(p.client.node->counters(1).commands_run, 5u);
  EXPECT_EQ(p.server.node->counters(0).commands_run, 0u);
  EXPECT_EQ(p.server.node->counters(1).commands_run, 4u);
  // The others carried on while two closed.
  EXPECT_GT(during_close, 0u);
  // Every message sent arrived once, byte for byte, on the same lcore:
  // per connection (the 2 closed and the 4 open), sent == received.
  for (std::uint16_t k = 0; k < 2; ++k) {
    for (const auto& [qpn, x] : load.client[k].conns) load.sent[qpn] = x->completed;
    for (const auto& [qpn, x] : load.server[k].conns) load.received[x->c->config().peer_qpn] = x->completed;
    EXPECT_EQ(load.server[k].wrong, 0u);
    EXPECT_EQ(load.server[k].failed + load.client[k].failed, 0u);
  }
  EXPECT_EQ(load.sent.size(), 6u);
  EXPECT_EQ(load.sent, load.received);
  for (const auto& [qpn, n] : load.sent) EXPECT_GT(n, 0u) << "QP " << qpn;
}

}  // namespace
}  // namespace metaroce::stack
