// The metaroce connection: reorder-free placement, packets sprayed over up
// to 64 paths, per-path sequences with 256-bit SACK, loss told from
// reordering by path, selective retransmission. doc/DESIGN.md, "Transport".
#pragma once

#include <deque>
#include <memory>

#include "transport/connection.hpp"
#include "transport/owner_ring.hpp"
#include "wire/header_template.hpp"

namespace metaroce::transport {

class MetaroceConnection final : public Connection {
 public:
  MetaroceConnection(const ConnectionConfig& config, MemoryRegistry& memory, timer::Wheel& wheel,
                     std::unique_ptr<CongestionControl> congestion, HostPools* pools = nullptr);
  ~MetaroceConnection() override;

  void close() override;
  PostResult post_send(const SendRequest& request) override;
  PostResult post_receive(const ReceiveRequest& request) override;
  void on_checked_frame(Time now, const wire::ParsedFrame& frame) override;
  void poll_frames(Time now, TxBatch& out) override;
  [[nodiscard]] PathInfo path_info(std::uint16_t path) const noexcept override;
  [[nodiscard]] PlaneInfo plane_info(std::uint16_t plane) const noexcept override;
  void set_plane_link(Time now, std::uint16_t plane, bool up) override;
  [[nodiscard]] std::uint64_t packets_outstanding() const noexcept override { return data_in_flight_; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept override;
  // Packets in flight (send side) or messages being received (per stream)
  // that one pool chunk tracks.
  static constexpr std::uint32_t chunk_entries = 128;

 private:
  struct SendMessage;
  struct TxPacket;
  struct TxPath;
  struct RxPath;
  struct RxMessage;
  struct RxStream;
  struct StreamSends;
  struct QueuedRequest;
  // Gives a SendMessage back to the pool it came from.
  struct MessageDeleter {
    BlockPool* pool = nullptr;
    void operator()(SendMessage* m) const noexcept;
  };

  void fail(CompletionStatus status, SendMessage* culprit);
  void flush_all();

  // --- storage taken as traffic needs it (doc/DESIGN.md, "Connection memory") ---
  [[nodiscard]] TxPacket& packet(std::uint64_t rel) noexcept;  // metaroce_internal.hpp
  // The chunk for a new packet `rel`; false (and waiting on the pool) when dry.
  bool take_tx_chunk(std::uint64_t rel) {
    return tx_chunks_[(rel / chunk_entries) & (tx_chunk_count_ - 1)] != nullptr || take_tx_chunk_slow(rel);
  }
  bool take_tx_chunk_slow(std::uint64_t rel);
  void give_tx_chunk(std::uint64_t rel) noexcept;
  void give_all_tx_chunks() noexcept;
  bool take_path_slots(TxPath& path);
  void give_path_slots(TxPath& path) noexcept;
  // The tracking entry of message `msg_seq` of `stream`, its chunk taken if
  // need be; nullptr when the pool is dry.
  RxMessage* rx_message(RxStream& stream, std::uint32_t msg_seq);
  void give_rx_chunks(RxStream& stream) noexcept;

  // --- send side (connection_tx.cpp) ---
  void build_templates(TxPath& path);
  // Returns the frame's size in bytes.
  std::size_t send_data_packet(Time now, std::uint64_t rel, std::uint16_t path, TxBatch& out);
  bool send_probe(Time now, std::uint16_t path, TxBatch& out);
  std::int32_t pick_path(bool for_retransmit);
  // pick_path for a new packet over several planes: the plane by weight
  // (its usable paths' windows), then its paths in turn.
  std::int32_t pick_path_by_plane();
  bool next_new_packet(std::uint64_t& rel);
  void on_ack(Time now, const wire::ParsedFrame& frame);
  void on_path_ack(Time now, const wire::MrPathAck& block);
  void resolve(Time now, std::uint16_t path, std::uint32_t seq, bool delivered);
  void mark_acked(std::uint64_t rel);
  void mark_lost(std::uint64_t rel);
  void advance_snd_una();
  void complete_sends();
  void arm_path_timers(Time now, TxPath& path);
  // --- planes (metaroce_tx.cpp) ---
  // May new data go on `path`: it is active and so is its plane.
  [[nodiscard]] bool usable(const TxPath& path) const noexcept;
  // Plane `plane` fails: spraying skips it, its unresolved packets are
  // resent on the others and its paths probe until one is acknowledged.
  void fail_plane(Time now, std::uint16_t plane);
  void route(TxBatch& out, std::uint16_t plane) const noexcept {
    out.set_route(static_cast<std::uint8_t>(plane), config_.plane[plane].port);
  }
  // The plane an ACK led by a path of plane `preferred` leaves on: that
  // one if it works, else the first that does.
  [[nodiscard]] std::uint16_t ack_plane(std::uint16_t preferred) const noexcept;
  // The path that leads the next ACK (its route: emit_acks): the paths in
  // turn from ack_path_cursor_, skipping those not usable (failed, or on a
  // failed plane); the cursor's own when none is.
  [[nodiscard]] std::uint16_t ack_lead() const noexcept;
  // Gives `path` a new UDP source port (another ECMP bucket) for its data
  // and the ACKs it leads.
  void move_path(TxPath& path);
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
  // The PSN at `bit` of the receive bitmap is placed: the bitmap and
  // rcv_base_ move on.
  void mark_placed(std::size_t bit) noexcept;
  // The peer's READ or atomic request (metaroce_read.cpp): checked,
  // queued; false when it was refused (NAKed) and the connection failed.
  bool on_request(const wire::ParsedFrame& frame);
  // Our READ's or atomic's answer: placed if it is one we asked for
  // (false: dropped, counted).
  bool on_response(const wire::ParsedFrame& frame, std::size_t bit);
  // Queued requests become answers in the send queue, while fewer than
  // max_outstanding_reads are in flight and the pool has room.
  void start_responses();
  // An answer of ours was acknowledged whole: its room goes to the next.
  void response_done(SendMessage& m) noexcept;
  void read_finished(SendMessage& m);
  std::size_t send_request_packet(Time now, std::uint64_t rel, std::uint16_t path, TxBatch& out);
  void emit_acks(Time now, TxBatch& out);
  static void ack_callback(timer::Timer& t, timer::Wheel& w, timer::Tick now);

  [[nodiscard]] std::uint32_t wire_psn(std::uint64_t rel) const noexcept {
    return static_cast<std::uint32_t>((config_.initial_psn + rel) & wire::psn_mask);
  }


  // Send side. `rel` numbers count PSNs from initial_psn without wrapping.
  // In post order, until completed. Messages come from the host's pool
  // (HostPools::messages), so posting allocates nothing once it has grown.
  OwnerRing<SendMessage, MessageDeleter> send_queue_;
  std::size_t segment_index_ = 0;  // first message of send_queue_ with packets to assign
  std::unique_ptr<StreamSends[]> stream_sends_;  // per stream, in post order
  std::unique_ptr<std::uint32_t[]> next_msg_seq_;
  std::unique_ptr<std::uint32_t[]> next_recv_seq_;
  // Streams with a message finished since complete_sends last ran, once each.
  std::vector<std::uint16_t> streams_finished_;
  std::unique_ptr<bool[]> stream_listed_;
  // Packets from snd_una_ to snd_next_, in chunks of chunk_entries taken
  // from the host's pool (packet()): chunk (rel / chunk_entries) %
  // tx_chunk_count_, which is twice the PSN window's worth, so the chunk a
  // new packet needs is never one that older packets still hold.
  std::unique_ptr<TxPacket*[]> tx_chunks_;
  std::uint32_t tx_chunk_count_ = 0;
  std::uint32_t probes_due_ = 0;  // paths with probe_due set
  std::uint64_t snd_una_ = 0;   // oldest rel not acknowledged
  std::uint64_t snd_next_ = 0;  // next rel to assign
  std::uint32_t data_in_flight_ = 0;  // data transmissions unresolved, all paths
  std::deque<std::uint64_t> retransmit_queue_;
  std::deque<std::uint64_t> rnr_queue_;
  std::unique_ptr<TxPath[]> tx_paths_;
  std::uint32_t rr_next_path_ = 0;
  std::uint32_t stalled_rounds_ = 0;  // RTOs of failed paths while none is active
  struct Plane {
    PlaneInfo stats;
    std::int64_t credit = 0;      // smooth weighted round robin over the planes (pick_path_by_plane)
    std::uint16_t next_path = 0;  // its own paths' round robin: the j-th is path plane + j x planes
  };
  std::array<Plane, max_planes> planes_{};
  timer::Timer rnr_timer_;
  Time rnr_wake_ = 0;

  // Receive side.
  std::unique_ptr<RxPath[]> rx_paths_;
  std::unique_ptr<std::uint64_t[]> rcv_bitmap_;  // psn_window bits (+ one word), ring
  std::uint64_t rcv_base_ = 0;            // rel of the first PSN not yet placed
  std::unique_ptr<RxStream[]> rx_streams_;
  std::uint32_t rx_chunk_count_ = 0;  // chunks per stream (RxStream)
  std::uint32_t completed_msn_ = 0;
  std::uint32_t unacked_packets_ = 0;
  bool ack_now_ = false;
  timer::Timer ack_timer_;
  struct PendingNak {
    std::uint8_t syndrome;
    std::uint32_t psn;
  };
  std::vector<PendingNak> pending_naks_;
  std::uint32_t ack_path_cursor_ = 0;  // the next ACK's lead (ack_lead) and first path block
  std::uint64_t hint_generation_ = ~std::uint64_t{0};  // receive share generation of our last hint
  bool rx_started_ = false;  // data or probes have arrived: we are someone's receiver

  // READs and atomics (metaroce_read.cpp). Ours whose request went out and
  // whose answer is not all placed (at most max_outstanding_reads):
  std::vector<SendMessage*> reads_outstanding_;
  // The peer's: accepted and not yet answered (oldest first; a vector, as
  // an idle connection's deque would hold a node), and answers in flight.
  std::vector<QueuedRequest> queued_requests_;
  std::uint32_t responses_active_ = 0;
  // Each atomic's old value (big-endian, as sent) stays here until its
  // answer is acknowledged: a retransmission sends the saved value, and the
  // request's PSN, already placed, is never executed again.
  struct AtomicResult {
    std::array<std::uint8_t, 8> value{};
    bool in_use = false;
  };
  std::unique_ptr<AtomicResult[]> atomic_results_;  // max_outstanding_reads, taken with the first atomic
};

}  // namespace metaroce::transport
