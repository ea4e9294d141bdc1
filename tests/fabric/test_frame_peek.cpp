// Frame peeking, CE marking, the path hash, corruption.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>

#include "fabric/frame_peek.hpp"
#include "fabric/random.hpp"
#include "test_frames.hpp"
#include "wire/frame.hpp"
#include "wire_samples.hpp"

namespace metaroce::fabric {
namespace {

using test::make_frame;
using test::TestFrame;

TEST(FramePeek, FindsPortsAndEcnOfIpv4Ipv6AndVlanFrames) {
  for (int ip : {4, 6}) {
    for (bool vlan : {false, true}) {
      const auto frame = make_frame(TestFrame{50000, 7, 64, ip, ecn::ect1, vlan});
      const FramePeek peek = peek_frame(frame);
      EXPECT_EQ(peek.ip_version, ip);
      EXPECT_EQ(peek.l3_offset, vlan ? 18 : 14);
      EXPECT_EQ(peek.l4_offset, peek.l3_offset + (ip == 4 ? 20 : 40));
      EXPECT_TRUE(peek.udp);
      EXPECT_TRUE(peek.roce);
      EXPECT_EQ(peek.udp_src_port, 50000);
      EXPECT_EQ(peek.ecn, ecn::ect1);
      EXPECT_TRUE(peek.ect());
    }
  }
}

TEST(FramePeek, NonRoceFrames) {
  auto frame = make_frame(50000, 1);
  frame[14 + 20 + 3] = 53;  // UDP destination port 53
  FramePeek peek = peek_frame(frame);
  EXPECT_TRUE(peek.udp);
  EXPECT_FALSE(peek.roce);
  frame[12] = 0x08;  // ARP
  frame[13] = 0x06;
  peek = peek_frame(frame);
  EXPECT_EQ(peek.ip_version, 0);
  EXPECT_FALSE(peek.udp);
  EXPECT_EQ(peek_frame(std::span<const std::uint8_t>(frame.data(), 10)).l3_offset, 0);
  EXPECT_FALSE(peek_frame(std::span<const std::uint8_t>(frame.data(), 30)).udp);  // truncated IPv4
}

TEST(FramePeek, CeMarkKeepsIcrcAndIpv4ChecksumValid) {
  std::size_t checked = 0;
  for (std::vector<std::uint8_t> frame : test::sample_frames()) {
    const FramePeek peek = peek_frame(frame);
    ASSERT_TRUE(set_ecn_ce(frame, peek));
    wire::ParsedFrame parsed;
    ASSERT_EQ(wire::parse_frame(frame, parsed), wire::ParseError::ok);
    EXPECT_EQ(parsed.ecn(), ecn::ce);
    ++checked;
  }
  EXPECT_GT(checked, 40u);
}

TEST(FramePeek, CeMarkUpdatesTheChecksumIncrementallySoEarlierDamageStaysVisible) {
  auto frame = make_frame(50000, 1);
  frame[14 + 8] ^= 0x01;  // TTL: masked by the ICRC, covered by the IP checksum only
  ASSERT_TRUE(set_ecn_ce(frame, peek_frame(frame)));
  wire::ParsedFrame parsed;
  EXPECT_EQ(wire::parse_frame(frame, parsed), wire::ParseError::bad_ip_checksum);
}

TEST(PathHash, MatchesTheDocumentedFormula) {
  for (std::uint32_t paths : {1u, 2u, 3u, 8u, 64u, 256u}) {
    for (std::uint32_t port = 0; port < 65536; port += 97) {
      const std::uint32_t h = port * 0x9E3779B1u;
      const auto expected = static_cast<std::uint32_t>((std::uint64_t{h >> 16} * paths) >> 16);
      EXPECT_EQ(path_of_port(static_cast<std::uint16_t>(port), paths), expected);
      EXPECT_LT(expected, paths);
    }
  }
  static_assert(path_of_port(1234, 1) == 0);
}

TEST(PathHash, SpreadsConsecutivePortsEvenly) {
  std::array<int, 8> per_path{};
  for (std::uint32_t port = 49152; port < 49152 + 8000; ++port) ++per_path[path_of_port(static_cast<std::uint16_t>(port), 8)];
  for (int count : per_path) {
    EXPECT_GT(count, 900);
    EXPECT_LT(count, 1100);
  }
  // Eight consecutive ports already reach several paths.
  std::array<bool, 8> hit{};
  for (std::uint32_t port = 49152; port < 49160; ++port) hit[path_of_port(static_cast<std::uint16_t>(port), 8)] = true;
  EXPECT_GE(std::count(hit.begin(), hit.end(), true), 5);
}

TEST(Corruption, EveryFlippedFrameFailsParsing) {
  Random random(99);
  std::map<wire::ParseError, int> reasons;
  int flips = 0;
  for (const std::vector<std::uint8_t>& original : test::sample_frames()) {
    for (int i = 0; i < 200; ++i) {
      std::vector<std::uint8_t> frame = original;
      ASSERT_TRUE(flip_random_bit(frame, peek_frame(frame), random));
      ASSERT_NE(frame, original);
      EXPECT_TRUE(std::equal(frame.begin(), frame.begin() + 14, original.begin()));  // Ethernet untouched
      wire::ParsedFrame parsed;
      const wire::ParseError error = wire::parse_frame(frame, parsed);
      ASSERT_NE(error, wire::ParseError::ok) << "flip not detected";
      ++reasons[error];
      ++flips;
    }
  }
  // Most bytes are only covered by the ICRC; IPv4 header bytes by the checksum.
  EXPECT_GT(reasons[wire::ParseError::bad_icrc], flips / 2);
  EXPECT_GT(reasons[wire::ParseError::bad_ip_checksum], 0);
}

}  // namespace
}  // namespace metaroce::fabric
