// What a host's turn costs and whom it serves, on hosts wired by hand
// (frames move from one host's sink to the other's receive() when the test
// says so):
//   - 10,000 idle connections: a turn polls none of them, however many
//     turns and however much time passes; a post polls exactly its
//     connection, as many times as its work needs, and its completion is
//     found through the host's completion list without visiting the others;
//   - a sink with few buffers a turn (a short transmit mempool): the host
//     holds what the sink refused and serves the connections in ready-list
//     order, so each one's progress is fixed by the number of polls, and
//     every message still completes;
//   - a transmit budget (HostConfig::tx_budget_frames): a turn stops
//     polling once it has taken that many frames, and the connections it
//     did not poll go first in the next turn, in ready-list order.
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "host/host.hpp"
#include "host_test_support.hpp"

namespace metaroce::test {
namespace {

using transport::Completion;
using transport::CompletionStatus;
using transport::Connection;
using transport::PostResult;
using transport::SendOp;

using Frames = std::vector<std::vector<std::uint8_t>>;

// ConnectionConfig defaults but for the paths: the apps' 4.
transport::ConnectionConfig apps_default() {
  transport::ConnectionConfig c;
  c.paths = 4;
  return c;
}

Connection& add(host::Host& h, const transport::ConnectionConfig& config) { return add_connected(h, config); }

// `count` connected pairs, A's end on `a` and B's on `b`: the apps'
// defaults with 1 KiB packets.
struct Pairs {
  std::vector<Connection*> senders, receivers;
};
Pairs add_pairs(host::Host& a, host::Host& b, std::uint32_t count) {
  transport::ConnectionConfig base = apps_default();
  base.mtu = 1024;
  Pairs p;
  for (std::uint32_t i = 0; i < count; ++i) {
    p.senders.push_back(&add(a, pair_end(base, i, true)));
    p.receivers.push_back(&add(b, pair_end(base, i, false)));
  }
  return p;
}

void deliver(host::Host& to, std::uint64_t now, const Frames& frames) {
  for (const auto& f : frames) to.receive(now, f);
}

TEST(HostPolling, IdleConnectionsCostNothingPerTurn) {
  constexpr std::uint32_t connections = 10'000;
  constexpr std::uint32_t active = 4321;
  host::Host a(host::HostConfig{.name = "A"});
  host::Host b(host::HostConfig{.name = "B"});
  const transport::ConnectionConfig base = apps_default();
  std::vector<Connection*> conns;
  for (std::uint32_t i = 0; i < connections; ++i) conns.push_back(&add(a, pair_end(base, i, true)));
  Connection& peer = add(b, pair_end(base, active, false));

  // Created and connected, no traffic: no pool block, no timer, nothing ready.
  EXPECT_EQ(a.connection_count(), connections);
  EXPECT_EQ(a.ready_count(), 0u);
  EXPECT_EQ(a.wheel().pending(), 0u);
  EXPECT_EQ(a.pools().bytes_in_use(), 0u);
  const std::size_t idle_bytes = conns.front()->memory_bytes();
  for (const Connection* c : conns) ASSERT_EQ(c->memory_bytes(), idle_bytes);
  EXPECT_EQ(a.connection_memory_bytes(), std::size_t{connections} * idle_bytes);
  EXPECT_LE(idle_bytes, 16384u);
  std::printf("  idle connection (defaults, 4 paths): %zu bytes\n", idle_bytes);
  RecordProperty("idle_connection_bytes", static_cast<int>(idle_bytes));

  // Many turns, a second of time: no connection is polled, nothing is sent.
  CountedSink sink_a(1u << 20);
  CountedSink sink_b(1u << 20);
  std::uint64_t now = 0;
  for (int turn = 0; turn < 10'000; ++turn) {
    now += 100'000;
    a.advance(now);
    a.transmit(now, sink_a);
    sink_a.next_turn();
  }
  EXPECT_EQ(a.counters().connections_polled, 0u);
  EXPECT_EQ(a.ready_count(), 0u);
  EXPECT_TRUE(sink_a.frames.empty());

  // One 100-byte WRITE on one connection: one poll, one frame.
  std::vector<std::uint8_t> src(100), dst(100, 0);
  fill_pattern(7, src.data(), src.size());
  transport::SendRequest r;
  r.wr_id = 7;
  r.op = SendOp::write;
  r.local_addr = src.data();
  r.length = src.size();
  r.lkey = a.memory().register_region(src.data(), src.size(), transport::access_local_write);
  r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
  r.rkey = b.memory().register_region(dst.data(), dst.size(),
                                      transport::access_local_write | transport::access_remote_write);
  ASSERT_EQ(conns[active]->post_send(r), PostResult::ok);
  EXPECT_EQ(a.ready_count(), 1u);
  a.transmit(now, sink_a);
  EXPECT_EQ(a.counters().connections_polled, 1u);
  EXPECT_EQ(a.ready_count(), 0u);
  EXPECT_EQ(conns[active]->counters().data_packets_sent, 1u);
  const Frames data = sink_a.take_frames();
  ASSERT_EQ(data.size(), 1u);
  // Until the answer comes, more turns poll nothing (its timers are far off).
  for (int turn = 0; turn < 100; ++turn) {
    now += 100;
    a.advance(now);
    a.transmit(now, sink_a);
  }
  EXPECT_EQ(a.counters().connections_polled, 1u);
  EXPECT_TRUE(sink_a.frames.empty());

  // The message's one packet asks for an ACK: B polls its connection once,
  // for that ACK, and A's connection completes on it without a poll.
  now += 1'000;
  deliver(b, now, data);
  EXPECT_EQ(b.ready_count(), 1u);
  b.transmit(now, sink_b);
  EXPECT_EQ(b.counters().connections_polled, 1u);
  EXPECT_EQ(peer.counters().acks_sent, 1u);
  const Frames ack = sink_b.take_frames();
  ASSERT_EQ(ack.size(), 1u);
  EXPECT_EQ(first_mismatch(7, dst.data(), dst.size()), dst.size());
  now += 1'000;
  deliver(a, now, ack);
  // One connection of 10,000 has a completion: the host's completion list
  // hands over that one, once, and is empty after.
  EXPECT_EQ(a.completions_waiting(), 1u);
  std::vector<Completion> scratch, cq;
  std::vector<const Connection*> visited;
  EXPECT_EQ(a.poll_completions(scratch,
                               [&](Connection& c, const std::vector<Completion>& got) {
                                 visited.push_back(&c);
                                 cq.insert(cq.end(), got.begin(), got.end());
                               }),
            1u);
  ASSERT_EQ(visited.size(), 1u);
  EXPECT_EQ(visited[0], conns[active]);
  ASSERT_EQ(cq.size(), 1u);
  EXPECT_EQ(cq[0].wr_id, 7u);
  EXPECT_EQ(cq[0].status, CompletionStatus::success);
  EXPECT_EQ(a.completions_waiting(), 0u);
  EXPECT_EQ(a.poll_completions(scratch, [&](Connection&, const std::vector<Completion>&) { ADD_FAILURE(); }), 0u);

  // Idle again: nothing ready or armed on either host, no block held.
  for (int turn = 0; turn < 1'000; ++turn) {
    now += 100'000;
    a.advance(now);
    b.advance(now);
    a.transmit(now, sink_a);
    b.transmit(now, sink_b);
  }
  EXPECT_EQ(a.counters().connections_polled, 1u);
  EXPECT_EQ(b.counters().connections_polled, 1u);
  EXPECT_TRUE(sink_a.frames.empty());
  EXPECT_TRUE(sink_b.frames.empty());
  EXPECT_EQ(a.wheel().pending(), 0u);
  EXPECT_EQ(b.wheel().pending(), 0u);
  expect_host_at_rest(a, "A");
  expect_host_at_rest(b, "B");
  // What traffic left: no pool block (above), only the room of a few
  // vectors the connection keeps for the next burst.
  const std::size_t after = conns[active]->memory_bytes();
  std::printf("  the same connection after one message: %zu bytes\n", after);
  EXPECT_LE(after, 16384u);
  EXPECT_EQ(a.connection_memory_bytes(), std::size_t{connections - 1} * idle_bytes + after);
}

TEST(HostPolling, ShortSinkServesConnectionsInTurn) {
  constexpr std::size_t connections = 32;
  constexpr std::size_t messages = 32;            // per connection ...
  constexpr std::size_t message_bytes = 8 * 1024;  // ... of 8 packets
  constexpr std::size_t per_turn = 8;             // frames the sink takes a turn
  constexpr std::size_t burst = Connection::burst_limit;
  constexpr std::size_t packets = messages * message_bytes / 1024;  // per connection: 4 bursts
  static_assert(packets % burst == 0);

  host::Host a(host::HostConfig{.name = "A"});
  host::Host b(host::HostConfig{.name = "B"});
  const auto [senders, receivers] = add_pairs(a, b, connections);
  // One source for every connection (read only); a destination each.
  std::vector<std::uint8_t> src(messages * message_bytes);
  std::vector<std::uint8_t> dst(connections * messages * message_bytes, 0);
  for (std::size_t k = 0; k < messages; ++k) fill_pattern(k, src.data() + k * message_bytes, message_bytes);
  const std::uint32_t lkey = a.memory().register_region(src.data(), src.size(), transport::access_local_write);
  const std::uint32_t rkey = b.memory().register_region(
      dst.data(), dst.size(), transport::access_local_write | transport::access_remote_write);
  // Posted connection by connection: the ready list's order is 0, 1, ...
  for (std::size_t i = 0; i < connections; ++i) {
    for (std::size_t k = 0; k < messages; ++k) {
      transport::SendRequest r;
      r.wr_id = k;
      r.op = SendOp::write;
      r.local_addr = src.data() + k * message_bytes;
      r.length = message_bytes;
      r.lkey = lkey;
      r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + (i * messages + k) * message_bytes);
      r.rkey = rkey;
      ASSERT_EQ(senders[i]->post_send(r), PostResult::ok);
    }
  }
  ASSERT_EQ(a.ready_count(), connections);

