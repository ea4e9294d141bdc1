// The secure trailer and the replay window: exact outcomes per frame.
#include "secure/trailer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace metaroce::secure {
namespace {

constexpr std::size_t header = 12;  // a BTH
const std::vector<std::uint8_t> key_a(16, 0xa5);
const std::vector<std::uint8_t> key_b(16, 0x5a);

std::vector<std::uint8_t> frame_of(std::size_t payload, std::uint8_t seed) {
  std::vector<std::uint8_t> f(header + payload + trailer_bytes);
  for (std::size_t i = 0; i < header + payload; ++i) f[i] = static_cast<std::uint8_t>(seed + i);
  return f;
}

struct Pair {
  Sealer tx;
  Opener rx;
  Pair(Protection p, std::size_t window = 64) {
    EXPECT_TRUE(tx.set_key(Algorithm::aes128_gcm, key_a, 0x01020304, p));
    EXPECT_TRUE(rx.set_key(Algorithm::aes128_gcm, key_a, 0x01020304, p, window));
  }
};

TEST(SecureTrailer, LayoutIsSpiCounterTag) {
  Pair pair(Protection::auth_only);
  auto f = frame_of(4, 0);
  ASSERT_TRUE(pair.tx.seal(f, header));
  const std::size_t t = header + 4;
  EXPECT_EQ(std::vector<std::uint8_t>(f.begin() + t, f.begin() + t + 12),
            (std::vector<std::uint8_t>{1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 1}));
  ASSERT_TRUE(pair.tx.seal(f, header));  // counter 2, over the same bytes
  EXPECT_EQ(f[t + 11], 2);
  EXPECT_EQ(pair.tx.sent(), 2u);
}

TEST(SecureTrailer, RoundTripBothProtections) {
  for (Protection p : {Protection::encrypt, Protection::auth_only}) {
    Pair pair(p);
    for (std::size_t payload : {0u, 1u, 64u, 1024u, 4096u}) {
      auto f = frame_of(payload, 3);
      const auto clear = f;
      ASSERT_TRUE(pair.tx.seal(f, header));
      if (p == Protection::encrypt && payload > 0) {
        EXPECT_NE(std::vector<std::uint8_t>(f.begin() + header, f.end() - trailer_bytes),
                  std::vector<std::uint8_t>(clear.begin() + header, clear.end() - trailer_bytes));
      }
      EXPECT_EQ(std::vector<std::uint8_t>(f.begin(), f.begin() + header),
                std::vector<std::uint8_t>(clear.begin(), clear.begin() + header));
      ASSERT_EQ(pair.rx.open(f, header), OpenResult::ok) << to_string(p) << " " << payload;
      EXPECT_EQ(std::vector<std::uint8_t>(f.begin(), f.end() - trailer_bytes),
                std::vector<std::uint8_t>(clear.begin(), clear.end() - trailer_bytes));
    }
  }
}

TEST(SecureTrailer, EachForgeryHasItsOwnResultAndMovesNothing) {
  for (Protection p : {Protection::encrypt, Protection::auth_only}) {
    Pair pair(p);
    auto f = frame_of(100, 9);
    ASSERT_TRUE(pair.tx.seal(f, header));
    const auto sealed = f;

    // Every single-bit flip anywhere in the frame (trailer included) fails.
    for (std::size_t i = 0; i < f.size(); ++i) {
      f[i] ^= 0x10;
      const auto tampered = f;
      const OpenResult r = pair.rx.open(f, header);
      EXPECT_NE(r, OpenResult::ok) << i;
      // SPI bytes name another key; counter bytes land on a fresh counter
      // whose nonce the tag does not match; everything else is a bad tag.
      const std::size_t t = f.size() - trailer_bytes;
      if (i < t || i >= t + 4) EXPECT_EQ(r, OpenResult::bad_tag) << i;
      else EXPECT_EQ(r, OpenResult::wrong_spi) << i;
      EXPECT_EQ(f, tampered) << i;
      f[i] ^= 0x10;
    }
    EXPECT_EQ(pair.rx.window().highest(), 0u);

    // A truncated trailer.
    std::vector<std::uint8_t> shorter(trailer_bytes - 1);
    EXPECT_EQ(pair.rx.open(shorter, header), OpenResult::no_trailer);

    // Another connection's key, same SPI: bad tag.
    Sealer other;
    ASSERT_TRUE(other.set_key(Algorithm::aes128_gcm, key_b, 0x01020304, p));
    auto g = frame_of(100, 9);
    ASSERT_TRUE(other.seal(g, header));
    const auto forged = g;
    EXPECT_EQ(pair.rx.open(g, header), OpenResult::bad_tag);
    EXPECT_EQ(g, forged);

    // The real frame once; its replay is refused.
    ASSERT_EQ(pair.rx.open(f, header), OpenResult::ok);
    f = sealed;
    EXPECT_EQ(pair.rx.open(f, header), OpenResult::replayed);
    EXPECT_EQ(f, sealed);
    EXPECT_EQ(pair.rx.window().highest(), 1u);
  }
}

TEST(ReplayWindow, ReorderWithinWidthAcceptedOnceOlderRefused) {
  ReplayWindow w(64);
  EXPECT_FALSE(w.fresh(0));
  for (std::uint64_t c : {5u, 3u, 4u, 1u, 2u}) {
    ASSERT_TRUE(w.fresh(c)) << c;
    w.mark(c);
    EXPECT_FALSE(w.fresh(c)) << c;
  }
  w.mark(100);
  EXPECT_FALSE(w.fresh(36));  // 100 - 36 == 64: out of the window
  EXPECT_TRUE(w.fresh(37));
  EXPECT_TRUE(w.fresh(99));
  EXPECT_FALSE(w.fresh(100));
  w.mark(99);
  EXPECT_FALSE(w.fresh(99));
  // A jump past the whole window forgets every bit.
  w.mark(1000);
  for (std::uint64_t c = 937; c < 1000; ++c) EXPECT_TRUE(w.fresh(c)) << c;
  EXPECT_FALSE(w.fresh(936));
}

TEST(ReplayWindow, WidthIsRoundedToWordsAndBounded) {
  EXPECT_EQ(ReplayWindow(1).width(), 64u);
  EXPECT_EQ(ReplayWindow(100).width(), 128u);
  EXPECT_EQ(ReplayWindow(1u << 20).width(), ReplayWindow::max_width);
}

}  // namespace
}  // namespace metaroce::secure
