// The secure trailer and the replay window: exact outcomes per frame.
#include "secure/trailer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
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

// open_to: the frame is never written; encrypted, the plaintext of the
// payload lands in the caller's buffer, and a failing frame leaves the
// frame and the replay window as they were.
TEST(SecureTrailer, OpenToLeavesTheFrameAndFillsOnlyThePlaintext) {
  for (Protection p : {Protection::encrypt, Protection::auth_only}) {
    Pair pair(p);
    auto f = frame_of(100, 5);
    const auto clear = f;
    ASSERT_TRUE(pair.tx.seal(f, header));
    auto tampered = f;
    tampered[header + 7] ^= 0x04;
    const auto tampered_copy = tampered;
    std::vector<std::uint8_t> plaintext(p == Protection::encrypt ? 100 : 0);
    EXPECT_EQ(pair.rx.open_to(tampered, header, plaintext), OpenResult::bad_tag) << to_string(p);
    EXPECT_EQ(tampered, tampered_copy);
    EXPECT_EQ(pair.rx.window().highest(), 0u);
    const auto sealed = f;
    ASSERT_EQ(pair.rx.open_to(f, header, plaintext), OpenResult::ok) << to_string(p);
    EXPECT_EQ(f, sealed);
    if (p == Protection::encrypt) {
      EXPECT_TRUE(std::equal(plaintext.begin(), plaintext.end(), clear.begin() + header)) << to_string(p);
      // A plaintext buffer of the wrong size is refused as a bad tag, and
      // the counter stays unseen: the same frame then opens.
      Pair again(p);
      std::vector<std::uint8_t> small(99);
      EXPECT_EQ(again.rx.open_to(f, header, small), OpenResult::bad_tag);
      EXPECT_EQ(again.rx.open_to(f, header, plaintext), OpenResult::ok);
    }
    EXPECT_EQ(pair.rx.open_to(f, header, plaintext), OpenResult::replayed);
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
      // The SPI's top byte names another epoch (0x11: neither previous,
      // current nor next), its other bytes another key; counter bytes land
      // on a fresh counter whose nonce the tag does not match; everything
      // else is a bad tag.
      const std::size_t t = f.size() - trailer_bytes;
      if (i < t || i >= t + 4) EXPECT_EQ(r, OpenResult::bad_tag) << i;
      else if (i == t) EXPECT_EQ(r, OpenResult::unknown_epoch) << i;
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

static_assert(next_epoch_spi(0x01020304u) == 0x02020304u);
static_assert(next_epoch_spi(0xff020304u) == 0x00020304u);  // the epoch wraps, the connection stays

std::uint32_t spi_in(const std::vector<std::uint8_t>& f) {
  const std::size_t t = f.size() - trailer_bytes;
  return std::uint32_t{f[t]} << 24 | std::uint32_t{f[t + 1]} << 16 | std::uint32_t{f[t + 2]} << 8 | f[t + 3];
}

TEST(SecureTrailer, EpochsRotateAfterTheirFramesAndTheOpenerFollows) {
  for (Protection p : {Protection::encrypt, Protection::auth_only}) {
    Sealer tx;
    Opener rx;
    ASSERT_TRUE(tx.set_key(Algorithm::aes128_gcm, key_a, 0x01020304, p, 3));
    ASSERT_TRUE(rx.set_key(Algorithm::aes128_gcm, key_a, 0x01020304, p, 64));
    std::vector<std::vector<std::uint8_t>> sealed;
    for (std::uint8_t i = 0; i < 10; ++i) {
      auto f = frame_of(40, i);
      ASSERT_TRUE(tx.seal(f, header));
      const std::size_t t = f.size() - trailer_bytes;
      EXPECT_EQ(spi_in(f), (std::uint32_t{1} + i / 3u) << 24 | 0x020304u) << int{i};
      EXPECT_EQ(f[t + 11], 1 + i % 3) << int{i};  // the counter starts again in each epoch
      sealed.push_back(f);
    }
    EXPECT_EQ(tx.sent(), 10u);
    EXPECT_EQ(tx.rotations(), 3u);
    EXPECT_EQ(tx.spi(), 0x04020304u);

    // Each epoch's key differs: epoch 1's SPI under epoch 0's key is a bad tag.
    Sealer stale;
    ASSERT_TRUE(stale.set_key(Algorithm::aes128_gcm, key_a, 0x02020304, p));
    auto g = frame_of(40, 50);
    ASSERT_TRUE(stale.seal(g, header));
    EXPECT_EQ(rx.open(g, header), OpenResult::bad_tag);
    // Two epochs ahead: unknown, and nothing moves.
    auto h = sealed[6];
    EXPECT_EQ(rx.open(h, header), OpenResult::unknown_epoch);
    EXPECT_EQ(h, sealed[6]);
    EXPECT_EQ(rx.rotations(), 0u);

    // Epoch 1's first frame before epoch 0's last two: the opener moves to
    // epoch 1 and still takes epoch 0's frames (the previous epoch), once.
    auto f = sealed[3];
    ASSERT_EQ(rx.open(f, header), OpenResult::ok);
    EXPECT_EQ(rx.rotations(), 1u);
    EXPECT_EQ(rx.spi(), 0x02020304u);
    for (std::size_t i : {0u, 2u, 1u}) {
      f = sealed[i];
      ASSERT_EQ(rx.open(f, header), OpenResult::ok) << i;
      const auto clear = frame_of(40, static_cast<std::uint8_t>(i));
      EXPECT_TRUE(std::equal(clear.begin(), clear.end() - trailer_bytes, f.begin())) << i;  // the plaintext, in place
    }
    f = sealed[1];
    EXPECT_EQ(rx.open(f, header), OpenResult::replayed);
    for (std::size_t i = 4; i < 10; ++i) {
      f = sealed[i];
      ASSERT_EQ(rx.open(f, header), OpenResult::ok) << i;
    }
    EXPECT_EQ(rx.rotations(), 3u);
    EXPECT_EQ(rx.spi(), 0x04020304u);
    // Epoch 1 is two behind now: unknown.
    f = sealed[4];
    EXPECT_EQ(rx.open(f, header), OpenResult::unknown_epoch);
    // Another connection's SPI (low 24 bits) stays a bad SPI in any epoch.
    f = sealed[9];
    f[f.size() - trailer_bytes + 3] ^= 1;
    EXPECT_EQ(rx.open(f, header), OpenResult::wrong_spi);
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
