// fuzz-connection-rx: a connection's receive path fed arbitrary frames.
//
// One connection per input (MetaroceConnection, or RoceConnection when bit 0
// of the first byte is set), READY, with receives posted and a few sends in
// flight so that ACKs, SACKs and NAKs have something to act on. Two
// registered regions sit between 4 KiB canaries of 0xC5; the canaries are
// checked after every input, so a write outside registered memory aborts
// even where AddressSanitizer cannot see it (inside one allocation).
//
// Input: byte 0 picks the mode and the configuration variant; then records
//   [kind: 1 byte][length: 2 bytes, big-endian][length bytes]
// kind % 4:
//   0 raw          the bytes are a frame: parsed (IP checksum and ICRC not
//                  verified: they do not change what the connection sees) and,
//                  when it parses, given to on_frame;
//   1 interpreted  the bytes are parameters of a frame built with
//                  wire::FrameSpec for this connection's QPN, its regions'
//                  rkeys and addresses, the PSNs and path sequences in play:
//                  mostly valid, so the fuzzer reaches placement, completion,
//                  SACK and ACK processing and not only the first check;
//   2 time         the clock and the timing wheel advance (timeouts, probes,
//                  RNR and ACK timers);
//   3 post         a post_send or post_receive, valid or not.
// After every record the connection is polled until it has nothing to send.
//
// Beyond AddressSanitizer, UBSan and LeakSanitizer, these abort:
//   - a canary byte changed (a write outside registered memory);
//   - a frame the connection emits does not parse with its ICRC verified, or
//     its payload is not inside registered memory;
//   - a completion for a work request that was not outstanding, or a second
//     one for the same request; after close(), a request without completion.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "timer/wheel.hpp"
#include "transport/config.hpp"
#include "transport/connection.hpp"
#include "transport/memory_region.hpp"
#include "wire/frame.hpp"

namespace {

using namespace metaroce;
using namespace metaroce::transport;

[[noreturn]] void violated(const std::string& what) {
  std::fprintf(stderr, "fuzz-connection-rx: invariant violated: %s\n", what.c_str());
  std::abort();
}

// Reads the input front to back; past its end every read is 0, so any
// prefix of an input is an input.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  std::uint8_t u8() { return at_ < bytes_.size() ? bytes_[at_++] : 0; }
  std::uint16_t u16() { return static_cast<std::uint16_t>((u8() << 8) | u8()); }
  std::uint32_t u32() { return (std::uint32_t{u16()} << 16) | u16(); }
  std::span<const std::uint8_t> take(std::size_t n) {
    n = std::min(n, bytes_.size() - at_);
    const auto s = bytes_.subspan(at_, n);
    at_ += n;
    return s;
  }
  [[nodiscard]] bool done() const { return at_ >= bytes_.size(); }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t at_ = 0;
};

// Two registered regions between canaries: [guard][A][guard][B][guard].
// A is the send source; B holds the posted receives and is the WRITE target.
// Both allow remote writes. One heap block for all, reused across inputs.
struct GuardedMemory {
  static constexpr std::size_t guard = 4096;
  static constexpr std::size_t region = 16384;
  static constexpr std::uint8_t canary = 0xc5;

  GuardedMemory() : block(3 * guard + 2 * region) {}

  std::uint8_t* a() { return block.data() + guard; }
  std::uint8_t* b() { return block.data() + 2 * guard + region; }

  void reset() {
    std::memset(block.data(), canary, block.size());
    for (std::size_t i = 0; i < region; ++i) a()[i] = static_cast<std::uint8_t>(i * 7 + 3);
    std::memset(b(), 0, region);
  }
  void check_canaries() const {
    for (const std::size_t start : {std::size_t{0}, guard + region, 2 * guard + 2 * region}) {
      for (std::size_t i = start; i < start + guard; ++i) {
        if (block[i] != canary) {
          char what[128];
          std::snprintf(what, sizeof what, "canary byte %zu of the guarded block is 0x%02x: a write outside a region",
                        i, block[i]);
          violated(what);
        }
      }
    }
  }
  [[nodiscard]] bool inside_a_region(const std::uint8_t* p, std::size_t n) const {
    const auto in = [&](const std::uint8_t* base) {
      return p >= base && n <= region && p + n <= base + region;
    };
    return in(block.data() + guard) || in(block.data() + 2 * guard + region);
  }

