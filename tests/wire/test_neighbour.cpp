// ARP and ICMPv6 neighbour discovery frames: built byte for byte as scapy
// builds them (the golden bytes below came from scapy, whose ICMPv6
// checksum is its own), parsed back, and every malformed variant named.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "wire/byte_order.hpp"
#include "wire/ip_address.hpp"
#include "wire/neighbour.hpp"

namespace {

using namespace metaroce::wire;

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<std::uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

Ipv6Address v6(const char* text) {
  IpAddress a;
  EXPECT_TRUE(parse_ip(text, a));
  EXPECT_EQ(a.version, 6);
  return a.ipv6;
}

constexpr MacAddress us{2, 0, 0, 0, 0, 1};
constexpr MacAddress them{2, 0, 0, 0, 0, 9};

// scapy: Ether(dst="ff:ff:ff:ff:ff:ff", src=us)/ARP(op=1, hwsrc=us, psrc="10.77.1.2", pdst="10.77.1.1")
const std::string arp_request_hex = "ffffffffffff020000000001080600010800060400010200000000010a4d01020000000000000a4d0101";
// scapy: Ether(dst="33:33:ff:00:00:01", src=us)/IPv6(src="fd00:77:1::2", dst="ff02::1:ff00:1", hlim=255)
//        /ICMPv6ND_NS(tgt="fd00:77:1::1")/ICMPv6NDOptSrcLLAddr(lladdr=us)
const std::string ns_hex =
    "3333ff00000102000000000186dd6000000000203afffd000077000100000000000000000002ff0200000000000000000001ff000001"
    "87007ca800000000fd0000770001000000000000000000010101020000000001";
// scapy: Ether(dst=them, src=us)/IPv6(src="fd00:77:1::2", dst="fe80::9", hlim=255)
//        /ICMPv6ND_NA(tgt="fd00:77:1::2", R=0, S=1, O=1)/ICMPv6NDOptDstLLAddr(lladdr=us)
const std::string na_hex =
    "02000000000902000000000186dd6000000000203afffd000077000100000000000000000002fe800000000000000000000000000009"
    "88001a2360000000fd0000770001000000000000000000020201020000000001";

TEST(IpAddress, ParsesAndPrintsBothFamilies) {
  IpAddress a;
  ASSERT_TRUE(parse_ip("10.77.1.2", a));
  EXPECT_EQ(a.version, 4);
  EXPECT_EQ(a.ipv4, 0x0a4d0102u);
  EXPECT_EQ(to_string(a), "10.77.1.2");
  ASSERT_TRUE(parse_ip("FD00:77:1:0::2", a));
  EXPECT_EQ(a.version, 6);
  EXPECT_EQ(to_string(a), "fd00:77:1::2");
  EXPECT_EQ(a.ipv6[0], 0xfd);
  EXPECT_EQ(a.ipv6[15], 2);
  for (const char* bad : {"", "10.77.1", "10.77.1.256", "fd00::1::2", "fd00::1%eth0", "10.0.0.1/24", "host"})
    EXPECT_FALSE(parse_ip(bad, a)) << bad;
  EXPECT_EQ(to_string(MacAddress{0x02, 0xab, 0, 0, 0x10, 0xff}), "02:ab:00:00:10:ff");
  EXPECT_EQ(IpAddress::v4(1), IpAddress::v4(1));
  EXPECT_FALSE(IpAddress::v4(1) == IpAddress::v4(2));
  EXPECT_FALSE(IpAddress::v4(0) == IpAddress::v6(Ipv6Address{}));
}

TEST(Neighbour, MulticastAddressesOfAnIpv6Address) {
  const Ipv6Address g = solicited_node_address(v6("fd00:77:1::12:3456"));
  EXPECT_EQ(g, v6("ff02::1:ff12:3456"));
  EXPECT_EQ(ipv6_multicast_mac(g), (MacAddress{0x33, 0x33, 0xff, 0x12, 0x34, 0x56}));
}

TEST(Neighbour, ArpRequestIsScapysBytes) {
  ArpMessage m;
  m.operation = arp_request;
  m.sender_mac = us;
  m.sender_ip = 0x0a4d0102;
  m.target_ip = 0x0a4d0101;
  EthernetHeader eth;
  eth.dst = broadcast_mac;
  eth.src = us;
  std::vector<std::uint8_t> out(64);
  ASSERT_EQ(build_arp_frame(eth, m, out), 42u);
  out.resize(42);
  EXPECT_EQ(out, from_hex(arp_request_hex));
  EXPECT_EQ(build_arp_frame(eth, m, std::span<std::uint8_t>(out.data(), 41)), 0u);

  NeighbourFrame f;
  ASSERT_EQ(parse_neighbour_frame(out, f), NeighbourParseError::ok);
  EXPECT_TRUE(f.is_arp);
  EXPECT_EQ(f.arp.operation, arp_request);
  EXPECT_EQ(f.arp.sender_mac, us);
  EXPECT_EQ(f.arp.sender_ip, 0x0a4d0102u);
  EXPECT_EQ(f.arp.target_ip, 0x0a4d0101u);
  EXPECT_EQ(classify(out), FrameKind::arp);
  // Ethernet padding to 60 bytes is allowed.
  out.resize(60, 0);
  EXPECT_EQ(parse_neighbour_frame(out, f), NeighbourParseError::ok);
}

TEST(Neighbour, ArpInAVlan) {
  ArpMessage m;
  m.operation = arp_reply;
  m.sender_mac = us;
  m.target_mac = them;
  EthernetHeader eth;
  eth.dst = them;
  eth.src = us;
  eth.vlan_present = true;
  eth.vlan_tci = 0x6064;
  std::vector<std::uint8_t> out(64);
  ASSERT_EQ(build_arp_frame(eth, m, out), 46u);
  EXPECT_EQ(load_be16(out.data() + 12), ethertype_vlan);
  EXPECT_EQ(load_be16(out.data() + 14), 0x6064);
  EXPECT_EQ(load_be16(out.data() + 16), ethertype_arp);
  out.resize(46);
  NeighbourFrame f;
  ASSERT_EQ(parse_neighbour_frame(out, f), NeighbourParseError::ok);
  EXPECT_TRUE(f.eth.vlan_present);
  EXPECT_EQ(f.eth.vlan_tci, 0x6064);
  EXPECT_EQ(f.arp.operation, arp_reply);
  EXPECT_EQ(f.arp.target_mac, them);
  EXPECT_EQ(classify(out), FrameKind::arp);
}

TEST(Neighbour, BadArpIsNamed) {
  const auto good = from_hex(arp_request_hex);
  NeighbourFrame f;
  for (std::size_t n = 0; n < good.size(); ++n)
    EXPECT_EQ(parse_neighbour_frame(std::span(good.data(), n), f), NeighbourParseError::truncated) << n;
  auto bad = good;
  bad[14 + 1] = 6;  // hardware type 6
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::arp_not_ethernet_ipv4);
  bad = good;
  bad[14 + 5] = 16;  // protocol address length
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::arp_not_ethernet_ipv4);
  bad = good;
  bad[14 + 7] = 3;  // RARP request
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::arp_bad_operation);
  bad = good;
  bad[14 + 8] = 0x01;  // multicast sender MAC
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::arp_bad_sender);
  bad = good;
  bad[12] = 0x08;
  bad[13] = 0x00;  // IPv4
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::not_neighbour);
  EXPECT_EQ(classify(bad), FrameKind::other);
}