  CountedSink sink_a(per_turn);
  CountedSink sink_b(1u << 20);
  std::vector<std::size_t> completed(connections, 0);
  std::size_t all_completed = 0;
  std::vector<Completion> cq;
  std::uint64_t now = 0;
  std::size_t turns = 0;
  bool checked_some = false;
  for (; all_completed < connections * messages && turns < 100'000; ++turns) {
    now += 1'000;
    a.advance(now);
    b.advance(now);
    sink_a.next_turn();
    a.transmit(now, sink_a);
    const Frames out_a = sink_a.take_frames();
    deliver(b, now, out_a);
    sink_b.next_turn();
    b.transmit(now, sink_b);
    deliver(a, now, sink_b.take_frames());

    // Every connection that is polled sends one burst, and the ready list
    // takes them in turn: after P polls, connection i was polled
    // P / N times, once more if i < P % N. That holds until the first
    // connection has sent everything (its next poll finds nothing).
    const std::uint64_t polls = a.counters().connections_polled;
    if (polls <= (packets / burst) * connections) {
      checked_some = true;
      ASSERT_EQ(out_a.size(), per_turn) << "turn " << turns << ": the sink had room the host did not fill";
      std::uint64_t least = UINT64_MAX, most = 0;
      for (std::size_t i = 0; i < connections; ++i) {
        const std::uint64_t times = polls / connections + (i < polls % connections ? 1 : 0);
        const std::uint64_t sent = senders[i]->counters().data_packets_sent;
        ASSERT_EQ(sent, times * burst) << "turn " << turns << ", connection " << i << ", " << polls << " polls";
        least = std::min(least, sent);
        most = std::max(most, sent);
      }
      ASSERT_LE(most - least, burst);  // no connection is ever more than one burst behind another
    }
    for (std::size_t i = 0; i < connections; ++i) {
      cq.clear();
      senders[i]->poll_completions(cq);
      for (const Completion& c : cq) {
        ASSERT_EQ(c.status, CompletionStatus::success);
        ASSERT_EQ(c.wr_id, completed[i]) << "connection " << i << ": completion out of order";
        ++completed[i];
        ++all_completed;
      }
    }
    // Polled directly, every connection has left the host's completion list.
    ASSERT_EQ(a.completions_waiting(), 0u);
  }
  ASSERT_TRUE(checked_some);
  ASSERT_EQ(all_completed, connections * messages) << "after " << turns << " turns";
  std::printf("  %zu turns, %llu polls, %llu frames held for want of a buffer\n", turns,
              static_cast<unsigned long long>(a.counters().connections_polled),
              static_cast<unsigned long long>(a.counters().tx_mempool_empty));
  EXPECT_GT(a.counters().tx_mempool_empty, 0u);
  EXPECT_EQ(a.counters().tx_frame_too_large, 0u);
  for (std::size_t i = 0; i < connections; ++i) {
    const transport::ConnectionCounters& tx = senders[i]->counters();
    EXPECT_EQ(tx.data_packets_sent, packets) << i;
    EXPECT_EQ(tx.retransmitted_packets, 0u) << i;
    EXPECT_EQ(receivers[i]->counters().data_bytes_placed, messages * message_bytes) << i;
    for (std::size_t k = 0; k < messages; ++k) {
      const std::uint8_t* placed = dst.data() + (i * messages + k) * message_bytes;
      ASSERT_EQ(first_mismatch(k, placed, message_bytes), message_bytes) << "connection " << i << " message " << k;
    }
  }
  // Let the last ACKs and timers settle: nothing is left on either host.
  for (int turn = 0; turn < 1'000 && (a.wheel().pending() != 0 || b.wheel().pending() != 0 ||
                                      a.ready_count() + b.ready_count() + a.tx_held() != 0);
       ++turn) {
    now += 1'000;
    a.advance(now);
    b.advance(now);
    sink_a.next_turn();
    a.transmit(now, sink_a);
    deliver(b, now, sink_a.take_frames());
    sink_b.next_turn();
    b.transmit(now, sink_b);
    deliver(a, now, sink_b.take_frames());
  }
  expect_host_at_rest(a, "A");
  expect_host_at_rest(b, "B");
  EXPECT_EQ(a.wheel().pending(), 0u);
  EXPECT_EQ(b.wheel().pending(), 0u);
}

}  // namespace
}  // namespace metaroce::test

