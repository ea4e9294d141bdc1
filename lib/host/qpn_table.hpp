// The QPN -> connection index a host looks each received frame up in: open
// addressing with linear probing over 16-byte slots (four to a cache
// line), at most half full, so that a look-up costs one line of the table
// and then the connection itself. std::unordered_map, which owns the
// connections, costs a bucket, a node and the connection: three dependent
// misses per frame once thousands of connections push them out of cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace metaroce::transport {
class Connection;
}

namespace metaroce::host {

class QpnTable {
 public:
  // The connection of `qpn`, or nullptr.
  [[nodiscard]] transport::Connection* find(std::uint32_t qpn) const noexcept {
    if (size_ == 0) return nullptr;
    for (std::size_t i = home(qpn);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.connection == nullptr) return nullptr;
      if (s.qpn == qpn) return s.connection;
    }
  }
  // Adds or replaces the entry of `qpn` (`c` not nullptr).
  void insert(std::uint32_t qpn, transport::Connection* c);
  // Removes the entry of `qpn`; false when there was none.
  bool erase(std::uint32_t qpn) noexcept;
  void clear() noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return slots_.size(); }

 private:
  struct Slot {
    std::uint32_t qpn = 0;
    transport::Connection* connection = nullptr;  // nullptr: empty
  };
  // Fibonacci hashing: QPNs may be sequential (the simulator's) or random
  // (the engine's); the top bits of the product spread both.
  [[nodiscard]] std::size_t home(std::uint32_t qpn) const noexcept {
    return static_cast<std::size_t>((std::uint64_t{qpn} * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void grow();

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace metaroce::host
