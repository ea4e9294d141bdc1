// The switch's forwarding table: entries as users type them (and the
// errors for bad ones), and the address each kind of frame is forwarded by.
#include <array>
#include <string>

#include <gtest/gtest.h>

#include "fabric/forwarding_table.hpp"
#include "test_frames.hpp"
#include "wire/neighbour.hpp"

namespace metaroce::fabric {
namespace {

wire::IpAddress ip(const char* text) {
  wire::IpAddress a;
  EXPECT_TRUE(wire::parse_ip(text, a)) << text;
  return a;
}

TEST(ForwardingTable, EntriesFromTheCommandLineAndAFile) {
  ForwardingTable t(5);
  std::string error;
  ASSERT_TRUE(t.add("10.0.0.1=0", error)) << error;
  ASSERT_TRUE(t.add(" fd00::9 = 4 ", error)) << error;
  ASSERT_TRUE(t.add_lines("# the senders\n10.0.0.2=1\n\n10.0.0.3=2   # sender 2\r\n10.0.0.1=0\n", "routes.txt", error))
      << error;
  EXPECT_EQ(t.size(), 4u);  // the repeated 10.0.0.1=0 is the same route
  EXPECT_EQ(t.lookup(ip("10.0.0.1")), 0);
  EXPECT_EQ(t.lookup(ip("10.0.0.3")), 2);
  EXPECT_EQ(t.lookup(ip("fd00::9")), 4);
  EXPECT_EQ(t.lookup(ip("10.0.0.4")), std::nullopt);
  EXPECT_EQ(t.lookup(ip("::ffff:10.0.0.1")), std::nullopt);  // another family, another address
  ASSERT_EQ(t.routes().size(), 4u);
  EXPECT_EQ(t.routes()[1].address, ip("fd00::9"));
}

TEST(ForwardingTable, BadEntriesSayWhatToGive) {
  ForwardingTable t(3);
  std::string error;
  EXPECT_FALSE(t.add("10.0.0.1", error));
  EXPECT_EQ(error, "route '10.0.0.1' has no '=': give ADDRESS=PORT, such as 10.0.0.2=1 or fd00::2=1");
  EXPECT_FALSE(t.add("10.0.0.256=1", error));
  EXPECT_EQ(error, "route '10.0.0.256=1': '10.0.0.256' is not an IP address (give A.B.C.D or an IPv6 address such "
                   "as fd00::2)");
  EXPECT_FALSE(t.add("10.0.0.1=3", error));
  EXPECT_EQ(error, "route '10.0.0.1=3': port '3' is not one of this switch's: give 0..2");
  EXPECT_FALSE(t.add("10.0.0.1=", error));
  EXPECT_EQ(error, "route '10.0.0.1=': port '' is not one of this switch's: give 0..2");
  EXPECT_FALSE(t.add("10.0.0.1=-1", error));
  EXPECT_FALSE(t.add("10.0.0.1=1x", error));
  EXPECT_EQ(t.size(), 0u);
  ASSERT_TRUE(t.add("10.0.0.1=1", error));
  EXPECT_FALSE(t.add("10.0.0.1=2", error));
  EXPECT_EQ(error, "route 10.0.0.1=2: 10.0.0.1 already goes to port 1: give each address one port");
  EXPECT_FALSE(t.add_lines("10.0.0.5=0\n# fine\n10.0.0.6 2\n", "r.txt", error));
  EXPECT_EQ(error, "r.txt line 3: route '10.0.0.6 2' has no '=': give ADDRESS=PORT, such as 10.0.0.2=1 or fd00::2=1");
  EXPECT_EQ(t.lookup(ip("10.0.0.5")), 0);  // the lines before the bad one are in
}

TEST(ForwardingTable, FramesByDestinationArpAndSolicitationByTarget) {
  ForwardingTable t(4);
  std::string error;
  // sample_spec's addresses: the frames' destinations.
  const std::vector<std::uint8_t> v4 = test::make_frame(test::TestFrame{});
  const std::vector<std::uint8_t> v6 = test::make_frame(test::TestFrame{.ip_version = 6});
  const std::vector<std::uint8_t> tagged = test::make_frame(test::TestFrame{.vlan = true});
  wire::IpAddress d4, d6, dt;
  ASSERT_TRUE(forwarding_address(v4, d4));
  ASSERT_TRUE(forwarding_address(v6, d6));
  ASSERT_TRUE(forwarding_address(tagged, dt));
  EXPECT_EQ(d4.version, 4);
  EXPECT_EQ(d6.version, 6);
  EXPECT_EQ(dt, d4);
  ASSERT_TRUE(t.add(Route{d4, 2}, error));
  ASSERT_TRUE(t.add(Route{d6, 3}, error));
  EXPECT_EQ(t.route_frame(v4), 2);
  EXPECT_EQ(t.route_frame(v6), 3);
  EXPECT_EQ(t.route_frame(tagged), 2);

  // ARP: request (broadcast) and reply both by the target protocol address.
  std::array<std::uint8_t, 64> arp{};
  wire::EthernetHeader eth;
  eth.dst = wire::broadcast_mac;
  wire::ArpMessage request;
  request.sender_ip = 0x0a000009;
  request.target_ip = d4.ipv4;
  ASSERT_EQ(wire::build_arp_frame(eth, request, arp), 42u);
  EXPECT_EQ(t.route_frame(std::span(arp).first(42)), 2);
  EXPECT_EQ(t.route_frame(std::span(arp).first(30)), std::nullopt);  // truncated

  // A neighbour solicitation goes to a group: by its target.
  std::array<std::uint8_t, 128> nd{};
  wire::NdMessage ns;
  ns.target = d6.ipv6;
  const wire::Ipv6Address source = ip("fd00::77").ipv6;
  const std::size_t n = wire::build_nd_frame(eth, source, wire::solicited_node_address(d6.ipv6), ns, nd);
  ASSERT_GT(n, 0u);
  EXPECT_EQ(t.route_frame(std::span(nd).first(n)), 3);
  // An advertisement back is unicast to the solicitor: by its destination.
  wire::NdMessage na;
  na.type = wire::icmpv6_neighbour_advertisement;
  na.target = d6.ipv6;
  const std::size_t m = wire::build_nd_frame(eth, d6.ipv6, source, na, nd);
  wire::IpAddress to;
  ASSERT_TRUE(forwarding_address(std::span(nd).first(m), to));
  EXPECT_EQ(to, ip("fd00::77"));
  EXPECT_EQ(t.route_frame(std::span(nd).first(m)), std::nullopt);  // no route to fd00::77

  // Nothing to forward by: not IP, or too short.
  std::vector<std::uint8_t> other = v4;
  other[12] = 0x88;
  other[13] = 0xcc;  // LLDP
  EXPECT_FALSE(forwarding_address(other, to));
  EXPECT_FALSE(forwarding_address(std::span(v4).first(20), to));
  EXPECT_FALSE(forwarding_address({}, to));
}

}  // namespace
}  // namespace metaroce::fabric
