// The neighbour cache in virtual time: what it answers (byte for byte),
// what it asks and when, how a resolution ends (an answer, or a failure
// after exactly `tries` requests with the error a user reads), stale and
// permanent entries, and a named counter for every frame it drops. Then
// the same through a Host, which dispatches ARP and ICMPv6 to it.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "host/host.hpp"
#include "host_test_support.hpp"
#include "host/neighbours.hpp"
#include "wire/byte_order.hpp"
#include "wire/ip_address.hpp"
#include "wire/neighbour.hpp"

namespace {

using namespace metaroce;
using host::NeighbourState;
using Frames = std::vector<std::vector<std::uint8_t>>;

constexpr wire::MacAddress us{2, 0, 0, 0, 0, 1};
constexpr wire::MacAddress router{2, 0, 0, 0, 0, 9};
constexpr std::uint32_t our_ipv4 = 0x0a4d0102;     // 10.77.1.2
constexpr std::uint32_t router_ipv4 = 0x0a4d0101;  // 10.77.1.1
constexpr std::uint64_t s = 1'000'000'000;

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

wire::Ipv6Address v6(const char* text) {
  wire::IpAddress a;
  EXPECT_TRUE(wire::parse_ip(text, a));
  return a.ipv6;
}

wire::IpAddress ip(const char* text) {
  wire::IpAddress a;
  EXPECT_TRUE(wire::parse_ip(text, a));
  return a;
}

host::NeighbourConfig config() {
  host::NeighbourConfig c;
  c.port_name = "net_af_packet0";
  c.local_mac = us;
  c.ipv4_present = true;
  c.local_ipv4 = our_ipv4;
  c.ipv6_present = true;
  c.local_ipv6 = v6("fd00:77:1::2");
  return c;
}

std::vector<std::uint8_t> arp(std::uint16_t op, const wire::MacAddress& eth_dst, const wire::MacAddress& sender,
                              std::uint32_t sender_ip, std::uint32_t target_ip,
                              const wire::MacAddress& target_mac = {}) {
  wire::EthernetHeader eth;
  eth.dst = eth_dst;
  eth.src = sender;
  wire::ArpMessage m;
  m.operation = op;
  m.sender_mac = sender;
  m.sender_ip = sender_ip;
  m.target_mac = target_mac;
  m.target_ip = target_ip;
  std::vector<std::uint8_t> f(64);
  f.resize(wire::build_arp_frame(eth, m, f));
  return f;
}

std::vector<std::uint8_t> nd(const wire::MacAddress& eth_src, const wire::MacAddress& eth_dst,
                             const wire::Ipv6Address& src, const wire::Ipv6Address& dst, const wire::NdMessage& m) {
  wire::EthernetHeader eth;
  eth.dst = eth_dst;
  eth.src = eth_src;
  std::vector<std::uint8_t> f(128);
  f.resize(wire::build_nd_frame(eth, src, dst, m, f));
  return f;
}

wire::NdMessage solicitation(const char* target, bool with_address) {
  wire::NdMessage m;
  m.type = wire::icmpv6_neighbour_solicitation;
  m.target = v6(target);
  m.link_address_present = with_address;
  m.link_address = router;
  return m;
}

wire::NdMessage advertisement(const char* target, bool solicited, bool override_entry, const wire::MacAddress& mac) {
  wire::NdMessage m;
  m.type = wire::icmpv6_neighbour_advertisement;
  m.solicited = solicited;
  m.override_entry = override_entry;
  m.target = v6(target);
  m.link_address_present = true;
  m.link_address = mac;
  return m;
}

// The reply to the router's request for 10.77.1.2, laid out from RFC 826.
const std::string arp_reply_hex =
    "020000000009" "020000000001" "0806" "0001" "0800" "06" "04" "0002"
    "020000000001" "0a4d0102" "020000000009" "0a4d0101";
// scapy (tests/wire/test_neighbour.cpp): our solicitation for fd00:77:1::1,
// and our advertisement of fd00:77:1::2 to fe80::9 at 02:00:00:00:00:09.
const std::string ns_hex =
    "3333ff00000102000000000186dd6000000000203afffd000077000100000000000000000002ff0200000000000000000001ff000001"
    "87007ca800000000fd0000770001000000000000000000010101020000000001";
const std::string na_hex =
    "02000000000902000000000186dd6000000000203afffd000077000100000000000000000002fe800000000000000000000000000009"
    "88001a2360000000fd0000770001000000000000000000020201020000000001";

TEST(Neighbours, AnswersArpForItsAddressAndLearnsTheAsker) {
  host::NeighbourCounters counters;
  host::Neighbours n(config(), counters);
  n.receive(5, arp(wire::arp_request, wire::broadcast_mac, router, router_ipv4, our_ipv4));
  Frames out;
  n.poll(5, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], from_hex(arp_reply_hex));
  EXPECT_EQ(counters.arp_requests_answered, 1u);
  EXPECT_EQ(counters.arp_replies_learned, 1u);
  // The asker is about to talk to us: we know its MAC without asking.
  const host::Resolution r = n.resolve(6, wire::IpAddress::v4(router_ipv4));
  EXPECT_EQ(r.state, NeighbourState::reachable);
  EXPECT_EQ(r.mac, router);
  out.clear();
  n.poll(6, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(counters.arp_requests_sent, 0u);
  // A unicast request (a kernel's probe) is answered the same way.
  n.receive(7, arp(wire::arp_request, us, router, router_ipv4, our_ipv4));
  n.poll(7, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], from_hex(arp_reply_hex));
  EXPECT_EQ(counters.arp_requests_answered, 2u);
  EXPECT_EQ(counters.rx_errors_total(), 0u);
}

