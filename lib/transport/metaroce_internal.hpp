// Private: the state behind MetaroceConnection, shared by its .cpp files only.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <deque>

#include "transport/metaroce_connection.hpp"
#include "transport/pools.hpp"

namespace metaroce::transport {

// Commits a frame without payload built from `spec` (an ACK, a READ or
// atomic request), its ICRC computed here unless `icrc` is false (a secure
// connection's frame, whose ICRC is computed once it is sealed). Returns
// its size with the ICRC.
inline std::size_t commit_header_frame(const wire::FrameSpec& spec, TxBatch& out, bool icrc) {
  const std::size_t size = wire::headers_size(spec);
  const std::span<std::uint8_t> h = out.header_space(size);
  wire::build_headers(spec, 0, h);
  const std::size_t l3 = spec.eth.size();
  std::array<std::uint8_t, 8> trailer{};
  const std::size_t trailer_len =
      wire::build_trailer(0, icrc ? wire::compute_icrc(wire::ByteSpan(h.data() + l3, size - l3)) : 0u, trailer);
  out.commit(size, {}, std::span<const std::uint8_t>(trailer.data(), trailer_len));
  return size + trailer_len;
}

// A send work request being carried out.
struct MetaroceConnection::SendMessage {
  SendRequest request;
  std::uint32_t msg_seq = 0;   // per stream
  std::uint32_t recv_seq = 0;  // per stream, for messages that consume a receive
  std::uint64_t next_offset = 0;  // segmentation cursor
  std::uint32_t packets_total = 0;
  std::uint32_t packets_assigned = 0;
  std::uint32_t packets_acked = 0;
  std::uint32_t rnr_retries = 0;
  std::uint64_t last_rel = 0;  // rel of its last packet assigned so far
  bool finished = false;   // every packet acknowledged, or failed
  bool completed = false;  // its completion was delivered
  CompletionStatus status = CompletionStatus::success;
  // Our answer to the peer's READ or atomic: it completes nothing here and
  // is on no stream's list; msg_seq and stream are the peer's request's.
  bool response = false;
  std::uint32_t read_placed = 0;  // our READ or atomic: answer bytes placed
  SendMessage* stream_next = nullptr;  // the next of its stream, in post order (StreamSends)

  // A fresh message for `r` (a recycled one is reset here). Field by
  // field, on purpose: `*this = SendMessage{}` compiles to a string store
  // (rep stos), and copying the request whole reads the caller's fields
  // with loads wider than its stores; the loads that soon follow (here and
  // in next_new_packet) then cannot take those bytes from the store buffer
  // and wait for them to reach the cache, a stall per message.
  void reset(const SendRequest& r) noexcept {
    // Every field is set below: a new one must be added there.
    static_assert(sizeof(SendRequest) == 72 && sizeof(SendMessage) == 128);
    static_assert(sizeof(SendMessage) <= HostPools::message_bytes);
    request.wr_id = r.wr_id;
    request.op = r.op;
    request.stream = r.stream;
    request.local_addr = r.local_addr;
    request.length = r.length;
    request.lkey = r.lkey;
    request.remote_addr = r.remote_addr;
    request.rkey = r.rkey;
    // (Read alone: the compiler would read rkey and imm as one 8-byte
    // word, and imm is the field a caller writes for every message.)
    std::uint32_t imm = r.imm;
    asm("" : "+r"(imm));
    request.imm = imm;
    request.swap_add = r.swap_add;
    request.compare = r.compare;
    msg_seq = 0;
    recv_seq = 0;
    next_offset = 0;
    packets_total = 0;
    packets_assigned = 0;
    packets_acked = 0;
    rnr_retries = 0;
    last_rel = 0;
    finished = false;
    completed = false;
    status = CompletionStatus::success;
    response = false;
    read_placed = 0;
    stream_next = nullptr;
  }
};

inline void MetaroceConnection::MessageDeleter::operator()(SendMessage* m) const noexcept {
  m->~SendMessage();
  pool->give(m);
}

// One stream's messages not yet completed, in post order, linked through
// the messages (no storage of its own).
struct MetaroceConnection::StreamSends {
  SendMessage* head = nullptr;
  SendMessage* tail = nullptr;
  [[nodiscard]] bool empty() const noexcept { return head == nullptr; }
  [[nodiscard]] SendMessage* front() const noexcept { return head; }
  void push_back(SendMessage* m) noexcept {
    m->stream_next = nullptr;
    if (tail != nullptr) tail->stream_next = m; else head = m;
    tail = m;
  }
  void pop_front() noexcept {
    head = head->stream_next;
    if (head == nullptr) tail = nullptr;
  }
  void clear() noexcept { head = tail = nullptr; }
};

// One PSN's packet, from its first transmission until it is acknowledged.
struct MetaroceConnection::TxPacket {
  enum State : std::uint8_t { free_slot, in_flight, lost, rnr_wait, acked };
  SendMessage* message = nullptr;
  std::uint32_t offset = 0;
  std::uint32_t length = 0;
  std::uint32_t path_seq = 0;  // of its latest transmission
  std::uint16_t path = 0;
  State state = free_slot;
  bool last = false;
  std::uint8_t timeouts = 0;
  std::uint16_t transmissions = 0;
};

inline MetaroceConnection::TxPacket& MetaroceConnection::packet(std::uint64_t rel) noexcept {
  return tx_chunks_[(rel / chunk_entries) & (tx_chunk_count_ - 1)][rel % chunk_entries];
}

// Send side of a path. seq_slot[s % 256] holds what path sequence s carried
// while it is unresolved (neither acknowledged nor declared lost); the table
// (2 KiB) comes from the host's pool while the path has anything
// unresolved, and is null otherwise.
struct MetaroceConnection::TxPath {
  static constexpr std::uint64_t no_packet = ~std::uint64_t{0};
  static constexpr std::uint64_t probe = no_packet - 1;