TEST(Neighbour, SolicitationIsScapysBytes) {
  NdMessage m;
  m.type = icmpv6_neighbour_solicitation;
  m.target = v6("fd00:77:1::1");
  m.link_address_present = true;
  m.link_address = us;
  const Ipv6Address group = solicited_node_address(m.target);
  EthernetHeader eth;
  eth.dst = ipv6_multicast_mac(group);
  eth.src = us;
  std::vector<std::uint8_t> out(128);
  ASSERT_EQ(build_nd_frame(eth, v6("fd00:77:1::2"), group, m, out), 86u);
  out.resize(86);
  EXPECT_EQ(out, from_hex(ns_hex));
  EXPECT_EQ(build_nd_frame(eth, v6("fd00:77:1::2"), group, m, std::span<std::uint8_t>(out.data(), 85)), 0u);

  NeighbourFrame f;
  ASSERT_EQ(parse_neighbour_frame(out, f), NeighbourParseError::ok);
  EXPECT_FALSE(f.is_arp);
  EXPECT_EQ(f.nd.type, icmpv6_neighbour_solicitation);
  EXPECT_EQ(f.nd.target, m.target);
  EXPECT_TRUE(f.nd.link_address_present);
  EXPECT_EQ(f.nd.link_address, us);
  EXPECT_EQ(f.ip_src, v6("fd00:77:1::2"));
  EXPECT_EQ(f.ip_dst, group);
  EXPECT_EQ(classify(out), FrameKind::icmpv6);
}

TEST(Neighbour, AdvertisementIsScapysBytes) {
  NdMessage m;
  m.type = icmpv6_neighbour_advertisement;
  m.solicited = true;
  m.override_entry = true;
  m.target = v6("fd00:77:1::2");
  m.link_address_present = true;
  m.link_address = us;
  EthernetHeader eth;
  eth.dst = them;
  eth.src = us;
  std::vector<std::uint8_t> out(128);
  ASSERT_EQ(build_nd_frame(eth, v6("fd00:77:1::2"), v6("fe80::9"), m, out), 86u);
  out.resize(86);
  EXPECT_EQ(out, from_hex(na_hex));
  NeighbourFrame f;
  ASSERT_EQ(parse_neighbour_frame(out, f), NeighbourParseError::ok);
  EXPECT_EQ(f.nd.type, icmpv6_neighbour_advertisement);
  EXPECT_FALSE(f.nd.router);
  EXPECT_TRUE(f.nd.solicited);
  EXPECT_TRUE(f.nd.override_entry);
  EXPECT_EQ(f.nd.link_address, us);
  // Without the option: 78 bytes, and still a valid advertisement.
  m.link_address_present = false;
  out.assign(128, 0);
  ASSERT_EQ(build_nd_frame(eth, v6("fd00:77:1::2"), v6("fe80::9"), m, out), 78u);
  out.resize(78);
  ASSERT_EQ(parse_neighbour_frame(out, f), NeighbourParseError::ok);
  EXPECT_FALSE(f.nd.link_address_present);
}

