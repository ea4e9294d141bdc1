// RoceConnection, requester: segmentation into RC opcodes, the window,
// cumulative ACKs, go-back-N on NAK and timeout, RNR waits.
#include <algorithm>

#include "transport/roce_internal.hpp"

namespace metaroce::transport {

void RoceConnection::build_templates() {
  for (std::uint8_t op = 0; op < data_templates_.size(); ++op) {
    if (!wire::opcode_info(op).known()) continue;
    const bool ok = data_templates_[op].prepare(frame_spec(config_, op, config_.base_src_port, true));
    (void)ok;  // every RC data opcode fits a template (tests pin it)
  }
  const bool ok = ack_template_.prepare(frame_spec(config_, wire::opcode::acknowledge, config_.base_src_port, false));
  (void)ok;
  // CNP: BECN set, 16 reserved bytes, DSCP 48 as NICs send it so that a
  // fabric can prioritise the notification over the data it is about.
  wire::FrameSpec cnp = frame_spec(config_, wire::opcode::cnp, config_.base_src_port, false);
  cnp.bth.becn = true;
  cnp.ipv4.dscp = 48;
  cnp.ipv6.dscp = 48;
  const bool cnp_ok = cnp_template_.prepare(cnp);
  (void)cnp_ok;
}

// ---------------------------------------------------------------- timers

Time RoceConnection::current_rto() const noexcept {
  Time rto = has_rtt_ ? srtt_ + 4 * rttvar_ + config_.ack_delay : config_.initial_rto;
  rto = std::max(rto, config_.min_rto);
  for (std::uint32_t i = 0; i < backoff_ && rto < config_.max_rto; ++i) rto *= 2;
  return std::min(rto, config_.max_rto);
}

void RoceConnection::rto_callback(timer::Timer& t, timer::Wheel&, timer::Tick now) {
  static_cast<RoceConnection*>(t.owner())->on_rto(now);
}

void RoceConnection::rnr_callback(timer::Timer& t, timer::Wheel&, timer::Tick) {
  static_cast<RoceConnection*>(t.owner())->on_rnr_timer();
}

// No ACK progress for an RTO: the packets, or the ACKs, or the NAK, were
// lost. Go back to the oldest unacknowledged PSN and back off.
void RoceConnection::on_rto(Time now) {
  if (state_ != ConnectionState::ready || snd_una_ == snd_max_ || rnr_waiting_) return;
  ++counters_.rto_timeouts;
  ++backoff_;
  if (++consecutive_timeouts_ > config_.retry_limit) {
    fail(CompletionStatus::retry_exceeded, send_queue_[locate(snd_una_)].get());
    return;
  }
  go_back(now, snd_una_);
  stats_.rto = current_rto();
  wheel_.arm(rto_timer_, now + stats_.rto);
}

void RoceConnection::on_rnr_timer() {
  if (!rnr_waiting_ || state_ != ConnectionState::ready) return;
  rnr_waiting_ = false;
  snd_next_ = std::max(rnr_rel_, snd_una_);
  request_poll();
}

// ---------------------------------------------------------------- transmit

// Index in send_queue_ of the message holding PSN `rel` (< snd_assigned_).
std::size_t RoceConnection::locate(std::uint64_t rel) {
  if (tx_cursor_ >= send_queue_.size() || send_queue_[tx_cursor_]->first_rel > rel) {
    const auto it = std::upper_bound(send_queue_.begin(), send_queue_.end(), rel,
                                     [](std::uint64_t r, const auto& m) { return r < m->first_rel; });
    tx_cursor_ = static_cast<std::size_t>(it - send_queue_.begin()) - 1;
  }
  while (send_queue_[tx_cursor_]->end_rel() <= rel) ++tx_cursor_;
  return tx_cursor_;
}

std::size_t RoceConnection::send_data_packet(Time now, std::uint64_t rel, TxBatch& out) {
  const SendMessage& m = *send_queue_[locate(rel)];
  const SendRequest& r = m.request;
  const auto index = static_cast<std::uint32_t>(rel - m.first_rel);
  const std::uint64_t offset = std::uint64_t{index} * config_.mtu;
  const auto length = static_cast<std::uint32_t>(std::min<std::uint64_t>(config_.mtu, r.length - offset));
  const std::uint8_t op = roce::data_opcode(r.op, index, m.packets);
  const bool last = index + 1 == m.packets;
  const wire::HeaderTemplate& t = data_templates_[op];

  const std::span<std::uint8_t> h = out.header_space(t.size());
  // AckReq on each message's last packet: the responder answers at once and
  // the completion is not held up by ACK coalescing.
  t.stamp(h, length, wire_psn(rel), last);
  std::uint8_t* ext = h.data() + t.ext_offset();
  if (wire::opcode_info(op).has(wire::has_reth)) {
    // RETH on FIRST and ONLY only: where the message starts, its whole length.
    wire::encode(wire::Reth{r.remote_addr, r.rkey, static_cast<std::uint32_t>(r.length)}, ext);
    ext += wire::reth_size;
  }
  if (roce::carries_imm(op)) wire::store_be32(ext, r.imm);

  const wire::ByteSpan payload(r.local_addr == nullptr ? nullptr : r.local_addr + offset, length);
  const std::uint8_t pad = wire::pad_for(length);
  static constexpr std::array<std::uint8_t, 4> zeros{};
  const std::array<wire::ByteSpan, 3> pieces = {
      wire::ByteSpan(h.data() + t.l3_offset(), t.size() - t.l3_offset()), payload,
      wire::ByteSpan(zeros.data(), pad)};
  std::array<std::uint8_t, 8> trailer{};
  // (A secure connection computes the ICRC when it seals the frame.)
  const std::size_t trailer_len = wire::build_trailer(pad, icrc_unless_secure(pieces), trailer);
  out.commit(t.size(), payload, std::span<const std::uint8_t>(trailer.data(), trailer_len));

  if (rel < snd_max_) {
    ++counters_.retransmitted_packets;
  } else {
    ++counters_.data_packets_sent;
    counters_.data_bytes_sent += length;
    snd_max_ = rel + 1;
    if (!rtt_probe_active_) {
      rtt_probe_active_ = true;
      rtt_probe_rel_ = rel;
      rtt_probe_sent_ = now;
    }
  }
  congestion_->on_send(0, length, now);
  if (!rto_timer_.armed()) {
    stats_.rto = current_rto();
    wheel_.arm(rto_timer_, now + stats_.rto);
  }
  return t.size() + length + trailer_len;
}

void RoceConnection::poll_frames(Time now, TxBatch& out) {
  wants_poll_ = false;
  if (state_ == ConnectionState::init || state_ == ConnectionState::closed) return;
  const std::size_t start = out.size();
  // Answers first: an ACK behind them would tell the requester they were lost.
  emit_answers(now, out);
  emit_acks(now, out);
  if (state_ != ConnectionState::ready || rnr_waiting_) return;
  const std::uint64_t window = std::min<std::uint64_t>(config_.psn_window, congestion_->connection_window());
  while (snd_next_ < snd_assigned_ && snd_next_ - snd_una_ < window) {
    if (out.size() - start >= burst_limit) {
      request_poll();
      return;
    }
    if (!pacing_allows(now)) return;
    const SendMessage& m = *send_queue_[locate(snd_next_)];
    if (is_request(m.request.op)) {
      // One request packet for the message's PSNs (its answers carry them).
      if (snd_next_ >= snd_max_ && request_ends_.size() >= config_.max_outstanding_reads) {
        ++counters_.read_limit_waits;
        return;  // acknowledge_through asks for a poll when one is answered
      }
      // Its answers' PSNs count in the window: one larger than the window
      // goes when nothing else is outstanding.
      if (snd_next_ != snd_una_ && m.end_rel() - snd_una_ > window) return;
      paced(now, send_request_packet(now, snd_next_, m, out));
      snd_next_ = m.end_rel();
      continue;
    }
    paced(now, send_data_packet(now, snd_next_, out));
    ++snd_next_;
  }
}

// ---------------------------------------------------------------- acknowledgements

// Every PSN before `rel_end` is acknowledged.
void RoceConnection::acknowledge_through(Time now, std::uint64_t rel_end) {
  if (rel_end <= snd_una_) return;
  const std::uint64_t acked = rel_end - snd_una_;
  snd_una_ = rel_end;
  while (!request_ends_.empty() && request_ends_.front() <= snd_una_) request_ends_.pop_front();
  snd_next_ = std::max(snd_next_, snd_una_);
  if (rtt_probe_active_ && rtt_probe_rel_ < snd_una_) {
    rtt_probe_active_ = false;
    const Time sample = now - rtt_probe_sent_;
    if (!has_rtt_) {
      srtt_ = sample;
      rttvar_ = sample / 2;
      has_rtt_ = true;
    } else {
      const Time diff = sample > srtt_ ? sample - srtt_ : srtt_ - sample;
      rttvar_ = (3 * rttvar_ + diff) / 4;
      srtt_ = (7 * srtt_ + sample) / 8;
    }
    backoff_ = 0;  // the RTO is measured again
  }
  consecutive_timeouts_ = 0;
  if (retry_active_ && snd_una_ > retry_rel_) retry_active_ = false;
  congestion_->on_ack(0, static_cast<std::uint32_t>(std::min<std::uint64_t>(acked, 0xffff'ffffu)), 0, srtt_, now);
  stats_.rto = current_rto();
  if (snd_una_ < snd_max_) {
    wheel_.rearm(rto_timer_, now + stats_.rto);
  } else {
    wheel_.cancel(rto_timer_);
  }
  request_poll();
}

// Go-back-N: transmit again every packet from `rel` on.
void RoceConnection::go_back(Time now, std::uint64_t rel) {
  counters_.packets_declared_lost += snd_max_ - rel;
  snd_next_ = rel;
  retry_active_ = true;
  retry_rel_ = rel;
  rtt_probe_active_ = false;  // Karn: a resent packet gives no RTT sample
  congestion_->on_loss(0, now);
  request_poll();
}

void RoceConnection::on_ack(Time now, const wire::ParsedFrame& frame) {
  ++counters_.acks_received;
  const std::uint8_t syndrome = frame.aeth.syndrome;
  const wire::AckKind kind = wire::ack_kind(syndrome);
  // PSN distance from the oldest unacknowledged one; more than half the
  // 24-bit space ahead means behind (an old ACK).
  const std::uint32_t distance = (frame.bth.psn - wire_psn(snd_una_)) & wire::psn_mask;
  if (distance >= (wire::psn_mask + 1) / 2) return;  // stale: acknowledges nothing new
  const std::uint64_t rel = snd_una_ + distance;

  if (kind == wire::AckKind::ack) {
    // An ACK for PSN p acknowledges every PSN up to and including p.
    if (rel >= snd_max_) {
      ++counters_.sack_unknown;  // acknowledges a PSN never sent
      return;
    }
    // Not past a READ or atomic whose answer is missing: the peer did it,
    // so its answer was lost. Ask again from there.
    const std::uint64_t through = acknowledgeable_through(rel + 1);
    acknowledge_through(now, through);
    if (through < rel + 1 && !(retry_active_ && retry_rel_ == snd_una_)) {
      ++counters_.read_responses_out_of_sequence;
      backoff_ = 0;  // the answer was lost, the peer is not slow: as for a NAK below
      go_back(now, snd_una_);
    }
    complete_sends();
    return;
  }
  if (kind == wire::AckKind::reserved) {
    ++counters_.reserved_ack_syndromes;
    return;
  }
  // A NAK for PSN p acknowledges every PSN before p; p itself was not done.
  if (rel >= snd_max_) {
    ++counters_.sack_unknown;
    return;
  }
  acknowledge_through(now, acknowledgeable_through(rel));
  complete_sends();

  if (kind == wire::AckKind::rnr_nak) {
    ++counters_.rnr_naks_received;
    if (rnr_waiting_ && rnr_rel_ == rel) return;  // a copy of the NAK that paused us
    SendMessage& m = *send_queue_[locate(rel)];
    if (++m.rnr_retries > config_.rnr_retry_limit) {
      fail(CompletionStatus::rnr_retry_exceeded, &m);
      return;
    }
    // Not lost, not congestion: stop, wait, then resend from p.
    rnr_waiting_ = true;
    rnr_rel_ = rel;
    snd_next_ = rel;
    retry_active_ = true;
    retry_rel_ = rel;
    rtt_probe_active_ = false;
    wheel_.cancel(rto_timer_);
    wheel_.rearm(rnr_timer_, now + config_.rnr_delay);
    return;
  }

  ++counters_.naks_received;
  switch (syndrome) {
    case wire::syndrome::nak_psn_sequence_error:
      // The peer answered a gap as it saw it: what made the timer fire
      // before was loss, not a peer slower than the timeout, so the backoff
      // ends (under heavy loss RTT samples are rare, every round being
      // resent, and the backoff would otherwise only grow).
      backoff_ = 0;
      // One NAK per gap; a copy (the network duplicated it) or a NAK for
      // the PSN a go-back round already restarted from changes nothing more.
      if (rnr_waiting_ || (retry_active_ && retry_rel_ == rel)) return;
      go_back(now, rel);
      return;
    case wire::syndrome::nak_remote_access_error:
      fail(CompletionStatus::remote_access_error, send_queue_[locate(rel)].get());
      return;
    case wire::syndrome::nak_remote_operational_error:
      fail(CompletionStatus::remote_operational_error, send_queue_[locate(rel)].get());
      return;
    default:
      // Invalid request and the reserved NAK codes.
      fail(CompletionStatus::remote_invalid_request, send_queue_[locate(rel)].get());
      return;
  }
}

// Completions in post order: RC is one ordered stream, so per-stream order holds.
void RoceConnection::complete_sends() {
  while (!send_queue_.empty() && send_queue_.front()->end_rel() <= snd_una_) {
    const SendRequest& r = send_queue_.front()->request;
    add_completion(Completion{r.wr_id, CompletionStatus::success, completion_kind(r.op), r.stream, r.length,
                              false, 0});
    ++counters_.send_completions;
    send_queue_.pop_front();
    if (tx_cursor_ > 0) --tx_cursor_;
  }
}

}  // namespace metaroce::transport
