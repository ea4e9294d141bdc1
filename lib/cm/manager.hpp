// The connection manager, sans-I/O: a REQ / REP / RTU handshake (and REJ)
// over cm/message.hpp frames, with retries, timeouts and a nonce per
// connection attempt.
//
//   client                               server
//   connect() -- REQ(nonce, QPN, PSN, geometry, private) -->  accept callback:
//                                          creates its connection (READY)
//             <-- REP(nonce, QPN, PSN, agreed geometry, private) --
//   Established event, creates its
//   connection, sends data at once
//             -- RTU(nonce) -->          Ready event (informational)
//
// The client repeats its REQ every retry_interval until a REP or REJ comes,
// at most `retries` times, then fails with an error that says what to check.
// The server answers every copy of a REQ with the same REP (a lost REP is
// re-sent because the REQ is); a lost RTU costs nothing (the client repeats
// its RTU for every duplicate REP). A REQ from the same peer address and
// QPN with a new nonce is a new incarnation (the peer restarted), but it
// replaces a live connection only with proof that it comes from that
// address: the server answers it with a REJ prove_address carrying a
// cookie (a MAC of the address, QPN and nonce under a key of the server's
// own), the client's manager sends the REQ again at once with the cookie,
// and only that REQ reports the old connection superseded. A spoofed REQ
// never sees the cookie, so it ends nothing. In metaroce mode both ends stamp pkey_of(nonce) on every frame
// of the connection, so frames of an older incarnation are dropped
// (pkey_mismatch). A rocev2 connection carries the port's partition
// (ManagerConfig::pkey, 0xffff by default) as a standard peer expects; an
// older incarnation's frames miss there because every connection's QPNs and
// first PSNs are drawn anew from getrandom(2) (unless a seed is given).
//
// The caller feeds frames addressed to QP 1 (on_frame) and sends what poll()
// returns; time is the caller's (ns). One manager per engine host; no locks.
//
// Thousands of connections at once: at most max_requests_in_flight REQs wait
// for an answer, the rest queue unsent (a server flooded with more than it
// answers in a retry interval would get every REQ again); retries and
// disconnect retries are kept in order of their deadlines, so poll() costs
// O(frames it sends), not O(connections), and every lookup is by key.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "cm/message.hpp"
#include "transport/config.hpp"
#include "transport/types.hpp"

