// Storage a host's connections share, taken as traffic needs it and given
// back when it no longer does: a connection's limits (PSN window, stream
// window, paths) are limits, not allocations. doc/DESIGN.md ("Connection
// memory") has the bytes per connection.
//
// BlockPool hands out blocks of one size from slabs it allocates as it
// grows (never returned to the system: what a host needed once it is likely
// to need again) up to a limit; a pool at its limit is dry, and a
// connection that finds it dry waits (HostPools::wait) and is woken, on its
// owner's ready list, when a block comes back. Nothing is dropped: the
// sender keeps its packets unsent, the receiver leaves a packet unplaced
// and unacknowledged for the sender to resend.
// Threading: the owner's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

namespace metaroce::transport {

class Connection;

class BlockPool {
 public:
  static constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();

  // `waiter_bit` tells this pool's waiters apart from other pools' in a
  // connection (Connection::pool_waits_). `fill`: the byte a new slab's
  // blocks are filled with (no_fill: left as they come).
  static constexpr int no_fill = -1;
  BlockPool(std::size_t block_bytes, std::size_t max_blocks, std::uint8_t waiter_bit, int fill = no_fill);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A block of block_bytes() aligned to 64, or nullptr when max_blocks are
  // in use (or the system has no memory): counted in dry().
  [[nodiscard]] void* take() noexcept {
    if (free_ != nullptr && in_use_ < max_blocks_) {
      FreeBlock* b = free_;
      free_ = b->next;
      note_taken();
      return b;
    }
    return take_slow();
  }
  void give(void* block) noexcept {
    auto* b = static_cast<FreeBlock*>(block);
    b->next = free_;
    free_ = b;
    --in_use_;
    if (!waiters_.empty()) wake_one();
  }

  // `c` found this pool dry: it is woken (its poll requested) when a block
  // comes back, waiters in the order they came. Once until woken.
  void wait(Connection& c);
  // Takes `c` off the waiters (a connection being destroyed).
  void forget(Connection& c) noexcept;
  [[nodiscard]] std::size_t waiters() const noexcept { return waiters_.size(); }

  [[nodiscard]] std::size_t block_bytes() const noexcept { return block_bytes_; }
  [[nodiscard]] std::size_t in_use() const noexcept { return in_use_; }
  [[nodiscard]] std::size_t peak() const noexcept { return peak_; }
  [[nodiscard]] std::size_t max_blocks() const noexcept { return max_blocks_; }
  // Blocks allocated from the system (in use or free).
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::uint64_t dry() const noexcept { return dry_; }

 private:
  struct FreeBlock {
    FreeBlock* next;
  };
  void note_taken() noexcept {
    ++in_use_;
    if (in_use_ > peak_) peak_ = in_use_;
  }
  void* take_slow() noexcept;
  void wake_one() noexcept;

  std::size_t block_bytes_;
  std::size_t max_blocks_;
  FreeBlock* free_ = nullptr;
  std::size_t in_use_ = 0;
  std::size_t peak_ = 0;
  std::size_t capacity_ = 0;
  std::uint64_t dry_ = 0;
  std::vector<void*> slabs_;
  std::uint8_t waiter_bit_;
  int fill_;
  std::deque<Connection*> waiters_;
};

// Limits of a host's pools, in blocks (BlockPool::unlimited: none).
struct PoolLimits {
  std::size_t chunks = BlockPool::unlimited;      // packets-in-flight and message-tracking chunks (each)
  std::size_t path_slots = BlockPool::unlimited;  // per-path SACK slot tables
  std::size_t messages = BlockPool::unlimited;    // send work requests being carried out
};

class HostPools {
 public:
  // A chunk holds 128 packets in flight (send side) or 128 messages being
  // received (one stream); 32 bytes each.
  static constexpr std::size_t chunk_bytes = 4096;
  // What one path's unresolved sequences carried: 256 x 8 bytes.
  static constexpr std::size_t path_slot_bytes = 2048;
  static constexpr std::size_t message_bytes = 128;

  explicit HostPools(const PoolLimits& limits = {})
      : chunks(chunk_bytes, limits.chunks, 1),
        rx_chunks(chunk_bytes, limits.chunks, 8, 0x00),
        path_slots(path_slot_bytes, limits.path_slots, 2, 0xff),
        messages(message_bytes, limits.messages, 4) {}
  HostPools(const HostPools&) = delete;
  HostPools& operator=(const HostPools&) = delete;
  ~HostPools();

  // Packets in flight (send side).
  BlockPool chunks;
  // Messages being received. A block given back here is all zeros (every
  // message in it inactive) but for its first 8 bytes, which the free list
  // uses: taking one needs no clearing of the rest.
  BlockPool rx_chunks;
  // A path's SACK slot tables. A block given back holds "no packet" in
  // every slot but the first (the free list's): likewise.
  BlockPool path_slots;
  BlockPool messages;

  // Bytes of blocks in use by connections.
  [[nodiscard]] std::size_t bytes_in_use() const noexcept {
    return (chunks.in_use() + rx_chunks.in_use()) * chunk_bytes + path_slots.in_use() * path_slots.block_bytes() +
           messages.in_use() * messages.block_bytes();
  }

  [[nodiscard]] std::size_t waiters() const noexcept {
    return chunks.waiters() + rx_chunks.waiters() + path_slots.waiters() + messages.waiters();
  }
  // Takes `c` off every pool's waiters.
  void forget(Connection& c) noexcept {
    chunks.forget(c);
    rx_chunks.forget(c);
    path_slots.forget(c);
    messages.forget(c);
  }
};

}  // namespace metaroce::transport
