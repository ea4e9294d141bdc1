// Connection, send side: segmentation, spraying over paths, SACK processing,
// loss recovery (gap, tail-loss probe, timeout), failed paths, RNR retry.
#include <algorithm>
#include <array>

#include "transport/metaroce_internal.hpp"

namespace metaroce::transport {
namespace {

std::uint32_t micros(Time now) noexcept { return static_cast<std::uint32_t>(now / 1000); }


}  // namespace

void MetaroceConnection::build_templates(TxPath& path) {
  const auto prepare = [&](wire::HeaderTemplate& t, std::uint8_t op) {
    const bool ok = t.prepare(frame_spec(config_, op, path.src_port, true, path.plane));
    (void)ok;  // every metaroce data opcode fits a template (tests pin it)
  };
  prepare(path.write_template, wire::opcode::mr_write);
  prepare(path.write_imm_template, wire::opcode::mr_write_imm);
  prepare(path.send_template, wire::opcode::mr_send);
  prepare(path.send_imm_template, wire::opcode::mr_send_imm);
  prepare(path.read_response_template, wire::opcode::mr_read_response);
  prepare(path.atomic_response_template, wire::opcode::mr_atomic_response);
  prepare(path.probe_template, wire::opcode::mr_probe);
}

// ---------------------------------------------------------------- timers

namespace {
Time path_rto(const ConnectionConfig& c, Time srtt, Time rttvar, bool has_rtt, std::uint32_t backoff) {
  Time rto = has_rtt ? srtt + 4 * rttvar + c.ack_delay : c.initial_rto;
  rto = std::max(rto, c.min_rto);
  for (std::uint32_t i = 0; i < backoff && rto < c.max_rto; ++i) rto *= 2;
  return std::min(rto, c.max_rto);
}
}  // namespace

void MetaroceConnection::arm_path_timers(Time now, TxPath& path) {
  if (path.unresolved() == 0) {
    wheel_.cancel(path.rto_timer);
    wheel_.cancel(path.probe_timer);
    return;
  }
  const Time rto = path_rto(config_, path.srtt, path.rttvar, path.has_rtt, path.consecutive_timeouts);
  path.stats.rto = rto;
  if (!path.rto_timer.armed()) wheel_.arm(path.rto_timer, now + rto);
  // Tail-loss probe: two RTTs of silence after the last send or progress.
  const Time pto = path.has_rtt ? 2 * path.srtt + config_.ack_delay : rto / 2;
  if (path.state != PathState::active) return;
  // Moving a timer on the wheel for every packet costs more than the rest
  // of the send: the deadline only moves later, so the armed timer stays
  // and, when it fires early, re-arms itself for the latest deadline.
  path.probe_deadline = now + std::max(pto, config_.ack_delay);
  if (!path.probe_timer.armed() || path.probe_timer.deadline() > path.probe_deadline)
    wheel_.rearm(path.probe_timer, path.probe_deadline);
}

void MetaroceConnection::rto_callback(timer::Timer& t, timer::Wheel&, timer::Tick now) {
  auto* path = static_cast<TxPath*>(t.owner());
  path->owner->on_rto(now, path->id);
}

void MetaroceConnection::probe_callback(timer::Timer& t, timer::Wheel& wheel, timer::Tick now) {
  auto* path = static_cast<TxPath*>(t.owner());
  if (now < path->probe_deadline) {  // sends moved the deadline since it was armed
    wheel.arm(t, path->probe_deadline);
    return;
  }
  path->owner->on_tail_probe(path->id);
}

void MetaroceConnection::rnr_callback(timer::Timer& t, timer::Wheel&, timer::Tick now) {
  static_cast<MetaroceConnection*>(t.owner())->on_rnr_timer(now);
}

void MetaroceConnection::on_tail_probe(std::uint16_t path_id) {
  TxPath& path = tx_paths_[path_id];
  if (path.unresolved() == 0 || state_ != ConnectionState::ready) return;
  if (!path.probe_due) ++probes_due_;
  path.probe_due = true;
  request_poll();
}

// A path's timeout is not evidence of loss: the packets may sit in a queue
// and the ACKs may have been lost. So a timeout sends a probe (whose ACK
// carries the path's whole SACK state) and backs off; only a path that
// times out path_fail_timeouts times in a row is declared failed, its
// unresolved packets moved to the other paths and its UDP source port
// changed. Losses are otherwise declared by SACK gaps alone, so a network
// that only drops packets causes no spurious retransmission.
void MetaroceConnection::on_rto(Time now, std::uint16_t path_id) {
  TxPath& path = tx_paths_[path_id];
  if (path.unresolved() == 0 || state_ != ConnectionState::ready) return;
  ++counters_.rto_timeouts;
  ++path.stats.timeouts;
  ++path.consecutive_timeouts;
  if (!path.probe_due) ++probes_due_;
  path.probe_due = true;
  request_poll();

  if (path.state == PathState::failed) {
    // A failed path's probe went unanswered too. When no path works, the
    // peer is unreachable: give up after retry_limit such rounds.
    bool any_active = false;
    for (std::uint16_t p = 0; p < config_.paths; ++p) any_active = any_active || usable(tx_paths_[p]);
    if (!any_active && ++stalled_rounds_ > config_.retry_limit && snd_una_ < snd_next_) {
      fail(CompletionStatus::retry_exceeded, packet(snd_una_).message);
      return;
    }
  } else if (path.consecutive_timeouts >= config_.path_fail_timeouts) {
    // Probably a dead route: move the path to another ECMP hash bucket and
    // its unresolved packets to the other paths. The last working path of
    // a plane takes the plane down with it: they go to the other planes.
    bool plane_dies = config_.planes > 1 && planes_[path.plane].stats.state == PlaneState::active;
    for (std::uint16_t p = path.plane; plane_dies && p < config_.paths; p = static_cast<std::uint16_t>(p + config_.planes))
      plane_dies = p == path_id || tx_paths_[p].state == PathState::failed;
    if (plane_dies) {
      planes_[path.plane].stats.state = PlaneState::failed;
      ++planes_[path.plane].stats.failures;
      ++counters_.planes_failed;
    }
    path.state = PathState::failed;
    ++counters_.paths_failed;
    move_path(path);
    // (resolve gives the path's table back once nothing is unresolved.)
    for (std::uint32_t s = path.una; s != path.next_seq && path.seq_slot != nullptr; ++s) {
      const std::uint64_t slot = path.seq_slot[s % wire::sack_bits];
      if (slot == TxPath::no_packet) continue;
      if (slot != TxPath::probe && slot >= snd_una_ && slot < snd_next_) {
        TxPacket& pkt = packet(slot);
        if (pkt.state == TxPacket::in_flight && pkt.path == path_id && pkt.path_seq == s) {
          if (++pkt.timeouts > config_.retry_limit) {
            fail(CompletionStatus::retry_exceeded, pkt.message);
            return;
          }
          if (plane_dies) ++counters_.packets_moved_to_other_planes;
        }
      }
      resolve(now, path_id, s, false);
    }
  }
  const Time rto = path_rto(config_, path.srtt, path.rttvar, path.has_rtt, path.consecutive_timeouts);
  path.stats.rto = rto;
  wheel_.rearm(path.rto_timer, now + rto);
}

void MetaroceConnection::move_path(TxPath& path) {
  ++path.stats.entropy_changes;
  ++path.entropy_round;
  const std::uint32_t mix = (path.id + 1u) * 2654435761u + path.entropy_round * 40503u;
  std::uint16_t port = static_cast<std::uint16_t>(49152u + (mix >> 16) % 16384u);
  if (port == path.src_port) port = static_cast<std::uint16_t>(49152u + (port - 49152u + 1) % 16384u);
  path.src_port = port;
  build_templates(path);
}

void MetaroceConnection::on_rnr_timer(Time) {
  for (std::uint64_t rel : rnr_queue_) {
    if (rel < snd_una_ || rel >= snd_next_) continue;
    TxPacket& pkt = packet(rel);
    if (pkt.state != TxPacket::rnr_wait) continue;
    pkt.state = TxPacket::lost;
    retransmit_queue_.push_back(rel);
  }
  rnr_queue_.clear();
  request_poll();
}

// ---------------------------------------------------------------- planes

bool MetaroceConnection::usable(const TxPath& path) const noexcept {
  return path.state == PathState::active && planes_[path.plane].stats.state == PlaneState::active;
}

std::uint16_t MetaroceConnection::ack_plane(std::uint16_t preferred) const noexcept {
  if (planes_[preferred].stats.state == PlaneState::active) return preferred;
  for (std::uint16_t k = 0; k < config_.planes; ++k)
    if (planes_[k].stats.state == PlaneState::active) return k;
  return preferred;
}

void MetaroceConnection::fail_plane(Time now, std::uint16_t plane_id) {
  PlaneInfo& plane = planes_[plane_id].stats;
  if (plane.state == PlaneState::failed) return;
  plane.state = PlaneState::failed;
  ++plane.failures;
  ++counters_.planes_failed;
  for (std::uint16_t p = plane_id; p < config_.paths; p = static_cast<std::uint16_t>(p + config_.planes)) {
    TxPath& path = tx_paths_[p];
    // (resolve gives the path's table back once nothing is unresolved.)
    for (std::uint32_t s = path.una; s != path.next_seq && path.seq_slot != nullptr; ++s) {
      const std::uint64_t slot = path.seq_slot[s % wire::sack_bits];
      if (slot == TxPath::no_packet) continue;
      if (slot != TxPath::probe && slot >= snd_una_ && slot < snd_next_) {
        const TxPacket& pkt = packet(slot);
        if (pkt.state == TxPacket::in_flight && pkt.path == p && pkt.path_seq == s)
          ++counters_.packets_moved_to_other_planes;
      }
      resolve(now, p, s, false);
    }
    wheel_.cancel(path.probe_timer);
    wheel_.cancel(path.rto_timer);
    path.consecutive_timeouts = 0;
    // Its probes tell when the plane works again.
    if (!path.probe_due) ++probes_due_;
    path.probe_due = true;
  }
  request_poll();
}

void MetaroceConnection::set_plane_link(Time now, std::uint16_t plane_id, bool up) {
  if (plane_id >= config_.planes || state_ != ConnectionState::ready) return;
  PlaneInfo& plane = planes_[plane_id].stats;
  plane.link_down = !up;
  if (!up) {
    fail_plane(now, plane_id);
    return;
  }
  if (plane.state == PlaneState::active) return;
  // Probe at once: the first acknowledged brings the plane back.
  for (std::uint16_t p = plane_id; p < config_.paths; p = static_cast<std::uint16_t>(p + config_.planes)) {
    TxPath& path = tx_paths_[p];
    path.consecutive_timeouts = 0;
    if (!path.probe_due) ++probes_due_;
    path.probe_due = true;
  }
  request_poll();
}

// ---------------------------------------------------------------- transmit

// Over several planes a new packet's plane is drawn in proportion to the
// planes' windows (each the sum of its usable paths' windows), by smooth
// weighted round robin: each plane with room on a usable path gains its
// weight, the one with the most credit sends and gives back the sum of
// the weights. With equal windows the planes take turns, and taking their
// paths in turn too this is plain round robin over the paths; a plane
// whose window congestion control has shrunk gets its share of the
// packets even while the others' windows have room. Then the plane's own
// paths in turn, skipping those without room.
std::int32_t MetaroceConnection::pick_path_by_plane() {
  const std::uint32_t n = config_.paths, planes = config_.planes;
  const auto window_of = [&](std::uint32_t p) {
    return std::min({config_.path_window, congestion_->path_window(static_cast<std::uint16_t>(p)),
                     static_cast<std::uint32_t>(wire::sack_bits)});
  };
  const auto has_room = [&](std::uint32_t p, std::uint32_t window) {
    const TxPath& path = tx_paths_[p];
    return path.in_flight < window && path.next_seq - path.una < wire::sack_bits;
  };
  std::array<std::int64_t, max_planes> weight{};
  std::array<bool, max_planes> room{};
  for (std::uint32_t p = 0; p < n; ++p) {
    const TxPath& path = tx_paths_[p];
    if (!usable(path)) continue;
    const std::uint32_t window = window_of(p);
    weight[path.plane] += window;
    room[path.plane] = room[path.plane] || has_room(p, window);
  }
  std::int64_t total = 0;
  std::int32_t best = -1;
  for (std::uint32_t k = 0; k < planes; ++k) {
    if (!room[k]) continue;
    total += weight[k];
    planes_[k].credit += weight[k];
    if (best < 0 || planes_[k].credit > planes_[static_cast<std::uint32_t>(best)].credit)
      best = static_cast<std::int32_t>(k);
  }
  if (best < 0) return -1;
  const auto k = static_cast<std::uint32_t>(best);
  Plane& plane = planes_[k];
  plane.credit -= total;
  const std::uint32_t in_plane = (n - k + planes - 1) / planes;  // paths k, k + planes, ... below n
  for (std::uint32_t i = 0; i < in_plane; ++i) {
    std::uint32_t j = plane.next_path + i;
    if (j >= in_plane) j -= in_plane;
    const std::uint32_t p = k + j * planes;
    if (!usable(tx_paths_[p]) || !has_room(p, window_of(p))) continue;
    if (tx_paths_[p].seq_slot == nullptr && !take_path_slots(tx_paths_[p])) return -1;  // the pool is dry: wait
    plane.next_path = static_cast<std::uint16_t>(j + 1 == in_plane ? 0 : j + 1);
    return static_cast<std::int32_t>(p);
  }
  return -1;  // (not reached: the plane had room)
}

std::int32_t MetaroceConnection::pick_path(bool for_retransmit) {
  if (!for_retransmit && config_.planes > 1) return pick_path_by_plane();
  std::int32_t best = -1;
  const std::uint32_t n = config_.paths;
  // Round robin from rr_next_path_ (< n), wrapped without a division: this
  // runs for every packet.
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t p = for_retransmit ? i : rr_next_path_ + i;
    if (p >= n) p -= n;
    const TxPath& path = tx_paths_[p];
    if (!usable(path)) continue;
    const std::uint32_t window =
        std::min({config_.path_window, congestion_->path_window(static_cast<std::uint16_t>(p)),
                  static_cast<std::uint32_t>(wire::sack_bits)});
    // A path's unresolved span (una..next_seq) must stay within the SACK
    // bitmap's reach, not only its count in flight.
    if (path.in_flight >= window || path.next_seq - path.una >= wire::sack_bits) continue;
    if (!for_retransmit) {
      if (path.seq_slot == nullptr && !take_path_slots(tx_paths_[p])) return -1;  // the pool is dry: wait
      rr_next_path_ = p + 1 == n ? 0 : p + 1;
      return static_cast<std::int32_t>(p);
    }
    // Retransmissions go to the path with the most room.
    if (best < 0 || path.in_flight < tx_paths_[static_cast<std::uint32_t>(best)].in_flight)
      best = static_cast<std::int32_t>(p);
  }
  // Only the path chosen takes a table: one taken for a path that gets no
  // packet would never go back (resolve gives it back).
  if (best >= 0 && tx_paths_[static_cast<std::uint32_t>(best)].seq_slot == nullptr &&
      !take_path_slots(tx_paths_[static_cast<std::uint32_t>(best)]))
    return -1;  // the pool is dry: wait
  return best;
}