namespace metaroce::cm {

using transport::Time;

#define METAROCE_CM_COUNTERS(X)                                                      \
  X(requests_sent, "REQs sent, retries included")                                    \
  X(request_retries, "REQs sent again for lack of an answer")                        \
  X(replies_sent, "REPs sent, repeats for duplicate REQs included")                  \
  X(ready_sent, "RTUs sent")                                                         \
  X(rejects_sent, "REJs sent")                                                       \
  X(requests_received, "REQs received")                                              \
  X(duplicate_requests, "REQs of a connection already answered (REP sent again)")    \
  X(replies_received, "REPs received")                                               \
  X(ready_received, "RTUs received")                                                 \
  X(rejects_received, "REJs received")                                               \
  X(stale_messages, "CM messages dropped: no attempt of ours has their nonce")       \
  X(malformed_messages, "frames to QP 1 dropped: not a metaroce CM message")         \
  X(established, "connections established (both roles)")                            \
  X(timed_out, "connection attempts that got no answer")                             \
  X(superseded, "server connections replaced by a new incarnation of their peer")    \
  X(disconnects_sent, "DREQs sent, retries included")                                \
  X(disconnect_replies_sent, "DREPs sent, repeats for duplicate DREQs included")     \
  X(disconnected, "connections closed by DREQ/DREP (both roles)")                   \
  X(unauthenticated_messages, "CM messages dropped or refused: this side runs secure and they carry no security extension") \
  X(bad_mac_messages, "CM messages dropped or refused: their HMAC does not check under our key (another key file, or forged)") \
  X(key_agreement_failures, "connections refused: the peer's X25519 key was unusable or OpenSSL failed") \
  X(address_challenges_sent, "REQs that would replace a live connection, answered with a cookie to echo (REJ prove_address)") \
  X(bad_cookies, "REQs that would replace a live connection dropped: the cookie they echo is not ours") \
  X(address_proofs_sent, "client: REQs sent again with the server's cookie, to replace our old connection there") \
  X(memory_refusals, "REQs refused: the connection would commit more memory than the server allows (REJ memory_limit)") \
  X(wrong_queue_refusals, "REQs refused: the client's QPN steers to another queue than this lane's (REJ wrong_queue)")

struct Counters {
#define METAROCE_CM_FIELD(name, what) std::uint64_t name = 0;
  METAROCE_CM_COUNTERS(METAROCE_CM_FIELD)
#undef METAROCE_CM_FIELD
};

// ManagerConfig::ibta_cm: the application's REQ private data after
// rdma_cm's 36-byte header in the IBTA REQ's 92 bytes.
inline constexpr std::size_t ibta_max_request_private = 56;

struct ManagerConfig {
  // This side: MAC, IP version and address, DSCP, VLAN (the peer_* fields
  // are ignored).
  transport::Endpoints local{};
  // Planes this side has (ports, one per plane) and, for each, its port
  // index and its own MAC and IP (the local_* fields; plane 0's addresses
  // are `local`'s). A connection gets the smaller of both sides' planes,
  // of what the client asks and of its paths.
  std::uint16_t planes = 1;
  std::array<transport::PlaneAddresses, transport::max_planes> local_planes{};
  std::uint16_t cm_src_port = 49151;  // UDP source port of CM frames
  Time retry_interval = 100'000'000;  // 100 ms between REQs
  std::uint32_t retries = 30;         // REQs before giving up (3 s)
  // Client: attempts whose REQ is out and unanswered; more wait to be sent
  // (their retries count from their first REQ).
  std::uint32_t max_requests_in_flight = 256;
  // Nonces, QPNs and PSNs: from getrandom(2) when 0 (the kernel's
  // cryptographic source: a peer cannot guess them); a fixed sequence from
  // this seed otherwise (tests).
  std::uint64_t seed = 0;
  // The P_Key of rocev2 connections, both ends (the partition of this
  // port): standard peers use the default partition 0xffff.
  std::uint16_t pkey = 0xffff;
  // The largest payload per packet this side's port carries: a client asks
  // for at most this, a server agrees to at most this.
  std::uint32_t max_mtu = 9000;
  // Server side: what it agrees to.
  std::uint16_t max_paths = 64;
  std::uint32_t max_outstanding_reads = 16;  // READs and atomics at once (the smaller of this and the client's)
  std::uint32_t max_connections = 1024;  // server connections alive at once
  // Queues of the port (engine::steering_queue): a server connection gets a
  // QPN of the same queue as its client's, so both ends live on that queue.
  std::uint16_t queues = 1;
  // A lane's manager (one per queue, metaroce::Endpoint::open_lanes): it
  // serves only clients whose QPN steers to its own queue `queue`, and
  // refuses others with REJ wrong_queue (the two ends run different lane
  // counts, or the port does not pair queues). Off: one manager serves
  // every queue (stack::NodeManager).
  bool own_queue_only = false;
  std::uint16_t queue = 0;
  // Security (doc/DESIGN.md, "Security"): every CM message carries an
  // HMAC under `psk` and a peer's message without a good one is refused;
  // every connection gets keys of its own from an X25519 exchange in the
  // REQ and REP (HKDF, salted with `psk`). Both ends must run secure with
  // the same key and protection.
  bool secure = false;
  secure::Psk psk{};
  secure::Protection protection = secure::Protection::encrypt;
  // Speak the IBTA CM (class 0x07 REQ/REP/RTU/REJ/DREQ/DREP, as rdma_cm
  // does; cm/ibta_cm.hpp) instead of metaroce's own messages: rocev2
  // connections only, at most 56 bytes of REQ private data, no security.
  // Both ends must speak the same.
  bool ibta_cm = false;
};

// What the client asks for.
struct ConnectRequest {
  transport::ConnectionConfig connection{};  // mode, mtu, paths, streams, windows, timers,
                                             // base_src_port and the peer's address and next-hop
                                             // MAC in endpoints; QPNs, PSNs and pkey are filled in
  std::string cc = "metaroce";
  std::vector<std::uint8_t> private_data;
  std::uint16_t queue = 0;  // the client's QPN is drawn with qpn % queues == queue
};

enum class EventKind : std::uint8_t {
  established,  // config is ready to create the connection (the client's; the server's was
                // created in the accept callback)
  ready,        // server: the client's RTU arrived
  failed,       // client: rejected or timed out; error says why and what to check
  superseded,   // server: local_qpn's peer came back with a new nonce; tear it down
  disconnected, // client: the server answered the DREQ (or did not: error says so);
                // server: the client's DREQ arrived (peer_private_data: its summary)
};

struct Event {
  EventKind kind = EventKind::established;
  std::uint64_t id = 0;  // connect()'s handle (client), or the server's local QPN
  transport::ConnectionConfig config{};
  std::string cc;
  std::vector<std::uint8_t> peer_private_data;
  std::string error;
};

// Server: called for each new REQ with the connection the server would
// create (everything filled in) and the request. Return none to accept
// (create the connection on the host now; fill reply_private_data) or a
// reason to refuse.
using AcceptFn = std::function<RejectReason(const transport::ConnectionConfig& config, const Message& request,
                                            std::vector<std::uint8_t>& reply_private_data)>;

// Keys for a connection whose two ends are set up by one program (both
// ends of --loopback), without a handshake: HKDF-SHA256 of `psk` for the
// pair of QPNs, `a` the keys of the end with QPN qpn_a. False when OpenSSL
// fails.
bool pair_keys(const secure::Psk& psk, secure::Protection protection, std::uint32_t qpn_a, std::uint32_t qpn_b,
               transport::SecurityConfig& a, transport::SecurityConfig& b);

class Manager {
 public:
  explicit Manager(const ManagerConfig& config);

