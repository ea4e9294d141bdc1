// RoceConnection, responder: strictly in-order receive, validation and
// placement, one NAK per PSN gap, re-ACK of duplicates, RNR, coalesced ACKs.
#include <cstring>

#include "transport/roce_internal.hpp"

namespace metaroce::transport {

void RoceConnection::on_checked_frame(Time now, const wire::ParsedFrame& frame) {
  if (state_ == ConnectionState::error || state_ == ConnectionState::closed ||
      state_ == ConnectionState::init) {
    ++counters_.packets_in_error_state;
    return;
  }
  if (frame.bth.pkey != config_.pkey) {
    ++counters_.pkey_mismatch;
    return;
  }
  const std::uint8_t op = frame.bth.opcode;
  if (roce::is_data_opcode(op) || roce::is_request_opcode(op)) {
    on_data(now, frame);
  } else if (roce::is_answer_opcode(op)) {
    on_answer(now, frame);
  } else if (op == wire::opcode::acknowledge) {
    on_ack(now, frame);
  } else if (op == wire::opcode::cnp) {
    ++counters_.cnp_received;
    congestion_->on_congestion_notification(now);
    request_poll();  // the rate may have changed
  } else if (wire::is_metaroce_opcode(op)) {
    ++counters_.wrong_mode_packets;
  } else {
    ++counters_.unsupported_opcodes;
  }
}

void RoceConnection::queue_nak(std::uint8_t syndrome, std::uint32_t psn) {
  pending_naks_.push_back(PendingNak{syndrome, psn});
  request_poll();
}

// A request that cannot be carried out: NAK it, and the QP goes to ERROR
// (on both sides: the requester fails on the NAK).
void RoceConnection::responder_error(std::uint8_t nak_syndrome) {
  queue_nak(nak_syndrome, expected_psn());
  fail(CompletionStatus::flushed, nullptr);
}

void RoceConnection::note_in_order_packet(Time now, bool ack_req) {
  ++unacked_packets_;
  if (ack_req || unacked_packets_ >= config_.ack_every_packets) ack_now_ = true;
  if (ack_now_) {
    request_poll();
  } else if (!ack_timer_.armed()) {
    wheel_.arm(ack_timer_, now + config_.ack_delay);
  }
}

void RoceConnection::ack_callback(timer::Timer& t, timer::Wheel&, timer::Tick) {
  auto* self = static_cast<RoceConnection*>(t.owner());
  self->ack_now_ = true;
  self->request_poll();
}

void RoceConnection::on_data(Time now, const wire::ParsedFrame& frame) {
  if (frame.ecn() == 3) {
    ++counters_.ecn_ce_received;
    // Notification point: tell the sender, at most once per interval.
    if (!cnp_pending_ && (!cnp_sent_ || now - last_cnp_ >= config_.cnp_interval)) {
      cnp_pending_ = true;
      request_poll();
    }
  }
  const std::uint32_t e = expected_psn();
  const std::uint32_t distance = (frame.bth.psn - e) & wire::psn_mask;
  if (distance != 0) {
    if (distance >= (wire::psn_mask + 1) / 2) {
      // Behind e: done already. A READ or atomic is answered again (its
      // answer may have been lost); otherwise our ACK may have been, so
      // ACK e - 1 now.
      if (roce::is_request_opcode(frame.bth.opcode)) {
        on_duplicate_request(frame);
        return;
      }
      ++counters_.duplicate_packets;
      ++counters_.spurious_retransmissions;
      ack_now_ = true;
      request_poll();
      return;
    }
    // Past e: a gap. Drop, and NAK once per gap: the requester goes back to e.
    ++counters_.out_of_sequence_drops;
    if (!nak_sent_) {
      nak_sent_ = true;
      queue_nak(wire::syndrome::nak_psn_sequence_error, e);
    }
    return;
  }

  const std::uint8_t op = frame.bth.opcode;
  if (roce::is_request_opcode(op)) {
    on_request(now, frame);
    return;
  }
  const bool is_send = roce::is_send_opcode(op);
  const bool starts = roce::starts_message(op);
  const bool last = roce::ends_message(op);
  const std::uint64_t len = frame.payload.size();
  // A length error (IBTA class C): NAK invalid request, the QP goes to ERROR.
  if (len > config_.mtu) {
    ++counters_.payload_over_mtu;
    responder_error(wire::syndrome::nak_invalid_request);
    return;
  }
  // Opcode sequence: FIRST / ONLY start a message, MIDDLE / LAST continue
  // the current one of the same kind; FIRST and MIDDLE carry exactly one MTU.
  if ((starts && rx_in_message_) || (!starts && (!rx_in_message_ || rx_is_send_ != is_send)) ||
      (!last && len != config_.mtu)) {
    ++counters_.inconsistent_message;
    responder_error(wire::syndrome::nak_invalid_request);
    return;
  }
  const auto rnr_nak = [&] {
    // Nothing placed, e unchanged; later packets of this round are dropped
    // silently (nak_sent_) until the requester resends e after its RNR wait.
    ++counters_.rnr_naks_sent;
    nak_sent_ = true;
    queue_nak(static_cast<std::uint8_t>(wire::syndrome::rnr_nak | roce::rnr_timer_code(config_.rnr_delay)), e);
  };

  if (is_send) {
    if (starts && posted_receives_.empty()) {
      rnr_nak();
      return;
    }
    const ReceiveRequest& receive = starts ? posted_receives_.front() : *rx_receive_;
    const std::uint64_t placed = starts ? 0 : rx_placed_;
    if (placed + len > receive.length) {
      ++counters_.receive_too_small;
      add_completion(Completion{receive.wr_id, CompletionStatus::local_length_error,
                                        CompletionKind::receive, receive.stream, 0, false, 0});
      ++counters_.receive_completions;
      if (starts) {
        posted_receives_.pop_front();
      } else {
        rx_receive_.reset();
      }
      responder_error(wire::syndrome::nak_invalid_request);
      return;
    }
    if (starts) {
      rx_receive_ = posted_receives_.front();
      posted_receives_.pop_front();
      rx_placed_ = 0;
      rx_in_message_ = true;
      rx_is_send_ = true;
    }
    if (len != 0) std::memcpy(rx_receive_->addr + rx_placed_, frame.payload.data(), len);
    rx_placed_ += len;
    if (last) {
      add_completion(Completion{rx_receive_->wr_id, CompletionStatus::success, CompletionKind::receive,
                                        rx_receive_->stream, rx_placed_, roce::carries_imm(op),
                                        roce::carries_imm(op) ? frame.imm : 0});
      ++counters_.receive_completions;
      rx_receive_.reset();
      rx_in_message_ = false;
      ++completed_msn_;
    }
  } else {
    // RETH (FIRST / ONLY) names where the message goes and its length; the
    // write pointer advances packet by packet.
    const std::uint64_t va = starts ? frame.reth.va : rx_va_;
    const std::uint32_t rkey = starts ? frame.reth.rkey : rx_rkey_;
    const std::uint64_t remaining = starts ? frame.reth.dma_len : rx_remaining_;
    if (len > remaining || (last && len != remaining)) {
      ++counters_.inconsistent_message;
      responder_error(wire::syndrome::nak_invalid_request);
      return;
    }
    // The RETH's whole range is checked at the first packet, so nothing of
    // a message that would leave the region is written; then every packet,
    // since the region may be deregistered meanwhile (a zero-length WRITE
    // touches nothing and is not checked).
    if ((starts && frame.reth.dma_len != 0 &&
         memory_.check(rkey, va, frame.reth.dma_len, access_remote_write) != AccessCheck::ok) ||
        (len != 0 && memory_.check(rkey, va, len, access_remote_write) != AccessCheck::ok)) {
      ++counters_.remote_access_errors;
      responder_error(wire::syndrome::nak_remote_access_error);
      return;
    }
    const bool imm = roce::carries_imm(op);
    if (last && imm && posted_receives_.empty()) {
      rnr_nak();
      return;
    }
    if (starts) {
      rx_in_message_ = true;
      rx_is_send_ = false;
      rx_length_ = frame.reth.dma_len;
    }
    if (len != 0)
      std::memcpy(reinterpret_cast<std::uint8_t*>(static_cast<std::uintptr_t>(va)), frame.payload.data(), len);
    rx_va_ = va + len;
    rx_rkey_ = rkey;
    rx_remaining_ = remaining - len;
    if (last) {
      if (imm) {
        const ReceiveRequest receive = posted_receives_.front();
        posted_receives_.pop_front();
        add_completion(Completion{receive.wr_id, CompletionStatus::success,
                                          CompletionKind::receive_write_imm, receive.stream, rx_length_, true,
                                          frame.imm});
        ++counters_.receive_completions;
      }
      rx_in_message_ = false;
      ++completed_msn_;
    }
  }
  ++counters_.data_packets_received;
  counters_.data_bytes_placed += len;
  ++rcv_expected_;
  nak_sent_ = false;
  note_in_order_packet(now, frame.bth.ack_req);
}

void RoceConnection::emit_ack_frame(std::uint8_t syndrome, std::uint32_t psn, TxBatch& out) {
  const wire::HeaderTemplate& t = ack_template_;
  const std::span<std::uint8_t> h = out.header_space(t.size());
  t.stamp(h, 0, psn, false);
  wire::encode(wire::Aeth{syndrome, completed_msn_ & 0x00ff'ffffu}, h.data() + t.ext_offset());
  std::array<std::uint8_t, 8> trailer{};
  const std::size_t trailer_len = wire::build_trailer(
      0, icrc_unless_secure(wire::ByteSpan(h.data() + t.l3_offset(), t.size() - t.l3_offset())), trailer);
  out.commit(t.size(), {}, std::span<const std::uint8_t>(trailer.data(), trailer_len));
  ++counters_.acks_sent;
}

void RoceConnection::emit_cnp(Time now, TxBatch& out) {
  const wire::HeaderTemplate& t = cnp_template_;
  const std::span<std::uint8_t> h = out.header_space(t.size());
  t.stamp(h, 0, 0, false);
  std::array<std::uint8_t, 8> trailer{};
  const std::size_t trailer_len = wire::build_trailer(
      0, icrc_unless_secure(wire::ByteSpan(h.data() + t.l3_offset(), t.size() - t.l3_offset())), trailer);
  out.commit(t.size(), {}, std::span<const std::uint8_t>(trailer.data(), trailer_len));
  ++counters_.cnps_sent;
  cnp_pending_ = false;
  cnp_sent_ = true;
  last_cnp_ = now;
}

void RoceConnection::emit_acks(Time now, TxBatch& out) {
  if (cnp_pending_ && state_ == ConnectionState::ready) emit_cnp(now, out);
  bool covered = false;
  for (const PendingNak& nak : pending_naks_) {
    emit_ack_frame(nak.syndrome, nak.psn, out);
    // A PSN sequence error NAK at e acknowledges e - 1 and everything
    // before it (IBTA Vol. 1 9.7.5.2.1): a coalesced ACK of the same
    // packets, due later, would say nothing new.
    covered = covered || (nak.syndrome == wire::syndrome::nak_psn_sequence_error && nak.psn == expected_psn());
  }
  pending_naks_.clear();
  if (covered && state_ == ConnectionState::ready) {
    unacked_packets_ = 0;
    ack_now_ = false;
    wheel_.cancel(ack_timer_);
  }
  if (state_ != ConnectionState::ready || !ack_now_) return;
  // Cumulative: everything up to e - 1 has been carried out.
  emit_ack_frame(roce::ack_no_credits, (expected_psn() - 1) & wire::psn_mask, out);
  unacked_packets_ = 0;
  ack_now_ = false;
  wheel_.cancel(ack_timer_);
}

}  // namespace metaroce::transport