  std::vector<std::uint8_t> block;
};

GuardedMemory& guarded_memory() {
  static GuardedMemory memory;
  return memory;
}

constexpr std::uint32_t local_qpn = 0x11;
constexpr std::uint32_t peer_qpn = 0x22;
constexpr std::uint32_t peer_rkey = 0x5a5a01;  // the imaginary peer's region
constexpr std::uint64_t peer_va = 0x7000'0000;
constexpr std::size_t max_records = 512;
constexpr std::size_t max_polls_per_record = 16;

// What the imaginary peer has told us about one message it sends: every
// packet of a message agrees on these, as a real sender's would.
struct PeerMessage {
  std::uint8_t kind = 0;  // 0 write, 1 write_imm, 2 send, 3 send_imm
  std::uint32_t length = 0;
  std::uint32_t recv_seq = 0;
  std::uint32_t region_offset = 0;  // WRITE: where in B it goes
};

class Harness {
 public:
  Harness(std::uint8_t variant, GuardedMemory& memory) : memory_(memory), rocev2_((variant & 1) != 0) {
    memory_.reset();
    key_a_ = registry_.register_region(memory_.a(), GuardedMemory::region, access_local_write | access_remote_write);
    key_b_ = registry_.register_region(memory_.b(), GuardedMemory::region, access_local_write | access_remote_write);

    config_.mode = rocev2_ ? Mode::rocev2 : Mode::metaroce;
    config_.paths = rocev2_ ? 1 : 4;
    config_.streams = 2;
    config_.mtu = 256;
    config_.local_qpn = local_qpn;
    config_.peer_qpn = peer_qpn;
    // Near the 24-bit wrap unless bit 1 says otherwise: wrap bugs live there.
    config_.initial_psn = (variant & 2) ? 100 : 0xfffff0;
    config_.peer_initial_psn = (variant & 2) ? 7 : 0xfffffa;
    config_.psn_window = 256;
    config_.stream_window = 16;
    config_.path_window = 32;
    config_.ack_every_packets = (variant & 4) ? 1 : 4;
    config_.endpoints.ip_version = (variant & 8) ? 6 : 4;
    config_.endpoints.local_ipv4 = 0x0a000001;
    config_.endpoints.peer_ipv4 = 0x0a000002;
    config_.endpoints.local_ipv6[15] = 1;
    config_.endpoints.peer_ipv6[15] = 2;
    config_.endpoints.vlan_present = (variant & 16) != 0;
    config_.endpoints.vlan_tci = 7;
    config_.retry_limit = 3;
    config_.rnr_retry_limit = 3;

    // The imaginary peer's view, to build frames it would send us.
    peer_config_ = config_;
    std::swap(peer_config_.local_qpn, peer_config_.peer_qpn);
    std::swap(peer_config_.initial_psn, peer_config_.peer_initial_psn);
    std::swap(peer_config_.endpoints.local_ipv4, peer_config_.endpoints.peer_ipv4);
    std::swap(peer_config_.endpoints.local_ipv6, peer_config_.endpoints.peer_ipv6);

    std::string error;
    connection_ = Connection::create(config_, registry_, wheel_, nullptr, error);
    if (!connection_) violated("Connection::create: " + error);
    connection_->connect();

    // Four receives of 1 KiB per stream, in the first half of B.
    for (std::uint16_t stream = 0; stream < config_.streams; ++stream)
      for (std::size_t k = 0; k < 4; ++k)
        post_receive(stream, memory_.b() + (stream * 4 + k) * 1024, 1024, key_b_);
    // Sends in flight: a WRITE spanning three packets, a SEND, a WRITE_IMM.
    post_send(SendOp::write, 0, memory_.a(), 600, key_a_, peer_va, peer_rkey);
    post_send(SendOp::send, 1, memory_.a() + 1024, 300, key_a_, 0, 0);
    post_send(SendOp::write_imm, 0, memory_.a() + 2048, 100, key_a_, peer_va + 4096, peer_rkey);
    service();
  }