bool MetaroceConnection::next_new_packet(std::uint64_t& rel) {
  const auto assign = [&](SendMessage& m, bool request) {
    if (!take_tx_chunk(snd_next_)) return false;  // the pool is dry: wait for a chunk
    rel = snd_next_++;
    TxPacket& pkt = packet(rel);
    pkt = TxPacket{};
    pkt.message = &m;
    pkt.offset = static_cast<std::uint32_t>(m.next_offset);
    // A READ or atomic is one request packet without payload.
    pkt.length = request ? 0
                         : static_cast<std::uint32_t>(std::min<std::uint64_t>(config_.mtu, m.request.length - m.next_offset));
    if (request) {
      m.next_offset = m.request.length;
      reads_outstanding_.push_back(&m);
    }
    pkt.last = m.next_offset + pkt.length == m.request.length;
    pkt.state = TxPacket::lost;  // not yet on a path; send_data_packet puts it on one
    m.next_offset += pkt.length;
    ++m.packets_assigned;
    m.last_rel = rel;
    return true;
  };
  // A message that must wait (its stream's window, or the READ limit) holds
  // back the messages behind it, but not our answers to the peer's
  // requests: the peer's own READs (and so, perhaps, what ours wait for)
  // depend on them. They are assigned past it.
  const auto answer_behind = [&](std::size_t from) {
    for (std::size_t i = from; i < send_queue_.size(); ++i) {
      SendMessage& m = *send_queue_[i];
      if (m.response && m.packets_assigned < m.packets_total) return assign(m, false);
    }
    return false;
  };
  while (segment_index_ < send_queue_.size()) {
    SendMessage& m = *send_queue_[segment_index_];
    if (m.packets_assigned == m.packets_total) {
      ++segment_index_;
      continue;
    }
    // The receiver tracks stream_window messages per stream (our answers
    // to the peer's requests are none of ours).
    const auto& stream = stream_sends_[m.request.stream];
    if (!m.response && !stream.empty() && m.msg_seq - stream.front()->msg_seq >= config_.stream_window)
      return responses_active_ != 0 && answer_behind(segment_index_ + 1);
    const bool request = is_request(m.request.op) && !m.response;
    if (request && reads_outstanding_.size() >= config_.max_outstanding_reads) {
      ++counters_.read_limit_waits;
      // read_finished asks for a poll when one completes.
      return responses_active_ != 0 && answer_behind(segment_index_ + 1);
    }
    return assign(m, request);
  }
  return false;
}

