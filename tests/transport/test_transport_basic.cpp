// Transport core over the simulator: single operations with exact outcomes,
// then verified bulk transfers under each impairment.
#include <functional>

#include <gtest/gtest.h>

#include "transfer_harness.hpp"

namespace {

using metaroce::test::run_transfer;
using metaroce::test::TransferSpec;

TransferSpec small(std::size_t messages, std::uint64_t max_message) {
  TransferSpec s;
  s.messages = messages;
  s.max_message = max_message;
  s.forward.delay_ns = 5'000;
  s.backward.delay_ns = 5'000;
  return s;
}

TEST(TransportSim, CleanNetworkSmallTransfer) {
  TransferSpec s = small(200, 64 * 1024);
  const auto r = run_transfer(s);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.messages_completed, 200u);
  EXPECT_EQ(r.sender.retransmitted_packets, 0u);
  EXPECT_EQ(r.sender.spurious_retransmissions, 0u);
  EXPECT_EQ(r.receiver.duplicate_packets, 0u);
  EXPECT_EQ(r.data_frames_delivered, r.data_frames_sent);
}

}  // namespace

