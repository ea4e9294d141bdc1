#include "metaroce-sink/connection_verifier.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace metaroce::apps::traffic {

ConnectionVerifier::ConnectionVerifier(const VerifierLayout& layout, const std::uint8_t* write_region,
                                       const std::uint8_t* receive_region)
    : layout_(layout), writes_(write_region), receives_(receive_region), streams_(layout.streams) {
  for (std::uint16_t s = 0; s < layout_.streams; ++s) streams_[s].expected = s;
}

void ConnectionVerifier::wrong(std::uint64_t sequence, std::uint64_t offset, std::uint64_t bytes,
                               const std::string& what) {
  ++totals_.wrong;
  totals_.wrong_bytes += bytes;
  if (totals_.first_bad_sequence == ~std::uint64_t{0}) {
    totals_.first_bad_sequence = sequence;
    totals_.first_bad_offset = offset;
  }
  if (first_problem_.empty()) first_problem_ = fmt::format("message {}: {}", sequence, what);
}

void ConnectionVerifier::missing(std::uint64_t count, std::uint64_t first_sequence, const char* why) {
  totals_.missing += count;
  if (totals_.first_bad_sequence == ~std::uint64_t{0}) totals_.first_bad_sequence = first_sequence;
  if (first_problem_.empty())
    first_problem_ = count == 1 ? fmt::format("message {} missing: {}", first_sequence, why)
                                : fmt::format("{} messages missing from message {} on: {}", count, first_sequence, why);
}

void ConnectionVerifier::check(std::uint16_t stream, const std::uint8_t* p, Op op, std::uint32_t write_index,
                               std::uint64_t length, Seen seen, std::uint64_t now_ns) {
  Stream& st = streams_[stream];
  const std::uint64_t streams = layout_.streams;
  const MessageHeader h = decode_header(p);
  const std::uint64_t header_length = h.length;
  if (seen == Seen::write_slot && header_valid(p) && h.connection == layout_.connection && h.op != Op::send &&
      h.sequence < st.expected && h.write_index < write_index &&
      (write_index - h.write_index) % layout_.write_slots == 0) {
    // The slot still holds an earlier write of the stream.
    missing(1, st.expected, "its write never landed (the slot holds an older message)");
    st.expected += streams;
    return;
  }
  bool plausible = header_valid(p) && h.connection == layout_.connection && h.op == op &&
                   h.write_index == write_index && header_length >= header_size &&
                   header_length <= layout_.slot_bytes && (length == 0 || length == header_length);
  if (plausible && h.sequence != st.expected) {
    if (h.sequence > st.expected && (h.sequence - st.expected) % streams == 0) {
      missing((h.sequence - st.expected) / streams, st.expected, "the stream went on without it");
      st.expected = h.sequence;
    } else if (h.sequence < st.expected && (st.expected - h.sequence) % streams == 0 && seen == Seen::completion) {
      ++totals_.duplicates;
      if (first_problem_.empty())
        first_problem_ = fmt::format("message {} ({}) completed a second time", h.sequence, to_string(op));
      return;
    } else {
      plausible = false;  // a sequence of another stream
    }
  }
  if (!plausible) {
    // Measured against the message that was due here.
    MessageHeader want;
    want.op = op;
    want.connection = layout_.connection;
    want.sequence = st.expected;
    want.length = static_cast<std::uint32_t>(length != 0 ? length : std::min<std::uint64_t>(header_length, layout_.slot_bytes));
    want.write_index = write_index;
    PatternCheck c = check_header(p, want);
    if (length >= header_size && length <= layout_.slot_bytes) {
      const PatternCheck body = check_pattern(p, layout_.connection, st.expected, length);
      c.wrong_bytes += body.wrong_bytes;
      if (c.first_bad_offset == no_offset) c.first_bad_offset = body.first_bad_offset;
    }
    wrong(st.expected, c.first_bad_offset, std::max<std::uint64_t>(c.wrong_bytes, 1),
          fmt::format("{} on stream {}: its header is not the one due (first bad byte at offset {})", to_string(op),
                      stream, c.first_bad_offset));
    st.expected += streams;
    return;
  }
  const PatternCheck c = check_pattern(p, layout_.connection, h.sequence, header_length);
  if (c.wrong_bytes != 0) {
    wrong(h.sequence, c.first_bad_offset, c.wrong_bytes,
          fmt::format("{} of {} bytes on stream {}: {} wrong bytes, the first at offset {}", to_string(op),
                      header_length, stream, c.wrong_bytes, c.first_bad_offset));
  } else {
    ++totals_.verified;
    totals_.verified_bytes += header_length;
  }
  if (seen == Seen::completion) {
    latency_.add(now_ns > h.post_ns ? now_ns - h.post_ns : 0);
    totals_.last_verified_ns = now_ns;
  }
  st.expected += streams;
}