std::size_t MetaroceConnection::send_data_packet(Time now, std::uint64_t rel, std::uint16_t path_id,
                                                 TxBatch& out) {
  TxPath& path = tx_paths_[path_id];
  TxPacket& pkt = packet(rel);
  const SendMessage& m = *pkt.message;
  const SendRequest& r = m.request;
  const bool retransmit = pkt.transmissions > 0;
  const std::uint32_t seq = path.next_seq;
  route(out, path.plane);
  std::size_t wire_bytes;
  if (is_request(r.op) && !m.response) {
    wire_bytes = send_request_packet(now, rel, path_id, out);
  } else {
    const bool with_imm = has_imm(r.op) && pkt.last;
    const bool placed_write = is_write(r.op) || m.response;  // an MWH names the bytes' place
    const wire::HeaderTemplate& t =
        m.response       ? (is_atomic(r.op) ? path.atomic_response_template : path.read_response_template)
        : is_write(r.op) ? (with_imm ? path.write_imm_template : path.write_template)
                         : (with_imm ? path.send_imm_template : path.send_template);

    const std::uint8_t pad = wire::pad_for(pkt.length);
    // A short payload goes into the batch after its headers (TxBatch), and
    // so does every READ answer's, its ICRC computed over the copy: an
    // answer is resent from our memory until its packet is SACKed, which
    // may be after the requester has all of it and our application has
    // rewritten the bytes; a frame pointing at them, or checksummed before
    // a copy of them, would then leave with an ICRC its bytes do not match.
    const bool inline_payload = pkt.length <= out.inline_limit() || m.response;
    // (4 bytes of room for the pad, written whole; a secure connection's
    // trailer is kept room after it, where the frame is sealed in place.)
    const std::size_t spare = inline_payload && secure() ? wire::secure_trailer_size : 0;
    const std::span<std::uint8_t> h = out.header_space(t.size() + (inline_payload ? pkt.length + 4 + spare : 0));
    t.stamp(h, pkt.length, wire_psn(rel), pkt.last);
    std::uint8_t* ext = h.data() + t.ext_offset();
    wire::MrDataHeader data;
    data.path_id = static_cast<std::uint8_t>(path_id);
    data.flags = static_cast<std::uint8_t>((pkt.last ? wire::mr_flag::last : 0) |
                                           (retransmit ? wire::mr_flag::retransmit : 0));
    data.stream_id = r.stream;
    data.path_seq = seq;
    data.msg_seq = m.msg_seq;
    data.tsval = micros(now);
    wire::encode(data, ext);
    ext += wire::mr_data_header_size;
    if (placed_write) {
      wire::encode(wire::MrWriteHeader{r.remote_addr + pkt.offset, r.rkey, static_cast<std::uint32_t>(r.length),
                                       pkt.offset},
                   ext);
      ext += wire::mr_write_header_size;
    } else {
      wire::encode(wire::MrSendHeader{m.recv_seq, static_cast<std::uint32_t>(r.length), pkt.offset}, ext);
      ext += wire::mr_send_header_size;
    }
    if (with_imm) wire::store_be32(ext, r.imm);

    const wire::ByteSpan payload(r.local_addr == nullptr ? nullptr : r.local_addr + pkt.offset, pkt.length);
    if (inline_payload) {
      std::uint8_t* at = h.data() + t.size();
      if (!payload.empty()) wire::copy_bytes(at, payload.data(), payload.size());
      wire::store_le32(at + payload.size(), 0);  // the pad, 0 to 3 bytes
      // Its ICRC is computed with the rest of the burst's when poll() ends.
      out.commit_unsealed(t.size() + payload.size() + pad, t.l3_offset(), static_cast<std::uint8_t>(spare));
    } else {
      static constexpr std::array<std::uint8_t, 4> zeros{};
      const std::array<wire::ByteSpan, 3> pieces = {
          wire::ByteSpan(h.data() + t.l3_offset(), t.size() - t.l3_offset()), payload,
          wire::ByteSpan(zeros.data(), pad)};
      std::array<std::uint8_t, 8> trailer{};
      // (A secure connection computes the ICRC when it seals the frame.)
      const std::size_t trailer_len = wire::build_trailer(pad, icrc_unless_secure(pieces), trailer);
      out.commit(t.size(), payload, std::span<const std::uint8_t>(trailer.data(), trailer_len));
    }
    wire_bytes = t.size() + pkt.length + pad + wire::icrc_size;
  }

  path.seq_slot[seq % wire::sack_bits] = rel;
  ++path.next_seq;
  ++path.in_flight;
  ++data_in_flight_;
  ++path.stats.sent;
  ++planes_[path.plane].stats.data_packets;
  if (retransmit) ++planes_[path.plane].stats.retransmits;
  pkt.path = path_id;
  pkt.path_seq = seq;
  pkt.state = TxPacket::in_flight;
  ++pkt.transmissions;
  if (retransmit) {
    ++counters_.retransmitted_packets;
    ++path.stats.retransmitted;
  } else {
    ++counters_.data_packets_sent;
    counters_.data_bytes_sent += pkt.length;
  }
  congestion_->on_send(path_id, pkt.length, now);
  if (!path.rto_timer.armed()) path.last_progress = now;
  arm_path_timers(now, path);
  return wire_bytes;
}

