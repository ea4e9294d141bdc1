#include "transport/memory_region.hpp"

namespace metaroce::transport {

std::uint32_t MemoryRegistry::register_region(void* addr, std::uint64_t length, std::uint32_t access) {
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(regions_.size());
    regions_.emplace_back();
  }
  Region& r = regions_[slot];
  r.addr = reinterpret_cast<std::uintptr_t>(addr);
  r.length = length;
  r.access = access;
  r.live = true;
  ++live_;
  return ((slot + 1) << 8) | r.generation;
}

bool MemoryRegistry::deregister(std::uint32_t key) noexcept {
  const std::uint32_t slot = (key >> 8) - 1;
  if ((key >> 8) == 0 || slot >= regions_.size()) return false;
  Region& r = regions_[slot];
  if (!r.live || r.generation != (key & 0xff)) return false;
  r.live = false;
  // Skip 0 so that a key is never 0.
  r.generation = static_cast<std::uint8_t>(r.generation == 255 ? 1 : r.generation + 1);
  free_slots_.push_back(slot);
  --live_;
  return true;
}

AccessCheck MemoryRegistry::check(std::uint32_t key, std::uint64_t addr, std::uint64_t length,
                                  std::uint32_t right) const noexcept {
  const std::uint32_t slot = (key >> 8) - 1;
  if ((key >> 8) == 0 || slot >= regions_.size()) return AccessCheck::bad_key;
  const Region& r = regions_[slot];
  if (!r.live || r.generation != (key & 0xff)) return AccessCheck::bad_key;
  if ((r.access & right) != right) return AccessCheck::no_permission;
  // addr - r.addr cannot underflow after the first test, and the second
  // compares against the room left without ever forming addr + length.
  if (addr < r.addr || length > r.length || addr - r.addr > r.length - length)
    return AccessCheck::out_of_bounds;
  return AccessCheck::ok;
}

}  // namespace metaroce::transport