namespace metaroce::test {
namespace {

TEST(HostPolling, TransmitBudgetStopsTheTurnAndKeepsTheOrder) {
  constexpr std::size_t connections = 32;
  constexpr std::size_t message_bytes = 8 * 1024;  // one message each, of 8 packets
  constexpr std::size_t packets = 8;
  constexpr std::uint32_t budget = 20;             // frames: a turn polls 3 connections (24 frames)
  constexpr std::size_t per_turn = 3;

  host::Host a(host::HostConfig{.name = "A", .tx_budget_frames = budget});
  host::Host b(host::HostConfig{.name = "B"});
  const auto [senders, receivers] = add_pairs(a, b, connections);
  std::vector<std::uint8_t> src(message_bytes);
  std::vector<std::uint8_t> dst(connections * message_bytes, 0);
  fill_pattern(3, src.data(), src.size());
  const std::uint32_t lkey = a.memory().register_region(src.data(), src.size(), transport::access_local_write);
  const std::uint32_t rkey = b.memory().register_region(
      dst.data(), dst.size(), transport::access_local_write | transport::access_remote_write);
  for (std::size_t i = 0; i < connections; ++i) {
    transport::SendRequest r;
    r.wr_id = i;
    r.op = SendOp::write;
    r.local_addr = src.data();
    r.length = message_bytes;
    r.lkey = lkey;
    r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + i * message_bytes);
    r.rkey = rkey;
    ASSERT_EQ(senders[i]->post_send(r), PostResult::ok);
  }
  ASSERT_EQ(a.ready_count(), connections);