bool MetaroceConnection::send_probe(Time now, std::uint16_t path_id, TxBatch& out) {
  TxPath& path = tx_paths_[path_id];
  if (path.next_seq - path.una >= wire::sack_bits || !take_path_slots(path)) return false;
  const wire::HeaderTemplate& t = path.probe_template;
  route(out, path.plane);
  const std::span<std::uint8_t> h = out.header_space(t.size());
  t.stamp(h, 0, 0, true);
  const std::uint32_t seq = path.next_seq;
  wire::MrDataHeader data;
  data.path_id = static_cast<std::uint8_t>(path_id);
  data.path_seq = seq;
  data.tsval = micros(now);
  wire::encode(data, h.data() + t.ext_offset());
  std::array<std::uint8_t, 8> trailer{};
  const std::size_t trailer_len = wire::build_trailer(
      0, icrc_unless_secure(wire::ByteSpan(h.data() + t.l3_offset(), t.size() - t.l3_offset())),
      trailer);
  out.commit(t.size(), {}, std::span<const std::uint8_t>(trailer.data(), trailer_len));
  path.seq_slot[seq % wire::sack_bits] = TxPath::probe;
  ++path.next_seq;
  ++path.probes_in_flight;
  ++counters_.probes_sent;
  if (path.state == PathState::failed) {
    // The probe's own timeout decides whether the path is still dead.
    wheel_.rearm(path.rto_timer,
                 now + path_rto(config_, path.srtt, path.rttvar, path.has_rtt, path.consecutive_timeouts));
  } else {
    arm_path_timers(now, path);
  }
  return true;
}

