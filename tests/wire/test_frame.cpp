// Frames: build -> parse of every opcode in both modes; every truncation;
// every named parse error; boundary values.
#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "wire/frame.hpp"
#include "wire_samples.hpp"

namespace {

using namespace metaroce::wire;
using metaroce::test::sample_spec;

std::vector<std::uint8_t> build(const FrameSpec& spec, std::size_t payload_len) {
  std::vector<std::uint8_t> payload(payload_len);
  for (std::size_t i = 0; i < payload_len; ++i) payload[i] = metaroce::test::payload_byte(i);
  std::vector<std::uint8_t> frame(headers_size(spec) + payload_len + 8);
  frame.resize(build_frame(spec, payload, frame));
  return frame;
}

void expect_same_bth(const Bth& a, const Bth& b) {
  EXPECT_EQ(a.opcode, b.opcode);
  EXPECT_EQ(a.solicited, b.solicited);
  EXPECT_EQ(a.pkey, b.pkey);
  EXPECT_EQ(a.fecn, b.fecn);
  EXPECT_EQ(a.becn, b.becn);
  EXPECT_EQ(a.dest_qp, b.dest_qp);
  EXPECT_EQ(a.ack_req, b.ack_req);
  EXPECT_EQ(a.psn, b.psn);
}

TEST(Frame, EverySampleRoundTrips) {
  std::mt19937_64 rng(11);
  const auto specs = metaroce::test::all_sample_specs();
  ASSERT_EQ(specs.size(), 4u * 49u);  // 49 opcodes x {v4, v6} x {vlan, none}
  for (FrameSpec spec : specs) {
    const OpcodeInfo& info = opcode_info(spec.bth.opcode);
    spec.bth.psn = static_cast<std::uint32_t>(rng() & psn_mask);
    spec.bth.dest_qp = static_cast<std::uint32_t>(rng() & qpn_mask);
    spec.bth.pkey = static_cast<std::uint16_t>(rng());
    const std::size_t payload_len = info.has(has_payload) ? rng() % 1500 : 0;
    const auto frame = build(spec, payload_len);
    ASSERT_FALSE(frame.empty()) << info.name;
    ParsedFrame p;
    ASSERT_EQ(parse_frame(frame, p), ParseError::ok) << info.name;
    SCOPED_TRACE(std::string(info.name));
    EXPECT_EQ(p.ip_version, spec.ip_version);
    const EthernetHeader eth = p.ethernet();
    EXPECT_EQ(eth.vlan_present, spec.eth.vlan_present);
    EXPECT_EQ(eth.vlan_tci, spec.eth.vlan_tci);
    EXPECT_EQ(eth.src, spec.eth.src);
    EXPECT_EQ(eth.dst, spec.eth.dst);
    EXPECT_EQ(eth.ethertype, spec.ip_version == 6 ? ethertype_ipv6 : ethertype_ipv4);
    EXPECT_EQ(p.udp_src_port, spec.udp.src_port);
    EXPECT_EQ(p.udp().src_port, spec.udp.src_port);
    EXPECT_EQ(p.udp().dst_port, roce_udp_port);
    EXPECT_EQ(p.udp().length, frame.size() - p.l4_offset);
    if (spec.ip_version == 4) {
      EXPECT_EQ(p.ipv4().src, spec.ipv4.src);
      EXPECT_EQ(p.ipv4().dst, spec.ipv4.dst);
      EXPECT_EQ(p.ipv4().identification, spec.ipv4.identification);
      EXPECT_EQ(p.ipv4().total_length, frame.size() - p.l3_offset);
    } else {
      EXPECT_EQ(p.ipv6().src, spec.ipv6.src);
      EXPECT_EQ(p.ipv6().flow_label, spec.ipv6.flow_label);
      EXPECT_EQ(p.ipv6().payload_length, frame.size() - p.l4_offset);
    }
    EXPECT_EQ(p.ecn(), 2);
    EXPECT_EQ(p.dscp(), 26);
    expect_same_bth(p.bth, spec.bth);
    EXPECT_EQ(p.bth.pad, pad_for(payload_len));
    EXPECT_EQ(p.headers, info.headers);
    ASSERT_EQ(p.payload.size(), payload_len);
    for (std::size_t i = 0; i < payload_len; ++i) ASSERT_EQ(p.payload[i], metaroce::test::payload_byte(i));
    if (info.has(has_reth)) {
      EXPECT_EQ(p.reth.va, spec.reth.va);
      EXPECT_EQ(p.reth.rkey, spec.reth.rkey);
      EXPECT_EQ(p.reth.dma_len, spec.reth.dma_len);
    }
    if (info.has(has_aeth)) {
      EXPECT_EQ(p.aeth.syndrome, spec.aeth.syndrome);
      EXPECT_EQ(p.aeth.msn, spec.aeth.msn);
    }
    if (info.has(has_imm)) {
      EXPECT_EQ(p.imm, spec.imm);
    }
    if (info.has(has_ieth)) {
      EXPECT_EQ(p.ieth_rkey, spec.ieth_rkey);
    }
    if (info.has(has_deth)) {
      EXPECT_EQ(p.deth.src_qp, spec.deth.src_qp);
    }
    if (info.has(has_atomic_eth)) {
      EXPECT_EQ(p.atomic_eth.compare, spec.atomic_eth.compare);
    }
    if (info.has(has_atomic_ack_eth)) {
      EXPECT_EQ(p.atomic_ack_orig, spec.atomic_ack_orig);
    }
    if (info.has(has_mr_data)) {
      EXPECT_EQ(p.mr_data.path_id, spec.mr_data.path_id);
      EXPECT_EQ(p.mr_data.path_seq, spec.mr_data.path_seq);
      EXPECT_EQ(p.mr_data.msg_seq, spec.mr_data.msg_seq);
      EXPECT_EQ(p.mr_data.stream_id, spec.mr_data.stream_id);
    }
    if (info.has(has_mr_write)) {
      EXPECT_EQ(p.mr_write.va, spec.mr_write.va);
    }
    if (info.has(has_mr_send)) {
      EXPECT_EQ(p.mr_send.recv_seq, spec.mr_send.recv_seq);
    }
    if (info.has(has_mr_ack)) {
      ASSERT_EQ(p.mr_ack.path_count, spec.mr_path_acks.size());
      for (std::size_t i = 0; i < spec.mr_path_acks.size(); ++i) {
        const MrPathAck a = p.path_ack(i);
        EXPECT_EQ(a.path_id, spec.mr_path_acks[i].path_id);
        EXPECT_EQ(a.cum_seq, spec.mr_path_acks[i].cum_seq);
        EXPECT_EQ(a.sack, spec.mr_path_acks[i].sack);
      }
    }
  }
}

// Each truncation, into an exactly-sized buffer (so ASan sees any overread),
// is "truncated": the IP length check catches every cut after the IP header.
// peek_dest_qp reads the QPN parse_frame decodes, for every sample (both
// IP versions, with and without a VLAN tag), and refuses every frame too
// short to hold the QPN there; transport_headers_size counts the headers
// parse_frame finds, and refuses them one byte short.
TEST(Frame, PeekedDestinationQpIsTheParsedOne) {
  std::mt19937_64 rng(12);
  for (FrameSpec spec : metaroce::test::all_sample_specs()) {
    spec.bth.dest_qp = static_cast<std::uint32_t>(rng() & qpn_mask);
    const auto frame = build(spec, 0);
    ParsedFrame p;
    ASSERT_EQ(parse_frame(frame, p, ParseOptions{.verify_ip_checksum = false, .verify_icrc = false}),
              ParseError::ok);
    EXPECT_EQ(transport_headers_size(ByteSpan(frame).subspan(p.bth_offset)),
              std::size_t{p.payload_offset} - p.bth_offset);
    EXPECT_EQ(transport_headers_size(ByteSpan(frame.data() + p.bth_offset, p.payload_offset - p.bth_offset - 1u)), 0u);
    std::uint32_t qpn = 0;
    ASSERT_TRUE(peek_dest_qp(frame, qpn));
    EXPECT_EQ(qpn, spec.bth.dest_qp);
    const std::size_t qpn_end = std::size_t{p.bth_offset} + 8;  // the QPN is the BTH's bytes 5..7
    EXPECT_FALSE(peek_dest_qp(ByteSpan(frame.data(), qpn_end - 1), qpn));
    EXPECT_TRUE(peek_dest_qp(ByteSpan(frame.data(), qpn_end), qpn));
  }
  std::vector<std::uint8_t> arp(64, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  std::uint32_t qpn = 0;
  EXPECT_FALSE(peek_dest_qp(arp, qpn));
}

TEST(Frame, EveryTruncationIsRejected) {
  for (const auto& frame : metaroce::test::sample_frames()) {
    for (std::size_t len = 0; len < frame.size(); ++len) {
      std::vector<std::uint8_t> cut(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(len));
      cut.shrink_to_fit();
      ParsedFrame p;
      ASSERT_EQ(parse_frame(cut, p), ParseError::truncated) << "length " << len << " of " << frame.size();
    }
  }
}

TEST(Frame, EthernetPaddingAfterTheIpPacketIsIgnored) {
  const auto frame = build(sample_spec(opcode::rc | opcode::acknowledge, 4, false), 0);
  auto padded = frame;
  padded.resize(frame.size() + 6, 0);  // a NIC pads short frames to 60 bytes
  ParsedFrame p;
  ASSERT_EQ(parse_frame(padded, p), ParseError::ok);
  EXPECT_EQ(p.payload.size(), 0u);
  EXPECT_EQ(p.aeth.msn, 0x00abcdu);
}

TEST(Frame, BoundaryValues) {
  FrameSpec spec = sample_spec(opcode::rc | opcode::write_only, 4, true);
  spec.bth.psn = psn_mask;
  spec.bth.dest_qp = qpn_mask;
  spec.bth.pkey = 0;
  for (std::size_t len : {0u, 1u, 2u, 3u, 4u, 5u, 9000u}) {
    const auto frame = build(spec, len);
    ParsedFrame p;
    ASSERT_EQ(parse_frame(frame, p), ParseError::ok) << len;
    EXPECT_EQ(p.bth.psn, psn_mask);
    EXPECT_EQ(p.bth.dest_qp, qpn_mask);
    EXPECT_EQ(p.bth.pad, (4 - len % 4) % 4);
    EXPECT_EQ(p.payload.size(), len);
    EXPECT_EQ((p.payload.size() + p.bth.pad) % 4, 0u);
  }
  // The largest metaroce ACK: 64 paths with every SACK bit set.
  std::vector<MrPathAck> paths(max_paths);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    paths[i].path_id = static_cast<std::uint8_t>(i);
    paths[i].cum_seq = 0xffffffff;
    paths[i].sack.fill(0xff);
  }
  FrameSpec ack = sample_spec(opcode::mr_ack, 6, false);
  ack.mr_path_acks = paths;
  const auto frame = build(ack, 0);
  ParsedFrame p;
  ASSERT_EQ(parse_frame(frame, p), ParseError::ok);
  ASSERT_EQ(p.mr_ack.path_count, max_paths);
  EXPECT_EQ(p.path_ack(63).path_id, 63);
  EXPECT_TRUE(p.path_ack(63).sack_bit(255));
  // One more path does not fit the format.
  paths.push_back(paths.back());
  ack.mr_path_acks = paths;
  std::vector<std::uint8_t> out(8192);
  EXPECT_EQ(build_frame(ack, {}, out), 0u);
}

TEST(Frame, BuilderRefusesTooSmallBufferAndBadIpVersion) {
  FrameSpec spec = sample_spec(opcode::mr_send, 4, false);
  std::vector<std::uint8_t> payload(100);
  std::vector<std::uint8_t> out(headers_size(spec) + 100 + 3);  // one byte short of the ICRC
  EXPECT_EQ(build_frame(spec, payload, out), 0u);
  out.resize(out.size() + 1);
  EXPECT_EQ(build_frame(spec, payload, out), out.size());
  spec.ip_version = 5;
  EXPECT_EQ(build_frame(spec, payload, out), 0u);
}

// --- every named parse error, from a frame edited in one place ---

void fix_ipv4_checksum(std::vector<std::uint8_t>& f, std::size_t l3 = ethernet_header_size) {
  const std::size_t ihl = std::size_t{f[l3] & 0x0fu} * 4;
  store_be16(f.data() + l3 + 10, 0);
  store_be16(f.data() + l3 + 10, ipv4_header_checksum(f.data() + l3, ihl));
}

ParseError parse(const std::vector<std::uint8_t>& f) {
  ParsedFrame p;
  return parse_frame(f, p);
}

std::vector<std::uint8_t> write_only_v4(std::size_t len = 64) {
  return build(sample_spec(opcode::rc | opcode::write_only, 4, false), len);
}

constexpr std::size_t l3 = ethernet_header_size;
constexpr std::size_t l4 = l3 + ipv4_header_size;
constexpr std::size_t bth_at = l4 + udp_header_size;

TEST(FrameErrors, NotIp) {
  auto f = write_only_v4();
  store_be16(f.data() + 12, 0x0806);
  EXPECT_EQ(parse(f), ParseError::not_ip);
}

TEST(FrameErrors, BadIpVersion) {
  auto f = write_only_v4();
  f[l3] = 0x65;
  EXPECT_EQ(parse(f), ParseError::bad_ip_version);
  auto g = build(sample_spec(opcode::mr_ack, 6, false), 0);
  g[l3] = static_cast<std::uint8_t>(0x40 | (g[l3] & 0x0f));
  EXPECT_EQ(parse(g), ParseError::bad_ip_version);
}

TEST(FrameErrors, BadIpHeaderLength) {
  auto f = write_only_v4();
  f[l3] = 0x44;
  EXPECT_EQ(parse(f), ParseError::bad_ip_header_length);
}

TEST(FrameErrors, Ipv4Options) {
  auto f = write_only_v4();
  // Insert one 4-byte option word (NOPs) and fix lengths and checksum.
  f.insert(f.begin() + l4, {1, 1, 1, 1});
  f[l3] = 0x46;
  store_be16(f.data() + l3 + 2, static_cast<std::uint16_t>(load_be16(f.data() + l3 + 2) + 4));
  fix_ipv4_checksum(f);
  EXPECT_EQ(parse(f), ParseError::ipv4_options);
}

TEST(FrameErrors, IpFragment) {
  for (std::uint16_t frag : {std::uint16_t{0x2000} /* MF */, std::uint16_t{0x0001} /* offset 8 */}) {
    auto f = write_only_v4();
    store_be16(f.data() + l3 + 6, frag);
    fix_ipv4_checksum(f);
    EXPECT_EQ(parse(f), ParseError::ip_fragment) << frag;
  }
}

TEST(FrameErrors, BadIpLength) {
  auto f = write_only_v4();
  store_be16(f.data() + l3 + 2, 19);
  fix_ipv4_checksum(f);
  EXPECT_EQ(parse(f), ParseError::bad_ip_length);
}

TEST(FrameErrors, BadIpChecksum) {
  auto f = write_only_v4();
  f[l3 + 12] ^= 0x10;  // source address
  EXPECT_EQ(parse(f), ParseError::bad_ip_checksum);
  ParsedFrame p;
  EXPECT_EQ(parse_frame(f, p, ParseOptions{false, false}), ParseError::ok);
}

TEST(FrameErrors, NotUdp) {
  auto f = write_only_v4();
  f[l3 + 9] = 6;
  fix_ipv4_checksum(f);
  EXPECT_EQ(parse(f), ParseError::not_udp);
  auto g = build(sample_spec(opcode::mr_ack, 6, false), 0);
  g[l3 + 6] = 6;
  EXPECT_EQ(parse(g), ParseError::not_udp);
}

TEST(FrameErrors, NotRocePort) {
  auto f = write_only_v4();
  store_be16(f.data() + l4 + 2, 4792);
  EXPECT_EQ(parse(f), ParseError::not_roce_port);
}

TEST(FrameErrors, BadUdpLength) {
  auto f = write_only_v4();
  store_be16(f.data() + l4 + 4, static_cast<std::uint16_t>(load_be16(f.data() + l4 + 4) - 4));
  EXPECT_EQ(parse(f), ParseError::bad_udp_length);
  // An IP payload too small to hold a UDP header.
  auto g = write_only_v4();
  store_be16(g.data() + l3 + 2, ipv4_header_size + 4);
  fix_ipv4_checksum(g);
  EXPECT_EQ(parse(g), ParseError::bad_udp_length);
}

TEST(FrameErrors, UnknownOpcode) {
  for (std::uint8_t op : {std::uint8_t{0x15}, std::uint8_t{0x40}, std::uint8_t{0xcb}, std::uint8_t{0xff}}) {
    auto f = write_only_v4();
    f[bth_at] = op;
    EXPECT_EQ(parse(f), ParseError::unknown_opcode) << int{op};
  }
}

TEST(FrameErrors, BadHeaderField) {
  auto f = write_only_v4();
  f[bth_at + 1] |= 0x01;  // TVer 1
  EXPECT_EQ(parse(f), ParseError::bad_header_field);

  auto g = build(sample_spec(opcode::mr_write, 4, false), 64);
  g[bth_at + bth_size + 1] = 0x80;  // undefined metaroce flag
  EXPECT_EQ(parse(g), ParseError::bad_header_field);
  auto h = build(sample_spec(opcode::mr_write, 4, false), 64);
  h[bth_at + bth_size] = max_paths;  // path id out of range
  EXPECT_EQ(parse(h), ParseError::bad_header_field);

  auto a = build(sample_spec(opcode::mr_ack, 4, false), 0);
  a[bth_at + bth_size + 1] = max_paths + 1;  // path count
  EXPECT_EQ(parse(a), ParseError::bad_header_field);
}

TEST(FrameErrors, BadPad) {
  // Pad larger than the payload.
  auto f = write_only_v4(0);
  f[bth_at + 1] |= 0x10;
  EXPECT_EQ(parse(f), ParseError::bad_pad);
  // Pad on an opcode without payload.
  auto a = build(sample_spec(opcode::rc | opcode::acknowledge, 4, false), 0);
  a[bth_at + 1] |= 0x20;
  EXPECT_EQ(parse(a), ParseError::bad_pad);
  // Payload plus pad not a multiple of four: remove one payload byte.
  auto g = write_only_v4(8);
  g.erase(g.begin() + static_cast<std::ptrdiff_t>(bth_at + bth_size + reth_size));
  store_be16(g.data() + l3 + 2, static_cast<std::uint16_t>(load_be16(g.data() + l3 + 2) - 1));
  store_be16(g.data() + l4 + 4, static_cast<std::uint16_t>(load_be16(g.data() + l4 + 4) - 1));
  fix_ipv4_checksum(g);
  EXPECT_EQ(parse(g), ParseError::bad_pad);
}

TEST(FrameErrors, LengthMismatch) {
  // A SEND ONLY with 8 payload bytes relabelled ACK: 4 bytes follow the AETH.
  auto f = build(sample_spec(opcode::rc | opcode::send_only, 4, false), 8);
  f[bth_at] = opcode::rc | opcode::acknowledge;
  EXPECT_EQ(parse(f), ParseError::length_mismatch);
  // A READ REQUEST relabelled WRITE ONLY IMM: RETH fits, ImmDt does not.
  auto g = build(sample_spec(opcode::rc | opcode::read_request, 4, false), 0);
  g[bth_at] = opcode::rc | opcode::write_only_imm;
  EXPECT_EQ(parse(g), ParseError::length_mismatch);
  // UDP payload smaller than BTH + ICRC.
  auto h = write_only_v4(0);
  const std::size_t cut = bth_size + reth_size;  // keep 4 bytes: not enough for the BTH
  h.resize(h.size() - cut);
  store_be16(h.data() + l3 + 2, static_cast<std::uint16_t>(load_be16(h.data() + l3 + 2) - cut));
  store_be16(h.data() + l4 + 4, static_cast<std::uint16_t>(load_be16(h.data() + l4 + 4) - cut));
  fix_ipv4_checksum(h);
  EXPECT_EQ(parse(h), ParseError::length_mismatch);
}

TEST(FrameErrors, BadIcrc) {
  for (const auto& frame : metaroce::test::sample_frames()) {
    ParsedFrame p;
    ASSERT_EQ(parse_frame(frame, p), ParseError::ok);
    // Flip each bit of the ICRC, and a bit in the last covered byte.
    for (std::size_t bit = 0; bit < 32; ++bit) {
      auto f = frame;
      f[f.size() - 4 + bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
      ASSERT_EQ(parse(f), ParseError::bad_icrc);
    }
    auto f = frame;
    f[f.size() - 5] ^= 0x80;
    ASSERT_EQ(parse(f), ParseError::bad_icrc);
    ParsedFrame q;
    EXPECT_EQ(parse_frame(f, q, ParseOptions{true, false}), ParseError::ok);
    EXPECT_FALSE(q.icrc_checked);
  }
}

TEST(FrameErrors, EveryReasonHasAName) {
  std::vector<std::string_view> names;
  for (std::size_t i = 0; i < parse_error_count; ++i) {
    const std::string_view n = to_string(static_cast<ParseError>(i));
    EXPECT_FALSE(n.empty());
    EXPECT_NE(n, "invalid");
    names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << "duplicate name";
  EXPECT_EQ(to_string(ParseError::bad_icrc), "bad_icrc");
  EXPECT_EQ(to_string(ParseError::count_), "invalid");
}

// Random bytes never crash the parser and never pass as a frame.
TEST(Frame, RandomBytesAreRejected) {
  std::mt19937_64 rng(99);
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::uint8_t> junk(rng() % 200);
    for (auto& b : junk) b = static_cast<std::uint8_t>(rng());
    if (junk.size() >= 14 && (rng() & 1)) store_be16(junk.data() + 12, ethertype_ipv4);
    ParsedFrame p;
    ASSERT_NE(parse_frame(junk, p), ParseError::ok);
  }
}

}  // namespace
