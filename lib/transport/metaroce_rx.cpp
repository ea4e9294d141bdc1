// Connection, receive side: placement without a reorder buffer, duplicate
// suppression by PSN, per-path SACK state, in-order completion per stream,
// and the ACKs that report it all.
#include <algorithm>
#include <cstring>

#include "transport/metaroce_internal.hpp"

namespace metaroce::transport {
namespace {
// Largest forward jump of a path sequence the receiver follows: the sender
// keeps at most 256 unresolved per path, so more means a bogus packet.
constexpr std::uint32_t max_path_jump = 2 * wire::sack_bits;
constexpr std::size_t max_paths_per_ack = 16;  // 16 x 44 bytes: fits any MTU
constexpr std::uint8_t rnr_timer_code = 0x0e;  // RNR NAK timer field (informational here)
}  // namespace

void MetaroceConnection::on_checked_frame(Time now, const wire::ParsedFrame& frame) {
  if (state_ == ConnectionState::error || state_ == ConnectionState::closed ||
      state_ == ConnectionState::init) {
    ++counters_.packets_in_error_state;
    return;
  }
  if (frame.bth.pkey != config_.pkey) {
    ++counters_.pkey_mismatch;
    return;
  }
  switch (frame.bth.opcode) {
    case wire::opcode::mr_ack: on_ack(now, frame); break;
    case wire::opcode::mr_probe: on_probe(now, frame); break;
    case wire::opcode::mr_write:
    case wire::opcode::mr_write_imm:
    case wire::opcode::mr_send:
    case wire::opcode::mr_send_imm:
    case wire::opcode::mr_read_request:
    case wire::opcode::mr_read_response:
    case wire::opcode::mr_compare_swap:
    case wire::opcode::mr_fetch_add:
    case wire::opcode::mr_atomic_response: on_data(now, frame); break;
    default: ++counters_.wrong_mode_packets; break;
  }
}

// Records path sequence `seq` as received. False when it is a duplicate
// (already recorded) or absurdly far ahead.
bool MetaroceConnection::accept_path_seq(RxPath& path, std::uint32_t seq) {
  const auto ahead = static_cast<std::int32_t>(seq - path.cum);
  if (ahead < 0) return false;
  if (static_cast<std::uint32_t>(ahead) > max_path_jump) return false;
  if (ahead > static_cast<std::int32_t>(wire::sack_bits)) {
    // The sender has resolved everything this far back (it never has more
    // than 256 unresolved): forget the oldest holes.
    const std::uint32_t slide = static_cast<std::uint32_t>(ahead) - wire::sack_bits;
    path.shift(slide);
    path.cum += slide;
  }
  const std::uint32_t offset = seq - path.cum;
  if (offset == 0) {
    const std::uint32_t run = path.leading_run();
    path.shift(run + 1 > wire::sack_bits ? wire::sack_bits : run + 1);
    path.cum += run + 1;
  } else {
    if (path.bit(offset - 1)) return false;
    path.set(offset - 1);
  }
  return true;
}

void MetaroceConnection::note_path_arrival(Time now, std::uint16_t path_id, const wire::ParsedFrame& frame) {
  RxPath& path = rx_paths_[path_id];
  if (frame.ecn() == 3) {
    ++path.ce_count;
    ++counters_.ecn_ce_received;
  }
  path.ts_echo = frame.mr_data.tsval;
  path.news = true;
  path.acks_at_arrival = counters_.acks_sent;
  rx_started_ = true;
  if (receive_share_ != nullptr) {
    receive_share_->on_arrival(config_.local_qpn, static_cast<std::uint32_t>(frame.frame.size()), now);
    receive_share_->wake_on_new_generation();
  }
  ++unacked_packets_;
  if (frame.bth.ack_req || unacked_packets_ >= config_.ack_every_packets) ack_now_ = true;
  if (ack_now_) {
    request_poll();
  } else if (!ack_timer_.armed()) {
    wheel_.arm(ack_timer_, now + config_.ack_delay);
  }
}

void MetaroceConnection::ack_callback(timer::Timer& t, timer::Wheel&, timer::Tick) {
  auto* self = static_cast<MetaroceConnection*>(t.owner());
  self->ack_now_ = true;
  self->request_poll();
}

void MetaroceConnection::on_probe(Time now, const wire::ParsedFrame& frame) {
  const std::uint16_t path_id = frame.mr_data.path_id;
  if (path_id >= config_.paths) {
    ++counters_.path_id_out_of_range;
    return;
  }
  RxPath& path = rx_paths_[path_id];
  if (static_cast<std::int32_t>(frame.mr_data.path_seq - path.cum) > static_cast<std::int32_t>(max_path_jump)) {
    ++counters_.path_seq_beyond_window;
    return;
  }
  // A probe that follows everything sent before it on its path means the
  // sender heard nothing of what we reported: the ACK that last reported
  // the path was lost, most likely on a dead route. The path that led it
  // moves to a new source port, as a sender moves a failed path: the
  // route is most likely dead for our data on that path too. (A probe
  // after a gap is the sender's data lost, and says nothing of our ACKs.)
  if (frame.mr_data.path_seq == path.cum && path.last_ack_route != RxPath::no_route) {
    TxPath& route = tx_paths_[path.last_ack_route];
    if (usable(route)) {
      move_path(route);
      ++counters_.ack_routes_moved;
      // Every path that ACK reported waits for the next one now.
      for (std::uint16_t p = 0; p < config_.paths; ++p)
        if (rx_paths_[p].last_ack_route == route.id) rx_paths_[p].last_ack_route = RxPath::no_route;
    }
  }
  accept_path_seq(path, frame.mr_data.path_seq);
  ack_now_ = true;  // a probe asks for an answer now
  note_path_arrival(now, path_id, frame);
}

void MetaroceConnection::send_nak(std::uint8_t syndrome, std::uint32_t psn) {
  pending_naks_.push_back(PendingNak{syndrome, psn});
  request_poll();
}

void MetaroceConnection::on_data(Time now, const wire::ParsedFrame& frame) {
  const wire::MrDataHeader& d = frame.mr_data;
  if (d.path_id >= config_.paths) {
    ++counters_.path_id_out_of_range;
    return;
  }
  if (d.stream_id >= config_.streams) {
    ++counters_.stream_out_of_range;
    return;
  }
  if (frame.payload.size() > config_.mtu) {
    ++counters_.payload_over_mtu;
    return;
  }
  RxPath& path = rx_paths_[d.path_id];
  const auto ahead = static_cast<std::int32_t>(d.path_seq - path.cum);
  if (ahead > static_cast<std::int32_t>(max_path_jump)) {
    ++counters_.path_seq_beyond_window;
    return;
  }
  const bool in_order_on_path = ahead == 0;

  // Connection level: is this PSN new?
  const std::uint32_t base_psn = static_cast<std::uint32_t>((config_.peer_initial_psn + rcv_base_) & wire::psn_mask);
  const std::uint32_t distance = (frame.bth.psn - base_psn) & wire::psn_mask;
  bool place = true;
  if (distance >= (wire::psn_mask + 1) / 2) {
    ++counters_.duplicate_packets;  // behind the window: placed and completed long ago
    ++counters_.stale_packets;
    place = false;
  } else if (distance >= config_.psn_window) {
    ++counters_.psn_beyond_window;
    return;
  }
  const std::uint64_t rel = rcv_base_ + distance;
  const std::size_t bit = rel & (config_.psn_window - 1);
  if (place && ((rcv_bitmap_[bit / 64] >> (bit % 64)) & 1u)) {
    ++counters_.duplicate_packets;
    place = false;
  }

  const std::uint8_t op = frame.bth.opcode;
  // The tracking entry of the packet's message in its stream; nullptr
  // (counted) when it is outside the stream window or the pool is dry
  // (then unplaced and unrecorded: the sender resends).
  const auto track = [&](RxStream& stream) -> RxMessage* {
    if (d.msg_seq - stream.next_complete >= config_.stream_window) {
      ++counters_.message_beyond_window;
      return nullptr;
    }
    return rx_message(stream, d.msg_seq);
  };
  if (place && (op == wire::opcode::mr_read_response || op == wire::opcode::mr_atomic_response)) {
    if (!on_response(frame, bit)) return;
  } else if (place && (op == wire::opcode::mr_read_request || op == wire::opcode::mr_fetch_add ||
                       op == wire::opcode::mr_compare_swap)) {
    RxStream& stream = rx_streams_[d.stream_id];
    RxMessage* tracked = track(stream);
    if (tracked == nullptr) return;
    if (tracked->active) {
      ++counters_.inconsistent_message;
      return;
    }
    if (!on_request(frame)) return;
    // The request takes its place in the stream's order, with nothing to
    // place and no completion here.
    *tracked = RxMessage{};
    tracked->active = true;
    tracked->last_seen = true;
    ++stream.active;
    ++counters_.data_packets_received;
    mark_placed(bit);
    complete_receives(stream, d.stream_id);
  } else if (place) {
    RxStream& stream = rx_streams_[d.stream_id];
    RxMessage* tracked = track(stream);
    if (tracked == nullptr) return;
    RxMessage& msg = *tracked;
    const bool is_send = frame.bth.opcode == wire::opcode::mr_send || frame.bth.opcode == wire::opcode::mr_send_imm;
    const std::uint32_t msg_len = is_send ? frame.mr_send.msg_len : frame.mr_write.msg_len;
    const std::uint32_t offset = is_send ? frame.mr_send.msg_offset : frame.mr_write.msg_offset;
    const std::uint64_t len = frame.payload.size();
    if (msg.active && (msg.is_send != is_send || msg.length != msg_len)) {
      ++counters_.inconsistent_message;
      return;
    }
    if (std::uint64_t{offset} + len > msg_len) {
      ++counters_.offset_out_of_range;
      return;
    }
    // Messages are cut at the MTU: each packet but the last carries one MTU
    // from a multiple of it, the last one the rest and the LAST flag. Any
    // other length (a pad count that lies, a forged one) would leave a
    // message whose bytes never add up, stalling its stream for good.
    if ((offset != 0 && offset % config_.mtu != 0) || len != std::min<std::uint64_t>(config_.mtu, msg_len - offset) ||
        ((d.flags & wire::mr_flag::last) != 0) != (offset + len == msg_len)) {
      ++counters_.inconsistent_message;
      return;
    }
    std::uint8_t* destination = nullptr;
    if (is_send) {
      const std::uint32_t index = frame.mr_send.recv_seq - stream.posted_base;
      if (index >= stream.posted.size()) {
        // Not placed and not recorded on its path: if this NAK is lost,
        // the path's gap makes the sender resend, which is also right.
        ++counters_.rnr_naks_sent;
        send_nak(wire::syndrome::rnr_nak | rnr_timer_code, frame.bth.psn);
        return;
      }
      const ReceiveRequest& recv = stream.posted[index];
      if (msg_len > recv.length) {
        ++counters_.receive_too_small;
        send_nak(wire::syndrome::nak_invalid_request, frame.bth.psn);
        add_completion(Completion{recv.wr_id, CompletionStatus::local_length_error,
                                          CompletionKind::receive, d.stream_id, 0, false, 0});
        ++counters_.receive_completions;
        stream.posted.erase(stream.posted.begin() + index);
        fail(CompletionStatus::flushed, nullptr);
        return;
      }
      destination = recv.addr + offset;
      msg.recv_seq = frame.mr_send.recv_seq;
    } else {
      const wire::MrWriteHeader& w = frame.mr_write;
      // The whole message's range (this packet's VA less its offset), so
      // that no packet of a message that would leave the region is placed,
      // whichever arrives first; it holds this packet's bytes.
      if (memory_.check(w.rkey, w.va - offset, msg_len, access_remote_write) != AccessCheck::ok) {
        ++counters_.remote_access_errors;
        send_nak(wire::syndrome::nak_remote_access_error, frame.bth.psn);
        fail(CompletionStatus::flushed, nullptr);
        return;
      }
      destination = reinterpret_cast<std::uint8_t*>(static_cast<std::uintptr_t>(w.va));
    }
    if (!msg.active) {
      msg = RxMessage{};
      msg.active = true;
      ++stream.active;
      msg.is_send = is_send;
      msg.length = msg_len;
    }
    if (len != 0) std::memcpy(destination, frame.payload.data(), len);
    msg.placed += len;
    if (d.flags & wire::mr_flag::last) {
      msg.last_seen = true;
      if (frame.has(wire::has_imm)) {
        msg.has_imm = true;
        msg.imm = frame.imm;
      }
    }
    ++counters_.data_packets_received;
    counters_.data_bytes_placed += len;

    mark_placed(bit);
    if (msg.placed == msg.length && msg.last_seen) complete_receives(stream, d.stream_id);
  }

  if (accept_path_seq(path, d.path_seq)) {
    if (!in_order_on_path) ack_now_ = true;  // a gap on a path: report it at once
    // A copy the network duplicated repeats its path sequence; a new path
    // sequence carrying a placed PSN is a retransmission that was not
    // needed (or the late original of one).
    if (!place) ++counters_.spurious_retransmissions;
  }
  note_path_arrival(now, d.path_id, frame);
}

void MetaroceConnection::mark_placed(std::size_t bit) noexcept {
  rcv_bitmap_[bit / 64] |= std::uint64_t{1} << (bit % 64);
  while (true) {
    const std::size_t b = rcv_base_ & (config_.psn_window - 1);
    if (((rcv_bitmap_[b / 64] >> (b % 64)) & 1u) == 0) break;
    rcv_bitmap_[b / 64] &= ~(std::uint64_t{1} << (b % 64));
    ++rcv_base_;
  }
}

void MetaroceConnection::complete_receives(RxStream& stream, std::uint16_t stream_id) {
  while (true) {
    RxMessage* chunk = stream.chunks[(stream.next_complete / chunk_entries) & (rx_chunk_count_ - 1)];
    if (chunk == nullptr) return;
    RxMessage& msg = chunk[stream.next_complete % chunk_entries];
    if (!msg.active || msg.placed != msg.length || !msg.last_seen) return;
    if (msg.is_send || msg.has_imm) {
      // Both consume the oldest posted receive: the sender numbers them in
      // the order they complete here. A WRITE_IMM that finds none waits for
      // post_receive (its data is already in place).
      if (stream.posted.empty()) return;
      const ReceiveRequest recv = stream.posted.front();
      stream.posted.pop_front();
      ++stream.posted_base;
      add_completion(Completion{recv.wr_id, CompletionStatus::success,
                                        msg.is_send ? CompletionKind::receive : CompletionKind::receive_write_imm,
                                        stream_id, msg.length, msg.has_imm, msg.imm});
      ++counters_.receive_completions;
    }
    msg = RxMessage{};
    ++stream.next_complete;
    ++completed_msn_;
    // A chunk whose messages are all completed goes back to the pool, and
    // so does every chunk of a stream with nothing active.
    if (--stream.active == 0) {
      give_rx_chunks(stream);
    } else if (stream.next_complete % chunk_entries == 0) {
      RxMessage*& done = stream.chunks[((stream.next_complete - 1) / chunk_entries) & (rx_chunk_count_ - 1)];
      pools_->rx_chunks.give(done);  // every entry completed, so cleared
      done = nullptr;
      --stream.chunks_held;
    }
  }
}

std::uint16_t MetaroceConnection::ack_lead() const noexcept {
  // First a usable path on which the peer's frames still arrive: one that
  // has been quiet for two rounds of ACKs most likely crosses a plane or
  // route that is dead for the peer (its data moved off it), and an ACK
  // there would be lost too. Then any usable path.
  const std::uint64_t quiet_acks = 2u * config_.paths;
  for (std::uint32_t i = 0; i < config_.paths; ++i) {
    const auto p = static_cast<std::uint16_t>((ack_path_cursor_ + i) % config_.paths);
    if (usable(tx_paths_[p]) && counters_.acks_sent - rx_paths_[p].acks_at_arrival <= quiet_acks) return p;
  }
  for (std::uint32_t i = 0; i < config_.paths; ++i) {
    const auto p = static_cast<std::uint16_t>((ack_path_cursor_ + i) % config_.paths);
    if (usable(tx_paths_[p])) return p;
  }
  return static_cast<std::uint16_t>(ack_path_cursor_);
}

// Every ACK leads with one of the paths, in turn, and leaves from that
// path's source port on that path's plane: the same 5-tuple, so the same
// ECMP route, as our own data on the path. A connection's ACKs spread over
// as many routes as its data, and each carries the state of every path
// with news, so an ACK route that dies costs the ACKs it carried, not the
// paths they reported; once a probe shows it (on_probe) the path moves to
// another route. A path of ours that has failed leads no ACK, nor (while
// another can) one quiet for two rounds of ACKs (ack_lead).
void MetaroceConnection::emit_acks(Time now, TxBatch& out) {
  const std::uint16_t lead = ack_lead();
  const std::uint16_t plane = ack_plane(static_cast<std::uint16_t>(lead % config_.planes));
  const std::uint16_t src_port = tx_paths_[lead].src_port;
  route(out, plane);
  const auto emit = [&](std::uint8_t syndrome, std::uint32_t psn, std::span<const wire::MrPathAck> paths) {
    wire::FrameSpec spec = frame_spec(config_, wire::opcode::mr_ack, src_port, false, plane);
    spec.bth.psn = psn;
    spec.mr_ack.syndrome = syndrome;
    spec.mr_ack.delivered_psn =
        static_cast<std::uint32_t>((config_.peer_initial_psn + rcv_base_) & wire::psn_mask);
    spec.mr_ack.completed_msn = completed_msn_;
    if (receive_share_ != nullptr) {
      spec.mr_ack.rate_hint_mbps = receive_share_->share_mbps(config_.local_qpn, now);
      hint_generation_ = receive_share_->generation();
    }
    spec.mr_path_acks = paths;
    commit_header_frame(spec, out, !secure());
    ++counters_.acks_sent;
  };

  for (const PendingNak& nak : pending_naks_) emit(nak.syndrome, nak.psn, {});
  pending_naks_.clear();
  if (state_ != ConnectionState::ready) return;
  if (!ack_now_ && unacked_packets_ < config_.ack_every_packets) return;

  std::array<wire::MrPathAck, max_paths_per_ack> blocks;
  std::size_t n = 0;
  bool any = false;
  for (std::uint32_t i = 0; i < config_.paths; ++i) {
    const std::uint32_t p = (ack_path_cursor_ + i) % config_.paths;
    RxPath& path = rx_paths_[p];
    if (!path.news) continue;
    any = true;
    wire::MrPathAck& b = blocks[n++];
    b = wire::MrPathAck{};
    b.path_id = static_cast<std::uint8_t>(p);
    b.ce_count = path.ce_count;
    b.cum_seq = path.cum;
    b.ts_echo = path.ts_echo;
    for (std::size_t w = 0; w < 4; ++w)
      for (std::size_t byte = 0; byte < 8; ++byte) b.sack[w * 8 + byte] = static_cast<std::uint8_t>(path.sack[w] >> (8 * byte));
    path.news = false;
    path.last_ack_route = lead;
    if (n == blocks.size()) {
      emit(wire::syndrome::ack, 0, std::span<const wire::MrPathAck>(blocks.data(), n));
      n = 0;
    }
  }
  if (n != 0 || !any) emit(wire::syndrome::ack, 0, std::span<const wire::MrPathAck>(blocks.data(), n));
  ack_path_cursor_ = (lead + 1u) % config_.paths;
  unacked_packets_ = 0;
  ack_now_ = false;
  wheel_.cancel(ack_timer_);
}

}  // namespace metaroce::transport