  ~Harness() = default;
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  void run(Reader& input) {
    for (std::size_t record = 0; record < max_records && !input.done(); ++record) {
      const std::uint8_t kind = input.u8();
      const std::uint16_t length = input.u16();
      Reader body(input.take(length));
      switch (kind % 4) {
        case 0: deliver(body.take(length), /*must_parse=*/false); break;
        case 1: interpreted(body); break;
        case 2: advance(body); break;
        case 3: post(body); break;
      }
      service();
    }
    // Leaving READY flushes: afterwards every accepted request has exactly
    // one completion.
    connection_->close();
    service();
    if (!outstanding_.empty()) {
      violated("after close(), " + std::to_string(outstanding_.size()) + " work requests never completed (first wr_id " +
               std::to_string(*outstanding_.begin()) + ")");
    }
    memory_.check_canaries();
  }

 private:
  void post_receive(std::uint16_t stream, std::uint8_t* addr, std::uint64_t length, std::uint32_t lkey) {
    ReceiveRequest r;
    r.wr_id = next_wr_id_++;
    r.stream = stream;
    r.addr = addr;
    r.length = length;
    r.lkey = lkey;
    if (connection_->post_receive(r) == PostResult::ok) outstanding_.insert(r.wr_id);
  }
  void post_send(SendOp op, std::uint16_t stream, const std::uint8_t* addr, std::uint64_t length, std::uint32_t lkey,
                 std::uint64_t remote_addr, std::uint32_t rkey) {
    SendRequest s;
    s.wr_id = next_wr_id_++;
    s.op = op;
    s.stream = stream;
    s.local_addr = addr;
    s.length = length;
    s.lkey = lkey;
    s.remote_addr = remote_addr;
    s.rkey = rkey;
    s.imm = 0xabcd0000u + static_cast<std::uint32_t>(s.wr_id);
    if (connection_->post_send(s) == PostResult::ok) outstanding_.insert(s.wr_id);
  }

  void deliver(std::span<const std::uint8_t> bytes, bool must_parse) {
    // Exact-size heap copy: a read past the frame is an ASan report.
    const std::unique_ptr<std::uint8_t[]> frame(new std::uint8_t[bytes.empty() ? 1 : bytes.size()]);
    if (!bytes.empty()) std::memcpy(frame.get(), bytes.data(), bytes.size());
    wire::ParsedFrame parsed;
    const wire::ParseError result =
        wire::parse_frame(wire::ByteSpan(frame.get(), bytes.size()), parsed,
                          wire::ParseOptions{.verify_ip_checksum = false, .verify_icrc = false});
    if (result != wire::ParseError::ok) {
      if (must_parse) violated("harness built a frame that does not parse: " + std::string(wire::to_string(result)));
      return;
    }
    // The owner dispatches by destination QP; a raw frame addressed elsewhere
    // is redirected rather than dropped so that its contents are exercised.
    parsed.bth.dest_qp = local_qpn;
    connection_->on_frame(now_, parsed);
  }

  // Polls until the connection has nothing more to say; checks what it sends
  // and what it completes.
  void service() {
    for (std::size_t round = 0; round < max_polls_per_record; ++round) {
      TxBatch batch;
      connection_->poll(now_, batch);
      for (std::size_t i = 0; i < batch.size(); ++i) check_emitted(batch, i);
      check_completions();
      if (batch.empty() && !connection_->wants_poll()) break;
    }
  }

