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
#pragma once

#include "secure/gcm.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace metaroce::secure {

inline constexpr std::size_t trailer_bytes = 4 + 8 + tag_bytes;

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
  wrong_spi,   // a key this side does not hold (another connection, a stale epoch): secure_bad_spi
  replayed,    // counter already seen or older than the window: secure_replayed
  bad_tag,     // the tag does not match: secure_bad_tag
};
[[nodiscard]] const char* to_string(OpenResult r) noexcept;

class Sealer {
 public:
  [[nodiscard]] bool set_key(Algorithm a, std::span<const std::uint8_t> key, std::uint32_t spi,
                             Protection p) noexcept;
  // `frame` is the protected region (from the BTH to the last payload byte)
  // followed by trailer_bytes of room; the first `header_bytes` stay clear
  // when encrypting. Writes the trailer; false without a key.
  [[nodiscard]] bool seal(std::span<std::uint8_t> frame, std::size_t header_bytes) noexcept;
  [[nodiscard]] std::uint64_t sent() const noexcept { return next_ - 1; }
  [[nodiscard]] std::uint32_t spi() const noexcept { return spi_; }

 private:
  Gcm gcm_;
  std::uint64_t next_ = 1;
  std::uint32_t spi_ = 0;
  Protection protection_ = Protection::encrypt;
};

class Opener {
 public:
  [[nodiscard]] bool set_key(Algorithm a, std::span<const std::uint8_t> key, std::uint32_t spi,
                             Protection p, std::size_t replay_width) noexcept;
  // `frame` is the protected region followed by its trailer. On ok the
  // region holds the plaintext.
  [[nodiscard]] OpenResult open(std::span<std::uint8_t> frame, std::size_t header_bytes) noexcept;
  [[nodiscard]] const ReplayWindow& window() const noexcept { return window_; }

 private:
  Gcm gcm_;
  ReplayWindow window_;
  std::uint32_t spi_ = 0;
  Protection protection_ = Protection::encrypt;
};

}  // namespace metaroce::secure
