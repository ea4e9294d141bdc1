#include "secure/gcm.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <climits>
#include <utility>

namespace metaroce::secure {

const char* to_string(Algorithm a) noexcept {
  return a == Algorithm::aes128_gcm ? "aes-128-gcm" : "aes-256-gcm";
}

const char* to_string(Protection p) noexcept {
  return p == Protection::encrypt ? "encrypt" : "auth-only";
}

Gcm::~Gcm() { release(); }

Gcm::Gcm(Gcm&& other) noexcept
    : seal_ctx_(std::exchange(other.seal_ctx_, nullptr)),
      open_ctx_(std::exchange(other.open_ctx_, nullptr)),
      algorithm_(other.algorithm_) {}

Gcm& Gcm::operator=(Gcm&& other) noexcept {
  if (this != &other) {
    release();
    seal_ctx_ = std::exchange(other.seal_ctx_, nullptr);
    open_ctx_ = std::exchange(other.open_ctx_, nullptr);
    algorithm_ = other.algorithm_;
  }
  return *this;
}

void Gcm::release() noexcept {
  EVP_CIPHER_CTX_free(seal_ctx_);
  EVP_CIPHER_CTX_free(open_ctx_);
  seal_ctx_ = nullptr;
  open_ctx_ = nullptr;
}

bool Gcm::set_key(Algorithm algorithm, std::span<const std::uint8_t> key) noexcept {
  release();
  if (key.size() != key_bytes(algorithm)) return false;
  const EVP_CIPHER* cipher =
      algorithm == Algorithm::aes128_gcm ? EVP_aes_128_gcm() : EVP_aes_256_gcm();
  EVP_CIPHER_CTX* s = EVP_CIPHER_CTX_new();
  EVP_CIPHER_CTX* o = EVP_CIPHER_CTX_new();
  bool ok = s != nullptr && o != nullptr &&
            EVP_EncryptInit_ex(s, cipher, nullptr, key.data(), nullptr) == 1 &&
            EVP_DecryptInit_ex(o, cipher, nullptr, key.data(), nullptr) == 1;
  if (!ok) {
    EVP_CIPHER_CTX_free(s);
    EVP_CIPHER_CTX_free(o);
    return false;
  }
  seal_ctx_ = s;
  open_ctx_ = o;
  algorithm_ = algorithm;
  return true;
}

namespace {

bool fits_int(std::size_t n) noexcept { return n <= static_cast<std::size_t>(INT_MAX); }

bool add_aad(EVP_CIPHER_CTX* ctx, std::span<const std::uint8_t> aad) noexcept {
  if (aad.empty()) return true;
  int len = 0;
  return fits_int(aad.size()) &&
         EVP_EncryptUpdate(ctx, nullptr, &len, aad.data(), static_cast<int>(aad.size())) == 1;
}

bool finish(EVP_CIPHER_CTX* ctx, Tag& tag) noexcept {
  int len = 0;
  std::uint8_t none[16];
  return EVP_EncryptFinal_ex(ctx, none, &len) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(tag_bytes),
                             tag.data()) == 1;
}

}  // namespace

bool Gcm::seal(const Nonce& nonce, std::span<const std::uint8_t> aad,
               std::span<std::uint8_t> data, Tag& tag) noexcept {
  if (seal_ctx_ == nullptr || !fits_int(data.size())) return false;
  if (EVP_EncryptInit_ex(seal_ctx_, nullptr, nullptr, nullptr, nonce.data()) != 1) return false;
  if (!add_aad(seal_ctx_, aad)) return false;
  if (!data.empty()) {
    int len = 0;
    if (EVP_EncryptUpdate(seal_ctx_, data.data(), &len, data.data(),
                          static_cast<int>(data.size())) != 1)
      return false;
  }
  return finish(seal_ctx_, tag);
}

bool Gcm::open(const Nonce& nonce, std::span<const std::uint8_t> aad,
               std::span<std::uint8_t> data, const Tag& tag) noexcept {
  if (open_ctx_ == nullptr || !fits_int(data.size())) return false;
  EVP_CIPHER_CTX* ctx = open_ctx_;
  int len = 0;
  if (EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data()) != 1) return false;
  if (!aad.empty() && EVP_DecryptUpdate(ctx, nullptr, &len, aad.data(),
                                        static_cast<int>(aad.size())) != 1)
    return false;
  if (!data.empty() && EVP_DecryptUpdate(ctx, data.data(), &len, data.data(),
                                         static_cast<int>(data.size())) != 1)
    return false;
  Tag expected = tag;
  if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, static_cast<int>(tag_bytes),
                          expected.data()) != 1)
    return false;
  std::uint8_t none[16];
  if (EVP_DecryptFinal_ex(ctx, none, &len) == 1) return true;
  // A bad tag: the counter-mode keystream is its own inverse, so running the
  // same nonce over the bytes again gives back exactly what was received.
  // Only failing frames pay for it.
  if (!data.empty()) {
    Tag ignored{};
    (void)seal(nonce, {}, data, ignored);
  }
  return false;
}

bool Gcm::seal_frame(Protection protection, const Nonce& nonce, std::span<std::uint8_t> frame,
                     std::size_t header_bytes, Tag& tag) noexcept {
  if (protection == Protection::auth_only) return seal(nonce, frame, {}, tag);
  if (header_bytes > frame.size()) header_bytes = frame.size();
  return seal(nonce, frame.first(header_bytes), frame.subspan(header_bytes), tag);
}

bool Gcm::open_frame(Protection protection, const Nonce& nonce, std::span<std::uint8_t> frame,
                     std::size_t header_bytes, const Tag& tag) noexcept {
  if (protection == Protection::auth_only) return open(nonce, frame, {}, tag);
  if (header_bytes > frame.size()) header_bytes = frame.size();
  return open(nonce, frame.first(header_bytes), frame.subspan(header_bytes), tag);
}

}  // namespace metaroce::secure
