// Connection: construction, the application API, state and completions.
#include <algorithm>

#include "transport/connection_internal.hpp"

namespace metaroce::transport {

std::string_view to_string(PostResult r) noexcept {
  switch (r) {
    case PostResult::ok: return "ok";
    case PostResult::not_ready: return "not_ready";
    case PostResult::bad_stream: return "bad_stream";
    case PostResult::bad_lkey: return "bad_lkey";
    case PostResult::bad_rkey: return "bad_rkey";
    case PostResult::too_long: return "too_long";
  }
  return "invalid";
}

std::unique_ptr<Connection> Connection::create(const ConnectionConfig& config, MemoryRegistry& memory,
                                               timer::Wheel& wheel,
                                               std::unique_ptr<CongestionControl> congestion,
                                               std::string& error) {
  error = validate(config);
  if (error.empty() && config.mode != Mode::metaroce)
    error = "this Connection implements metaroce mode; rocev2 is RoceConnection";
  if (!error.empty()) return nullptr;
  if (!congestion) congestion = std::make_unique<FixedWindow>(config.path_window, config.psn_window);
  return std::unique_ptr<Connection>(new Connection(config, memory, wheel, std::move(congestion)));
}

Connection::Connection(const ConnectionConfig& config, MemoryRegistry& memory, timer::Wheel& wheel,
                       std::unique_ptr<CongestionControl> congestion)
    : config_(config),
      memory_(memory),
      wheel_(wheel),
      congestion_(std::move(congestion)),
      rnr_timer_(&Connection::rnr_callback, this),
      ack_timer_(&Connection::ack_callback, this) {
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
    path.rto_timer.set_callback(&Connection::rto_callback, &path);
    path.probe_timer.set_callback(&Connection::probe_callback, &path);
    path.stats.rto = config_.initial_rto;
    build_templates(path);
  }
  rcv_bitmap_.assign(config_.psn_window / 64 + 1, 0);
  rx_streams_.resize(config_.streams);
  for (RxStream& s : rx_streams_) s.ring.resize(config_.stream_window);
  transitions_[static_cast<std::size_t>(ConnectionState::init)] = 1;
}

Connection::~Connection() {
  for (std::uint16_t p = 0; p < config_.paths; ++p) {
    wheel_.cancel(tx_paths_[p].rto_timer);
    wheel_.cancel(tx_paths_[p].probe_timer);
  }
  wheel_.cancel(rnr_timer_);
  wheel_.cancel(ack_timer_);
}

void Connection::set_state(ConnectionState s) {
  if (s == state_) return;
  state_ = s;
  ++transitions_[static_cast<std::size_t>(s)];
}

void Connection::connect() {
  if (state_ == ConnectionState::init) set_state(ConnectionState::ready);
}

void Connection::close() {
  if (state_ == ConnectionState::closed) return;
  flush_all();
  set_state(ConnectionState::closed);
}

PostResult Connection::post_send(const SendRequest& request) {
  if (state_ != ConnectionState::ready) return PostResult::not_ready;
  if (request.stream >= config_.streams) return PostResult::bad_stream;
  if (request.length > 0xffff'ffffu) return PostResult::too_long;
  if (request.length > 0 &&
      memory_.check(request.lkey, reinterpret_cast<std::uintptr_t>(request.local_addr), request.length, 0) !=
          AccessCheck::ok)
    return PostResult::bad_lkey;
  if (is_write(request.op) && request.rkey == 0) return PostResult::bad_rkey;

  auto message = std::make_unique<SendMessage>();
  message->request = request;
  message->msg_seq = next_msg_seq_[request.stream]++;
  if (consumes_receive(request.op)) message->recv_seq = next_recv_seq_[request.stream]++;
  message->packets_total =
      request.length == 0 ? 1 : static_cast<std::uint32_t>((request.length + config_.mtu - 1) / config_.mtu);
  stream_sends_[request.stream].push_back(message.get());
  send_queue_.push_back(std::move(message));
  wants_poll_ = true;
  return PostResult::ok;
}

PostResult Connection::post_receive(const ReceiveRequest& request) {
  if (state_ != ConnectionState::ready && state_ != ConnectionState::init) return PostResult::not_ready;
  if (request.stream >= config_.streams) return PostResult::bad_stream;
  if (request.length > 0 &&
      memory_.check(request.lkey, reinterpret_cast<std::uintptr_t>(request.addr), request.length,
                    access_local_write) != AccessCheck::ok)
    return PostResult::bad_lkey;
  rx_streams_[request.stream].posted.push_back(request);
  // A WRITE_IMM that arrived before any receive was posted completes now.
  complete_receives(rx_streams_[request.stream], request.stream);
  return PostResult::ok;
}

std::size_t Connection::poll_completions(std::vector<Completion>& out) {
  const std::size_t n = completions_.size();
  out.insert(out.end(), completions_.begin(), completions_.end());
  completions_.clear();
  return n;
}

// The RC rule: a fatal error completes the culprit with its status, moves
// the connection to ERROR and flushes everything else outstanding.
void Connection::fail(CompletionStatus status, SendMessage* culprit) {
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

void Connection::flush_all() {
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
  wheel_.cancel(rnr_timer_);
  wants_poll_ = !pending_naks_.empty();
}

PathInfo Connection::path_info(std::uint16_t path) const noexcept {
  const TxPath& p = tx_paths_[path];
  PathInfo info = p.stats;
  info.state = p.state;
  info.src_port = p.src_port;
  info.in_flight = p.in_flight;
  info.next_seq = p.next_seq;
  info.srtt = p.srtt;
  return info;
}

bool Connection::idle() const noexcept {
  return send_queue_.empty() && retransmit_queue_.empty() && rnr_queue_.empty() &&
         snd_una_ == snd_next_ && !ack_now_ && unacked_packets_ == 0 && pending_naks_.empty();
}

}  // namespace metaroce::transport