// One lcore of several that all see the port's ARP and ND frames (lanes):
// it learns from a request for our address, but leaves the answer to the
// lcore that answers.
TEST(Neighbours, LeavesRequestsToAnotherLcoreWhenAskedTo) {
  host::NeighbourConfig c = config();
  c.answer_requests = false;
  host::NeighbourCounters counters;
  host::Neighbours n(c, counters);
  n.receive(5, arp(wire::arp_request, wire::broadcast_mac, router, router_ipv4, our_ipv4));
  const wire::Ipv6Address group = wire::solicited_node_address(v6("fd00:77:1::2"));
  n.receive(5, nd(router, wire::ipv6_multicast_mac(group), v6("fe80::9"), group, solicitation("fd00:77:1::2", true)));
  Frames out;
  n.poll(5, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(counters.requests_answered_elsewhere, 2u);
  EXPECT_EQ(counters.arp_requests_answered + counters.nd_solicitations_answered, 0u);
  EXPECT_EQ(counters.arp_replies_learned, 1u);
  EXPECT_EQ(counters.nd_advertisements_learned, 1u);
  const host::Resolution r = n.resolve(6, wire::IpAddress::v4(router_ipv4));
  EXPECT_EQ(r.state, NeighbourState::reachable);
  EXPECT_EQ(r.mac, router);
  const host::NeighbourEntry* e = n.find(ip("fe80::9"));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->mac, router);
}

TEST(Neighbours, IgnoresWhatIsNotItsOwn) {
  host::NeighbourCounters counters;
  host::Neighbours n(config(), counters);
  Frames out;
  n.receive(1, arp(wire::arp_request, wire::broadcast_mac, router, router_ipv4, 0x0a4d0107));
  EXPECT_EQ(counters.arp_requests_not_ours, 1u);
  n.receive(1, arp(wire::arp_reply, us, router, router_ipv4, our_ipv4, us));
  EXPECT_EQ(counters.arp_replies_unrequested, 1u);
  n.receive(1, arp(wire::arp_request, wire::broadcast_mac, router, our_ipv4, our_ipv4));  // someone claims our address
  EXPECT_EQ(counters.arp_address_conflicts, 1u);
  n.receive(1, arp(wire::arp_request, wire::broadcast_mac, us, our_ipv4, our_ipv4));  // our own announcement, looped
  EXPECT_EQ(counters.arp_address_conflicts, 1u);
  EXPECT_EQ(counters.own_frames, 1u);
  n.receive(1, nd(router, wire::ipv6_multicast_mac(wire::solicited_node_address(v6("fd00:77:1::7"))),
                  v6("fe80::9"), wire::solicited_node_address(v6("fd00:77:1::7")),
                  solicitation("fd00:77:1::7", true)));
  EXPECT_EQ(counters.nd_solicitations_not_ours, 1u);
  n.receive(1, nd(router, us, v6("fe80::9"), v6("fd00:77:1::2"), advertisement("fd00:77:1::5", true, true, router)));
  EXPECT_EQ(counters.nd_advertisements_unrequested, 1u);
  n.receive(1, nd(router, wire::ipv6_multicast_mac(wire::all_nodes_address), v6("fe80::9"),
                  wire::all_nodes_address, advertisement("fd00:77:1::2", false, true, router)));
  EXPECT_EQ(counters.nd_address_conflicts, 1u);
  // Tagged frames on an untagged port.
  auto tagged = arp(wire::arp_request, wire::broadcast_mac, router, router_ipv4, our_ipv4);
  tagged.insert(tagged.begin() + 12, {0x81, 0x00, 0x00, 0x05});
  n.receive(1, tagged);
  EXPECT_EQ(counters.neighbour_vlan_mismatch, 1u);
  // A broken frame, by its reason.
  auto broken = arp(wire::arp_request, wire::broadcast_mac, router, router_ipv4, our_ipv4);
  broken[21] = 9;
  n.receive(1, broken);
  EXPECT_EQ(counters.rx_errors[static_cast<std::size_t>(wire::NeighbourParseError::arp_bad_operation)], 1u);
  n.poll(1, out);
  EXPECT_TRUE(out.empty());  // nothing answered, nothing learned
  EXPECT_EQ(n.size(), 0u);
  EXPECT_EQ(counters.arp_requests_answered + counters.nd_solicitations_answered, 0u);
}

