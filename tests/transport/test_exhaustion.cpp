// Resource exhaustion in the transport, both modes, frame by frame in
// virtual time: a full completion queue, a full PSN window (the
// retransmission state), a peer that never answers and one that never posts
// receives. Nothing is lost or completed twice, every limit is reported
// where it is met (a PostResult, a counter, a completion status), and a
// connection that gives up leaves nothing behind: every work request has
// exactly one completion, no timer stays armed, nothing more is sent.
#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "connection_pair.hpp"
#include "transport/connection.hpp"

namespace {

using namespace metaroce;
using namespace metaroce::transport;
using test::ConnectionPair;
using test::Frames;

class Exhaustion : public ::testing::TestWithParam<Mode> {
 protected:
  [[nodiscard]] static bool rocev2() { return GetParam() == Mode::rocev2; }
  [[nodiscard]] static std::uint32_t mtu() { return rocev2() ? 256 : 1024; }
  [[nodiscard]] static ConnectionConfig config() {
    return test::pair_config(GetParam(), mtu(), rocev2() ? 1 : 2, 2);
  }
};

// Every work request completes once: no wr_id twice, none missing.
void expect_each_once(const std::vector<Completion>& all, std::vector<std::uint64_t> expected) {
  std::vector<std::uint64_t> got;
  for (const Completion& c : all) got.push_back(c.wr_id);
  std::sort(got.begin(), got.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(got, expected);
}

// The completion queue holds completion_queue_depth completions: each posted
// work request makes one, so posts beyond it are refused until completions
// are polled, and none is ever dropped.
TEST_P(Exhaustion, SendsBeyondTheCompletionQueueDepthAreRefused) {
  ConnectionConfig c = config();
  c.completion_queue_depth = 4;
  ConnectionPair p(c);
  for (std::uint64_t id = 1; id <= 4; ++id)
    ASSERT_EQ(p.a->post_send(p.request(SendOp::write, id, id * 100, 10)), PostResult::ok);
  EXPECT_EQ(p.a->post_send(p.request(SendOp::write, 5, 500, 10)), PostResult::queue_full);
  EXPECT_EQ(to_string(PostResult::queue_full), "queue_full");
  ConnectionPair::deliver_all(*p.b, 2000, p.drain(*p.a, 1000));
  ConnectionPair::deliver_all(*p.a, 3000, p.drain(*p.b, 2000));
  // All four completed, and wait unpolled: they still fill the queue.
  EXPECT_EQ(p.a->counters().send_completions, 4u);
  EXPECT_EQ(p.a->post_send(p.request(SendOp::write, 5, 500, 10)), PostResult::queue_full);
  EXPECT_EQ(p.a->counters().posts_refused_queue_full, 2u);
  const auto done = ConnectionPair::completions(*p.a);
  ASSERT_EQ(done.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(done[i].wr_id, i + 1);
    EXPECT_EQ(done[i].status, CompletionStatus::success);
  }
  for (std::uint64_t id = 5; id <= 8; ++id)
    EXPECT_EQ(p.a->post_send(p.request(SendOp::write, id, id * 100, 10)), PostResult::ok);
  EXPECT_EQ(p.a->post_send(p.request(SendOp::write, 9, 900, 10)), PostResult::queue_full);
  EXPECT_EQ(p.a->counters().posts_refused_queue_full, 3u);
}

// A receiver whose completion queue is full cannot post receives; SENDs
// that find none are RNR NAKed (not placed, nothing lost) and land once the
// application has polled its completions and posted again. The receiver
// stops accepting new messages instead of losing a completion.
TEST_P(Exhaustion, ReceiverWithAFullCompletionQueueRnrNaksUntilItPolls) {
  ConnectionConfig c = config();
  c.rnr_delay = 30'000;
  ConnectionPair p(c, [](ConnectionConfig& b) { b.completion_queue_depth = 2; });
  ASSERT_EQ(p.b->post_receive(p.receive(100, 0, 64)), PostResult::ok);
  ASSERT_EQ(p.b->post_receive(p.receive(101, 64, 64)), PostResult::ok);
  EXPECT_EQ(p.b->post_receive(p.receive(102, 128, 64)), PostResult::queue_full);
  for (std::uint64_t id = 1; id <= 3; ++id)
    ASSERT_EQ(p.a->post_send(p.request(SendOp::send, id, id * 1000, 50)), PostResult::ok);
  ConnectionPair::deliver_all(*p.b, 2000, p.drain(*p.a, 1000));
  EXPECT_EQ(p.b->counters().receive_completions, 2u);
  EXPECT_EQ(p.b->counters().rnr_naks_sent, 1u);
  EXPECT_EQ(p.b->post_receive(p.receive(102, 128, 64)), PostResult::queue_full);  // still unpolled
  EXPECT_EQ(p.b->counters().posts_refused_queue_full, 2u);
  ConnectionPair::deliver_all(*p.a, 3000, p.drain(*p.b, 2000));
  EXPECT_EQ(p.a->counters().rnr_naks_received, 1u);

  std::vector<Completion> rx = ConnectionPair::completions(*p.b);
  ASSERT_EQ(p.b->post_receive(p.receive(102, 128, 64)), PostResult::ok);
  EXPECT_EQ(*p.dst_at(128), 0) << "the third SEND was not placed while it had no receive";
  const timer::Tick wake = p.wheel_a.next_deadline();
  ASSERT_NE(wake, timer::kNever);
  EXPECT_GE(wake, 3000 + c.rnr_delay);
  const Frames resent = p.drain(*p.a, wake);
  ASSERT_GE(resent.size(), 1u);
  ConnectionPair::deliver_all(*p.b, wake, resent);
  ConnectionPair::deliver_all(*p.a, wake, p.drain(*p.b, wake));
  const auto more = ConnectionPair::completions(*p.b);
  rx.insert(rx.end(), more.begin(), more.end());
  ASSERT_EQ(rx.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rx[i].wr_id, 100 + i);
    EXPECT_EQ(rx[i].status, CompletionStatus::success);
    EXPECT_EQ(rx[i].byte_len, 50u);
    EXPECT_EQ(std::memcmp(p.dst_at(64 * i), p.src.data() + 1000 * (i + 1), 50), 0) << "receive " << i;
  }
  const auto tx = ConnectionPair::completions(*p.a);
  ASSERT_EQ(tx.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(tx[i].wr_id, i + 1);
    EXPECT_EQ(tx[i].status, CompletionStatus::success);
  }
  EXPECT_EQ(p.a->state(), ConnectionState::ready);
  EXPECT_EQ(p.b->state(), ConnectionState::ready);
}

// The retransmission state is the PSN window: psn_window packets sent and
// not acknowledged. When it is full nothing new is sent, the messages wait
// whole in the send queue, and they all go once ACKs free it.
TEST_P(Exhaustion, FullPsnWindowHoldsNewPacketsBackAndLosesNothing) {
  ConnectionConfig c = config();
  c.psn_window = 64;
  c.completion_queue_depth = 80;
  ConnectionPair p(c);
  for (std::uint64_t id = 0; id < 80; ++id)
    ASSERT_EQ(p.a->post_send(p.request(SendOp::write, id, id * 200, 100, static_cast<std::uint16_t>(id % 2))),
              PostResult::ok);
  EXPECT_EQ(p.a->post_send(p.request(SendOp::write, 80, 0, 1)), PostResult::queue_full);
  Frames first;
  for (int i = 0; i < 4; ++i) {  // poll several times: the window stays shut
    const Frames f = p.drain(*p.a, 1000);
    first.insert(first.end(), f.begin(), f.end());
  }
  ASSERT_EQ(first.size(), 64u);
  EXPECT_EQ(p.a->packets_outstanding(), 64u);
  EXPECT_EQ(p.a->counters().data_packets_sent, 64u);
  ConnectionPair::deliver_all(*p.b, 2000, first);
  ConnectionPair::deliver_all(*p.a, 3000, p.drain(*p.b, 2000));
  const Frames rest = p.drain(*p.a, 3000);
  ASSERT_EQ(rest.size(), 16u);
  for (std::size_t i = 0; i < rest.size(); ++i)
    EXPECT_EQ(ConnectionPair::parse(rest[i]).bth.psn, (ConnectionPair::first_psn_a + 64 + i) & wire::psn_mask);
  ConnectionPair::deliver_all(*p.b, 4000, rest);
  ConnectionPair::deliver_all(*p.a, 5000, p.drain(*p.b, 4000));
  const auto done = ConnectionPair::completions(*p.a);
  ASSERT_EQ(done.size(), 80u);
  std::map<std::uint16_t, std::uint64_t> next_in_stream = {{0, 0}, {1, 1}};
  for (const Completion& d : done) {
    EXPECT_EQ(d.status, CompletionStatus::success);
    EXPECT_EQ(d.wr_id, next_in_stream[d.stream]) << "in order per stream";
    next_in_stream[d.stream] += 2;
  }
  for (std::uint64_t id = 0; id < 80; ++id)
    ASSERT_EQ(std::memcmp(p.dst_at(id * 200), p.src.data() + id * 200, 100), 0) << "message " << id;
  EXPECT_EQ(p.a->counters().retransmitted_packets, 0u);
  EXPECT_TRUE(p.guards_intact());
}

// A peer that never answers: timeouts until retry_exceeded, then every
// outstanding work request, sends of both streams and posted receives,
// completes exactly once (the one that exhausted its retries with
// retry_exceeded, every other flushed, in order per stream), the connection
// is in ERROR, and nothing of it is left: no timer, no packet in flight,
// nothing more sent, posts refused.
TEST_P(Exhaustion, PeerThatNeverAcksFailsEveryWorkRequestOnce) {
  ConnectionConfig c = config();
  c.retry_limit = 3;
  ConnectionPair p(c);
  // A's own receives, in the top of its source region.
  ASSERT_EQ(p.a->post_receive(ReceiveRequest{100, 0, p.src.data() + 60'000, 64, p.src_key}), PostResult::ok);
  ASSERT_EQ(p.a->post_receive(ReceiveRequest{101, 1, p.src.data() + 61'000, 64, p.src_key}), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 2 * mtu() - 10, 0)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::send, 2, 4096, 100, 1)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write_imm, 3, 8192, 50, 0)), PostResult::ok);
  std::uint64_t sent = p.drain(*p.a, 0).size();
  EXPECT_EQ(sent, 4u);
  Time now = 0;
  for (int turn = 0; turn < 100'000 && p.a->state() == ConnectionState::ready; ++turn) {
    now = p.wheel_a.next_deadline();
    ASSERT_NE(now, timer::kNever) << "the connection stopped trying before giving up";
    sent += p.drain(*p.a, now).size();  // nothing ever reaches B
  }
  ASSERT_EQ(p.a->state(), ConnectionState::error);
  EXPECT_EQ(p.a->state_transitions(ConnectionState::error), 1u);
  EXPECT_LT(now, 60'000'000'000u) << "gave up within a minute of virtual time";
  const auto done = ConnectionPair::completions(*p.a);
  expect_each_once(done, {1, 2, 3, 100, 101});
  // rocev2 fails the oldest unacknowledged message and flushes the rest in
  // post order, then the receives; metaroce completes the culprit's stream
  // up to it, then flushes stream by stream (sends, then receives).
  const std::vector<std::uint64_t> order =
      rocev2() ? std::vector<std::uint64_t>{1, 2, 3, 100, 101} : std::vector<std::uint64_t>{1, 3, 100, 2, 101};
  ASSERT_EQ(done.size(), order.size());
  for (std::size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(done[i].wr_id, order[i]) << "completion " << i;
    EXPECT_EQ(done[i].status, i == 0 ? CompletionStatus::retry_exceeded : CompletionStatus::flushed)
        << "completion " << i;
  }
  EXPECT_EQ(p.a->counters().send_completions, 3u);
  EXPECT_EQ(p.a->counters().receive_completions, 2u);
  EXPECT_GT(p.a->counters().rto_timeouts, c.retry_limit);
  EXPECT_EQ(p.a->counters().data_packets_sent, 4u);
  if (rocev2()) {
    EXPECT_EQ(p.a->counters().rto_timeouts, c.retry_limit + 1);
    EXPECT_EQ(p.a->counters().retransmitted_packets, 4u * c.retry_limit);  // go back N: all four per retry
    EXPECT_EQ(sent, 4u + 4u * c.retry_limit);
  } else {
    EXPECT_EQ(p.a->counters().paths_failed, 2u);
    EXPECT_EQ(sent, 4u + p.a->counters().retransmitted_packets + p.a->counters().probes_sent);
  }
  EXPECT_EQ(p.a->packets_outstanding(), 0u);
  EXPECT_EQ(p.wheel_a.next_deadline(), timer::kNever) << "a timer outlived the connection's failure";
  EXPECT_TRUE(p.drain(*p.a, now + 10'000'000'000).empty());
  EXPECT_TRUE(ConnectionPair::completions(*p.a).empty());
  EXPECT_EQ(p.a->post_send(p.request(SendOp::write, 4, 0, 1)), PostResult::not_ready);
  EXPECT_EQ(p.a->post_receive(ReceiveRequest{102, 0, p.src.data() + 60'000, 1, p.src_key}), PostResult::not_ready);
}

// A peer that never posts receives: each try of the SEND is RNR NAKed, the
// requester waits rnr_delay and tries again, and after rnr_retry_limit
// retries the SEND completes rnr_retry_exceeded and the requester goes to
// ERROR (the responder stays READY: RNR is not an error there). The WRITE
// posted behind it on the same stream is flushed: nothing completes out of
// order after an error. (metaroce placed and acknowledged it, as it places
// every packet on arrival; rocev2 dropped it behind the NAKed SEND.)
TEST_P(Exhaustion, PeerThatNeverPostsReceivesEndsInRnrRetryExceeded) {
  ConnectionConfig c = config();
  c.rnr_retry_limit = 2;
  c.rnr_delay = 20'000;
  ConnectionPair p(c);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::send, 1, 0, 100, 1)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 2, 4096, 100, 1)), PostResult::ok);
  Time now = 1000;
  std::uint64_t rounds = 0;
  std::uint64_t naks = 0;
  while (p.a->state() == ConnectionState::ready && rounds < 20) {
    const Frames data = p.drain(*p.a, now);
    ASSERT_FALSE(data.empty()) << "round " << rounds;
    ConnectionPair::deliver_all(*p.b, now, data);
    const Frames answers = p.drain(*p.b, now);
    for (const auto& f : answers) {
      const wire::ParsedFrame a = ConnectionPair::parse(f);
      const std::uint8_t syndrome = rocev2() ? a.aeth.syndrome : a.mr_ack.syndrome;
      if (wire::ack_kind(syndrome) == wire::AckKind::rnr_nak) ++naks;
    }
    ConnectionPair::deliver_all(*p.a, now, answers);
    ++rounds;
    now = std::max<Time>(now + 1, p.wheel_a.next_deadline() == timer::kNever ? now + 1 : p.wheel_a.next_deadline());
  }
  EXPECT_EQ(rounds, c.rnr_retry_limit + 1);  // the first try and rnr_retry_limit retries
  EXPECT_EQ(naks, c.rnr_retry_limit + 1);
  EXPECT_EQ(p.b->counters().rnr_naks_sent, c.rnr_retry_limit + 1);
  EXPECT_EQ(p.a->counters().rnr_naks_received, c.rnr_retry_limit + 1);
  EXPECT_EQ(p.a->state(), ConnectionState::error);
  EXPECT_EQ(p.b->state(), ConnectionState::ready);
  if (rocev2()) {
    EXPECT_EQ(*p.dst_at(4096), 0);
    EXPECT_EQ(p.b->counters().data_packets_received, 0u);
  } else {
    EXPECT_EQ(std::memcmp(p.dst_at(4096), p.src.data() + 4096, 100), 0);
    EXPECT_EQ(p.b->counters().data_packets_received, 1u);
  }
  const auto tx = ConnectionPair::completions(*p.a);
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].wr_id, 1u);
  EXPECT_EQ(tx[0].status, CompletionStatus::rnr_retry_exceeded);
  EXPECT_EQ(tx[1].wr_id, 2u);
  EXPECT_EQ(tx[1].status, CompletionStatus::flushed);
  EXPECT_EQ(p.wheel_a.next_deadline(), timer::kNever);
  EXPECT_TRUE(p.drain(*p.a, now + 1'000'000'000).empty());
}

TEST_P(Exhaustion, CompletionQueueDepthZeroIsRefusedWithAReason) {
  ConnectionConfig c = config();
  c.completion_queue_depth = 0;
  EXPECT_EQ(validate(c), "completion_queue_depth must be at least 1");
}

INSTANTIATE_TEST_SUITE_P(Transport, Exhaustion, ::testing::Values(Mode::metaroce, Mode::rocev2),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