  void check_emitted(const TxBatch& batch, std::size_t i) {
    const TxDescriptor& d = batch[i];
    if (!d.payload.empty() && !memory_.inside_a_region(d.payload.data(), d.payload.size()))
      violated("an emitted payload lies outside registered memory");
    std::vector<std::uint8_t> frame;
    batch.serialize(i, frame);
    wire::ParsedFrame parsed;
    const wire::ParseError result = wire::parse_frame(frame, parsed);
    if (result != wire::ParseError::ok)
      violated("the connection emitted a frame that does not parse: " + std::string(wire::to_string(result)));
    if (parsed.bth.dest_qp != peer_qpn) violated("the connection emitted a frame for another QP");
    // What the interpreted ACKs and NAKs refer to.
    const std::uint8_t op = parsed.bth.opcode;
    const bool data = rocev2_ ? op <= wire::opcode::write_only_imm
                              : (op >= wire::opcode::mr_write && op <= wire::opcode::mr_send_imm) ||
                                    op == wire::opcode::mr_probe;
    if (!data) return;
    if (sent_psns_.size() < 4096) sent_psns_.push_back(parsed.bth.psn);
    if (!rocev2_) {
      std::uint32_t& next = tx_next_path_seq_[parsed.mr_data.path_id % wire::max_paths];
      if (static_cast<std::int32_t>(parsed.mr_data.path_seq + 1 - next) > 0) next = parsed.mr_data.path_seq + 1;
    }
  }

  void check_completions() {
    std::vector<Completion> completions;
    connection_->poll_completions(completions);
    for (const Completion& c : completions) {
      if (outstanding_.erase(c.wr_id) != 1) {
        violated("completion for wr_id " + std::to_string(c.wr_id) +
                 (c.wr_id < next_wr_id_ ? " that had completed already" : " that was never posted"));
      }
      if (static_cast<std::size_t>(c.status) >= static_cast<std::size_t>(CompletionStatus::count_))
        violated("completion status out of range");
    }
  }

  void advance(Reader& r) {
    // Up to ~67 ms: past every RTO, probe, RNR and ACK timer of the config.
    now_ += std::uint64_t{r.u16()} * 1024 + r.u8();
    wheel_.advance(now_);
  }

  void post(Reader& r) {
    const std::uint8_t what = r.u8();
    const std::uint16_t stream = (what & 0x80) ? r.u16() : static_cast<std::uint16_t>(r.u8() % config_.streams);
    std::uint32_t offset = r.u16() % GuardedMemory::region;
    std::uint64_t length = r.u16() % 2048;
    std::uint32_t key = (what & 0x40) ? r.u32() : ((what & 0x20) ? key_a_ : key_b_);
    if (what & 0x10) {  // off the end or before the start: must be refused
      offset = r.u32();
      length = r.u32();
    }
    // Through uintptr_t: the address may lie outside any object.
    const std::uintptr_t base = reinterpret_cast<std::uintptr_t>((what & 0x20) ? memory_.a() : memory_.b());
    auto* addr = reinterpret_cast<std::uint8_t*>(base + static_cast<std::uintptr_t>(static_cast<std::int32_t>(offset)));
    if (what & 1) {
      post_receive(stream, addr, length, key);
    } else {
      const auto op = static_cast<SendOp>((what >> 1) & 3);
      post_send(op, stream, addr, length, key, peer_va + r.u16(), (what & 0x08) ? r.u32() : peer_rkey);
    }
  }

  void interpreted(Reader& r) {
    if (rocev2_) {
      interpreted_roce(r);
    } else {
      interpreted_metaroce(r);
    }
  }

  // A PSN from those we sent (ACKs and NAKs name them), or near them.
  std::uint32_t some_sent_psn(Reader& r) {
    const std::uint8_t pick = r.u8();
    if (sent_psns_.empty() || pick == 0xff) return r.u32() & wire::psn_mask;
    return (sent_psns_[pick % sent_psns_.size()] + ((pick & 0x80) ? 1 : 0)) & wire::psn_mask;
  }

  std::uint8_t nak_syndrome(std::uint8_t pick) {
    switch (pick % 8) {
      case 0: return wire::syndrome::rnr_nak | (pick >> 3);
      case 1: return wire::syndrome::nak_psn_sequence_error;
      case 2: return wire::syndrome::nak_invalid_request;
      case 3: return wire::syndrome::nak_remote_access_error;
      case 4: return wire::syndrome::nak_remote_operational_error;
      case 5: return wire::syndrome::nak_invalid_rd_request;
      case 6: return 0x40;  // reserved kind
      default: return pick;
    }
  }

