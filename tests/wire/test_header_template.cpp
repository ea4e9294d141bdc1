// A stamped template equals the general builder's output, byte for byte.
#include <array>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "wire/header_template.hpp"
#include "wire_samples.hpp"

namespace {

using namespace metaroce::wire;

TEST(HeaderTemplate, StampEqualsBuildHeadersForEverySample) {
  std::mt19937_64 rng(5);
  int prepared = 0;
  for (FrameSpec spec : metaroce::test::all_sample_specs()) {
    HeaderTemplate t;
    const bool fits = headers_size(spec) <= HeaderTemplate::capacity;
    ASSERT_EQ(t.prepare(spec), fits) << opcode_info(spec.bth.opcode).name;
    if (!fits) continue;
    ++prepared;
    for (int i = 0; i < 50; ++i) {
      const auto payload_len = static_cast<std::uint32_t>(rng() % 9001);
      spec.bth.psn = static_cast<std::uint32_t>(rng()) & psn_mask;
      spec.bth.ack_req = rng() & 1;
      std::array<std::uint8_t, HeaderTemplate::capacity> stamped{};
      std::array<std::uint8_t, HeaderTemplate::capacity> built{};
      ASSERT_EQ(t.stamp(stamped, payload_len, spec.bth.psn, spec.bth.ack_req), t.size());
      ASSERT_EQ(build_headers(spec, payload_len, built), t.size());
      ASSERT_EQ(stamped, built) << opcode_info(spec.bth.opcode).name << " payload " << payload_len;
    }
  }
  // Every opcode but MR_ACK with its 3 path blocks, and the metaroce atomic
  // requests over IPv6 (MDH + AtomicETH + MRDH: built by build_headers).
  EXPECT_EQ(prepared, 4 * 48 - 4);
}

TEST(HeaderTemplate, StampedFrameParsesWithExtensionsWrittenAfter) {
  const FrameSpec spec = metaroce::test::sample_spec(opcode::mr_write, 4, true);
  HeaderTemplate t;
  ASSERT_TRUE(t.prepare(spec));
  std::vector<std::uint8_t> frame(t.size() + 1001 + 3 + icrc_size);
  ASSERT_EQ(t.stamp(frame, 1001, 77, true), t.size());
  MrDataHeader d = spec.mr_data;
  d.path_seq = 9;
  encode(d, frame.data() + t.ext_offset());
  MrWriteHeader w = spec.mr_write;
  w.msg_offset = 1001;
  encode(w, frame.data() + t.ext_offset() + mr_data_header_size);
  for (std::size_t i = 0; i < 1001; ++i) frame[t.size() + i] = static_cast<std::uint8_t>(i);
  const std::uint32_t icrc =
      compute_icrc(ByteSpan(frame.data() + t.l3_offset(), frame.size() - t.l3_offset() - icrc_size));
  build_trailer(3, icrc, std::span<std::uint8_t>(frame).last(3 + icrc_size));
  ParsedFrame p;
  ASSERT_EQ(parse_frame(frame, p), ParseError::ok);
  EXPECT_EQ(p.bth.psn, 77u);
  EXPECT_TRUE(p.bth.ack_req);
  EXPECT_EQ(p.bth.pad, 3);
  EXPECT_EQ(p.mr_data.path_seq, 9u);
  EXPECT_EQ(p.mr_write.msg_offset, 1001u);
  EXPECT_EQ(p.payload.size(), 1001u);
}

TEST(HeaderTemplate, RefusesWhatDoesNotFit) {
  HeaderTemplate t;
  std::array<std::uint8_t, 16> small{};
  ASSERT_TRUE(t.prepare(metaroce::test::sample_spec(opcode::mr_send, 6, false)));
  EXPECT_EQ(t.stamp(small, 10, 1, false), 0u);
  std::array<std::uint8_t, HeaderTemplate::capacity> out{};
  EXPECT_EQ(t.stamp(out, 70000, 1, false), 0u);
  FrameSpec bad = metaroce::test::sample_spec(opcode::mr_send, 6, false);
  bad.ip_version = 7;
  EXPECT_FALSE(t.prepare(bad));
}

}  // namespace
