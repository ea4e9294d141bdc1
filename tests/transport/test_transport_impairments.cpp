// Verified transfers through each impairment alone and all mixed: 10,000
// messages of 1 B .. 1 MiB on 4 streams mixing WRITE, WRITE_IMM and SEND.
// The harness checks every byte, every completion (once, in order per
// stream), canaries and window limits; each test adds the exact counter
// relations that impairment implies.
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "transfer_harness.hpp"

namespace {

using metaroce::test::run_transfer;
using metaroce::test::TransferResult;
using metaroce::test::TransferSpec;

// Sanitizer builds run a tenth of the messages: same code paths, 10x the cost.
std::size_t message_count() {
#if defined(__SANITIZE_ADDRESS__)
  return 1'000;
#else
  return 10'000;
#endif
}

TransferSpec base_spec(std::uint64_t seed) {
  TransferSpec s;
  s.messages = message_count();
  s.max_message = 1u << 20;
  s.streams = 4;
  s.paths = 8;
  s.seed = seed;
  s.forward.delay_ns = 5'000;
  s.backward.delay_ns = 5'000;
  s.forward.paths = 8;
  s.backward.paths = 8;
  s.forward.seed = seed * 3 + 1;
  s.backward.seed = seed * 3 + 2;
  return s;
}

void report(const char* name, const TransferResult& r) {
  std::printf("[%s] %.2f ms virtual, %.1f MB verified, data sent %llu (+%llu retransmitted, %llu spurious), "
              "probes %llu, rto %llu, paths failed %llu, duplicates dropped %llu\n",
              name, static_cast<double>(r.virtual_ns) / 1e6, static_cast<double>(r.bytes_verified) / 1e6,
              static_cast<unsigned long long>(r.sender.data_packets_sent),
              static_cast<unsigned long long>(r.sender.retransmitted_packets),
              static_cast<unsigned long long>(r.receiver.spurious_retransmissions),
              static_cast<unsigned long long>(r.sender.probes_sent),
              static_cast<unsigned long long>(r.sender.rto_timeouts),
              static_cast<unsigned long long>(r.sender.paths_failed),
              static_cast<unsigned long long>(r.receiver.duplicate_packets));
}

void expect_verified(const TransferResult& r, std::size_t messages) {
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.messages_completed, messages);
  EXPECT_LE(r.max_path_in_flight, 16u);
  EXPECT_LE(r.max_outstanding_psns, 96u);
}

TEST(TransportImpairments, CleanNetwork) {
  const TransferSpec s = base_spec(1);
  const TransferResult r = run_transfer(s);
  report("clean", r);
  expect_verified(r, s.messages);
  EXPECT_EQ(r.sender.retransmitted_packets, 0u);
  EXPECT_EQ(r.sender.probes_sent, 0u);
  EXPECT_EQ(r.data_frames_delivered, r.data_frames_sent);
  EXPECT_EQ(r.receiver.duplicate_packets, 0u);
}

TEST(TransportImpairments, RandomLossRetransmitsExactlyTheLostPackets) {
  TransferSpec s = base_spec(2);
  s.forward.loss = 0.01;
  const TransferResult r = run_transfer(s);
  report("loss 1%", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.data_frames_lost(), 0u);
  EXPECT_EQ(r.sender.retransmitted_packets, r.data_frames_lost());  // lost retransmissions included
  EXPECT_EQ(r.receiver.spurious_retransmissions, 0u);
  EXPECT_EQ(r.receiver.duplicate_packets, 0u);
}

TEST(TransportImpairments, LossBothWaysStillNoSpuriousRetransmission) {
  TransferSpec s = base_spec(3);
  s.forward.loss = 0.02;
  s.backward.loss = 0.02;
  const TransferResult r = run_transfer(s);
  report("loss 2% both ways", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.backward_counters.dropped_random_loss, 0u);
  EXPECT_EQ(r.sender.retransmitted_packets, r.data_frames_lost());
  EXPECT_EQ(r.receiver.spurious_retransmissions, 0u);
}

TEST(TransportImpairments, BurstLoss) {
  TransferSpec s = base_spec(4);
  s.forward.gemodel = {0.002, 0.25, 0.8, 0.0};  // bursts of ~4 frames, ~0.6% lost
  const TransferResult r = run_transfer(s);
  report("gemodel", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.forward_counters.dropped_burst_loss, 0u);
  EXPECT_EQ(r.sender.retransmitted_packets, r.data_frames_lost());
  EXPECT_EQ(r.receiver.spurious_retransmissions, 0u);
}

TEST(TransportImpairments, DuplicationIsDroppedByPsn) {
  TransferSpec s = base_spec(5);
  s.forward.duplicate = 0.05;
  s.backward.duplicate = 0.05;
  const TransferResult r = run_transfer(s);
  report("duplicate 5%", r);
  expect_verified(r, s.messages);
  EXPECT_EQ(r.sender.retransmitted_packets, 0u);
  EXPECT_GT(r.forward_counters.duplicated, 0u);
  // Every extra copy of a data frame is dropped, none placed twice.
  EXPECT_EQ(r.receiver.data_packets_received, r.sender.data_packets_sent);
  EXPECT_EQ(r.receiver.duplicate_packets, r.data_frames_delivered - r.sender.data_packets_sent);
  EXPECT_EQ(r.receiver.spurious_retransmissions, 0u);
}