  void build_and_deliver(wire::FrameSpec spec, std::span<const std::uint8_t> payload) {
    std::vector<std::uint8_t> frame(wire::headers_size(spec) + payload.size() + 8);
    const std::size_t n = wire::build_frame(spec, payload, frame);
    if (n == 0) violated("harness could not build its frame");
    frame.resize(n);
    deliver(frame, /*must_parse=*/true);
  }

  void interpreted_metaroce(Reader& r) {
    const std::uint8_t selector = r.u8();
    switch (selector % 8) {
      case 0: case 1: case 2: case 3: metaroce_data(r, selector); break;
      case 4: metaroce_probe(r); break;
      default: metaroce_ack(r, selector % 8 == 7); break;
    }
  }

  std::uint8_t pick_path(Reader& r) {
    const std::uint8_t p = r.u8();
    return static_cast<std::uint8_t>(p >= 0xf8 ? p & 63 : p % config_.paths);  // sometimes out of range
  }
  std::uint32_t next_rx_path_seq(Reader& r, std::uint8_t path) {
    std::uint32_t& next = rx_next_path_seq_[path];
    const std::uint8_t how = r.u8();
    switch (how % 8) {
      case 1: return next - 1;                    // a network duplicate
      case 2: next += 1 + how / 8; return next++;  // a gap: packets lost
      case 3: return r.u32();                     // anything
      default: return next++;
    }
  }

  void metaroce_data(Reader& r, std::uint8_t selector) {
    const std::uint8_t stream_pick = r.u8();
    const std::uint16_t stream =
        stream_pick == 0xff ? config_.streams : static_cast<std::uint16_t>(stream_pick % config_.streams);
    const std::uint8_t msg_pick = r.u8();
    const std::uint32_t msg_seq = (msg_pick & 0x80) ? r.u32() : msg_pick % 8u;
    auto [it, fresh] = messages_.try_emplace(std::make_pair(stream, msg_seq));
    PeerMessage& m = it->second;
    if (fresh) {
      m.kind = static_cast<std::uint8_t>(selector % 4);
      m.length = r.u16() % 1025;  // at most a receive (1 KiB): longer ones are refused
      if (m.kind >= 1) m.recv_seq = next_recv_seq_[stream % 2]++;
      m.region_offset = ((stream % 2) * 8 + msg_seq % 8) * 1024;
    }
    const std::uint32_t packets = std::max<std::uint32_t>(1, (m.length + config_.mtu - 1) / config_.mtu);
    const std::uint32_t index = r.u8() % packets;
    const std::uint32_t offset = index * config_.mtu;
    const std::uint32_t length = std::min(config_.mtu, m.length - std::min(m.length, offset));
    const std::uint8_t flags = r.u8();

    const bool is_send = m.kind >= 2;
    const std::uint8_t opcode = is_send ? (m.kind == 3 ? wire::opcode::mr_send_imm : wire::opcode::mr_send)
                                        : (m.kind == 1 ? wire::opcode::mr_write_imm : wire::opcode::mr_write);
    const bool last = (offset + length == m.length) != ((flags & 0x01) != 0);
    const bool ce = (flags & 0x02) != 0;
    wire::FrameSpec spec = frame_spec(peer_config_, opcode, static_cast<std::uint16_t>(config_.base_src_port), true);
    if (ce) spec.ipv4.ecn = spec.ipv6.ecn = 3;

    // One PSN per packet, kept when the same packet comes again (as a
    // retransmission does), unless the input asks for a fresh one.
    auto [psn_it, psn_fresh] = packet_psns_.try_emplace(std::make_tuple(stream, msg_seq, index), 0u);
    if (psn_fresh || (flags & 0x04)) psn_it->second = next_peer_psn_++;
    spec.bth.psn = (config_.peer_initial_psn + psn_it->second) & wire::psn_mask;
    if (flags & 0x08) spec.bth.psn = r.u32() & wire::psn_mask;
    spec.bth.ack_req = (flags & 0x10) != 0 || last;

    const std::uint8_t path = pick_path(r);
    spec.mr_data.path_id = path;
    spec.mr_data.flags = static_cast<std::uint8_t>((last ? wire::mr_flag::last : 0) |
                                                   ((flags & 0x20) ? wire::mr_flag::retransmit : 0));
    spec.mr_data.stream_id = stream;
    spec.mr_data.path_seq = next_rx_path_seq(r, path % wire::max_paths);
    spec.mr_data.msg_seq = msg_seq;
    spec.mr_data.tsval = static_cast<std::uint32_t>(now_ / 1000);
    const std::uint32_t claimed_length = (flags & 0x40) ? r.u32() : m.length;
    if (is_send) {
      spec.mr_send.recv_seq = (flags & 0x80) ? r.u32() : m.recv_seq;
      spec.mr_send.msg_len = claimed_length;
      spec.mr_send.msg_offset = offset;
    } else {
      spec.mr_write.va = reinterpret_cast<std::uintptr_t>(memory_.b()) + m.region_offset + offset;
      spec.mr_write.rkey = key_b_;
      if (flags & 0x80) {  // somewhere near: across the region's ends, or another key
        spec.mr_write.va += static_cast<std::int16_t>(r.u16()) * 4;
        if (r.u8() & 1) spec.mr_write.rkey = r.u8() & 1 ? key_a_ : r.u32();
      }
      spec.mr_write.msg_len = claimed_length;
      spec.mr_write.msg_offset = offset;
    }
    spec.imm = 0x1000000u + msg_seq;
    std::vector<std::uint8_t> payload(length, static_cast<std::uint8_t>(0x40 + msg_seq));
    build_and_deliver(spec, payload);
  }