  CountedSink sink_a(1u << 20);
  std::uint64_t now = 0;
  Frames all;
  const std::size_t turns = (connections + per_turn - 1) / per_turn;  // 11
  for (std::size_t turn = 1; turn <= turns; ++turn) {
    now += 1'000;
    a.transmit(now, sink_a);
    const Frames out = sink_a.take_frames();
    const std::size_t polled = std::min(connections, turn * per_turn);
    // This turn polled the next 3 in ready-list order, and stopped there.
    ASSERT_EQ(out.size(), (polled - (turn - 1) * per_turn) * packets) << "turn " << turn;
    ASSERT_EQ(a.counters().connections_polled, polled) << "turn " << turn;
    ASSERT_EQ(a.counters().tx_budget_stops, std::min(turn, turns - 1)) << "turn " << turn;
    ASSERT_EQ(a.ready_count(), connections - polled) << "turn " << turn;
    for (std::size_t i = 0; i < connections; ++i)
      ASSERT_EQ(senders[i]->counters().data_packets_sent, i < polled ? packets : 0u) << "turn " << turn << ", " << i;
    all.insert(all.end(), out.begin(), out.end());
  }
  EXPECT_EQ(a.counters().tx_mempool_empty, 0u);  // nothing held: the budget is not a shortage
  EXPECT_EQ(a.tx_held(), 0u);

  // Everything arrives, is acknowledged and completes, in place.
  CountedSink sink_b(1u << 20);
  now += 1'000;
  deliver(b, now, all);
  b.transmit(now, sink_b);
  deliver(a, now, sink_b.take_frames());
  std::vector<Completion> cq;
  for (std::size_t i = 0; i < connections; ++i) {
    cq.clear();
    senders[i]->poll_completions(cq);
    ASSERT_EQ(cq.size(), 1u) << i;
    EXPECT_EQ(cq[0].wr_id, i);
    EXPECT_EQ(cq[0].status, CompletionStatus::success);
    EXPECT_EQ(receivers[i]->counters().data_bytes_placed, message_bytes) << i;
    EXPECT_EQ(first_mismatch(3, dst.data() + i * message_bytes, message_bytes), message_bytes) << i;
  }
}

}  // namespace
}  // namespace metaroce::test
