// The decoder's line for a frame: exact text for a known frame, and an error
// line for a bad one; and the writer under it (JsonLine), value by value.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "common/json_line.hpp"
#include "metaroce-decode/frame_json.hpp"
#include "wire/frame.hpp"
#include "wire_samples.hpp"

namespace {

using namespace metaroce::wire;

std::vector<std::uint8_t> build(const FrameSpec& spec, std::size_t payload_len) {
  std::vector<std::uint8_t> payload(payload_len, 0x11);
  std::vector<std::uint8_t> frame(headers_size(spec) + payload_len + 8);
  frame.resize(build_frame(spec, payload, frame));
  return frame;
}

TEST(FrameJson, WriteFirstExactLine) {
  FrameSpec spec = metaroce::test::sample_spec(opcode::rc | opcode::write_first, 4, true);
  const auto frame = build(spec, 5);
  ParsedFrame p;
  ASSERT_EQ(parse_frame(frame, p), ParseError::ok);
  const auto line = metaroce::apps::frame_to_json(3, frame, 1, true);
  EXPECT_TRUE(line.ok);
  const std::string expected =
      "{\"frame\":3,\"frame_len\":" + std::to_string(frame.size()) +
      ",\"eth_src\":\"02:00:00:00:00:01\",\"eth_dst\":\"02:00:00:00:00:02\",\"vlan\":100,\"pcp\":3,"
      "\"ip_version\":4,\"src\":\"10.0.0.1\",\"dst\":\"10.0.0.2\",\"ttl\":64,\"dscp\":26,\"ecn\":2,"
      "\"sport\":49158,\"dport\":4791,\"opcode\":6,\"opcode_name\":\"RC_RDMA_WRITE_FIRST\","
      "\"solicited\":false,\"mig_req\":false,\"pad\":3,\"tver\":0,\"pkey\":65535,\"fecn\":false,"
      "\"becn\":false,\"dest_qp\":291,\"ack_req\":false,\"psn\":16777214,\"payload_len\":5,"
      "\"icrc\":" + std::to_string(p.icrc) +
      ",\"reth\":{\"va\":139638282147448,\"rkey\":3735928559,\"dma_len\":4096},\"icrc_ok\":true}";
  EXPECT_EQ(line.json, expected);
}

TEST(FrameJson, MetaroceAckLine) {
  const auto frame = build(metaroce::test::sample_spec(opcode::mr_ack, 6, false), 0);
  const auto line = metaroce::apps::frame_to_json(1, frame, 1, true);
  EXPECT_TRUE(line.ok);
  EXPECT_NE(line.json.find("\"src\":\"fd00::1\""), std::string::npos) << line.json;
  EXPECT_NE(line.json.find("\"opcode_name\":\"MR_ACK\""), std::string::npos);
  EXPECT_NE(line.json.find("\"mr_ack\":{\"syndrome\":0,\"aeth_kind\":\"ack\",\"credit\":0,\"path_count\":3,"
                           "\"delivered_psn\":65534,\"completed_msn\":99,\"rate_hint_mbps\":25000,\"paths\":[{"
                           "\"path_id\":0,\"ce_count\":0,\"cum_seq\":1000,\"ts_echo\":2882338816,\"sack\":\"01"),
            std::string::npos)
      << line.json;
  EXPECT_NE(line.json.find("\"sacked\":2}"), std::string::npos);
}

TEST(FrameJson, BadFramesCarryTheReason) {
  auto frame = build(metaroce::test::sample_spec(opcode::mr_write, 4, false), 10);
  frame.back() ^= 1;
  auto line = metaroce::apps::frame_to_json(2, frame, 1, true);
  EXPECT_FALSE(line.ok);
  EXPECT_NE(line.json.find("\"icrc_ok\":false,\"error\":\"bad_icrc\"}"), std::string::npos) << line.json;
  EXPECT_NE(line.json.find("\"mr_write\":{"), std::string::npos);

  frame.resize(30);
  line = metaroce::apps::frame_to_json(2, frame, 1, true);
  EXPECT_FALSE(line.ok);
  EXPECT_EQ(line.json, "{\"frame\":2,\"frame_len\":30,\"error\":\"truncated\"}");

  line = metaroce::apps::frame_to_json(4, frame, 113, true);
  EXPECT_EQ(line.json, "{\"frame\":4,\"frame_len\":30,\"error\":\"unsupported_linktype_113\"}");
}

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// ARP and neighbour discovery (scapy's bytes, as in test_neighbour.cpp) decode
// as what they ask or answer; a broken one carries its reason.
TEST(FrameJson, NeighbourFramesDecode) {
  const auto arp = from_hex("ffffffffffff020000000001080600010800060400010200000000010a4d01020000000000000a4d0101");
  auto line = metaroce::apps::frame_to_json(1, arp, 1, true);
  EXPECT_TRUE(line.ok);
  EXPECT_EQ(line.json,
            "{\"frame\":1,\"frame_len\":42,\"eth_src\":\"02:00:00:00:00:01\",\"eth_dst\":\"ff:ff:ff:ff:ff:ff\","
            "\"neighbour\":\"arp_request\",\"sender_mac\":\"02:00:00:00:00:01\",\"sender_ip\":\"10.77.1.2\","
            "\"target_mac\":\"00:00:00:00:00:00\",\"target_ip\":\"10.77.1.1\"}");
  auto na = from_hex(
      "02000000000902000000000186dd6000000000203afffd000077000100000000000000000002fe800000000000000000000000000009"
      "88001a2360000000fd0000770001000000000000000000020201020000000001");
  line = metaroce::apps::frame_to_json(2, na, 1, true);
  EXPECT_TRUE(line.ok);
  EXPECT_EQ(line.json,
            "{\"frame\":2,\"frame_len\":86,\"eth_src\":\"02:00:00:00:00:01\",\"eth_dst\":\"02:00:00:00:00:09\","
            "\"neighbour\":\"nd_advertisement\",\"ip_version\":6,\"src\":\"fd00:77:1::2\",\"dst\":\"fe80::9\","
            "\"target\":\"fd00:77:1::2\",\"router\":false,\"solicited\":true,\"override\":true,"
            "\"link_address\":\"02:00:00:00:00:01\"}");
  na[60] ^= 1;  // in the target: the ICMPv6 checksum no longer holds
  line = metaroce::apps::frame_to_json(3, na, 1, true);
  EXPECT_FALSE(line.ok);
  EXPECT_EQ(line.json, "{\"frame\":3,\"frame_len\":86,\"error\":\"nd_bad_checksum\"}");
}

// A RoCE frame over IPv6 decodes with its IPv6 fields.
TEST(FrameJson, Ipv6FrameDecodes) {
  FrameSpec spec = metaroce::test::sample_spec(opcode::mr_write, 6, false);
  const auto frame = build(spec, 10);
  const auto line = metaroce::apps::frame_to_json(1, frame, 1, true);
  EXPECT_TRUE(line.ok) << line.json;
  EXPECT_NE(line.json.find("\"ip_version\":6,"), std::string::npos) << line.json;
  EXPECT_NE(line.json.find("\"icrc_ok\":true"), std::string::npos) << line.json;
}

TEST(FrameJson, NoIcrcOptionSkipsTheCheck) {
  auto frame = build(metaroce::test::sample_spec(opcode::mr_send, 4, false), 10);
  frame.back() ^= 1;
  const auto line = metaroce::apps::frame_to_json(1, frame, 1, false);
  EXPECT_TRUE(line.ok);
  EXPECT_EQ(line.json.find("icrc_ok"), std::string::npos);
}

}  // namespace

