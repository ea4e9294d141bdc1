// The transport under lib/cc's algorithms through a real bottleneck: a
// 40 Gb/s queue behind 100 Gb/s NICs, with a tail-drop limit and ECN marks.
#include <cstdio>

#include <gtest/gtest.h>

#include "transfer_harness.hpp"

namespace {

using metaroce::test::run_transfer;
using metaroce::test::TransferResult;
using metaroce::test::TransferSpec;

std::size_t message_count() {
#if defined(__SANITIZE_ADDRESS__)
  return 300;
#else
  return 2'000;
#endif
}

TransferSpec bottleneck(const char* cc) {
  TransferSpec s;
  s.messages = message_count();
  s.max_message = 1u << 20;
  s.seed = 21;
  s.cc = cc;
  for (auto* f : {&s.forward, &s.backward}) {
    f->delay_ns = 5'000;
    f->paths = 8;
  }
  s.forward.rate_bps = 40'000'000'000;
  s.forward.limit_bytes = 300'000;
  s.forward.ecn = {true, 60'000, 60'000, 1.0};
  // Windows far above the bandwidth-delay product: only the algorithm can
  // keep the queue from overflowing.
  s.fixed_path_window = 64;
  s.fixed_connection_window = 512;
  return s;
}

void report(const char* name, const TransferResult& r) {
  std::printf("[%s] %.2f ms, %llu tail drops, %llu ECN marks, %llu retransmitted\n", name,
              static_cast<double>(r.virtual_ns) / 1e6,
              static_cast<unsigned long long>(r.forward_counters.dropped_queue_full),
              static_cast<unsigned long long>(r.forward_counters.ecn_marked),
              static_cast<unsigned long long>(r.sender.retransmitted_packets));
}

TEST(TransportCc, WithoutControlLargeWindowsOverflowTheQueue) {
  const TransferSpec s = bottleneck("fixed");
  const TransferResult r = run_transfer(s);
  report("fixed 64/512", r);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_GT(r.forward_counters.dropped_queue_full, 0u);  // the bottleneck is real
}

TEST(TransportCc, MetaroceEcnAimdKeepsTheQueueBelowItsLimit) {
  const TransferSpec s = bottleneck("metaroce");
  const TransferResult r = run_transfer(s);
  report("metaroce", r);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.messages_completed, s.messages);
  EXPECT_GT(r.forward_counters.ecn_marked, 0u);
  EXPECT_EQ(r.forward_counters.dropped_queue_full, 0u);
  EXPECT_EQ(r.sender.retransmitted_packets, 0u);
  // Goodput stays near the bottleneck: no more than 15% above the time the
  // bytes need at 40 Gb/s (headers and wire overhead are about 3%).
  const double ideal_ns = static_cast<double>(r.bytes_verified) * 8 / 40.0;
  EXPECT_LT(static_cast<double>(r.virtual_ns), ideal_ns * 1.15);
}

TEST(TransportCc, MetaroceFairShareHintPacesTheSender) {
  TransferSpec s = bottleneck("metaroce");
  s.receive_capacity_bps = 38'000'000'000;  // the receiver knows its share of the 40G port
  const TransferResult r = run_transfer(s);
  report("metaroce + hint", r);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.forward_counters.dropped_queue_full, 0u);
  // Paced just under the bottleneck, the queue hardly forms: far fewer marks.
  const TransferResult unhinted = run_transfer(bottleneck("metaroce"));
  EXPECT_LT(r.forward_counters.ecn_marked * 4, unhinted.forward_counters.ecn_marked);
}

TEST(TransportCc, RandomLossDoesNotSlowMetaroceDown) {
  TransferSpec s = bottleneck("metaroce");
  s.forward.loss = 0.01;
  const TransferResult lossy = run_transfer(s);
  const TransferResult clean = run_transfer(bottleneck("metaroce"));
  report("metaroce, 1% loss", lossy);
  ASSERT_TRUE(lossy.error.empty()) << lossy.error;
  // Same messages; 1% lost and resent: at most a few % slower.
  EXPECT_LT(static_cast<double>(lossy.virtual_ns), static_cast<double>(clean.virtual_ns) * 1.05);
}

TEST(TransportCc, DcqcnNotificationPointAndReactionPoint) {
  TransferSpec s = bottleneck("dcqcn");
  s.base.mode = metaroce::transport::Mode::rocev2;
  s.paths = 1;
  const TransferResult r = run_transfer(s);
  report("dcqcn", r);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_GT(r.receiver.cnps_sent, 0u);
  EXPECT_EQ(r.sender.cnp_received, r.receiver.cnps_sent - r.backward_counters.dropped());
  EXPECT_LE(r.receiver.cnps_sent, r.forward_counters.ecn_marked);
  // It starts at line rate, so the first round overflows the queue before
  // the first CNP; the rate then comes down below the bottleneck.
  EXPECT_LT(r.forward_counters.dropped_queue_full, 100u);
}

}  // namespace
