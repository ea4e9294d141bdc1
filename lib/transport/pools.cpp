#include "transport/pools.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include "transport/connection.hpp"

namespace metaroce::transport {
namespace {
constexpr std::size_t slab_bytes = 64 * 1024;
constexpr std::align_val_t block_alignment{64};
}  // namespace

BlockPool::BlockPool(std::size_t block_bytes, std::size_t max_blocks, std::uint8_t waiter_bit, int fill)
    : block_bytes_((std::max<std::size_t>(block_bytes, sizeof(FreeBlock)) + 63) / 64 * 64),
      max_blocks_(max_blocks),
      waiter_bit_(waiter_bit),
      fill_(fill) {}

BlockPool::~BlockPool() {
  for (void* s : slabs_) ::operator delete(s, block_alignment);
}

void* BlockPool::take_slow() noexcept {
  if (in_use_ >= max_blocks_) {
    ++dry_;
    return nullptr;
  }
  if (free_ == nullptr) {
    // A slab of 64 KiB (or one block, if larger), cut into free blocks.
    const std::size_t per_slab = std::max<std::size_t>(1, slab_bytes / block_bytes_);
    void* slab = ::operator new(per_slab * block_bytes_, block_alignment, std::nothrow);
    if (slab == nullptr) {
      ++dry_;
      return nullptr;
    }
    try {
      slabs_.push_back(slab);
    } catch (...) {
      ::operator delete(slab, block_alignment);
      ++dry_;
      return nullptr;
    }
    auto* bytes = static_cast<std::byte*>(slab);
    if (fill_ != no_fill) std::memset(slab, fill_, per_slab * block_bytes_);
    for (std::size_t i = per_slab; i-- > 0;) {
      auto* b = reinterpret_cast<FreeBlock*>(bytes + i * block_bytes_);
      b->next = free_;
      free_ = b;
    }
    capacity_ += per_slab;
  }
  FreeBlock* b = free_;
  free_ = b->next;
  note_taken();
  return b;
}

void BlockPool::wait(Connection& c) {
  if ((c.pool_waits_ & waiter_bit_) != 0) return;
  c.pool_waits_ |= waiter_bit_;
  waiters_.push_back(&c);
}

void BlockPool::forget(Connection& c) noexcept {
  if ((c.pool_waits_ & waiter_bit_) == 0) return;
  c.pool_waits_ &= static_cast<std::uint8_t>(~waiter_bit_);
  std::erase(waiters_, &c);
}

void BlockPool::wake_one() noexcept {
  Connection* c = waiters_.front();
  waiters_.pop_front();
  c->pool_waits_ &= static_cast<std::uint8_t>(~waiter_bit_);
  c->request_poll();
}

HostPools::~HostPools() = default;

}  // namespace metaroce::transport
