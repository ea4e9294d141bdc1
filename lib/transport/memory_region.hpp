// Registered memory: the only bytes the network may write (rkey) and the
// only bytes a send may read or a receive may fill (lkey).
//
// Every access is checked the same way: the key names a valid region, the
// region grants the right, and [addr, addr + len) lies inside it, computed
// without overflow (addr + len may exceed 2^64 in a hostile packet).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace metaroce::transport {

enum Access : std::uint32_t {
  access_local_write = 1u << 0,
  access_remote_write = 1u << 1,
  access_remote_read = 1u << 2,
  access_remote_atomic = 1u << 3,
};

enum class AccessCheck : std::uint8_t { ok, bad_key, no_permission, out_of_bounds };

[[nodiscard]] constexpr std::string_view to_string(AccessCheck c) noexcept {
  switch (c) {
    case AccessCheck::ok: return "ok";
    case AccessCheck::bad_key: return "bad_key";
    case AccessCheck::no_permission: return "no_permission";
    case AccessCheck::out_of_bounds: return "out_of_bounds";
  }
  return "invalid";
}

// One registry per lcore (or per process in tests); single owner, no locks.
// lkey and rkey of a region are equal; a key's low 8 bits are a generation
// so a stale key of a deregistered slot does not match its next occupant.
class MemoryRegistry {
 public:
  // Returns the key (lkey == rkey) of the new region; 0 never is a key.
  std::uint32_t register_region(void* addr, std::uint64_t length, std::uint32_t access);
  // False when the key names no registered region.
  bool deregister(std::uint32_t key) noexcept;

  // Checks [addr, addr + length) against the region `key` for `right`.
  [[nodiscard]] AccessCheck check(std::uint32_t key, std::uint64_t addr, std::uint64_t length,
                                  std::uint32_t right) const noexcept;

  [[nodiscard]] std::size_t size() const noexcept { return live_; }

 private:
  struct Region {
    std::uint64_t addr = 0;
    std::uint64_t length = 0;
    std::uint32_t access = 0;
    std::uint8_t generation = 1;
    bool live = false;
  };
  std::vector<Region> regions_;
  std::vector<std::uint32_t> free_slots_;
  std::size_t live_ = 0;
};

}  // namespace metaroce::transport
