// The rocev2 connection: standard InfiniBand RC over RoCEv2, as a NIC does
// it, and the baseline every metaroce figure is compared against.
//
// Wire: the standard RC opcodes only (SEND and RDMA WRITE FIRST / MIDDLE /
// LAST / ONLY, the _WITH_IMMEDIATE forms on LAST / ONLY, ACKNOWLEDGE with an
// AETH); RETH on WRITE FIRST and ONLY only, carrying the whole message's DMA
// length; one UDP source port (config.base_src_port), so one ECMP path; data
// packets ECN ECT(0). Any RoCEv2 NIC, Wireshark and scapy read it.
//
// Requester (send side): messages go out in post order, PSNs consecutive
// from initial_psn (24-bit wrap), AckReq on each message's last packet, at
// most min(psn_window, congestion window) PSNs unacknowledged. ACKs are
// cumulative. Go-back-N: a NAK PSN-sequence-error for PSN p resends every
// packet from p; a retransmission timeout (no ACK progress for RTO) resends
// every packet from the oldest unacknowledged one. Timeouts back off
// exponentially, and the backed-off RTO holds until an RTT sample (a packet
// sent once, after the last timeout, acknowledged: Karn) says what the path
// takes: ACK progress alone does not undo it, so a peer slower than the RTO
// gets each window resent a few times, not once per ACK it sends. The
// (retry_limit + 1)-th timeout in a row without progress fails the
// connection with retry_exceeded (retry_limit retries, as ibv's retry_cnt). An RNR NAK pauses the requester for rnr_delay, then it
// resends from the NAKed PSN; a message RNR-NAKed more than rnr_retry_limit
// times fails with rnr_retry_exceeded. Other NAKs fail the connection with
// the matching status.
//
// Responder (receive side): strictly in order. The packet with the expected
// PSN e is validated (payload at most the MTU, opcode sequence, lengths,
// R_Key / bounds / rights of the RETH's whole range at a WRITE's first
// packet and of every WRITE packet's own bytes) and placed; a packet past
// e is dropped and answered by ONE NAK PSN-sequence-error per gap; a packet
// before e (a duplicate) is dropped and answered by an ACK at once. ACKs
// are coalesced: every ack_every_packets packets, on AckReq, or ack_delay
// after the first unacknowledged packet. A SEND (at its FIRST / ONLY packet) or a
// WRITE_WITH_IMMEDIATE (at its LAST / ONLY packet) that finds no posted
// receive is RNR NAKed and not placed.
//
// Streams: the API allows config.streams > 1, but RoCEv2 carries no stream
// id: every stream shares the connection's one ordered PSN sequence, so a
// loss on any stream stalls all of them (that head-of-line blocking is part
// of what the baseline measures). There is ONE receive queue: receives are
// consumed in global posting order whatever their stream, and a receive
// completion reports the stream of the receive it consumed. Completions are
// in post order over the whole connection, hence in order per stream.
//
// READ and atomics (roce_read.cpp), as IBTA RC has them: a READ REQUEST
// (RETH) takes one PSN per response packet; the READ RESPONSE FIRST /
// MIDDLE / LAST / ONLY packets (AETH on FIRST, LAST and ONLY) carry those
// PSNs, and each acknowledges every PSN before it. A FETCH_ADD or CMP_SWAP
// (AtomicETH) takes one PSN, answered by an ATOMIC ACKNOWLEDGE (AETH,
// AtomicAckETH with the old value). The requester takes answers in order
// only: a gap in a READ's responses, or an ACK past a READ whose responses
// are missing, re-issues the READ from the first missing PSN (go-back-N).
// The responder answers a duplicate READ request by reading again, and a
// duplicate atomic from its saved results (never executing it twice). At
// most max_outstanding_reads are outstanding: the requester holds back
// more, the responder NAKs (invalid request) a request beyond that.
//
// Not implemented: SEND_WITH_INVALIDATE (counted in unsupported_opcodes
// and dropped), credit-based flow control
// (ACKs say "credits invalid", syndrome 0x1F), congestion reaction to CNPs
// (counted in cnp_received; DCQCN comes with lib/cc).
#pragma once

