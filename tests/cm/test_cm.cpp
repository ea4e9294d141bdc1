// The connection manager in virtual time: two managers exchange their frames
// (serialized, parsed with the ICRC checked) through a hand-driven wire that
// can lose, repeat or hold back any of them.
#include <gtest/gtest.h>

#include <deque>
#include <tuple>

#include "cm/manager.hpp"
#include "wire/ip_address.hpp"
#include "wire/opcode.hpp"

namespace metaroce::cm {
namespace {

constexpr wire::MacAddress client_mac{0x02, 0, 0, 0, 0, 0x01};
constexpr wire::MacAddress server_mac{0x02, 0, 0, 0, 0, 0x02};
constexpr std::uint32_t client_ip = 0x0a000001;
constexpr std::uint32_t server_ip = 0x0a000102;
constexpr Time ms = 1'000'000;

ManagerConfig side(wire::MacAddress mac, std::uint32_t ip, std::uint64_t seed) {
  ManagerConfig c;
  c.local.local_mac = mac;
  c.local.local_ipv4 = ip;
  c.seed = seed;
  c.retries = 5;
  c.retry_interval = 100 * ms;
  return c;
}

ConnectRequest request(std::vector<std::uint8_t> private_data = {1, 2, 3, 4}) {
  ConnectRequest r;
  r.connection.mode = transport::Mode::metaroce;
  r.connection.mtu = 4096;
  r.connection.paths = 8;
  r.connection.streams = 2;
  r.connection.endpoints.peer_ipv4 = server_ip;
  r.connection.endpoints.peer_mac = server_mac;
  r.cc = "metaroce";
  r.private_data = std::move(private_data);
  return r;
}

struct Wire {
  explicit Wire(const ManagerConfig& server_config = side(server_mac, server_ip, 22),
                const ManagerConfig& client_config = side(client_mac, client_ip, 11))
      : client(client_config), server(server_config) {}
  Manager client;
  Manager server;
  std::vector<transport::ConnectionConfig> accepted;  // what the accept callback created
  std::vector<Message> requests_seen;
  std::vector<Event> client_events, server_events;
  std::vector<std::vector<std::uint8_t>> to_server, to_client;  // last poll's frames

  void listen(RejectReason answer = RejectReason::none) {
    server.listen([this, answer](const transport::ConnectionConfig& c, const Message& m,
                                 std::vector<std::uint8_t>& reply_private) {
      requests_seen.push_back(m);
      if (answer != RejectReason::none) return answer;
      accepted.push_back(c);
      reply_private = {9, 8, 7};
      return RejectReason::none;
    });
  }
  // Both sides send what they have; every frame must parse cleanly.
  void poll(Time now) {
    to_server.clear();
    to_client.clear();
    client.poll(now, to_server);
    server.poll(now, to_client);
  }
  static void deliver(Manager& m, Time now, const std::vector<std::uint8_t>& frame) {
    wire::ParsedFrame p;
    ASSERT_EQ(wire::parse_frame(frame, p), wire::ParseError::ok);
    m.on_frame(now, p);
  }
  // Delivers everything both ways until nothing moves.
  void settle(Time now) {
    for (int i = 0; i < 10; ++i) {
      poll(now);
      if (to_server.empty() && to_client.empty()) break;
      for (const auto& f : to_server) deliver(server, now, f);
      for (const auto& f : to_client) deliver(client, now, f);
    }
    client.take_events(client_events);
    server.take_events(server_events);
  }
};

Message decoded(const std::vector<std::uint8_t>& frame) {
  Message m;
  wire::ParsedFrame p;
  if (wire::parse_frame(frame, p) != wire::ParseError::ok || decode(p, m) != DecodeError::ok) ADD_FAILURE();
  return m;
}

// The REQ in `frame` as if sent by QP `qpn` of the client's address.
std::vector<std::uint8_t> with_sender_qpn(const std::vector<std::uint8_t>& frame, std::uint32_t qpn) {
  Message m = decoded(frame);
  m.sender_qpn = qpn;
  transport::Endpoints e;
  e.local_mac = client_mac;
  e.local_ipv4 = client_ip;
  e.peer_ipv4 = server_ip;
  e.peer_mac = server_mac;
  return build_frame(e, 49151, m);
}

TEST(Cm, RequestReplyReadyEstablishesMatchingEnds) {
  Wire w;
  w.listen();
  std::string error;
  const std::uint64_t id = w.client.connect(0, request(), error);
  ASSERT_NE(id, 0u) << error;
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 1u);
  const Event& e = w.client_events[0];
  EXPECT_EQ(e.kind, EventKind::established);
  EXPECT_EQ(e.id, id);
  ASSERT_EQ(w.accepted.size(), 1u);
  const transport::ConnectionConfig& c = e.config;
  const transport::ConnectionConfig& s = w.accepted[0];
  // Each end's local side is the other's peer side.
  EXPECT_EQ(c.local_qpn, s.peer_qpn);
  EXPECT_EQ(c.peer_qpn, s.local_qpn);
  EXPECT_EQ(c.initial_psn, s.peer_initial_psn);
  EXPECT_EQ(c.peer_initial_psn, s.initial_psn);
  EXPECT_EQ(c.pkey, s.pkey);
  EXPECT_EQ(c.pkey & 0x8000, 0x8000);
  EXPECT_EQ(c.mtu, 4096u);
  EXPECT_EQ(s.mtu, 4096u);
  EXPECT_EQ(c.paths, 8);
  EXPECT_EQ(s.paths, 8);
  EXPECT_EQ(s.streams, 2);
  EXPECT_EQ(c.endpoints.local_ipv4, client_ip);
  EXPECT_EQ(c.endpoints.peer_ipv4, server_ip);
  EXPECT_EQ(s.endpoints.local_ipv4, server_ip);
  EXPECT_EQ(s.endpoints.peer_ipv4, client_ip);
  EXPECT_EQ(s.endpoints.peer_mac, client_mac);  // the REQ's source MAC: the next hop back
  EXPECT_EQ(c.endpoints.peer_mac, server_mac);
  EXPECT_GT(c.local_qpn, 1u);
  EXPECT_GT(s.local_qpn, 1u);
  EXPECT_EQ(transport::validate(c), "");
  EXPECT_EQ(transport::validate(s), "");
  EXPECT_EQ(e.cc, "metaroce");
  EXPECT_EQ(e.peer_private_data, (std::vector<std::uint8_t>{9, 8, 7}));
  ASSERT_EQ(w.requests_seen.size(), 1u);
  EXPECT_EQ(w.requests_seen[0].private_data, (std::vector<std::uint8_t>{1, 2, 3, 4}));
  // The server learns of the RTU.
  ASSERT_EQ(w.server_events.size(), 1u);
  EXPECT_EQ(w.server_events[0].kind, EventKind::ready);
  EXPECT_EQ(w.server_events[0].id, s.local_qpn);
  EXPECT_EQ(w.client.counters().requests_sent, 1u);
  EXPECT_EQ(w.client.counters().ready_sent, 1u);
  EXPECT_EQ(w.server.counters().replies_sent, 1u);
  EXPECT_EQ(w.server.counters().ready_received, 1u);
  EXPECT_EQ(w.client.pending(), 0u);
}

TEST(Cm, FramesAreUdSendsToQp1CarryingOneMad) {
  Wire w;
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u);
  w.poll(0);
  ASSERT_EQ(w.to_server.size(), 1u);
  wire::ParsedFrame p;
  ASSERT_EQ(wire::parse_frame(w.to_server[0], p), wire::ParseError::ok);
  EXPECT_EQ(p.bth.opcode, 0x64);  // UD SEND ONLY
  EXPECT_EQ(p.bth.dest_qp, gsi_qpn);
  EXPECT_EQ(p.deth.qkey, gsi_qkey);
  EXPECT_EQ(p.deth.src_qp, gsi_qpn);
  EXPECT_EQ(p.payload.size(), mad_size);
  EXPECT_EQ(p.payload[0], mad_base_version);
  EXPECT_EQ(p.payload[1], mad_class_metaroce_cm);
  EXPECT_EQ(p.payload[3], mad_method_send);
  EXPECT_EQ(p.ipv4().dst, server_ip);
  EXPECT_EQ(p.ethernet().dst, server_mac);
  EXPECT_EQ(p.udp().dst_port, wire::roce_udp_port);
  Message m;
  ASSERT_EQ(decode(p, m), DecodeError::ok);
  EXPECT_EQ(m.type, MessageType::request);
  EXPECT_EQ(m.mtu, 4096u);
  EXPECT_EQ(m.paths, 8);
  EXPECT_EQ(m.cc, "metaroce");
}