  // Client: starts an attempt; its outcome arrives as an event with this id.
  // 0 and `error` when the request cannot be sent (bad config, CC name or
  // private data too long).
  std::uint64_t connect(Time now, const ConnectRequest& request, std::string& error);
  // Client: closes an established connection with a DREQ carrying
  // `private_data`, repeated until the server's DREP; a disconnected event
  // follows either way. False when `id` is not an established connection.
  bool disconnect(Time now, std::uint64_t id, std::vector<std::uint8_t> private_data, std::string& error);
  // Server: the private data its DREP will carry for `local_qpn`: set it
  // when the disconnected event arrives, before the next poll() (which
  // sends the DREP); default empty.
  void set_disconnect_reply(std::uint32_t local_qpn, std::vector<std::uint8_t> private_data);
  // Server: accept REQs from now on (without it, REQs are rejected).
  void listen(AcceptFn accept) { accept_ = std::move(accept); }
  // Server: forget a connection (closed by the application, or after its
  // DREQ): its QPN and its place under max_connections are free again.
  void forget(std::uint32_t local_qpn);

  // A frame addressed to QP 1 (parse_frame checked it).
  void on_frame(Time now, const wire::ParsedFrame& frame);
  // Frames to send now (REQ retries, answers); events to `events`.
  void poll(Time now, std::vector<std::vector<std::uint8_t>>& frames);
  void take_events(std::vector<Event>& out);

  [[nodiscard]] const Counters& counters() const noexcept { return counters_; }
  // Attempts still waiting for an answer (sent or queued).
  [[nodiscard]] std::size_t pending() const noexcept { return pending_; }

 private:
  struct Attempt {  // client
    Message request;
    transport::ConnectionConfig config;
    std::string cc;
    Time next_send = 0;
    std::uint32_t sent = 0;
    bool queued = true;   // not sent yet (waiting for room under max_requests_in_flight)
    bool done = false;
    bool failed = false;  // rejected or timed out: a late REP is stale
    // After disconnect(): the DREQ, repeated until the DREP.
    bool disconnecting = false;
    bool closed = false;
    Message dreq;
    std::uint32_t dreq_sent = 0;
    Time dreq_next = 0;
    secure::EphemeralKey ephemeral;  // secure: this attempt's X25519 key, until the REP
  };
  struct Accepted {  // server, by (peer address, peer QPN)
    std::uint32_t nonce = 0;
    std::uint32_t local_qpn = 0;
    std::vector<std::uint8_t> answer;  // the REP or REJ frame, sent again for duplicate REQs
    bool rejected = false;
    bool closed = false;                    // its DREQ arrived
    bool drep_due = false;                  // a DREP to send at the next poll
    transport::Endpoints peer{};            // where answers go
    std::vector<std::uint8_t> drep_private;  // what the DREP carries
  };
  using PeerKey = std::pair<std::string, std::uint32_t>;  // address bytes, peer QPN

