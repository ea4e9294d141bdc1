// The host's QPN index against std::unordered_map: every find after random
// inserts, replacements and erases (sequential QPNs as the simulator makes
// them, random 24-bit ones as the engine does, and keys that share a home
// slot), through growth and back to empty.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "host/qpn_table.hpp"

namespace metaroce::host {
namespace {

transport::Connection* fake(std::uintptr_t k) { return reinterpret_cast<transport::Connection*>(k * 16 + 16); }

void check_all(const QpnTable& t, const std::unordered_map<std::uint32_t, transport::Connection*>& want,
               const std::vector<std::uint32_t>& keys, std::size_t& mismatches) {
  for (const std::uint32_t k : keys) {
    const auto it = want.find(k);
    mismatches += t.find(k) != (it == want.end() ? nullptr : it->second) ? 1 : 0;
  }
}

TEST(QpnTable, MatchesAMapThroughInsertsErasesAndGrowth) {
  std::mt19937_64 rng(7);
  for (const int kind : {0, 1, 2}) {
    SCOPED_TRACE(kind);
    // 0: sequential from 0x100; 1: random 24-bit; 2: multiples of a power
    // of two (all low bits equal).
    std::vector<std::uint32_t> keys;
    for (std::uint32_t i = 0; i < 3000; ++i)
      keys.push_back(kind == 0 ? 0x100 + i : kind == 1 ? static_cast<std::uint32_t>(rng() & 0xffffff) : i << 12);
    QpnTable t;
    std::unordered_map<std::uint32_t, transport::Connection*> want;
    std::size_t mismatches = 0;
    for (int round = 0; round < 20000; ++round) {
      const std::uint32_t k = keys[rng() % keys.size()];
      if (rng() % 3 == 0) {
        EXPECT_EQ(t.erase(k), want.erase(k) == 1);
      } else {
        transport::Connection* c = fake(rng() % 100000);
        t.insert(k, c);
        want[k] = c;
      }
      if (round % 1000 == 0) check_all(t, want, keys, mismatches);
    }
    check_all(t, want, keys, mismatches);
    EXPECT_EQ(mismatches, 0u);
    EXPECT_EQ(t.size(), want.size());
    EXPECT_LE(2 * t.size(), t.capacity());
    for (const auto& [k, c] : want) EXPECT_TRUE(t.erase(k));
    EXPECT_EQ(t.size(), 0u);
    check_all(t, {}, keys, mismatches);
    EXPECT_EQ(mismatches, 0u);
  }
}

TEST(QpnTable, EmptyAndClearedFindNothing) {
  QpnTable t;
  EXPECT_EQ(t.find(5), nullptr);
  EXPECT_FALSE(t.erase(5));
  t.insert(5, fake(1));
  t.insert(5, fake(2));  // replaced
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.find(5), fake(2));
  t.clear();
  EXPECT_EQ(t.find(5), nullptr);
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace metaroce::host