TEST(Cm, EncodeDecodeRoundTripsEveryField) {
  Message m;
  m.type = MessageType::reject;
  m.mode = transport::Mode::rocev2;
  m.reason = RejectReason::bad_parameters;
  m.nonce = 0xdeadbeef;
  m.sender_qpn = 0xabcdef;
  m.sender_psn = 0x123456;
  m.receiver_qpn = 0x654321;
  m.mtu = 1024;
  m.paths = 1;
  m.streams = 1024;
  m.base_src_port = 50000;
  m.max_reads = 32;
  m.cc = "dcqcn";
  m.private_data.assign(max_private_data, 0x5a);
  transport::Endpoints e;
  e.peer_ipv4 = server_ip;
  wire::ParsedFrame p;
  const auto frame = build_frame(e, 49151, m);
  ASSERT_EQ(wire::parse_frame(frame, p), wire::ParseError::ok);
  Message back;
  ASSERT_EQ(decode(p, back), DecodeError::ok);
  EXPECT_EQ(back, m);
  std::array<std::uint8_t, mad_size> mad{};
  std::string error;
  m.cc = "a-name-too-long-for-it";
  EXPECT_FALSE(encode_mad(m, mad, error));
  EXPECT_NE(error.find("longer than 15"), std::string::npos) << error;
  m.cc = "x";
  m.private_data.assign(max_private_data + 1, 0);
  EXPECT_FALSE(encode_mad(m, mad, error));
  EXPECT_NE(error.find("at most 64"), std::string::npos) << error;
}

TEST(Cm, MalformedFramesToQp1AreCountedAndIgnored) {
  Wire w;
  w.listen();
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u);
  w.poll(0);
  const std::vector<std::uint8_t> good = w.to_server[0];
  struct Case {
    std::size_t offset;  // in the MAD
    DecodeError expect;
  };
  for (const Case c : {Case{1, DecodeError::not_metaroce_mad}, Case{24, DecodeError::bad_magic},
                       Case{17, DecodeError::bad_type}, Case{24 + 5, DecodeError::bad_field},
                       Case{24 + 7, DecodeError::bad_field}, Case{24 + 36 + 15, DecodeError::bad_field}}) {
    wire::ParsedFrame p;
    ASSERT_EQ(wire::parse_frame(good, p), wire::ParseError::ok);
    std::vector<std::uint8_t> mad(p.payload.begin(), p.payload.end());
    mad[c.offset] ^= 0x77;
    wire::ParsedFrame changed = p;
    changed.payload = mad;
    Message m;
    EXPECT_EQ(decode(changed, m), c.expect) << "offset " << c.offset;
    w.server.on_frame(0, changed);
  }
  EXPECT_EQ(w.server.counters().malformed_messages, 6u);
  EXPECT_EQ(w.server.counters().requests_received, 0u);
  EXPECT_TRUE(w.accepted.empty());
}

TEST(Cm, LostRequestIsRetriedAndLostReplyIsAnsweredAgain) {
  Wire w;
  w.listen();
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u);
  w.poll(0);
  ASSERT_EQ(w.to_server.size(), 1u);  // REQ 1: lost
  w.poll(50 * ms);
  EXPECT_TRUE(w.to_server.empty());  // not yet time to repeat
  w.poll(100 * ms);
  ASSERT_EQ(w.to_server.size(), 1u);  // REQ 2 reaches the server
  Wire::deliver(w.server, 100 * ms, w.to_server[0]);
  w.poll(100 * ms);
  ASSERT_EQ(w.to_client.size(), 1u);  // REP 1: lost
  w.poll(200 * ms);
  ASSERT_EQ(w.to_server.size(), 1u);  // REQ 3: a duplicate for the server
  Wire::deliver(w.server, 200 * ms, w.to_server[0]);
  w.poll(200 * ms);
  ASSERT_EQ(w.to_client.size(), 1u);  // the same REP again
  Wire::deliver(w.client, 200 * ms, w.to_client[0]);
  w.settle(200 * ms);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::established);
  EXPECT_EQ(w.accepted.size(), 1u);  // one connection, not two
  EXPECT_EQ(w.client_events[0].config.peer_qpn, w.accepted[0].local_qpn);
  EXPECT_EQ(w.client.counters().requests_sent, 3u);
  EXPECT_EQ(w.client.counters().request_retries, 2u);
  EXPECT_EQ(w.server.counters().duplicate_requests, 1u);
  EXPECT_EQ(w.server.counters().replies_sent, 2u);
  // No more REQs after the answer.
  w.poll(10'000 * ms);
  EXPECT_TRUE(w.to_server.empty());
}

