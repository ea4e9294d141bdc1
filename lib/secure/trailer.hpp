// The secure trailer of a frame and the state on each side of one direction.
//
// Trailer (doc/WIRE.md, "Secure trailer"), 28 bytes, between the last
// payload byte and the ICRC:
//   SPI      4 bytes, big-endian: names the key (connection, direction, epoch)
//   counter  8 bytes, big-endian: one per frame sent under that key, from 1
//   tag     16 bytes: AES-GCM tag over the protected region
// The 12-byte GCM nonce is SPI || counter, so the trailer's first 12 bytes
// are the nonce and a key never sees a nonce twice: a retransmission is a
// new frame with a new counter.
//
// Receiving checks the SPI, then the replay window, then the tag, and only
// when all three pass marks the counter seen and (encrypt) leaves the
// plaintext in place. A failing frame changes no state and no byte.
//
// Key epochs: the SPI's top byte is the epoch, its low 24 bits name the
// connection and direction. After `rotate_after` frames under one key the
// sealer moves to the next epoch: the SPI's top byte one more (mod 256), a
// key derived from the current one (next_epoch_key), the counter from 1
// again. The opener holds the previous epoch (frames still in flight when
// the peer switched), the current and the next; the first good frame of
// the next makes it current and derives the one after. A frame of any
// other epoch is unknown_epoch.
#pragma once

#include "secure/gcm.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace metaroce::secure {

inline constexpr std::size_t trailer_bytes = 4 + 8 + tag_bytes;
// Frames under one key before the sender moves to the next epoch: far
// below AES-GCM's usage limits per key (2^31 frames of 4 KiB is 8 TiB).
inline constexpr std::uint64_t default_rotate_after = std::uint64_t{1} << 31;

[[nodiscard]] constexpr std::uint32_t next_epoch_spi(std::uint32_t spi) noexcept {
  return (spi & 0x00ffffffu) | ((((spi >> 24) + 1) & 0xffu) << 24);
}
// The key of the epoch whose SPI is `next_spi`, from the key before it:
// HKDF-SHA256 with no salt (32 zero bytes), the current key as input and
// "metaroce epoch" || next_spi (big-endian) as info. False when OpenSSL fails.
[[nodiscard]] bool next_epoch_key(std::span<const std::uint8_t> key, std::uint32_t next_spi,
                                  std::span<std::uint8_t> out) noexcept;

// Sliding window over the counters of received frames: a counter is fresh
// when above every counter seen, or within `width` below the highest and
// not yet seen. The transport sizes it from its PSN window (a frame older
// than the window could not be placed anyway).
class ReplayWindow {
 public:
  static constexpr std::size_t max_width = 4096;
  explicit ReplayWindow(std::size_t width = 1024) noexcept;
  [[nodiscard]] std::size_t width() const noexcept { return width_; }
  [[nodiscard]] bool fresh(std::uint64_t counter) const noexcept;
  void mark(std::uint64_t counter) noexcept;  // only after fresh() and a good tag
  [[nodiscard]] std::uint64_t highest() const noexcept { return highest_; }

 private:
  std::array<std::uint64_t, max_width / 64> bits_{};
  std::uint64_t highest_ = 0;  // counters start at 1: 0 is "none seen"
  std::size_t width_;
};

enum class OpenResult : std::uint8_t {
  ok,
  no_trailer,  // shorter than a trailer: secure_no_trailer
  wrong_spi,   // a key this side does not hold (another connection or direction): secure_bad_spi
  replayed,    // counter already seen or older than the window: secure_replayed
  bad_tag,     // the tag does not match: secure_bad_tag
  unknown_epoch,  // this connection's SPI, an epoch not previous, current or next: secure_unknown_epoch
};
[[nodiscard]] const char* to_string(OpenResult r) noexcept;

