// A metaroce connection: the reorder-free, multipath, selectively
// acknowledged transport of doc/DESIGN.md ("Transport"), sans-I/O.
//
// The owner (an engine lcore, the simulator, a test) drives it:
//   post_send / post_receive     from the application;
//   on_frame(now, parsed)        for each frame addressed to local_qpn;
//   poll(now, batch)             to collect what to transmit now;
//   the timing wheel it was given, advanced by the owner, for its timers;
//   poll_completions             for completions, in order per stream.
// Threading: everything runs on the owner's thread (the wheel's too).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "timer/wheel.hpp"
#include "transport/config.hpp"
#include "transport/congestion.hpp"
#include "transport/counters.hpp"
#include "transport/memory_region.hpp"
#include "transport/tx_batch.hpp"
#include "transport/types.hpp"
#include "wire/frame.hpp"
#include "wire/header_template.hpp"

namespace metaroce::transport {

enum class ConnectionState : std::uint8_t { init, ready, error, closed, count_ };

inline constexpr std::array<std::string_view, 4> connection_state_names = {"INIT", "READY", "ERROR",
                                                                            "CLOSED"};

[[nodiscard]] constexpr std::string_view to_string(ConnectionState s) noexcept {
  return connection_state_names[static_cast<std::size_t>(s)];
}

enum class PostResult : std::uint8_t {
  ok,
  not_ready,      // the connection is not READY
  bad_stream,     // stream >= config.streams
  bad_lkey,       // local bytes not inside a region registered for them
  bad_rkey,       // (WRITE) rkey 0 is never valid
  too_long,       // message longer than 4 GiB - 1 (the wire's message length field)
};

[[nodiscard]] std::string_view to_string(PostResult r) noexcept;

enum class PathState : std::uint8_t { active, failed };

// What telemetry and tests may read about one path.
struct PathInfo {
  PathState state = PathState::active;
  std::uint16_t src_port = 0;
  std::uint32_t in_flight = 0;
  std::uint32_t next_seq = 0;
  Time srtt = 0;
  Time rto = 0;
  std::uint64_t sent = 0;
  std::uint64_t retransmitted = 0;
  std::uint64_t declared_lost = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t ce_marks = 0;
  std::uint64_t entropy_changes = 0;
};

class Connection {
 public:
  // Returns nullptr and sets `error` when the config is not usable.
  static std::unique_ptr<Connection> create(const ConnectionConfig& config, MemoryRegistry& memory,
                                            timer::Wheel& wheel,
                                            std::unique_ptr<CongestionControl> congestion,
                                            std::string& error);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // INIT -> READY: the peer is known (in-band handshake: the engine's job).
  void connect();
  // Any state -> CLOSED: outstanding work completes as flushed.
  void close();

  PostResult post_send(const SendRequest& request);
  PostResult post_receive(const ReceiveRequest& request);

  void on_frame(Time now, const wire::ParsedFrame& frame);
  void poll(Time now, TxBatch& out);
  // True when poll() has something to send right now (it stopped at its
  // burst limit); the owner should call it again without waiting.
  [[nodiscard]] bool wants_poll() const noexcept { return wants_poll_; }

  // Moves completions into `out` (appended), oldest first.
  std::size_t poll_completions(std::vector<Completion>& out);

  [[nodiscard]] ConnectionState state() const noexcept { return state_; }
  [[nodiscard]] const ConnectionCounters& counters() const noexcept { return counters_; }
  [[nodiscard]] const ConnectionConfig& config() const noexcept { return config_; }
  [[nodiscard]] std::uint64_t state_transitions(ConnectionState to) const noexcept {
    return transitions_[static_cast<std::size_t>(to)];
  }
  [[nodiscard]] PathInfo path_info(std::uint16_t path) const noexcept;
  // Sent data packets not yet acknowledged (all paths).
  [[nodiscard]] std::uint64_t packets_outstanding() const noexcept { return snd_next_ - snd_una_; }
  [[nodiscard]] bool idle() const noexcept;

  // Packets poll() may emit per call before yielding (wants_poll()).
  static constexpr std::size_t burst_limit = 64;

 private:
  struct SendMessage;
  struct TxPacket;
  struct TxPath;
  struct RxPath;
  struct RxMessage;
  struct RxStream;

  Connection(const ConnectionConfig& config, MemoryRegistry& memory, timer::Wheel& wheel,
             std::unique_ptr<CongestionControl> congestion);

