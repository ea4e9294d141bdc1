// Transport core over the simulator: single operations with exact outcomes,
// then verified bulk transfers under each impairment.
#include <functional>

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

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


namespace {

// One WRITE of 1 GiB (the largest message the targets name; the wire's
// message length allows up to 4 GiB - 1), both modes, every byte compared.
TEST(TransportSim, OneGibibyteWrite) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "2 GiB of buffers and 262,144 packets: release builds only";
#else
  using namespace metaroce;
  constexpr std::uint64_t size = 1ull << 30;
  std::vector<std::uint64_t> src(size / 8), dst(size / 8, 0);
  for (std::uint64_t i = 0; i < src.size(); ++i) src[i] = i * 0x9e3779b97f4a7c15ull;
  for (transport::Mode mode : {transport::Mode::metaroce, transport::Mode::rocev2}) {
    std::fill(dst.begin(), dst.end(), 0);
    host::SimEndpoint a, b;
    transport::ConnectionConfig ca;
    ca.mode = mode;
    ca.paths = mode == transport::Mode::metaroce ? 8 : 1;
    ca.endpoints.local_ipv4 = 0x0a000001;
    ca.endpoints.peer_ipv4 = 0x0a000002;
    ca.local_qpn = 1;
    ca.peer_qpn = 2;
    transport::ConnectionConfig cb = ca;
    std::swap(cb.local_qpn, cb.peer_qpn);
    std::swap(cb.endpoints.local_ipv4, cb.endpoints.peer_ipv4);
    auto& sender = a.add(ca, std::make_unique<transport::FixedWindow>(16, 96));
    auto& receiver = b.add(cb, std::make_unique<transport::FixedWindow>(16, 96));
    sender.connect();
    receiver.connect();
    transport::SendRequest w;
    w.wr_id = 42;
    w.local_addr = reinterpret_cast<const std::uint8_t*>(src.data());
    w.length = size;
    w.lkey = a.memory().register_region(src.data(), size, transport::access_local_write);
    w.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
    w.rkey = b.memory().register_region(dst.data(), size, transport::access_remote_write);
    ASSERT_EQ(sender.post_send(w), transport::PostResult::ok);
    sim::Network net;
    fabric::FabricConfig link;
    link.delay_ns = 5'000;
    const auto ia = net.add(a, sim::HostConfig{{}, 100'000'000'000, 24});
    const auto ib = net.add(b, sim::HostConfig{{}, 100'000'000'000, 24});
    net.connect(ia, ib, link, link);
    std::vector<transport::Completion> cq;
    ASSERT_TRUE(net.run_until([&] { return sender.poll_completions(cq) > 0 || !cq.empty(); }, 1'000'000'000));
    ASSERT_EQ(cq.size(), 1u);
    EXPECT_EQ(cq[0].wr_id, 42u);
    EXPECT_EQ(cq[0].status, transport::CompletionStatus::success);
    EXPECT_EQ(cq[0].byte_len, size);
    EXPECT_EQ(receiver.counters().data_bytes_placed, size);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << transport::to_string(mode);
  }
#endif
}

}  // namespace