void MetaroceConnection::poll_frames(Time now, TxBatch& out) {
  wants_poll_ = false;
  if (state_ == ConnectionState::init || state_ == ConnectionState::closed) return;
  const std::size_t start = out.size();
  // Another sender started on this host: every sender's share shrank, so
  // each connection that is receiving tells its sender now, not at its
  // next ACK (that is what settles an incast within a round trip).
  if (receive_share_ != nullptr && rx_started_ && receive_share_->generation() != hint_generation_) ack_now_ = true;
  emit_acks(now, out);
  if (state_ != ConnectionState::ready) {
    out.set_route(0, 0);
    return;
  }

  for (std::uint16_t p = 0; probes_due_ != 0 && p < config_.paths; ++p) {
    TxPath& path = tx_paths_[p];
    if (path.probe_due && send_probe(now, p, out)) {
      path.probe_due = false;
      --probes_due_;
    }
  }
  while (!retransmit_queue_.empty() && out.size() - start < burst_limit &&
         data_in_flight_ < congestion_->connection_window()) {
    const std::uint64_t rel = retransmit_queue_.front();
    if (rel < snd_una_ || rel >= snd_next_ || packet(rel).state != TxPacket::lost) {
      retransmit_queue_.pop_front();
      continue;
    }
    const std::int32_t path = pick_path(true);
    if (path < 0 || !pacing_allows(now)) break;
    retransmit_queue_.pop_front();
    paced(now, send_data_packet(now, rel, static_cast<std::uint16_t>(path), out));
  }
  if (!queued_requests_.empty()) start_responses();
  // New packets wait for the retransmissions: lost data goes first.
  while (retransmit_queue_.empty() && out.size() - start < burst_limit) {
    // The receive bitmap bounds the PSN span; congestion control bounds the
    // packets actually in flight. A hole left by a lost packet holds the
    // span open but takes no congestion window: that is what keeps loss
    // from stalling the connection.
    if (snd_next_ - snd_una_ >= config_.psn_window || data_in_flight_ >= congestion_->connection_window()) break;
    if (segment_index_ >= send_queue_.size() || !pacing_allows(now)) break;
    const std::int32_t path = pick_path(false);
    if (path < 0) break;
    std::uint64_t rel;
    if (!next_new_packet(rel)) {
      // No packet for the path after all (the queue's end, a stream
      // window, a dry chunk pool): a table pick_path took for it goes back,
      // or an idle connection would keep it.
      TxPath& unused = tx_paths_[static_cast<std::uint16_t>(path)];
      if (unused.una == unused.next_seq) give_path_slots(unused);
      break;
    }
    paced(now, send_data_packet(now, rel, static_cast<std::uint16_t>(path), out));
  }
  if (!secure()) out.seal(start);  // a secure connection's ICRCs are computed once its frames are sealed
  out.set_route(0, 0);  // the next connection's frames: plane 0 unless it says otherwise
  if (out.size() - start >= burst_limit) request_poll();
}