  void metaroce_probe(Reader& r) {
    wire::FrameSpec spec = frame_spec(peer_config_, wire::opcode::mr_probe, static_cast<std::uint16_t>(config_.base_src_port), false);
    const std::uint8_t path = pick_path(r);
    spec.mr_data.path_id = path;
    spec.mr_data.path_seq = next_rx_path_seq(r, path % wire::max_paths);
    spec.mr_data.tsval = r.u32();
    build_and_deliver(spec, {});
  }

  void metaroce_ack(Reader& r, bool nak) {
    wire::FrameSpec spec = frame_spec(peer_config_, wire::opcode::mr_ack, static_cast<std::uint16_t>(config_.base_src_port), false);
    const std::uint8_t syndrome_pick = r.u8();
    spec.mr_ack.syndrome = nak ? nak_syndrome(syndrome_pick) : static_cast<std::uint8_t>(syndrome_pick & 0x1f);
    spec.bth.psn = some_sent_psn(r);
    const std::uint8_t delivered = r.u8();
    spec.mr_ack.delivered_psn =
        delivered == 0xff ? r.u32() : (config_.initial_psn + delivered % (sent_psns_.size() + 2)) & wire::psn_mask;
    spec.mr_ack.completed_msn = r.u8();
    spec.mr_ack.rate_hint_mbps = (syndrome_pick & 0x20) ? r.u32() : 0;
    const std::size_t blocks = r.u8() % (config_.paths + 2);
    std::vector<wire::MrPathAck> acks(blocks);
    for (wire::MrPathAck& block : acks) {
      block.path_id = pick_path(r);
      const std::uint8_t behind = r.u8();
      block.cum_seq = tx_next_path_seq_[block.path_id] - behind % 4;
      if (behind == 0xff) block.cum_seq = r.u32();
      block.ts_echo = static_cast<std::uint32_t>(now_ / 1000) - r.u8();
      block.ce_count = r.u8();
      const std::uint32_t sack = (behind & 0x80) ? r.u32() : 0;
      for (std::size_t i = 0; i < 4; ++i) block.sack[i] = static_cast<std::uint8_t>(sack >> (8 * i));
      if (behind & 0x40) block.sack[r.u8() % 32] = r.u8();
    }
    spec.mr_path_acks = acks;
    build_and_deliver(spec, {});
  }

