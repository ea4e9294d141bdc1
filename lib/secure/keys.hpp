// What a connection's keys are made from, through OpenSSL 3: the
// pre-shared key file both ends hold, an ephemeral X25519 key pair per
// connection attempt, HMAC-SHA256 over connection manager messages and
// HKDF-SHA256 from the X25519 secret (doc/DESIGN.md, "Security").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

using evp_pkey_st = struct evp_pkey_st;

namespace metaroce::secure {

inline constexpr std::size_t psk_bytes = 32;
inline constexpr std::size_t min_psk_file_bytes = 32;
inline constexpr std::size_t public_key_bytes = 32;  // X25519
inline constexpr std::size_t mac_bytes = 32;         // HMAC-SHA256

using Psk = std::array<std::uint8_t, psk_bytes>;
using PublicKey = std::array<std::uint8_t, public_key_bytes>;
using Mac = std::array<std::uint8_t, mac_bytes>;

// The key in `path`: SHA-256 of the file's bytes. False and `error` (what
// is wrong, how to fix it) when the file cannot be read, holds fewer than
// min_psk_file_bytes bytes, or may be read by its group or others.
[[nodiscard]] bool load_psk(const std::string& path, Psk& out, std::string& error);

// HMAC-SHA256 of `data` under `key`.
[[nodiscard]] Mac hmac(std::span<const std::uint8_t> key, std::span<const std::uint8_t> data) noexcept;
// Compares in constant time.
[[nodiscard]] bool same_mac(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) noexcept;

// HKDF-SHA256 (RFC 5869): `out.size()` bytes from `ikm`, `salt`, `info`.
[[nodiscard]] bool hkdf(std::span<const std::uint8_t> salt, std::span<const std::uint8_t> ikm,
                        std::span<const std::uint8_t> info, std::span<std::uint8_t> out) noexcept;

// One X25519 key pair, made fresh by generate().
class EphemeralKey {
 public:
  EphemeralKey() noexcept = default;
  ~EphemeralKey();
  EphemeralKey(const EphemeralKey&) = delete;
  EphemeralKey& operator=(const EphemeralKey&) = delete;
  EphemeralKey(EphemeralKey&& other) noexcept;
  EphemeralKey& operator=(EphemeralKey&& other) noexcept;

  [[nodiscard]] bool generate() noexcept;
  [[nodiscard]] bool has_key() const noexcept { return key_ != nullptr; }
  [[nodiscard]] const PublicKey& public_key() const noexcept { return public_; }
  // The X25519 secret shared with the holder of `peer`; false when `peer`
  // is not a usable public key (all zero, a low-order point).
  [[nodiscard]] bool agree(const PublicKey& peer, std::array<std::uint8_t, 32>& secret) const noexcept;

 private:
  evp_pkey_st* key_ = nullptr;
  PublicKey public_{};
};

}  // namespace metaroce::secure
