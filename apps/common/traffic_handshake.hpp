// What metaroce-gen and metaroce-sink tell each other in the connection
// manager's private data (each message at most cm::max_private_data = 64
// bytes):
//
//   REQ  gen -> sink  Offer: run, connection index, how the sink lays out
//                     its memory (write slots and receives per stream, slot
//                     size: the largest message)
//   REP  sink -> gen  Target: where the write slots are (address, rkey), and
//                     the read region (address, rkey, slots) the generator's
//                     READs read from
//   DREQ gen -> sink  GenReport: messages posted and completed
//   DREP sink -> gen  SinkReport: what the sink verified
//
// The sink's memory for a connection of S streams: a write region of
// S x write_slots slots (stream s's slots first), S x receives receive
// buffers, and read_slots slots registered for remote read, each filled
// once with its pattern (traffic_message.hpp, fill_read_slot); all
// slot_bytes. No DPDK.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/private_data.hpp"
#include "common/traffic_message.hpp"

namespace metaroce::apps::traffic {

inline constexpr std::uint16_t handshake_magic = 0x4d53;  // "MS"

// Each message's fields, in the order they travel: fields(s, f) calls f on each.
struct Offer {
  std::uint64_t run = 0;            // random per generator run: the sink groups connections by it
  std::uint32_t connection = 0;     // 0..connections-1
  std::uint32_t connections = 0;    // of this run
  std::uint32_t write_slots = 0;    // per stream
  std::uint32_t receives = 0;       // per stream
  std::uint32_t slot_bytes = 0;     // the largest message
  template <class Self, class F>
  static void fields(Self& s, F&& f) {
    f(s.run), f(s.connection), f(s.connections), f(s.write_slots), f(s.receives), f(s.slot_bytes);
  }
};

// The read slots the sink keeps for each connection.
inline constexpr std::uint32_t read_slots = 4;

struct Target {
  std::uint64_t address = 0;
  std::uint32_t rkey = 0;
  std::uint64_t read_address = 0;
  std::uint32_t read_rkey = 0;
  std::uint32_t read_slots = 0;
  template <class Self, class F>
  static void fields(Self& s, F&& f) {
    f(s.address), f(s.rkey), f(s.read_address), f(s.read_rkey), f(s.read_slots);
  }
};

struct GenReport {
  std::uint64_t posted = 0;     // messages 0..posted-1 were posted
  std::uint64_t completed = 0;  // of them, completed with success
  std::uint64_t completed_bytes = 0;
  std::uint64_t failed = 0;     // completed with an error
  template <class Self, class F>
  static void fields(Self& s, F&& f) {
    f(s.posted), f(s.completed), f(s.completed_bytes), f(s.failed);
  }
};

struct SinkReport {
  std::uint64_t verified = 0;        // messages whose every byte was right
  std::uint64_t verified_bytes = 0;
  std::uint64_t wrong = 0;           // messages with a wrong byte
  std::uint64_t wrong_bytes = 0;     // bytes that were not the pattern's
  std::uint64_t missing = 0;         // posted, never seen
  std::uint64_t duplicates = 0;      // completions of a message already verified
  std::uint64_t first_bad_sequence = ~std::uint64_t{0};
  std::uint64_t first_bad_offset = no_offset;
  template <class Self, class F>
  static void fields(Self& s, F&& f) {
    f(s.verified), f(s.verified_bytes), f(s.wrong), f(s.wrong_bytes), f(s.missing), f(s.duplicates),
        f(s.first_bad_sequence), f(s.first_bad_offset);
  }
};

// The offer starts with handshake_magic; the others are answers to it.
template <class T>
std::vector<std::uint8_t> encode(const T& message) {
  PrivateDataWriter w;
  if constexpr (std::is_same_v<T, Offer>) w.u16(handshake_magic);
  T::fields(message, [&](const auto& field) { w.put(field); });
  return w.take();
}

// False when the bytes are short, not an offer (Offer: no magic), or ask
// for nothing sensible.
template <class T>
bool decode(const std::vector<std::uint8_t>& bytes, T& message) {
  PrivateDataReader r(bytes);
  if constexpr (std::is_same_v<T, Offer>)
    if (r.u16() != handshake_magic) return false;
  T::fields(message, [&](auto& field) { r.get(field); });
  if constexpr (std::is_same_v<T, Offer>)
    return r.ok() && message.connection < message.connections && message.write_slots >= 2 &&
           message.receives >= 1 && message.slot_bytes >= header_size && message.slot_bytes <= max_message_size;
  return r.ok();
}

}  // namespace metaroce::apps::traffic
