// A node under load: a loopback of 2 lcores per side, each of the four
// hosts driven by a thread of its own at the same time (as four lcores),
// every post, close and re-open reaching a connection only through its
// owner's command ring. One connection is closed on both ends while the
// others carry WRITEs, then re-opened with the same QPNs: the others
// complete every byte, the new one too, each on its owner's host.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "engine/loopback.hpp"

namespace metaroce::engine {
namespace {

constexpr std::uint16_t lcores = 2;
constexpr std::uint32_t qps = 4;
constexpr std::size_t message = 256 * 1024;  // 64 packets of 4 KiB
constexpr int messages_per_qp = 8;

struct Completed {
  std::uint32_t qpn = 0;
  std::uint64_t wr_id = 0;
  transport::CompletionStatus status = transport::CompletionStatus::success;
};

// Four threads, one per host, each also collecting its host's completions.
class Lanes {
 public:
  explicit Lanes(Loopback& lb) : lb_(lb) {
    for (std::uint16_t k = 0; k < lcores; ++k) {
      threads_.emplace_back([this, k] { run(k, true); });
      threads_.emplace_back([this, k] { run(k, false); });
    }
  }
  ~Lanes() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  // Side A's completions by lane, read after stop().
  std::vector<Completed> done[lcores];
  std::atomic<std::uint64_t> completions{0};