TEST(Neighbour, ChecksumCoversTheWholeMessage) {
  auto frame = from_hex(ns_hex);
  const Ipv6Address src = v6("fd00:77:1::2");
  const Ipv6Address dst = v6("ff02::1:ff00:1");
  const ByteSpan icmp(frame.data() + 54, 32);
  EXPECT_EQ(icmpv6_checksum(src, dst, icmp), 0);  // a right checksum sums to zero
  EXPECT_NE(icmpv6_checksum(src, v6("ff02::1:ff00:2"), icmp), 0);  // the pseudo-header counts
  NeighbourFrame f;
  for (std::size_t i = 14 + 8; i < frame.size(); ++i) {  // any byte from the source address on
    auto bad = frame;
    bad[i] ^= 0x10;
    const NeighbourParseError e = parse_neighbour_frame(bad, f);
    if (i == 54) {
      EXPECT_EQ(e, NeighbourParseError::icmpv6_other) << i;  // the type byte: 135 ^ 16 is not ND
    } else if (i == 55) {
      EXPECT_EQ(e, NeighbourParseError::nd_bad_code) << i;
    } else {
      EXPECT_EQ(e, NeighbourParseError::nd_bad_checksum) << i;
    }
  }
}

TEST(Neighbour, BadNdIsNamed) {
  const auto good = from_hex(ns_hex);
  NeighbourFrame f;
  for (std::size_t n = 0; n < good.size(); ++n)
    EXPECT_EQ(parse_neighbour_frame(std::span(good.data(), n), f), NeighbourParseError::truncated) << n;
  // The ICMPv6 checksum is recomputed after each change that is not the
  // one under test, so only that check fails.
  const auto reseal = [](std::vector<std::uint8_t>& b) {
    Ipv6Address s, d;
    std::copy(b.begin() + 22, b.begin() + 38, s.begin());
    std::copy(b.begin() + 38, b.begin() + 54, d.begin());
    b[56] = b[57] = 0;
    const std::size_t len = load_be16(b.data() + 18);
    store_be16(b.data() + 56, icmpv6_checksum(s, d, ByteSpan(b.data() + 54, len)));
  };
  auto bad = good;
  bad[14] = 0x40;
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::ipv6_bad_version);
  bad = good;
  bad[21] = 64;  // hop limit
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::nd_bad_hop_limit);
  bad = good;
  bad[54] = 128;  // echo request
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::icmpv6_other);
  EXPECT_EQ(f.icmpv6_type, 128);
  bad = good;
  bad[55] = 1;
  reseal(bad);
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::nd_bad_code);
  bad = good;
  bad[19] = 16;  // payload length 16: too short for a solicitation
  bad.resize(54 + 16);
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::nd_bad_length);
  bad = good;
  bad[19] = 34;  // claims more than the frame has
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::truncated);
  bad = good;
  bad[62] = 0xff;  // target ff00:77:1::1
  reseal(bad);
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::nd_multicast_target);
  bad = good;
  bad[79] = 0;  // option length 0
  reseal(bad);
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::nd_bad_option);
  bad = good;
  bad[79] = 2;  // 16 bytes: past the message's end
  reseal(bad);
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::nd_bad_option);
  bad = good;
  std::fill(bad.begin() + 22, bad.begin() + 38, 0);  // from :: but carrying its link-layer address
  reseal(bad);
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::nd_bad_unspecified_source);
  // An unknown option is skipped (and a nonce option, as DAD carries).
  bad = good;
  bad[78] = 14;
  reseal(bad);
  ASSERT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::ok);
  EXPECT_FALSE(f.nd.link_address_present);
  // An advertisement with the solicited flag to a group.
  auto na = from_hex(na_hex);
  std::copy(all_nodes_address.begin(), all_nodes_address.end(), na.begin() + 38);
  reseal(na);
  EXPECT_EQ(parse_neighbour_frame(na, f), NeighbourParseError::nd_solicited_to_multicast);
  // A solicitation from a group address: its answer would go to the group.
  bad = good;
  bad[22] = 0xff;
  reseal(bad);
  EXPECT_EQ(parse_neighbour_frame(bad, f), NeighbourParseError::nd_multicast_source);
  // Every reason has a name.
  for (std::size_t i = 0; i < neighbour_parse_error_count; ++i)
    EXPECT_NE(to_string(static_cast<NeighbourParseError>(i)), "unknown") << i;
}

}  // namespace