TEST(Cm, NoAnswerTimesOutWithAnErrorThatSaysWhatToCheck) {
  Wire w;
  std::string error;
  const std::uint64_t id = w.client.connect(0, request(), error);
  for (Time t = 0; t <= 1000 * ms; t += 10 * ms) w.poll(t);  // everything lost
  w.client.take_events(w.client_events);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::failed);
  EXPECT_EQ(w.client_events[0].id, id);
  EXPECT_EQ(w.client_events[0].error,
            "no answer from 10.0.1.2 after 5 connection requests over 0.5 s: is the server running there, and is "
            "02:00:00:00:00:02 the MAC of the next hop towards it?");
  EXPECT_EQ(w.client.counters().requests_sent, 5u);
  EXPECT_EQ(w.client.counters().timed_out, 1u);
  EXPECT_EQ(w.client.pending(), 0u);
}

TEST(Cm, ServerThatIsNotListeningRejects) {
  Wire w;  // no listen()
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u);
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::failed);
  EXPECT_EQ(w.client_events[0].error, "10.0.1.2 refused the connection: no server is listening on that port");
  EXPECT_EQ(w.server.counters().rejects_sent, 1u);
  EXPECT_EQ(w.client.counters().rejects_received, 1u);
  // Nothing is repeated after a reject.
  w.poll(10'000 * ms);
  EXPECT_TRUE(w.to_server.empty());
}

TEST(Cm, ApplicationAndResourceRefusalsReachTheClient) {
  Wire w;
  w.listen(RejectReason::refused);
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u);
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_NE(w.client_events[0].error.find("application refused"), std::string::npos);

  ManagerConfig small = side(server_mac, server_ip, 5);
  small.max_connections = 1;
  Wire v(small);
  v.listen();
  ASSERT_NE(v.client.connect(0, request(), error), 0u);
  ASSERT_NE(v.client.connect(0, request(), error), 0u);
  v.settle(0);
  ASSERT_EQ(v.client_events.size(), 2u);
  EXPECT_EQ(v.client_events[0].kind, EventKind::established);
  EXPECT_EQ(v.client_events[1].kind, EventKind::failed);
  EXPECT_NE(v.client_events[1].error.find("no more connections"), std::string::npos);
  // Closing the first frees room for another.
  v.server.forget(v.accepted[0].local_qpn);
  ASSERT_NE(v.client.connect(0, request(), error), 0u);
  v.client_events.clear();
  v.settle(0);
  ASSERT_EQ(v.client_events.size(), 1u);
  EXPECT_EQ(v.client_events[0].kind, EventKind::established);
}

// A server application that refuses a request for more memory than it
// allows (metaroce-perf --server, metaroce-sink: --max-connection-memory):
// REJ memory_limit, counted, and the client's error says what to change.
TEST(Cm, MemoryLimitRefusalIsCountedAndExplained) {
  Wire w;
  w.listen(RejectReason::memory_limit);
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u);
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::failed);
  EXPECT_NE(w.client_events[0].error.find("refused the connection: the connection would need more memory than the "
                                          "server allows (its --max-connection-memory)"),
            std::string::npos)
      << w.client_events[0].error;
  EXPECT_EQ(w.server.counters().memory_refusals, 1u);
  EXPECT_EQ(w.server.counters().rejects_sent, 1u);
  EXPECT_EQ(w.client.counters().rejects_received, 1u);
  EXPECT_TRUE(w.accepted.empty());
}

// A client whose port carries less than the connection asks for (a
// preset's mtu= below --mtu) asks for what it carries, and both ends hold that.
TEST(Cm, ClientAsksNoMoreThanItsPortCarries) {
  ManagerConfig small_port = side(client_mac, client_ip, 11);
  small_port.max_mtu = 2872;
  Wire w(side(server_mac, server_ip, 22), small_port);
  w.listen();
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u) << error;  // asks 4096
  w.settle(0);
  ASSERT_EQ(w.requests_seen.size(), 1u);
  EXPECT_EQ(w.requests_seen[0].mtu, 2872u);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::established);
  EXPECT_EQ(w.client_events[0].config.mtu, 2872u);
  ASSERT_EQ(w.accepted.size(), 1u);
  EXPECT_EQ(w.accepted[0].mtu, 2872u);
}

TEST(Cm, ServerCapsMtuAndPathsAndRocev2HasOnePath) {
  ManagerConfig capped = side(server_mac, server_ip, 5);
  capped.max_mtu = 1024;
  capped.max_paths = 4;
  Wire w(capped);
  w.listen();
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u);
  ConnectRequest r = request();
  r.connection.mode = transport::Mode::rocev2;
  r.connection.paths = 1;
  r.cc = "dcqcn";
  ASSERT_NE(w.client.connect(0, r, error), 0u);
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 2u);
  EXPECT_EQ(w.client_events[0].config.mtu, 1024u);
  EXPECT_EQ(w.client_events[0].config.paths, 4);
  EXPECT_EQ(w.client_events[1].config.mode, transport::Mode::rocev2);
  EXPECT_EQ(w.client_events[1].config.paths, 1);
  EXPECT_EQ(w.client_events[1].cc, "dcqcn");
  ASSERT_EQ(w.accepted.size(), 2u);
  EXPECT_EQ(w.accepted[0].paths, 4);
  EXPECT_EQ(w.accepted[1].mode, transport::Mode::rocev2);
}

TEST(Cm, OutstandingReadsAreTheSmallerOfBothSides) {
  ManagerConfig capped = side(server_mac, server_ip, 5);
  capped.max_outstanding_reads = 4;
  Wire w(capped);
  w.listen();
  std::string error;
  ConnectRequest r = request();
  r.connection.max_outstanding_reads = 8;
  ASSERT_NE(w.client.connect(0, r, error), 0u);
  r.connection.max_outstanding_reads = 2;
  ASSERT_NE(w.client.connect(0, r, error), 0u);
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 2u);
  ASSERT_EQ(w.accepted.size(), 2u);
  EXPECT_EQ(w.client_events[0].config.max_outstanding_reads, 4u);
  EXPECT_EQ(w.accepted[0].max_outstanding_reads, 4u);
  EXPECT_EQ(w.client_events[1].config.max_outstanding_reads, 2u);
  EXPECT_EQ(w.accepted[1].max_outstanding_reads, 2u);
}

