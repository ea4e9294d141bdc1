// Secure connections driven by hand, frame by frame: every frame carries the
// trailer (SPI, counter, tag) between its pad and its ICRC, what arrives is
// placed byte for byte, and every forged, modified or replayed frame is
// dropped under its counter before anything in it is used.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "connection_pair.hpp"
#include "transfer_harness.hpp"
#include "transport/connection.hpp"
#include "wire/byte_order.hpp"
#include "wire/frame.hpp"
#include "wire/icrc.hpp"

namespace {

using namespace metaroce;
using namespace metaroce::transport;
using Frame = std::vector<std::uint8_t>;

SecurityConfig keys(bool a_side, secure::Protection protection, std::uint8_t salt = 0) {
  SecurityConfig s;
  s.protection = protection;
  std::array<std::uint8_t, secure::max_key_bytes> ab{}, ba{};
  for (std::size_t i = 0; i < ab.size(); ++i) {
    ab[i] = static_cast<std::uint8_t>(i * 7 + 1 + salt);
    ba[i] = static_cast<std::uint8_t>(i * 11 + 3 + salt);
  }
  s.tx_key = a_side ? ab : ba;
  s.rx_key = a_side ? ba : ab;
  s.tx_spi = a_side ? 0xa0000001u : 0xb0000001u;
  s.rx_spi = a_side ? 0xb0000001u : 0xa0000001u;
  return s;
}

// `ipv6_vlan`: both ends over IPv6 with an 802.1Q tag, the other framing
// whose offsets a sealed frame must get right.
transport::ConnectionConfig secure_pair_config(Mode mode, std::uint16_t paths, bool ipv6_vlan) {
  transport::ConnectionConfig c = test::pair_config(mode, 1024, paths, 2);
  if (ipv6_vlan) {
    c.endpoints.ip_version = 6;
    c.endpoints.vlan_present = true;
    c.endpoints.vlan_tci = 0x2064;
  }
  return c;
}

struct SecurePair : test::ConnectionPair {
  explicit SecurePair(Mode mode = Mode::metaroce, secure::Protection protection = secure::Protection::encrypt,
                      std::uint16_t paths = 4, bool ipv6_vlan = false)
      : ConnectionPair(secure_pair_config(mode, paths, ipv6_vlan)) {
    std::string error;
    EXPECT_TRUE(a->set_security(keys(true, protection), error)) << error;
    EXPECT_TRUE(b->set_security(keys(false, protection), error)) << error;
  }
};

// As a host parses a frame for a secure connection: with the trailer, and
// without it when that fails.
wire::ParsedFrame parse_secure(const Frame& frame) {
  wire::ParsedFrame p;
  wire::ParseOptions with;
  with.secure_trailer = true;
  if (wire::parse_frame(frame, p, with) == wire::ParseError::ok) return p;
  p = wire::ParsedFrame{};
  EXPECT_EQ(wire::parse_frame(frame, p), wire::ParseError::ok);
  return p;
}
void deliver(Connection& c, Time now, const Frame& frame) { c.on_frame(now, parse_secure(frame)); }

std::uint64_t counter_of(const Frame& frame) {
  const auto p = parse_secure(frame);
  EXPECT_NE(p.secure_trailer_offset, 0u);
  return wire::load_be64(frame.data() + p.secure_trailer_offset + 4);
}
std::uint32_t spi_of(const Frame& frame) {
  const auto p = parse_secure(frame);
  return wire::load_be32(frame.data() + p.secure_trailer_offset);
}

// A forger's last step: the ICRC made right again, so only the tag can tell.
void fix_icrc(Frame& f) {
  wire::ParsedFrame p;
  wire::ParseOptions o{true, false};
  o.secure_trailer = true;
  ASSERT_EQ(wire::parse_frame(f, p, o), wire::ParseError::ok);
  const std::size_t icrc_at = f.size() - wire::icrc_size;
  wire::store_le32(f.data() + icrc_at,
                   wire::compute_icrc(wire::ByteSpan(f.data() + p.l3_offset, icrc_at - p.l3_offset)));
}

// Removes `n` bytes before the ICRC (and from the IP and UDP lengths).
Frame shortened(const Frame& f, std::size_t n) {
  const auto p = parse_secure(f);
  Frame g(f.begin(), f.end() - static_cast<std::ptrdiff_t>(wire::icrc_size + n));
  g.resize(g.size() + wire::icrc_size);
  std::uint8_t* ip = g.data() + p.l3_offset;
  wire::store_be16(ip + 2, static_cast<std::uint16_t>(wire::load_be16(ip + 2) - n));
  wire::store_be16(ip + 10, 0);
  wire::store_be16(ip + 10, wire::ipv4_header_checksum(ip, wire::ipv4_header_size));
  std::uint8_t* udp = g.data() + p.l4_offset;
  wire::store_be16(udp + 4, static_cast<std::uint16_t>(wire::load_be16(udp + 4) - n));
  wire::ParsedFrame q;
  EXPECT_EQ(wire::parse_frame(g, q, wire::ParseOptions{true, false}), wire::ParseError::ok);
  const std::size_t icrc_at = g.size() - wire::icrc_size;
  wire::store_le32(g.data() + icrc_at,
                   wire::compute_icrc(wire::ByteSpan(g.data() + q.l3_offset, icrc_at - q.l3_offset)));
  return g;
}

std::uint64_t secure_drops_of(const ConnectionCounters& k) {
  return k.secure_no_trailer + k.secure_bad_spi + k.secure_replayed + k.secure_bad_tag;
}
std::uint64_t secure_drops(const Connection& c) { return secure_drops_of(c.counters()); }

void expect_transfer(Mode mode, secure::Protection protection) {
  SecurePair p(mode, protection);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 3000)), PostResult::ok);
  auto frames = p.drain(*p.a, 100'000);
  ASSERT_EQ(frames.size(), 3u);  // 1024 + 1024 + 952
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const auto f = parse_secure(frames[i]);
    ASSERT_NE(f.secure_trailer_offset, 0u);
    EXPECT_EQ(f.payload.size(), i < 2 ? 1024u : 952u);
    EXPECT_EQ(f.secure_trailer_offset, f.payload_offset + f.payload.size());  // no pad: 4-aligned
    EXPECT_EQ(frames[i].size(), f.secure_trailer_offset + wire::secure_trailer_size + wire::icrc_size);
    EXPECT_EQ(spi_of(frames[i]), 0xa0000001u);
    EXPECT_EQ(counter_of(frames[i]), i + 1);
    const bool clear = std::memcmp(f.payload.data(), p.src.data() + 1024 * i, f.payload.size()) == 0;
    EXPECT_EQ(clear, protection == secure::Protection::auth_only);
  }
  // Out of order: each lands in place once its tag checks.
  deliver(*p.b, 110'000, frames[2]);
  EXPECT_EQ(std::memcmp(p.dst_at(2048), p.src.data() + 2048, 952), 0);
  deliver(*p.b, 110'000, frames[0]);
  deliver(*p.b, 110'000, frames[1]);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 3000), 0);
  EXPECT_EQ(p.b->counters().data_bytes_placed, 3000u);
  EXPECT_EQ(p.b->counters().secure_frames_opened, 3u);
  EXPECT_EQ(secure_drops(*p.b), 0u);
  EXPECT_TRUE(p.guards_intact());

  auto acks = p.drain(*p.b, 120'000);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(spi_of(acks[0]), 0xb0000001u);
  EXPECT_EQ(counter_of(acks[0]), 1u);
  deliver(*p.a, 130'000, acks[0]);
  std::vector<Completion> cq;
  ASSERT_EQ(p.a->poll_completions(cq), 1u);
  EXPECT_EQ(cq[0].wr_id, 1u);
  EXPECT_EQ(cq[0].status, CompletionStatus::success);
  EXPECT_EQ(p.a->packets_outstanding(), 0u);
  EXPECT_EQ(p.a->counters().secure_frames_sealed, 3u);
  EXPECT_EQ(p.a->counters().secure_frames_opened, 1u);
  EXPECT_EQ(p.b->counters().secure_frames_sealed, 1u);
}

TEST(TransportSecure, EncryptedWriteIsPlacedExactly) { expect_transfer(Mode::metaroce, secure::Protection::encrypt); }
TEST(TransportSecure, AuthOnlyWriteIsPlacedExactly) { expect_transfer(Mode::metaroce, secure::Protection::auth_only); }

TEST(TransportSecure, Rocev2EncryptedWriteIsPlacedExactly) {
  SecurePair p(Mode::rocev2, secure::Protection::encrypt, 1);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 3000)), PostResult::ok);
  auto frames = p.drain(*p.a, 100'000);
  ASSERT_EQ(frames.size(), 3u);
  for (std::size_t i = 0; i < frames.size(); ++i) EXPECT_EQ(counter_of(frames[i]), i + 1);
  for (const auto& f : frames) deliver(*p.b, 110'000, f);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 3000), 0);
  EXPECT_EQ(p.b->counters().secure_frames_opened, 3u);
  EXPECT_TRUE(p.guards_intact());
  auto acks = p.drain(*p.b, 1'200'000);
  ASSERT_FALSE(acks.empty());
  for (const auto& f : acks) deliver(*p.a, 1'300'000, f);
  std::vector<Completion> cq;
  ASSERT_EQ(p.a->poll_completions(cq), 1u);
  EXPECT_EQ(cq[0].status, CompletionStatus::success);
  EXPECT_EQ(secure_drops(*p.a) + secure_drops(*p.b), 0u);
}

// Over IPv6 with a VLAN tag, both modes and both protections: every frame
// (data and ACK) carries its trailer where the parser finds it, and the
// bytes land exactly.
TEST(TransportSecure, Ipv6WithVlanTagIsSealedAndPlacedExactly) {
  for (const Mode mode : {Mode::metaroce, Mode::rocev2}) {
    for (const auto protection : {secure::Protection::encrypt, secure::Protection::auth_only}) {
      SCOPED_TRACE(std::string(mode == Mode::metaroce ? "metaroce " : "rocev2 ") + secure::to_string(protection));
      SecurePair p(mode, protection, mode == Mode::metaroce ? 4 : 1, true);
      ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 3001)), PostResult::ok);
      const auto frames = p.drain(*p.a, 100'000);
      ASSERT_EQ(frames.size(), 3u);
      for (const auto& f : frames) {
        const auto parsed = parse_secure(f);
        EXPECT_EQ(parsed.ip_version, 6);
        EXPECT_EQ(parsed.l3_offset, wire::ethernet_header_size + wire::vlan_tag_size);
        ASSERT_NE(parsed.secure_trailer_offset, 0u);
        deliver(*p.b, 110'000, f);
      }
      EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 3001), 0);
      EXPECT_EQ(p.b->counters().secure_frames_opened, 3u);
      EXPECT_TRUE(p.guards_intact());
      const auto acks = p.drain(*p.b, 1'200'000);
      ASSERT_FALSE(acks.empty());
      for (const auto& f : acks) {
        EXPECT_NE(parse_secure(f).secure_trailer_offset, 0u);
        deliver(*p.a, 1'300'000, f);
      }
      std::vector<Completion> cq;
      ASSERT_EQ(p.a->poll_completions(cq), 1u);
      EXPECT_EQ(cq[0].status, CompletionStatus::success);
      EXPECT_EQ(secure_drops(*p.a) + secure_drops(*p.b), 0u);
      EXPECT_EQ(p.a->counters().secure_seal_failures + p.b->counters().secure_seal_failures, 0u);
    }
  }
}