TEST(Neighbours, AFamilyWithoutAnAddressIsNeitherAnsweredNorAsked) {
  host::NeighbourConfig c = config();
  c.ipv6_present = false;
  host::NeighbourCounters counters;
  host::Neighbours n(c, counters);
  n.receive(1, nd(router, us, v6("fe80::9"), v6("fd00:77:1::2"), solicitation("fd00:77:1::2", true)));
  EXPECT_EQ(counters.neighbour_wrong_family, 1u);
  const host::Resolution r = n.resolve(1, ip("fd00:77:1::1"));
  EXPECT_EQ(r.state, NeighbourState::failed);
  EXPECT_EQ(r.error, "cannot resolve fd00:77:1::1 on port net_af_packet0: it has no IPv6 address of its own to ask from");
  EXPECT_EQ(n.size(), 0u);
}

TEST(Neighbours, ArpResolutionFailsAfterExactlyItsTries) {
  host::NeighbourCounters counters;
  host::Neighbours n(config(), counters);
  const auto gw = wire::IpAddress::v4(router_ipv4);
  const std::uint64_t t0 = 100 * s;
  EXPECT_EQ(n.resolve(t0, gw).state, NeighbourState::incomplete);
  EXPECT_EQ(n.next_deadline(), t0);
  const auto request = arp(wire::arp_request, wire::broadcast_mac, us, our_ipv4, router_ipv4);
  Frames out;
  n.poll(t0, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], request);
  EXPECT_EQ(n.next_deadline(), t0 + s);
  out.clear();
  n.poll(t0 + s - 1, out);
  EXPECT_TRUE(out.empty());
  n.poll(t0 + s, out);
  n.poll(t0 + 2 * s, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], request);
  EXPECT_EQ(out[1], request);
  EXPECT_EQ(n.resolve(t0 + 3 * s - 1, gw).state, NeighbourState::incomplete);
  out.clear();
  n.poll(t0 + 3 * s, out);
  EXPECT_TRUE(out.empty());
  const host::Resolution r = n.resolve(t0 + 3 * s, gw);
  EXPECT_EQ(r.state, NeighbourState::failed);
  EXPECT_EQ(r.error, "no ARP reply from 10.77.1.1 after 3 tries over 3.0 s on port net_af_packet0");
  EXPECT_EQ(counters.arp_requests_sent, 3u);
  EXPECT_EQ(counters.resolutions_started, 1u);
  EXPECT_EQ(counters.resolutions_failed, 1u);
  EXPECT_EQ(n.next_deadline(), host::neighbour_never);
  // Failed stays failed (no more requests) until forgotten; then it starts over.
  n.poll(t0 + 10 * s, out);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(n.forget(gw));
  EXPECT_EQ(n.resolve(t0 + 10 * s, gw).state, NeighbourState::incomplete);
  n.poll(t0 + 10 * s, out);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(counters.resolutions_started, 2u);
}

