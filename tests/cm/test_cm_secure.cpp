// The connection manager with security: HMAC on every message, per
// connection keys from X25519 + HKDF, and the refusals (a peer without
// security, another key file, another protection, a forged REQ).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cm/manager.hpp"
#include "timer/wheel.hpp"
#include "transport/connection.hpp"
#include "wire/byte_order.hpp"
#include "wire/icrc.hpp"

namespace metaroce::cm {
namespace {

constexpr wire::MacAddress client_mac{0x02, 0, 0, 0, 0, 0x01};
constexpr wire::MacAddress server_mac{0x02, 0, 0, 0, 0, 0x02};
constexpr std::uint32_t client_ip = 0x0a000001;
constexpr std::uint32_t server_ip = 0x0a000102;
constexpr Time ms = 1'000'000;

secure::Psk psk(std::uint8_t salt) {
  secure::Psk k{};
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<std::uint8_t>(i * 5 + salt);
  return k;
}

ManagerConfig side(wire::MacAddress mac, std::uint32_t ip, std::uint64_t seed, bool secure, std::uint8_t key = 1,
                   secure::Protection protection = secure::Protection::encrypt) {
  ManagerConfig c;
  c.local.local_mac = mac;
  c.local.local_ipv4 = ip;
  c.seed = seed;
  c.retries = 3;
  c.retry_interval = 100 * ms;
  c.secure = secure;
  c.psk = psk(key);
  c.protection = protection;
  return c;
}

ConnectRequest request() {
  ConnectRequest r;
  r.connection.mode = transport::Mode::metaroce;
  r.connection.mtu = 1024;
  r.connection.paths = 2;
  r.connection.streams = 1;
  r.connection.endpoints.peer_ipv4 = server_ip;
  r.connection.endpoints.peer_mac = server_mac;
  r.cc = "metaroce";
  return r;
}

struct Wire {
  Wire(const ManagerConfig& server_config, const ManagerConfig& client_config)
      : client(client_config), server(server_config) {
    server.listen([this](const transport::ConnectionConfig& c, const Message&, std::vector<std::uint8_t>&) {
      accepted.push_back(c);
      return RejectReason::none;
    });
  }
  Manager client;
  Manager server;
  std::vector<transport::ConnectionConfig> accepted;
  std::vector<Event> client_events, server_events;
  std::vector<std::vector<std::uint8_t>> to_server, to_client;

