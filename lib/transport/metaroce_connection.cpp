// MetaroceConnection: construction, the application API, errors and flushing.
#include <algorithm>

#include "transport/metaroce_internal.hpp"

namespace metaroce::transport {

MetaroceConnection::MetaroceConnection(const ConnectionConfig& config, MemoryRegistry& memory,
                                       timer::Wheel& wheel, std::unique_ptr<CongestionControl> congestion)
    : Connection(config, memory, wheel, std::move(congestion)),
      rnr_timer_(&MetaroceConnection::rnr_callback, this),
      ack_timer_(&MetaroceConnection::ack_callback, this) {
  // Sizes doc/DESIGN.md ("Sizes") quotes; a change here changes them.
  static_assert(sizeof(TxPacket) == 32);
  static_assert(sizeof(RxMessage) == 32);
  stream_sends_.resize(config_.streams);
  next_msg_seq_.assign(config_.streams, 0);
  next_recv_seq_.assign(config_.streams, 0);
  tx_.resize(config_.psn_window);
  tx_paths_ = std::make_unique<TxPath[]>(config_.paths);
  rx_paths_ = std::make_unique<RxPath[]>(config_.paths);
  for (std::uint16_t p = 0; p < config_.paths; ++p) {
    TxPath& path = tx_paths_[p];
    path.owner = this;
    path.id = p;
    path.src_port = static_cast<std::uint16_t>(config_.base_src_port + p);
    path.seq_slot.fill(TxPath::no_packet);
    path.rto_timer.set_callback(&MetaroceConnection::rto_callback, &path);
    path.probe_timer.set_callback(&MetaroceConnection::probe_callback, &path);
    path.stats.rto = config_.initial_rto;
    build_templates(path);
  }
  rcv_bitmap_.assign(config_.psn_window / 64 + 1, 0);
  rx_streams_.resize(config_.streams);
  for (RxStream& s : rx_streams_) s.ring.resize(config_.stream_window);
}

MetaroceConnection::~MetaroceConnection() {
  for (std::uint16_t p = 0; p < config_.paths; ++p) {
    wheel_.cancel(tx_paths_[p].rto_timer);
    wheel_.cancel(tx_paths_[p].probe_timer);
  }
  wheel_.cancel(rnr_timer_);
  wheel_.cancel(ack_timer_);
}



void MetaroceConnection::close() {
  if (state_ == ConnectionState::closed) return;
  flush_all();
  set_state(ConnectionState::closed);
}

PostResult MetaroceConnection::post_send(const SendRequest& request) {
  if (const PostResult r = check_send(request); r != PostResult::ok) return r;

  std::unique_ptr<SendMessage> message;
  if (spare_messages_.empty()) {
    message = std::make_unique<SendMessage>();
  } else {
    message = std::move(spare_messages_.back());
    spare_messages_.pop_back();
  }
  message->reset(request);
  message->msg_seq = next_msg_seq_[request.stream]++;
  if (consumes_receive(request.op)) message->recv_seq = next_recv_seq_[request.stream]++;
  // One packet up to the MTU without a division (small messages are the
  // message-rate case).
  message->packets_total = request.length <= config_.mtu
                               ? 1
                               : static_cast<std::uint32_t>((request.length + config_.mtu - 1) / config_.mtu);
  stream_sends_[request.stream].push_back(message.get());
  send_queue_.push_back(std::move(message));
  ++work_in_use_;
  wants_poll_ = true;
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
      const CompletionStatus s = m == culprit ? status : (m->packets_acked == m->packets_total && m->packets_assigned == m->packets_total ? CompletionStatus::success : CompletionStatus::flushed);
      completions_.push_back(Completion{m->request.wr_id, s,
                                        is_write(m->request.op) ? CompletionKind::write : CompletionKind::send,
                                        m->request.stream, m->request.length, false, 0});
      ++counters_.send_completions;
      if (m == culprit) break;
    }
  }
  flush_all();
  set_state(ConnectionState::error);
}

void MetaroceConnection::flush_all() {
  for (std::uint16_t s = 0; s < config_.streams; ++s) {
    for (SendMessage* m : stream_sends_[s]) {
      completions_.push_back(Completion{m->request.wr_id, CompletionStatus::flushed,
                                        is_write(m->request.op) ? CompletionKind::write : CompletionKind::send,
                                        s, m->request.length, false, 0});
      ++counters_.send_completions;
    }
    stream_sends_[s].clear();
    for (const ReceiveRequest& r : rx_streams_[s].posted) {
      completions_.push_back(
          Completion{r.wr_id, CompletionStatus::flushed, CompletionKind::receive, s, 0, false, 0});
      ++counters_.receive_completions;
    }
    rx_streams_[s].posted.clear();
  }
  send_queue_.clear();
  segment_index_ = 0;
  for (TxPacket& p : tx_) p = TxPacket{};
  retransmit_queue_.clear();
  rnr_queue_.clear();
  for (std::uint16_t p = 0; p < config_.paths; ++p) {
    TxPath& path = tx_paths_[p];
    wheel_.cancel(path.rto_timer);
    wheel_.cancel(path.probe_timer);
    path.seq_slot.fill(TxPath::no_packet);
    path.una = path.next_seq;
    path.in_flight = 0;
    path.probes_in_flight = 0;
    path.probe_due = false;
  }
  snd_una_ = snd_next_;
  data_in_flight_ = 0;
  wheel_.cancel(rnr_timer_);
  wants_poll_ = !pending_naks_.empty();
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


}  // namespace metaroce::transport