TEST(Neighbours, ArpReplyEndsTheResolutionAndGoesStaleLater) {
  host::NeighbourConfig c = config();
  c.reachable_time = 30 * s;
  host::NeighbourCounters counters;
  host::Neighbours n(c, counters);
  const auto gw = wire::IpAddress::v4(router_ipv4);
  Frames out;
  n.resolve(0, gw);
  n.poll(0, out);
  n.poll(s, out);
  EXPECT_EQ(out.size(), 2u);
  n.receive(s + 5, arp(wire::arp_reply, us, router, router_ipv4, our_ipv4, us));
  EXPECT_EQ(counters.arp_replies_learned, 1u);
  host::Resolution r = n.resolve(s + 5, gw);
  EXPECT_EQ(r.state, NeighbourState::reachable);
  EXPECT_EQ(r.mac, router);
  out.clear();
  n.poll(2 * s, out);
  n.poll(4 * s, out);
  EXPECT_TRUE(out.empty());  // no retries after the answer, no failure
  EXPECT_EQ(counters.arp_requests_sent, 2u);
  EXPECT_EQ(counters.resolutions_failed, 0u);
  // 30 s after the reply it is stale: still used, and asked again at its MAC.
  EXPECT_EQ(n.next_deadline(), s + 5 + 30 * s);
  n.poll(s + 5 + 30 * s, out);
  EXPECT_EQ(counters.entries_stale, 1u);
  EXPECT_EQ(n.find(gw)->state, NeighbourState::stale);
  EXPECT_TRUE(out.empty());
  r = n.resolve(40 * s, gw);
  EXPECT_EQ(r.state, NeighbourState::stale);
  EXPECT_TRUE(r.usable());
  EXPECT_EQ(r.mac, router);
  n.poll(40 * s, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], arp(wire::arp_request, router, us, our_ipv4, router_ipv4));
  n.receive(40 * s + 7, arp(wire::arp_reply, us, router, router_ipv4, our_ipv4, us));
  EXPECT_EQ(n.resolve(40 * s + 7, gw).state, NeighbourState::reachable);
  EXPECT_EQ(counters.arp_requests_sent, 3u);
}

TEST(Neighbours, APermanentEntryIsNeverAskedNorReplaced) {
  host::NeighbourCounters counters;
  host::Neighbours n(config(), counters);
  const auto gw = wire::IpAddress::v4(router_ipv4);
  const wire::MacAddress given{2, 0, 0, 0, 0, 0x42};
  n.set_permanent(gw, given);
  host::Resolution r = n.resolve(0, gw);
  EXPECT_EQ(r.state, NeighbourState::permanent);
  EXPECT_EQ(r.mac, given);
  n.receive(1, arp(wire::arp_reply, us, router, router_ipv4, our_ipv4, us));
  EXPECT_EQ(counters.answers_for_permanent, 1u);
  Frames out;
  n.poll(1000 * s, out);
  EXPECT_TRUE(out.empty());
  r = n.resolve(1000 * s, gw);
  EXPECT_EQ(r.state, NeighbourState::permanent);
  EXPECT_EQ(r.mac, given);
  EXPECT_EQ(counters.arp_requests_sent + counters.resolutions_started, 0u);
}

TEST(Neighbours, AnswersASolicitationForItsAddress) {
  host::NeighbourCounters counters;
  host::Neighbours n(config(), counters);
  const wire::Ipv6Address group = wire::solicited_node_address(v6("fd00:77:1::2"));
  n.receive(1, nd(router, wire::ipv6_multicast_mac(group), v6("fe80::9"), group, solicitation("fd00:77:1::2", true)));
  Frames out;
  n.poll(1, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], from_hex(na_hex));
  EXPECT_EQ(counters.nd_solicitations_answered, 1u);
  // The asker's entry, from its source link-layer address: stale (a
  // solicitation is news, not a confirmation).
  const host::NeighbourEntry* e = n.find(ip("fe80::9"));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state, NeighbourState::stale);
  EXPECT_EQ(e->mac, router);
  // Unicast without the option (a kernel's probe): answered at the frame's source MAC.
  out.clear();
  n.receive(2, nd(router, us, v6("fe80::9"), v6("fd00:77:1::2"), solicitation("fd00:77:1::2", false)));
  n.poll(2, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], from_hex(na_hex));
  // Duplicate address detection (from ::): the answer goes to all nodes, not solicited.
  out.clear();
  n.receive(3, nd(router, wire::ipv6_multicast_mac(group), wire::Ipv6Address{}, group,
                  solicitation("fd00:77:1::2", false)));
  n.poll(3, out);
  ASSERT_EQ(out.size(), 1u);
  wire::NeighbourFrame f;
  ASSERT_EQ(wire::parse_neighbour_frame(out[0], f), wire::NeighbourParseError::ok);
  EXPECT_EQ(f.eth.dst, (wire::MacAddress{0x33, 0x33, 0, 0, 0, 1}));
  EXPECT_EQ(f.ip_dst, wire::all_nodes_address);
  EXPECT_FALSE(f.nd.solicited);
  EXPECT_TRUE(f.nd.override_entry);
  EXPECT_EQ(f.nd.link_address, us);
  EXPECT_EQ(counters.nd_solicitations_answered, 3u);
  EXPECT_EQ(counters.rx_errors_total(), 0u);
}

