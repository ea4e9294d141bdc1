// Named counters of a connection: every drop has its own, and the name table
// lets telemetry, JSON summaries and tests refer to them by name.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace metaroce::transport {

// X(name, what it counts)
#define METAROCE_CONNECTION_COUNTERS(X)                                                        \
  X(data_packets_sent, "data packets sent, first transmissions")                              \
  X(data_bytes_sent, "payload bytes sent, first transmissions")                               \
  X(retransmitted_packets, "data packets sent again")                                         \
  X(packets_declared_lost, "data packets a SACK gap or a timeout declared lost")              \
  X(probes_sent, "MR_PROBE packets sent (tail-loss and failed-path probes)")                  \
  X(acks_sent, "ACK frames sent")                                                              \
  X(acks_received, "ACK frames received")                                                      \
  X(ack_routes_moved, "paths given a new source port because an ACK they led was lost (a probe asked again for what it reported)") \
  X(rto_timeouts, "path retransmission timeouts")                                             \
  X(paths_failed, "paths declared failed and given a new UDP source port")                   \
  X(paths_recovered, "failed paths whose probe was acknowledged")                            \
  X(planes_failed, "planes declared failed: their link went down or all their paths failed")  \
  X(planes_recovered, "failed planes back in use: a probe on one of their paths was acknowledged") \
  X(packets_moved_to_other_planes, "data packets in flight on a plane when it failed, resent on the others") \
  X(data_packets_received, "data packets accepted and placed")                               \
  X(data_bytes_placed, "payload bytes written to their destination")                         \
  X(duplicate_packets, "data packets dropped: their PSN was already placed")                 \
  X(spurious_retransmissions, "of those, new on their path: a retransmission that was not needed") \
  X(stale_packets, "of those, PSN already behind the receive window")                    \
  X(psn_beyond_window, "data packets dropped: PSN beyond the receive window")                \
  X(out_of_sequence_drops, "rocev2: data packets dropped: PSN past the expected one (a gap)") \
  X(path_seq_beyond_window, "data packets dropped: path sequence beyond the SACK window")    \
  X(path_id_out_of_range, "packets dropped: path id >= the connection's paths")              \
  X(stream_out_of_range, "packets dropped: stream id >= the connection's streams")           \
  X(payload_over_mtu, "data packets refused: more payload than the MTU (rocev2: NAKed)")    \
  X(message_beyond_window, "packets dropped: message sequence outside the stream window")   \
  X(inconsistent_message, "data packets refused: kind, length or sequence disagrees with the message (rocev2: NAKed)") \
  X(offset_out_of_range, "packets dropped: offset + length beyond the message length")      \
  X(remote_access_errors, "WRITEs refused: rkey, rights or bounds (NAKed)")                  \
  X(receive_too_small, "SENDs larger than the posted receive (NAKed)")                       \
  X(rnr_naks_sent, "SENDs with no posted receive (RNR NAKed)")                               \
  X(rnr_naks_received, "RNR NAKs received")                                                   \
  X(naks_received, "NAKs received (other than RNR)")                                          \
  X(ecn_ce_received, "data packets received with ECN CE")                                    \
  X(sack_unknown, "SACK bits or path blocks for packets never sent")                        \
  X(pkey_mismatch, "packets dropped: BTH P_Key is not the connection's (another incarnation)") \
  X(reserved_ack_syndromes, "ACKs dropped: their syndrome is of a reserved kind (not ACK, RNR NAK or NAK)") \
  X(packets_in_error_state, "packets dropped: the connection is not READY (ERROR, CLOSED, INIT)") \
  X(wrong_mode_packets, "packets with an opcode of the other mode")                          \
  X(unsupported_opcodes, "rocev2: packets dropped: an opcode not implemented (UC, UD)") \
  X(read_requests_served, "READ requests accepted from the peer (their answers sent as data)") \
  X(atomics_executed, "FETCH_ADD and CMP_SWAP requests executed on our memory, each once") \
  X(read_access_errors, "READ requests refused: rkey, rights or bounds (NAKed)")             \
  X(atomic_access_errors, "atomic requests refused: rkey, rights or bounds (NAKed)")         \
  X(atomic_unaligned, "atomic requests refused: address not 8-byte aligned (NAKed)")          \
  X(read_requests_queued, "READ and atomic requests held until an earlier answer was acknowledged") \
  X(read_requests_over_limit, "READ and atomic requests beyond max_outstanding_reads and its queue (NAKed)") \
  X(read_limit_waits, "polls where our next READ or atomic waited: max_outstanding_reads outstanding") \
  X(read_response_unexpected, "READ or atomic answers dropped: no such request of ours outstanding") \
  X(read_response_mismatch, "READ or atomic answers dropped: address, key or length not the request's") \
  X(read_response_beyond_length, "READ or atomic answers dropped: bytes past the requested length") \
  X(atomic_replays, "rocev2: duplicate atomic requests answered from the saved result, not executed again") \
  X(duplicate_reads_reexecuted, "rocev2: duplicate READ requests answered again from memory") \
  X(read_responses_out_of_sequence, "rocev2: READ answers dropped: PSN past the expected one (READ re-issued)") \
  X(cnp_received, "rocev2: CNPs received (handed to congestion control)")                  \
  X(cnps_sent, "rocev2: CNPs sent for CE-marked packets, at most one per cnp_interval")   \
  X(send_completions, "send and write completions delivered")                               \
  X(receive_completions, "receive completions delivered")                                   \
  X(posts_refused_queue_full, "post_send / post_receive refused: completion_queue_depth work requests unpolled") \
  X(tx_pool_waits, "sends held back: the host's pool had no chunk or path table for them (back-pressure, resumed when one is given back)") \
  X(post_pool_refusals, "post_send refused: the host's pool had no room for the work request (no_resources)") \
  X(secure_frames_sealed, "frames sent with a secure trailer (every frame of a secure connection)") \
  X(secure_frames_opened, "frames whose secure trailer checked: SPI, counter and tag") \
  X(secure_no_trailer, "frames dropped: the connection is secure and the frame carries no trailer") \
  X(secure_bad_spi, "frames dropped: their trailer names a key this connection does not hold") \
  X(secure_replayed, "frames dropped: their counter was seen before or is older than the replay window") \
  X(secure_bad_tag, "frames dropped: their tag does not match (forged, modified or another key's)") \
  X(secure_seal_failures, "frames not sent: sealing failed (the next key epoch could not be derived)") \
  X(secure_unknown_epoch, "frames dropped: their trailer names this connection's key in an epoch that is not the previous, current or next") \
  X(secure_epochs_sent, "key epochs the sender moved on to (SecurityConfig::rotate_after_frames frames per epoch)") \
  X(secure_epochs_received, "key epochs the receiver moved on to (the first good frame of the peer's next epoch)") \
  X(rx_pool_drops, "data packets left unplaced and unacknowledged: the host's pool had no chunk to track their message (the sender resends)")

struct ConnectionCounters {
#define METAROCE_DECLARE_COUNTER(name, what) std::uint64_t name = 0;
  METAROCE_CONNECTION_COUNTERS(METAROCE_DECLARE_COUNTER)
#undef METAROCE_DECLARE_COUNTER

  // Calls f(name, value) for each counter, in declaration order; the
  // non-const one hands f the counter itself (to set it by name).
  template <typename F>
  void for_each(F&& f) const {
#define METAROCE_VISIT_COUNTER(name, what) f(std::string_view(#name), name);
    METAROCE_CONNECTION_COUNTERS(METAROCE_VISIT_COUNTER)
#undef METAROCE_VISIT_COUNTER
  }
  template <typename F>
  void for_each(F&& f) {
#define METAROCE_VISIT_COUNTER(name, what) f(std::string_view(#name), name);
    METAROCE_CONNECTION_COUNTERS(METAROCE_VISIT_COUNTER)
#undef METAROCE_VISIT_COUNTER
  }
};

}  // namespace metaroce::transport
