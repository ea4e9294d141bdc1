// AES-GCM over one frame, through intel-ipsec-mb's direct GCM calls.
//
// A Gcm holds the key of one direction of one connection: its expanded AES
// key and GHASH key powers, made once when the key is set. Sealing or
// opening a frame is then one library call with the nonce, so no packet
// allocates or looks anything up.
//
// Two protections, as PSP has them:
//  - encrypt: the frame's first `header_bytes` are authenticated, the rest
//    is encrypted in place and authenticated;
//  - auth_only: the whole frame is authenticated (GMAC) and left as it is.
// Either way the 16-byte tag covers every byte of the frame, and a frame
// whose tag does not match is left as it was received (open() puts the
// received bytes back when the tag fails).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

struct gcm_key_data;  // intel-ipsec-mb's expanded key

namespace metaroce::secure {

enum class Algorithm : std::uint8_t { aes128_gcm, aes256_gcm };
enum class Protection : std::uint8_t { encrypt, auth_only };

inline constexpr std::size_t tag_bytes = 16;
inline constexpr std::size_t nonce_bytes = 12;
inline constexpr std::size_t max_key_bytes = 32;

using Tag = std::array<std::uint8_t, tag_bytes>;
using Nonce = std::array<std::uint8_t, nonce_bytes>;

[[nodiscard]] constexpr std::size_t key_bytes(Algorithm a) noexcept {
  return a == Algorithm::aes128_gcm ? 16 : 32;
}
[[nodiscard]] const char* to_string(Algorithm a) noexcept;
[[nodiscard]] const char* to_string(Protection p) noexcept;

class Gcm {
 public:
  Gcm() noexcept = default;
  ~Gcm();
  Gcm(const Gcm&) = delete;
  Gcm& operator=(const Gcm&) = delete;
  Gcm(Gcm&& other) noexcept;
  Gcm& operator=(Gcm&& other) noexcept;

  // False (and no key held) when `key` is not key_bytes(algorithm) long or
  // the library cannot start.
  [[nodiscard]] bool set_key(Algorithm algorithm, std::span<const std::uint8_t> key) noexcept;
  [[nodiscard]] bool has_key() const noexcept { return key_ != nullptr; }
  [[nodiscard]] Algorithm algorithm() const noexcept { return algorithm_; }

  // The general form: `aad` authenticated, `data` encrypted in place.
  // False only when no key is held.
  [[nodiscard]] bool seal(const Nonce& nonce, std::span<const std::uint8_t> aad,
                          std::span<std::uint8_t> data, Tag& tag) noexcept;
  // The same, encrypting `in` into `out` (of in's size; they may be the
  // same bytes): the copy and the encryption in one pass. False too when
  // the sizes differ.
  [[nodiscard]] bool seal_to(const Nonce& nonce, std::span<const std::uint8_t> aad,
                             std::span<const std::uint8_t> in, std::span<std::uint8_t> out, Tag& tag) noexcept;
  // True when the tag matches; `data` is then the plaintext. When it does
  // not match, `data` is left exactly as given.
  [[nodiscard]] bool open(const Nonce& nonce, std::span<const std::uint8_t> aad,
                          std::span<std::uint8_t> data, const Tag& tag) noexcept;
  // The same, decrypting `in` into `out` (of in's size; the two may be the
  // same bytes, as open() has them): when the tag does not match, `in` is
  // untouched and `out` holds nothing to read. False too when the sizes
  // differ.
  [[nodiscard]] bool open_to(const Nonce& nonce, std::span<const std::uint8_t> aad,
                             std::span<const std::uint8_t> in, std::span<std::uint8_t> out,
                             const Tag& tag) noexcept;

  // One frame: see the file comment. `header_bytes` is clamped to the frame.
  [[nodiscard]] bool seal_frame(Protection protection, const Nonce& nonce,
                                std::span<std::uint8_t> frame, std::size_t header_bytes,
                                Tag& tag) noexcept;
  // One encrypted frame whose bytes after `header_bytes` are still to be
  // written: `plaintext` (exactly that many bytes, elsewhere in memory) is
  // encrypted into them. False with auth_only, which needs the bytes in
  // the frame.
  [[nodiscard]] bool seal_frame_from(Protection protection, const Nonce& nonce,
                                     std::span<std::uint8_t> frame, std::size_t header_bytes,
                                     std::span<const std::uint8_t> plaintext, Tag& tag) noexcept;
  [[nodiscard]] bool open_frame(Protection protection, const Nonce& nonce,
                                std::span<std::uint8_t> frame, std::size_t header_bytes,
                                const Tag& tag) noexcept;
  // One frame opened without writing it: encrypt puts the plaintext of the
  // bytes after `header_bytes` into `plaintext` (exactly that many bytes);
  // auth_only writes nothing (`plaintext` may be empty).
  [[nodiscard]] bool open_frame_to(Protection protection, const Nonce& nonce,
                                   std::span<const std::uint8_t> frame, std::size_t header_bytes,
                                   const Tag& tag, std::span<std::uint8_t> plaintext) noexcept;

 private:
  void release() noexcept;

  gcm_key_data* key_ = nullptr;
  Algorithm algorithm_ = Algorithm::aes128_gcm;
};

}  // namespace metaroce::secure
