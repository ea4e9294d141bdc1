// What the host tests share: the addresses and QPNs of connection i between
// two hosts, the bytes of a message, a frame sink with a fixed number of
// buffers per turn, and a check that a host is back to holding nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "host/host.hpp"
#include "transport/connection.hpp"
#include "transport/tx_batch.hpp"

namespace metaroce::test {

// Host A's connection i has QPN a_qpn(i), its peer on host B b_qpn(i): both
// far from QP 1 (the connection manager's) and from each other.
[[nodiscard]] constexpr std::uint32_t a_qpn(std::uint32_t i) noexcept { return 0x1000 + i; }
[[nodiscard]] constexpr std::uint32_t b_qpn(std::uint32_t i) noexcept { return 0x800000 + i; }

// Connection i's config on host A (a_side) or B, from `base` (mode, paths,
// streams, MTU, windows). Each connection has its own UDP source ports, so
// a fabric with several paths spreads the connections' paths over them.
inline transport::ConnectionConfig pair_end(const transport::ConnectionConfig& base, std::uint32_t i, bool a_side) {
  transport::ConnectionConfig c = base;
  c.endpoints.local_mac = {2, 0, 0, 0, 0, 1};
  c.endpoints.peer_mac = {2, 0, 0, 0, 0, 2};
  c.endpoints.local_ipv4 = 0x0a000001;
  c.endpoints.peer_ipv4 = 0x0a000002;
  c.local_qpn = a_qpn(i);
  c.peer_qpn = b_qpn(i);
  c.initial_psn = (i * 7919u) & 0xffffff;
  c.peer_initial_psn = (i * 104729u + 5) & 0xffffff;
  c.base_src_port = static_cast<std::uint16_t>(49152 + (i * base.paths) % 16000);
  if (!a_side) {
    std::swap(c.endpoints.local_mac, c.endpoints.peer_mac);
    std::swap(c.endpoints.local_ipv4, c.endpoints.peer_ipv4);
    std::swap(c.local_qpn, c.peer_qpn);
    std::swap(c.initial_psn, c.peer_initial_psn);
  }
  return c;
}

// Adds a connection to `h` and connects it; throws std::invalid_argument
// with the host's reason when it refuses.
inline transport::Connection& add_connected(host::Host& h, const transport::ConnectionConfig& config) {
  std::string error;
  transport::Connection* c = h.add_connection(config, nullptr, error);
  if (c == nullptr) throw std::invalid_argument(error);
  c->connect();
  return *c;
}

inline std::uint64_t splitmix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Byte `offset` of message `id`: a function of both, so a byte placed at
// the wrong offset or from another message is caught.
[[nodiscard]] inline std::uint8_t pattern_byte(std::uint64_t id, std::uint64_t offset) noexcept {
  return static_cast<std::uint8_t>(splitmix(id * 0x100000001b3ull + offset) >> 24);
}
inline void fill_pattern(std::uint64_t id, std::uint8_t* out, std::size_t len) {
  for (std::size_t i = 0; i < len; ++i) out[i] = pattern_byte(id, i);
}
// First offset in [0, len) that is not message `id`'s byte, or len.
[[nodiscard]] inline std::size_t first_mismatch(std::uint64_t id, const std::uint8_t* data, std::size_t len) {
  for (std::size_t i = 0; i < len; ++i)
    if (data[i] != pattern_byte(id, i)) return i;
  return len;
}

// A sink with `per_turn` buffers a turn (a short transmit mempool): it takes
// frames until they are used up, then refuses until next_turn(). The frames
// it took are kept, serialized, in order, for the test to deliver.
class CountedSink final : public host::FrameSink {
 public:
  explicit CountedSink(std::size_t per_turn) : per_turn_(per_turn), left_(per_turn) {}
  std::size_t take(const transport::TxBatch& batch, std::size_t first) override {
    std::size_t took = 0;
    for (std::size_t i = first; i < batch.size() && left_ > 0; ++i, ++took, --left_) {
      frames.emplace_back();
      batch.serialize(i, frames.back());
    }
    return took;
  }
  bool take_copy(std::span<const std::uint8_t> frame) override {
    if (left_ == 0) return false;
    --left_;
    frames.emplace_back(frame.begin(), frame.end());
    return true;
  }
  [[nodiscard]] std::size_t max_copied_frame() const override { return 16384; }
  void next_turn() noexcept { left_ = per_turn_; }
  // Frames taken since the last call, oldest first.
  std::vector<std::vector<std::uint8_t>> take_frames() {
    std::vector<std::vector<std::uint8_t>> out;
    out.swap(frames);
    return out;
  }

  std::vector<std::vector<std::uint8_t>> frames;

 private:
  std::size_t per_turn_;
  std::size_t left_;
};

// Every pool block given back, nothing ready, held or armed: a host whose
// connections are all idle holds nothing but the connections themselves.
inline void expect_host_at_rest(const host::Host& h, const char* name) {
  const transport::HostPools& p = h.pools();
  EXPECT_EQ(p.chunks.in_use(), 0u) << name;
  EXPECT_EQ(p.rx_chunks.in_use(), 0u) << name;
  EXPECT_EQ(p.path_slots.in_use(), 0u) << name;
  EXPECT_EQ(p.messages.in_use(), 0u) << name;
  EXPECT_EQ(p.bytes_in_use(), 0u) << name;
  EXPECT_EQ(p.waiters(), 0u) << name;
  EXPECT_EQ(h.ready_count(), 0u) << name;
  EXPECT_EQ(h.tx_held(), 0u) << name;
}

// The size of a test, from the environment variable `name` when it is set
// (a sanitizer run asks for fewer), else `fallback`.
[[nodiscard]] inline std::size_t size_from_env(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return static_cast<std::size_t>(std::strtoull(v, nullptr, 10));
}

}  // namespace metaroce::test
