#include "secure/trailer.hpp"

#include <algorithm>
#include <cstring>

namespace metaroce::secure {

namespace {

std::uint64_t load_be(const std::uint8_t* p, std::size_t n) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

void store_be(std::uint8_t* p, std::uint64_t v, std::size_t n) noexcept {
  for (std::size_t i = n; i-- > 0;) {
    p[i] = static_cast<std::uint8_t>(v);
    v >>= 8;
  }
}

}  // namespace

ReplayWindow::ReplayWindow(std::size_t width) noexcept
    : width_(std::clamp<std::size_t>((width + 63) / 64 * 64, 64, max_width)) {}

bool ReplayWindow::fresh(std::uint64_t counter) const noexcept {
  if (counter == 0) return false;
  if (counter > highest_) return true;
  if (highest_ - counter >= width_) return false;
  const std::size_t bit = counter % width_;
  return (bits_[bit / 64] >> (bit % 64) & 1) == 0;
}

void ReplayWindow::mark(std::uint64_t counter) noexcept {
  if (counter > highest_) {
    // Clear the bits of the counters the window slides over.
    const std::uint64_t step = counter - highest_;
    if (step >= width_) {
      bits_.fill(0);
    } else {
      for (std::uint64_t c = highest_ + 1; c <= counter; ++c) {
        const std::size_t b = c % width_;
        bits_[b / 64] &= ~(std::uint64_t{1} << (b % 64));
      }
    }
    highest_ = counter;
  }
  const std::size_t bit = counter % width_;
  bits_[bit / 64] |= std::uint64_t{1} << (bit % 64);
}

const char* to_string(OpenResult r) noexcept {
  switch (r) {
    case OpenResult::ok: return "ok";
    case OpenResult::no_trailer: return "secure_no_trailer";
    case OpenResult::wrong_spi: return "secure_bad_spi";
    case OpenResult::replayed: return "secure_replayed";
    case OpenResult::bad_tag: return "secure_bad_tag";
  }
  return "?";
}

bool Sealer::set_key(Algorithm a, std::span<const std::uint8_t> key, std::uint32_t spi,
                     Protection p) noexcept {
  spi_ = spi;
  protection_ = p;
  next_ = 1;
  return gcm_.set_key(a, key);
}

bool Sealer::seal(std::span<std::uint8_t> frame, std::size_t header_bytes) noexcept {
  if (frame.size() < trailer_bytes || !gcm_.has_key()) return false;
  const std::size_t region = frame.size() - trailer_bytes;
  std::uint8_t* t = frame.data() + region;
  store_be(t, spi_, 4);
  store_be(t + 4, next_, 8);
  Nonce nonce;
  std::memcpy(nonce.data(), t, nonce_bytes);
  Tag tag;
  if (!gcm_.seal_frame(protection_, nonce, frame.first(region), header_bytes, tag)) return false;
  std::memcpy(t + nonce_bytes, tag.data(), tag_bytes);
  ++next_;
  return true;
}

bool Opener::set_key(Algorithm a, std::span<const std::uint8_t> key, std::uint32_t spi,
                     Protection p, std::size_t replay_width) noexcept {
  spi_ = spi;
  protection_ = p;
  window_ = ReplayWindow(replay_width);
  return gcm_.set_key(a, key);
}

OpenResult Opener::open(std::span<std::uint8_t> frame, std::size_t header_bytes) noexcept {
  if (frame.size() < trailer_bytes) return OpenResult::no_trailer;
  const std::size_t region = frame.size() - trailer_bytes;
  const std::uint8_t* t = frame.data() + region;
  if (!gcm_.has_key() || load_be(t, 4) != spi_) return OpenResult::wrong_spi;
  const std::uint64_t counter = load_be(t + 4, 8);
  if (!window_.fresh(counter)) return OpenResult::replayed;
  Nonce nonce;
  std::memcpy(nonce.data(), t, nonce_bytes);
  Tag tag;
  std::memcpy(tag.data(), t + nonce_bytes, tag_bytes);
  if (!gcm_.open_frame(protection_, nonce, frame.first(region), header_bytes, tag))
    return OpenResult::bad_tag;
  window_.mark(counter);
  return OpenResult::ok;
}

}  // namespace metaroce::secure