TEST(Cm, RestartedClientSupersedesItsOldConnectionAndOldRepliesAreStale) {
  Wire w;
  w.listen();
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u);
  w.settle(0);
  ASSERT_EQ(w.accepted.size(), 1u);
  const transport::ConnectionConfig first = w.accepted[0];
  const std::vector<std::uint8_t> old_reply = [&] {
    // A REP of the first incarnation, as a late copy on the wire would be.
    Message m;
    m.type = MessageType::reply;
    m.nonce = 0x1234;  // a nonce the new client never used
    m.receiver_qpn = first.peer_qpn;
    transport::Endpoints e;
    e.local_ipv4 = server_ip;
    e.peer_ipv4 = client_ip;
    return build_frame(e, 49151, m);
  }();

  // A late REP whose nonce no attempt of the client has is ignored.
  Wire::deliver(w.client, 0, old_reply);
  EXPECT_EQ(w.client.counters().stale_messages, 1u);

  Manager restarted(side(client_mac, client_ip, 99));
  ASSERT_NE(restarted.connect(0, request(), error), 0u);
  std::vector<std::vector<std::uint8_t>> frames;
  restarted.poll(0, frames);
  ASSERT_EQ(frames.size(), 1u);
  // The client process restarted and, by chance, drew the QPN of its first
  // incarnation again: same peer QP, new nonce.
  Wire::deliver(w.server, 0, with_sender_qpn(frames[0], first.peer_qpn));
  w.server.take_events(w.server_events);
  // Not yet: the server asks for proof that the REQ comes from that address.
  EXPECT_EQ(w.server.counters().superseded, 0u);
  EXPECT_EQ(w.server.counters().address_challenges_sent, 1u);
  std::vector<std::vector<std::uint8_t>> answers;
  w.server.poll(0, answers);
  ASSERT_EQ(answers.size(), 1u);
  const Message challenge = decoded(answers[0]);
  EXPECT_EQ(challenge.type, MessageType::reject);
  EXPECT_EQ(challenge.reason, RejectReason::prove_address);
  EXPECT_NE(challenge.cookie, 0u);
  // The restarted client gets it at its address and sends its REQ again at
  // once, with the cookie: that one supersedes.
  Wire::deliver(restarted, 0, answers[0]);
  EXPECT_EQ(restarted.counters().address_proofs_sent, 1u);
  frames.clear();
  restarted.poll(0, frames);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(decoded(frames[0]).cookie, challenge.cookie);
  Wire::deliver(w.server, 0, with_sender_qpn(frames[0], first.peer_qpn));
  w.server.take_events(w.server_events);
  ASSERT_FALSE(w.server_events.empty());
  EXPECT_EQ(w.server_events.back().kind, EventKind::superseded);
  EXPECT_EQ(w.server_events.back().id, first.local_qpn);
  EXPECT_EQ(w.server.counters().superseded, 1u);
  ASSERT_EQ(w.accepted.size(), 2u);
  EXPECT_NE(w.accepted[1].pkey, first.pkey);  // frames of the old one are dropped (pkey_mismatch)
  EXPECT_NE(w.accepted[1].local_qpn, first.local_qpn);
}

TEST(Cm, SpoofedRequestDoesNotEndALiveConnection) {
  Wire w;
  w.listen();
  std::string error;
  const std::uint64_t id = w.client.connect(0, request(), error);
  ASSERT_NE(id, 0u) << error;
  w.settle(0);
  ASSERT_EQ(w.accepted.size(), 1u);
  const transport::ConnectionConfig live = w.accepted[0];
  // Off the path: a REQ with the client's address and QPN and a nonce of
  // its own. The challenge goes to the real client, which has no attempt
  // of that nonce and drops it.
  Manager attacker(side(client_mac, client_ip, 5));
  ASSERT_NE(attacker.connect(0, request(), error), 0u);
  std::vector<std::vector<std::uint8_t>> frames;
  attacker.poll(0, frames);
  ASSERT_EQ(frames.size(), 1u);
  Wire::deliver(w.server, 10 * ms, with_sender_qpn(frames[0], live.peer_qpn));
  std::vector<std::vector<std::uint8_t>> answers;
  w.server.poll(10 * ms, answers);
  ASSERT_EQ(answers.size(), 1u);
  Wire::deliver(w.client, 10 * ms, answers[0]);
  EXPECT_EQ(w.client.counters().stale_messages, 1u);
  EXPECT_EQ(w.client.counters().address_proofs_sent, 0u);
  // A guessed cookie is dropped, with no new challenge.
  Message guess = decoded(with_sender_qpn(frames[0], live.peer_qpn));
  guess.cookie = decoded(answers[0]).cookie ^ 0x5a5a5a5au;
  transport::Endpoints e;
  e.local_mac = client_mac;
  e.local_ipv4 = client_ip;
  e.peer_ipv4 = server_ip;
  e.peer_mac = server_mac;
  Wire::deliver(w.server, 20 * ms, build_frame(e, 49151, guess));
  answers.clear();
  w.server.poll(20 * ms, answers);
  EXPECT_TRUE(answers.empty());
  w.server.take_events(w.server_events);
  for (const Event& ev : w.server_events) EXPECT_NE(ev.kind, EventKind::superseded);
  EXPECT_EQ(w.server.counters().superseded, 0u);
  EXPECT_EQ(w.server.counters().address_challenges_sent, 1u);
  EXPECT_EQ(w.server.counters().bad_cookies, 1u);
  ASSERT_EQ(w.accepted.size(), 1u);
  // The live connection is untouched: its client closes it as usual.
  ASSERT_TRUE(w.client.disconnect(30 * ms, id, {1}, error)) << error;
  w.settle(30 * ms);
  EXPECT_EQ(w.server.counters().disconnected, 1u);
  EXPECT_EQ(w.client.counters().disconnected, 1u);
}