TEST(TransportImpairments, MultipathSpreadOfFourRttsCausesNoRetransmission) {
  TransferSpec s = base_spec(6);
  s.forward.spread_ns = 40'000;  // base RTT 10 us; paths differ by up to 4x it
  const TransferResult r = run_transfer(s);
  report("8 paths, spread 40 us", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.forward_counters.reordered, 0u);
  EXPECT_EQ(r.sender.retransmitted_packets, 0u);
  EXPECT_EQ(r.receiver.spurious_retransmissions, 0u);
}

TEST(TransportImpairments, JitterInsidePathsCausesNoRetransmission) {
  TransferSpec s = base_spec(7);
  s.forward.jitter_ns = 4'000;
  s.backward.jitter_ns = 4'000;
  const TransferResult r = run_transfer(s);
  report("jitter 4 us", r);
  expect_verified(r, s.messages);
  EXPECT_EQ(r.sender.retransmitted_packets, 0u);
}

TEST(TransportImpairments, RareReorderingInsideAPath) {
  TransferSpec s = base_spec(8);
  s.forward.reorder = 0.001;
  s.forward.reorder_gap_ns = 3'000;
  const TransferResult r = run_transfer(s);
  report("reorder in path 0.1%", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.forward_counters.reordered_in_path, 0u);
  // A packet overtaken inside its path looks lost: each such event may cost
  // one spurious retransmission, never more, and nothing else is resent.
  EXPECT_GT(r.receiver.spurious_retransmissions, 0u);
  EXPECT_LE(r.receiver.spurious_retransmissions, r.forward_counters.reordered_in_path);
  EXPECT_EQ(r.sender.retransmitted_packets, r.receiver.spurious_retransmissions);
}

TEST(TransportImpairments, CorruptFramesAreDroppedAndResent) {
  TransferSpec s = base_spec(9);
  s.forward.corrupt = 0.01;
  s.backward.corrupt = 0.01;
  const TransferResult r = run_transfer(s);
  report("corrupt 1%", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.forward_counters.corrupted, 0u);
  std::uint64_t rejected = 0;
  for (std::uint64_t n : r.receiver_parse_errors) rejected += n;
  EXPECT_EQ(rejected, r.forward_counters.corrupted);
  EXPECT_EQ(r.sender.retransmitted_packets, r.data_frames_lost());
  EXPECT_EQ(r.receiver.spurious_retransmissions, 0u);
}

TEST(TransportImpairments, BlackholedPathIsFailedAndReEntropied) {
  TransferSpec s = base_spec(10);
  // Fabric path 3 goes dark 2 ms in and never comes back.
  s.forward.blackholes.push_back({3, 2'000'000, metaroce::fabric::forever});
  const TransferResult r = run_transfer(s);
  report("blackhole path 3", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.forward_counters.dropped_blackhole, 0u);
  EXPECT_GE(r.sender.paths_failed, 1u);
  EXPECT_GE(r.sender.paths_recovered, 1u);
  std::uint64_t entropy_changes = 0;
  for (const auto& p : r.paths) entropy_changes += p.entropy_changes;
  EXPECT_EQ(entropy_changes, r.sender.paths_failed);
  for (const auto& p : r.paths) EXPECT_EQ(p.state, metaroce::transport::PathState::active);
}

TEST(TransportImpairments, BottleneckQueueWithEcnMarks) {
  TransferSpec s = base_spec(11);
  s.forward.rate_bps = 40'000'000'000;  // below the 100 Gb/s NIC: the queue fills
  s.forward.ecn = {true, 60'000, 60'000, 1.0};
  const TransferResult r = run_transfer(s);
  report("40 Gb/s bottleneck, ECN", r);
  expect_verified(r, s.messages);
  EXPECT_GT(r.forward_counters.ecn_marked, 0u);
  EXPECT_EQ(r.receiver.ecn_ce_received, r.forward_counters.ecn_marked);
  std::uint64_t marks_seen = 0;
  for (const auto& p : r.paths) marks_seen += p.ce_marks;
  EXPECT_EQ(marks_seen, r.forward_counters.ecn_marked);  // every mark reported back exactly once
}

TEST(TransportImpairments, EverythingAtOnce) {
  TransferSpec s = base_spec(12);
  for (auto* f : {&s.forward, &s.backward}) {
    f->loss = 0.01;
    f->gemodel = {0.001, 0.3, 0.7, 0.0};
    f->duplicate = 0.01;
    f->corrupt = 0.005;
    f->jitter_ns = 2'000;
    f->spread_ns = 20'000;
    f->reorder = 0.0005;
  }
  s.forward.blackholes.push_back({5, 3'000'000, 4'000'000});
  const TransferResult r = run_transfer(s);
  report("everything", r);
  expect_verified(r, s.messages);
  EXPECT_LE(r.receiver.spurious_retransmissions,
            r.forward_counters.reordered_in_path + r.forward_counters.dropped_blackhole);
}

}  // namespace