  static void deliver(Manager& m, Time now, const std::vector<std::uint8_t>& frame) {
    wire::ParsedFrame p;
    ASSERT_EQ(wire::parse_frame(frame, p), wire::ParseError::ok);
    m.on_frame(now, p);
  }
  void settle(Time now) {
    for (int i = 0; i < 10; ++i) {
      to_server.clear();
      to_client.clear();
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

// A frame's ICRC made right again after a change (a forger's last step).
void fix_icrc(std::vector<std::uint8_t>& f) {
  wire::ParsedFrame p;
  ASSERT_EQ(wire::parse_frame(f, p, wire::ParseOptions{true, false}), wire::ParseError::ok);
  const std::size_t at = f.size() - wire::icrc_size;
  wire::store_le32(f.data() + at, wire::compute_icrc(wire::ByteSpan(f.data() + p.l3_offset, at - p.l3_offset)));
}

TEST(CmSecure, BothEndsDeriveTheSameCrossedKeys) {
  Wire w(side(server_mac, server_ip, 22, true), side(client_mac, client_ip, 11, true));
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u) << error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u) << error;
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 2u);
  ASSERT_EQ(w.accepted.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    const Event& e = w.client_events[k];
    ASSERT_EQ(e.kind, EventKind::established) << e.error;
    const transport::ConnectionConfig& c = e.config;
    const transport::ConnectionConfig& s = w.accepted[c.peer_qpn == w.accepted[0].local_qpn ? 0 : 1];
    ASSERT_EQ(c.peer_qpn, s.local_qpn);
    EXPECT_TRUE(c.security.enabled);
    EXPECT_TRUE(s.security.enabled);
    EXPECT_EQ(c.security.tx_key, s.security.rx_key);
    EXPECT_EQ(c.security.rx_key, s.security.tx_key);
    EXPECT_NE(c.security.tx_key, c.security.rx_key);
    EXPECT_EQ(c.security.tx_spi, s.local_qpn);  // a direction's SPI is its receiver's QPN
    EXPECT_EQ(c.security.rx_spi, c.local_qpn);
    EXPECT_EQ(s.security.tx_spi, c.local_qpn);
    EXPECT_EQ(c.security.protection, secure::Protection::encrypt);
  }
  // Each connection its own keys.
  EXPECT_NE(w.client_events[0].config.security.tx_key, w.client_events[1].config.security.tx_key);
  EXPECT_EQ(w.client.counters().bad_mac_messages + w.server.counters().bad_mac_messages, 0u);
  EXPECT_EQ(w.server.counters().ready_received, 2u);  // the RTUs authenticated too
}

// The derived keys make two transport connections that talk.
TEST(CmSecure, DerivedKeysCarryAWrite) {
  Wire w(side(server_mac, server_ip, 22, true), side(client_mac, client_ip, 11, true));
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u) << error;
  w.settle(0);
  ASSERT_EQ(w.client_events.size(), 1u);
  ASSERT_EQ(w.accepted.size(), 1u);
  transport::MemoryRegistry mem_c, mem_s;
  timer::Wheel wheel_c{0}, wheel_s{0};
  auto c = transport::Connection::create(w.client_events[0].config, mem_c, wheel_c, nullptr, error);
  ASSERT_TRUE(c) << error;
  auto s = transport::Connection::create(w.accepted[0], mem_s, wheel_s, nullptr, error);
  ASSERT_TRUE(s) << error;
  EXPECT_TRUE(c->secure());
  EXPECT_TRUE(s->secure());
  c->connect();
  s->connect();
  std::vector<std::uint8_t> src(2000), dst(2000, 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 31 + 7);
  const std::uint32_t lkey = mem_c.register_region(src.data(), src.size(), transport::access_local_write);
  const std::uint32_t rkey = mem_s.register_region(dst.data(), dst.size(),
                                                   transport::access_local_write | transport::access_remote_write);
  transport::SendRequest r;
  r.wr_id = 1;
  r.op = transport::SendOp::write;
  r.local_addr = src.data();
  r.length = src.size();
  r.lkey = lkey;
  r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
  r.rkey = rkey;
  ASSERT_EQ(c->post_send(r), transport::PostResult::ok);
  transport::TxBatch batch;
  c->poll(1000, batch);
  ASSERT_EQ(batch.size(), 2u);
  wire::ParseOptions with;
  with.secure_trailer = true;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    std::vector<std::uint8_t> f;
    batch.serialize(i, f);
    wire::ParsedFrame p;
    ASSERT_EQ(wire::parse_frame(f, p, with), wire::ParseError::ok);
    s->on_frame(2000, p);
  }
  EXPECT_EQ(dst, src);
  EXPECT_EQ(s->counters().secure_frames_opened, 2u);
}

TEST(CmSecure, AnotherKeyFileIsRefusedWithACounterAndAClearError) {
  Wire w(side(server_mac, server_ip, 22, true, 1), side(client_mac, client_ip, 11, true, 2));
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u) << error;
  w.settle(0);
  EXPECT_TRUE(w.accepted.empty());
  EXPECT_EQ(w.server.counters().bad_mac_messages, 1u);
  EXPECT_EQ(w.server.counters().established, 0u);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::failed);
  EXPECT_NE(w.client_events[0].error.find("different key files"), std::string::npos) << w.client_events[0].error;
}

TEST(CmSecure, APeerWithoutSecurityIsRefusedByASecureServer) {
  Wire w(side(server_mac, server_ip, 22, true), side(client_mac, client_ip, 11, false));
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u) << error;
  w.settle(0);
  EXPECT_TRUE(w.accepted.empty());
  EXPECT_EQ(w.server.counters().unauthenticated_messages, 1u);
  EXPECT_EQ(w.server.counters().rejects_sent, 1u);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::failed);
  EXPECT_NE(w.client_events[0].error.find("the server runs --secure"), std::string::npos) << w.client_events[0].error;
}

TEST(CmSecure, ASecureClientRefusesAServerWithoutSecurity) {
  Wire w(side(server_mac, server_ip, 22, false), side(client_mac, client_ip, 11, true));
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u) << error;
  w.settle(0);
  EXPECT_EQ(w.client.counters().unauthenticated_messages, 1u);
  EXPECT_EQ(w.client.counters().established, 0u);
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::failed);
  EXPECT_NE(w.client_events[0].error.find("answered without security"), std::string::npos)
      << w.client_events[0].error;
}

