// AES-GCM known answers (the GCM specification's test cases, as NIST
// publishes them) and the per-frame protections.
#include "secure/gcm.hpp"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace metaroce::secure {
namespace {

std::vector<std::uint8_t> hex(const std::string& s) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  return out;
}

Nonce nonce_of(const std::string& s) {
  Nonce n{};
  auto v = hex(s);
  std::copy(v.begin(), v.end(), n.begin());
  return n;
}

Tag tag_of(const std::string& s) {
  Tag t{};
  auto v = hex(s);
  std::copy(v.begin(), v.end(), t.begin());
  return t;
}

struct Vector {
  const char* name;
  Algorithm algorithm;
  const char* key;
  const char* iv;
  const char* plaintext;
  const char* aad;
  const char* ciphertext;
  const char* tag;
};

const std::string k3 = "feffe9928665731c6d6a8f9467308308";
const std::string p4 =
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
    "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39";
const std::string p3 = p4 + "1aafd255";
const std::string k16 = k3 + k3;

class GcmKnownAnswer : public ::testing::TestWithParam<Vector> {};

TEST_P(GcmKnownAnswer, SealGivesCiphertextAndTagOpenGivesPlaintext) {
  const Vector& v = GetParam();
  Gcm gcm;
  ASSERT_TRUE(gcm.set_key(v.algorithm, hex(v.key)));
  auto data = hex(v.plaintext);
  const auto aad = hex(v.aad);
  Tag tag{};
  ASSERT_TRUE(gcm.seal(nonce_of(v.iv), aad, data, tag));
  EXPECT_EQ(data, hex(v.ciphertext));
  EXPECT_EQ(tag, tag_of(v.tag));
  ASSERT_TRUE(gcm.open(nonce_of(v.iv), aad, data, tag));
  EXPECT_EQ(data, hex(v.plaintext));
  // The same context again: keys are kept, only the nonce is set per call.
  ASSERT_TRUE(gcm.seal(nonce_of(v.iv), aad, data, tag));
  EXPECT_EQ(data, hex(v.ciphertext));
  EXPECT_EQ(tag, tag_of(v.tag));
}