// ---------------------------------------------------------------- acknowledgements

void MetaroceConnection::mark_acked(std::uint64_t rel) {
  TxPacket& pkt = packet(rel);
  if (pkt.state == TxPacket::acked || pkt.state == TxPacket::free_slot) return;
  pkt.state = TxPacket::acked;
  SendMessage& m = *pkt.message;
  if (++m.packets_acked == m.packets_total) {
    if (m.response) {
      response_done(m);
      return;
    }
    if (is_request(m.request.op)) return;  // done when its answer is placed (read_finished)
    m.finished = true;
    const std::uint16_t s = m.request.stream;
    if (!stream_listed_[s]) {
      stream_listed_[s] = true;
      streams_finished_.push_back(s);
    }
  }
}

void MetaroceConnection::mark_lost(std::uint64_t rel) {
  TxPacket& pkt = packet(rel);
  pkt.state = TxPacket::lost;
  retransmit_queue_.push_back(rel);
  ++counters_.packets_declared_lost;
  ++tx_paths_[pkt.path].stats.declared_lost;
  congestion_->on_loss(pkt.path, 0);
  request_poll();
}

// Path sequence `seq` of `path_id` was delivered, or (delivered == false)
// is known lost. Every transmission is resolved exactly once.
void MetaroceConnection::resolve(Time, std::uint16_t path_id, std::uint32_t seq, bool delivered) {
  TxPath& path = tx_paths_[path_id];
  if (!path.holds(seq)) return;
  std::uint64_t& slot = path.seq_slot[seq % wire::sack_bits];
  const std::uint64_t rel = slot;
  if (rel == TxPath::no_packet) return;
  slot = TxPath::no_packet;
  if (rel == TxPath::probe) {
    --path.probes_in_flight;
  } else {
    --path.in_flight;
    --data_in_flight_;
  }
  while (path.una != path.next_seq && path.seq_slot[path.una % wire::sack_bits] == TxPath::no_packet) ++path.una;
  if (path.una == path.next_seq) give_path_slots(path);  // nothing unresolved: the table goes back
  if (rel == TxPath::probe || rel < snd_una_ || rel >= snd_next_) return;
  TxPacket& pkt = packet(rel);
  const bool this_copy = pkt.state == TxPacket::in_flight && pkt.path == path_id && pkt.path_seq == seq;
  if (delivered) {
    mark_acked(rel);
  } else if (this_copy) {
    mark_lost(rel);
  }
}