TEST(CmSecure, AnotherProtectionIsRefused) {
  Wire w(side(server_mac, server_ip, 22, true), side(client_mac, client_ip, 11, true, 1, secure::Protection::auth_only));
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u) << error;
  w.settle(0);
  EXPECT_TRUE(w.accepted.empty());
  ASSERT_EQ(w.client_events.size(), 1u);
  EXPECT_EQ(w.client_events[0].kind, EventKind::failed);
  EXPECT_NE(w.client_events[0].error.find("only authenticates"), std::string::npos) << w.client_events[0].error;
}

// A REQ that spoofs a live connection's client (its address and QPN, a new
// nonce) without the key supersedes nothing.
TEST(CmSecure, AForgedRequestSupersedesNothing) {
  Wire w(side(server_mac, server_ip, 22, true), side(client_mac, client_ip, 11, true));
  std::string error;
  ASSERT_NE(w.client.connect(0, request(), error), 0u) << error;
  w.settle(0);
  ASSERT_EQ(w.accepted.size(), 1u);
  const transport::ConnectionConfig& live = w.accepted[0];
  Message forged;
  forged.type = MessageType::request;
  forged.nonce = 0x1234567;
  forged.sender_qpn = live.peer_qpn;
  forged.mtu = 1024;
  forged.paths = 2;
  forged.streams = 1;
  forged.cc = "metaroce";
  transport::Endpoints e;
  e.local_mac = client_mac;
  e.local_ipv4 = client_ip;
  e.peer_mac = server_mac;
  e.peer_ipv4 = server_ip;
  // Without the extension, then with one under another key.
  Wire::deliver(w.server, 1 * ms, build_frame(e, 49151, forged));
  forged.secured = true;
  const secure::Psk other = psk(9);
  Wire::deliver(w.server, 1 * ms, build_frame(e, 49151, forged, &other));
  std::vector<Event> events;
  w.server.take_events(events);
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(w.server.counters().superseded, 0u);
  EXPECT_EQ(w.server.counters().unauthenticated_messages, 1u);
  EXPECT_EQ(w.server.counters().bad_mac_messages, 1u);
  EXPECT_EQ(w.accepted.size(), 1u);
  // A genuine REQ's bytes changed (its MTU) and the ICRC fixed: refused.
  ASSERT_NE(w.client.connect(2 * ms, request(), error), 0u) << error;
  std::vector<std::vector<std::uint8_t>> frames;
  w.client.poll(2 * ms, frames);
  ASSERT_EQ(frames.size(), 1u);
  wire::ParsedFrame p;
  ASSERT_EQ(wire::parse_frame(frames[0], p), wire::ParseError::ok);
  const std::size_t mad_at = static_cast<std::size_t>(p.payload.data() - frames[0].data());
  frames[0][mad_at + mad_header_size + 27] ^= 0x01;
  fix_icrc(frames[0]);
  Wire::deliver(w.server, 2 * ms, frames[0]);
  EXPECT_EQ(w.server.counters().bad_mac_messages, 2u);
  EXPECT_EQ(w.accepted.size(), 1u);
}

TEST(SecureKeys, KeyFileChecks) {
  const std::string dir = ::testing::TempDir();
  const auto write = [&](const std::string& name, std::size_t bytes, unsigned mode) {
    const std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    for (std::size_t i = 0; i < bytes; ++i) std::fputc(static_cast<int>(i * 17 + 3) & 0xff, f);
    std::fclose(f);
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  };
  secure::Psk k{};
  std::string error;
  EXPECT_FALSE(secure::load_psk(dir + "/no-such-key", k, error));
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
  EXPECT_FALSE(secure::load_psk(write("short.key", 31, 0600), k, error));
  EXPECT_NE(error.find("holds 31 bytes"), std::string::npos) << error;
  EXPECT_FALSE(secure::load_psk(write("open.key", 32, 0644), k, error));
  EXPECT_NE(error.find("chmod 600"), std::string::npos) << error;
  ASSERT_TRUE(secure::load_psk(write("good.key", 32, 0600), k, error)) << error;
  secure::Psk k2{};
  ASSERT_TRUE(secure::load_psk(write("long.key", 64, 0400), k2, error)) << error;
  EXPECT_NE(k, k2);
  EXPECT_NE(k, secure::Psk{});
}

}  // namespace
}  // namespace metaroce::cm