void ConnectionVerifier::check_writes_before(std::uint16_t stream, std::uint64_t end) {
  Stream& st = streams_[stream];
  for (; st.next_write < end; ++st.next_write) {
    check(stream, writes_ + write_offset(stream, st.next_write), Op::write, static_cast<std::uint32_t>(st.next_write),
          0, Seen::write_slot, 0);
    ++totals_.writes_checked;
  }
}

void ConnectionVerifier::on_write_imm(std::uint16_t stream, std::uint32_t imm, std::uint64_t length,
                                      std::uint64_t now_ns) {
  ++totals_.completions;
  if (stream >= layout_.streams) {
    wrong(~std::uint64_t{0}, no_offset, 0, fmt::format("a write-imm completed on stream {}, beyond the {} offered",
                                                        stream, layout_.streams));
    return;
  }
  Stream& st = streams_[stream];
  if (imm < st.next_write) {
    ++totals_.duplicates;
    if (first_problem_.empty())
      first_problem_ = fmt::format("write {} of stream {} (write-imm) completed a second time", imm, stream);
    return;
  }
  if (imm - st.next_write >= layout_.write_slots) {
    // Its slot was reused before the writes it covers could be checked.
    wrong(st.expected, no_offset, 0,
          fmt::format("a write-imm with index {} on stream {}, more than {} writes after the last one checked ({})",
                      imm, stream, layout_.write_slots, st.next_write));
    st.expected += layout_.streams;
    st.next_write = std::uint64_t{imm} + 1;
    return;
  }
  check_writes_before(stream, imm);
  check(stream, writes_ + write_offset(stream, imm), Op::write_imm, imm, length, Seen::completion, now_ns);
  st.next_write = std::uint64_t{imm} + 1;
}

void ConnectionVerifier::on_send(std::uint16_t stream, std::uint64_t buffer, std::uint64_t length,
                                 std::uint64_t now_ns) {
  ++totals_.completions;
  if (stream >= layout_.streams || buffer / layout_.receives != stream) {
    wrong(~std::uint64_t{0}, no_offset, 0, fmt::format("a send completed on stream {} into receive buffer {}, "
                                                       "which is not that stream's", stream, buffer));
    return;
  }
  Stream& st = streams_[stream];
  const std::uint8_t* p = receives_ + receive_offset(buffer);
  if (length < header_size || length > layout_.slot_bytes) {
    wrong(st.expected, no_offset, 0,
          fmt::format("a send of {} bytes on stream {}: messages are {}..{} bytes", length, stream, header_size,
                      layout_.slot_bytes));
    st.expected += layout_.streams;
    return;
  }
  const MessageHeader h = decode_header(p);
  if (header_valid(p) && h.connection == layout_.connection && h.op == Op::send && h.sequence < st.expected &&
      (st.expected - h.sequence) % layout_.streams == 0) {
    ++totals_.duplicates;
    if (first_problem_.empty()) first_problem_ = fmt::format("message {} (send) completed a second time", h.sequence);
    return;
  }
  // The writes posted before it on this stream are in place now.
  if (header_valid(p) && h.op == Op::send && h.write_index >= st.next_write &&
      h.write_index - st.next_write <= layout_.write_slots)
    check_writes_before(stream, h.write_index);
  check(stream, p, Op::send, static_cast<std::uint32_t>(st.next_write), length, Seen::completion, now_ns);
}

void ConnectionVerifier::finish(std::uint64_t posted) {
  if (finished_) return;
  finished_ = true;
  for (std::uint16_t s = 0; s < layout_.streams; ++s) {
    Stream& st = streams_[s];
    // Plain writes after the stream's last completion: in place, since the
    // generator saw them complete, as long as their slot shows the
    // stream's next sequence (an older one: they are not there).
    for (std::uint32_t n = 0; n < layout_.write_slots && st.expected < posted; ++n) {
      const std::uint8_t* p = writes_ + write_offset(s, st.next_write);
      const MessageHeader h = decode_header(p);
      if (!header_valid(p) || h.op != Op::write || h.sequence != st.expected || h.write_index != st.next_write ||
          h.connection != layout_.connection)
        break;
      check(s, p, Op::write, static_cast<std::uint32_t>(st.next_write), 0, Seen::write_slot, 0);
      ++totals_.writes_checked;
      ++st.next_write;
    }
    if (st.expected < posted)
      missing((posted - st.expected + layout_.streams - 1) / layout_.streams, st.expected,
              "posted by the generator, never seen here");
  }
}

}  // namespace metaroce::apps::traffic
