#include "transfer_harness.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "wire/opcode.hpp"

namespace metaroce::test {
namespace {

using transport::Completion;
using transport::CompletionKind;
using transport::CompletionStatus;
using transport::SendOp;

constexpr std::size_t canary_size = 4096;
constexpr std::uint8_t canary_byte = 0xc5;

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The bytes of message k: a function of (k, offset) only.
void fill_pattern(std::uint64_t k, std::uint8_t* out, std::uint64_t len) {
  std::uint64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    const std::uint64_t w = splitmix(k * 0x100000001b3ull + i / 8);
    std::memcpy(out + i, &w, 8);
  }
  if (i < len) {
    const std::uint64_t w = splitmix(k * 0x100000001b3ull + i / 8);
    std::memcpy(out + i, &w, len - i);
  }
}

// First offset where `data` differs from message k's pattern, or len.
std::uint64_t first_mismatch(std::uint64_t k, const std::uint8_t* data, std::uint64_t len) {
  std::uint8_t expected[4096];
  for (std::uint64_t at = 0; at < len; at += sizeof expected) {
    const std::uint64_t n = std::min<std::uint64_t>(sizeof expected, len - at);
    // Patterns are defined per 8-byte word from offset 0: regenerate from `at`.
    for (std::uint64_t i = 0; i < n; i += 8) {
      const std::uint64_t w = splitmix(k * 0x100000001b3ull + (at + i) / 8);
      std::memcpy(expected + i, &w, std::min<std::uint64_t>(8, n - i));
    }
    if (std::memcmp(expected, data + at, n) != 0) {
      for (std::uint64_t i = 0; i < n; ++i)
        if (expected[i] != data[at + i]) return at + i;
    }
  }
  return len;
}

// A region with canaries on both sides; only the middle is registered.
struct GuardedBuffer {
  explicit GuardedBuffer(std::size_t size) : bytes(size + 2 * canary_size, canary_byte), size(size) {
    std::memset(data(), 0, size);
  }
  std::uint8_t* data() { return bytes.data() + canary_size; }
  bool canaries_intact() const {
    for (std::size_t i = 0; i < canary_size; ++i)
      if (bytes[i] != canary_byte || bytes[canary_size + size + i] != canary_byte) return false;
    return true;
  }
  std::vector<std::uint8_t> bytes;
  std::size_t size;
};

// FIFO allocation in a ring; space comes back when the oldest allocations
// are released (in any order; freed in allocation order).
class RingAllocator {
 public:
  explicit RingAllocator(std::uint64_t size) : size_(size) {}
  bool allocate(std::uint64_t len, std::uint64_t& offset, std::uint64_t& id) {
    len = std::max<std::uint64_t>(len, 1);
    if (live_.empty()) {
      if (len > size_) return false;
      offset = 0;
    } else {
      // Live bytes run from the oldest allocation (tail) to head_, around
      // the ring; head_ never catches up with tail, so equal means empty.
      const std::uint64_t tail = live_.front().offset;
      if (head_ > tail) {
        if (head_ + len <= size_) {
          offset = head_;
        } else if (len < tail) {
          offset = 0;
        } else {
          return false;
        }
      } else if (head_ < tail && head_ + len < tail) {
        offset = head_;
      } else {
        return false;
      }
    }
    head_ = offset + len;
    id = next_id_++;
    live_.push_back({offset, id, false});
    return true;
  }
  void release(std::uint64_t id) {
    for (auto& a : live_)
      if (a.id == id) a.done = true;
    while (!live_.empty() && live_.front().done) live_.pop_front();
  }

 private:
  struct Allocation {
    std::uint64_t offset;
    std::uint64_t id;
    bool done;
  };
  std::uint64_t size_;
  std::uint64_t head_ = 0;
  std::uint64_t next_id_ = 0;
  std::deque<Allocation> live_;
};

struct MessageRecord {
  SendOp op;
  std::uint16_t stream;
  std::uint64_t length;
  std::uint64_t src_offset, src_alloc;
  std::uint64_t dst_offset, dst_alloc;
  bool sender_done = false;
  bool receiver_done = false;
};

}  // namespace