  TxPath()
      : rto_timer(&MetaroceConnection::rto_callback), probe_timer(&MetaroceConnection::probe_callback) {}

  MetaroceConnection* owner = nullptr;
  std::uint16_t id = 0;
  std::uint16_t plane = 0;  // id % planes
  std::uint16_t src_port = 0;
  PathState state = PathState::active;
  std::uint32_t next_seq = 0;
  std::uint32_t una = 0;  // oldest unresolved sequence (== next_seq when none)
  std::uint32_t in_flight = 0;         // data packets unresolved (the window counts these)
  std::uint32_t probes_in_flight = 0;  // probes unresolved
  std::uint64_t* seq_slot = nullptr;
  // Templates per opcode, rebuilt when the source port changes.
  wire::HeaderTemplate write_template, write_imm_template, send_template, send_imm_template,
      read_response_template, atomic_response_template, probe_template;
  timer::Timer rto_timer;
  timer::Timer probe_timer;
  bool probe_due = false;
  Time probe_deadline = 0;  // the probe timer may be armed earlier (see arm_path_timers)
  std::uint32_t consecutive_timeouts = 0;
  Time last_progress = 0;
  Time srtt = 0;
  Time rttvar = 0;
  bool has_rtt = false;
  std::uint16_t last_ce_count = 0;
  std::uint32_t entropy_round = 0;
  PathInfo stats;

  [[nodiscard]] std::uint32_t unresolved() const noexcept { return in_flight + probes_in_flight; }
  [[nodiscard]] bool holds(std::uint32_t seq) const noexcept {
    return static_cast<std::int32_t>(seq - una) >= 0 && static_cast<std::int32_t>(next_seq - seq) > 0;
  }
};

// A READ or atomic request of the peer's, checked and waiting for its
// answer to start (at most max_outstanding_reads answers are in flight).
struct MetaroceConnection::QueuedRequest {
  std::uint8_t opcode = 0;
  std::uint16_t stream = 0;
  std::uint32_t msg_seq = 0;  // the request's, echoed in the answer
  std::uint64_t source = 0;   // READ: the bytes to read; atomics: the 8 bytes
  std::uint32_t length = 0;
  std::uint64_t swap_add = 0;
  std::uint64_t compare = 0;
  wire::MrReadHeader destination;  // where the answer goes at the peer
};

// Receive side of a path: cum is the first sequence not received (or no
// longer tracked); bit i of sack means cum + 1 + i arrived.
struct MetaroceConnection::RxPath {
  std::uint32_t cum = 0;
  std::array<std::uint64_t, 4> sack{};
  std::uint16_t ce_count = 0;
  std::uint32_t ts_echo = 0;
  bool news = false;  // something to report since the last ACK
  // ACK routes (emit_acks): an ACK leads with a path and leaves from that
  // path's source port, so it takes the route our own data on the path takes.
  static constexpr std::uint16_t no_route = 0xffff;
  std::uint16_t last_ack_route = no_route;  // the path that led our last ACK reporting this one
  // acks_sent when a frame last arrived on the path: one quiet for more
  // than quiet_acks ACKs (a dead plane or route of the peer's) leads none.
  std::uint64_t acks_at_arrival = 0;

  [[nodiscard]] bool bit(std::uint32_t i) const noexcept { return (sack[i / 64] >> (i % 64)) & 1u; }
  void set(std::uint32_t i) noexcept { sack[i / 64] |= std::uint64_t{1} << (i % 64); }
  // Drops the lowest n bits (n <= 256), moving the window up by n.
  void shift(std::uint32_t n) noexcept {
    if (n >= 256) {
      sack = {};
      return;
    }
    const std::uint32_t words = n / 64;
    const std::uint32_t bits = n % 64;
    for (std::uint32_t w = 0; w < 4; ++w) {
      const std::uint32_t from = w + words;
      std::uint64_t v = from < 4 ? sack[from] >> bits : 0;
      if (bits != 0 && from + 1 < 4) v |= sack[from + 1] << (64 - bits);
      sack[w] = v;
    }
  }
  // Consecutive set bits from bit 0.
  [[nodiscard]] std::uint32_t leading_run() const noexcept {
    std::uint32_t n = 0;
    for (std::uint64_t w : sack) {
      const auto ones = static_cast<std::uint32_t>(std::countr_one(w));
      n += ones;
      if (ones < 64) break;
    }
    return n;
  }
};

// A message being received: placed in any order, completed in order.
struct MetaroceConnection::RxMessage {
  bool active = false;
  bool is_send = false;
  bool has_imm = false;
  bool last_seen = false;
  std::uint32_t imm = 0;
  std::uint32_t recv_seq = 0;
  std::uint64_t length = 0;
  std::uint64_t placed = 0;
};

// The messages of a stream being received are tracked in chunks of
// chunk_entries, taken from the host's pool for as long as one of their
// messages is active: chunk (msg_seq / chunk_entries) % chunk_count.
// chunk_count holds twice the stream window, so the chunk a new message
// needs is never one whose older messages are still being completed.
struct MetaroceConnection::RxStream {
  std::uint32_t next_complete = 0;  // msg_seq of the next message to complete
  std::uint32_t active = 0;         // messages placed in part or whole, not yet completed
  std::uint32_t chunks_held = 0;    // non-null entries of chunks
  std::unique_ptr<RxMessage*[]> chunks;
  std::deque<ReceiveRequest> posted;
  std::uint32_t posted_base = 0;  // recv_seq of posted.front()
};

}  // namespace metaroce::transport
