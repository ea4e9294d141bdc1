// TxBatch's rebuild of a packet as its sealed form: in place when the
// packet was committed with spare room, copied otherwise, and either way
// the bytes, lengths and ICRC of exactly the rebuilt frame.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "transport/tx_batch.hpp"
#include "wire/byte_order.hpp"
#include "wire/icrc.hpp"

namespace {

using namespace metaroce;
using transport::TxBatch;

// A frame of `len` bytes whose first 14 are a stand-in Ethernet header and
// the rest an IPv4 header followed by numbered bytes: the ICRC is computed
// from byte 14 on, as the transport does.
std::vector<std::uint8_t> frame_bytes(std::size_t len, std::uint8_t first) {
  std::vector<std::uint8_t> f(len);
  for (std::size_t i = 0; i < len; ++i) f[i] = static_cast<std::uint8_t>(first + i);
  f[14] = 0x45;  // IPv4, 20-byte header
  return f;
}

void commit(TxBatch& b, const std::vector<std::uint8_t>& f, std::uint8_t spare) {
  const auto room = b.header_space(f.size() + spare);
  std::copy(f.begin(), f.end(), room.begin());
  b.commit_unsealed(f.size(), 14, spare);
}

TEST(TxBatch, PacketWithSpareRoomIsRebuiltInPlace) {
  TxBatch b;
  const auto first = frame_bytes(100, 1);
  const auto second = frame_bytes(80, 7);
  commit(b, first, 28);
  commit(b, second, 28);
  const std::uint8_t* at0 = b.header(0).data();
  const std::uint8_t* at1 = b.header(1).data();
  EXPECT_EQ(at1, at0 + 128);  // the first frame's spare room lies between them

  const auto room = b.rebuild(0, 28);
  EXPECT_EQ(room.data(), at0);
  ASSERT_EQ(room.size(), 128u);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), room.begin()));
  for (std::size_t i = 100; i < 128; ++i) room[i] = static_cast<std::uint8_t>(0xa0 + i);
  b.finish_rebuild(0, 128, 14);

  // The packet is its 128 bytes where they were; the next is untouched.
  EXPECT_EQ(b.header(0).data(), at0);
  EXPECT_EQ(b.header(0).size(), 128u);
  EXPECT_EQ(b[0].spare, 0);
  EXPECT_EQ(b.header(1).data(), at1);
  EXPECT_TRUE(std::equal(second.begin(), second.end(), b.header(1).begin()));

  b.seal(0);
  ASSERT_EQ(b[0].trailer_len, wire::icrc_size);
  std::vector<std::uint8_t> whole(room.begin(), room.end());
  EXPECT_EQ(wire::load_le32(b[0].trailer.data()),
            wire::compute_icrc(wire::ByteSpan(whole.data() + 14, whole.size() - 14)));
  EXPECT_EQ(wire::load_le32(b[1].trailer.data()),
            wire::compute_icrc(wire::ByteSpan(second.data() + 14, second.size() - 14)));
  std::vector<std::uint8_t> out;
  b.serialize(0, out);
  ASSERT_EQ(out.size(), 132u);
  EXPECT_TRUE(std::equal(whole.begin(), whole.end(), out.begin()));
}

TEST(TxBatch, PacketWithoutEnoughSpareRoomIsCopied) {
  TxBatch b;
  const auto f = frame_bytes(100, 3);
  commit(b, f, 8);  // less room than the 28 bytes asked for
  const std::uint8_t* at = b.header(0).data();
  const auto room = b.rebuild(0, 28);
  EXPECT_NE(room.data(), at);
  ASSERT_EQ(room.size(), 128u);
  EXPECT_TRUE(std::equal(f.begin(), f.end(), room.begin()));
  b.finish_rebuild(0, 128, 14);
  EXPECT_EQ(b.header(0).size(), 128u);
  EXPECT_TRUE(std::equal(f.begin(), f.end(), b.header(0).begin()));

  // A packet committed after it starts past the copy.
  commit(b, frame_bytes(60, 9), 0);
  EXPECT_EQ(b.header(1).data(), b.header(0).data() + 128);
}

TEST(TxBatch, SealedPacketIsCopiedWithItsKeptTrailer) {
  TxBatch b;
  // Headers in the arena, a payload pointed at, a trailer of pad + ICRC.
  const std::vector<std::uint8_t> payload = {1, 2, 3, 4, 5};
  const auto room = b.header_space(40);
  std::fill(room.begin(), room.end(), 0x11);
  const std::uint8_t trailer[] = {0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd};  // 3 pad bytes, then the ICRC
  b.commit(40, wire::ByteSpan(payload.data(), payload.size()), trailer);
  const auto rebuilt = b.rebuild(0, 28);
  ASSERT_EQ(rebuilt.size(), 40u + 5 + 3 + 28);
  EXPECT_EQ(rebuilt[39], 0x11);
  EXPECT_EQ(rebuilt[40], 1);
  EXPECT_EQ(rebuilt[44], 5);
  EXPECT_EQ(rebuilt[45], 0);  // the pad kept, the ICRC left out
  EXPECT_EQ(rebuilt[47], 0);
}

}  // namespace