void MetaroceConnection::on_path_ack(Time now, const wire::MrPathAck& block) {
  TxPath& path = tx_paths_[block.path_id];
  const std::uint16_t ce = static_cast<std::uint16_t>(block.ce_count - path.last_ce_count);
  path.last_ce_count = block.ce_count;
  path.stats.ce_marks += ce;
  const std::uint32_t before = path.unresolved();
  bool probe_acked = false;
  const auto note = [&](std::uint32_t s, bool delivered) {
    if (delivered && path.holds(s) && path.seq_slot[s % wire::sack_bits] == TxPath::probe) probe_acked = true;
    resolve(now, block.path_id, s, delivered);
  };

  // Everything below cum arrived (or was resolved long ago).
  std::uint32_t limit = block.cum_seq;
  if (static_cast<std::int32_t>(limit - path.next_seq) > 0) {
    ++counters_.sack_unknown;
    limit = path.next_seq;
  }
  for (std::uint32_t s = path.una; static_cast<std::int32_t>(limit - s) > 0; ++s) note(s, true);

  // Above cum: set bits arrived; a clear bit below the highest set one is a
  // loss, because a path delivers in order.
  const int highest = block.highest_sack_bit();
  if (highest >= 0) {
    std::uint32_t top = block.cum_seq + 1 + static_cast<std::uint32_t>(highest);
    if (static_cast<std::int32_t>(top - path.next_seq) >= 0) {
      ++counters_.sack_unknown;
      top = path.next_seq - 1;
    }
    for (std::uint32_t s = block.cum_seq; static_cast<std::int32_t>(top - s) >= 0; ++s) {
      const bool got = s != block.cum_seq && block.sack_bit(s - block.cum_seq - 1);
      note(s, got);
    }
  }

  const std::uint32_t resolved = before - path.unresolved();
  if (resolved == 0) return;
  // RTT from the echo of the newest packet's timestamp.
  const Time sample = Time{static_cast<std::uint32_t>(micros(now) - block.ts_echo)} * 1000;
  if (block.ts_echo != 0 && sample < config_.max_rto) {
    if (!path.has_rtt) {
      path.srtt = sample;
      path.rttvar = sample / 2;
      path.has_rtt = true;
    } else {
      const Time diff = sample > path.srtt ? sample - path.srtt : path.srtt - sample;
      path.rttvar = (3 * path.rttvar + diff) / 4;
      path.srtt = (7 * path.srtt + sample) / 8;
    }
  }
  path.consecutive_timeouts = 0;
  stalled_rounds_ = 0;
  path.last_progress = now;
  if (path.state == PathState::failed && probe_acked) {
    path.state = PathState::active;
    ++counters_.paths_recovered;
  }
  PlaneInfo& plane = planes_[path.plane].stats;
  if (plane.state == PlaneState::failed && probe_acked && !plane.link_down) {
    plane.state = PlaneState::active;
    ++counters_.planes_recovered;
  }
  congestion_->on_ack(block.path_id, resolved, ce, path.srtt, now);
  wheel_.cancel(path.rto_timer);
  arm_path_timers(now, path);
}

