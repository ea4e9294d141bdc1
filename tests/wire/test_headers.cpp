// Every header survives encode -> decode with random field values, and sits
// at the byte offsets doc/WIRE.md gives.
#include <algorithm>
#include <array>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "wire/byte_order.hpp"
#include "wire/headers.hpp"

namespace {

using namespace metaroce::wire;

template <typename T>
T random_value(std::mt19937_64& rng) {
  return static_cast<T>(rng());
}

constexpr int rounds = 10000;

TEST(Headers, BthRoundTripRandom) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < rounds; ++i) {
    Bth in;
    in.opcode = random_value<std::uint8_t>(rng);
    in.solicited = rng() & 1;
    in.mig_req = rng() & 1;
    in.pad = rng() & 3;
    in.tver = rng() & 0xf;
    in.pkey = random_value<std::uint16_t>(rng);
    in.fecn = rng() & 1;
    in.becn = rng() & 1;
    in.dest_qp = rng() & qpn_mask;
    in.ack_req = rng() & 1;
    in.psn = rng() & psn_mask;
    std::array<std::uint8_t, bth_size> bytes{};
    encode(in, bytes.data());
    Bth out;
    decode(bytes.data(), out);
    ASSERT_EQ(out.opcode, in.opcode);
    ASSERT_EQ(out.solicited, in.solicited);
    ASSERT_EQ(out.mig_req, in.mig_req);
    ASSERT_EQ(out.pad, in.pad);
    ASSERT_EQ(out.tver, in.tver);
    ASSERT_EQ(out.pkey, in.pkey);
    ASSERT_EQ(out.fecn, in.fecn);
    ASSERT_EQ(out.becn, in.becn);
    ASSERT_EQ(out.dest_qp, in.dest_qp);
    ASSERT_EQ(out.ack_req, in.ack_req);
    ASSERT_EQ(out.psn, in.psn);
    // Reserved bits are written as zero.
    ASSERT_EQ(bytes[4] & 0x3f, 0);
    ASSERT_EQ(bytes[8] & 0x7f, 0);
  }
}

TEST(Headers, BthByteLayout) {
  Bth b;
  b.opcode = 0x0a;
  b.solicited = true;
  b.pad = 3;
  b.pkey = 0x1234;
  b.becn = true;
  b.dest_qp = 0xffffff;
  b.ack_req = true;
  b.psn = 0xabcdef;
  std::array<std::uint8_t, bth_size> bytes{};
  encode(b, bytes.data());
  const std::array<std::uint8_t, bth_size> expected = {0x0a, 0xb0, 0x12, 0x34, 0x40, 0xff,
                                                       0xff, 0xff, 0x80, 0xab, 0xcd, 0xef};
  EXPECT_EQ(bytes, expected);
}

TEST(Headers, PsnAndQpnWrapAt24Bits) {
  Bth b;
  b.psn = 0x01ffffff;  // bit 24 must not leak into AckReq's byte
  b.dest_qp = 0x01000000;
  std::array<std::uint8_t, bth_size> bytes{};
  encode(b, bytes.data());
  Bth out;
  decode(bytes.data(), out);
  EXPECT_EQ(out.psn, 0xffffffu);
  EXPECT_FALSE(out.ack_req);
  EXPECT_EQ(out.dest_qp, 0u);
  EXPECT_FALSE(out.fecn);
  EXPECT_FALSE(out.becn);
}

TEST(Headers, RethAethDethAtomicRoundTripRandom) {
  std::mt19937_64 rng(2);
  for (int i = 0; i < rounds; ++i) {
    Reth r{rng(), random_value<std::uint32_t>(rng), random_value<std::uint32_t>(rng)};
    std::array<std::uint8_t, atomic_eth_size> bytes{};
    encode(r, bytes.data());
    Reth r2;
    decode(bytes.data(), r2);
    ASSERT_EQ(r2.va, r.va);
    ASSERT_EQ(r2.rkey, r.rkey);
    ASSERT_EQ(r2.dma_len, r.dma_len);

    Aeth a{random_value<std::uint8_t>(rng), static_cast<std::uint32_t>(rng() & 0xffffff)};
    encode(a, bytes.data());
    Aeth a2;
    decode(bytes.data(), a2);
    ASSERT_EQ(a2.syndrome, a.syndrome);
    ASSERT_EQ(a2.msn, a.msn);

    Deth d{random_value<std::uint32_t>(rng), static_cast<std::uint32_t>(rng() & qpn_mask)};
    encode(d, bytes.data());
    Deth d2;
    decode(bytes.data(), d2);
    ASSERT_EQ(d2.qkey, d.qkey);
    ASSERT_EQ(d2.src_qp, d.src_qp);

    AtomicEth e{rng(), random_value<std::uint32_t>(rng), rng(), rng()};
    encode(e, bytes.data());
    AtomicEth e2;
    decode(bytes.data(), e2);
    ASSERT_EQ(e2.va, e.va);
    ASSERT_EQ(e2.rkey, e.rkey);
    ASSERT_EQ(e2.swap_add, e.swap_add);
    ASSERT_EQ(e2.compare, e.compare);
  }
}

