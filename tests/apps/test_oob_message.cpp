// perftest's out-of-band exchange message (apps/common/oob_exchange.hpp,
// doc/WIRE.md "Out-of-band exchange"): the exact bytes, and what a bad one
// is told.
#include <gtest/gtest.h>

#include <string>

#include "common/oob_exchange.hpp"

namespace metaroce::apps {
namespace {

OobKeys example() {
  OobKeys k;
  k.out_reads = 16;
  k.qpn = 0x000111;
  k.psn = 0x654321;
  k.rkey = 0x00000101;
  k.vaddr = 0x00007f19acb81010;
  k.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 79, 0, 2};  // ::ffff:10.79.0.2
  return k;
}

TEST(OobMessage, IsPerftestsGidMessageByteForByte) {
  const std::string m = format_oob_message(example());
  ASSERT_EQ(m.size(), oob_message_size);
  EXPECT_EQ(m, std::string("0000:0010:000111:654321:00000101:00007f19acb81010:"
                           "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4f:00:02:00000000:") +
                   '\0');
  OobKeys back;
  std::string error;
  ASSERT_TRUE(parse_oob_message(m, back, error)) << error;
  EXPECT_EQ(back, example());
  EXPECT_EQ(gid_address(back.gid), "10.79.0.2");
}

TEST(OobMessage, FieldsAreMaskedToTheirWidths) {
  OobKeys k = example();
  k.qpn = 0xabcdef12;  // 24 bits on the wire
  const std::string m = format_oob_message(k);
  EXPECT_EQ(m.substr(10, 6), "cdef12");
}

TEST(OobMessage, BadMessagesAreRefusedSayingWhere) {
  OobKeys out;
  std::string error;
  EXPECT_FALSE(parse_oob_message("0000:0010", out, error));
  EXPECT_EQ(error, "an out-of-band message is 108 bytes ending in NUL, not 9");
  std::string m = format_oob_message(example());
  m[10] = 'g';  // the QPN
  EXPECT_FALSE(parse_oob_message(m, out, error));
  EXPECT_EQ(error, "out-of-band message field 3 (at byte 10) is not 6 hex digits and a ':'");
  m = format_oob_message(example());
  m[49] = '-';  // the ':' after VADDR
  EXPECT_FALSE(parse_oob_message(m, out, error));
  EXPECT_EQ(error, "out-of-band message field 6 (at byte 33) is not 16 hex digits and a ':'");
  m = format_oob_message(example());
  m.back() = ':';
  EXPECT_FALSE(parse_oob_message(m, out, error));
}

TEST(OobMessage, Ipv6GidsAndAddresses) {
  std::array<std::uint8_t, 16> g{0xfd, 0, 0, 0x77, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  EXPECT_EQ(gid_address(g), "fd00:77:1::2");
  std::string host;
  std::uint16_t port = 0;
  EXPECT_TRUE(split_host_port("10.80.0.2:18515", host, port));
  EXPECT_EQ(host, "10.80.0.2");
  EXPECT_EQ(port, 18515);
  EXPECT_TRUE(split_host_port("[fd00::2]:7", host, port));
  EXPECT_EQ(host, "fd00::2");
  EXPECT_EQ(port, 7);
  EXPECT_FALSE(split_host_port("10.80.0.2", host, port));
  EXPECT_FALSE(split_host_port("10.80.0.2:0", host, port));
  EXPECT_FALSE(split_host_port("10.80.0.2:65536", host, port));
  EXPECT_FALSE(split_host_port("10.80.0.2:1x", host, port));
}

}  // namespace
}  // namespace metaroce::apps