TEST(Cm, DisconnectCarriesBothSummariesAndSurvivesALostReply) {
  Wire w;
  w.listen();
  std::string error;
  const std::uint64_t id = w.client.connect(0, request(), error);
  w.settle(0);
  ASSERT_EQ(w.accepted.size(), 1u);
  const std::uint32_t server_qpn = w.accepted[0].local_qpn;
  w.client_events.clear();
  w.server_events.clear();
  EXPECT_FALSE(w.client.disconnect(0, id + 100, {}, error));
  EXPECT_NE(error.find("not established"), std::string::npos) << error;
  ASSERT_TRUE(w.client.disconnect(0, id, {0xaa, 0xbb}, error)) << error;
  w.poll(0);
  ASSERT_EQ(w.to_server.size(), 1u);  // DREQ
  Wire::deliver(w.server, 0, w.to_server[0]);
  w.server.take_events(w.server_events);
  ASSERT_EQ(w.server_events.size(), 1u);
  EXPECT_EQ(w.server_events[0].kind, EventKind::disconnected);
  EXPECT_EQ(w.server_events[0].id, server_qpn);
  EXPECT_EQ(w.server_events[0].peer_private_data, (std::vector<std::uint8_t>{0xaa, 0xbb}));
  w.server.set_disconnect_reply(server_qpn, {0xcc});
  w.poll(0);
  ASSERT_EQ(w.to_client.size(), 1u);  // DREP: lost
  w.poll(100 * ms);
  ASSERT_EQ(w.to_server.size(), 1u);  // DREQ again
  Wire::deliver(w.server, 100 * ms, w.to_server[0]);
  w.server.take_events(w.server_events);
  EXPECT_EQ(w.server_events.size(), 1u);  // no second event
  w.poll(100 * ms);
  ASSERT_EQ(w.to_client.size(), 1u);  // the same DREP
  Wire::deliver(w.client, 100 * ms, w.to_client[0]);
  w.client.take_events(w.client_events);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::disconnected);
  EXPECT_EQ(w.client_events[0].id, id);
  EXPECT_EQ(w.client_events[0].error, "");
  EXPECT_EQ(w.client_events[0].peer_private_data, (std::vector<std::uint8_t>{0xcc}));
  EXPECT_EQ(w.client.counters().disconnects_sent, 2u);
  EXPECT_EQ(w.server.counters().disconnect_replies_sent, 2u);
  EXPECT_EQ(w.client.counters().disconnected, 1u);
  EXPECT_EQ(w.server.counters().disconnected, 1u);
  w.poll(10'000 * ms);
  EXPECT_TRUE(w.to_server.empty());
  EXPECT_FALSE(w.client.disconnect(0, id, {}, error));
}

TEST(Cm, BothEndsGetQpnsOfTheClientsQueue) {
  ManagerConfig four = side(server_mac, server_ip, 5);
  four.queues = 4;
  Wire w(four);
  w.listen();
  std::string error;
  for (std::uint16_t q = 0; q < 4; ++q) {
    ConnectRequest r = request();
    r.queue = q;
    ASSERT_NE(w.client.connect(0, r, error), 0u) << error;
  }
  // The client's manager has one queue: its QPNs are anything; give it 4 too.
  w.settle(0);
  ASSERT_EQ(w.accepted.size(), 4u);
  for (const auto& c : w.accepted) EXPECT_EQ(c.local_qpn % 4, c.peer_qpn % 4) << std::hex << c.local_qpn;
  ManagerConfig client4 = side(client_mac, client_ip, 12);
  client4.queues = 4;
  Manager client(client4);
  ConnectRequest r = request();
  r.queue = 3;
  ASSERT_NE(client.connect(0, r, error), 0u);
  std::vector<std::vector<std::uint8_t>> frames;
  client.poll(0, frames);
  ASSERT_EQ(frames.size(), 1u);
  wire::ParsedFrame p;
  ASSERT_EQ(wire::parse_frame(frames[0], p), wire::ParseError::ok);
  Message m;
  ASSERT_EQ(decode(p, m), DecodeError::ok);
  EXPECT_EQ(m.sender_qpn % 4, 3u);
}

// rocev2: the partition a standard peer is in (0xffff unless the port is
// given another), the same at both ends, whatever the nonce; metaroce keeps
// a P_Key per incarnation.
TEST(Cm, Rocev2ConnectionsCarryThePortsPartitionNotTheNonce) {
  for (const std::uint16_t partition : {std::uint16_t{0xffff}, std::uint16_t{0x8123}}) {
    ManagerConfig server = side(server_mac, server_ip, 22), client = side(client_mac, client_ip, 11);
    server.pkey = partition;
    client.pkey = partition;
    Wire w(server, client);
    w.listen();
    std::string error;
    ConnectRequest r = request();
    r.connection.mode = transport::Mode::rocev2;
    r.connection.paths = 1;
    ASSERT_NE(w.client.connect(0, r, error), 0u) << error;
    ASSERT_NE(w.client.connect(0, request(), error), 0u) << error;  // metaroce beside it
    w.settle(0);
    ASSERT_EQ(w.client_events.size(), 2u);
    ASSERT_EQ(w.accepted.size(), 2u);
    EXPECT_EQ(w.client_events[0].config.pkey, partition);
    EXPECT_EQ(w.accepted[0].pkey, partition);
    EXPECT_EQ(w.accepted[1].pkey, w.client_events[1].config.pkey);
    EXPECT_EQ(w.accepted[1].pkey, pkey_of(w.requests_seen[1].nonce));
  }
}

// rocev2 takes IB path MTUs only: what a port carries is rounded down to one.
TEST(Cm, Rocev2MtuIsRoundedDownToAnIbMtu) {
  ManagerConfig server = side(server_mac, server_ip, 22);
  server.max_mtu = 1500 - 58;  // a 1500-byte Ethernet MTU less the headers
  ManagerConfig client = side(client_mac, client_ip, 11);
  client.max_mtu = 9000 - 58;
  Wire w(server, client);
  w.listen();
  std::string error;
  ConnectRequest r = request();
  r.connection.mode = transport::Mode::rocev2;
  r.connection.paths = 1;
  r.connection.mtu = 4096;
  ASSERT_NE(w.client.connect(0, r, error), 0u) << error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u) << error;  // metaroce: any size
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 2u);
  ASSERT_EQ(w.requests_seen.size(), 2u);
  EXPECT_EQ(w.requests_seen[0].mtu, 4096u);
  EXPECT_EQ(w.accepted[0].mtu, 1024u);
  EXPECT_EQ(w.client_events[0].config.mtu, 1024u);
  EXPECT_EQ(w.client_events[1].config.mtu, 1442u);
  EXPECT_EQ(transport::ib_mtu_at_most(255), 256u);
  EXPECT_EQ(transport::ib_mtu_at_most(2047), 1024u);
  EXPECT_EQ(transport::ib_mtu_at_most(9000), 4096u);
  transport::ConnectionConfig c;
  c.mode = transport::Mode::rocev2;
  c.mtu = 1500;
  EXPECT_EQ(transport::validate(c), "mtu 1500 is not an IB MTU: rocev2 mode takes 256, 512, 1024, 2048 or 4096");
}

