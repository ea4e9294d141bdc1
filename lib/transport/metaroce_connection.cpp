// MetaroceConnection: construction, the application API, errors and flushing.
#include <algorithm>
#include <memory>
#include <new>

#include "transport/metaroce_internal.hpp"

namespace metaroce::transport {

MetaroceConnection::MetaroceConnection(const ConnectionConfig& config, MemoryRegistry& memory,
                                       timer::Wheel& wheel, std::unique_ptr<CongestionControl> congestion,
                                       HostPools* pools)
    : Connection(config, memory, wheel, std::move(congestion), pools),
      send_queue_(MessageDeleter{&pools_->messages}),
      rnr_timer_(&MetaroceConnection::rnr_callback, this),
      ack_timer_(&MetaroceConnection::ack_callback, this) {
  // Sizes doc/DESIGN.md ("Connection memory") quotes; a change here changes them.
  static_assert(sizeof(TxPacket) == 32);
  static_assert(sizeof(RxMessage) == 32);
  static_assert(chunk_entries * sizeof(TxPacket) == HostPools::chunk_bytes);
  static_assert(chunk_entries * sizeof(RxMessage) == HostPools::chunk_bytes);
  static_assert(wire::sack_bits * sizeof(std::uint64_t) == HostPools::path_slot_bytes);
  stream_sends_ = std::make_unique<StreamSends[]>(config_.streams);
  next_msg_seq_ = std::make_unique<std::uint32_t[]>(config_.streams);
  next_recv_seq_ = std::make_unique<std::uint32_t[]>(config_.streams);
  stream_listed_ = std::make_unique<bool[]>(config_.streams);
  tx_chunk_count_ = std::max<std::uint32_t>(2, 2 * config_.psn_window / chunk_entries);
  tx_chunks_ = std::make_unique<TxPacket*[]>(tx_chunk_count_);
  tx_paths_ = std::make_unique<TxPath[]>(config_.paths);
  rx_paths_ = std::make_unique<RxPath[]>(config_.paths);
  for (std::uint16_t p = 0; p < config_.paths; ++p) {
    TxPath& path = tx_paths_[p];
    path.owner = this;
    path.id = p;
    path.plane = static_cast<std::uint16_t>(p % config_.planes);
    path.src_port = static_cast<std::uint16_t>(config_.base_src_port + p);
    path.rto_timer.set_callback(&MetaroceConnection::rto_callback, &path);
    path.probe_timer.set_callback(&MetaroceConnection::probe_callback, &path);
    path.stats.rto = config_.initial_rto;
    build_templates(path);
  }
  rcv_bitmap_ = std::make_unique<std::uint64_t[]>(config_.psn_window / 64 + 1);
  rx_chunk_count_ = std::max<std::uint32_t>(2, 2 * config_.stream_window / chunk_entries);
  rx_streams_ = std::make_unique<RxStream[]>(config_.streams);
  for (std::uint16_t s = 0; s < config_.streams; ++s)
    rx_streams_[s].chunks = std::make_unique<RxMessage*[]>(rx_chunk_count_);
}

MetaroceConnection::~MetaroceConnection() {
  for (std::uint16_t p = 0; p < config_.paths; ++p) {
    wheel_.cancel(tx_paths_[p].rto_timer);
    wheel_.cancel(tx_paths_[p].probe_timer);
    give_path_slots(tx_paths_[p]);
  }
  wheel_.cancel(rnr_timer_);
  wheel_.cancel(ack_timer_);
  give_all_tx_chunks();
  for (std::uint16_t s = 0; s < config_.streams; ++s) give_rx_chunks(rx_streams_[s]);
  send_queue_.clear();
}

// ---------------------------------------------------------------- storage

bool MetaroceConnection::take_tx_chunk_slow(std::uint64_t rel) {
  TxPacket*& chunk = tx_chunks_[(rel / chunk_entries) & (tx_chunk_count_ - 1)];
  chunk = static_cast<TxPacket*>(pools_->chunks.take());
  if (chunk != nullptr) return true;
  ++counters_.tx_pool_waits;
  pools_->chunks.wait(*this);
  return false;
}

void MetaroceConnection::give_tx_chunk(std::uint64_t rel) noexcept {
  TxPacket*& chunk = tx_chunks_[(rel / chunk_entries) & (tx_chunk_count_ - 1)];
  if (chunk == nullptr) return;
  pools_->chunks.give(chunk);
  chunk = nullptr;
}

void MetaroceConnection::give_all_tx_chunks() noexcept {
  for (std::uint32_t i = 0; i < tx_chunk_count_; ++i) {
    if (tx_chunks_[i] == nullptr) continue;
    pools_->chunks.give(tx_chunks_[i]);
    tx_chunks_[i] = nullptr;
  }
}

bool MetaroceConnection::take_path_slots(TxPath& path) {
  if (path.seq_slot != nullptr) return true;
  path.seq_slot = static_cast<std::uint64_t*>(pools_->path_slots.take());
  if (path.seq_slot == nullptr) {
    ++counters_.tx_pool_waits;
    pools_->path_slots.wait(*this);
    return false;
  }
  path.seq_slot[0] = TxPath::no_packet;  // the rest is still "no packet" (HostPools::path_slots)
  return true;
}

void MetaroceConnection::give_path_slots(TxPath& path) noexcept {
  if (path.seq_slot == nullptr) return;
  // The pool takes back only tables that say "no packet" throughout: one
  // given back with sequences unresolved (flushed, destroyed) is cleared.
  if (path.una != path.next_seq) std::fill_n(path.seq_slot, wire::sack_bits, TxPath::no_packet);
  pools_->path_slots.give(path.seq_slot);
  path.seq_slot = nullptr;
}

MetaroceConnection::RxMessage* MetaroceConnection::rx_message(RxStream& stream, std::uint32_t msg_seq) {
  RxMessage*& chunk = stream.chunks[(msg_seq / chunk_entries) & (rx_chunk_count_ - 1)];
  if (chunk == nullptr) {
    chunk = static_cast<RxMessage*>(pools_->rx_chunks.take());
    if (chunk == nullptr) {
      ++counters_.rx_pool_drops;
      pools_->rx_chunks.wait(*this);
      return nullptr;
    }
    // Every entry is inactive (HostPools::rx_chunks) but the first, whose
    // bytes the free list used.
    chunk[0] = RxMessage{};
    ++stream.chunks_held;
  }
  return &chunk[msg_seq % chunk_entries];
}

void MetaroceConnection::give_rx_chunks(RxStream& stream) noexcept {
  if (stream.chunks_held == 0) return;
  // Usually the one chunk left is next_complete's.
  RxMessage*& current = stream.chunks[(stream.next_complete / chunk_entries) & (rx_chunk_count_ - 1)];
  if (stream.chunks_held == 1 && current != nullptr && stream.active == 0) {
    pools_->rx_chunks.give(current);
    current = nullptr;
    stream.chunks_held = 0;
    return;
  }
  stream.chunks_held = 0;
  for (std::uint32_t i = 0; i < rx_chunk_count_; ++i) {
    if (stream.chunks[i] == nullptr) continue;
    // The pool takes back only chunks of inactive entries: messages still
    // being received (a connection destroyed mid-transfer) are cleared.
    if (stream.active != 0) std::fill_n(stream.chunks[i], chunk_entries, RxMessage{});
    pools_->rx_chunks.give(stream.chunks[i]);
    stream.chunks[i] = nullptr;
  }
}

std::size_t MetaroceConnection::memory_bytes() const noexcept {
  std::size_t bytes = sizeof(*this) + congestion_->memory_bytes();
  bytes += config_.streams * (sizeof(StreamSends) + 2 * sizeof(std::uint32_t) + sizeof(bool) + sizeof(RxStream) +
                              rx_chunk_count_ * sizeof(RxMessage*));
  bytes += tx_chunk_count_ * sizeof(TxPacket*) + (config_.psn_window / 64 + 1) * sizeof(std::uint64_t);
  bytes += config_.paths * (sizeof(TxPath) + sizeof(RxPath));
  bytes += streams_finished_.capacity() * sizeof(std::uint16_t) + send_queue_.capacity() * sizeof(void*) +
           completions_.capacity() * sizeof(Completion) + pending_naks_.capacity() * sizeof(PendingNak);
  bytes += deque_bytes(retransmit_queue_.size(), sizeof(std::uint64_t)) +
           deque_bytes(rnr_queue_.size(), sizeof(std::uint64_t));
  for (std::uint16_t s = 0; s < config_.streams; ++s) {
    const RxStream& stream = rx_streams_[s];
    bytes += deque_bytes(stream.posted.size(), sizeof(ReceiveRequest));
    for (std::uint32_t i = 0; i < rx_chunk_count_; ++i) bytes += stream.chunks[i] != nullptr ? HostPools::chunk_bytes : 0;
  }
  for (std::uint32_t i = 0; i < tx_chunk_count_; ++i) bytes += tx_chunks_[i] != nullptr ? HostPools::chunk_bytes : 0;
  for (std::uint16_t p = 0; p < config_.paths; ++p)
    bytes += tx_paths_[p].seq_slot != nullptr ? HostPools::path_slot_bytes : 0;
  bytes += send_queue_.size() * HostPools::message_bytes;
  bytes += reads_outstanding_.capacity() * sizeof(SendMessage*) + queued_requests_.capacity() * sizeof(QueuedRequest) +
           (atomic_results_ != nullptr ? config_.max_outstanding_reads * sizeof(AtomicResult) : 0);
  return bytes;
}

void MetaroceConnection::close() {
  if (state_ == ConnectionState::closed) return;
  flush_all();
  set_state(ConnectionState::closed);
}

PostResult MetaroceConnection::post_send(const SendRequest& request) {
  if (const PostResult r = check_send(request); r != PostResult::ok) return r;

  void* block = pools_->messages.take();
  if (block == nullptr) {
    ++counters_.post_pool_refusals;
    return PostResult::no_resources;
  }
  OwnerRing<SendMessage, MessageDeleter>::Owner message(new (block) SendMessage, MessageDeleter{&pools_->messages});
  message->reset(request);
  message->msg_seq = next_msg_seq_[request.stream]++;
  if (consumes_receive(request.op)) message->recv_seq = next_recv_seq_[request.stream]++;
  // One packet up to the MTU without a division (small messages are the
  // message-rate case); a READ or atomic is one request packet.
  message->packets_total = request.length <= config_.mtu || is_request(request.op)
                               ? 1
                               : static_cast<std::uint32_t>((request.length + config_.mtu - 1) / config_.mtu);
  stream_sends_[request.stream].push_back(message.get());
  send_queue_.push_back(std::move(message));  // (room for it: see OwnerRing)
  ++work_in_use_;
  request_poll();
  return PostResult::ok;
}

PostResult MetaroceConnection::post_receive(const ReceiveRequest& request) {
  if (const PostResult r = check_receive(request); r != PostResult::ok) return r;
  rx_streams_[request.stream].posted.push_back(request);
  ++work_in_use_;
  // A WRITE_IMM that arrived before any receive was posted completes now.
  complete_receives(rx_streams_[request.stream], request.stream);
  return PostResult::ok;
}


// The RC rule: a fatal error completes the culprit with its status, moves
// the connection to ERROR and flushes everything else outstanding.
void MetaroceConnection::fail(CompletionStatus status, SendMessage* culprit) {
  if (state_ == ConnectionState::error || state_ == ConnectionState::closed) return;
  if (culprit != nullptr) {
    culprit->status = status;
    culprit->finished = true;
    // Completions stay in order per stream: everything before the culprit
    // in its stream completes (acknowledged or flushed) first.
    auto& queue = stream_sends_[culprit->request.stream];
    while (!queue.empty()) {
      SendMessage* m = queue.front();
      queue.pop_front();
      // (A READ or atomic is done when its answer is placed, not when its
      // request is acknowledged.)
      const bool done = is_request(m->request.op)
                            ? m->finished
                            : m->packets_acked == m->packets_total && m->packets_assigned == m->packets_total;
      const CompletionStatus s = m == culprit ? status : (done ? CompletionStatus::success : CompletionStatus::flushed);
      add_completion(Completion{m->request.wr_id, s, completion_kind(m->request.op), m->request.stream,
                                m->request.length, false, 0});
      ++counters_.send_completions;
      if (m == culprit) break;
    }
  }
  flush_all();
  set_state(ConnectionState::error);
}

void MetaroceConnection::flush_all() {
  for (std::uint16_t s = 0; s < config_.streams; ++s) {
    for (SendMessage* m = stream_sends_[s].front(); m != nullptr; m = m->stream_next) {
      add_completion(Completion{m->request.wr_id, CompletionStatus::flushed, completion_kind(m->request.op), s,
                                m->request.length, false, 0});
      ++counters_.send_completions;
    }
    stream_sends_[s].clear();
    for (const ReceiveRequest& r : rx_streams_[s].posted) {
      add_completion(
          Completion{r.wr_id, CompletionStatus::flushed, CompletionKind::receive, s, 0, false, 0});
      ++counters_.receive_completions;
    }
    rx_streams_[s].posted.clear();
  }
  send_queue_.clear();
  send_queue_.release();
  segment_index_ = 0;
  give_all_tx_chunks();
  streams_finished_.clear();
  for (std::uint16_t s = 0; s < config_.streams; ++s) stream_listed_[s] = false;
  retransmit_queue_.clear();
  rnr_queue_.clear();
  reads_outstanding_.clear();
  queued_requests_.clear();
  responses_active_ = 0;
  atomic_results_.reset();
  for (std::uint16_t p = 0; p < config_.paths; ++p) {
    TxPath& path = tx_paths_[p];
    wheel_.cancel(path.rto_timer);
    wheel_.cancel(path.probe_timer);
    give_path_slots(path);
    path.una = path.next_seq;
    path.in_flight = 0;
    path.probes_in_flight = 0;
    path.probe_due = false;
  }
  probes_due_ = 0;
  snd_una_ = snd_next_;
  data_in_flight_ = 0;
  wheel_.cancel(rnr_timer_);
  wants_poll_ = false;
  if (!pending_naks_.empty()) request_poll();
}

PathInfo MetaroceConnection::path_info(std::uint16_t path) const noexcept {
  const TxPath& p = tx_paths_[path];
  PathInfo info = p.stats;
  info.state = p.state;
  info.src_port = p.src_port;
  info.in_flight = p.in_flight;
  info.next_seq = p.next_seq;
  info.srtt = p.srtt;
  return info;
}

PlaneInfo MetaroceConnection::plane_info(std::uint16_t plane) const noexcept {
  PlaneInfo info = planes_[plane].stats;
  info.port = config_.plane[plane].port;
  return info;
}


}  // namespace metaroce::transport