// A send with a 3-byte payload: pad 1, then the trailer.
TEST(TransportSecure, PadComesBeforeTheTrailer) {
  SecurePair p;
  ASSERT_EQ(p.b->post_receive(p.receive(9, 0, 64)), PostResult::ok);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::send, 1, 0, 3)), PostResult::ok);
  auto frames = p.drain(*p.a, 100'000);
  ASSERT_EQ(frames.size(), 1u);
  const auto f = parse_secure(frames[0]);
  EXPECT_EQ(f.bth.pad, 1u);
  EXPECT_EQ(f.payload.size(), 3u);
  EXPECT_EQ(f.secure_trailer_offset, f.payload_offset + 4u);
  deliver(*p.b, 110'000, frames[0]);
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 3), 0);
  EXPECT_EQ(*p.dst_at(3), 0);
  std::vector<Completion> cq;
  ASSERT_EQ(p.b->poll_completions(cq), 1u);
  EXPECT_EQ(cq[0].byte_len, 3u);
}

// Every kind of forgery against B's data path and A's ACK path: each is
// dropped under its counter, places nothing, makes B send nothing and
// moves nothing on A.
TEST(TransportSecure, ForgedModifiedAndReplayedFramesAreDroppedAndCounted) {
  for (const auto protection : {secure::Protection::encrypt, secure::Protection::auth_only}) {
    SCOPED_TRACE(secure::to_string(protection));
    SecurePair p(Mode::metaroce, protection);
    ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 1024)), PostResult::ok);
    const auto frames = p.drain(*p.a, 100'000);
    ASSERT_EQ(frames.size(), 1u);
    const Frame& real = frames[0];
    const auto rp = parse_secure(real);

    // A payload byte changed, the ICRC made right.
    Frame payload_flip = real;
    payload_flip[rp.payload_offset + 100] ^= 0x40;
    fix_icrc(payload_flip);
    // A header byte (the WRITE's address) changed.
    Frame header_flip = real;
    header_flip[rp.payload_offset - 5] ^= 0x01;
    fix_icrc(header_flip);
    // A tag byte changed.
    Frame tag_flip = real;
    tag_flip[rp.secure_trailer_offset + 20] ^= 0x80;
    fix_icrc(tag_flip);
    // Another SPI.
    Frame spi = real;
    spi[rp.secure_trailer_offset + 3] ^= 0x02;
    fix_icrc(spi);
    // A truncated tag: the last 4 bytes before the ICRC gone.
    const Frame truncated = shortened(real, 4);
    // No trailer at all: a frame too short to carry one.
    Frame bare = shortened(real, 1024 + wire::secure_trailer_size);
    {
      auto q = parse_secure(bare);
      ASSERT_EQ(q.secure_trailer_offset, 0u);
    }
    // The same frame sealed under another connection's key (and SPI).
    Frame other_key;
    {
      test::ConnectionPair q(test::pair_config(Mode::metaroce, 1024, 4, 2));
      std::string error;
      SecurityConfig k = keys(true, protection, 0x55);
      k.tx_spi = 0xa0000001u;  // the SPI B expects: only the key differs
      ASSERT_TRUE(q.a->set_security(k, error));
      ASSERT_EQ(q.a->post_send(q.request(SendOp::write, 1, 0, 1024)), PostResult::ok);
      auto f = q.drain(*q.a, 100'000);
      ASSERT_EQ(f.size(), 1u);
      other_key = f[0];
    }

    const std::vector<std::uint8_t> before(p.dst.begin(), p.dst.end());
    deliver(*p.b, 110'000, payload_flip);
    deliver(*p.b, 110'000, header_flip);
    deliver(*p.b, 110'000, tag_flip);
    deliver(*p.b, 110'000, other_key);
    EXPECT_EQ(p.b->counters().secure_bad_tag, 4u);
    deliver(*p.b, 110'000, spi);
    EXPECT_EQ(p.b->counters().secure_bad_spi, 1u);
    deliver(*p.b, 110'000, truncated);
    EXPECT_EQ(p.b->counters().secure_bad_tag + p.b->counters().secure_bad_spi, 6u);
    deliver(*p.b, 110'000, bare);
    EXPECT_EQ(p.b->counters().secure_no_trailer, 1u);
    EXPECT_EQ(std::vector<std::uint8_t>(p.dst.begin(), p.dst.end()), before);
    EXPECT_EQ(p.b->counters().data_packets_received, 0u);
    EXPECT_EQ(p.b->counters().secure_frames_opened, 0u);
    EXPECT_TRUE(p.drain(*p.b, 2'000'000).empty());  // no ACK, no NAK: no state moved

    // The real frame is placed; the same frame again is a replay (not a
    // duplicate PSN: it never reaches the transport).
    deliver(*p.b, 2'100'000, real);
    EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 1024), 0);
    deliver(*p.b, 2'100'000, real);
    EXPECT_EQ(p.b->counters().secure_replayed, 1u);
    EXPECT_EQ(p.b->counters().duplicate_packets, 0u);
    EXPECT_EQ(p.b->counters().data_packets_received, 1u);
    EXPECT_TRUE(p.guards_intact());

    // A's ACK path: a forged and a replayed ACK move nothing.
    auto acks = p.drain(*p.b, 2'200'000);
    ASSERT_EQ(acks.size(), 1u);
    Frame ack_flip = acks[0];
    const auto ap = parse_secure(ack_flip);
    ack_flip[ap.payload_offset - 1] ^= 0x01;  // a SACK byte
    fix_icrc(ack_flip);
    deliver(*p.a, 2'300'000, ack_flip);
    EXPECT_EQ(p.a->counters().secure_bad_tag, 1u);
    EXPECT_EQ(p.a->counters().acks_received, 0u);
    EXPECT_EQ(p.a->packets_outstanding(), 1u);
    deliver(*p.a, 2'300'000, acks[0]);
    EXPECT_EQ(p.a->counters().acks_received, 1u);
    EXPECT_EQ(p.a->packets_outstanding(), 0u);
    deliver(*p.a, 2'300'000, acks[0]);
    EXPECT_EQ(p.a->counters().secure_replayed, 1u);
    EXPECT_EQ(p.a->counters().acks_received, 1u);
  }
}

// A frame from a connection without security reaches a secure one: dropped.
TEST(TransportSecure, PlainFramesAreRefused) {
  test::ConnectionPair plain(test::pair_config(Mode::metaroce, 1024, 4, 2));
  SecurePair p;
  ASSERT_EQ(plain.a->post_send(plain.request(SendOp::write, 1, 0, 100)), PostResult::ok);
  auto frames = plain.drain(*plain.a, 100'000);
  ASSERT_EQ(frames.size(), 1u);
  // The frame's 100 bytes of payload hold what a trailer would: its last
  // 28 bytes are read as one, and name no key of B's.
  deliver(*p.b, 110'000, frames[0]);
  EXPECT_EQ(p.b->counters().secure_bad_spi, 1u);
  EXPECT_EQ(p.b->counters().data_packets_received, 0u);
  // An ACK of the plain pair, without a trailer, to the secure A.
  test::ConnectionPair::deliver(*plain.b, 110'000, frames[0]);
  auto acks = plain.drain(*plain.b, 120'000);
  ASSERT_EQ(acks.size(), 1u);
  deliver(*p.a, 130'000, acks[0]);
  EXPECT_EQ(p.a->counters().secure_no_trailer + p.a->counters().secure_bad_spi, 1u);
  EXPECT_EQ(p.a->counters().acks_received, 0u);
}

// A lost packet is sent again sealed under a new counter: the receiver's
// replay window takes it, and the first copy arriving late is a duplicate
// of the transport, not a replay.
TEST(TransportSecure, RetransmissionsAreSealedWithAFreshCounter) {
  SecurePair p(Mode::metaroce, secure::Protection::encrypt, 1);
  ASSERT_EQ(p.a->post_send(p.request(SendOp::write, 1, 0, 2048)), PostResult::ok);
  auto first = p.drain(*p.a, 100'000);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(counter_of(first[0]), 1u);
  EXPECT_EQ(counter_of(first[1]), 2u);
  // Both lost: the path times out and probes, the probe's ACK says
  // nothing arrived, and both go again.
  Time now = 100'000;
  test::Frames again;
  std::uint64_t highest = 2;
  for (int round = 0; round < 200 && again.size() < 2; ++round) {
    now += 1'000'000;
    for (const auto& f : p.drain(*p.a, now)) {
      const auto q = parse_secure(f);
      EXPECT_GT(counter_of(f), highest);
      highest = counter_of(f);
      if (q.bth.opcode == wire::opcode::mr_write) {
        again.push_back(f);
      } else {
        deliver(*p.b, now, f);  // a probe
      }
    }
    for (const auto& f : p.drain(*p.b, now)) deliver(*p.a, now, f);
  }
  ASSERT_EQ(again.size(), 2u);
  EXPECT_GE(p.a->counters().retransmitted_packets, 2u);
  for (const auto& f : again) {
    const auto q = parse_secure(f);
    EXPECT_EQ(q.payload.size(), 1024u);
    deliver(*p.b, now, f);
  }
  EXPECT_EQ(std::memcmp(p.dst_at(0), p.src.data(), 2048), 0);
  deliver(*p.b, now, first[0]);  // its counter is fresh: the PSN is a duplicate
  EXPECT_EQ(p.b->counters().secure_replayed, 0u);
  EXPECT_EQ(p.b->counters().duplicate_packets, 1u);
  EXPECT_EQ(secure_drops(*p.b), 0u);
  EXPECT_TRUE(p.guards_intact());
}

// Without security nothing is added: the frames are the plain ones.
TEST(TransportSecure, OffAddsNothing) {
  test::ConnectionPair plain(test::pair_config(Mode::metaroce, 1024, 4, 2));
  ASSERT_EQ(plain.a->post_send(plain.request(SendOp::write, 1, 0, 1024)), PostResult::ok);
  auto frames = plain.drain(*plain.a, 100'000);
  ASSERT_EQ(frames.size(), 1u);
  const auto f = test::ConnectionPair::parse(frames[0]);
  EXPECT_EQ(frames[0].size(), f.payload_offset + 1024u + wire::icrc_size);
  EXPECT_FALSE(plain.a->secure());
  EXPECT_EQ(plain.a->counters().secure_frames_sealed, 0u);
}

// Through the simulator and the hosts (which parse with the trailer):
// verified transfers under loss, reordering and duplication, both modes.
test::TransferSpec secure_spec(std::uint64_t seed, secure::Protection protection) {
  test::TransferSpec s;
  s.messages = 300;
  s.max_message = 1u << 18;
  s.streams = 4;
  s.paths = 8;
  s.seed = seed;
  s.forward.delay_ns = 5'000;
  s.backward.delay_ns = 5'000;
  s.forward.paths = 8;
  s.backward.paths = 8;
  s.forward.seed = seed * 3 + 1;
  s.backward.seed = seed * 3 + 2;
  s.reads = true;
  s.atomics = true;
  s.secure = true;
  s.protection = protection;
  return s;
}

void expect_secure_transfer(const test::TransferSpec& s, test::TransferResult* out = nullptr) {
  const test::TransferResult r = test::run_transfer(s);
  if (out != nullptr) *out = r;
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.messages_completed, s.messages);
  for (const auto e : r.receiver_parse_errors) EXPECT_EQ(e, 0u);
  EXPECT_EQ(secure_drops_of(r.sender), 0u);
  EXPECT_GT(r.sender.secure_frames_sealed, r.sender.data_packets_sent);  // probes and ACKs too
  // (Less by the frames still on the wire when the transfer ends.)
  EXPECT_LE(r.receiver.secure_frames_opened + r.receiver.secure_replayed,
            r.sender.secure_frames_sealed - r.forward_counters.dropped_random_loss + r.forward_counters.duplicated);
  EXPECT_GT(r.receiver.secure_frames_opened, r.sender.data_packets_sent - r.forward_counters.dropped_random_loss);
  EXPECT_GT(r.forward_counters.duplicated, 0u);
  EXPECT_GT(r.sender.retransmitted_packets, 0u);
  EXPECT_EQ(r.receiver.secure_replayed, r.forward_counters.duplicated);  // each copy a replay, not a duplicate PSN
  EXPECT_EQ(r.receiver.secure_bad_tag + r.receiver.secure_bad_spi + r.receiver.secure_no_trailer, 0u);
}

TEST(TransportSecure, SimulatedTransferUnderLossReorderingAndDuplication) {
  test::TransferSpec s = secure_spec(41, secure::Protection::encrypt);
  s.forward.loss = 0.01;
  s.backward.loss = 0.01;
  s.forward.reorder = 0.02;
  s.forward.duplicate = 0.01;
  expect_secure_transfer(s);
}

TEST(TransportSecure, SimulatedAuthOnlyTransfer) {
  test::TransferSpec s = secure_spec(42, secure::Protection::auth_only);
  s.forward.loss = 0.01;
  s.forward.duplicate = 0.01;
  expect_secure_transfer(s);
}

// Key epochs every 100 frames, both directions, under loss and
// duplication, READs and atomics: every byte verified (run_transfer checks
// them), each sender moved to exactly one epoch per 100 frames it sealed
// after its first, each receiver followed it to its last epoch, and no
// frame was refused for its epoch.
void expect_rotating_transfer(test::TransferSpec s) {
  constexpr std::uint64_t every = 100;
  s.rotate_after_frames = every;
  s.forward.loss = 0.01;
  s.backward.loss = 0.01;
  s.forward.duplicate = 0.01;
  test::TransferResult r;
  expect_secure_transfer(s, &r);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_GT(r.sender.secure_frames_sealed, 10 * every);
  EXPECT_GT(r.receiver.secure_frames_sealed, 2 * every);
  EXPECT_EQ(r.sender.secure_epochs_sent, (r.sender.secure_frames_sealed - 1) / every);
  EXPECT_EQ(r.receiver.secure_epochs_sent, (r.receiver.secure_frames_sealed - 1) / every);
  EXPECT_EQ(r.receiver.secure_epochs_received, r.sender.secure_epochs_sent);
  EXPECT_EQ(r.sender.secure_epochs_received, r.receiver.secure_epochs_sent);
  EXPECT_EQ(r.receiver.secure_unknown_epoch, 0u);
  EXPECT_EQ(r.sender.secure_unknown_epoch, 0u);
}

TEST(TransportSecure, SimulatedKeyRotationMidTransferUnderLoss) {
  expect_rotating_transfer(secure_spec(44, secure::Protection::encrypt));
}

TEST(TransportSecure, SimulatedRocev2KeyRotationMidTransferUnderLoss) {
  test::TransferSpec s = secure_spec(45, secure::Protection::auth_only);
  s.base.mode = Mode::rocev2;
  expect_rotating_transfer(s);
}

TEST(TransportSecure, SimulatedRocev2Transfer) {
  test::TransferSpec s = secure_spec(43, secure::Protection::encrypt);
  s.base.mode = Mode::rocev2;
  s.forward.loss = 0.005;
  s.forward.duplicate = 0.01;
  expect_secure_transfer(s);
}

}  // namespace