// Without a seed, QPNs, PSNs and nonces come from getrandom(2): two
// managers started alike draw different ones (2^-24 odds of a false alarm
// per field).
TEST(Cm, UnseededManagersDrawIndependentQpnsAndPsns) {
  std::vector<Message> first;
  for (int k = 0; k < 2; ++k) {
    Manager m(side(client_mac, client_ip, 0));
    std::string error;
    ConnectRequest r = request();
    r.connection.mode = transport::Mode::rocev2;
    r.connection.paths = 1;
    ASSERT_NE(m.connect(0, r, error), 0u) << error;
    std::vector<std::vector<std::uint8_t>> frames;
    m.poll(0, frames);
    ASSERT_EQ(frames.size(), 1u);
    wire::ParsedFrame p;
    ASSERT_EQ(wire::parse_frame(frames[0], p), wire::ParseError::ok);
    first.emplace_back();
    ASSERT_EQ(decode(p, first.back()), DecodeError::ok);
  }
  EXPECT_NE(first[0].sender_qpn, first[1].sender_qpn);
  EXPECT_NE(first[0].sender_psn, first[1].sender_psn);
  EXPECT_NE(first[0].nonce, first[1].nonce);
}

TEST(Cm, PkeyOfANonceIsAValidFullMember) {
  EXPECT_EQ(pkey_of(0), 0x8001);
  EXPECT_EQ(pkey_of(0x8000), 0x8001);
  EXPECT_EQ(pkey_of(0x12345), 0xa345);
  EXPECT_EQ(pkey_of(0xffffffff), 0xffff);
}

TEST(Cm, BadRequestsAreRefusedBeforeAnythingIsSent) {
  Wire w;
  std::string error;
  ConnectRequest r = request();
  r.connection.paths = 0;
  EXPECT_EQ(w.client.connect(0, r, error), 0u);
  EXPECT_NE(error.find("paths 0"), std::string::npos) << error;
  r = request(std::vector<std::uint8_t>(65, 0));
  EXPECT_EQ(w.client.connect(0, r, error), 0u);
  EXPECT_NE(error.find("private data"), std::string::npos) << error;
  w.poll(0);
  EXPECT_TRUE(w.to_server.empty());
}

// The same exchange over IPv6: every frame is IPv6 between the two
// addresses, both ends' connections carry them, a DREQ/DREP closes it, and
// a timeout names the IPv6 address.
wire::Ipv6Address v6(const char* text) {
  wire::IpAddress a;
  EXPECT_TRUE(wire::parse_ip(text, a));
  return a.ipv6;
}

ManagerConfig side6(wire::MacAddress mac, const char* ip, std::uint64_t seed) {
  ManagerConfig c = side(mac, 0, seed);
  c.local.ip_version = 6;
  c.local.local_ipv6 = v6(ip);
  return c;
}

TEST(Cm, EstablishesAndClosesOverIpv6) {
  Manager client(side6(client_mac, "fd00:77:1::2", 11));
  Manager server(side6(server_mac, "fd00:77:2::2", 22));
  std::vector<transport::ConnectionConfig> accepted;
  server.listen([&](const transport::ConnectionConfig& c, const Message&, std::vector<std::uint8_t>&) {
    accepted.push_back(c);
    return RejectReason::none;
  });
  ConnectRequest r = request();
  r.connection.endpoints.peer_ipv4 = 0;
  r.connection.endpoints.peer_ipv6 = v6("fd00:77:2::2");
  std::string error;
  const std::uint64_t id = client.connect(0, r, error);
  ASSERT_NE(id, 0u) << error;
  std::vector<Event> client_events, server_events;
  std::size_t frames = 0;
  const auto exchange = [&](Time now) {
    for (int i = 0; i < 10; ++i) {
      std::vector<std::vector<std::uint8_t>> to_server, to_client;
      client.poll(now, to_server);
      server.poll(now, to_client);
      if (to_server.empty() && to_client.empty()) break;
      for (const auto& [frames_of, to, from, to_addr] :
           {std::tuple{&to_server, &server, "fd00:77:1::2", "fd00:77:2::2"},
            std::tuple{&to_client, &client, "fd00:77:2::2", "fd00:77:1::2"}}) {
        for (const auto& f : *frames_of) {
          wire::ParsedFrame p;
          ASSERT_EQ(wire::parse_frame(f, p), wire::ParseError::ok);
          ASSERT_EQ(p.ip_version, 6);
          EXPECT_EQ(p.ipv6().src, v6(from));
          EXPECT_EQ(p.ipv6().dst, v6(to_addr));
          to->on_frame(now, p);
          ++frames;
        }
      }
    }
    client.take_events(client_events);
    server.take_events(server_events);
  };
  exchange(0);
  ASSERT_EQ(client_events.size(), 1u);
  ASSERT_EQ(client_events[0].kind, EventKind::established) << client_events[0].error;
  ASSERT_EQ(accepted.size(), 1u);
  const transport::ConnectionConfig& c = client_events[0].config;
  EXPECT_EQ(c.endpoints.ip_version, 6);
  EXPECT_EQ(c.endpoints.local_ipv6, v6("fd00:77:1::2"));
  EXPECT_EQ(c.endpoints.peer_ipv6, v6("fd00:77:2::2"));
  EXPECT_EQ(accepted[0].endpoints.ip_version, 6);
  EXPECT_EQ(accepted[0].endpoints.local_ipv6, v6("fd00:77:2::2"));
  EXPECT_EQ(accepted[0].endpoints.peer_ipv6, v6("fd00:77:1::2"));
  EXPECT_EQ(accepted[0].endpoints.peer_mac, client_mac);
  EXPECT_EQ(transport::validate(c), "");
  EXPECT_EQ(transport::validate(accepted[0]), "");
  EXPECT_EQ(frames, 3u);  // REQ, REP, RTU
  ASSERT_TRUE(client.disconnect(1, id, {0xaa}, error)) << error;
  exchange(1);
  ASSERT_EQ(client_events.size(), 2u);
  EXPECT_EQ(client_events[1].kind, EventKind::disconnected);
  EXPECT_TRUE(client_events[1].error.empty()) << client_events[1].error;
  EXPECT_EQ(frames, 5u);  // and DREQ, DREP
  EXPECT_EQ(client.counters().disconnected, 1u);
  EXPECT_EQ(server.counters().disconnected, 1u);

  // Nobody answers: the error names the IPv6 address.
  Manager lonely(side6(client_mac, "fd00:77:1::2", 12));
  ASSERT_NE(lonely.connect(0, r, error), 0u) << error;
  std::vector<std::vector<std::uint8_t>> lost;
  for (Time t = 0; t <= 1000 * ms; t += 10 * ms) lonely.poll(t, lost);
  std::vector<Event> failed;
  lonely.take_events(failed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].error,
            "no answer from fd00:77:2::2 after 5 connection requests over 0.5 s: is the server running there, and "
            "is 02:00:00:00:00:02 the MAC of the next hop towards it?");
}

