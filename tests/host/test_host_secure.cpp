// What a host checks of a frame for a secure connection: its tag, not its
// ICRC. The tag covers every byte from the BTH to the trailer, so a frame
// whose ICRC alone is wrong is placed, one whose region is damaged is
// dropped as secure_bad_tag (never bad_icrc), and a frame of a plain
// connection on the same host still has its ICRC checked.
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "host/host.hpp"
#include "host_test_support.hpp"
#include "wire/frame.hpp"

namespace metaroce::test {
namespace {

using transport::Connection;
using transport::PostResult;
using transport::SendOp;

using Frame = std::vector<std::uint8_t>;

Connection& add(host::Host& h, const transport::ConnectionConfig& config) { return add_connected(h, config); }

transport::SecurityConfig keys(bool a_side) {
  transport::SecurityConfig s;
  s.enabled = true;
  s.protection = secure::Protection::auth_only;
  for (std::size_t i = 0; i < s.tx_key.size(); ++i) {
    const auto ab = static_cast<std::uint8_t>(i * 7 + 1);
    const auto ba = static_cast<std::uint8_t>(i * 11 + 3);
    s.tx_key[i] = a_side ? ab : ba;
    s.rx_key[i] = a_side ? ba : ab;
  }
  s.tx_spi = a_side ? 0xa0000001u : 0xb0000001u;
  s.rx_spi = a_side ? 0xb0000001u : 0xa0000001u;
  return s;
}

TEST(HostSecure, SecureFramesAreCheckedByTheirTagPlainOnesByTheirIcrc) {
  host::Host a(host::HostConfig{.name = "A"});
  host::Host b(host::HostConfig{.name = "B"});
  transport::ConnectionConfig base;
  base.paths = 4;
  base.mtu = 1024;
  // Pair 0 secure, pair 1 plain, on the same two hosts.
  Connection& secure_a = add(a, pair_end(base, 0, true));
  add(b, pair_end(base, 0, false));
  Connection& plain_a = add(a, pair_end(base, 1, true));
  Connection& plain_b = add(b, pair_end(base, 1, false));
  std::string error;
  ASSERT_TRUE(a.set_security(a_qpn(0), keys(true), error)) << error;
  ASSERT_TRUE(b.set_security(b_qpn(0), keys(false), error)) << error;
  Connection& secure_b = *b.connection(b_qpn(0));

  std::vector<std::uint8_t> src(300), dst(300, 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 13 + 5);
  const std::uint32_t lkey = a.memory().register_region(src.data(), src.size(), transport::access_local_write);
  const std::uint32_t rkey =
      b.memory().register_region(dst.data(), dst.size(), transport::access_local_write | transport::access_remote_write);
  // One 100-byte WRITE per connection and slot: slot k is bytes 100k..100k+99.
  const auto write = [&](Connection& c, std::uint64_t slot) {
    transport::SendRequest r;
    r.wr_id = slot;
    r.op = SendOp::write;
    r.local_addr = src.data() + 100 * slot;
    r.length = 100;
    r.lkey = lkey;
    r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + 100 * slot);
    r.rkey = rkey;
    ASSERT_EQ(c.post_send(r), PostResult::ok);
  };
  CountedSink sink(64);
  std::uint64_t now = 1'000;
  write(secure_a, 0);
  write(secure_a, 1);
  write(plain_a, 2);
  a.transmit(now, sink);
  const auto frames = sink.take_frames();
  ASSERT_EQ(frames.size(), 3u);
  // Which frame is whose: the destination QP.
  std::vector<Frame> secure_frames;
  Frame plain_frame;
  for (const Frame& f : frames) {
    std::uint32_t qpn = 0;
    ASSERT_TRUE(wire::peek_dest_qp(f, qpn));
    if (qpn == b_qpn(0)) secure_frames.push_back(f);
    else plain_frame = f;
  }
  ASSERT_EQ(secure_frames.size(), 2u);
  ASSERT_FALSE(plain_frame.empty());
  const auto bad_icrc = [&] {
    return b.counters().rx_parse_errors[static_cast<std::size_t>(wire::ParseError::bad_icrc)];
  };

  // The first secure frame with its ICRC wrong: placed, its tag good.
  Frame icrc_only = secure_frames[0];
  icrc_only[icrc_only.size() - 1] ^= 0x5a;
  b.receive(now, icrc_only);
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), 100), 0);
  EXPECT_EQ(secure_b.counters().secure_frames_opened, 1u);
  EXPECT_EQ(secure_b.counters().data_packets_received, 1u);
  EXPECT_EQ(bad_icrc(), 0u);

  // The second with a payload byte changed and its ICRC left wrong: the
  // tag catches it, nothing placed; the real frame then is.
  Frame damaged = secure_frames[1];
  damaged[damaged.size() - wire::icrc_size - wire::secure_trailer_size - 10] ^= 0x01;
  b.receive(now, damaged);
  EXPECT_EQ(secure_b.counters().secure_bad_tag, 1u);
  EXPECT_EQ(secure_b.counters().data_packets_received, 1u);
  EXPECT_EQ(bad_icrc(), 0u);
  EXPECT_EQ(std::vector<std::uint8_t>(dst.begin() + 100, dst.begin() + 200), std::vector<std::uint8_t>(100, 0));
  b.receive(now, secure_frames[1]);
  EXPECT_EQ(std::memcmp(dst.data() + 100, src.data() + 100, 100), 0);
  EXPECT_EQ(secure_b.counters().secure_frames_opened, 2u);

  // The plain connection's frame with its ICRC wrong: dropped as bad_icrc.
  Frame plain_icrc = plain_frame;
  plain_icrc[plain_icrc.size() - 1] ^= 0x5a;
  b.receive(now, plain_icrc);
  EXPECT_EQ(bad_icrc(), 1u);
  EXPECT_EQ(plain_b.counters().data_packets_received, 0u);
  EXPECT_EQ(std::vector<std::uint8_t>(dst.begin() + 200, dst.end()), std::vector<std::uint8_t>(100, 0));
  b.receive(now, plain_frame);
  EXPECT_EQ(std::memcmp(dst.data() + 200, src.data() + 200, 100), 0);
  EXPECT_EQ(plain_b.counters().data_packets_received, 1u);
  EXPECT_EQ(b.counters().rx_parse_errors_total(), 1u);
}

}  // namespace
}  // namespace metaroce::test