void MetaroceConnection::on_ack(Time now, const wire::ParsedFrame& frame) {
  ++counters_.acks_received;
  const wire::MrAckHeader& ack = frame.mr_ack;
  for (std::size_t i = 0; i < ack.path_count; ++i) {
    const wire::MrPathAck block = frame.path_ack(i);
    if (block.path_id >= config_.paths) {
      ++counters_.path_id_out_of_range;
      continue;
    }
    on_path_ack(now, block);
  }
  if (state_ != ConnectionState::ready) return;

  // Everything before delivered_psn was placed, whatever the paths say.
  const std::uint64_t delivered =
      (ack.delivered_psn - wire_psn(snd_una_)) & wire::psn_mask;
  if (delivered <= snd_next_ - snd_una_) {
    for (std::uint64_t rel = snd_una_; rel < snd_una_ + delivered; ++rel) mark_acked(rel);
  } else if (delivered < (wire::psn_mask + 1) / 2) {
    ++counters_.sack_unknown;
  }

  if (ack.rate_hint_mbps != 0) congestion_->on_rate_hint(ack.rate_hint_mbps, now);

  const wire::AckKind kind = wire::ack_kind(ack.syndrome);
  if (kind == wire::AckKind::reserved) {
    // Its path blocks and delivered PSN count (they say what arrived); the
    // syndrome itself means nothing we know.
    ++counters_.reserved_ack_syndromes;
  } else if (kind != wire::AckKind::ack) {
    const std::uint64_t rel = snd_una_ + ((frame.bth.psn - wire_psn(snd_una_)) & wire::psn_mask);
    const bool known = rel < snd_next_;
    TxPacket* pkt = known ? &packet(rel) : nullptr;
    if (kind == wire::AckKind::rnr_nak) {
      ++counters_.rnr_naks_received;
      if (pkt != nullptr && pkt->state == TxPacket::in_flight) {
        // Not lost: parked until the receiver is ready. Its path sequence is
        // resolved so the path's gap for it does not count as a loss.
        TxPath& path = tx_paths_[pkt->path];
        if (path.holds(pkt->path_seq) && path.seq_slot[pkt->path_seq % wire::sack_bits] == rel) {
          path.seq_slot[pkt->path_seq % wire::sack_bits] = TxPath::no_packet;
          --path.in_flight;
          --data_in_flight_;
          while (path.una != path.next_seq && path.seq_slot[path.una % wire::sack_bits] == TxPath::no_packet)
            ++path.una;
          if (path.una == path.next_seq) give_path_slots(path);
          arm_path_timers(now, path);
        }
        pkt->state = TxPacket::rnr_wait;
        if (++pkt->message->rnr_retries > config_.rnr_retry_limit) {
          fail(CompletionStatus::rnr_retry_exceeded, pkt->message);
          return;
        }
        rnr_queue_.push_back(rel);
        if (!rnr_timer_.armed()) wheel_.arm(rnr_timer_, now + config_.rnr_delay);
      }
    } else {
      ++counters_.naks_received;
      if (pkt != nullptr && pkt->state != TxPacket::free_slot) {
        const std::uint8_t code = ack.syndrome;
        fail(code == wire::syndrome::nak_remote_access_error        ? CompletionStatus::remote_access_error
             : code == wire::syndrome::nak_remote_operational_error ? CompletionStatus::remote_operational_error
                                                                    : CompletionStatus::remote_invalid_request,
             pkt->message);
        return;
      }
    }
  }
  advance_snd_una();
  complete_sends();
}

void MetaroceConnection::advance_snd_una() {
  while (snd_una_ < snd_next_) {
    TxPacket& pkt = packet(snd_una_);
    if (pkt.state != TxPacket::acked) break;
    pkt = TxPacket{};
    ++snd_una_;
    // A chunk all of whose packets are acknowledged goes back to the pool.
    if (snd_una_ % chunk_entries == 0) give_tx_chunk(snd_una_ - 1);
  }
  // Nothing in flight: the chunk of the next packets goes back too (it is
  // taken again when they are sent).
  if (snd_una_ == snd_next_) give_tx_chunk(snd_una_);
  if (snd_una_ < snd_next_ || segment_index_ < send_queue_.size()) request_poll();
}

void MetaroceConnection::complete_sends() {
  // Only the streams where a message finished.
  for (const std::uint16_t s : streams_finished_) {
    stream_listed_[s] = false;
    auto& queue = stream_sends_[s];
    while (!queue.empty() && queue.front()->finished) {
      SendMessage* m = queue.front();
      queue.pop_front();
      m->completed = true;
      add_completion(Completion{m->request.wr_id, m->status, completion_kind(m->request.op), s, m->request.length,
                                false, 0});
      ++counters_.send_completions;
    }
  }
  streams_finished_.clear();
  // Free completed messages from the front once no packet slot points to
  // them: slots are cleared as snd_una_ passes them.
  while (!send_queue_.empty() && send_queue_.front()->completed &&
         send_queue_.front()->last_rel < snd_una_) {
    send_queue_.pop_front();  // back to the pool
    if (segment_index_ > 0) --segment_index_;
  }
  if (send_queue_.empty() && send_queue_.capacity() > 64) send_queue_.release();
}

}  // namespace metaroce::transport
