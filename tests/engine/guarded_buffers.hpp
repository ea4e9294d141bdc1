// Engine tests: the source of a transfer on host A and its destination on
// host B between canaries (bytes that must never change), registered in the
// hosts' memory registries, and WRITEs covering the whole source.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transport/connection.hpp"
#include "transport/memory_region.hpp"

namespace metaroce::engine::test {

struct GuardedBuffers {
  static constexpr std::size_t guard = 4096;
  static constexpr std::uint8_t canary = 0xc5;

  // Source byte i is i * mul + i / div: no period a misplaced packet could hide in.
  GuardedBuffers(transport::MemoryRegistry& at_a, transport::MemoryRegistry& at_b, std::size_t size,
                 std::size_t mul = 7, std::size_t div = 251)
      : src(size), dst(size + 2 * guard, canary) {
    for (std::size_t i = 0; i < size; ++i) src[i] = static_cast<std::uint8_t>(i * mul + i / div);
    std::memset(dst.data() + guard, 0, size);
    lkey = at_a.register_region(src.data(), size, transport::access_local_write);
    rkey = at_b.register_region(dst.data() + guard, size,
                                transport::access_local_write | transport::access_remote_write);
  }
  [[nodiscard]] bool placed() const { return std::memcmp(dst.data() + guard, src.data(), src.size()) == 0; }
  [[nodiscard]] bool canaries_intact() const {
    for (std::size_t i = 0; i < guard; ++i)
      if (dst[i] != canary || dst[guard + src.size() + i] != canary) return false;
    return true;
  }
  // WRITEs of `each` bytes covering the whole source, ids 0, 1, ...
  std::size_t post_writes(transport::Connection& c, std::size_t each) {
    std::size_t n = 0;
    for (std::size_t off = 0; off < src.size(); off += each, ++n) {
      transport::SendRequest r;
      r.wr_id = n;
      r.op = transport::SendOp::write;
      r.local_addr = src.data() + off;
      r.length = std::min(each, src.size() - off);
      r.lkey = lkey;
      r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + guard + off);
      r.rkey = rkey;
      EXPECT_EQ(c.post_send(r), transport::PostResult::ok);
    }
    return n;
  }

  std::vector<std::uint8_t> src, dst;
  std::uint32_t lkey = 0, rkey = 0;
};

}  // namespace metaroce::engine::test
