#include "secure/trailer.hpp"

#include "secure/keys.hpp"
#include "wire/byte_order.hpp"

#include <algorithm>
#include <cstring>

namespace metaroce::secure {

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
    case OpenResult::unknown_epoch: return "secure_unknown_epoch";
  }
  return "?";
}

bool next_epoch_key(std::span<const std::uint8_t> key, std::uint32_t next_spi,
                    std::span<std::uint8_t> out) noexcept {
  std::array<std::uint8_t, 18> info{'m', 'e', 't', 'a', 'r', 'o', 'c', 'e', ' ', 'e', 'p', 'o', 'c', 'h'};
  wire::store_be32(info.data() + 14, next_spi);
  const std::array<std::uint8_t, 32> no_salt{};  // RFC 5869: no salt is HashLen zero bytes
  return hkdf(no_salt, key, info, out);
}

bool Sealer::set_key(Algorithm a, std::span<const std::uint8_t> key, std::uint32_t spi, Protection p,
                     std::uint64_t rotate_after) noexcept {
  spi_ = spi;
  protection_ = p;
  algorithm_ = a;
  next_ = 1;
  sent_ = 0;
  rotations_ = 0;
  rotate_after_ = std::max<std::uint64_t>(rotate_after, 1);
  key_.fill(0);
  if (key.size() != key_bytes(a)) return false;
  std::copy(key.begin(), key.end(), key_.begin());
  return gcm_.set_key(a, key);
}

bool Sealer::rotate() noexcept {
  const std::size_t n = key_bytes(algorithm_);
  const std::uint32_t spi = next_epoch_spi(spi_);
  std::array<std::uint8_t, max_key_bytes> key{};
  if (!next_epoch_key(std::span<const std::uint8_t>(key_.data(), n), spi, std::span<std::uint8_t>(key.data(), n)) ||
      !gcm_.set_key(algorithm_, std::span<const std::uint8_t>(key.data(), n)))
    return false;
  key_ = key;
  spi_ = spi;
  next_ = 1;
  ++rotations_;
  return true;
}

bool Sealer::seal(std::span<std::uint8_t> frame, std::size_t header_bytes) noexcept {
  return seal_any(frame, header_bytes, {}, false);
}

bool Sealer::seal_from(std::span<std::uint8_t> frame, std::size_t header_bytes,
                       std::span<const std::uint8_t> plaintext) noexcept {
  return seal_any(frame, header_bytes, plaintext, true);
}

bool Sealer::seal_any(std::span<std::uint8_t> frame, std::size_t header_bytes, std::span<const std::uint8_t> plaintext,
                      bool from) noexcept {
  if (frame.size() < trailer_bytes || !gcm_.has_key()) return false;
  if (from && (protection_ != Protection::encrypt || header_bytes > frame.size() - trailer_bytes ||
               plaintext.size() != frame.size() - trailer_bytes - header_bytes))
    return false;
  if (next_ > rotate_after_ && !rotate()) return false;
  const std::size_t region = frame.size() - trailer_bytes;
  std::uint8_t* t = frame.data() + region;
  // The nonce and the trailer's copy of it, each written whole from
  // registers (a copy of one into the other would read back narrower
  // stores, which the CPU cannot forward: a stall per frame).
  Nonce nonce;
  wire::store_be32(nonce.data(), spi_);
  wire::store_be64(nonce.data() + 4, next_);
  wire::store_be32(t, spi_);
  wire::store_be64(t + 4, next_);
  Tag tag;
  const bool sealed = from ? gcm_.seal_frame_from(protection_, nonce, frame.first(region), header_bytes, plaintext, tag)
                           : gcm_.seal_frame(protection_, nonce, frame.first(region), header_bytes, tag);
  if (!sealed) return false;
  std::memcpy(t + nonce_bytes, tag.data(), tag_bytes);
  ++next_;
  ++sent_;
  return true;
}

void Opener::derive(const Epoch& from, Epoch& to) noexcept {
  to.valid = false;
  to.window = ReplayWindow(replay_width_);
  to.spi = next_epoch_spi(from.spi);
  if (!from.valid) return;
  const std::size_t n = key_bytes(algorithm_);
  to.valid = next_epoch_key(std::span<const std::uint8_t>(from.key.data(), n), to.spi,
                            std::span<std::uint8_t>(to.key.data(), n)) &&
             to.gcm.set_key(algorithm_, std::span<const std::uint8_t>(to.key.data(), n));
}

bool Opener::set_key(Algorithm a, std::span<const std::uint8_t> key, std::uint32_t spi, Protection p,
                     std::size_t replay_width) noexcept {
  protection_ = p;
  algorithm_ = a;
  replay_width_ = replay_width;
  rotations_ = 0;
  current_ = 0;
  for (Epoch& e : epochs_) {
    e.valid = false;
    e.key.fill(0);
    e.window = ReplayWindow(replay_width);
  }
  Epoch& cur = epochs_[0];
  cur.spi = spi;
  if (key.size() != key_bytes(a) || !cur.gcm.set_key(a, key)) return false;
  std::copy(key.begin(), key.end(), cur.key.begin());
  cur.valid = true;
  derive(cur, epochs_[1]);
  return epochs_[1].valid;
}

OpenResult Opener::open(std::span<std::uint8_t> frame, std::size_t header_bytes) noexcept {
  if (frame.size() < trailer_bytes) return OpenResult::no_trailer;
  const std::size_t region = frame.size() - trailer_bytes;
  header_bytes = std::min(header_bytes, region);
  // In place: the plaintext is written over the ciphertext it comes from.
  return open_to(frame, header_bytes, frame.subspan(header_bytes, region - header_bytes));
}

OpenResult Opener::open_to(std::span<const std::uint8_t> frame, std::size_t header_bytes,
                           std::span<std::uint8_t> plaintext) noexcept {
  if (frame.size() < trailer_bytes) return OpenResult::no_trailer;
  const std::size_t region = frame.size() - trailer_bytes;
  const std::uint8_t* t = frame.data() + region;
  const std::uint32_t spi = wire::load_be32(t);
  Epoch& cur = epochs_[current_];
  if (!cur.valid || (spi & 0x00ffffffu) != (cur.spi & 0x00ffffffu)) return OpenResult::wrong_spi;
  const std::size_t next = (current_ + 1) % epochs_.size();
  const std::size_t previous = (current_ + 2) % epochs_.size();
  std::size_t which = current_;
  if (spi != cur.spi) {
    if (epochs_[next].valid && spi == epochs_[next].spi) which = next;
    else if (epochs_[previous].valid && spi == epochs_[previous].spi) which = previous;
    else return OpenResult::unknown_epoch;
  }
  Epoch& e = epochs_[which];
  const std::uint64_t counter = wire::load_be64(t + 4);
  if (!e.window.fresh(counter)) return OpenResult::replayed;
  Nonce nonce;
  std::memcpy(nonce.data(), t, nonce_bytes);
  Tag tag;
  std::memcpy(tag.data(), t + nonce_bytes, tag_bytes);
  if (!e.gcm.open_frame_to(protection_, nonce, frame.first(region), header_bytes, tag, plaintext))
    return OpenResult::bad_tag;
  e.window.mark(counter);
  if (which == next) {
    // The peer moved on: the next epoch becomes current, the old current
    // previous, and the slot of the old previous takes the one after.
    current_ = next;
    derive(epochs_[current_], epochs_[(current_ + 1) % epochs_.size()]);
    ++rotations_;
  }
  return OpenResult::ok;
}

}  // namespace metaroce::secure
