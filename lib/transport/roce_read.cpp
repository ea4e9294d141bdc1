// RoceConnection, READ and atomics as IBTA RC has them (roce_connection.hpp):
// the requester's request packets and its in-order intake of the answers,
// the responder's execution, its answers and its replies to duplicates.
#include <algorithm>
#include <cstring>

#include "transport/roce_internal.hpp"

namespace metaroce::transport {

// ---------------------------------------------------------------- requester

std::uint64_t RoceConnection::acknowledgeable_through(std::uint64_t rel) {
  if (snd_una_ >= snd_assigned_ || request_ends_.empty()) return rel;
  for (std::size_t i = locate(snd_una_); i < send_queue_.size() && send_queue_[i]->first_rel < rel; ++i) {
    const SendMessage& m = *send_queue_[i];
    if (is_request(m.request.op)) return std::max(snd_una_, m.first_rel);
  }
  return rel;
}

std::size_t RoceConnection::send_request_packet(Time now, std::uint64_t rel, const SendMessage& m, TxBatch& out) {
  const SendRequest& r = m.request;
  const std::uint8_t op = r.op == SendOp::read        ? wire::opcode::read_request
                          : r.op == SendOp::fetch_add ? wire::opcode::fetch_add
                                                      : wire::opcode::compare_swap;
  const wire::HeaderTemplate& t = data_templates_[op];
  const std::span<std::uint8_t> h = out.header_space(t.size());
  t.stamp(h, 0, wire_psn(rel), true);
  std::uint8_t* ext = h.data() + t.ext_offset();
  if (op == wire::opcode::read_request) {
    // From the first PSN not yet answered: a re-issued READ asks for the rest.
    const std::uint64_t offset = (rel - m.first_rel) * config_.mtu;
    wire::encode(wire::Reth{r.remote_addr + offset, r.rkey, static_cast<std::uint32_t>(r.length - offset)}, ext);
  } else {
    wire::encode(wire::AtomicEth{r.remote_addr, r.rkey, r.swap_add, r.compare}, ext);
  }
  std::array<std::uint8_t, 8> trailer{};
  const std::size_t trailer_len = wire::build_trailer(
      0, icrc_unless_secure(wire::ByteSpan(h.data() + t.l3_offset(), t.size() - t.l3_offset())), trailer);
  out.commit(t.size(), {}, std::span<const std::uint8_t>(trailer.data(), trailer_len));
  if (rel < snd_max_) {
    ++counters_.retransmitted_packets;
  } else {
    ++counters_.data_packets_sent;
    snd_max_ = m.end_rel();
    request_ends_.push_back(m.end_rel());
  }
  congestion_->on_send(0, 0, now);
  if (!rto_timer_.armed()) {
    stats_.rto = current_rto();
    wheel_.arm(rto_timer_, now + stats_.rto);
  }
  return t.size() + trailer_len;
}

void RoceConnection::on_answer(Time now, const wire::ParsedFrame& frame) {
  const std::uint32_t distance = (frame.bth.psn - wire_psn(snd_una_)) & wire::psn_mask;
  if (distance >= (wire::psn_mask + 1) / 2) {
    ++counters_.duplicate_packets;  // an answer already taken (a duplicate READ's, say)
    return;
  }
  const std::uint64_t rel = snd_una_ + distance;
  const bool atomic_answer = frame.bth.opcode == wire::opcode::atomic_acknowledge;
  SendMessage* m = rel < snd_max_ ? send_queue_[locate(rel)].get() : nullptr;
  if (m == nullptr || !is_request(m->request.op) || atomic_answer != is_atomic(m->request.op)) {
    ++counters_.read_response_unexpected;
    return;
  }
  if (rel > snd_una_) {
    // An answer acknowledges every PSN before it, but only in order: a gap
    // in a READ's responses (or an earlier request unanswered) re-issues
    // from the first PSN missing.
    if (rel == m->first_rel && acknowledgeable_through(rel) == rel) {
      acknowledge_through(now, rel);
    } else {
      ++counters_.read_responses_out_of_sequence;
      backoff_ = 0;  // the responder answers at once: loss, as a NAK for a gap says (on_ack)
      if (!(retry_active_ && retry_rel_ == snd_una_)) go_back(now, snd_una_);
      complete_sends();
      return;
    }
  }
  const SendRequest& r = m->request;
  auto* local = const_cast<std::uint8_t*>(r.local_addr);  // registered for local write (check_send)
  std::uint64_t len = 0;
  if (atomic_answer) {
    std::memcpy(local, &frame.atomic_ack_orig, sizeof frame.atomic_ack_orig);
  } else {
    const std::uint64_t index = rel - m->first_rel;
    const std::uint64_t offset = index * config_.mtu;
    len = frame.payload.size();
    if (offset + len > r.length) {
      ++counters_.read_response_beyond_length;
      return;
    }
    const std::uint8_t op = frame.bth.opcode;
    const bool last = op == wire::opcode::read_response_last || op == wire::opcode::read_response_only;
    if (len != std::min<std::uint64_t>(config_.mtu, r.length - offset) || last != (index + 1 == m->packets)) {
      ++counters_.read_response_mismatch;
      return;
    }
    if (len != 0) std::memcpy(local + offset, frame.payload.data(), len);
  }
  ++counters_.data_packets_received;
  counters_.data_bytes_placed += len;
  acknowledge_through(now, rel + 1);
  complete_sends();
}

// ---------------------------------------------------------------- responder

bool RoceConnection::queue_read_answer(std::uint64_t rel, const wire::Reth& reth, bool duplicate) {
  if (reth.dma_len != 0 && memory_.check(reth.rkey, reth.va, reth.dma_len, access_remote_read) != AccessCheck::ok) {
    ++counters_.read_access_errors;
    responder_error(wire::syndrome::nak_remote_access_error);
    return false;
  }
  Answer a;
  a.rel = rel;
  a.va = reth.va;
  a.remaining = reth.dma_len;
  a.duplicate = duplicate;
  if (!duplicate) ++original_answers_;
  answers_.push_back(a);
  request_poll();
  return true;
}

void RoceConnection::on_request(Time, const wire::ParsedFrame& frame) {
  const std::uint8_t op = frame.bth.opcode;
  if (rx_in_message_) {
    ++counters_.inconsistent_message;
    responder_error(wire::syndrome::nak_invalid_request);
    return;
  }
  // Only answers to new requests count: a requester keeps to the limit,
  // and its re-issued READs (duplicates here) are bounded apart.
  if (original_answers_ >= config_.max_outstanding_reads) {
    ++counters_.read_requests_over_limit;
    responder_error(wire::syndrome::nak_invalid_request);
    return;
  }
  if (op == wire::opcode::read_request) {
    if (!queue_read_answer(rcv_expected_, frame.reth, false)) return;
    ++counters_.read_requests_served;
    // One PSN per response packet.
    rcv_expected_ += frame.reth.dma_len == 0 ? 1 : (std::uint64_t{frame.reth.dma_len} + config_.mtu - 1) / config_.mtu;
  } else {
    const wire::AtomicEth& e = frame.atomic_eth;
    if (e.va % atomic_length != 0) {
      ++counters_.atomic_unaligned;
      responder_error(wire::syndrome::nak_invalid_request);
      return;
    }
    if (memory_.check(e.rkey, e.va, atomic_length, access_remote_atomic) != AccessCheck::ok) {
      ++counters_.atomic_access_errors;
      responder_error(wire::syndrome::nak_remote_access_error);
      return;
    }
    auto* target = reinterpret_cast<std::uint8_t*>(static_cast<std::uintptr_t>(e.va));
    std::uint64_t old = 0;
    std::memcpy(&old, target, sizeof old);
    const std::uint64_t next = op == wire::opcode::fetch_add ? old + e.swap_add : old == e.compare ? e.swap_add : old;
    std::memcpy(target, &next, sizeof next);
    ++counters_.atomics_executed;
    // Kept for a duplicate of this request: it gets this value, and the
    // memory is not touched again.
    if (atomic_results_.empty()) atomic_results_.resize(config_.max_outstanding_reads);
    atomic_results_[atomic_next_] = AtomicResult{rcv_expected_, old, true};
    atomic_next_ = (atomic_next_ + 1) % atomic_results_.size();
    Answer a;
    a.atomic = true;
    a.rel = rcv_expected_;
    a.old = old;
    answers_.push_back(a);
    ++original_answers_;
    ++rcv_expected_;
    request_poll();
  }
  ++counters_.data_packets_received;
  ++completed_msn_;
  nak_sent_ = false;
}

void RoceConnection::on_duplicate_request(const wire::ParsedFrame& frame) {
  const std::uint64_t behind = (expected_psn() - frame.bth.psn) & wire::psn_mask;
  if (behind > rcv_expected_ || answers_.size() - original_answers_ >= config_.max_outstanding_reads) {
    ++counters_.duplicate_packets;
    return;
  }
  const std::uint64_t rel = rcv_expected_ - behind;
  if (frame.bth.opcode == wire::opcode::read_request) {
    // Read again: the memory may have changed, as on any RoCE NIC.
    if (queue_read_answer(rel, frame.reth, true)) ++counters_.duplicate_reads_reexecuted;
    return;
  }
  for (const AtomicResult& saved : atomic_results_) {
    if (saved.valid && saved.rel == rel) {
      Answer a;
      a.atomic = true;
      a.rel = rel;
      a.old = saved.old;
      a.duplicate = true;
      answers_.push_back(a);
      ++counters_.atomic_replays;
      request_poll();
      return;
    }
  }
  ++counters_.duplicate_packets;  // older than the saved results: nothing to answer with
}

void RoceConnection::emit_answers(Time now, TxBatch& out) {
  const std::size_t start = out.size();
  while (!answers_.empty() && state_ == ConnectionState::ready && out.size() - start < burst_limit) {
    if (!pacing_allows(now)) return;
    Answer& a = answers_.front();
    const std::uint32_t psn = static_cast<std::uint32_t>((config_.peer_initial_psn + a.rel) & wire::psn_mask);
    const wire::Aeth aeth{roce::ack_no_credits, completed_msn_ & 0x00ff'ffffu};
    std::array<std::uint8_t, 8> trailer{};
    if (a.atomic) {
      const wire::HeaderTemplate& t = data_templates_[wire::opcode::atomic_acknowledge];
      const std::span<std::uint8_t> h = out.header_space(t.size());
      t.stamp(h, 0, psn, false);
      wire::encode(aeth, h.data() + t.ext_offset());
      wire::store_be64(h.data() + t.ext_offset() + wire::aeth_size, a.old);
      const std::size_t trailer_len = wire::build_trailer(
          0, icrc_unless_secure(wire::ByteSpan(h.data() + t.l3_offset(), t.size() - t.l3_offset())), trailer);
      out.commit(t.size(), {}, std::span<const std::uint8_t>(trailer.data(), trailer_len));
      paced(now, t.size() + trailer_len);
      if (!a.duplicate) --original_answers_;
      answers_.pop_front();
      continue;
    }
    const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(config_.mtu, a.remaining));
    const bool last = len == a.remaining;
    const std::uint8_t op = !a.started ? (last ? wire::opcode::read_response_only : wire::opcode::read_response_first)
                                       : (last ? wire::opcode::read_response_last : wire::opcode::read_response_middle);
    const wire::HeaderTemplate& t = data_templates_[op];
    const std::uint8_t pad = wire::pad_for(len);
    // The answer's bytes are copied into the batch after its headers and
    // its ICRC computed over the copy. Our application may rewrite this
    // memory at any time (a READ is answered again after its requester has
    // it all, when it re-issued it from a gap): a frame that pointed at the
    // memory, or whose ICRC was computed before a copy of it, would leave
    // with an ICRC its bytes do not match, counted as bad_icrc by the peer.
    // (4 bytes of room for the pad, written whole.)
    const std::span<std::uint8_t> h = out.header_space(t.size() + len + 4);
    t.stamp(h, len, psn, false);
    if (wire::opcode_info(op).has(wire::has_aeth)) wire::encode(aeth, h.data() + t.ext_offset());
    std::uint8_t* at = h.data() + t.size();
    wire::copy_bytes(at, reinterpret_cast<const std::uint8_t*>(static_cast<std::uintptr_t>(a.va)), len);
    wire::store_le32(at + len, 0);  // the pad, 0 to 3 bytes
    const std::size_t frame_len = t.size() + len + pad;
    const std::size_t trailer_len = wire::build_trailer(
        0, icrc_unless_secure(wire::ByteSpan(h.data() + t.l3_offset(), frame_len - t.l3_offset())), trailer);
    out.commit(frame_len, {}, std::span<const std::uint8_t>(trailer.data(), trailer_len));
    paced(now, frame_len + trailer_len);
    ++counters_.data_packets_sent;
    counters_.data_bytes_sent += len;
    a.started = true;
    a.va += len;
    a.remaining -= len;
    ++a.rel;
    if (last) {
      if (!a.duplicate) --original_answers_;
      answers_.pop_front();
    }
  }
  if (!answers_.empty()) request_poll();
}

}  // namespace metaroce::transport
