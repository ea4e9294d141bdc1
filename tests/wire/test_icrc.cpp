// ICRC: a known answer made by scapy, chaining over pieces, and exactly the
// variant fields masked.
#include <isa-l/crc.h>
#include <sys/mman.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "wire/frame.hpp"
#include "wire/byte_order.hpp"
#include "wire/crc_fold.hpp"
#include "wire/icrc.hpp"
#include "wire_samples.hpp"

namespace {

using namespace metaroce::wire;

// A readable page right after an inaccessible one: bytes copied to its
// start have nothing readable before them, so a read one byte early crashes.
class AfterGuardPage {
 public:
  static constexpr std::size_t size = 4096;
  AfterGuardPage() {
    void* m = mmap(nullptr, 2 * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    map_ = static_cast<std::uint8_t*>(m);
    if (mprotect(map_, size, PROT_NONE) != 0) {
      munmap(map_, 2 * size);
      map_ = nullptr;
    }
  }
  ~AfterGuardPage() {
    if (map_ != nullptr) munmap(map_, 2 * size);
  }
  AfterGuardPage(const AfterGuardPage&) = delete;
  AfterGuardPage& operator=(const AfterGuardPage&) = delete;
  [[nodiscard]] bool ok() const noexcept { return map_ != nullptr; }
  [[nodiscard]] std::uint8_t* page() const noexcept { return map_ + size; }

 private:
  std::uint8_t* map_ = nullptr;
};

std::vector<std::uint8_t> from_hex(std::string_view hex) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// RC SEND ONLY over IPv4, 11 payload bytes + 1 pad, built by scapy's
// contrib.roce (its ICRC code shares nothing with ours).
constexpr std::string_view scapy_send_only =
    "02000000000202000000000108004502003800014000401126b00a0000010a000002c00012b700240000"
    "0410ffff00000012000000070102030405060708090a0b00f0e1fbc9";

TEST(Icrc, MatchesScapyKnownAnswer) {
  const auto frame = from_hex(scapy_send_only);
  ASSERT_EQ(frame.size(), 70u);
  const ByteSpan from_ip(frame.data() + 14, frame.size() - 14 - 4);
  EXPECT_EQ(compute_icrc(from_ip), 0xc9fbe1f0u);
  ParsedFrame parsed;
  ASSERT_EQ(parse_frame(frame, parsed), ParseError::ok);
  EXPECT_EQ(parsed.icrc, 0xc9fbe1f0u);
  EXPECT_EQ(parsed.payload.size(), 11u);
  EXPECT_EQ(parsed.bth.pad, 1);
}

TEST(Icrc, PlainCrc32KnownAnswer) {
  // The CRC-32 check value: crc32("123456789") = 0xcbf43926.
  const std::string_view check = "123456789";
  const ByteSpan bytes(reinterpret_cast<const std::uint8_t*>(check.data()), check.size());
  EXPECT_EQ(crc32_update(0, bytes), 0xcbf43926u);
  EXPECT_EQ(crc32_update(crc32_update(0, bytes.first(4)), bytes.subspan(4)), 0xcbf43926u);
}

// Any split of the frame into two or three pieces gives the same ICRC.
TEST(Icrc, PiecesChainToTheSameValue) {
  for (const auto& frame : metaroce::test::sample_frames()) {
    ParsedFrame parsed;
    ASSERT_EQ(parse_frame(frame, parsed), ParseError::ok);
    const ByteSpan covered(frame.data() + parsed.l3_offset, frame.size() - parsed.l3_offset - icrc_size);
    const std::uint32_t whole = compute_icrc(covered);
    ASSERT_EQ(whole, parsed.icrc);
    for (std::size_t cut = 0; cut <= covered.size(); cut += 7) {
      const std::array<ByteSpan, 2> two = {covered.first(cut), covered.subspan(cut)};
      ASSERT_EQ(compute_icrc(two), whole) << "cut at " << cut;
      const std::size_t cut2 = cut + (covered.size() - cut) / 2;
      const std::array<ByteSpan, 3> three = {covered.first(cut), covered.subspan(cut, cut2 - cut),
                                             covered.subspan(cut2)};
      ASSERT_EQ(compute_icrc(three), whole) << "cuts at " << cut << ", " << cut2;
    }
  }
}

// Headers, payload and trailer built into three separate buffers, with the
// ICRC computed over the pieces, equal the contiguous frame.
TEST(Icrc, ScatteredBuildEqualsContiguous) {
  std::vector<std::uint8_t> payload(4096);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = metaroce::test::payload_byte(i);
  for (int ipv : {4, 6}) {
    for (std::size_t len : {0u, 1u, 2u, 3u, 4u, 1023u, 4096u}) {
      const FrameSpec spec = metaroce::test::sample_spec(opcode::mr_write, ipv, false);
      const ByteSpan data(payload.data(), len);
      std::array<std::uint8_t, 128> headers{};
      const std::size_t header_len = build_headers(spec, static_cast<std::uint32_t>(len), headers);
      ASSERT_GT(header_len, 0u);
      const std::size_t l3 = spec.eth.size();
      const std::uint8_t pad = pad_for(len);
      const std::array<std::uint8_t, 4> pad_bytes{};
      const std::array<ByteSpan, 3> pieces = {
          ByteSpan(headers.data() + l3, header_len - l3), data,
          ByteSpan(pad_bytes.data(), pad)};
      const std::uint32_t icrc = compute_icrc(pieces);
      std::array<std::uint8_t, 8> trailer{};
      const std::size_t trailer_len = build_trailer(pad, icrc, trailer);
      ASSERT_EQ(trailer_len, pad + icrc_size);

      std::vector<std::uint8_t> joined(headers.begin(), headers.begin() + static_cast<std::ptrdiff_t>(header_len));
      joined.insert(joined.end(), data.begin(), data.end());
      joined.insert(joined.end(), trailer.begin(), trailer.begin() + static_cast<std::ptrdiff_t>(trailer_len));
      std::vector<std::uint8_t> contiguous(header_len + len + 8);
      contiguous.resize(build_frame(spec, data, contiguous));
      ASSERT_EQ(joined, contiguous) << "ipv" << ipv << " len " << len;
    }
  }
}

// Fields a router or switch may rewrite are masked; every other byte counts.
TEST(Icrc, OnlyVariantFieldsAreMasked) {
  for (int ipv : {4, 6}) {
    std::vector<std::uint8_t> payload(33, 0x5a);
    const FrameSpec spec = metaroce::test::sample_spec(opcode::rc | opcode::send_only, ipv, false);
    std::vector<std::uint8_t> frame(256);
    frame.resize(build_frame(spec, payload, frame));
    const std::size_t l3 = ethernet_header_size;
    const std::size_t ip_len = ipv == 6 ? ipv6_header_size : ipv4_header_size;
    const std::size_t covered_end = frame.size() - icrc_size;
    const std::uint32_t base = compute_icrc(ByteSpan(frame.data() + l3, covered_end - l3));
    for (std::size_t at = l3; at < covered_end; ++at) {
      const std::size_t rel = at - l3;
      bool masked;
      if (ipv == 4) {
        masked = rel == 1 || rel == 8 || rel == 10 || rel == 11;
      } else {
        masked = rel == 0 /* bit 0: traffic class */ || rel == 1 || rel == 2 || rel == 3 || rel == 7;
      }
      masked = masked || rel == ip_len + 6 || rel == ip_len + 7  // UDP checksum
               || rel == ip_len + udp_header_size + 4;           // FECN, BECN, reserved
      auto copy = frame;
      copy[at] ^= 0x01;
      const std::uint32_t changed = compute_icrc(ByteSpan(copy.data() + l3, covered_end - l3));
      if (masked) {
        EXPECT_EQ(changed, base) << "ipv" << ipv << " byte " << rel << " should be masked";
      } else {
        EXPECT_NE(changed, base) << "ipv" << ipv << " byte " << rel << " should be covered";
      }
    }
    // IPv6: the low nibble of byte 0 (traffic class high bits) is masked, the
    // version nibble is not.
    if (ipv == 6) {
      auto copy = frame;
      copy[l3] ^= 0x0f;
      EXPECT_EQ(compute_icrc(ByteSpan(copy.data() + l3, covered_end - l3)), base);
      copy[l3] ^= 0x10;
      EXPECT_NE(compute_icrc(ByteSpan(copy.data() + l3, covered_end - l3)), base);
    }
  }
}

TEST(Icrc, TooShortInputGivesZero) {
  const std::array<std::uint8_t, 10> tiny = {0x45};
  EXPECT_EQ(compute_icrc(ByteSpan(tiny)), 0u);
  EXPECT_EQ(compute_icrc(ByteSpan()), 0u);
}

}  // namespace

// The folding CRC against ISA-L and the byte table on every length from 0
// to 2,200 bytes (the short fold, four 16-byte lanes, eight lanes of the
// 32-byte fold where the CPU has it, and every tail of each), at every
// alignment mod 16, chained from arbitrary seeds; the byte table and the
// 16-byte fold alone the same.
TEST(Icrc, FoldingCrcMatchesIsaLOnEveryLength) {
  std::vector<std::uint8_t> bytes(2200 + 16);
  std::uint32_t x = 0x9e3779b9u;
  for (auto& b : bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  const std::array<std::uint32_t, 3> seeds = {0u, 0xffffffffu, 0x1234abcdu};
  std::size_t mismatches = 0;
  std::size_t checked = 0;
  for (std::size_t len = 0; len <= 2200; ++len) {
    const std::size_t align = len % 16;
    const ByteSpan s(bytes.data() + align, len);
    for (const std::uint32_t seed : seeds) {
      const std::uint32_t want = crc32_gzip_refl(seed, s.data(), s.size());
      mismatches += crc32_fold(seed, s.data(), s.size()) != want ? 1 : 0;
      mismatches += crc32_fold_narrow(seed, s.data(), s.size()) != want ? 1 : 0;
      mismatches += crc32_bytewise(seed, s.data(), s.size()) != want ? 1 : 0;
      mismatches += crc32_update(seed, s) != want ? 1 : 0;
      checked += 4;
    }
  }
  EXPECT_EQ(checked, 2201u * 3 * 4);
  EXPECT_EQ(mismatches, 0u);
  const std::array<std::uint8_t, 9> digits = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  EXPECT_EQ(crc32_fold(0, digits.data(), digits.size()), 0xCBF43926u);
  // A long input in two pieces chains through the seed like zlib's crc32.
  const std::uint32_t first = crc32_fold(0, bytes.data(), 100);
  EXPECT_EQ(crc32_fold(first, bytes.data() + 100, 2000), crc32_gzip_refl(0, bytes.data(), 2100));
  RecordProperty("pclmul", crc32_fold_uses_pclmul() ? "yes" : "no");
  RecordProperty("ymm", crc32_fold_long_is_ymm() ? "yes" : "no");
}

// The ICRC against a reference written from the spec alone (filler, masked
// copy, CRC by the byte table), for IPv4 and IPv6 frames with payloads of
// every length from 0 to 600 bytes (both sides of the 512-byte switch from
// our fold to ISA-L), whole (read in place, also right behind an
// inaccessible page, and gathered), and in the transmit path's pieces
// (headers, payload, pad) cut again at every 13th byte.
TEST(Icrc, EveryLengthAndSplitMatchesTheSpec) {
  const AfterGuardPage guarded;
  ASSERT_TRUE(guarded.ok());
  std::uint8_t* const guarded_page = guarded.page();
  std::vector<std::uint8_t> payload(600);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = metaroce::test::payload_byte(i);
  std::size_t mismatches = 0, checked = 0;
  for (int ipv : {4, 6}) {
    const FrameSpec spec = metaroce::test::sample_spec(opcode::mr_write, ipv, false);
    for (std::size_t len = 0; len <= payload.size(); ++len) {
      std::vector<std::uint8_t> frame(len + 256);
      frame.resize(build_frame(spec, ByteSpan(payload.data(), len), frame));
      ASSERT_FALSE(frame.empty());
      const std::size_t l3 = spec.eth.size();
      const ByteSpan covered(frame.data() + l3, frame.size() - l3 - icrc_size);
      // The reference: 8 bytes of ones, then the covered bytes with the
      // variant fields set to ones (doc/WIRE.md, "ICRC").
      std::vector<std::uint8_t> masked(8, 0xff);
      masked.insert(masked.end(), covered.begin(), covered.end());
      std::uint8_t* ip = masked.data() + 8;
      const std::size_t ip_len = ipv == 6 ? 40 : 20;
      if (ipv == 6) {
        ip[0] |= 0x0f;
        ip[1] = ip[2] = ip[3] = 0xff;
        ip[7] = 0xff;
      } else {
        ip[1] = ip[8] = ip[10] = ip[11] = 0xff;
      }
      ip[ip_len + 6] = ip[ip_len + 7] = 0xff;
      ip[ip_len + 8 + 4] = 0xff;
      const std::uint32_t want = crc32_bytewise(0, masked.data(), masked.size());
      checked += 3;
      // In place: the frame at the start of a page after an inaccessible
      // one, so reading a byte before its IP header would crash.
      std::memcpy(guarded_page, covered.data(), covered.size());
      if (compute_icrc(ByteSpan(guarded_page, covered.size())) != want) ++mismatches;
      if (compute_icrc(covered) != want) ++mismatches;
      if (detail::compute_icrc_gathered(std::span<const ByteSpan>(&covered, 1)) != want) ++mismatches;
      const std::size_t headers = covered.size() - len - pad_for(len);
      for (std::size_t cut = 0; cut <= headers; cut += 13) {
        const std::array<ByteSpan, 4> pieces = {covered.first(cut), covered.subspan(cut, headers - cut),
                                                covered.subspan(headers, len), covered.subspan(headers + len)};
        ++checked;
        if (compute_icrc(pieces) != want) ++mismatches;
      }
    }
  }
  EXPECT_GT(checked, 10000u);
  EXPECT_EQ(mismatches, 0u);
}

// The byte-table way of crc32_fold_front_masked (long inputs, or no
// PCLMULQDQ) reads no byte whose keep is 0: here the filler's 8 bytes sit
// on an inaccessible page, and the result is the spec's.
TEST(Icrc, FrontMaskedByteTableReadsNoMaskedOutByte) {
  const AfterGuardPage guarded;
  ASSERT_TRUE(guarded.ok());
  const FrameSpec spec = metaroce::test::sample_spec(opcode::mr_write, 4, false);
  std::vector<std::uint8_t> payload(600, 0x3c);
  std::vector<std::uint8_t> frame(payload.size() + 256);
  frame.resize(build_frame(spec, payload, frame));
  ASSERT_FALSE(frame.empty());
  const std::size_t l3 = spec.eth.size();
  const std::size_t covered = frame.size() - l3 - icrc_size;
  ASSERT_GT(8 + covered, crc32_fold_front_max) << "long enough for the byte table";
  std::memcpy(guarded.page(), frame.data() + l3, covered);  // the IP header at the page's start
  // The masks the ICRC uses for IPv4 (icrc.cpp), written out again.
  FrontMasks m;
  m.kept_from = 8;
  for (std::size_t o = 8; o < FrontMasks::reach + 64; ++o) m.keep[FrontMasks::before + o] = 0xff;
  for (std::size_t o : {4, 5, 6, 7, 8 + 1, 8 + 8, 8 + 10, 8 + 11, 8 + 26, 8 + 27, 8 + 32}) m.ones[FrontMasks::before + o] = 0xff;
  const std::uint32_t got = ~crc32_fold_front_masked(guarded.page() - 8, 8 + covered, m);
  EXPECT_EQ(got, load_le32(frame.data() + l3 + covered));
}

// The parser's check, in place: a frame parses; a changed TTL or hop
// limit (a variant field) is not an error; a changed payload byte is.
TEST(Icrc, ParserChecksTheIcrcInPlace) {
  for (int ipv : {4, 6}) {
    const FrameSpec spec = metaroce::test::sample_spec(opcode::mr_write, ipv, false);
    std::vector<std::uint8_t> payload(64);
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = metaroce::test::payload_byte(i);
    std::vector<std::uint8_t> buffer(16 + payload.size() + 256, 0x5a);
    const std::size_t len = build_frame(spec, payload, std::span<std::uint8_t>(buffer).subspan(16));
    ASSERT_GT(len, 0u);
    const std::span<std::uint8_t> frame = std::span<std::uint8_t>(buffer).subspan(16, len);
    ParseOptions options;
    ParsedFrame parsed;
    EXPECT_EQ(parse_frame(frame, parsed, options), ParseError::ok) << "IPv" << ipv;
    const std::size_t ip = spec.eth.size();
    frame[ip + (ipv == 6 ? 7 : 8)] ^= 0x10;  // hop limit / TTL
    if (ipv == 4) frame[ip + 10] ^= 0x10;    // and the header checksum it changes
    options.verify_ip_checksum = false;
    EXPECT_EQ(parse_frame(frame, parsed, options), ParseError::ok) << "IPv" << ipv;
    frame[len - icrc_size - 1] ^= 0x01;  // the last payload byte
    EXPECT_EQ(parse_frame(frame, parsed, options), ParseError::bad_icrc) << "IPv" << ipv;
  }
}

// crc32_fold_front_masked both ways (the 64-byte AVX-512 fold where the
// machine has it, and the 16-byte one) against the byte table, over every
// length from 16 to 512 with 0 to 15 bytes not read at the front (they sit
// on an inaccessible page); for lengths past 512 only the byte table runs.
// A CRC the caller computed (the engine folds four received frames at
// once) replaces the parser's own only over exactly the ICRC's span: a
// wrong value over that span is a bad ICRC, over any other span it is
// ignored and the parser computes the CRC itself.
TEST(Icrc, ParserUsesAPrecomputedIcrcOnlyOverItsSpan) {
  const FrameSpec spec = metaroce::test::sample_spec(opcode::mr_write, 4, false);
  const std::vector<std::uint8_t> payload(64, 0x3c);
  std::vector<std::uint8_t> frame(512);
  frame.resize(build_frame(spec, payload, frame));
  ASSERT_FALSE(frame.empty());
  const auto from = static_cast<std::uint32_t>(spec.eth.size());
  const auto to = static_cast<std::uint32_t>(frame.size() - icrc_size);
  const std::uint32_t right = compute_icrc(ByteSpan(frame.data() + from, to - from));
  ASSERT_EQ(right, load_le32(frame.data() + to));
  ParsedFrame parsed;
  ParseOptions options;
  ParseOptions::Precomputed pre{right, from, to};
  options.precomputed_icrc = &pre;
  EXPECT_EQ(parse_frame(frame, parsed, options), ParseError::ok);
  pre.icrc = right ^ 1;
  EXPECT_EQ(parse_frame(frame, parsed, options), ParseError::bad_icrc) << "the precomputed value was not used";
  for (const auto& [f, t] : {std::pair{from - 4, to}, std::pair{from, to - 4}, std::pair{from + 1, to + 1}}) {
    pre.from = f;
    pre.to = t;
    EXPECT_EQ(parse_frame(frame, parsed, options), ParseError::ok) << f << ".." << t;
  }
  // And a frame whose ICRC is wrong stays wrong whatever span is claimed.
  frame[to - 1] ^= 0x01;
  pre = {right, from - 4, to};
  EXPECT_EQ(parse_frame(frame, parsed, options), ParseError::bad_icrc);
}

TEST(Icrc, FrontMaskedFoldsBothWidthsLikeTheByteTable) {
  const AfterGuardPage guarded;
  ASSERT_TRUE(guarded.ok());
  std::uint32_t x = 0x7f4a7c15u;
  for (std::size_t i = 0; i < AfterGuardPage::size; ++i) {
    x = x * 1664525u + 1013904223u;
    guarded.page()[i] = static_cast<std::uint8_t>(x >> 24);
  }
  std::size_t mismatches = 0, checked = 0;
  for (std::size_t len = 16; len <= crc32_fold_front_max; ++len) {
    FrontMasks m;
    m.kept_from = len % 16;
    for (std::size_t o = m.kept_from; o < FrontMasks::reach + 64; ++o) m.keep[FrontMasks::before + o] = 0xff;
    for (std::size_t o = 0; o < FrontMasks::reach; o += 1 + o % 7) {
      x = x * 1664525u + 1013904223u;
      m.ones[FrontMasks::before + o] = static_cast<std::uint8_t>(x >> 24);
    }
    // The first kept byte opens the readable page: the bytes before it
    // (keep 0) sit on the inaccessible one, and reading one would crash.
    const auto* p = reinterpret_cast<const std::uint8_t*>(reinterpret_cast<std::uintptr_t>(guarded.page()) - m.kept_from);
    std::vector<std::uint8_t> input(len, 0);
    std::memcpy(input.data() + m.kept_from, guarded.page(), len - m.kept_from);
    for (std::size_t i = 0; i < len; ++i) {
      if (i < FrontMasks::reach)
        input[i] = static_cast<std::uint8_t>((input[i] & m.keep[FrontMasks::before + i]) | m.ones[FrontMasks::before + i]);
    }
    const std::uint32_t want = ~crc32_bytewise(0xffffffffu, input.data(), input.size());
    checked += 2;
    if (crc32_fold_front_masked(p, len, m, FoldWidth::best) != want) ++mismatches;
    if (crc32_fold_front_masked(p, len, m, FoldWidth::narrow) != want) ++mismatches;
  }
  EXPECT_EQ(checked, 2 * (crc32_fold_front_max - 15));
  EXPECT_EQ(mismatches, 0u);
  RecordProperty("wide", crc32_fold_front_is_wide() ? "yes" : "no");
}

// Four inputs of one length and masks at once: each result what the
// one-input fold gives, on every length, the first input read from just
// after an inaccessible page (no byte before kept_from read, as above).
TEST(Icrc, FrontMaskedFourAtOnceEqualsOneByOne) {
  const AfterGuardPage guarded;
  ASSERT_TRUE(guarded.ok());
  std::uint32_t x = 0x1234567u;
  const auto next = [&x] {
    x = x * 1664525u + 1013904223u;
    return static_cast<std::uint8_t>(x >> 24);
  };
  for (std::size_t i = 0; i < AfterGuardPage::size; ++i) guarded.page()[i] = next();
  std::array<std::vector<std::uint8_t>, 3> others;
  for (auto& o : others) {
    o.resize(crc32_fold_front_max);
    for (auto& b : o) b = next();
  }
  std::size_t mismatches = 0, checked = 0;
  for (std::size_t len = 16; len <= crc32_fold_front_max; ++len) {
    FrontMasks m;
    m.kept_from = (len * 7) % 24;
    for (std::size_t o = m.kept_from; o < FrontMasks::reach + 64; ++o) m.keep[FrontMasks::before + o] = 0xff;
    for (std::size_t o = 0; o < FrontMasks::reach; o += 1 + o % 5) m.ones[FrontMasks::before + o] = next();
    const std::array<const std::uint8_t*, 4> p = {
        reinterpret_cast<const std::uint8_t*>(reinterpret_cast<std::uintptr_t>(guarded.page()) - m.kept_from),
        others[0].data(), others[1].data(), others[2].data()};
    std::array<std::uint32_t, 4> four{};
    crc32_fold_front_masked4(p.data(), len, m, four.data());
    for (std::size_t j = 0; j < 4; ++j) {
      ++checked;
      if (four[j] != crc32_fold_front_masked(p[j], len, m)) ++mismatches;
    }
  }
  EXPECT_EQ(checked, 4 * (crc32_fold_front_max - 15));
  EXPECT_EQ(mismatches, 0u);
}

// compute_icrcs over a burst: runs of four equal frames (IPv4, IPv6), runs
// cut short by a frame of another size or version, and lone frames each
// get exactly compute_icrc's value, which is the frame's own ICRC.
TEST(Icrc, BurstOfFramesEqualsOneByOne) {
  std::vector<std::vector<std::uint8_t>> frames;
  const auto add = [&](int ipv, std::size_t payload_len, std::uint8_t seed) {
    FrameSpec spec = metaroce::test::sample_spec(opcode::mr_write, ipv, false);
    spec.bth.psn = seed;
    std::vector<std::uint8_t> payload(payload_len);
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(seed * 31 + i);
    std::vector<std::uint8_t> f(2048);
    f.resize(build_frame(spec, payload, f));
    frames.push_back(std::move(f));
  };
  std::uint8_t seed = 1;
  for (int k = 0; k < 5; ++k) add(4, 64, seed++);   // four equal, then one more
  add(6, 64, seed++);                               // another version
  for (int k = 0; k < 4; ++k) add(6, 64, seed++);   // four equal IPv6
  for (int k = 0; k < 3; ++k) add(4, 100, seed++);  // three, then
  add(4, 101, seed++);                              // another size
  for (int k = 0; k < 4; ++k) add(4, 1200, seed++); // too long to fold in place
  std::vector<ByteSpan> covered;
  std::vector<std::uint32_t> carried;
  for (const auto& f : frames) {
    ParsedFrame parsed;
    ASSERT_EQ(parse_frame(f, parsed), ParseError::ok);
    covered.emplace_back(f.data() + parsed.l3_offset, f.size() - icrc_size - parsed.l3_offset);
    carried.push_back(parsed.icrc);
  }
  std::vector<std::uint32_t> got(frames.size(), 0);
  compute_icrcs(covered, got.data());
  for (std::size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(got[i], compute_icrc(covered[i])) << "frame " << i;
    EXPECT_EQ(got[i], carried[i]) << "frame " << i;
  }
}
