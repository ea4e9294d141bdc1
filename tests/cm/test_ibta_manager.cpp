// The connection manager with ManagerConfig::ibta_cm: the same handshake,
// its frames IBTA CM MADs (class 0x07) as rdma_cm sends them.
#include <gtest/gtest.h>

#include "cm/ibta_cm.hpp"
#include "cm/manager.hpp"

namespace metaroce::cm {
namespace {

constexpr wire::MacAddress client_mac{0x02, 0, 0, 0, 0, 0x01};
constexpr wire::MacAddress server_mac{0x02, 0, 0, 0, 0, 0x02};
constexpr std::uint32_t client_ip = 0x0a000001;
constexpr std::uint32_t server_ip = 0x0a000102;

ManagerConfig side(wire::MacAddress mac, std::uint32_t ip, std::uint64_t seed) {
  ManagerConfig c;
  c.local.local_mac = mac;
  c.local.local_ipv4 = ip;
  c.seed = seed;
  c.retries = 5;
  c.ibta_cm = true;
  return c;
}

ConnectRequest request(transport::Mode mode = transport::Mode::rocev2) {
  ConnectRequest r;
  r.connection.mode = mode;
  r.connection.mtu = 4096;
  r.connection.endpoints.peer_ipv4 = server_ip;
  r.connection.endpoints.peer_mac = server_mac;
  r.connection.max_outstanding_reads = 8;
  r.cc = "dcqcn";
  r.private_data = {1, 2, 3, 4};
  return r;
}

struct Wire {
  Manager client{side(client_mac, client_ip, 11)};
  Manager server{side(server_mac, server_ip, 22)};
  std::vector<transport::ConnectionConfig> accepted;
  std::vector<Message> requests_seen;
  std::vector<Event> client_events, server_events;
  std::vector<ibta::Attribute> sent;  // every frame's attribute, in order
  std::vector<ibta::Message> messages;

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
  void deliver(Manager& m, Time now, const std::vector<std::uint8_t>& frame) {
    wire::ParsedFrame p;
    ASSERT_EQ(wire::parse_frame(frame, p), wire::ParseError::ok);
    ibta::Message x;
    ASSERT_EQ(ibta::decode(p, x), ibta::DecodeError::ok);
    sent.push_back(x.attribute);
    messages.push_back(x);
    m.on_frame(now, p);
  }
  void settle(Time now) {
    for (int i = 0; i < 10; ++i) {
      std::vector<std::vector<std::uint8_t>> to_server, to_client;
      client.poll(now, to_server);
      server.poll(now, to_client);
      if (to_server.empty() && to_client.empty()) break;
      for (const auto& f : to_server) deliver(server, now, f);
      for (const auto& f : to_client) deliver(client, now, f);
    }
    client.take_events(client_events);
    server.take_events(server_events);
  }
};

TEST(IbtaManager, ReqRepRtuThenDreqDrepAsIbtaMads) {
  Wire w;
  w.listen();
  std::string error;
  const std::uint64_t id = w.client.connect(0, request(), error);
  ASSERT_NE(id, 0u) << error;
  w.settle(0);
  ASSERT_EQ(w.sent, (std::vector<ibta::Attribute>{ibta::Attribute::req, ibta::Attribute::rep, ibta::Attribute::rtu}));
  ASSERT_EQ(w.client_events.size(), 1u);
  const Event& e = w.client_events[0];
  ASSERT_EQ(e.kind, EventKind::established) << e.error;
  ASSERT_EQ(w.accepted.size(), 1u);
  const transport::ConnectionConfig& c = e.config;
  const transport::ConnectionConfig& s = w.accepted[0];
  EXPECT_EQ(c.local_qpn, s.peer_qpn);
  EXPECT_EQ(c.peer_qpn, s.local_qpn);
  EXPECT_EQ(c.initial_psn, s.peer_initial_psn);
  EXPECT_EQ(c.peer_initial_psn, s.initial_psn);
  EXPECT_EQ(c.pkey, 0xffff);
  EXPECT_EQ(s.pkey, 0xffff);
  EXPECT_EQ(c.mtu, 4096u);
  EXPECT_EQ(s.mtu, 4096u);
  EXPECT_EQ(s.mode, transport::Mode::rocev2);
  EXPECT_EQ(s.max_outstanding_reads, 8u);
  EXPECT_EQ(c.max_outstanding_reads, 8u);
  EXPECT_EQ(s.endpoints.peer_ipv4, client_ip);
  EXPECT_EQ(transport::validate(c), "");
  EXPECT_EQ(transport::validate(s), "");
  // What the REQ and REP say, as an rdma_cm peer reads them.
  const ibta::Message& req = w.messages[0];
  EXPECT_EQ(req.local_comm_id, w.messages[1].remote_comm_id);
  EXPECT_EQ(req.local_qpn, c.local_qpn);
  EXPECT_EQ(req.starting_psn, c.initial_psn);
  EXPECT_EQ(req.path_mtu, 5);
  EXPECT_EQ(req.pkey, 0xffff);
  EXPECT_EQ(req.service_id, ibta::rdma_cm_service_id(18515));
  EXPECT_EQ(req.primary.remote_gid, ibta::ipv4_gid(server_ip));
  ibta::RdmaCmHeader h;
  ASSERT_TRUE(ibta::decode_rdma_cm_private(req.private_data, h));
  EXPECT_EQ(h.src_ipv4, client_ip);
  EXPECT_EQ(h.dst_ipv4, server_ip);
  EXPECT_EQ(req.private_data[36], 1);
  EXPECT_EQ(req.private_data[39], 4);
  EXPECT_EQ(w.messages[1].local_qpn, s.local_qpn);
  EXPECT_EQ(w.messages[2].remote_comm_id, w.messages[1].local_comm_id);
  ASSERT_EQ(w.requests_seen.size(), 1u);
  ASSERT_GE(w.requests_seen[0].private_data.size(), 4u);
  EXPECT_EQ(w.requests_seen[0].private_data[3], 4);
  ASSERT_GE(e.peer_private_data.size(), 3u);
  EXPECT_EQ(e.peer_private_data[0], 9);
  EXPECT_EQ(e.peer_private_data[2], 7);
  ASSERT_EQ(w.server_events.size(), 1u);
  EXPECT_EQ(w.server_events[0].kind, EventKind::ready);
  EXPECT_EQ(w.server.counters().ready_received, 1u);

  ASSERT_TRUE(w.client.disconnect(1000, id, {'b', 'y', 'e'}, error)) << error;
  w.settle(1000);
  ASSERT_EQ(w.sent.size(), 5u);
  EXPECT_EQ(w.sent[3], ibta::Attribute::dreq);
  EXPECT_EQ(w.sent[4], ibta::Attribute::drep);
  EXPECT_EQ(w.messages[3].remote_qpn, s.local_qpn);
  ASSERT_EQ(w.server_events.size(), 2u);
  EXPECT_EQ(w.server_events[1].kind, EventKind::disconnected);
  EXPECT_EQ(w.server_events[1].peer_private_data[0], 'b');
  ASSERT_EQ(w.client_events.size(), 2u);
  EXPECT_EQ(w.client_events[1].kind, EventKind::disconnected);
  EXPECT_EQ(w.client.counters().disconnected, 1u);
  EXPECT_EQ(w.server.counters().disconnected, 1u);
  EXPECT_EQ(w.client.counters().malformed_messages + w.server.counters().malformed_messages, 0u);
}

// A REQ as an rdma_cm client sends it (its own communication ID, QPN and
// PSN, rdma_cm's header before the application's private data), built
// here field by field: the server answers with a REP naming that ID and
// takes the RTU that follows.
TEST(IbtaManager, AnswersARequestAsRdmaCmSendsIt) {
  Manager server{side(server_mac, server_ip, 5)};
  std::vector<transport::ConnectionConfig> accepted;
  std::vector<std::uint8_t> seen_private;
  server.listen([&](const transport::ConnectionConfig& c, const Message& m, std::vector<std::uint8_t>& reply) {
    accepted.push_back(c);
    seen_private = m.private_data;
    reply = {0x42};
    return RejectReason::none;
  });
  ibta::Message req;
  req.attribute = ibta::Attribute::req;
  req.transaction_id = 0x0000000300000007ull;
  req.local_comm_id = 0x7e57c0de;
  req.service_id = ibta::rdma_cm_service_id(7471);
  req.local_qpn = 0x0000d1;
  req.starting_psn = 0x00abcd;
  req.responder_resources = 4;
  req.initiator_depth = 4;
  req.remote_cm_response_timeout = 20;
  req.local_cm_response_timeout = 20;
  req.retry_count = 7;
  req.rnr_retry_count = 7;
  req.max_cm_retries = 15;
  req.pkey = 0xffff;
  req.path_mtu = ibta::mtu_code(1024);
  req.primary.local_gid = ibta::ipv4_gid(client_ip);
  req.primary.remote_gid = ibta::ipv4_gid(server_ip);
  req.primary.local_ack_timeout = 18;
  std::string error;
  ASSERT_TRUE(ibta::encode_rdma_cm_private(ibta::RdmaCmHeader{4, 50123, client_ip, server_ip},
                                           std::vector<std::uint8_t>{'h', 'i'}, req.private_data, error));
  transport::Endpoints from;
  from.local_mac = client_mac;
  from.peer_mac = server_mac;
  from.local_ipv4 = client_ip;
  from.peer_ipv4 = server_ip;
  const auto deliver = [&](const ibta::Message& m) {
    wire::ParsedFrame p;
    const std::vector<std::uint8_t> frame = ibta::build_frame(from, 49151, m);
    ASSERT_EQ(wire::parse_frame(frame, p), wire::ParseError::ok);
    server.on_frame(0, p);
  };
  deliver(req);
  std::vector<std::vector<std::uint8_t>> out;
  server.poll(0, out);
  ASSERT_EQ(out.size(), 1u);
  wire::ParsedFrame p;
  ASSERT_EQ(wire::parse_frame(out[0], p), wire::ParseError::ok);
  ibta::Message rep;
  ASSERT_EQ(ibta::decode(p, rep), ibta::DecodeError::ok);
  ASSERT_EQ(rep.attribute, ibta::Attribute::rep);
  EXPECT_EQ(rep.remote_comm_id, 0x7e57c0deu);
  ASSERT_EQ(accepted.size(), 1u);
  const transport::ConnectionConfig& c = accepted[0];
  EXPECT_EQ(rep.local_qpn, c.local_qpn);
  EXPECT_EQ(rep.local_comm_id, c.local_qpn);
  EXPECT_EQ(rep.starting_psn, c.initial_psn);
  EXPECT_EQ(rep.responder_resources, 4);
  EXPECT_EQ(rep.private_data[0], 0x42);
  EXPECT_EQ(c.peer_qpn, 0x0000d1u);
  EXPECT_EQ(c.peer_initial_psn, 0x00abcdu);
  EXPECT_EQ(c.mtu, 1024u);
  EXPECT_EQ(c.mode, transport::Mode::rocev2);
  EXPECT_EQ(c.pkey, 0xffff);
  EXPECT_EQ(c.max_outstanding_reads, 4u);
  EXPECT_EQ(c.base_src_port, 50123);
  EXPECT_EQ(c.endpoints.peer_ipv4, client_ip);
  ASSERT_GE(seen_private.size(), 2u);
  EXPECT_EQ(seen_private[0], 'h');
  EXPECT_EQ(seen_private[1], 'i');

  ibta::Message rtu;
  rtu.attribute = ibta::Attribute::rtu;
  rtu.local_comm_id = req.local_comm_id;
  rtu.remote_comm_id = rep.local_comm_id;
  deliver(rtu);
  std::vector<Event> events;
  server.take_events(events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, EventKind::ready);
  EXPECT_EQ(events[0].id, c.local_qpn);
  EXPECT_EQ(server.counters().ready_received, 1u);
  EXPECT_EQ(server.counters().stale_messages, 0u);
}

TEST(IbtaManager, RejectCarriesTheReason) {
  Wire w;
  w.listen(RejectReason::refused);
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u) << error;
  w.settle(0);
  ASSERT_EQ(w.sent, (std::vector<ibta::Attribute>{ibta::Attribute::req, ibta::Attribute::rej}));
  EXPECT_EQ(w.messages[1].reason, 28);  // consumer reject
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::failed);
  EXPECT_NE(w.client_events[0].error.find("refused"), std::string::npos) << w.client_events[0].error;
}