TEST(Neighbours, ResolvesOverNd) {
  host::NeighbourCounters counters;
  host::Neighbours n(config(), counters);
  const auto gw = ip("fd00:77:1::1");
  Frames out;
  EXPECT_EQ(n.resolve(0, gw).state, NeighbourState::incomplete);
  n.poll(0, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], from_hex(ns_hex));
  EXPECT_EQ(counters.nd_solicitations_sent, 1u);
  // An advertisement without the target's address says nothing about an
  // incomplete entry; one with it and the solicited flag settles it.
  auto bare = advertisement("fd00:77:1::1", true, true, router);
  bare.link_address_present = false;
  n.receive(10, nd(router, us, v6("fd00:77:1::1"), v6("fd00:77:1::2"), bare));
  EXPECT_EQ(counters.nd_advertisements_unrequested, 1u);
  EXPECT_EQ(n.resolve(10, gw).state, NeighbourState::incomplete);
  n.receive(20, nd(router, us, v6("fd00:77:1::1"), v6("fd00:77:1::2"), advertisement("fd00:77:1::1", true, true, router)));
  const host::Resolution r = n.resolve(20, gw);
  EXPECT_EQ(r.state, NeighbourState::reachable);
  EXPECT_EQ(r.mac, router);
  EXPECT_EQ(counters.nd_advertisements_learned, 1u);
  // Another MAC without the override flag does not replace it; with it, it does (stale: unsolicited).
  const wire::MacAddress moved{2, 0, 0, 0, 0, 0x77};
  n.receive(30, nd(moved, us, v6("fd00:77:1::1"), v6("fd00:77:1::2"), advertisement("fd00:77:1::1", false, false, moved)));
  EXPECT_EQ(counters.nd_advertisements_not_overriding, 1u);
  EXPECT_EQ(n.resolve(30, gw).mac, router);
  n.receive(40, nd(moved, us, v6("fd00:77:1::1"), v6("fd00:77:1::2"), advertisement("fd00:77:1::1", false, true, moved)));
  EXPECT_EQ(n.find(gw)->state, NeighbourState::stale);
  EXPECT_EQ(n.find(gw)->mac, moved);
  out.clear();
  n.poll(5 * s, out);  // no retries after the answer, no failure
  EXPECT_EQ(counters.nd_solicitations_sent, 1u);
  EXPECT_EQ(counters.resolutions_failed, 0u);
}

TEST(Neighbours, NdResolutionFailsWithItsOwnWords) {
  host::NeighbourConfig c = config();
  c.tries = 2;
  c.retry_interval = s / 2;
  host::NeighbourCounters counters;
  host::Neighbours n(c, counters);
  Frames out;
  const auto gw = ip("fd00:77:1::1");
  n.resolve(0, gw);
  for (std::uint64_t t = 0; t <= 2 * s; t += s / 10) n.poll(t, out);
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(counters.nd_solicitations_sent, 2u);
  EXPECT_EQ(n.resolve(2 * s, gw).error,
            "no neighbour advertisement from fd00:77:1::1 after 2 tries over 1.0 s on port net_af_packet0");
}

TEST(Neighbours, TheCacheHasALimit) {
  host::NeighbourConfig c = config();
  c.max_entries = 2;
  host::NeighbourCounters counters;
  host::Neighbours n(c, counters);
  n.resolve(0, wire::IpAddress::v4(1));
  n.resolve(0, wire::IpAddress::v4(2));
  const host::Resolution r = n.resolve(0, wire::IpAddress::v4(3));
  EXPECT_EQ(r.state, NeighbourState::failed);
  EXPECT_EQ(r.error, "cannot resolve 0.0.0.3 on port net_af_packet0: its neighbour cache holds 2 entries already");
  n.receive(1, arp(wire::arp_request, wire::broadcast_mac, router, router_ipv4, our_ipv4));
  EXPECT_EQ(counters.neighbour_table_full, 2u);
  EXPECT_EQ(counters.arp_requests_answered, 1u);  // answered all the same
  EXPECT_EQ(n.size(), 2u);
}

