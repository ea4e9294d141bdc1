#include "secure/keys.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/sha.h>

namespace metaroce::secure {

bool load_psk(const std::string& path, Psk& out, std::string& error) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    error = "key file " + path + ": " + std::strerror(errno) +
            " (make one with: head -c 32 /dev/urandom > FILE; chmod 600 FILE, and copy it to the peer)";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error = "key file " + path + " is not a regular file";
    return false;
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    error = "key file " + path + " may be read or written by its group or others: chmod 600 " + path;
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "key file " + path + ": cannot be opened for reading";
    return false;
  }
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < min_psk_file_bytes) {
    error = "key file " + path + " holds " + std::to_string(bytes.size()) + " bytes: it needs at least " +
            std::to_string(min_psk_file_bytes) + " random bytes (head -c 32 /dev/urandom > FILE)";
    return false;
  }
  unsigned int n = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), out.data(), &n, EVP_sha256(), nullptr) != 1 || n != out.size()) {
    error = "key file " + path + ": OpenSSL could not hash it";
    return false;
  }
  return true;
}

Mac hmac(std::span<const std::uint8_t> key, std::span<const std::uint8_t> data) noexcept {
  Mac mac{};
  unsigned int n = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(), mac.data(), &n) ==
      nullptr)
    mac.fill(0);
  return mac;
}

bool same_mac(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) noexcept {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool hkdf(std::span<const std::uint8_t> salt, std::span<const std::uint8_t> ikm, std::span<const std::uint8_t> info,
          std::span<std::uint8_t> out) noexcept {
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  if (ctx == nullptr) return false;
  std::size_t n = out.size();
  const bool ok = EVP_PKEY_derive_init(ctx) == 1 && EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) == 1 &&
                  EVP_PKEY_CTX_set1_hkdf_salt(ctx, salt.data(), static_cast<int>(salt.size())) == 1 &&
                  EVP_PKEY_CTX_set1_hkdf_key(ctx, ikm.data(), static_cast<int>(ikm.size())) == 1 &&
                  EVP_PKEY_CTX_add1_hkdf_info(ctx, info.data(), static_cast<int>(info.size())) == 1 &&
                  EVP_PKEY_derive(ctx, out.data(), &n) == 1 && n == out.size();
  EVP_PKEY_CTX_free(ctx);
  return ok;
}

EphemeralKey::~EphemeralKey() { EVP_PKEY_free(key_); }

EphemeralKey::EphemeralKey(EphemeralKey&& other) noexcept : key_(other.key_), public_(other.public_) {
  other.key_ = nullptr;
}

EphemeralKey& EphemeralKey::operator=(EphemeralKey&& other) noexcept {
  if (this != &other) {
    EVP_PKEY_free(key_);
    key_ = other.key_;
    public_ = other.public_;
    other.key_ = nullptr;
  }
  return *this;
}

bool EphemeralKey::generate() noexcept {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "X25519");
  if (key == nullptr) return false;
  std::size_t n = public_.size();
  if (EVP_PKEY_get_raw_public_key(key, public_.data(), &n) != 1 || n != public_.size()) {
    EVP_PKEY_free(key);
    return false;
  }
  EVP_PKEY_free(key_);
  key_ = key;
  return true;
}

bool EphemeralKey::agree(const PublicKey& peer, std::array<std::uint8_t, 32>& secret) const noexcept {
  if (key_ == nullptr) return false;
  EVP_PKEY* other = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer.data(), peer.size());
  if (other == nullptr) return false;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new(key_, nullptr);
  std::size_t n = secret.size();
  // OpenSSL refuses a low-order peer point (an all-zero secret).
  const bool ok = ctx != nullptr && EVP_PKEY_derive_init(ctx) == 1 && EVP_PKEY_derive_set_peer(ctx, other) == 1 &&
                  EVP_PKEY_derive(ctx, secret.data(), &n) == 1 && n == secret.size();
  EVP_PKEY_CTX_free(ctx);
  EVP_PKEY_free(other);
  return ok;
}

}  // namespace metaroce::secure