  void on_request(Time now, const wire::ParsedFrame& frame, const Message& m);
  void on_reply(const wire::ParsedFrame& frame, const Message& m);
  void on_ready(const wire::ParsedFrame& frame, const Message& m);
  void on_reject(Time now, const Message& m);
  // The cookie for a REQ of `key` with `nonce`: never 0.
  [[nodiscard]] std::uint32_t cookie_for(const PeerKey& key, std::uint32_t nonce) const noexcept;
  void on_disconnect(const wire::ParsedFrame& frame, const Message& m);
  void on_disconnect_reply(const Message& m);
  PeerKey peer_key(const wire::ParsedFrame& frame, std::uint32_t peer_qpn) const;
  transport::Endpoints reply_endpoints(const wire::ParsedFrame& frame) const;
  // Our addresses on planes 1..planes-1 into `m`.
  void offer_planes(Message& m, std::uint16_t planes) const;
  // `c`'s planes: `planes`, our ports and addresses, the peer's from `m`.
  void take_planes(transport::ConnectionConfig& c, std::uint16_t planes, const Message& m) const;
  std::uint32_t new_qpn(std::uint16_t queue);
  // 64 random bits: getrandom(2), or the seeded sequence.
  std::uint64_t draw();
  // What a connection of `mode` with the attempt `nonce` stamps as P_Key.
  [[nodiscard]] std::uint16_t pkey_for(transport::Mode mode, std::uint32_t nonce) const noexcept;
  void send(const transport::Endpoints& endpoints, const Message& m);
  // ManagerConfig::ibta_cm (ibta_manager.cpp): `m` as an IBTA CM frame, and
  // an IBTA CM frame as the Message it stands for (false: not one, or
  // naming no connection of ours).
  std::vector<std::uint8_t> ibta_frame_of(const transport::Endpoints& endpoints, const Message& m) const;
  bool ibta_decode(const wire::ParsedFrame& frame, Message& out) const;
  // The frame of `m`, with the security extension when this side is secure.
  std::vector<std::uint8_t> frame_of(const transport::Endpoints& endpoints, const Message& m) const;
  // Security: the keys of the connection between client QPN `client_qpn`
  // and server QPN `server_qpn`, from `mine` and the peer's public key;
  // false when they cannot be agreed.
  bool derive_keys(const secure::EphemeralKey& mine, const secure::PublicKey& peer, bool client, std::uint32_t nonce,
                   std::uint32_t client_qpn, std::uint32_t server_qpn, transport::SecurityConfig& out) const;
  // A frame this side cannot trust: dropped, or a REQ answered with a REJ
  // (nothing remembered), or an attempt ended with `error`.
  void refuse_unauthenticated(const wire::ParsedFrame& frame, const Message& m, RejectReason reason);
  void fail_attempt(std::uint32_t nonce, const std::string& why);
  // An attempt is answered (REP, REJ) or given up: one fewer pending, and
  // one fewer in flight if its REQ was out.
  void settle(Attempt& a);
  void send_request(Time now, std::uint64_t id, Attempt& a);
  void time_out(std::uint64_t id, Attempt& a);

  ManagerConfig config_;
  std::mt19937_64 random_;  // with a seed only
  std::array<std::uint64_t, 32> drawn_{};  // getrandom(2) bytes not used yet
  std::size_t drawn_left_ = 0;
  std::array<std::uint8_t, 32> cookie_key_{};  // drawn at construction
  AcceptFn accept_;
  std::map<std::uint64_t, Attempt> attempts_;        // by id
  std::map<PeerKey, Accepted> accepted_;             // server
  std::map<std::uint32_t, std::uint64_t> nonce_to_id_;  // client attempts by nonce
  std::map<std::uint32_t, PeerKey> qpn_to_peer_;        // local QPNs in use (server: their peer)
  // Client: attempts not sent yet, oldest first; and (deadline, id) of each
  // REQ or DREQ to send, earliest first. An entry whose attempt has moved on
  // (answered, or its deadline changed) is skipped when its time comes.
  std::deque<std::uint64_t> unsent_;
  std::priority_queue<std::pair<Time, std::uint64_t>, std::vector<std::pair<Time, std::uint64_t>>, std::greater<>>
      retries_due_;
  std::size_t pending_ = 0;      // attempts with no answer yet
  std::size_t in_flight_ = 0;    // of those, with a REQ out
  std::vector<PeerKey> dreps_due_;  // server: DREPs to send at the next poll
  std::uint64_t next_id_ = 1;
  std::vector<std::vector<std::uint8_t>> out_;
  std::vector<Event> events_;
  Counters counters_;
};

}  // namespace metaroce::cm