TransferResult run_transfer(const TransferSpec& spec) {
  TransferResult result;
  const auto fail = [&](std::string what) {
    if (result.error.empty()) result.error = std::move(what);
  };

  constexpr std::uint64_t ring_size = 96ull << 20;
  GuardedBuffer src(ring_size);
  GuardedBuffer dst(ring_size);
  RingAllocator src_ring(ring_size);
  RingAllocator dst_ring(ring_size);

  host::SimEndpoint a;
  host::SimEndpoint b;
  const std::uint32_t src_key = a.memory().register_region(src.data(), ring_size, transport::access_local_write);
  const std::uint32_t dst_key = b.memory().register_region(
      dst.data(), ring_size,
      transport::access_local_write | transport::access_remote_write | transport::access_remote_read);
  GuardedBuffer counters(8 * std::max<std::uint32_t>(spec.atomic_counters, 1));
  const std::uint32_t counters_key =
      b.memory().register_region(counters.data(), counters.size, transport::access_remote_atomic);
  std::vector<std::uint64_t> increments(std::max<std::uint32_t>(spec.atomic_counters, 1), 0);
  std::vector<std::vector<bool>> returned(increments.size());  // per counter: old values seen

  transport::ConnectionConfig ca = spec.base;
  const bool rocev2 = ca.mode == transport::Mode::rocev2;
  // rocev2 has one UDP source port, hence one path, whatever the fabric has.
  ca.paths = rocev2 ? 1 : spec.paths;
  ca.streams = spec.streams;
  ca.mtu = spec.mtu;
  ca.endpoints.local_mac = {2, 0, 0, 0, 0, 1};
  ca.endpoints.peer_mac = {2, 0, 0, 0, 0, 2};
  ca.endpoints.local_ipv4 = 0x0a000001;
  ca.endpoints.peer_ipv4 = 0x0a000002;
  ca.local_qpn = 0x11;
  ca.peer_qpn = 0x22;
  ca.initial_psn = static_cast<std::uint32_t>(splitmix(spec.seed) & wire::psn_mask);
  ca.peer_initial_psn = static_cast<std::uint32_t>(splitmix(spec.seed + 1) & wire::psn_mask);
  transport::ConnectionConfig cb = ca;
  std::swap(cb.endpoints.local_mac, cb.endpoints.peer_mac);
  std::swap(cb.endpoints.local_ipv4, cb.endpoints.peer_ipv4);
  std::swap(cb.local_qpn, cb.peer_qpn);
  std::swap(cb.initial_psn, cb.peer_initial_psn);
  cb.base_src_port = 50000;

  // Windows near the bandwidth-delay product keep queues short without a
  // congestion controller (lib/cc brings one).
  cc::CcConfig cc_config;
  cc_config.fixed_path_window = spec.fixed_path_window;
  cc_config.fixed_connection_window = spec.fixed_connection_window;
  cc_config.metaroce.paths = ca.paths;
  cc_config.dcqcn.line_rate_bps = spec.nic_rate_bps;
  std::string cc_error;
  auto sender_cc = cc::make(spec.cc, cc_config, cc_error);
  auto receiver_cc = cc::make(spec.cc, cc_config, cc_error);
  if (!sender_cc) {
    result.error = cc_error;
    return result;
  }
  auto& sender = a.add(ca, std::move(sender_cc));
  auto& receiver = b.add(cb, std::move(receiver_cc));
  if (spec.secure) {
    transport::SecurityConfig ka, kb;
    ka.protection = kb.protection = spec.protection;
    ka.rotate_after_frames = kb.rotate_after_frames = spec.rotate_after_frames;
    for (std::size_t i = 0; i < ka.tx_key.size(); ++i) {
      ka.tx_key[i] = kb.rx_key[i] = static_cast<std::uint8_t>(splitmix(spec.seed + 10 + i));
      ka.rx_key[i] = kb.tx_key[i] = static_cast<std::uint8_t>(splitmix(spec.seed + 100 + i));
    }
    ka.tx_spi = kb.rx_spi = 0x5ec0'0001u;
    ka.rx_spi = kb.tx_spi = 0x5ec0'0002u;
    std::string error;
    if (!a.host().set_security(ca.local_qpn, ka, error) || !b.host().set_security(cb.local_qpn, kb, error)) {
      result.error = error;
      return result;
    }
  }
  cc::FairShare fair_share(cc::FairShareParams{spec.receive_capacity_bps});
  if (spec.receive_capacity_bps > 0) receiver.attach_receive_share(&fair_share);
  sender.connect();
  receiver.connect();

  sim::Network net;
  const auto ia = net.add(a, sim::HostConfig{{ca.endpoints.local_mac, ca.endpoints.local_ipv4, {}}, spec.nic_rate_bps, 24});
  const auto ib = net.add(b, sim::HostConfig{{cb.endpoints.local_mac, cb.endpoints.local_ipv4, {}}, spec.nic_rate_bps, 24});
  net.connect(ia, ib, spec.forward, spec.backward);
  net.on_delivery([&](const sim::Delivery& d) {
    if (d.to != ib || d.frame.size() < 40) return;
    wire::ParsedFrame p;
    if (wire::parse_frame(d.frame, p) == wire::ParseError::ok &&
        p.has(wire::has_payload) &&
        (wire::is_metaroce_opcode(p.bth.opcode) || (rocev2 && p.bth.opcode <= wire::opcode::write_only_imm)))
      ++result.data_frames_delivered;
  });

  std::mt19937_64 rng(spec.seed);
  std::vector<MessageRecord> messages;
  messages.reserve(spec.messages);
  std::vector<std::deque<std::uint64_t>> expect_send(spec.streams), expect_recv(spec.streams);
  std::size_t posted = 0, outstanding = 0, completed = 0;

  const auto post_more = [&] {
    while (posted < spec.messages && outstanding < spec.max_outstanding_messages) {
      MessageRecord m{};
      std::vector<SendOp> ops = {SendOp::write, SendOp::write_imm};
      if (spec.sends) ops.push_back(SendOp::send);
      if (spec.reads) ops.push_back(SendOp::read);
      if (spec.atomics) ops.push_back(SendOp::fetch_add);
      m.op = ops[rng() % ops.size()];
      m.stream = static_cast<std::uint16_t>(rng() % spec.streams);
      if (m.op == SendOp::fetch_add) {
        m.length = transport::atomic_length;
      } else if (rng() % 100 == 0) {
        m.length = 0;
      } else {
        const double lg = std::log2(static_cast<double>(spec.max_message)) * static_cast<double>(rng() % 1'000'000) / 1e6;
        m.length = std::max<std::uint64_t>(1, std::min<std::uint64_t>(spec.max_message, static_cast<std::uint64_t>(std::exp2(lg))));
      }
      if (!src_ring.allocate(m.length, m.src_offset, m.src_alloc)) return;
      if (!dst_ring.allocate(m.length, m.dst_offset, m.dst_alloc)) {
        src_ring.release(m.src_alloc);
        return;
      }
      const std::uint64_t k = posted;
      // A READ's bytes go the other way: from the receiver's ring into the
      // sender's.
      const bool read = m.op == SendOp::read;
      fill_pattern(k, (read ? dst : src).data() + (read ? m.dst_offset : m.src_offset), m.length);
      std::memset((read ? src : dst).data() + (read ? m.src_offset : m.dst_offset), 0, m.length);
      transport::SendRequest r;
      r.wr_id = k;
      r.op = m.op;
      r.stream = m.stream;
      r.local_addr = src.data() + m.src_offset;
      r.length = m.length;
      r.lkey = src_key;
      r.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data() + m.dst_offset);
      r.rkey = dst_key;
      r.imm = static_cast<std::uint32_t>(k * 2654435761u);
      if (m.op == SendOp::fetch_add) {
        m.dst_offset = k % increments.size();  // the counter
        r.remote_addr = reinterpret_cast<std::uintptr_t>(counters.data() + 8 * m.dst_offset);
        r.rkey = counters_key;
        r.swap_add = 1;
        ++increments[m.dst_offset];
      }
      if (transport::consumes_receive(m.op)) {
        transport::ReceiveRequest rr;
        rr.wr_id = k;
        rr.stream = m.stream;
        if (m.op == SendOp::send) {
          rr.addr = dst.data() + m.dst_offset;
          rr.length = m.length;
          rr.lkey = dst_key;
        }
        if (receiver.post_receive(rr) != transport::PostResult::ok) fail("post_receive refused");
        expect_recv[m.stream].push_back(k);
      }
      const auto pr = sender.post_send(r);
      if (pr != transport::PostResult::ok) fail(fmt::format("post_send refused: {}", transport::to_string(pr)));
      expect_send[m.stream].push_back(k);
      messages.push_back(m);
      ++posted;
      ++outstanding;
    }
  };

  const auto finish_message = [&](std::uint64_t k) {
    MessageRecord& m = messages[k];
    if (!m.sender_done || (transport::consumes_receive(m.op) && !m.receiver_done)) return;
    if (m.op == SendOp::fetch_add) {
      std::uint64_t old = 0;
      std::memcpy(&old, src.data() + m.src_offset, sizeof old);
      std::vector<bool>& seen = returned[m.dst_offset];
      if (old >= seen.size()) seen.resize(old + 1, false);
      if (seen[old]) fail(fmt::format("fetch_add {}: old value {} of counter {} returned twice", k, old, m.dst_offset));
      seen[old] = true;
      ++result.atomics_verified;
    } else {
      const bool read = m.op == SendOp::read;
      const std::uint64_t bad = first_mismatch(k, (read ? src.data() + m.src_offset : dst.data() + m.dst_offset), m.length);
      if (bad != m.length) fail(fmt::format("message {} ({} bytes): byte {} differs", k, m.length, bad));
      result.bytes_verified += m.length;
      if (read) ++result.reads_verified;
    }
    src_ring.release(m.src_alloc);
    dst_ring.release(m.dst_alloc);
    --outstanding;
    ++completed;
  };

  std::vector<Completion> cq;
  const auto check_completions = [&] {
    cq.clear();
    sender.poll_completions(cq);
    for (const Completion& c : cq) {
      if (c.status != CompletionStatus::success) {
        fail(fmt::format("send {} completed with {}", c.wr_id, transport::to_string(c.status)));
        continue;
      }
      auto& q = expect_send[c.stream];
      if (q.empty() || q.front() != c.wr_id) {
        fail(fmt::format("send completion {} out of order on stream {}", c.wr_id, c.stream));
        continue;
      }
      q.pop_front();
      MessageRecord& m = messages[c.wr_id];
      if (c.kind != transport::completion_kind(m.op) || c.byte_len != m.length)
        fail(fmt::format("send completion {} has the wrong kind or length", c.wr_id));
      if (m.sender_done) fail(fmt::format("send {} completed twice", c.wr_id));
      m.sender_done = true;
      finish_message(c.wr_id);
    }
    cq.clear();
    receiver.poll_completions(cq);
    for (const Completion& c : cq) {
      if (c.status != CompletionStatus::success) {
        fail(fmt::format("receive {} completed with {}", c.wr_id, transport::to_string(c.status)));
        continue;
      }
      auto& q = expect_recv[c.stream];
      if (q.empty() || q.front() != c.wr_id) {
        fail(fmt::format("receive completion {} out of order on stream {}", c.wr_id, c.stream));
        continue;
      }
      q.pop_front();
      MessageRecord& m = messages[c.wr_id];
      const bool imm_expected = m.op == SendOp::write_imm;
      if (c.byte_len != m.length || c.has_imm != imm_expected ||
          (imm_expected && c.imm != static_cast<std::uint32_t>(c.wr_id * 2654435761u)) ||
          (c.kind == CompletionKind::receive) != (m.op == SendOp::send)) {
        fail(fmt::format("receive completion {} has wrong length, kind or immediate", c.wr_id));
      }
      if (m.receiver_done) fail(fmt::format("receive {} completed twice", c.wr_id));
      m.receiver_done = true;
      finish_message(c.wr_id);
    }
  };

  post_more();
  while (result.error.empty() && completed < spec.messages) {
    if (!net.step(spec.time_limit_ns)) break;
    check_completions();
    post_more();
    for (std::uint16_t p = 0; p < ca.paths; ++p)
      result.max_path_in_flight = std::max<std::uint64_t>(result.max_path_in_flight, sender.path_info(p).in_flight);
    result.max_outstanding_psns = std::max(result.max_outstanding_psns, sender.packets_outstanding());
    if (sender.state() != transport::ConnectionState::ready || receiver.state() != transport::ConnectionState::ready)
      fail(fmt::format("connection left READY: sender {}, receiver {}", transport::to_string(sender.state()),
                       transport::to_string(receiver.state())));
  }
  result.finished = completed == spec.messages;
  if (!result.finished) fail(fmt::format("{} of {} messages completed by t={} ns", completed, spec.messages, net.now()));
  if (!src.canaries_intact() || !dst.canaries_intact() || !counters.canaries_intact())
    fail("a canary around a registered region changed");
  for (std::size_t c = 0; result.finished && spec.atomics && c < increments.size(); ++c) {
    std::uint64_t value = 0;
    std::memcpy(&value, counters.data() + 8 * c, sizeof value);
    if (value != increments[c]) fail(fmt::format("counter {} is {} after {} increments", c, value, increments[c]));
    if (std::count(returned[c].begin(), returned[c].end(), true) != static_cast<std::ptrdiff_t>(increments[c]))
      fail(fmt::format("counter {}: {} distinct old values for {} increments", c,
                       std::count(returned[c].begin(), returned[c].end(), true), increments[c]));
  }
  // rocev2's one path carries the whole connection window.
  if (spec.cc == "fixed") {
    // A rocev2 READ larger than the window goes alone, its PSNs all
    // outstanding.
    const std::uint64_t window = rocev2 && spec.reads
                                     ? std::max<std::uint64_t>(spec.fixed_connection_window,
                                                               (spec.max_message + spec.mtu - 1) / spec.mtu)
                                     : spec.fixed_connection_window;
    if (result.max_path_in_flight > (rocev2 ? window : spec.fixed_path_window))
      fail("a path exceeded its window");
    if (result.max_outstanding_psns > window) fail("the connection exceeded its window");
  }
  result.virtual_ns = net.now();
  result.messages_completed = completed;
  result.sender = sender.counters();
  result.receiver = receiver.counters();
  result.data_frames_sent = result.sender.data_packets_sent + result.sender.retransmitted_packets;
  for (std::uint16_t p = 0; p < ca.paths; ++p) result.paths.push_back(sender.path_info(p));
  result.forward_counters = net.fabric(ia, ib).counters();
  result.backward_counters = net.fabric(ib, ia).counters();
  result.receiver_parse_errors = b.counters().rx_parse_errors;
  return result;
}

}  // namespace metaroce::test
