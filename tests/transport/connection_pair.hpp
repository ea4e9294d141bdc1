// Two connections joined by hand, without the simulator: frames move only
// when a test says so. The fixture of the exact tests of both modes and of
// the hostile and exhaustion suites.
//
// A (QPN 0x11, first PSN 0xfffffe: wraps after two packets) sends from a
// 64 KiB source region; B (QPN 0x22, first PSN 7, UDP source port 50000)
// owns a 64 KiB destination region registered for remote writes, between
// two 4 KiB canaries of 0xc5 that are not registered.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "timer/wheel.hpp"
#include "transport/connection.hpp"
#include "transport/memory_region.hpp"
#include "wire/frame.hpp"

namespace metaroce::test {

using Frames = std::vector<std::vector<std::uint8_t>>;

// What both ends share before the pair says who is who. ACK coalescing is
// put out of reach, so B answers only on AckReq, gaps, duplicates, probes
// and NAKs: a test sees exactly the frames it caused.
inline transport::ConnectionConfig pair_config(transport::Mode mode, std::uint32_t mtu, std::uint16_t paths,
                                               std::uint16_t streams) {
  transport::ConnectionConfig c;
  c.mode = mode;
  c.mtu = mtu;
  c.paths = paths;
  c.streams = streams;
  c.ack_every_packets = 1000;
  c.ack_delay = 1'000'000;
  return c;
}

class ConnectionPair {
 public:
  static constexpr std::size_t guard = 4096;
  static constexpr std::size_t region_size = 64 * 1024;
  static constexpr std::uint32_t qpn_a = 0x11;
  static constexpr std::uint32_t qpn_b = 0x22;
  static constexpr std::uint32_t first_psn_a = 0xfffffe;
  static constexpr std::uint32_t first_psn_b = 7;
  static constexpr std::uint16_t src_port_b = 50000;

  // `adjust_b`, when given, changes B's config after the pair filled it in
  // (a limit only the receiver has).
  explicit ConnectionPair(const transport::ConnectionConfig& base,
                          const std::function<void(transport::ConnectionConfig&)>& adjust_b = {}) {
    transport::ConnectionConfig ca = base;
    ca.local_qpn = qpn_a;
    ca.peer_qpn = qpn_b;
    ca.initial_psn = first_psn_a;
    ca.peer_initial_psn = first_psn_b;
    ca.endpoints.local_mac = {2, 0, 0, 0, 0, 1};
    ca.endpoints.peer_mac = {2, 0, 0, 0, 0, 2};
    ca.endpoints.local_ipv4 = 0x0a000001;
    ca.endpoints.peer_ipv4 = 0x0a000002;
    transport::ConnectionConfig cb = ca;
    std::swap(cb.local_qpn, cb.peer_qpn);
    std::swap(cb.initial_psn, cb.peer_initial_psn);
    std::swap(cb.endpoints.local_ipv4, cb.endpoints.peer_ipv4);
    std::swap(cb.endpoints.local_mac, cb.endpoints.peer_mac);
    cb.base_src_port = src_port_b;
    if (adjust_b) adjust_b(cb);
    std::string error;
    a = transport::Connection::create(ca, mem_a, wheel_a, nullptr, error);
    EXPECT_TRUE(a) << error;
    b = transport::Connection::create(cb, mem_b, wheel_b, nullptr, error);
    EXPECT_TRUE(b) << error;
    a->connect();
    b->connect();
    src.assign(region_size, 0);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 13 + 1);
    dst.assign(region_size + 2 * guard, 0xc5);
    std::memset(dst.data() + guard, 0, region_size);
    src_key = mem_a.register_region(src.data(), src.size(), transport::access_local_write);
    dst_key = mem_b.register_region(dst.data() + guard, region_size,
                                    transport::access_local_write | transport::access_remote_write);
  }
  ConnectionPair(const ConnectionPair&) = delete;
  ConnectionPair& operator=(const ConnectionPair&) = delete;

  // Frames a connection emits at `now` (both wheels advanced to `now`
  // first, so due timers fire), serialized; also appended to `captured`.
  Frames drain(transport::Connection& c, transport::Time now) {
    wheel_a.advance(now);
    wheel_b.advance(now);
    transport::TxBatch batch;
    c.poll(now, batch);
    Frames frames;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      frames.emplace_back();
      batch.serialize(i, frames.back());
      captured.push_back(frames.back());
    }
    return frames;
  }
  // Parses `frame` (IP checksum and ICRC verified) and hands it over.
  static void deliver(transport::Connection& c, transport::Time now, const std::vector<std::uint8_t>& frame) {
    wire::ParsedFrame p;
    ASSERT_EQ(wire::parse_frame(frame, p), wire::ParseError::ok);
    c.on_frame(now, p);
  }
  static void deliver_all(transport::Connection& c, transport::Time now, const Frames& frames) {
    for (const auto& f : frames) deliver(c, now, f);
  }
  static wire::ParsedFrame parse(const std::vector<std::uint8_t>& frame) {
    wire::ParsedFrame p;
    EXPECT_EQ(wire::parse_frame(frame, p), wire::ParseError::ok);
    return p;
  }
  static std::vector<transport::Completion> completions(transport::Connection& c) {
    std::vector<transport::Completion> out;
    c.poll_completions(out);
    return out;
  }

  std::uint8_t* dst_at(std::size_t offset) { return dst.data() + guard + offset; }
  [[nodiscard]] bool guards_intact() const {
    for (std::size_t i = 0; i < guard; ++i)
      if (dst[i] != 0xc5 || dst[guard + region_size + i] != 0xc5) return false;
    return true;
  }
  // A send of src[offset, offset + len) to dst[offset, ...) (WRITEs).
  transport::SendRequest request(transport::SendOp op, std::uint64_t id, std::size_t offset, std::size_t len,
                                 std::uint16_t stream = 0) {
    transport::SendRequest r;
    r.wr_id = id;
    r.op = op;
    r.stream = stream;
    r.local_addr = src.data() + offset;
    r.length = len;
    r.lkey = src_key;
    r.remote_addr = reinterpret_cast<std::uintptr_t>(dst_at(offset));
    r.rkey = dst_key;
    r.imm = 0xabcd0000u + static_cast<std::uint32_t>(id);
    return r;
  }
  // A receive of B into dst[offset, offset + len).
  transport::ReceiveRequest receive(std::uint64_t id, std::size_t offset, std::size_t len,
                                    std::uint16_t stream = 0) {
    return transport::ReceiveRequest{id, stream, dst_at(offset), len, dst_key};
  }

  transport::MemoryRegistry mem_a, mem_b;
  timer::Wheel wheel_a{0}, wheel_b{0};
  std::unique_ptr<transport::Connection> a, b;
  std::vector<std::uint8_t> src, dst;
  std::uint32_t src_key = 0, dst_key = 0;
  Frames captured;  // every frame drain() returned, in order
};

}  // namespace metaroce::test