  void interpreted_roce(Reader& r) {
    const std::uint8_t selector = r.u8();
    if (selector % 8 < 5) {
      roce_data(r);
    } else if (selector % 8 < 7) {
      wire::FrameSpec spec = frame_spec(peer_config_, wire::opcode::acknowledge, config_.base_src_port, false);
      const std::uint8_t syndrome_pick = r.u8();
      spec.aeth.syndrome = selector % 8 == 6 ? nak_syndrome(syndrome_pick) : static_cast<std::uint8_t>(syndrome_pick & 0x1f);
      spec.aeth.msn = r.u16();
      spec.bth.psn = some_sent_psn(r);
      build_and_deliver(spec, {});
    } else {
      wire::FrameSpec spec = frame_spec(peer_config_, wire::opcode::cnp, config_.base_src_port, false);
      spec.bth.becn = true;
      build_and_deliver(spec, {});
    }
  }

  // The peer's RC data packets: the PSN is the next expected one unless the
  // input says otherwise; FIRST and ONLY carry a RETH into B.
  void roce_data(Reader& r) {
    const std::uint8_t opcode = r.u8() % (wire::opcode::write_only_imm + 1);
    const std::uint8_t flags = r.u8();
    wire::FrameSpec spec = frame_spec(peer_config_, opcode, config_.base_src_port, true);
    if (flags & 0x01) spec.ipv4.ecn = spec.ipv6.ecn = 3;
    std::uint32_t psn_step = next_peer_psn_;
    if (flags & 0x02) psn_step += static_cast<std::int8_t>(r.u8());  // a gap or a duplicate
    spec.bth.psn = (config_.peer_initial_psn + psn_step) & wire::psn_mask;
    if (!(flags & 0x02)) ++next_peer_psn_;
    spec.bth.ack_req = (flags & 0x04) != 0;
    const bool full = opcode == wire::opcode::send_first || opcode == wire::opcode::send_middle ||
                      opcode == wire::opcode::write_first || opcode == wire::opcode::write_middle;
    const std::uint32_t length = full && !(flags & 0x08) ? config_.mtu : r.u16() % (config_.mtu + 1);
    spec.reth.va = reinterpret_cast<std::uintptr_t>(memory_.b()) + r.u16() % GuardedMemory::region;
    spec.reth.rkey = key_b_;
    spec.reth.dma_len = r.u16() % 2048;
    if (flags & 0x10) {  // near or across the region's ends, or another key
      spec.reth.va += static_cast<std::int16_t>(r.u16()) * 4;
      spec.reth.rkey = r.u8() & 1 ? key_a_ : r.u32();
    }
    spec.imm = r.u32();
    std::vector<std::uint8_t> payload(length, static_cast<std::uint8_t>(0x60 + psn_step));
    build_and_deliver(spec, payload);
  }

  GuardedMemory& memory_;
  const bool rocev2_;
  MemoryRegistry registry_;
  std::uint32_t key_a_ = 0, key_b_ = 0;
  ConnectionConfig config_;
  ConnectionConfig peer_config_;
  timer::Wheel wheel_{0};
  Time now_ = 1'000;
  // Declared after the wheel: destroyed first, its timers cancelled while
  // the wheel still exists.
  std::unique_ptr<Connection> connection_;

  std::uint64_t next_wr_id_ = 1;
  std::set<std::uint64_t> outstanding_;
  std::vector<std::uint32_t> sent_psns_;
  std::array<std::uint32_t, wire::max_paths> tx_next_path_seq_{};
  std::array<std::uint32_t, wire::max_paths> rx_next_path_seq_{};
  std::map<std::pair<std::uint16_t, std::uint32_t>, PeerMessage> messages_;
  std::map<std::tuple<std::uint16_t, std::uint32_t, std::uint32_t>, std::uint32_t> packet_psns_;
  std::array<std::uint32_t, 2> next_recv_seq_{};
  std::uint32_t next_peer_psn_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader input(std::span<const std::uint8_t>(data, size));
  const std::uint8_t variant = input.u8();
  Harness harness(variant, guarded_memory());
  harness.run(input);
  return 0;
}