  void set_state(ConnectionState s);
  void fail(CompletionStatus status, SendMessage* culprit);
  void flush_all();

  // --- send side (connection_tx.cpp) ---
  void build_templates(TxPath& path);
  bool send_data_packet(Time now, std::uint64_t rel, TxBatch& out);
  bool send_probe(Time now, std::uint16_t path, TxBatch& out);
  std::int32_t pick_path(bool for_retransmit) noexcept;
  bool next_new_packet(std::uint64_t& rel);
  void on_ack(Time now, const wire::ParsedFrame& frame);
  void on_path_ack(Time now, const wire::MrPathAck& block);
  void resolve(Time now, std::uint16_t path, std::uint32_t seq, bool delivered);
  void mark_acked(std::uint64_t rel);
  void mark_lost(std::uint64_t rel);
  void advance_snd_una();
  void complete_sends();
  void arm_path_timers(Time now, TxPath& path);
  void on_rto(Time now, std::uint16_t path);
  void on_tail_probe(std::uint16_t path);
  void on_rnr_timer(Time now);
  static void rto_callback(timer::Timer& t, timer::Wheel& w, timer::Tick now);
  static void probe_callback(timer::Timer& t, timer::Wheel& w, timer::Tick now);
  static void rnr_callback(timer::Timer& t, timer::Wheel& w, timer::Tick now);

  // --- receive side (connection_rx.cpp) ---
  void on_data(Time now, const wire::ParsedFrame& frame);
  void on_probe(Time now, const wire::ParsedFrame& frame);
  bool accept_path_seq(RxPath& path, std::uint32_t seq);
  void note_path_arrival(Time now, std::uint16_t path_id, const wire::ParsedFrame& frame);
  void complete_receives(RxStream& stream, std::uint16_t stream_id);
  void send_nak(std::uint8_t syndrome, std::uint32_t psn);
  void emit_acks(Time now, TxBatch& out);
  static void ack_callback(timer::Timer& t, timer::Wheel& w, timer::Tick now);

  [[nodiscard]] std::uint32_t wire_psn(std::uint64_t rel) const noexcept {
    return static_cast<std::uint32_t>((config_.initial_psn + rel) & wire::psn_mask);
  }

  ConnectionConfig config_;
  MemoryRegistry& memory_;
  timer::Wheel& wheel_;
  std::unique_ptr<CongestionControl> congestion_;
  ConnectionState state_ = ConnectionState::init;
  std::array<std::uint64_t, static_cast<std::size_t>(ConnectionState::count_)> transitions_{};
  ConnectionCounters counters_;
  std::vector<Completion> completions_;
  bool wants_poll_ = false;

  // Send side. `rel` numbers count PSNs from initial_psn without wrapping.
  std::deque<std::unique_ptr<SendMessage>> send_queue_;  // in post order, until completed
  std::size_t segment_index_ = 0;  // first message of send_queue_ with packets to assign
  std::vector<std::deque<SendMessage*>> stream_sends_;  // per stream, in post order
  std::vector<std::uint32_t> next_msg_seq_;
  std::vector<std::uint32_t> next_recv_seq_;
  std::vector<TxPacket> tx_;  // ring indexed by rel & (psn_window - 1)
  std::uint64_t snd_una_ = 0;   // oldest rel not acknowledged
  std::uint64_t snd_next_ = 0;  // next rel to assign
  std::deque<std::uint64_t> retransmit_queue_;
  std::deque<std::uint64_t> rnr_queue_;
  std::unique_ptr<TxPath[]> tx_paths_;
  std::uint32_t rr_next_path_ = 0;
  std::uint32_t stalled_rounds_ = 0;  // RTOs of failed paths while none is active
  timer::Timer rnr_timer_;
  Time rnr_wake_ = 0;

  // Receive side.
  std::unique_ptr<RxPath[]> rx_paths_;
  std::vector<std::uint64_t> rcv_bitmap_;  // psn_window bits, ring
  std::uint64_t rcv_base_ = 0;            // rel of the first PSN not yet placed
  std::vector<RxStream> rx_streams_;
  std::uint32_t completed_msn_ = 0;
  std::uint32_t unacked_packets_ = 0;
  bool ack_now_ = false;
  timer::Timer ack_timer_;
  struct PendingNak {
    std::uint8_t syndrome;
    std::uint32_t psn;
  };
  std::vector<PendingNak> pending_naks_;
  std::uint32_t ack_path_cursor_ = 0;  // round-robin start for paths with news
};

}  // namespace metaroce::transport