INSTANTIATE_TEST_SUITE_P(
    Nist, GcmKnownAnswer,
    ::testing::Values(
        Vector{"case1", Algorithm::aes128_gcm, "00000000000000000000000000000000",
               "000000000000000000000000", "", "", "", "58e2fccefa7e3061367f1d57a4e7455a"},
        Vector{"case2", Algorithm::aes128_gcm, "00000000000000000000000000000000",
               "000000000000000000000000", "00000000000000000000000000000000", "",
               "0388dace60b6a392f328c2b971b2fe78", "ab6e47d42cec13bdf53a67b21257bddf"},
        Vector{"case3", Algorithm::aes128_gcm, k3.c_str(), "cafebabefacedbaddecaf888",
               p3.c_str(), "",
               "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e"
               "21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985",
               "4d5c2af327cd64a62cf35abd2ba6fab4"},
        Vector{"case4", Algorithm::aes128_gcm, k3.c_str(), "cafebabefacedbaddecaf888",
               p4.c_str(), "feedfacedeadbeeffeedfacedeadbeefabaddad2",
               "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e"
               "21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
               "5bc94fbc3221a5db94fae95ae7121a47"},
        Vector{"case13", Algorithm::aes256_gcm,
               "0000000000000000000000000000000000000000000000000000000000000000",
               "000000000000000000000000", "", "", "", "530f8afbc74536b9a963b4f1c4cb738b"},
        Vector{"case14", Algorithm::aes256_gcm,
               "0000000000000000000000000000000000000000000000000000000000000000",
               "000000000000000000000000", "00000000000000000000000000000000", "",
               "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"},
        Vector{"case16", Algorithm::aes256_gcm, k16.c_str(), "cafebabefacedbaddecaf888",
               p4.c_str(), "feedfacedeadbeeffeedfacedeadbeefabaddad2",
               "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
               "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
               "76fc6ece0f4e1768cddf8853bb2d551b"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Gcm, WrongKeyLengthIsRefused) {
  Gcm gcm;
  EXPECT_FALSE(gcm.set_key(Algorithm::aes128_gcm, std::vector<std::uint8_t>(32)));
  EXPECT_FALSE(gcm.set_key(Algorithm::aes256_gcm, std::vector<std::uint8_t>(16)));
  EXPECT_FALSE(gcm.has_key());
  Tag tag{};
  std::vector<std::uint8_t> data(8);
  EXPECT_FALSE(gcm.seal(Nonce{}, {}, data, tag));
}

// GMAC over a whole frame (auth_only): the tags here were computed with an
// independent implementation (Python's cryptography, AESGCM with the frame
// as associated data and no plaintext).
TEST(Gcm, AuthOnlyFrameIsGmacOverEveryByteAndLeavesBytesClear) {
  std::vector<std::uint8_t> frame(64);
  for (std::size_t i = 0; i < frame.size(); ++i) frame[i] = static_cast<std::uint8_t>(i);
  const auto original = frame;
  const Nonce iv = nonce_of("cafebabefacedbaddecaf888");
  struct {
    Algorithm a;
    std::string key;
    const char* tag;
  } cases[] = {{Algorithm::aes128_gcm, k3, "fbe1a65a9b5de696505620cc0359320e"},
               {Algorithm::aes256_gcm, k3 + k3, "c374c263978be48d181b9094daa66da9"}};
  for (const auto& c : cases) {
    Gcm gcm;
    ASSERT_TRUE(gcm.set_key(c.a, hex(c.key)));
    Tag tag{};
    ASSERT_TRUE(gcm.seal_frame(Protection::auth_only, iv, frame, 12, tag));
    EXPECT_EQ(frame, original);
    EXPECT_EQ(tag, tag_of(c.tag)) << to_string(c.a);
    EXPECT_TRUE(gcm.open_frame(Protection::auth_only, iv, frame, 12, tag));
    for (std::size_t i = 0; i < frame.size(); ++i) {
      frame[i] ^= 0x01;
      EXPECT_FALSE(gcm.open_frame(Protection::auth_only, iv, frame, 12, tag)) << i;
      frame[i] ^= 0x01;
    }
  }
}

TEST(Gcm, EncryptFrameKeepsHeaderClearAndAuthenticatesIt) {
  Gcm gcm;
  ASSERT_TRUE(gcm.set_key(Algorithm::aes128_gcm, hex(k3)));
  const Nonce iv = nonce_of("cafebabefacedbaddecaf888");
  // Header = case 4's AAD, payload = case 4's plaintext: the frame is
  // case 4 laid end to end.
  auto frame = hex(std::string("feedfacedeadbeeffeedfacedeadbeefabaddad2") + p4);
  Tag tag{};
  ASSERT_TRUE(gcm.seal_frame(Protection::encrypt, iv, frame, 20, tag));
  EXPECT_EQ(frame, hex(std::string("feedfacedeadbeeffeedfacedeadbeefabaddad2") +
                       "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e"
                       "21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091"));
  EXPECT_EQ(tag, tag_of("5bc94fbc3221a5db94fae95ae7121a47"));
  // A flipped header byte or ciphertext byte fails, and the bytes are left
  // exactly as received.
  const auto sealed = frame;
  for (std::size_t i : {std::size_t{0}, std::size_t{19}, std::size_t{20}, frame.size() - 1}) {
    frame[i] ^= 0x80;
    const auto tampered = frame;
    EXPECT_FALSE(gcm.open_frame(Protection::encrypt, iv, frame, 20, tag)) << i;
    EXPECT_EQ(frame, tampered) << i;
    frame[i] ^= 0x80;
  }
  Tag wrong = tag;
  wrong[15] ^= 1;
  EXPECT_FALSE(gcm.open_frame(Protection::encrypt, iv, frame, 20, wrong));
  EXPECT_EQ(frame, sealed);
  ASSERT_TRUE(gcm.open_frame(Protection::encrypt, iv, frame, 20, tag));
  EXPECT_EQ(frame, hex(std::string("feedfacedeadbeeffeedfacedeadbeefabaddad2") + p4));
}

TEST(Gcm, MovedFromHoldsNoKey) {
  Gcm a;
  ASSERT_TRUE(a.set_key(Algorithm::aes256_gcm, std::vector<std::uint8_t>(32, 7)));
  Gcm b(std::move(a));
  EXPECT_TRUE(b.has_key());
  EXPECT_FALSE(a.has_key());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
}

// Every size a frame can have, both key lengths and both protections,
// against OpenSSL's AES-GCM (an independent implementation): the same
// ciphertext and tag from secure::Gcm, and the frame opens again.
std::vector<std::uint8_t> openssl_gcm(Algorithm a, std::span<const std::uint8_t> key, const Nonce& nonce,
                                      std::span<const std::uint8_t> aad, std::span<const std::uint8_t> plain,
                                      Tag& tag) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  const EVP_CIPHER* cipher = a == Algorithm::aes128_gcm ? EVP_aes_128_gcm() : EVP_aes_256_gcm();
  std::vector<std::uint8_t> out(plain.size() + 16);
  int len = 0;
  int total = 0;
  bool ok = ctx != nullptr && EVP_EncryptInit_ex(ctx, cipher, nullptr, key.data(), nonce.data()) == 1 &&
            (aad.empty() || EVP_EncryptUpdate(ctx, nullptr, &len, aad.data(), static_cast<int>(aad.size())) == 1) &&
            (plain.empty() ||
             EVP_EncryptUpdate(ctx, out.data(), &len, plain.data(), static_cast<int>(plain.size())) == 1);
  total = plain.empty() ? 0 : len;
  ok = ok && EVP_EncryptFinal_ex(ctx, out.data() + total, &len) == 1 &&
       EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(tag_bytes), tag.data()) == 1;
  EVP_CIPHER_CTX_free(ctx);
  EXPECT_TRUE(ok);
  out.resize(plain.size());
  return out;
}