#include <array>
#include <deque>
#include <memory>
#include <optional>

#include "transport/connection.hpp"
#include "wire/header_template.hpp"

namespace metaroce::transport {

class RoceConnection final : public Connection {
 public:
  RoceConnection(const ConnectionConfig& config, MemoryRegistry& memory, timer::Wheel& wheel,
                 std::unique_ptr<CongestionControl> congestion, HostPools* pools = nullptr);
  ~RoceConnection() override;

  void close() override;
  PostResult post_send(const SendRequest& request) override;
  PostResult post_receive(const ReceiveRequest& request) override;
  void on_checked_frame(Time now, const wire::ParsedFrame& frame) override;
  void poll_frames(Time now, TxBatch& out) override;
  [[nodiscard]] PathInfo path_info(std::uint16_t path) const noexcept override;
  [[nodiscard]] std::size_t memory_bytes() const noexcept override;
  [[nodiscard]] std::uint64_t packets_outstanding() const noexcept override {
    return snd_max_ - snd_una_;
  }

 private:
  struct SendMessage;

  void fail(CompletionStatus status, const SendMessage* culprit);
  void flush_all();

  // --- requester (roce_tx.cpp) ---
  void build_templates();
  // Returns the frame's size in bytes.
  std::size_t send_data_packet(Time now, std::uint64_t rel, TxBatch& out);
  std::size_t locate(std::uint64_t rel);
  void on_ack(Time now, const wire::ParsedFrame& frame);
  void acknowledge_through(Time now, std::uint64_t rel_end);
  void go_back(Time now, std::uint64_t rel);
  void complete_sends();
  [[nodiscard]] Time current_rto() const noexcept;
  void on_rto(Time now);
  void on_rnr_timer();
  static void rto_callback(timer::Timer& t, timer::Wheel& w, timer::Tick now);
  static void rnr_callback(timer::Timer& t, timer::Wheel& w, timer::Tick now);

  // --- READ and atomics (roce_read.cpp) ---
  struct Answer;
  struct AtomicResult {
    std::uint64_t rel = 0;  // the request's PSN (rel, receive side)
    std::uint64_t old = 0;
    bool valid = false;
  };
  // Requester: a READ RESPONSE or ATOMIC ACKNOWLEDGE.
  void on_answer(Time now, const wire::ParsedFrame& frame);
  // The first PSN from snd_una_ an ACK for `rel` may acknowledge: the
  // start of the oldest READ or atomic whose answer is not all here.
  [[nodiscard]] std::uint64_t acknowledgeable_through(std::uint64_t rel);
  std::size_t send_request_packet(Time now, std::uint64_t rel, const SendMessage& m, TxBatch& out);
  // Responder: a READ or atomic request at the expected PSN, or behind it.
  void on_request(Time now, const wire::ParsedFrame& frame);
  void on_duplicate_request(const wire::ParsedFrame& frame);
  bool queue_read_answer(std::uint64_t rel, const wire::Reth& reth, bool duplicate);
  void emit_answers(Time now, TxBatch& out);

  // --- responder (roce_rx.cpp) ---
  void on_data(Time now, const wire::ParsedFrame& frame);
  void responder_error(std::uint8_t nak_syndrome);
  void note_in_order_packet(Time now, bool ack_req);
  void queue_nak(std::uint8_t syndrome, std::uint32_t psn);
  void emit_acks(Time now, TxBatch& out);
  void emit_cnp(Time now, TxBatch& out);
  void emit_ack_frame(std::uint8_t syndrome, std::uint32_t psn, TxBatch& out);
  static void ack_callback(timer::Timer& t, timer::Wheel& w, timer::Tick now);

  [[nodiscard]] std::uint32_t wire_psn(std::uint64_t rel) const noexcept {
    return static_cast<std::uint32_t>((config_.initial_psn + rel) & wire::psn_mask);
  }
  [[nodiscard]] std::uint32_t expected_psn() const noexcept {
    return static_cast<std::uint32_t>((config_.peer_initial_psn + rcv_expected_) & wire::psn_mask);
  }


