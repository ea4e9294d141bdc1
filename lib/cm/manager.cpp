#include "cm/manager.hpp"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "wire/ip_address.hpp"

namespace metaroce::cm {
namespace {

std::string address_of(const transport::Endpoints& e) {
  return e.ip_version == 4 ? wire::to_string(wire::IpAddress::v4(e.peer_ipv4))
                           : wire::to_string(wire::IpAddress::v6(e.peer_ipv6));
}

std::string mac_of(const wire::MacAddress& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
}

}  // namespace

bool pair_keys(const secure::Psk& psk, secure::Protection protection, std::uint32_t qpn_a, std::uint32_t qpn_b,
               transport::SecurityConfig& a, transport::SecurityConfig& b) {
  constexpr std::string_view label = "metaroce pair v1 keys";
  std::vector<std::uint8_t> info(label.begin(), label.end());
  for (const std::uint32_t v : {qpn_a, qpn_b})
    for (int k = 3; k >= 0; --k) info.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
  std::array<std::uint8_t, 2 * secure::max_key_bytes> okm{};
  if (!secure::hkdf(psk, psk, info, okm)) return false;
  a = transport::SecurityConfig{};
  a.enabled = true;
  a.protection = protection;
  std::copy(okm.begin(), okm.begin() + secure::max_key_bytes, a.tx_key.begin());
  std::copy(okm.begin() + secure::max_key_bytes, okm.end(), a.rx_key.begin());
  a.tx_spi = qpn_b;  // a direction's SPI is its receiver's QPN
  a.rx_spi = qpn_a;
  b = a;
  std::swap(b.tx_key, b.rx_key);
  std::swap(b.tx_spi, b.rx_spi);
  std::fill(okm.begin(), okm.end(), 0);
  return true;
}

Manager::Manager(const ManagerConfig& config) : config_(config) {
  if (config.seed != 0) random_.seed(config.seed);
  for (std::size_t i = 0; i < cookie_key_.size(); i += 8) {
    const std::uint64_t r = draw();
    for (std::size_t k = 0; k < 8; ++k) cookie_key_[i + k] = static_cast<std::uint8_t>(r >> (8 * k));
  }
}

std::uint32_t Manager::cookie_for(const PeerKey& key, std::uint32_t nonce) const noexcept {
  std::vector<std::uint8_t> data(key.first.begin(), key.first.end());
  for (const std::uint32_t v : {key.second, nonce})
    for (int k = 3; k >= 0; --k) data.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
  const secure::Mac mac = secure::hmac(cookie_key_, data);
  const std::uint32_t c = std::uint32_t{mac[0]} << 24 | std::uint32_t{mac[1]} << 16 | std::uint32_t{mac[2]} << 8 | mac[3];
  return c == 0 ? 1 : c;
}

std::uint64_t Manager::draw() {
  if (config_.seed != 0) return random_();
  if (drawn_left_ == 0) {
    // Blocks only before the kernel's pool is first initialised (early boot).
    auto* bytes = reinterpret_cast<unsigned char*>(drawn_.data());
    std::size_t got = 0;
    while (got < sizeof(drawn_)) {
      const ssize_t n = getrandom(bytes + got, sizeof(drawn_) - got, 0);
      if (n > 0) {
        got += static_cast<std::size_t>(n);
      } else if (n < 0 && errno != EINTR) {
        // No getrandom (a kernel before 3.17): std::random_device reads
        // /dev/urandom, the same source.
        std::random_device device;
        for (std::size_t i = got; i < sizeof(drawn_); ++i) bytes[i] = static_cast<unsigned char>(device());
        got = sizeof(drawn_);
      }
    }
    drawn_left_ = drawn_.size();
  }
  return drawn_[--drawn_left_];
}

std::uint16_t Manager::pkey_for(transport::Mode mode, std::uint32_t nonce) const noexcept {
  return mode == transport::Mode::rocev2 ? config_.pkey : pkey_of(nonce);
}

std::uint32_t Manager::new_qpn(std::uint16_t queue) {
  const std::uint32_t queues = std::max<std::uint16_t>(config_.queues, 1);
  for (;;) {
    // A random QPN moved to the wanted queue (qpn % queues == queue).
    auto qpn = static_cast<std::uint32_t>(draw() & wire::qpn_mask);
    qpn = qpn - qpn % queues + queue % queues;
    if (qpn > gsi_qpn && qpn <= wire::qpn_mask && !qpn_to_peer_.contains(qpn)) return qpn;
  }
}

void Manager::offer_planes(Message& m, std::uint16_t planes) const {
  m.planes = planes;
  m.ip_version = config_.local.ip_version;
  for (std::uint16_t k = 1; k < planes; ++k) {
    const transport::PlaneAddresses& a = config_.local_planes[k];
    m.plane_addresses[k - 1] = PlaneAddress{a.local_mac, a.local_ipv4, a.local_ipv6};
  }
}

void Manager::take_planes(transport::ConnectionConfig& c, std::uint16_t planes, const Message& m) const {
  c.planes = planes;
  for (std::uint16_t k = 0; k < transport::max_planes; ++k) {
    transport::PlaneAddresses a = config_.local_planes[k];
    if (k > 0 && k < planes) {
      const PlaneAddress& peer = m.plane_addresses[k - 1];
      a.peer_mac = peer.mac;  // the peer's own port: a plane is one L2 fabric
      a.peer_ipv4 = peer.ipv4;
      a.peer_ipv6 = peer.ipv6;
    }
    c.plane[k] = a;
  }
}

std::vector<std::uint8_t> Manager::frame_of(const transport::Endpoints& endpoints, const Message& m) const {
  if (config_.ibta_cm) return ibta_frame_of(endpoints, m);
  if (!config_.secure) return build_frame(endpoints, config_.cm_src_port, m);
  Message s = m;
  s.secured = true;
  s.auth_only = config_.protection == secure::Protection::auth_only;
  return build_frame(endpoints, config_.cm_src_port, s, &config_.psk);
}

void Manager::send(const transport::Endpoints& endpoints, const Message& m) {
  out_.push_back(frame_of(endpoints, m));
}

bool Manager::derive_keys(const secure::EphemeralKey& mine, const secure::PublicKey& peer, bool client,
                          std::uint32_t nonce, std::uint32_t client_qpn, std::uint32_t server_qpn,
                          transport::SecurityConfig& out) const {
  std::array<std::uint8_t, 32> shared{};
  if (!mine.agree(peer, shared)) return false;
  // info: a label, the attempt and both public keys (client's first), so
  // the keys are this connection's and no other's.
  constexpr std::string_view label = "metaroce cm v1 keys";
  std::vector<std::uint8_t> info(label.begin(), label.end());
  const auto put32 = [&](std::uint32_t v) {
    for (int k = 3; k >= 0; --k) info.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
  };
  put32(nonce);
  put32(client_qpn);
  put32(server_qpn);
  const secure::PublicKey& client_pub = client ? mine.public_key() : peer;
  const secure::PublicKey& server_pub = client ? peer : mine.public_key();
  info.insert(info.end(), client_pub.begin(), client_pub.end());
  info.insert(info.end(), server_pub.begin(), server_pub.end());
  std::array<std::uint8_t, 2 * secure::max_key_bytes> okm{};
  const bool ok = secure::hkdf(config_.psk, shared, info, okm);
  std::fill(shared.begin(), shared.end(), 0);
  if (!ok) return false;
  out = transport::SecurityConfig{};
  out.enabled = true;
  out.algorithm = secure::Algorithm::aes256_gcm;
  out.protection = config_.protection;
  // Client to server first, then server to client; a direction's SPI is
  // its receiver's QPN.
  const auto c2s = std::span<const std::uint8_t>(okm.data(), secure::max_key_bytes);
  const auto s2c = std::span<const std::uint8_t>(okm.data() + secure::max_key_bytes, secure::max_key_bytes);
  std::copy(c2s.begin(), c2s.end(), (client ? out.tx_key : out.rx_key).begin());
  std::copy(s2c.begin(), s2c.end(), (client ? out.rx_key : out.tx_key).begin());
  out.tx_spi = client ? server_qpn : client_qpn;
  out.rx_spi = client ? client_qpn : server_qpn;
  std::fill(okm.begin(), okm.end(), 0);
  return true;
}

void Manager::fail_attempt(std::uint32_t nonce, const std::string& why) {
  const auto id = nonce_to_id_.find(nonce);
  if (id == nonce_to_id_.end()) {
    ++counters_.stale_messages;
    return;
  }
  Attempt& a = attempts_.at(id->second);
  if (a.done) return;
  settle(a);
  a.failed = true;
  qpn_to_peer_.erase(a.config.local_qpn);
  Event e;
  e.kind = EventKind::failed;
  e.id = id->second;
  e.error = fmt::format("{}: {}", address_of(a.config.endpoints), why);
  events_.push_back(std::move(e));
}

// Nothing an unauthenticated message says is kept: a REQ is answered with
// a REJ that is remembered nowhere (so it supersedes nothing), a REP ends
// the attempt it names (it can do no more than a dropped REP would: the
// attempt would time out), a REJ is taken as any REJ is, the rest dropped.
void Manager::refuse_unauthenticated(const wire::ParsedFrame& frame, const Message& m, RejectReason reason) {
  switch (m.type) {
    case MessageType::request: {
      Message answer;
      answer.type = MessageType::reject;
      answer.reason = reason;
      answer.nonce = m.nonce;
      answer.receiver_qpn = m.sender_qpn;
      answer.mode = m.mode;
      send(reply_endpoints(frame), answer);
      ++counters_.rejects_sent;
      break;
    }
    case MessageType::reply:
      fail_attempt(m.nonce, reason == RejectReason::security_required
                                ? "the server answered without security: run it with --secure and the same key file"
                                : "the server's reply does not authenticate: the two ends hold different key files");
      break;
    case MessageType::reject:
      // A cookie is taken from a server that authenticates only.
      if (m.reason != RejectReason::prove_address) on_reject(0, m);
      break;
    default: break;
  }
}

std::uint64_t Manager::connect(Time now, const ConnectRequest& request, std::string& error) {
  Attempt a;
  a.config = request.connection;
  const transport::Endpoints peer = a.config.endpoints;
  a.config.endpoints = config_.local;
  a.config.endpoints.peer_mac = peer.peer_mac;
  a.config.endpoints.peer_ipv4 = peer.peer_ipv4;
  a.config.endpoints.peer_ipv6 = peer.peer_ipv6;
  a.config.local_qpn = new_qpn(request.queue);
  a.config.initial_psn = static_cast<std::uint32_t>(draw() & wire::psn_mask);
  std::uint32_t nonce = 0;
  do nonce = static_cast<std::uint32_t>(draw()); while (nonce == 0 || nonce_to_id_.contains(nonce));
  a.config.pkey = pkey_for(a.config.mode, nonce);
  a.config.mtu = std::min(a.config.mtu, config_.max_mtu);
  // rocev2: an IB path MTU (what this port carries, rounded down).
  if (a.config.mode == transport::Mode::rocev2) a.config.mtu = transport::ib_mtu_at_most(a.config.mtu);
  if (a.config.planes > config_.planes) {
    error = fmt::format("{} planes asked, but this side has {} (ManagerConfig::planes)", a.config.planes,
                        config_.planes);
    return 0;
  }
  for (std::uint16_t k = 0; k < transport::max_planes; ++k) a.config.plane[k].port = config_.local_planes[k].port;
  if (std::string e = transport::validate(a.config); !e.empty()) {
    error = e;
    return 0;
  }
  a.cc = request.cc;
  Message& m = a.request;
  m.type = MessageType::request;
  m.mode = a.config.mode;
  m.nonce = nonce;
  m.sender_qpn = a.config.local_qpn;
  m.sender_psn = a.config.initial_psn;
  m.mtu = a.config.mtu;
  m.paths = a.config.paths;
  m.streams = a.config.streams;
  m.base_src_port = a.config.base_src_port;
  m.max_reads = static_cast<std::uint16_t>(a.config.max_outstanding_reads);
  offer_planes(m, a.config.planes);
  m.cc = request.cc;
  m.private_data = request.private_data;
  if (config_.secure) {
    if (!a.ephemeral.generate()) {
      error = "OpenSSL could not make an X25519 key (is libcrypto's default provider available?)";
      return 0;
    }
    m.public_key = a.ephemeral.public_key();
  }
  std::array<std::uint8_t, mad_size> check{};
  if (!encode_mad(m, check, error)) return 0;
  if (config_.ibta_cm && a.config.mode != transport::Mode::rocev2) {
    error = "the IBTA CM sets up rocev2 connections only (--mode rocev2)";
    return 0;
  }
  if (config_.ibta_cm && m.private_data.size() > ibta_max_request_private) {
    error = fmt::format("{} bytes of private data: the IBTA CM's REQ carries at most {} after rdma_cm's header",
                        m.private_data.size(), ibta_max_request_private);
    return 0;
  }
  (void)now;  // the first REQ leaves at the next poll() with room under max_requests_in_flight
  const std::uint64_t id = next_id_++;
  nonce_to_id_[nonce] = id;
  qpn_to_peer_[a.config.local_qpn] = {};
  attempts_[id] = std::move(a);
  unsent_.push_back(id);
  ++pending_;
  return id;
}

void Manager::settle(Attempt& a) {
  if (a.done) return;
  a.done = true;
  --pending_;
  if (!a.queued) --in_flight_;
}

void Manager::send_request(Time now, std::uint64_t id, Attempt& a) {
  send(a.config.endpoints, a.request);
  ++counters_.requests_sent;
  if (a.sent != 0) ++counters_.request_retries;
  ++a.sent;
  a.next_send = now + config_.retry_interval;
  retries_due_.emplace(a.next_send, id);
}

void Manager::time_out(std::uint64_t id, Attempt& a) {
  settle(a);
  a.failed = true;
  qpn_to_peer_.erase(a.config.local_qpn);
  ++counters_.timed_out;
  Event e;
  e.kind = EventKind::failed;
  e.id = id;
  e.error = fmt::format(
      "no answer from {} after {} connection requests over {:.1f} s: is the server running there, "
      "and is {} the MAC of the next hop towards it?",
      address_of(a.config.endpoints), a.sent, double(a.sent) * double(config_.retry_interval) / 1e9,
      mac_of(a.config.endpoints.peer_mac));
  events_.push_back(std::move(e));
}

void Manager::forget(std::uint32_t local_qpn) {
  const auto it = qpn_to_peer_.find(local_qpn);
  if (it == qpn_to_peer_.end()) return;
  const auto accepted = accepted_.find(it->second);
  // A connection closed by DREQ keeps its entry, so that a repeated DREQ
  // (our DREP was lost) is answered; it no longer counts against
  // max_connections.
  if (accepted != accepted_.end() && accepted->second.local_qpn == local_qpn && !accepted->second.closed)
    accepted_.erase(accepted);
  qpn_to_peer_.erase(it);
}

transport::Endpoints Manager::reply_endpoints(const wire::ParsedFrame& frame) const {
  transport::Endpoints e = config_.local;
  e.peer_mac = frame.ethernet().src;  // the next hop back: the peer, or the router in between
  e.ip_version = frame.ip_version;
  if (frame.ip_version == 4)
    e.peer_ipv4 = frame.ipv4().src;
  else
    e.peer_ipv6 = frame.ipv6().src;
  return e;
}

void Manager::on_frame(Time now, const wire::ParsedFrame& frame) {
  Message m;
  if (config_.ibta_cm ? !ibta_decode(frame, m) : decode(frame, m) != DecodeError::ok) {
    ++counters_.malformed_messages;
    return;
  }
  if (config_.secure && !m.secured) {
    ++counters_.unauthenticated_messages;
    refuse_unauthenticated(frame, m, RejectReason::security_required);
    return;
  }
  if (config_.secure && !authentic(frame, config_.psk)) {
    ++counters_.bad_mac_messages;
    refuse_unauthenticated(frame, m, RejectReason::authentication_failed);
    return;
  }
  switch (m.type) {
    case MessageType::request: on_request(now, frame, m); break;
    case MessageType::reply: on_reply(frame, m); break;
    case MessageType::ready: on_ready(frame, m); break;
    case MessageType::reject: on_reject(now, m); break;
    case MessageType::disconnect: on_disconnect(frame, m); break;
    case MessageType::disconnect_reply: on_disconnect_reply(m); break;
  }
}

Manager::PeerKey Manager::peer_key(const wire::ParsedFrame& frame, std::uint32_t peer_qpn) const {
  if (frame.ip_version == 4) return {fmt::format("4:{}", frame.ipv4().src), peer_qpn};
  const wire::Ipv6Address a = frame.ipv6().src;
  return {std::string(a.begin(), a.end()), peer_qpn};
}

void Manager::on_request(Time, const wire::ParsedFrame& frame, const Message& m) {
  ++counters_.requests_received;
  const transport::Endpoints peer = reply_endpoints(frame);
  const PeerKey key = peer_key(frame, m.sender_qpn);
  auto it = accepted_.find(key);
  if (it != accepted_.end() && it->second.nonce == m.nonce) {
    ++counters_.duplicate_requests;
    out_.push_back(it->second.answer);
    if (it->second.rejected)
      ++counters_.rejects_sent;
    else
      ++counters_.replies_sent;
    return;
  }
  if (it != accepted_.end()) {  // the same peer QP, a new nonce: the peer started over
    if (!it->second.rejected && !it->second.closed && m.cookie != cookie_for(key, m.nonce)) {
      // A live connection: replaced only by a REQ that echoes the cookie
      // sent to the peer's address. Nothing is remembered (the cookie is
      // computed again from the REQ); a wrong cookie gets no new one.
      if (m.cookie != 0) {
        ++counters_.bad_cookies;
        return;
      }
      Message challenge;
      challenge.type = MessageType::reject;
      challenge.reason = RejectReason::prove_address;
      challenge.nonce = m.nonce;
      challenge.receiver_qpn = m.sender_qpn;
      challenge.mode = m.mode;
      challenge.cookie = cookie_for(key, m.nonce);
      send(peer, challenge);
      ++counters_.address_challenges_sent;
      return;
    }
    if (!it->second.rejected) {
      ++counters_.superseded;
      Event e;
      e.kind = EventKind::superseded;
      e.id = it->second.local_qpn;
      events_.push_back(std::move(e));
      qpn_to_peer_.erase(it->second.local_qpn);
    }
    accepted_.erase(it);
  }

  Message answer;
  answer.nonce = m.nonce;
  answer.receiver_qpn = m.sender_qpn;
  answer.mode = m.mode;
  transport::ConnectionConfig c;
  c.mode = m.mode;
  c.endpoints = peer;
  c.peer_qpn = m.sender_qpn;
  c.peer_initial_psn = m.sender_psn;
  c.mtu = std::min(m.mtu, config_.max_mtu);
  if (m.mode == transport::Mode::rocev2) c.mtu = transport::ib_mtu_at_most(c.mtu);
  c.paths = m.mode == transport::Mode::rocev2 ? 1 : std::min(m.paths, config_.max_paths);
  c.streams = m.streams;
  // Planes: the smaller of both sides' and of the paths (each plane needs one).
  take_planes(c, std::max<std::uint16_t>(1, std::min({m.planes, config_.planes, c.paths})), m);
  // Like max_rd_atomic: the smaller of what the client asks and we allow.
  c.max_outstanding_reads =
      m.max_reads == 0 ? config_.max_outstanding_reads : std::min<std::uint32_t>(m.max_reads, config_.max_outstanding_reads);
  c.pkey = pkey_for(m.mode, m.nonce);
  RejectReason reason = RejectReason::none;
  std::vector<std::uint8_t> reply_private;
  secure::EphemeralKey ephemeral;  // secure: ours for this connection, gone once the REP is built
  if (m.version != protocol_version) {
    reason = RejectReason::unsupported_version;
  } else if (!accept_) {
    reason = RejectReason::not_listening;
  } else if (config_.own_queue_only &&
             m.sender_qpn % std::max<std::uint16_t>(config_.queues, 1) != config_.queue) {
    reason = RejectReason::wrong_queue;
    ++counters_.wrong_queue_refusals;
  } else if (qpn_to_peer_.size() >= config_.max_connections) {
    reason = RejectReason::no_resources;
  } else {
    c.local_qpn = new_qpn(static_cast<std::uint16_t>(m.sender_qpn % std::max<std::uint16_t>(config_.queues, 1)));
    c.initial_psn = static_cast<std::uint32_t>(draw() & wire::psn_mask);
    c.base_src_port = m.base_src_port;
    if (!transport::validate(c).empty()) reason = RejectReason::bad_parameters;
    if (reason == RejectReason::none && config_.secure) {
      if (m.auth_only != (config_.protection == secure::Protection::auth_only)) {
        reason = RejectReason::security_mismatch;
      } else if (!ephemeral.generate() || !derive_keys(ephemeral, m.public_key, false, m.nonce, m.sender_qpn,
                                                        c.local_qpn, c.security)) {
        ++counters_.key_agreement_failures;
        reason = RejectReason::bad_parameters;
      }
    }
    if (reason == RejectReason::none) reason = accept_(c, m, reply_private);
    if (reason == RejectReason::memory_limit) ++counters_.memory_refusals;
    if (reply_private.size() > max_private_data) reason = RejectReason::refused;
  }
  Accepted entry;
  entry.nonce = m.nonce;
  entry.peer = peer;
  if (reason == RejectReason::none) {
    answer.type = MessageType::reply;
    answer.sender_qpn = c.local_qpn;
    answer.sender_psn = c.initial_psn;
    answer.mtu = c.mtu;
    answer.paths = c.paths;
    answer.streams = c.streams;
    answer.base_src_port = c.base_src_port;
    answer.max_reads = static_cast<std::uint16_t>(c.max_outstanding_reads);
    offer_planes(answer, c.planes);
    answer.cc = m.cc;
    answer.private_data = std::move(reply_private);
    answer.public_key = ephemeral.public_key();
    entry.local_qpn = c.local_qpn;
    qpn_to_peer_[c.local_qpn] = key;
    ++counters_.replies_sent;
    ++counters_.established;
  } else {
    answer.type = MessageType::reject;
    answer.reason = reason;
    entry.rejected = true;
    ++counters_.rejects_sent;
  }
  entry.answer = frame_of(peer, answer);
  out_.push_back(entry.answer);
  accepted_[key] = std::move(entry);
}

void Manager::on_reply(const wire::ParsedFrame& frame, const Message& m) {
  ++counters_.replies_received;
  const auto id = nonce_to_id_.find(m.nonce);
  if (id == nonce_to_id_.end()) {
    ++counters_.stale_messages;
    return;
  }
  Attempt& a = attempts_.at(id->second);
  if (a.failed || m.receiver_qpn != a.config.local_qpn) {
    ++counters_.stale_messages;
    return;
  }
  Message ready;
  ready.type = MessageType::ready;
  ready.mode = a.config.mode;
  ready.nonce = m.nonce;
  ready.sender_qpn = a.config.local_qpn;
  ready.receiver_qpn = m.sender_qpn;
  if (!a.done && config_.secure &&
      (m.auth_only != (config_.protection == secure::Protection::auth_only) ||
       !derive_keys(a.ephemeral, m.public_key, true, m.nonce, a.config.local_qpn, m.sender_qpn, a.config.security))) {
    ++counters_.key_agreement_failures;
    fail_attempt(m.nonce, "the server's reply carries no usable key: the connection's keys could not be agreed");
    return;
  }
  if (!a.done) {
    settle(a);
    a.ephemeral = secure::EphemeralKey{};  // the keys are derived: forget ours
    a.config.peer_qpn = m.sender_qpn;
    a.config.peer_initial_psn = m.sender_psn;
    a.config.mtu = m.mtu;
    a.config.paths = m.paths;
    a.config.streams = m.streams;
    if (m.max_reads != 0) a.config.max_outstanding_reads = m.max_reads;
    // The server agreed to at most what we offered; one that says more is
    // held to our offer (validate then catches nothing new).
    take_planes(a.config, std::min(m.planes, a.config.planes), m);
    // The reply's source MAC is the next hop back: keep what we were told
    // (the same next hop, or the peer itself).
    (void)frame;
    Event e;
    e.id = id->second;
    e.kind = EventKind::established;
    e.config = a.config;
    e.cc = a.cc;
    e.peer_private_data = m.private_data;
    if (std::string error = transport::validate(e.config); !error.empty()) {
      e.kind = EventKind::failed;
      e.error = fmt::format("the server's reply is not usable: {}", error);
    } else {
      ++counters_.established;
    }
    events_.push_back(std::move(e));
  }
  send(a.config.endpoints, ready);
  ++counters_.ready_sent;
}

void Manager::on_ready(const wire::ParsedFrame& frame, const Message& m) {
  ++counters_.ready_received;
  const auto it = accepted_.find(peer_key(frame, m.sender_qpn));
  if (it == accepted_.end() || it->second.nonce != m.nonce || it->second.rejected) {
    ++counters_.stale_messages;
    return;
  }
  Event e;
  e.kind = EventKind::ready;
  e.id = it->second.local_qpn;
  events_.push_back(std::move(e));
}

void Manager::on_reject(Time now, const Message& m) {
  ++counters_.rejects_received;
  const auto id = nonce_to_id_.find(m.nonce);
  if (id == nonce_to_id_.end()) {
    ++counters_.stale_messages;
    return;
  }
  Attempt& a = attempts_.at(id->second);
  if (a.done) return;
  if (m.reason == RejectReason::prove_address) {
    // We replace our own older connection there: the REQ again, at once,
    // with the cookie (it counts as one of the attempt's REQs).
    if (m.cookie == 0 || a.queued || a.request.cookie == m.cookie) return;
    a.request.cookie = m.cookie;
    ++counters_.address_proofs_sent;
    send_request(now, id->second, a);
    return;
  }
  settle(a);
  a.failed = true;
  qpn_to_peer_.erase(a.config.local_qpn);
  Event e;
  e.kind = EventKind::failed;
  e.id = id->second;
  e.error = fmt::format("{} refused the connection: {}", address_of(a.config.endpoints), to_string(m.reason));
  events_.push_back(std::move(e));
}

bool Manager::disconnect(Time now, std::uint64_t id, std::vector<std::uint8_t> private_data, std::string& error) {
  const auto it = attempts_.find(id);
  if (it == attempts_.end() || !it->second.done || it->second.failed || it->second.disconnecting) {
    error = fmt::format("connection {} is not established (or is already closing)", id);
    return false;
  }
  if (private_data.size() > max_private_data) {
    error = fmt::format("{} bytes of private data: at most {}", private_data.size(), max_private_data);
    return false;
  }
  Attempt& a = it->second;
  a.disconnecting = true;
  a.dreq.type = MessageType::disconnect;
  a.dreq.mode = a.config.mode;
  a.dreq.nonce = a.request.nonce;
  a.dreq.sender_qpn = a.config.local_qpn;
  a.dreq.receiver_qpn = a.config.peer_qpn;
  a.dreq.private_data = std::move(private_data);
  a.dreq_next = now;
  retries_due_.emplace(now, id);
  return true;
}

void Manager::set_disconnect_reply(std::uint32_t local_qpn, std::vector<std::uint8_t> private_data) {
  if (private_data.size() > max_private_data) private_data.resize(max_private_data);
  const auto peer = qpn_to_peer_.find(local_qpn);
  if (peer == qpn_to_peer_.end()) return;
  const auto it = accepted_.find(peer->second);
  if (it != accepted_.end() && it->second.local_qpn == local_qpn && !it->second.rejected)
    it->second.drep_private = std::move(private_data);
}

void Manager::on_disconnect(const wire::ParsedFrame& frame, const Message& m) {
  const auto it = accepted_.find(peer_key(frame, m.sender_qpn));
  if (it == accepted_.end() || it->second.nonce != m.nonce || it->second.rejected) {
    ++counters_.stale_messages;
    return;
  }
  Accepted& entry = it->second;
  if (!entry.drep_due) dreps_due_.push_back(it->first);
  entry.drep_due = true;  // answered at the next poll, after the application saw the event
  if (entry.closed) return;
  entry.closed = true;
  ++counters_.disconnected;
  Event e;
  e.kind = EventKind::disconnected;
  e.id = entry.local_qpn;
  e.peer_private_data = m.private_data;
  events_.push_back(std::move(e));
}

void Manager::on_disconnect_reply(const Message& m) {
  const auto id = nonce_to_id_.find(m.nonce);
  if (id == nonce_to_id_.end()) {
    ++counters_.stale_messages;
    return;
  }
  Attempt& a = attempts_.at(id->second);
  if (!a.disconnecting || a.closed) return;
  a.closed = true;
  ++counters_.disconnected;
  qpn_to_peer_.erase(a.config.local_qpn);
  Event e;
  e.kind = EventKind::disconnected;
  e.id = id->second;
  e.peer_private_data = m.private_data;
  events_.push_back(std::move(e));
}

void Manager::poll(Time now, std::vector<std::vector<std::uint8_t>>& frames) {
  for (const PeerKey& key : dreps_due_) {
    const auto it = accepted_.find(key);
    if (it == accepted_.end() || !it->second.drep_due) continue;
    Accepted& entry = it->second;
    entry.drep_due = false;
    Message drep;
    drep.type = MessageType::disconnect_reply;
    drep.nonce = entry.nonce;
    drep.sender_qpn = entry.local_qpn;
    drep.receiver_qpn = key.second;
    drep.private_data = entry.drep_private;
    send(entry.peer, drep);
    ++counters_.disconnect_replies_sent;
  }
  dreps_due_.clear();
  while (!retries_due_.empty() && retries_due_.top().first <= now) {
    const auto [deadline, id] = retries_due_.top();
    retries_due_.pop();
    const auto it = attempts_.find(id);
    if (it == attempts_.end()) continue;
    Attempt& a = it->second;
    if (a.disconnecting && !a.closed && a.dreq_next == deadline) {
      if (a.dreq_sent >= config_.retries) {
        a.closed = true;
        qpn_to_peer_.erase(a.config.local_qpn);
        Event e;
        e.kind = EventKind::disconnected;
        e.id = id;
        e.error = fmt::format("no answer from {} to {} disconnect requests: closed without the server's summary",
                              address_of(a.config.endpoints), a.dreq_sent);
        events_.push_back(std::move(e));
        continue;
      }
      send(a.config.endpoints, a.dreq);
      ++counters_.disconnects_sent;
      ++a.dreq_sent;
      a.dreq_next = now + config_.retry_interval;
      retries_due_.emplace(a.dreq_next, id);
    } else if (!a.done && !a.queued && a.next_send == deadline) {
      if (a.sent >= config_.retries)
        time_out(id, a);
      else
        send_request(now, id, a);
    }
  }
  const std::size_t room = std::max<std::uint32_t>(config_.max_requests_in_flight, 1);
  while (!unsent_.empty() && in_flight_ < room) {
    const std::uint64_t id = unsent_.front();
    unsent_.pop_front();
    Attempt& a = attempts_.at(id);
    if (a.done || !a.queued) continue;
    a.queued = false;
    ++in_flight_;
    send_request(now, id, a);
  }
  for (auto& f : out_) frames.push_back(std::move(f));
  out_.clear();
}

void Manager::take_events(std::vector<Event>& out) {
  for (auto& e : events_) out.push_back(std::move(e));
  events_.clear();
}

}  // namespace metaroce::cm
