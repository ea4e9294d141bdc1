// The bytes of a metaroce-gen message, which metaroce-sink checks one by one.
//
// Every message starts with a 32-byte header (big-endian fields):
//
//   offset size field
//        0    2 magic 0x4d47 ("MG")
//        2    1 operation: 0 write, 1 write-imm, 2 send, 3 read (a slot of
//                the sink's read region)
//        3    1 version (1)
//        4    4 connection: the generator's index of the connection
//        8    8 sequence: the message's number on its connection, from 0
//       16    4 length of the whole message, header included
//       20    4 write index: a write's number among the writes of its stream
//                (the imm of a write-imm carries it too); a send's count of
//                writes posted on its stream before it
//       24    8 post time, CLOCK_MONOTONIC ns (the sink's latency, one host)
//
// and the rest is a pattern derived from (connection, sequence, offset): the
// 8-byte word at offset 8w is key(connection, sequence) + w * 0x9e37...7c15,
// little-endian, cut at the message's length. So a byte from another message
// or another offset, or a stale or corrupted one, differs, and the first bad
// offset names where. No DPDK.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "wire/byte_order.hpp"

namespace metaroce::apps::traffic {

static_assert(std::endian::native == std::endian::little, "the pattern is stored little-endian with memcpy");

inline constexpr std::uint32_t header_size = 32;
inline constexpr std::uint16_t header_magic = 0x4d47;
inline constexpr std::uint8_t header_version = 1;
inline constexpr std::uint64_t no_offset = ~std::uint64_t{0};
// The largest message: its length must fit the header's 32 bits, and the
// transport's WRITE length field.
inline constexpr std::uint64_t max_message_size = std::uint64_t{1} << 30;

enum class Op : std::uint8_t { write = 0, write_imm = 1, send = 2, read = 3 };
inline constexpr std::uint8_t op_count = 4;

[[nodiscard]] constexpr const char* to_string(Op op) noexcept {
  return op == Op::write ? "write" : op == Op::write_imm ? "write-imm" : op == Op::send ? "send" : "read";
}

struct MessageHeader {
  Op op = Op::write;
  std::uint32_t connection = 0;
  std::uint64_t sequence = 0;
  std::uint32_t length = 0;
  std::uint32_t write_index = 0;
  std::uint64_t post_ns = 0;
};

inline void encode_header(const MessageHeader& h, std::uint8_t* p) noexcept {
  wire::store_be16(p, header_magic);
  p[2] = static_cast<std::uint8_t>(h.op);
  p[3] = header_version;
  wire::store_be32(p + 4, h.connection);
  wire::store_be64(p + 8, h.sequence);
  wire::store_be32(p + 16, h.length);
  wire::store_be32(p + 20, h.write_index);
  wire::store_be64(p + 24, h.post_ns);
}

// Decodes the fields whatever they hold; header_valid() says whether magic,
// version and operation are ones a generator writes.
inline MessageHeader decode_header(const std::uint8_t* p) noexcept {
  MessageHeader h;
  h.op = static_cast<Op>(p[2]);
  h.connection = wire::load_be32(p + 4);
  h.sequence = wire::load_be64(p + 8);
  h.length = wire::load_be32(p + 16);
  h.write_index = wire::load_be32(p + 20);
  h.post_ns = wire::load_be64(p + 24);
  return h;
}
[[nodiscard]] inline bool header_valid(const std::uint8_t* p) noexcept {
  return wire::load_be16(p) == header_magic && p[3] == header_version && p[2] < op_count;
}

inline constexpr std::uint64_t pattern_step = 0x9e37'79b9'7f4a'7c15ull;

[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58'476d'1ce4'e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d0'49bb'1331'11ebull;
  return z ^ (z >> 31);
}
[[nodiscard]] constexpr std::uint64_t pattern_key(std::uint32_t connection, std::uint64_t sequence) noexcept {
  return mix64(mix64(std::uint64_t{connection} + 0x6d65'7461'726f'6365ull) ^ sequence);
}
// The pattern's 8-byte word at offset 8 * word.
[[nodiscard]] constexpr std::uint64_t pattern_word(std::uint32_t connection, std::uint64_t sequence,
                                                   std::uint64_t word) noexcept {
  return pattern_key(connection, sequence) + word * pattern_step;
}

// Writes the header and the pattern: `h.length` bytes at p.
inline void fill_message(std::uint8_t* p, const MessageHeader& h) noexcept {
  const std::uint64_t length = h.length;
  std::uint64_t v = pattern_key(h.connection, h.sequence) + (header_size / 8) * pattern_step;
  std::uint64_t at = header_size;
  for (; at + 8 <= length; at += 8, v += pattern_step) std::memcpy(p + at, &v, 8);
  if (at < length) std::memcpy(p + at, &v, length - at);
  encode_header(h, p);
}

struct PatternCheck {
  std::uint64_t wrong_bytes = 0;
  std::uint64_t first_bad_offset = no_offset;
};

[[nodiscard]] inline std::uint64_t differing_bytes(std::uint64_t a, std::uint64_t b, std::uint64_t n) noexcept {
  std::uint64_t d = 0;
  const std::uint64_t x = a ^ b;
  for (std::uint64_t k = 0; k < n; ++k) d += ((x >> (8 * k)) & 0xff) != 0 ? 1 : 0;
  return d;
}
[[nodiscard]] inline std::uint64_t first_differing_byte(std::uint64_t a, std::uint64_t b) noexcept {
  return static_cast<std::uint64_t>(std::countr_zero(a ^ b)) / 8;
}

// Checks the pattern of message (connection, sequence) over [header_size,
// length) at p (the header is the caller's to check).
[[nodiscard]] inline PatternCheck check_pattern(const std::uint8_t* p, std::uint32_t connection,
                                                std::uint64_t sequence, std::uint64_t length) noexcept {
  PatternCheck r;
  std::uint64_t v = pattern_key(connection, sequence) + (header_size / 8) * pattern_step;
  std::uint64_t at = header_size;
  const auto note = [&](std::uint64_t got, std::uint64_t want, std::uint64_t n) {
    r.wrong_bytes += differing_bytes(got, want, n);
    if (r.first_bad_offset == no_offset) r.first_bad_offset = at + first_differing_byte(got, want);
  };
  for (; at + 8 <= length; at += 8, v += pattern_step) {
    std::uint64_t got;
    std::memcpy(&got, p + at, 8);
    if (got != v) note(got, v, 8);
  }
  if (at < length) {
    const std::uint64_t n = length - at;
    std::uint64_t got = 0, want = 0;
    std::memcpy(&got, p + at, n);
    std::memcpy(&want, &v, n);
    if (got != want) note(got, want, n);
  }
  return r;
}

// Compares the header at p with the expected one, the post time excepted
// (only the generator knows it): bytes that differ and the first of them.
[[nodiscard]] inline PatternCheck check_header(const std::uint8_t* p, const MessageHeader& expected) noexcept {
  std::uint8_t want[header_size];
  encode_header(expected, want);
  PatternCheck r;
  for (std::uint64_t k = 0; k < 24; ++k) {
    if (p[k] == want[k]) continue;
    ++r.wrong_bytes;
    if (r.first_bad_offset == no_offset) r.first_bad_offset = k;
  }
  return r;
}

// The sink's read region: slot j of connection c holds a message of the
// whole slot (header: op read, sequence and write index j, post time 0),
// and a READ of n bytes from its start must return exactly its first n.
[[nodiscard]] inline MessageHeader read_slot_header(std::uint32_t connection, std::uint32_t slot,
                                                    std::uint32_t slot_bytes) noexcept {
  MessageHeader h;
  h.op = Op::read;
  h.connection = connection;
  h.sequence = slot;
  h.length = slot_bytes;
  h.write_index = slot;
  return h;
}
inline void fill_read_slot(std::uint8_t* p, std::uint32_t connection, std::uint32_t slot,
                           std::uint32_t slot_bytes) noexcept {
  fill_message(p, read_slot_header(connection, slot, slot_bytes));
}
// Every byte of a READ of `length` bytes (at most slot_bytes) from read slot
// `slot`, landed at p.
[[nodiscard]] inline PatternCheck check_read(const std::uint8_t* p, std::uint32_t connection, std::uint32_t slot,
                                             std::uint32_t slot_bytes, std::uint64_t length) noexcept {
  std::uint8_t want[header_size];
  encode_header(read_slot_header(connection, slot, slot_bytes), want);
  PatternCheck r;
  for (std::uint64_t k = 0; k < std::min<std::uint64_t>(length, header_size); ++k) {
    if (p[k] == want[k]) continue;
    ++r.wrong_bytes;
    if (r.first_bad_offset == no_offset) r.first_bad_offset = k;
  }
  if (length > header_size) {
    const PatternCheck body = check_pattern(p, connection, slot, length);
    r.wrong_bytes += body.wrong_bytes;
    if (r.first_bad_offset == no_offset) r.first_bad_offset = body.first_bad_offset;
  }
  return r;
}

}  // namespace metaroce::apps::traffic