// Planes: each side offers its planes and its addresses on planes 1..;
// both take the smaller count, each the other's addresses.
ManagerConfig with_planes(ManagerConfig c, std::uint16_t planes, std::uint8_t tag) {
  c.planes = planes;
  for (std::uint16_t k = 0; k < transport::max_planes; ++k) {
    transport::PlaneAddresses& a = c.local_planes[k];
    a.port = static_cast<std::uint16_t>(10 * tag + k);
    a.local_mac = {0x02, tag, 0, 0, static_cast<std::uint8_t>(k), 0};
    a.local_ipv4 = (std::uint32_t{10} << 24) | (std::uint32_t{k} << 16) | tag;
    a.local_ipv6 = v6("fd00::1");
    a.local_ipv6[14] = static_cast<std::uint8_t>(k);
    a.local_ipv6[15] = tag;
  }
  return c;
}

ConnectRequest planes_request(std::uint16_t planes) {
  ConnectRequest r = request();
  r.connection.planes = planes;
  return r;
}

void expect_planes_joined(const transport::ConnectionConfig& c, const transport::ConnectionConfig& s,
                          std::uint16_t planes, std::uint8_t ip_version) {
  ASSERT_EQ(c.planes, planes);
  ASSERT_EQ(s.planes, planes);
  for (std::uint16_t k = 0; k < planes; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(c.plane[k].port, 10 + k);  // each side's own port for the plane
    EXPECT_EQ(s.plane[k].port, 20 + k);
    if (k == 0) continue;  // plane 0: the endpoints, as with one plane
    EXPECT_EQ(c.plane[k].local_mac, (wire::MacAddress{0x02, 1, 0, 0, static_cast<std::uint8_t>(k), 0}));
    EXPECT_EQ(c.plane[k].peer_mac, s.plane[k].local_mac);
    EXPECT_EQ(s.plane[k].peer_mac, c.plane[k].local_mac);
    if (ip_version == 4) {
      EXPECT_EQ(c.plane[k].peer_ipv4, (std::uint32_t{10} << 24) | (std::uint32_t{k} << 16) | 2);
      EXPECT_EQ(s.plane[k].peer_ipv4, (std::uint32_t{10} << 24) | (std::uint32_t{k} << 16) | 1);
    } else {
      EXPECT_EQ(c.plane[k].peer_ipv6, s.plane[k].local_ipv6);
      EXPECT_EQ(s.plane[k].peer_ipv6, c.plane[k].local_ipv6);
      EXPECT_EQ(c.plane[k].peer_ipv6[15], 2);
    }
  }
}

TEST(CmPlanes, BothSidesTakeTheSmallerCountAndEachOthersAddresses) {
  for (const auto& [client_planes, server_planes, asked, agreed] :
       {std::tuple<std::uint16_t, std::uint16_t, std::uint16_t, std::uint16_t>{4, 2, 4, 2}, {2, 4, 2, 2},
        {8, 8, 8, 8}, {8, 8, 3, 3}}) {
    SCOPED_TRACE(::testing::Message() << client_planes << " " << server_planes << " " << asked);
    Wire w(with_planes(side(server_mac, server_ip, 22), server_planes, 2),
           with_planes(side(client_mac, client_ip, 11), client_planes, 1));
    w.listen();
    std::string error;
    ASSERT_NE(w.client.connect(0, planes_request(asked), error), 0u) << error;
    w.settle(0);
    ASSERT_EQ(w.requests_seen.size(), 1u);
    EXPECT_EQ(w.requests_seen[0].planes, asked);
    ASSERT_EQ(w.client_events.size(), 1u);
    ASSERT_EQ(w.client_events[0].kind, EventKind::established) << w.client_events[0].error;
    ASSERT_EQ(w.accepted.size(), 1u);
    expect_planes_joined(w.client_events[0].config, w.accepted[0], agreed, 4);
    EXPECT_EQ(transport::validate(w.client_events[0].config), "");
    EXPECT_EQ(transport::validate(w.accepted[0]), "");
  }
}

TEST(CmPlanes, AOnePlanePeerGetsOnePlane) {
  // A 2-plane client and a server with one plane (as every side was before
  // planes): both end with one.
  Wire w(side(server_mac, server_ip, 22), with_planes(side(client_mac, client_ip, 11), 2, 1));
  w.listen();
  std::string error;
  ASSERT_NE(w.client.connect(0, planes_request(2), error), 0u) << error;
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].config.planes, 1);
  ASSERT_EQ(w.accepted.size(), 1u);
  EXPECT_EQ(w.accepted[0].planes, 1);

  // A peer that knows nothing of planes leaves their byte 0: one plane.
  Message m;
  m.planes = 3;
  m.plane_addresses[0].ipv4 = 0x0a010101;
  m.plane_addresses[1].ipv4 = 0x0a020202;
  std::array<std::uint8_t, mad_size> mad{};
  ASSERT_TRUE(encode_mad(m, mad, error)) << error;
  EXPECT_EQ(mad[140], 3);  // MAD offset 140: planes (doc/WIRE.md)
  EXPECT_EQ(mad[141 + 6], 0x0a);  // plane 1's IPv4 after its MAC
  EXPECT_EQ(mad[141 + 10 + 9], 0x02);
  transport::Endpoints e;
  e.peer_ipv4 = server_ip;
  std::vector<std::uint8_t> frame = build_frame(e, 49151, m);
  wire::ParsedFrame p;
  ASSERT_EQ(wire::parse_frame(frame, p), wire::ParseError::ok);
  Message back;
  ASSERT_EQ(decode(p, back), DecodeError::ok);
  EXPECT_EQ(back, m);  // planes and their addresses round-trip
  // The MAD as an older peer sends it: the planes byte and entries zero
  // (changed after the ICRC check; decode reads the payload in place).
  const std::size_t mad_at = static_cast<std::size_t>(p.payload.data() - frame.data());
  std::fill(frame.begin() + static_cast<std::ptrdiff_t>(mad_at + 140),
            frame.begin() + static_cast<std::ptrdiff_t>(mad_at + mad_size), 0);
  ASSERT_EQ(decode(p, back), DecodeError::ok);
  EXPECT_EQ(back.planes, 1);
  EXPECT_EQ(back.plane_addresses[0].ipv4, 0u);
  // More planes than the MAD holds is a bad field, and encode refuses it.
  frame[mad_at + 140] = 9;
  EXPECT_EQ(decode(p, back), DecodeError::bad_field);
  m.planes = 7;
  m.ip_version = 6;
  EXPECT_FALSE(encode_mad(m, mad, error));
  EXPECT_EQ(error, "7 planes: the connection manager carries 1..6 over IPv6");
}