TEST(Gcm, EveryFrameSizeMatchesOpenSsl) {
  std::mt19937 random(20261207);
  for (const Algorithm a : {Algorithm::aes128_gcm, Algorithm::aes256_gcm}) {
    std::vector<std::uint8_t> key(key_bytes(a));
    for (auto& b : key) b = static_cast<std::uint8_t>(random());
    Gcm gcm;
    ASSERT_TRUE(gcm.set_key(a, key));
    for (std::size_t size = 12; size <= 4200; size += size < 300 ? 1 : 61) {
      std::vector<std::uint8_t> frame(size);
      for (auto& b : frame) b = static_cast<std::uint8_t>(random());
      Nonce nonce{};
      for (auto& b : nonce) b = static_cast<std::uint8_t>(random());
      for (const Protection p : {Protection::auth_only, Protection::encrypt}) {
        const std::size_t header = p == Protection::auth_only ? size : 12 + size % 40 % (size - 11);
        Tag expected_tag{};
        const auto expected_body = openssl_gcm(a, key, nonce, std::span(frame).first(header),
                                               std::span(frame).subspan(header), expected_tag);
        auto sealed = frame;
        Tag tag{};
        ASSERT_TRUE(gcm.seal_frame(p, nonce, sealed, header, tag));
        ASSERT_EQ(tag, expected_tag) << to_string(a) << " " << to_string(p) << " size " << size;
        ASSERT_TRUE(std::equal(sealed.begin(), sealed.begin() + static_cast<std::ptrdiff_t>(header), frame.begin()));
        ASSERT_TRUE(std::equal(sealed.begin() + static_cast<std::ptrdiff_t>(header), sealed.end(),
                               expected_body.begin()))
            << to_string(a) << " " << to_string(p) << " size " << size;
        ASSERT_TRUE(gcm.open_frame(p, nonce, sealed, header, tag)) << size;
        ASSERT_EQ(sealed, frame) << size;
      }
    }
  }
}

}  // namespace
}  // namespace metaroce::secure
