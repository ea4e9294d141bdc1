// OwnerRing: FIFO order and indexing across the wrap and every growth,
// and each owned object destroyed exactly once.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>

#include "transport/owner_ring.hpp"

namespace {

using metaroce::transport::OwnerRing;

struct Counted {
  explicit Counted(int v, int& live) : value(v), live_(live) { ++live_; }
  ~Counted() { --live_; }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
  int value;
  int& live_;
};

TEST(OwnerRing, KeepsFifoOrderAcrossWrapsAndGrowth) {
  int live = 0;
  {
    OwnerRing<Counted> ring;
    int next_in = 0, next_out = 0;
    // Pushes three for every two pops: the ring wraps at each size and
    // grows 16 -> 32 -> ... -> 1024 with its front anywhere.
    for (int round = 0; round < 600; ++round) {
      for (int k = 0; k < 3; ++k) ring.push_back(std::make_unique<Counted>(next_in++, live));
      for (int k = 0; k < 2; ++k) {
        ASSERT_EQ(ring.front()->value, next_out);
        ring.pop_front();
        ++next_out;
      }
      ASSERT_EQ(ring.size(), static_cast<std::size_t>(next_in - next_out));
      for (std::size_t i = 0; i < ring.size(); i += 37) ASSERT_EQ(ring[i]->value, next_out + static_cast<int>(i));
      ASSERT_EQ(live, next_in - next_out);
    }
    EXPECT_EQ(ring.size(), 600u);
    ring.clear();
    EXPECT_TRUE(ring.empty());
    EXPECT_EQ(live, 0);
    ring.push_back(std::make_unique<Counted>(7, live));
    EXPECT_EQ(ring.front()->value, 7);
    EXPECT_EQ(live, 1);
  }
  EXPECT_EQ(live, 0) << "the ring's destructor destroys what it still owns";
}

}  // namespace