TEST(CmPlanes, Ipv6CarriesSixPlanes) {
  Wire w(with_planes(side6(server_mac, "fd00:77:2::2", 22), 6, 2),
         with_planes(side6(client_mac, "fd00:77:1::2", 11), 6, 1));
  w.listen();
  std::string error;
  ConnectRequest r = planes_request(6);
  r.connection.endpoints.ip_version = 6;
  r.connection.endpoints.peer_ipv6 = v6("fd00:77:2::2");
  ASSERT_NE(w.client.connect(0, r, error), 0u) << error;
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 1u);
  ASSERT_EQ(w.client_events[0].kind, EventKind::established) << w.client_events[0].error;
  ASSERT_EQ(w.accepted.size(), 1u);
  expect_planes_joined(w.client_events[0].config, w.accepted[0], 6, 6);
  r.connection.planes = 7;
  Manager seven(with_planes(side6(client_mac, "fd00:77:1::2", 11), 8, 1));
  EXPECT_EQ(seven.connect(0, r, error), 0u);
  EXPECT_EQ(error, "7 planes: the connection manager carries 1..6 over IPv6");
}

// A lane's manager serves clients of its own queue only: a REQ from a
// client QPN of another queue (the ends run different lane counts) is
// REJ wrong_queue, counted, and the client's error names the fix; one of
// its own queue is served, its QPN on that queue.
TEST(Cm, ALanesManagerRefusesClientsOfAnotherQueue) {
  ManagerConfig lane1 = side(server_mac, server_ip, 22);
  lane1.queues = 2;
  lane1.queue = 1;
  lane1.own_queue_only = true;
  ManagerConfig client = side(client_mac, client_ip, 11);
  client.queues = 2;
  Wire w(lane1, client);
  w.listen();
  std::string error;
  ConnectRequest r = request();
  r.queue = 0;
  ASSERT_NE(w.client.connect(0, r, error), 0u) << error;
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::failed);
  EXPECT_NE(w.client_events[0].error.find("reached a lane of the server that its QPN does not steer to: give both "
                                          "ends the same --lcores"),
            std::string::npos)
      << w.client_events[0].error;
  EXPECT_EQ(w.server.counters().wrong_queue_refusals, 1u);
  EXPECT_TRUE(w.accepted.empty());
  r.queue = 1;
  w.client_events.clear();
  ASSERT_NE(w.client.connect(0, r, error), 0u) << error;
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::established);
  ASSERT_EQ(w.accepted.size(), 1u);
  EXPECT_EQ(w.accepted[0].local_qpn % 2, 1u);
  EXPECT_EQ(w.accepted[0].peer_qpn % 2, 1u);
  EXPECT_EQ(w.server.counters().wrong_queue_refusals, 1u);
}

// Lanes hand QP 1's frames to the lane of the QPN a message concerns on the
// receiving end: a REQ's sender (the client, whose queue the server draws
// on), every other message's receiver. Read from the frame's bytes alone.
TEST(Cm, PeekOwnerQpnNamesTheReceivingEndsQpn) {
  transport::Endpoints e;
  e.local_mac = client_mac;
  e.local_ipv4 = client_ip;
  e.peer_ipv4 = server_ip;
  e.peer_mac = server_mac;
  const auto frame_of = [&](MessageType type, std::uint32_t sender, std::uint32_t receiver) {
    Message m;
    m.type = type;
    m.nonce = 7;
    m.sender_qpn = sender;
    m.receiver_qpn = receiver;
    m.mtu = 1024;
    m.paths = 1;
    m.streams = 1;
    return build_frame(e, 49151, m);
  };
  struct Case {
    MessageType type;
    std::uint32_t sender, receiver, owner;
  };
  const Case cases[] = {
      {MessageType::request, 0x000103, 0, 0x000103},
      {MessageType::reply, 0x000205, 0x000103, 0x000103},
      {MessageType::ready, 0x000103, 0x000205, 0x000205},
      {MessageType::reject, 0, 0x000103, 0x000103},
      {MessageType::disconnect, 0x000103, 0x000205, 0x000205},
      {MessageType::disconnect_reply, 0x000205, 0x000103, 0x000103},
      {MessageType::request, 0xfffffe, 0, 0xfffffe},
  };
  for (const Case& c : cases) {
    std::uint32_t qpn = 0;
    const std::vector<std::uint8_t> frame = frame_of(c.type, c.sender, c.receiver);
    EXPECT_TRUE(peek_owner_qpn(frame, qpn)) << to_string(c.type);
    EXPECT_EQ(qpn, c.owner) << to_string(c.type);
    // The same from the first segment only, down to the receiver's QPN
    // (the MAD after BTH and DETH; the QPN at 20 in the attribute data).
    std::size_t bth = 0;
    ASSERT_TRUE(wire::peek_bth_offset(frame, bth));
    const std::size_t enough = bth + 12 + 8 + mad_header_size + 20 + 4;
    qpn = 0;
    EXPECT_TRUE(peek_owner_qpn(std::span(frame).first(enough), qpn));
    EXPECT_EQ(qpn, c.owner);
    EXPECT_FALSE(peek_owner_qpn(std::span(frame).first(enough - 1), qpn));
  }
  std::uint32_t qpn = 0;
  // Neither QPN: nothing to go by.
  EXPECT_FALSE(peek_owner_qpn(frame_of(MessageType::reject, 0, 0), qpn));
  // Another management class (the IBTA CM's is 0x07).
  std::vector<std::uint8_t> other = frame_of(MessageType::request, 0x103, 0);
  std::size_t bth = 0;
  ASSERT_TRUE(wire::peek_bth_offset(other, bth));
  other[bth + 20 + 1] = 0x07;
  EXPECT_FALSE(peek_owner_qpn(other, qpn));
  // Not to QP 1, or not a UD SEND ONLY.
  std::vector<std::uint8_t> to_qp2 = frame_of(MessageType::request, 0x103, 0);
  to_qp2[bth + 7] = 2;
  EXPECT_FALSE(peek_owner_qpn(to_qp2, qpn));
  std::vector<std::uint8_t> rc = frame_of(MessageType::request, 0x103, 0);
  rc[bth] = 0x04;  // RC SEND ONLY
  EXPECT_FALSE(peek_owner_qpn(rc, qpn));
  // Not RoCEv2 at all.
  EXPECT_FALSE(peek_owner_qpn(std::span(other).first(30), qpn));
}

}  // namespace
}  // namespace metaroce::cm