 private:
  void run(std::uint16_t k, bool side_a) {
    std::vector<transport::Completion> scratch;
    while (!stop_) {
      std::size_t work = 0;
      if (side_a) {
        work = lb_.poll_side_a(k);
        work += lb_.host_a(k).host().poll_completions(scratch, [&](transport::Connection& c, const auto& got) {
          for (const auto& x : got) done[k].push_back({c.config().local_qpn, x.wr_id, x.status});
          completions.fetch_add(got.size());
        });
      } else {
        work = lb_.poll_side_b(k);
      }
      // Four threads on however many CPUs: let the others run when idle.
      if (work == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  Loopback& lb_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST(NodeUnderLoad, CloseAndReopenOneConnectionWhileTheOthersCarryWrites) {
  LoopbackConfig config;
  config.connection.mtu = 4096;
  config.connection.paths = 4;
  config.connection.initial_rto = 5'000'000;
  config.connection.min_rto = 2'000'000;
  config.connection.retry_limit = 50;
  config.lcores = lcores;
  config.qps = qps;
  config.hosts.tx_mbufs = 4096;
  config.hosts.max_connections = qps;
  config.hosts.idle_sleep_us = 0;
  std::string error;
  auto lb = Loopback::create(config, error);
  ASSERT_NE(lb, nullptr) << error;

  // Per connection pair: its configs (to re-open it), owner, and buffers.
  struct Pair {
    transport::ConnectionConfig a, b;
    std::uint16_t owner = 0;
    std::vector<std::uint8_t> src, dst;
    std::uint32_t lkey = 0, rkey = 0;
  };
  std::vector<Pair> pairs(qps);
  for (std::uint32_t i = 0; i < qps; ++i) {
    Pair& p = pairs[i];
    p.a = lb->connection_a(i).config();
    p.b = lb->connection_b(i).config();
    p.owner = lb->lcore_of(i);
    p.src.resize(message * messages_per_qp);
    for (std::size_t j = 0; j < p.src.size(); ++j) p.src[j] = static_cast<std::uint8_t>(j * 13 + i * 7 + (j >> 12));
    p.dst.assign(p.src.size(), 0);
    // Registered before the lanes run: no lcore touches the registries yet.
    p.lkey = lb->host_a(p.owner).memory().register_region(p.src.data(), p.src.size(), transport::access_local_write);
    p.rkey = lb->host_b(p.owner).memory().register_region(
        p.dst.data(), p.dst.size(), transport::access_local_write | transport::access_remote_write);
  }
  const auto post_writes = [&](Node& node, std::uint32_t i, int first, int count) {
    const Pair& p = pairs[i];
    return node.post(p.owner, [&p, i, first, count](EngineHost& h) {
      transport::Connection* c = h.connection(p.a.local_qpn);
      for (int m = first; m < first + count && c != nullptr; ++m) {
        transport::SendRequest r;
        r.wr_id = std::uint64_t{i} * 1000 + static_cast<std::uint64_t>(m);
        r.op = transport::SendOp::write;
        r.local_addr = p.src.data() + std::size_t(m) * message;
        r.length = message;
        r.lkey = p.lkey;
        r.remote_addr = reinterpret_cast<std::uint64_t>(p.dst.data() + std::size_t(m) * message);
        r.rkey = p.rkey;
        (void)c->post_send(r);
      }
    });
  };

  constexpr std::uint32_t closed = 1;  // on lcore steering_queue(0x102, 2) = 0
  Lanes lanes(*lb);
  // Load: every connection but `closed` gets all its messages; `closed`
  // gets half of them, then is closed on both ends while the rest fly.
  for (std::uint32_t i = 0; i < qps; ++i)
    ASSERT_TRUE(post_writes(lb->node_a(), i, 0, i == closed ? messages_per_qp / 2 : messages_per_qp));
  std::atomic<int> removed{0};
  const Pair& c = pairs[closed];
  ASSERT_TRUE(lb->node_a().post(c.owner, [&](EngineHost& h) { removed += h.remove_connection(c.a.local_qpn); }));
  ASSERT_TRUE(lb->node_b().post(c.owner, [&](EngineHost& h) { removed += h.remove_connection(c.b.local_qpn); }));
  while (removed.load() < 2) std::this_thread::yield();
  // Re-open: new PSNs (old frames still in the rings are out of window),
  // the same QPNs, so the same owner; created there, by its thread.
  transport::ConnectionConfig a = c.a, b = c.b;
  a.initial_psn = b.peer_initial_psn = (c.a.initial_psn + 0x400000) & wire::psn_mask;
  b.initial_psn = a.peer_initial_psn = (c.b.initial_psn + 0x400000) & wire::psn_mask;
  std::atomic<int> reopened{0};
  std::atomic<std::thread::id> reopened_on_a{};
  for (const bool side_a : {true, false})
    ASSERT_TRUE((side_a ? lb->node_a() : lb->node_b()).post(c.owner, [&, cfg = side_a ? a : b, side_a](EngineHost& h) {
      std::string e;
      transport::Connection* conn = h.add_connection(cfg, nullptr, e);
      if (conn == nullptr) return;
      conn->connect();
      if (side_a) reopened_on_a = std::this_thread::get_id();
      ++reopened;
    }));
  while (reopened.load() < 2) std::this_thread::yield();
  // The second half of its messages, on the new connection.
  std::fill(pairs[closed].dst.begin(), pairs[closed].dst.end(), 0);
  ASSERT_TRUE(post_writes(lb->node_a(), closed, messages_per_qp / 2, messages_per_qp / 2));

  const std::uint64_t expected = (qps - 1) * messages_per_qp + messages_per_qp / 2;
  for (int spin = 0; spin < 30'000 && lanes.completions.load() < expected; ++spin)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  lanes.stop();

  // Exactly: every message of the open connections and the re-opened one's
  // second half completed with success, each on its owner's lane; the
  // closed one's first half may have completed before the close or not at
  // all (its connection was destroyed), never in error on another lane.
  std::vector<int> ok(qps * 1000, 0);
  for (std::uint16_t k = 0; k < lcores; ++k)
    for (const Completed& d : lanes.done[k]) {
      const auto i = static_cast<std::uint32_t>(d.wr_id / 1000);
      ASSERT_LT(i, qps);
      EXPECT_EQ(pairs[i].owner, k) << "completion of connection " << i << " on another lane";
      EXPECT_EQ(d.qpn, pairs[i].a.local_qpn);
      if (d.status == transport::CompletionStatus::success) ++ok[d.wr_id];
    }
  for (std::uint32_t i = 0; i < qps; ++i) {
    const int first = i == closed ? messages_per_qp / 2 : 0;
    for (int m = first; m < messages_per_qp; ++m) {
      EXPECT_EQ(ok[i * 1000 + m], 1) << "connection " << i << " message " << m;
      EXPECT_EQ(std::memcmp(pairs[i].src.data() + std::size_t(m) * message,
                            pairs[i].dst.data() + std::size_t(m) * message, message),
                0)
          << "connection " << i << " message " << m;
    }
  }
  EXPECT_NE(reopened_on_a.load(), std::this_thread::get_id());  // the owner's thread, not the poster's
  EXPECT_NE(lb->host_a(c.owner).connection(c.a.local_qpn), nullptr);
  EXPECT_EQ(lb->host_a(1 - c.owner).connection(c.a.local_qpn), nullptr);
  // Every command ran on its owner, none elsewhere: the initial writes
  // (qps), the close and re-open (2 per side), the second half (1).
  std::uint64_t run_a = 0, run_b = 0;
  for (std::uint16_t k = 0; k < lcores; ++k) {
    run_a += lb->node_a().counters(k).commands_run;
    run_b += lb->node_b().counters(k).commands_run;
  }
  EXPECT_EQ(run_a, qps + 3);
  EXPECT_EQ(run_b, 2u);
  EXPECT_EQ(lb->node_a().counters(1 - c.owner).commands_run, (qps / 2));
  for (std::uint16_t k = 0; k < lcores; ++k) {
    EXPECT_EQ(lb->host_a(k).counters().rx_misdirected, 0u);
    EXPECT_EQ(lb->host_b(k).counters().rx_misdirected, 0u);
  }
}

}  // namespace
}  // namespace metaroce::engine