namespace {

using metaroce::apps::JsonLine;

TEST(JsonLine, ExactTextOfEveryKindOfValue) {
  JsonLine j;
  j.add("u", std::uint64_t{18446744073709551615u})
      .add("i", std::int64_t{-9223372036854775807 - 1})
      .add("zero", 0)
      .add("d", 0.25)
      .add("nan", std::nan(""))
      .add("yes", true)
      .add("s", "plain");
  j.begin_object("o").add("a", 1u).begin_array("list");
  j.begin_array_object().add("x", 1).end_object();
  j.begin_array_object().end_object();
  j.end_array().end_object();
  j.add_raw("raw", "[1,2]");
  EXPECT_EQ(std::move(j).finish(),
            "{\"u\":18446744073709551615,\"i\":-9223372036854775808,\"zero\":0,\"d\":0.25,\"nan\":null,"
            "\"yes\":true,\"s\":\"plain\",\"o\":{\"a\":1,\"list\":[{\"x\":1},{}]},\"raw\":[1,2]}");
}

TEST(JsonLine, StringsAreEscaped) {
  EXPECT_EQ(metaroce::apps::json_quote(""), "\"\"");
  EXPECT_EQ(metaroce::apps::json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(metaroce::apps::json_quote("\n\t\r"), "\"\\n\\t\\r\"");
  EXPECT_EQ(metaroce::apps::json_quote(std::string_view("\x01\x1f\0z", 4)), "\"\\u0001\\u001f\\u0000z\"");
  EXPECT_EQ(metaroce::apps::json_quote("caf\xc3\xa9 \x7f"), "\"caf\xc3\xa9 \x7f\"");  // UTF-8 and DEL as they are
  JsonLine j;
  j.add("k", "x\"y");
  EXPECT_EQ(std::move(j).finish(), "{\"k\":\"x\\\"y\"}");
}

}  // namespace