TEST(IbtaManager, RefusesMetaroceModeAndLongPrivateData) {
  Manager m{side(client_mac, client_ip, 1)};
  std::string error;
  EXPECT_EQ(m.connect(0, request(transport::Mode::metaroce), error), 0u);
  EXPECT_EQ(error, "the IBTA CM sets up rocev2 connections only (--mode rocev2)");
  ConnectRequest r = request();
  r.private_data.assign(57, 0);
  EXPECT_EQ(m.connect(0, r, error), 0u);
  EXPECT_EQ(error, "57 bytes of private data: the IBTA CM's REQ carries at most 56 after rdma_cm's header");
}

TEST(IbtaManager, OwnMessagesAreNotUnderstoodByAnIbtaManager) {
  ManagerConfig own = side(client_mac, client_ip, 3);
  own.ibta_cm = false;
  Manager client{own};
  Manager server{side(server_mac, server_ip, 4)};
  server.listen([](const transport::ConnectionConfig&, const Message&, std::vector<std::uint8_t>&) {
    return RejectReason::none;
  });
  std::string error;
  ASSERT_NE(client.connect(0, request(), error), 0u) << error;
  std::vector<std::vector<std::uint8_t>> frames;
  client.poll(0, frames);
  ASSERT_EQ(frames.size(), 1u);
  wire::ParsedFrame p;
  ASSERT_EQ(wire::parse_frame(frames[0], p), wire::ParseError::ok);
  server.on_frame(0, p);
  EXPECT_EQ(server.counters().malformed_messages, 1u);
  EXPECT_EQ(server.counters().requests_received, 0u);
}

}  // namespace
}  // namespace metaroce::cm