TEST(Neighbours, AVlanPortAnswersInItsVlan) {
  host::NeighbourConfig c = config();
  c.vlan_present = true;
  c.vlan_tci = 0x6005;  // VID 5, priority 3
  host::NeighbourCounters counters;
  host::Neighbours n(c, counters);
  auto request = arp(wire::arp_request, wire::broadcast_mac, router, router_ipv4, our_ipv4);
  request.insert(request.begin() + 12, {0x81, 0x00, 0x00, 0x05});  // VID 5, priority 0
  n.receive(1, request);
  Frames out;
  n.poll(1, out);
  ASSERT_EQ(out.size(), 1u);
  auto want = from_hex(arp_reply_hex);
  want.insert(want.begin() + 12, {0x81, 0x00, 0x60, 0x05});
  EXPECT_EQ(out[0], want);
  request[15] = 6;  // VID 6
  n.receive(2, request);
  EXPECT_EQ(counters.neighbour_vlan_mismatch, 1u);
}

TEST(HostNeighbours, TheHostHandsArpAndNdToTheCacheAndSendsItsFrames) {
  host::HostConfig hc;
  host::Host h(hc);
  test::CountedSink sink(16);
  // Without a cache, ARP is not a RoCE frame.
  h.receive(1, arp(wire::arp_request, wire::broadcast_mac, router, router_ipv4, our_ipv4));
  EXPECT_EQ(h.counters().rx_parse_errors[static_cast<std::size_t>(wire::ParseError::not_ip)], 1u);
  EXPECT_EQ(h.neighbours(), nullptr);
  host::Neighbours& n = h.enable_neighbours(config());
  EXPECT_EQ(h.neighbours(), &n);
  h.receive(2, arp(wire::arp_request, wire::broadcast_mac, router, router_ipv4, our_ipv4));
  const wire::Ipv6Address group = wire::solicited_node_address(v6("fd00:77:1::2"));
  h.receive(2, nd(router, wire::ipv6_multicast_mac(group), v6("fe80::9"), group, solicitation("fd00:77:1::2", true)));
  EXPECT_EQ(h.counters().rx_neighbour, 2u);
  EXPECT_EQ(h.counters().rx_parse_errors_total(), 1u);  // only the one before
  EXPECT_EQ(n.resolve(3, ip("fd00:77:1::1")).state, NeighbourState::incomplete);
  EXPECT_EQ(h.next_deadline(3), 3u);
  h.transmit(3, sink);
  const Frames out = sink.take_frames();
  ASSERT_EQ(out.size(), 3u);  // the two answers, then the solicitation
  EXPECT_EQ(out[0], from_hex(arp_reply_hex));
  EXPECT_EQ(out[1], from_hex(na_hex));
  EXPECT_EQ(out[2], from_hex(ns_hex));
  EXPECT_EQ(h.counters().neighbour.arp_requests_answered, 1u);
  EXPECT_EQ(h.counters().neighbour.nd_solicitations_answered, 1u);
  EXPECT_EQ(h.counters().neighbour.nd_solicitations_sent, 1u);
  // An ICMPv6 echo request is counted by name; so the host's drops include it.
  auto echo = from_hex(ns_hex);
  echo[54] = 128;
  const std::uint64_t dropped = h.counters().dropped();
  h.receive(4, echo);
  EXPECT_EQ(h.counters().neighbour.rx_errors[static_cast<std::size_t>(wire::NeighbourParseError::icmpv6_other)], 1u);
  EXPECT_EQ(h.counters().dropped(), dropped + 1);
  // Every counter has a name in visit().
  std::size_t named = 0;
  h.counters().visit([&](const std::string& name, std::uint64_t v) {
    if (name == "neighbour_rx_error.icmpv6_other" || name == "arp_requests_answered") {
      EXPECT_EQ(v, 1u) << name;
    }
    ++named;
  });
  EXPECT_GT(named, 40u);
}

}  // namespace