TEST(Headers, MetarocExtensionsRoundTripRandom) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < rounds; ++i) {
    std::array<std::uint8_t, mr_path_ack_size> bytes{};
    MrDataHeader d{random_value<std::uint8_t>(rng), random_value<std::uint8_t>(rng),
                   random_value<std::uint16_t>(rng), random_value<std::uint32_t>(rng),
                   random_value<std::uint32_t>(rng), random_value<std::uint32_t>(rng)};
    encode(d, bytes.data());
    MrDataHeader d2;
    decode(bytes.data(), d2);
    ASSERT_EQ(d2.path_id, d.path_id);
    ASSERT_EQ(d2.flags, d.flags);
    ASSERT_EQ(d2.stream_id, d.stream_id);
    ASSERT_EQ(d2.path_seq, d.path_seq);
    ASSERT_EQ(d2.msg_seq, d.msg_seq);
    ASSERT_EQ(d2.tsval, d.tsval);

    MrWriteHeader w{rng(), random_value<std::uint32_t>(rng), random_value<std::uint32_t>(rng),
                    random_value<std::uint32_t>(rng)};
    encode(w, bytes.data());
    MrWriteHeader w2;
    decode(bytes.data(), w2);
    ASSERT_EQ(w2.va, w.va);
    ASSERT_EQ(w2.rkey, w.rkey);
    ASSERT_EQ(w2.msg_len, w.msg_len);
    ASSERT_EQ(w2.msg_offset, w.msg_offset);

    MrSendHeader s{random_value<std::uint32_t>(rng), random_value<std::uint32_t>(rng),
                   random_value<std::uint32_t>(rng)};
    encode(s, bytes.data());
    MrSendHeader s2;
    decode(bytes.data(), s2);
    ASSERT_EQ(s2.recv_seq, s.recv_seq);
    ASSERT_EQ(s2.msg_len, s.msg_len);
    ASSERT_EQ(s2.msg_offset, s.msg_offset);

    MrAckHeader a{random_value<std::uint8_t>(rng), random_value<std::uint8_t>(rng),
                  static_cast<std::uint32_t>(rng() & psn_mask), random_value<std::uint32_t>(rng),
                  random_value<std::uint32_t>(rng)};
    encode(a, bytes.data());
    MrAckHeader a2;
    decode(bytes.data(), a2);
    ASSERT_EQ(a2.syndrome, a.syndrome);
    ASSERT_EQ(a2.path_count, a.path_count);
    ASSERT_EQ(a2.delivered_psn, a.delivered_psn);
    ASSERT_EQ(a2.completed_msn, a.completed_msn);
    ASSERT_EQ(a2.rate_hint_mbps, a.rate_hint_mbps);

    MrPathAck p;
    p.path_id = random_value<std::uint8_t>(rng);
    p.ce_count = random_value<std::uint16_t>(rng);
    p.cum_seq = random_value<std::uint32_t>(rng);
    p.ts_echo = random_value<std::uint32_t>(rng);
    for (auto& byte : p.sack) byte = random_value<std::uint8_t>(rng);
    encode(p, bytes.data());
    MrPathAck p2;
    decode(bytes.data(), p2);
    ASSERT_EQ(p2.path_id, p.path_id);
    ASSERT_EQ(p2.ce_count, p.ce_count);
    ASSERT_EQ(p2.cum_seq, p.cum_seq);
    ASSERT_EQ(p2.ts_echo, p.ts_echo);
    ASSERT_EQ(p2.sack, p.sack);
  }
}

TEST(Headers, SackBitNumbering) {
  MrPathAck p;
  p.set_sack_bit(0);
  p.set_sack_bit(9);
  p.set_sack_bit(255);
  std::array<std::uint8_t, mr_path_ack_size> bytes{};
  encode(p, bytes.data());
  EXPECT_EQ(bytes[12], 0x01);       // bit 0: byte 0, least-significant bit
  EXPECT_EQ(bytes[13], 0x02);       // bit 9: byte 1, bit 1
  EXPECT_EQ(bytes[12 + 31], 0x80);  // bit 255: byte 31, most-significant bit
  for (std::size_t i = 0; i < sack_bits; ++i) EXPECT_EQ(p.sack_bit(i), i == 0 || i == 9 || i == 255) << i;
}

// The highest set bit, against a bit-by-bit scan, for each single bit and
// for pairs across word boundaries.
TEST(Headers, HighestSackBit) {
  EXPECT_EQ(MrPathAck{}.highest_sack_bit(), -1);
  for (std::size_t i = 0; i < sack_bits; ++i) {
    MrPathAck p;
    p.set_sack_bit(i);
    EXPECT_EQ(p.highest_sack_bit(), static_cast<int>(i)) << i;
    const std::size_t lower = i / 3;
    p.set_sack_bit(lower);
    EXPECT_EQ(p.highest_sack_bit(), static_cast<int>(i)) << i << " with " << lower;
  }
}