class Sealer {
 public:
  // `spi` is epoch 0's; `rotate_after` (at least 1) the frames per epoch.
  [[nodiscard]] bool set_key(Algorithm a, std::span<const std::uint8_t> key, std::uint32_t spi,
                             Protection p, std::uint64_t rotate_after = default_rotate_after) noexcept;
  // `frame` is the protected region (from the BTH to the last payload byte)
  // followed by trailer_bytes of room; the first `header_bytes` stay clear
  // when encrypting. Writes the trailer; false without a key (or when the
  // next epoch's key cannot be derived).
  [[nodiscard]] bool seal(std::span<std::uint8_t> frame, std::size_t header_bytes) noexcept;
  // The same for an encrypted frame whose payload is not in it yet:
  // `plaintext` (the region's size less header_bytes) is encrypted into
  // the frame after its headers, the copy and the encryption in one pass.
  // False with auth_only.
  [[nodiscard]] bool seal_from(std::span<std::uint8_t> frame, std::size_t header_bytes,
                               std::span<const std::uint8_t> plaintext) noexcept;
  [[nodiscard]] std::uint64_t sent() const noexcept { return sent_; }  // every epoch
  [[nodiscard]] std::uint32_t spi() const noexcept { return spi_; }     // the current epoch's
  [[nodiscard]] std::uint64_t rotations() const noexcept { return rotations_; }

 private:
  [[nodiscard]] bool rotate() noexcept;
  // Both seals: with `from`, `plaintext` is the payload to encrypt into the
  // frame (seal_from); without, the frame is sealed in place (seal).
  [[nodiscard]] bool seal_any(std::span<std::uint8_t> frame, std::size_t header_bytes,
                              std::span<const std::uint8_t> plaintext, bool from) noexcept;

  Gcm gcm_;
  std::array<std::uint8_t, max_key_bytes> key_{};
  std::uint64_t next_ = 1;
  std::uint64_t sent_ = 0;
  std::uint64_t rotate_after_ = default_rotate_after;
  std::uint64_t rotations_ = 0;
  std::uint32_t spi_ = 0;
  Algorithm algorithm_ = Algorithm::aes256_gcm;
  Protection protection_ = Protection::encrypt;
};

class Opener {
 public:
  [[nodiscard]] bool set_key(Algorithm a, std::span<const std::uint8_t> key, std::uint32_t spi,
                             Protection p, std::size_t replay_width) noexcept;
  // `frame` is the protected region followed by its trailer. On ok the
  // region holds the plaintext.
  [[nodiscard]] OpenResult open(std::span<std::uint8_t> frame, std::size_t header_bytes) noexcept;
  // The same without writing the frame: with encrypt, on ok `plaintext`
  // (exactly the region's size less header_bytes) holds the plaintext of
  // the bytes after the headers; on any other result it holds nothing to
  // read. With auth_only nothing is written (`plaintext` may be empty).
  [[nodiscard]] OpenResult open_to(std::span<const std::uint8_t> frame, std::size_t header_bytes,
                                   std::span<std::uint8_t> plaintext) noexcept;
  // The current epoch's window.
  [[nodiscard]] const ReplayWindow& window() const noexcept { return epochs_[current_].window; }
  [[nodiscard]] std::uint32_t spi() const noexcept { return epochs_[current_].spi; }
  // Times a frame of the next epoch made it current.
  [[nodiscard]] std::uint64_t rotations() const noexcept { return rotations_; }

 private:
  struct Epoch {
    Gcm gcm;
    ReplayWindow window;
    std::array<std::uint8_t, max_key_bytes> key{};
    std::uint32_t spi = 0;
    bool valid = false;
  };
  // Fills `to` as the epoch after `from`; invalid when derivation fails.
  void derive(const Epoch& from, Epoch& to) noexcept;

  std::array<Epoch, 3> epochs_;  // previous, current, next: current_ - 1, current_, current_ + 1 (mod 3)
  std::size_t current_ = 0;
  std::size_t replay_width_ = 1024;
  std::uint64_t rotations_ = 0;
  Algorithm algorithm_ = Algorithm::aes256_gcm;
  Protection protection_ = Protection::encrypt;
};

}  // namespace metaroce::secure