  // Requester. `rel` numbers count PSNs from initial_psn without wrapping;
  // every message's PSNs are assigned when it is posted.
  std::deque<std::unique_ptr<SendMessage>> send_queue_;  // post order, until completed
  std::size_t tx_cursor_ = 0;  // send_queue_ index of the message holding snd_next_ (a hint)
  std::uint64_t snd_una_ = 0;       // oldest PSN not acknowledged
  std::uint64_t snd_next_ = 0;      // next PSN to transmit (moves back on go-back-N)
  std::uint64_t snd_max_ = 0;       // one past the highest PSN ever transmitted
  std::uint64_t snd_assigned_ = 0;  // one past the last PSN of the posted messages
  // RC opcodes 0x00..0x14 (data, READ, ACK, atomics), indexed by opcode;
  // headers up to the BTH (and room for the extension headers) prebuilt,
  // stamped per packet.
  std::array<wire::HeaderTemplate, wire::opcode::fetch_add + 1> data_templates_;
  // The end PSN (rel) of each READ and atomic sent, oldest first, until
  // acknowledged: at most max_outstanding_reads.
  std::deque<std::uint64_t> request_ends_;
  wire::HeaderTemplate ack_template_;
  wire::HeaderTemplate cnp_template_;
  bool cnp_pending_ = false;  // a CE mark to report
  bool cnp_sent_ = false;
  Time last_cnp_ = 0;
  timer::Timer rto_timer_;
  timer::Timer rnr_timer_;
  std::uint32_t consecutive_timeouts_ = 0;  // since the last ACK progress: the retry count
  std::uint32_t backoff_ = 0;               // timeouts since the last RTT sample: the RTO's doublings
  bool retry_active_ = false;  // a go-back round from retry_rel_ is under way
  std::uint64_t retry_rel_ = 0;
  bool rnr_waiting_ = false;  // paused by an RNR NAK until rnr_timer_ fires
  std::uint64_t rnr_rel_ = 0;
  // RTT: one first transmission timed at a time (Karn: dropped on go-back).
  bool rtt_probe_active_ = false;
  std::uint64_t rtt_probe_rel_ = 0;
  Time rtt_probe_sent_ = 0;
  Time srtt_ = 0;
  Time rttvar_ = 0;
  bool has_rtt_ = false;
  PathInfo stats_;

  // Responder.
  std::uint64_t rcv_expected_ = 0;  // rel of the expected PSN e
  bool nak_sent_ = false;           // a NAK for the gap at e is out; cleared when e arrives
  std::deque<ReceiveRequest> posted_receives_;  // the one receive queue, in posting order
  // The message being received (RC: at most one at a time).
  bool rx_in_message_ = false;
  bool rx_is_send_ = false;
  std::uint64_t rx_va_ = 0;         // WRITE: where the next byte goes
  std::uint32_t rx_rkey_ = 0;
  std::uint64_t rx_remaining_ = 0;  // WRITE: bytes of the DMA length still to come
  std::uint64_t rx_length_ = 0;     // WRITE: the DMA length
  std::optional<ReceiveRequest> rx_receive_;  // SEND: the receive being filled
  std::uint64_t rx_placed_ = 0;
  std::uint32_t completed_msn_ = 0;  // messages completed, for the AETH MSN
  std::uint32_t unacked_packets_ = 0;
  bool ack_now_ = false;
  timer::Timer ack_timer_;
  struct PendingNak {
    std::uint8_t syndrome;
    std::uint32_t psn;
  };
  std::vector<PendingNak> pending_naks_;
  // Answers to the peer's READs and atomics, in PSN order, not yet sent.
  std::deque<Answer> answers_;
  std::uint32_t original_answers_ = 0;  // of answers_, those for requests new at the time (<= the limit)
  // The latest atomics' results, by request PSN (a ring of
  // max_outstanding_reads), for duplicates.
  std::vector<AtomicResult> atomic_results_;
  std::size_t atomic_next_ = 0;
};

}  // namespace metaroce::transport
