// Connection, READ and atomics. A request is one data packet (sequenced,
// SACKed and resent like any other, so a PSN already placed is never
// executed twice). Its answer is data the other way: the responder queues
// it as a message of its own, whose packets each name their place in the
// requester's memory and are sprayed, SACKed and resent exactly like a
// WRITE's. The requester places an answer only where its request said, and
// completes the request, in order per stream, when every byte is placed.
#include <algorithm>
#include <cstring>
#include <new>

#include "transport/metaroce_internal.hpp"

namespace metaroce::transport {

bool MetaroceConnection::on_request(const wire::ParsedFrame& frame) {
  const std::uint8_t op = frame.bth.opcode;
  QueuedRequest q;
  q.opcode = op;
  q.stream = frame.mr_data.stream_id;
  q.msg_seq = frame.mr_data.msg_seq;
  q.destination = frame.mr_read;
  const auto refuse = [&](std::uint64_t& counter, std::uint8_t syndrome) {
    ++counter;
    send_nak(syndrome, frame.bth.psn);
    fail(CompletionStatus::flushed, nullptr);
    return false;
  };
  if (op == wire::opcode::mr_read_request) {
    const wire::MrWriteHeader& w = frame.mr_write;
    if (w.msg_offset != 0) {
      ++counters_.inconsistent_message;
      return false;
    }
    if (memory_.check(w.rkey, w.va, w.msg_len, access_remote_read) != AccessCheck::ok)
      return refuse(counters_.read_access_errors, wire::syndrome::nak_remote_access_error);
    q.source = w.va;
    q.length = w.msg_len;
  } else {
    const wire::AtomicEth& a = frame.atomic_eth;
    if (a.va % atomic_length != 0) return refuse(counters_.atomic_unaligned, wire::syndrome::nak_invalid_request);
    if (memory_.check(a.rkey, a.va, atomic_length, access_remote_atomic) != AccessCheck::ok)
      return refuse(counters_.atomic_access_errors, wire::syndrome::nak_remote_access_error);
    q.source = a.va;
    q.length = atomic_length;
    q.swap_add = a.swap_add;
    q.compare = a.compare;
  }
  // A requester keeps to max_outstanding_reads; the queue of as many again
  // holds those whose older answer's acknowledgement is still on its way.
  const std::uint32_t limit = config_.max_outstanding_reads;
  if (responses_active_ + queued_requests_.size() >= 2 * std::size_t{limit})
    return refuse(counters_.read_requests_over_limit, wire::syndrome::nak_invalid_request);
  if (responses_active_ + queued_requests_.size() >= limit) ++counters_.read_requests_queued;
  if (op == wire::opcode::mr_read_request) ++counters_.read_requests_served;
  queued_requests_.push_back(q);
  request_poll();
  return true;
}

void MetaroceConnection::start_responses() {
  while (!queued_requests_.empty() && responses_active_ < config_.max_outstanding_reads) {
    void* block = pools_->messages.take();
    if (block == nullptr) {
      ++counters_.tx_pool_waits;
      pools_->messages.wait(*this);
      return;
    }
    const QueuedRequest q = queued_requests_.front();
    queued_requests_.erase(queued_requests_.begin());  // (at most 2 x max_outstanding_reads)
    SendRequest r;
    r.op = q.opcode == wire::opcode::mr_read_request ? SendOp::read : SendOp::fetch_add;
    r.stream = q.stream;
    r.length = q.length;
    r.remote_addr = q.destination.va;
    r.rkey = q.destination.key;
    auto* source = reinterpret_cast<std::uint8_t*>(static_cast<std::uintptr_t>(q.source));
    if (q.opcode == wire::opcode::mr_read_request) {
      r.local_addr = source;
    } else {
      // Executed once, here: its request's PSN is placed, so no copy of it
      // comes this far again. A slot is free: answers in flight are fewer
      // than max_outstanding_reads.
      if (atomic_results_ == nullptr) atomic_results_ = std::make_unique<AtomicResult[]>(config_.max_outstanding_reads);
      AtomicResult* slot = std::find_if(atomic_results_.get(), atomic_results_.get() + config_.max_outstanding_reads,
                                        [](const AtomicResult& a) { return !a.in_use; });
      std::uint64_t old = 0;
      std::memcpy(&old, source, sizeof old);
      const std::uint64_t next = q.opcode == wire::opcode::mr_fetch_add ? old + q.swap_add
                                 : old == q.compare                     ? q.swap_add
                                                                        : old;
      std::memcpy(source, &next, sizeof next);
      ++counters_.atomics_executed;
      wire::store_be64(slot->value.data(), old);
      slot->in_use = true;
      r.local_addr = slot->value.data();
    }
    OwnerRing<SendMessage, MessageDeleter>::Owner message(new (block) SendMessage, MessageDeleter{&pools_->messages});
    message->reset(r);
    message->response = true;
    message->msg_seq = q.msg_seq;
    message->packets_total =
        r.length <= config_.mtu ? 1 : static_cast<std::uint32_t>((r.length + config_.mtu - 1) / config_.mtu);
    send_queue_.push_back(std::move(message));
    ++responses_active_;
  }
}

void MetaroceConnection::response_done(SendMessage& m) noexcept {
  m.finished = true;
  m.completed = true;  // nothing to deliver: complete_sends frees it in turn
  --responses_active_;
  if (is_atomic(m.request.op) && atomic_results_ != nullptr) {
    for (std::uint32_t i = 0; i < config_.max_outstanding_reads; ++i)
      if (atomic_results_[i].value.data() == m.request.local_addr) atomic_results_[i].in_use = false;
  }
  if (!queued_requests_.empty()) request_poll();
}

bool MetaroceConnection::on_response(const wire::ParsedFrame& frame, std::size_t bit) {
  const wire::MrDataHeader& d = frame.mr_data;
  const wire::MrWriteHeader& w = frame.mr_write;
  SendMessage* read = nullptr;
  for (SendMessage* m : reads_outstanding_) {
    if (m->msg_seq == d.msg_seq && m->request.stream == d.stream_id) {
      read = m;
      break;
    }
  }
  const bool atomic_answer = frame.bth.opcode == wire::opcode::mr_atomic_response;
  if (read == nullptr || atomic_answer != is_atomic(read->request.op)) {
    ++counters_.read_response_unexpected;
    return false;
  }
  const SendRequest& r = read->request;
  const std::uint64_t len = frame.payload.size();
  if (std::uint64_t{w.msg_offset} + len > r.length) {
    ++counters_.read_response_beyond_length;
    return false;
  }
  const auto local = reinterpret_cast<std::uintptr_t>(r.local_addr);
  if (w.msg_len != r.length || w.rkey != r.lkey || w.va - w.msg_offset != local) {
    ++counters_.read_response_mismatch;
    return false;
  }
  // Cut at the MTU as any message is (see on_data).
  if ((w.msg_offset != 0 && w.msg_offset % config_.mtu != 0) ||
      len != std::min<std::uint64_t>(config_.mtu, w.msg_len - w.msg_offset) ||
      ((d.flags & wire::mr_flag::last) != 0) != (w.msg_offset + len == w.msg_len)) {
    ++counters_.inconsistent_message;
    return false;
  }
  auto* destination = const_cast<std::uint8_t*>(r.local_addr) + w.msg_offset;  // registered for local write
  if (atomic_answer) {
    const std::uint64_t old = wire::load_be64(frame.payload.data());
    std::memcpy(destination, &old, sizeof old);
  } else if (len != 0) {
    std::memcpy(destination, frame.payload.data(), len);
  }
  read->read_placed += static_cast<std::uint32_t>(len);
  ++counters_.data_packets_received;
  counters_.data_bytes_placed += len;
  mark_placed(bit);
  if (read->read_placed == r.length) read_finished(*read);
  return true;
}

void MetaroceConnection::read_finished(SendMessage& m) {
  m.finished = true;
  const auto at = std::find(reads_outstanding_.begin(), reads_outstanding_.end(), &m);
  *at = reads_outstanding_.back();
  reads_outstanding_.pop_back();
  const std::uint16_t s = m.request.stream;
  if (!stream_listed_[s]) {
    stream_listed_[s] = true;
    streams_finished_.push_back(s);
  }
  complete_sends();
  if (segment_index_ < send_queue_.size()) request_poll();  // a request held at the limit may go
}

std::size_t MetaroceConnection::send_request_packet(Time now, std::uint64_t rel, std::uint16_t path_id,
                                                    TxBatch& out) {
  const TxPacket& pkt = packet(rel);
  const SendRequest& r = pkt.message->request;
  const std::uint8_t op = r.op == SendOp::read        ? wire::opcode::mr_read_request
                          : r.op == SendOp::fetch_add ? wire::opcode::mr_fetch_add
                                                      : wire::opcode::mr_compare_swap;
  TxPath& path = tx_paths_[path_id];
  wire::FrameSpec spec = frame_spec(config_, op, path.src_port, true, path.plane);
  spec.bth.psn = wire_psn(rel);
  spec.bth.ack_req = true;
  spec.mr_data.path_id = static_cast<std::uint8_t>(path_id);
  spec.mr_data.flags =
      static_cast<std::uint8_t>(wire::mr_flag::last | (pkt.transmissions > 0 ? wire::mr_flag::retransmit : 0));
  spec.mr_data.stream_id = r.stream;
  spec.mr_data.path_seq = path.next_seq;
  spec.mr_data.msg_seq = pkt.message->msg_seq;
  spec.mr_data.tsval = static_cast<std::uint32_t>(now / 1000);
  spec.mr_write = wire::MrWriteHeader{r.remote_addr, r.rkey, static_cast<std::uint32_t>(r.length), 0};
  spec.atomic_eth = wire::AtomicEth{r.remote_addr, r.rkey, r.swap_add, r.compare};
  spec.mr_read = wire::MrReadHeader{reinterpret_cast<std::uintptr_t>(r.local_addr), r.lkey};
  return commit_header_frame(spec, out, !secure());
}

}  // namespace metaroce::transport
