// RoceConnection: construction, the application API, errors and flushing.
#include <array>

#include "transport/roce_internal.hpp"

namespace metaroce::transport {

namespace roce {

std::uint8_t rnr_timer_code(Time delay) noexcept {
  // Delays of codes 1..31 in units of 10 us (code 0 is 655.36 ms).
  static constexpr std::array<std::uint32_t, 32> tens_of_us = {
      65536, 1,   2,   3,   4,    6,    8,    12,   16,   24,    32,    48,    64,    96,    128,   192,
      256,   384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  for (std::uint8_t code = 1; code < 32; ++code)
    if (Time{tens_of_us[code]} * 10'000 >= delay) return code;
  return 0;
}


}  // namespace roce

RoceConnection::RoceConnection(const ConnectionConfig& config, MemoryRegistry& memory, timer::Wheel& wheel,
                               std::unique_ptr<CongestionControl> congestion, HostPools* pools)
    : Connection(config, memory, wheel, std::move(congestion), pools),
      rto_timer_(&RoceConnection::rto_callback, this),
      rnr_timer_(&RoceConnection::rnr_callback, this),
      ack_timer_(&RoceConnection::ack_callback, this) {
  stats_.src_port = config_.base_src_port;
  stats_.rto = config_.initial_rto;
  build_templates();
}

RoceConnection::~RoceConnection() {
  wheel_.cancel(rto_timer_);
  wheel_.cancel(rnr_timer_);
  wheel_.cancel(ack_timer_);
}

void RoceConnection::close() {
  if (state_ == ConnectionState::closed) return;
  flush_all();
  pending_naks_.clear();
  wheel_.cancel(ack_timer_);
  set_state(ConnectionState::closed);
}

PostResult RoceConnection::post_send(const SendRequest& request) {
  if (const PostResult r = check_send(request); r != PostResult::ok) return r;

  auto message = std::make_unique<SendMessage>();
  message->request = request;
  message->first_rel = snd_assigned_;
  message->packets =
      request.length == 0 ? 1 : static_cast<std::uint32_t>((request.length + config_.mtu - 1) / config_.mtu);
  snd_assigned_ += message->packets;
  send_queue_.push_back(std::move(message));
  ++work_in_use_;
  request_poll();
  return PostResult::ok;
}

PostResult RoceConnection::post_receive(const ReceiveRequest& request) {
  if (const PostResult r = check_receive(request); r != PostResult::ok) return r;
  posted_receives_.push_back(request);
  ++work_in_use_;
  return PostResult::ok;
}

// The RC rule: a fatal error completes the culprit with its status, moves
// the connection to ERROR and flushes everything else outstanding. Messages
// acknowledged before the error have completed already (complete_sends runs
// first), so the culprit is the oldest message left and post order holds.
void RoceConnection::fail(CompletionStatus status, const SendMessage* culprit) {
  if (state_ == ConnectionState::error || state_ == ConnectionState::closed) return;
  for (const auto& m : send_queue_) {
    const SendRequest& r = m->request;
    add_completion(Completion{r.wr_id, m.get() == culprit ? status : CompletionStatus::flushed,
                              completion_kind(r.op), r.stream, r.length, false, 0});
    ++counters_.send_completions;
  }
  send_queue_.clear();
  flush_all();
  set_state(ConnectionState::error);
}

void RoceConnection::flush_all() {
  for (const auto& m : send_queue_) {
    const SendRequest& r = m->request;
    add_completion(Completion{r.wr_id, CompletionStatus::flushed,
                              completion_kind(r.op), r.stream, r.length, false, 0});
    ++counters_.send_completions;
  }
  send_queue_.clear();
  tx_cursor_ = 0;
  // The receive being filled is older than every posted one.
  if (rx_receive_) {
    add_completion(Completion{rx_receive_->wr_id, CompletionStatus::flushed, CompletionKind::receive,
                                      rx_receive_->stream, 0, false, 0});
    ++counters_.receive_completions;
    rx_receive_.reset();
  }
  for (const ReceiveRequest& r : posted_receives_) {
    add_completion(
        Completion{r.wr_id, CompletionStatus::flushed, CompletionKind::receive, r.stream, 0, false, 0});
    ++counters_.receive_completions;
  }
  posted_receives_.clear();
  rx_in_message_ = false;
  answers_.clear();
  original_answers_ = 0;
  request_ends_.clear();
  snd_una_ = snd_next_ = snd_max_ = snd_assigned_;
  rnr_waiting_ = false;
  retry_active_ = false;
  rtt_probe_active_ = false;
  wheel_.cancel(rto_timer_);
  wheel_.cancel(rnr_timer_);
  // NAKs already decided still go out (the peer must learn of the error).
  wants_poll_ = false;
  if (!pending_naks_.empty()) request_poll();
}

PathInfo RoceConnection::path_info(std::uint16_t) const noexcept {
  PathInfo info = stats_;
  info.state = PathState::active;
  info.src_port = config_.base_src_port;
  info.in_flight = static_cast<std::uint32_t>(snd_max_ - snd_una_);
  info.next_seq = wire_psn(snd_next_);
  info.srtt = srtt_;
  info.sent = counters_.data_packets_sent + counters_.retransmitted_packets;
  info.retransmitted = counters_.retransmitted_packets;
  info.declared_lost = counters_.packets_declared_lost;
  info.timeouts = counters_.rto_timeouts;
  return info;
}

// The deques' blocks are estimated (deque_bytes).
std::size_t RoceConnection::memory_bytes() const noexcept {
  return sizeof(*this) + congestion_->memory_bytes() + completions_.capacity() * sizeof(Completion) +
         pending_naks_.capacity() * sizeof(PendingNak) +
         deque_bytes(send_queue_.size(), sizeof(void*)) + send_queue_.size() * sizeof(SendMessage) +
         deque_bytes(posted_receives_.size(), sizeof(ReceiveRequest)) + deque_bytes(answers_.size(), sizeof(Answer)) +
         deque_bytes(request_ends_.size(), sizeof(std::uint64_t)) + atomic_results_.capacity() * sizeof(AtomicResult);
}

}  // namespace metaroce::transport