TEST(Headers, Ipv4RoundTripAndChecksum) {
  Ipv4Header h;
  h.dscp = 46;
  h.ecn = 3;
  h.total_length = 1500;
  h.identification = 0xbeef;
  h.ttl = 1;
  h.src = 0xc0a80101;
  h.dst = 0x0a000002;
  std::array<std::uint8_t, ipv4_header_size> bytes{};
  encode(h, bytes.data());
  store_be16(bytes.data() + 10, ipv4_header_checksum(bytes.data(), bytes.size()));
  EXPECT_EQ(ipv4_header_checksum(bytes.data(), bytes.size()), 0);
  Ipv4Header out;
  decode(bytes.data(), out);
  EXPECT_EQ(out.dscp, 46);
  EXPECT_EQ(out.ecn, 3);
  EXPECT_EQ(out.total_length, 1500);
  EXPECT_EQ(out.identification, 0xbeef);
  EXPECT_TRUE(out.dont_fragment);
  EXPECT_EQ(out.ttl, 1);
  EXPECT_EQ(out.src, 0xc0a80101u);
  EXPECT_EQ(out.dst, 0x0a000002u);
  // RFC 1071 example header (20 bytes) with known checksum 0xb861.
  const std::array<std::uint8_t, 20> rfc = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40,
                                            0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
                                            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  EXPECT_EQ(ipv4_header_checksum(rfc.data(), rfc.size()), 0xb861);
}

// The checksum updated for a new total length equals the one computed
// over the whole changed header, for random headers and lengths (sums near
// 0x0000 and 0xffff included by the sheer number of cases).
TEST(Headers, Ipv4ChecksumUpdateEqualsRecomputing) {
  std::mt19937 rng(1624);
  for (int k = 0; k < 200000; ++k) {
    std::array<std::uint8_t, ipv4_header_size> bytes{};
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    bytes[0] = 0x45;
    store_be16(bytes.data() + 10, 0);
    store_be16(bytes.data() + 10, ipv4_header_checksum(bytes.data(), bytes.size()));
    const std::uint16_t before = load_be16(bytes.data() + 2);
    const auto after = static_cast<std::uint16_t>(rng());
    const std::uint16_t updated = ipv4_checksum_update(load_be16(bytes.data() + 10), before, after);
    store_be16(bytes.data() + 2, after);
    store_be16(bytes.data() + 10, updated);
    ASSERT_EQ(ipv4_header_checksum(bytes.data(), bytes.size()), 0) << k;
  }
}

TEST(Headers, Ipv6RoundTrip) {
  Ipv6Header h;
  h.dscp = 10;
  h.ecn = 1;
  h.flow_label = 0xfffff;
  h.payload_length = 9000;
  h.hop_limit = 255;
  for (std::size_t i = 0; i < 16; ++i) {
    h.src[i] = static_cast<std::uint8_t>(i);
    h.dst[i] = static_cast<std::uint8_t>(255 - i);
  }
  std::array<std::uint8_t, ipv6_header_size> bytes{};
  encode(h, bytes.data());
  EXPECT_EQ(bytes[0] >> 4, 6);
  Ipv6Header out;
  decode(bytes.data(), out);
  EXPECT_EQ(out.dscp, 10);
  EXPECT_EQ(out.ecn, 1);
  EXPECT_EQ(out.flow_label, 0xfffffu);
  EXPECT_EQ(out.payload_length, 9000);
  EXPECT_EQ(out.next_header, ip_protocol_udp);
  EXPECT_EQ(out.hop_limit, 255);
  EXPECT_EQ(out.src, h.src);
  EXPECT_EQ(out.dst, h.dst);
}

TEST(Headers, AckKindFromSyndrome) {
  EXPECT_EQ(ack_kind(0x1f), AckKind::ack);
  EXPECT_EQ(ack_kind(0x2e), AckKind::rnr_nak);
  EXPECT_EQ(ack_kind(syndrome::nak_remote_access_error), AckKind::nak);
  EXPECT_EQ(ack_kind(0x40), AckKind::reserved);
}

}  // namespace

// copy_bytes copies exactly n bytes for every n on either side of its
// 4/8/16/128-byte branches, at every alignment, and nothing around them.
TEST(Headers, CopyBytesCopiesExactlyN) {
  std::vector<std::uint8_t> src(320), dst(320 + 64);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 37 + 11);
  std::size_t bad = 0;
  for (std::size_t n = 0; n <= 300; ++n) {
    for (std::size_t at = 0; at < 16; ++at) {
      std::fill(dst.begin(), dst.end(), std::uint8_t{0xee});
      copy_bytes(dst.data() + 16 + at, src.data() + at, n);
      for (std::size_t i = 0; i < dst.size(); ++i) {
        const bool inside = i >= 16 + at && i < 16 + at + n;
        if (dst[i] != (inside ? src[i - 16] : 0xee)) ++bad;
      }
    }
  }
  EXPECT_EQ(bad, 0u);
}
