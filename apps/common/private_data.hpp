// The private data of connection-manager messages (at most
// cm::max_private_data bytes each way): big-endian fields in order, written
// and read back by field, so each app's handshake is a list of fields.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "wire/byte_order.hpp"

namespace metaroce::apps {

// At most max_bytes (the CM's limit): what goes beyond is dropped and ok()
// turns false.
class PrivateDataWriter {
 public:
  static constexpr std::size_t max_bytes = 64;

  PrivateDataWriter& u8(std::uint8_t v) {
    if (std::uint8_t* p = grow(1)) *p = v;
    return *this;
  }
  PrivateDataWriter& u16(std::uint16_t v) {
    if (std::uint8_t* p = grow(2)) wire::store_be16(p, v);
    return *this;
  }
  PrivateDataWriter& u32(std::uint32_t v) {
    if (std::uint8_t* p = grow(4)) wire::store_be32(p, v);
    return *this;
  }
  PrivateDataWriter& u64(std::uint64_t v) {
    if (std::uint8_t* p = grow(8)) wire::store_be64(p, v);
    return *this;
  }
  PrivateDataWriter& put(std::uint16_t v) { return u16(v); }
  PrivateDataWriter& put(std::uint32_t v) { return u32(v); }
  PrivateDataWriter& put(std::uint64_t v) { return u64(v); }
  [[nodiscard]] bool ok() const noexcept { return ok_; }
  [[nodiscard]] std::vector<std::uint8_t> take() const {
    return std::vector<std::uint8_t>(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(size_));
  }

 private:
  std::uint8_t* grow(std::size_t n) {
    if (max_bytes - size_ < n) {
      ok_ = false;
      return nullptr;
    }
    std::uint8_t* p = bytes_.data() + size_;
    size_ += n;
    return p;
  }
  std::array<std::uint8_t, max_bytes> bytes_{};
  std::size_t size_ = 0;
  bool ok_ = true;
};

// Once a read runs past the end, ok() is false and every read returns 0.
class PrivateDataReader {
 public:
  explicit PrivateDataReader(const std::vector<std::uint8_t>& bytes) : bytes_(bytes) {}
  std::uint8_t u8() {
    const std::uint8_t* p = take(1);
    return p == nullptr ? 0 : *p;
  }
  std::uint16_t u16() {
    const std::uint8_t* p = take(2);
    return p == nullptr ? 0 : wire::load_be16(p);
  }
  std::uint32_t u32() {
    const std::uint8_t* p = take(4);
    return p == nullptr ? 0 : wire::load_be32(p);
  }
  std::uint64_t u64() {
    const std::uint8_t* p = take(8);
    return p == nullptr ? 0 : wire::load_be64(p);
  }
  void get(std::uint16_t& v) { v = u16(); }
  void get(std::uint32_t& v) { v = u32(); }
  void get(std::uint64_t& v) { v = u64(); }
  [[nodiscard]] bool ok() const noexcept { return ok_; }

 private:
  const std::uint8_t* take(std::size_t n) {
    if (!ok_ || bytes_.size() - at_ < n) {
      ok_ = false;
      return nullptr;
    }
    const std::uint8_t* p = bytes_.data() + at_;
    at_ += n;
    return p;
  }
  const std::vector<std::uint8_t>& bytes_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

}  // namespace metaroce::apps
