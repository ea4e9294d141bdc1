#include "metaroce-perf/remote_run.hpp"

#include <sys/random.h>
#include <x86intrin.h>

#include <metaroce/endpoint.hpp>

#include <algorithm>
#include <mutex>
#include <chrono>
#include <atomic>
#include <csignal>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/cpu_time.hpp"
#include "common/gid_text.hpp"
#include "common/oob_exchange.hpp"
#include "common/run_control.hpp"
#include "cm/ibta_cm.hpp"
#include "metaroce-perf/message_pattern.hpp"
#include "wire/byte_order.hpp"

namespace metaroce::perf {

namespace {

constexpr std::uint64_t slot_budget_bytes = 64ull << 20;  // as the loopback
constexpr std::uint64_t drain_limit_ns = 5'000'000'000;
constexpr std::uint64_t peak_window_ns = 100'000'000;
constexpr std::uint64_t no_message = ~std::uint64_t{0};
// What a server's host and connection manager allow; --max-connections,
// at most this, is enforced by the server itself.
constexpr std::uint32_t max_server_connections = 16384;
// The server answers repeated DREQs this long after the client's last one.
constexpr std::uint64_t server_linger_ns = 200'000'000;

std::atomic<bool> interrupted{false};
extern "C" void on_signal(int) { interrupted.store(true); }

// --- private data of the CM messages (big-endian) -------------------------

// REQ: what the client will send on this connection, and which of the
// client's -q connections of this size it is (for the server's log; each
// connection numbers its own messages 0, 1, ...).
struct Offer {
  PerfOp op = PerfOp::write;
  bool verify = false;
  std::uint32_t slots = 0;
  std::uint64_t size = 0;
  std::uint32_t receives_per_stream = 0;
  std::uint16_t connection = 0;   // 0..connections-1
  std::uint16_t connections = 1;  // the client's -q
};
std::vector<std::uint8_t> encode(const Offer& o) {
  std::vector<std::uint8_t> b(24, 0);
  b[0] = static_cast<std::uint8_t>(o.op);
  b[1] = o.verify ? 1 : 0;
  wire::store_be32(b.data() + 4, o.slots);
  wire::store_be64(b.data() + 8, o.size);
  wire::store_be32(b.data() + 16, o.receives_per_stream);
  wire::store_be16(b.data() + 20, o.connection);
  wire::store_be16(b.data() + 22, o.connections);
  return b;
}
bool decode(const std::vector<std::uint8_t>& b, Offer& o) {
  if (b.size() < 20 || b[0] > static_cast<std::uint8_t>(PerfOp::cmp_swap)) return false;
  o.op = static_cast<PerfOp>(b[0]);
  o.verify = b[1] != 0;
  o.slots = wire::load_be32(b.data() + 4);
  o.size = wire::load_be64(b.data() + 8);
  o.receives_per_stream = wire::load_be32(b.data() + 16);
  if (b.size() >= 24) {  // a client from before -q sends 20 bytes: its only connection
    o.connection = wire::load_be16(b.data() + 20);
    o.connections = wire::load_be16(b.data() + 22);
  }
  return o.size >= 1 && o.size <= (std::uint64_t{1} << 30) && o.slots >= 1 && (!is_atomic(o.op) || o.size == 8) &&
         o.slots * o.size <= 2 * slot_budget_bytes + o.size && o.receives_per_stream <= 65536 &&
         o.connections >= 1 && o.connection < o.connections;
}
// " (connection 2 of 4)" for a client's -q connection, "" for its only one.
std::string which_of(const Offer& o) {
  return o.connections > 1 ? fmt::format(" (connection {} of {})", o.connection + 1, o.connections) : std::string();
}

// What the client sends of `size` and what the server keeps ready for it:
// one formula, so that two ends set up by hand (no REQ carries it) agree.
Offer offer_for(const PerfOptions& o, std::uint64_t size) {
  // As in the loopback: up to tx_depth slots per connection, within the
  // slot budget for the whole size (at least one each).
  const auto slots = static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(slot_budget_bytes / (size * o.qps), 1, o.tx_depth));  // per connection
  Offer offer;
  offer.op = o.op;
  offer.verify = o.verify;
  offer.slots = slots;
  offer.size = size;
  const std::uint64_t per_stream_in_flight = (slots + o.streams - 1) / o.streams;
  offer.receives_per_stream = static_cast<std::uint32_t>(std::max<std::uint64_t>(
      per_stream_in_flight + 1,
      std::min<std::uint64_t>(2 * per_stream_in_flight + 16,
                              o.op == PerfOp::send ? 2 * slot_budget_bytes / (size * o.streams * o.qps) : ~0ull)));
  return offer;
}

// This end of a connection set up by hand, as perftest prints it.
void print_local_address(std::FILE* progress, const PerfOptions& o, const metaroce::Connection& c,
                         std::uint64_t vaddr, std::uint32_t rkey) {
  if (progress == nullptr) return;
  std::fprintf(progress, " local address: LID 0000 QPN 0x%06x PSN 0x%06x RKey 0x%08x VAddr 0x%016llx\n GID: %s\n",
               c.qpn(), c.initial_psn(), rkey, static_cast<unsigned long long>(vaddr),
               apps::gid_text(o.local_ip).c_str());
  std::fprintf(progress, " remote address: QPN 0x%06x PSN 0x%06x%s\n", o.peer_qpn, o.peer_psn,
               o.role == PerfRole::client && o.op != PerfOp::send
                   ? fmt::format(" RKey 0x{:08x} VAddr 0x{:016x}", o.rkey, o.remote_addr).c_str()
                   : "");
  std::fflush(progress);
}

metaroce::StaticConnectOptions by_hand_options(const PerfOptions& o, const metaroce::ConnectOptions& request) {
  metaroce::StaticConnectOptions s;
  s.connection = request;
  s.connection.mtu = o.mtu;  // perftest's exchange may have agreed a smaller one
  s.local_qpn = o.qpn;
  s.local_psn_given = o.psn_given;
  s.local_psn = o.psn;
  s.peer_qpn = o.peer_qpn;
  s.peer_psn = o.peer_psn;
  return s;
}

// This end's message of perftest's out-of-band exchange.
apps::OobKeys out_of_band_keys(const PerfOptions& o, const metaroce::Connection& c, std::uint64_t vaddr,
                               std::uint32_t rkey) {
  apps::OobKeys k;
  k.out_reads = 16;  // the transport's READs and atomics at once
  k.qpn = c.qpn();
  k.psn = c.initial_psn();
  k.rkey = rkey;
  k.vaddr = vaddr;
  wire::IpAddress local;
  if (wire::parse_ip(o.local_ip, local)) k.gid = apps::gid_bytes(local);
  return k;
}

// 24 random bits (getrandom(2)): a QPN or PSN a peer cannot guess.
std::uint32_t random24() {
  std::uint32_t v = 0;
  while (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
  }
  return v & 0xffffff;
}

// REP: where to write, or what to read or update atomically.
struct Target {
  std::uint64_t addr = 0;
  std::uint32_t rkey = 0;
};
std::vector<std::uint8_t> encode(const Target& t) {
  std::vector<std::uint8_t> b(12, 0);
  wire::store_be64(b.data(), t.addr);
  wire::store_be32(b.data() + 8, t.rkey);
  return b;
}

// DREQ: what the client did; DREP: what the server found.
struct ClientSummary {
  std::uint64_t completed = 0;  // messages of this connection completed successfully at the client, 0..completed-1
  bool last = false;            // no more connections follow: the client's last DREQ, sent once every other
                                // connection of its has its DREP
};
struct ServerSummary {
  std::uint64_t received = 0;  // messages completed (write-imm, send) or checked (write) at the server
  std::uint64_t wrong = 0;
  std::uint64_t first_wrong = no_message;
};
std::vector<std::uint8_t> encode(const ClientSummary& s) {
  std::vector<std::uint8_t> b(9, 0);
  wire::store_be64(b.data(), s.completed);
  b[8] = s.last ? 1 : 0;
  return b;
}
std::vector<std::uint8_t> encode(const ServerSummary& s) {
  std::vector<std::uint8_t> b(24, 0);
  wire::store_be64(b.data(), s.received);
  wire::store_be64(b.data() + 8, s.wrong);
  wire::store_be64(b.data() + 16, s.first_wrong);
  return b;
}
template <class T>
bool decode_summary(const std::vector<std::uint8_t>& b, T& s);
template <>
bool decode_summary(const std::vector<std::uint8_t>& b, ClientSummary& s) {
  if (b.size() < 9) return false;
  s.completed = wire::load_be64(b.data());
  s.last = b[8] != 0;
  return true;
}
template <>
bool decode_summary(const std::vector<std::uint8_t>& b, ServerSummary& s) {
  if (b.size() < 24) return false;
  s.received = wire::load_be64(b.data());
  s.wrong = wire::load_be64(b.data() + 8);
  s.first_wrong = wire::load_be64(b.data() + 16);
  return true;
}

std::vector<std::pair<std::string, std::uint64_t>> cm_counters(const std::vector<metaroce::CounterGroup>& groups) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (const metaroce::CounterGroup& g : groups)
    if (g.name == "cm")
      for (const metaroce::Counter& c : g.counters) out.emplace_back(c.name, c.value);
  return out;
}

// The report's counter structs (shared with --loopback) from the public
// API's groups, by name.
void add_by_name(engine::EngineCounters& out, const std::vector<metaroce::CounterGroup>& groups) {
  for (const metaroce::CounterGroup& g : groups)
    if (g.name == "host") out.visit([&](const std::string& name, std::uint64_t& v) { v = g.get(name); });
}
void add_by_name(transport::ConnectionCounters& out, const metaroce::CounterGroup& g) {
  out.for_each([&](std::string_view name, std::uint64_t& v) { v += g.get(name); });
}

metaroce::EndpointConfig endpoint_config(const PerfOptions& o) {
  metaroce::EndpointConfig r;
  r.program = "metaroce-perf";
  r.preset = o.preset_path;
  r.iface = o.iface;
  r.port = o.port_name;
  r.eal_args = o.eal_args;
  r.local_ip = o.local_ip;
  for (const apps::PlanePortOptions& m : o.more_planes) r.more_planes.push_back({m.preset, m.iface, m.port, m.local_ip});
  r.name = o.role == PerfRole::server ? "server" : "client";
  r.mtu = o.mtu;
  r.idle_sleep_us = o.idle_sleep_us;
  r.receive_capacity_bps = o.receive_capacity_bps;
  r.connect_timeout_s = o.cm_timeout_s;
  r.key_file = o.key_file;
  r.auth_only = o.auth_only;
  r.pkey = o.rocev2.pkey;
  r.ibta_cm = o.rocev2.ibta_cm;
  // The server's own check refuses beyond --max-connections, saying so: its
  // host and connection manager must not refuse first.
  r.max_connections = o.role == PerfRole::server ? max_server_connections : o.qps;
  return r;
}

// ---------------------------------------------------------------- server ---

// What the client's operation may do to the server's slots.
std::uint32_t remote_access(PerfOp op) {
  return op == PerfOp::read ? metaroce::access_remote_read
         : is_atomic(op)    ? metaroce::access_remote_atomic
                            : metaroce::access_remote_write;
}

struct Session {
  metaroce::Connection* connection = nullptr;
  Offer offer;
  std::vector<std::uint8_t> write_region;
  std::vector<std::uint8_t> receive_region;
  metaroce::MemoryRegion write_memory, receive_memory;
  std::vector<std::uint64_t> expected_next;  // per stream
  ServerSummary summary;
  std::uint16_t streams = 1;
  std::uint64_t stride = 0;  // slot j of write_region at j * stride
  std::uint64_t started_ns = 0;
  std::string problem;

  void wrong(std::uint64_t m) {
    ++summary.wrong;
    if (summary.first_wrong == no_message) summary.first_wrong = m;
  }
  bool post_receive(std::uint64_t index, std::uint16_t stream) {
    metaroce::ReceiveWork r;
    r.wr_id = index;
    r.stream = stream;
    r.addr = receive_region.data() + index * (offer.op == PerfOp::send ? offer.size : 0);
    r.length = offer.op == PerfOp::send ? offer.size : 0;
    r.lkey = receive_memory.key;
    return connection->post_receive(r) == metaroce::PostResult::ok;
  }
  // A receive completion (write-imm, send), checked as it is delivered.
  void check(const metaroce::Completion& c) {
    if (c.status != metaroce::Status::success) {
      if (problem.empty()) problem = fmt::format("receive completion {}", metaroce::to_string(c.status));
      return;
    }
    const std::uint64_t m = expected_next[c.stream];
    expected_next[c.stream] += streams;
    bool ok = true;
    if (offer.op == PerfOp::write_imm) {
      ok = c.imm.has_value() && *c.imm == static_cast<std::uint32_t>(m);
      if (ok && offer.verify) ok = check_pattern(write_region.data() + (m % offer.slots) * stride, offer.size, m);
    } else {
      ok = c.byte_len == offer.size;
      if (ok && offer.verify) ok = check_pattern(receive_region.data() + c.wr_id * offer.size, offer.size, m);
    }
    if (!ok) wrong(m);
    ++summary.received;
    if (!post_receive(c.wr_id, c.stream) && problem.empty()) problem = "re-posting a receive was refused";
  }
  // Plain WRITEs, READs and atomics complete nothing here. At the end, each
  // slot must hold the last message the client wrote into it; a READ's slot
  // still holds the pattern it was read from (the client checked what it
  // read); an atomic's 8 bytes what the client's completed messages made of
  // them, each message exactly once: fetch-add's message m adds m + 1,
  // cmp-swap's swaps in m + 1.
  void check_final(std::uint64_t completed) {
    if (receiver_completes(offer.op)) return;
    if (offer.op == PerfOp::read) {
      for (std::uint64_t j = 0; offer.verify && j < std::min<std::uint64_t>(offer.slots, completed); ++j)
        if (!check_pattern(write_region.data() + j * stride, offer.size, j)) wrong(j);
      summary.received = completed;
      return;
    }
    const std::uint64_t slots = std::min<std::uint64_t>(offer.slots, completed);
    for (std::uint64_t j = 0; j < slots; ++j) {
      const std::uint64_t last = j + ((completed - 1 - j) / offer.slots) * offer.slots;
      if (is_atomic(offer.op)) {
        std::uint64_t want = 0, got = 0;
        std::uint64_t count = 0;
        for (std::uint64_t m = j; m < completed; m += offer.slots, ++count)
          want = offer.op == PerfOp::fetch_add ? want + m + 1 : m + 1;
        std::memcpy(&got, write_region.data() + j * stride, sizeof got);
        if (offer.verify && got != want) wrong(last);
        summary.received += count;
        continue;
      }
      if (offer.verify && !check_pattern(write_region.data() + j * stride, offer.size, last)) wrong(last);
      ++summary.received;
    }
  }
};

// a += b, counter by counter (the engine's maxima: the larger).
void add_engine(engine::EngineCounters& a, const engine::EngineCounters& b) {
  std::vector<std::uint64_t> values;
  b.visit([&](const std::string&, const std::uint64_t& v) { values.push_back(v); });
  std::size_t i = 0;
  a.visit([&](const std::string& name, std::uint64_t& v) {
    const std::uint64_t x = values[i++];
    v = name.starts_with("max_") ? std::max(v, x) : v + x;
  });
}
void add_connection(transport::ConnectionCounters& a, const transport::ConnectionCounters& b) {
  std::vector<std::uint64_t> values;
  b.for_each([&](std::string_view, std::uint64_t v) { values.push_back(v); });
  std::size_t i = 0;
  a.for_each([&](std::string_view, std::uint64_t& v) { v += values[i++]; });
}

// A lane's report from its turns (`me`), its host's counters and its sizes.
LaneReport lane_of(const LcoreResult& me, const engine::EngineCounters& host, const std::vector<SizeResult>& sizes) {
  LaneReport r;
  r.lcore = me;
  for (const SizeResult& s : sizes) r.messages += s.messages;
  r.rx_frames = host.rx_frames;
  r.rx_misdirected = host.rx_misdirected;
  return r;
}

// One run of the lanes' runs. `by_size`: the client's, whose lane k's size i
// is a part of size i (the parts' sums; seconds, the longest lane's);
// otherwise the server's, whose sizes are its connections, all kept.
RunResult merge_lanes(std::vector<RunResult> lanes, bool by_size) {
  RunResult all;
  for (RunResult& r : lanes) {
    if (all.error.empty()) all.error = r.error;
    for (std::size_t i = 0; i < r.sizes.size(); ++i) {
      SizeResult& part = r.sizes[i];
      if (!by_size || i >= all.sizes.size()) {
        all.sizes.push_back(part);
        continue;
      }
      SizeResult& s = all.sizes[i];
      s.messages += part.messages;
      s.seconds = std::max(s.seconds, part.seconds);
      s.peak_bps += part.peak_bps;  // the lanes' best windows, added
      s.wrong_messages += part.wrong_messages;
      s.missing_messages += part.missing_messages;
      if (s.first_problem.empty()) s.first_problem = part.first_problem;
      s.sender_busy_cycles += part.sender_busy_cycles;
      s.sender_turns += part.sender_turns;
      s.sender_busy_turns += part.sender_busy_turns;
      s.packets_sent += part.packets_sent;
      s.cm_setup_per_s += part.cm_setup_per_s;  // the lanes set up theirs at once
      s.connections += part.connections;
    }
    add_engine(all.host_a, r.host_a);
    add_engine(all.host_b, r.host_b);
    add_connection(all.connection_a, r.connection_a);
    add_connection(all.connection_b, r.connection_b);
    all.retransmitted += r.retransmitted;
    all.cm_connections_set_up += r.cm_connections_set_up;
    all.cm_connections_torn_down += r.cm_connections_torn_down;
    all.cm_setup_seconds = std::max(all.cm_setup_seconds, r.cm_setup_seconds);
    all.cm_teardown_seconds = std::max(all.cm_teardown_seconds, r.cm_teardown_seconds);
    for (const auto& [name, value] : r.cm_counters) {
      const auto it = std::find_if(all.cm_counters.begin(), all.cm_counters.end(),
                                   [&](const auto& c) { return c.first == name; });
      if (it == all.cm_counters.end()) all.cm_counters.emplace_back(name, value);
      else it->second += value;
    }
    for (LaneReport& l : r.lanes) all.lanes.push_back(l);
  }
  if (by_size)
    for (SizeResult& s : all.sizes) {
      s.average_bps = s.seconds > 0 ? double(s.messages) * double(s.size) * 8.0 / s.seconds : 0.0;
      s.peak_bps = std::max(s.peak_bps, s.average_bps);
      s.message_rate = s.seconds > 0 ? double(s.messages) / s.seconds : 0.0;
      s.cycles_per_packet = s.packets_sent != 0 ? double(s.sender_busy_cycles) / double(s.packets_sent) : 0.0;
    }
  return all;
}

// What the lanes of one server (--lcores N) share: the connections open
// over all of them (--max-connections counts those), and whether a
// client's last connection closed on one of them (--once: a lane with no
// connection open then stops too, so a client with fewer lanes does not
// leave one waiting for ever).
struct ServerShared {
  std::atomic<std::uint32_t> open{0};
  std::atomic<bool> last_seen{false};
};

// run_server on endpoint `e`, lane `lane` of a server of several (shared:
// their common state; nullptr for a server of one lane).
RunResult serve(const PerfOptions& o, std::unique_ptr<metaroce::Endpoint>& e, std::FILE* progress, std::uint16_t lane,
                ServerShared* shared) {
  RunResult run;
  ServerShared alone;
  ServerShared& all = shared != nullptr ? *shared : alone;
  LcoreResult me;
  me.side = "receiver";
  me.lcore = lane;
  const std::uint64_t cpu_start = apps::thread_cpu_ns();
  std::unordered_map<std::uint32_t, std::unique_ptr<Session>> sessions;  // by local QPN
  // The session's connection and memory go; its counters stay in the run's.
  const auto close_session = [&](Session& s) {
    std::string ignored;
    all.open.fetch_sub(1, std::memory_order_relaxed);
    const metaroce::CounterGroup counters = s.connection->counters();
    add_by_name(run.connection_b, counters);
    me.data_packets += counters.get("data_packets_received");
    e->close(s.connection, ignored);
    if (s.write_memory.valid()) e->deregister_memory(s.write_memory);
    if (s.receive_memory.valid()) e->deregister_memory(s.receive_memory);
  };
  // Set up by perftest's exchange: the client's WRITEs go where perftest
  // puts them (common/oob_exchange.hpp), not to the slots of offer_for.
  std::optional<apps::PerftestLayout> perftest_layout;
  const auto accept = [&](const metaroce::IncomingRequest& request, metaroce::Connection& connection,
                          std::vector<std::uint8_t>& reply) {
    Offer offer;
    if (!decode(request.private_data, offer)) return metaroce::Verdict::refuse_bad_request;
    if (perftest_layout) offer.slots = perftest_layout->slots;
    const std::uint32_t open = all.open.load(std::memory_order_relaxed);
    if (open >= o.max_connections) {
      if (progress != nullptr)
        std::fprintf(progress, " refused QP %#x%s: %u connections open, the most --max-connections allows (%u): "
                     "raise it, or lower the client's -q\n",
                     request.peer_qpn, which_of(offer).c_str(), open, o.max_connections);
      return metaroce::Verdict::refuse_no_room;
    }
    // What the request would make us allocate and register, before any of it is.
    const std::uint64_t receives = std::uint64_t{request.streams} * offer.receives_per_stream;
    std::uint64_t memory = 0;
    const bool overflow = offer.op != PerfOp::send
                              ? __builtin_mul_overflow(std::uint64_t{offer.slots}, std::uint64_t{offer.size}, &memory)
                              : __builtin_mul_overflow(receives, std::uint64_t{offer.size}, &memory);
    if (offer.op == PerfOp::send) memory = std::max<std::uint64_t>(memory, 64);
    else if (perftest_layout) memory = perftest_layout->region;
    if (overflow || memory + 64 > o.max_connection_memory) {
      if (progress != nullptr)
        std::fprintf(progress, " refused QP %#x%s: it would need %s bytes of memory, more than --max-connection-memory "
                     "(%llu) allows: raise it, or have the client ask for smaller or fewer messages\n",
                     request.peer_qpn, which_of(offer).c_str(),
                     overflow ? "over 2^64" : std::to_string(memory + 64).c_str(),
                     static_cast<unsigned long long>(o.max_connection_memory));
      return metaroce::Verdict::refuse_too_much_memory;
    }
    auto s = std::make_unique<Session>();
    s->connection = &connection;
    s->offer = offer;
    s->streams = request.streams;
    s->started_ns = apps::monotonic_ns();
    s->stride = perftest_layout ? perftest_layout->stride : offer.size;
    if (offer.op != PerfOp::send) s->write_region.assign(perftest_layout ? perftest_layout->region : offer.slots * offer.size, 0);
    // A READ's slot j holds message j's pattern (the client reads message m
    // from slot m % slots and checks it against that).
    if (offer.op == PerfOp::read)
      for (std::uint64_t j = 0; j < offer.slots; ++j) fill_pattern(s->write_region.data() + j * offer.size, offer.size, j);
    s->receive_region.assign(offer.op == PerfOp::send ? std::max<std::uint64_t>(receives * offer.size, 64) : 64, 0);
    std::string error;
    if (!s->write_region.empty())
      s->write_memory = e->register_memory(s->write_region.data(), s->write_region.size(),
                                           metaroce::access_local_write | remote_access(offer.op), error);
    s->receive_memory = e->register_memory(s->receive_region.data(), s->receive_region.size(),
                                           metaroce::access_local_write, error);
    s->expected_next.resize(request.streams);
    for (std::uint16_t k = 0; k < request.streams; ++k) s->expected_next[k] = k;
    bool ready = s->receive_memory.valid() && (s->write_region.empty() || s->write_memory.valid());
    if (receiver_completes(offer.op))
      for (std::uint16_t k = 0; ready && k < request.streams; ++k)
        for (std::uint32_t j = 0; ready && j < offer.receives_per_stream; ++j)
          ready = s->post_receive(std::uint64_t{k} * offer.receives_per_stream + j, k);
    if (!ready) {
      if (s->write_memory.valid()) e->deregister_memory(s->write_memory);
      if (s->receive_memory.valid()) e->deregister_memory(s->receive_memory);
      return metaroce::Verdict::refuse_no_room;
    }
    reply = encode(Target{reinterpret_cast<std::uint64_t>(s->write_region.data()), s->write_memory.key});
    // Many connections: the first and the last of the client's say it.
    if (progress != nullptr && (offer.connections <= 16 || offer.connection == 0 ||
                                offer.connection + 1 == offer.connections))
      std::fprintf(progress, " connection %#x from QP %#x%s: %s, %s, %llu B messages, %u paths, %u streams, MTU %u, "
                             "cc %s, %s\n",
                   connection.qpn(), request.peer_qpn, which_of(offer).c_str(), request.mode.c_str(),
                   to_string(offer.op), static_cast<unsigned long long>(offer.size), request.paths, request.streams,
                   connection.mtu(), request.congestion.empty() ? "none" : request.congestion.c_str(),
                   offer.verify ? "every byte verified" : "not verified");
    Session* raw = s.get();
    if (receiver_completes(offer.op))
      connection.set_completion_handler([raw](const metaroce::Completion& c) { raw->check(c); });
    sessions[connection.qpn()] = std::move(s);
    all.open.fetch_add(1, std::memory_order_relaxed);
    ++me.connections;
    return metaroce::Verdict::accept;
  };
  metaroce::ListenOptions listening;
  listening.queue_for_accept = false;
  listening.path_window = o.path_window;
  listening.psn_window = o.psn_window;
  apps::set_rocev2_timers(o.rocev2, listening);
  e->listen(accept, listening);
  if (progress != nullptr && !o.by_hand) {
    std::fprintf(progress, " Waiting for clients on %s (MAC %s, address %s), at most %u connections at once; "
                 "Ctrl-C stops\n", e->port_name().c_str(), e->mac().c_str(), o.local_ip.c_str(), o.max_connections);
    std::fprintf(progress, " GID: %s\n rocev2 connections: %s\n", apps::gid_text(o.local_ip).c_str(),
                 apps::rocev2_summary(o.rocev2).c_str());
    std::fflush(progress);
  }
  bool finished = false;
  std::uint64_t finish_at = 0;
  // One connection's line and result, when its client is done with it.
  const auto report = [&](Session& s, std::uint32_t qpn, const ClientSummary& client) {
    SizeResult r;
    r.size = s.offer.size;
    r.messages = s.summary.received;
    r.seconds = double(apps::monotonic_ns() - s.started_ns) / 1e9;
    r.average_bps = r.seconds > 0 ? double(s.summary.received) * double(r.size) * 8.0 / r.seconds : 0.0;
    r.peak_bps = r.average_bps;
    r.message_rate = r.seconds > 0 ? double(s.summary.received) / r.seconds : 0.0;
    r.wrong_messages = s.summary.wrong;
    if (receiver_completes(s.offer.op) && s.summary.received < client.completed)
      r.missing_messages = client.completed - s.summary.received;
    r.first_problem = !s.problem.empty() ? s.problem
                      : s.summary.wrong != 0 ? fmt::format("message {} arrived with wrong bytes", s.summary.first_wrong)
                      : r.missing_messages != 0 ? fmt::format("{} messages never arrived", r.missing_messages)
                                                : std::string();
    if (progress != nullptr && (s.offer.connections <= 16 || s.offer.connection == 0 ||
                                s.offer.connection + 1 == s.offer.connections || !r.first_problem.empty()))
      std::fprintf(progress, " connection %#x%s closed: %llu messages %s, %llu wrong%s%s\n", qpn,
                   which_of(s.offer).c_str(), static_cast<unsigned long long>(s.summary.received),
                   s.offer.verify ? "checked" : "received (not verified: the client did not ask)",
                   static_cast<unsigned long long>(s.summary.wrong), r.first_problem.empty() ? "" : ": ",
                   r.first_problem.c_str());
    run.sizes.push_back(r);
  };
  // A client's DREQ (its completions were delivered before it, in the same
  // turn), or its new incarnation.
  e->set_peer_close_handler([&](metaroce::Connection& connection, bool superseded) {
    const std::uint32_t qpn = connection.qpn();
    const auto it = sessions.find(qpn);
    if (it == sessions.end()) return;
    Session& s = *it->second;
    if (superseded) {
      if (progress != nullptr)
        std::fprintf(progress, " connection %#x: its client started over; closing the old one\n", qpn);
      close_session(s);
      sessions.erase(it);
      return;
    }
    ClientSummary client;
    if (!decode_summary(connection.peer_close_data(), client)) s.problem = "the client's disconnect carried no summary";
    s.check_final(client.completed);
    connection.set_close_reply(encode(s.summary));
    report(s, qpn, client);
    close_session(s);
    sessions.erase(it);
    if (client.last && o.server_once) {
      finished = true;
      all.last_seen.store(true, std::memory_order_relaxed);
      finish_at = apps::monotonic_ns() + server_linger_ns;  // answer duplicate DREQs for a while
    }
  });
  // Set up by hand: the connections now (one, or perftest's -q over its
  // exchange), their buffers as a client's request would have asked
  // (offer_for: the client computes the same).
  std::vector<metaroce::Connection*> by_hand;
  // The connection to the client `p` names (its QPN, first PSN, address).
  const auto set_up_by_hand = [&](const PerfOptions& p) {
    metaroce::ConnectOptions request;
    request.mode = std::string(transport::to_string(p.mode));
    request.mtu = p.mtu;
    request.paths = 1;
    request.streams = 1;
    request.psn_window = p.psn_window;
    request.peer_mac = p.peer_mac;
    request.gateway = p.gateway;
    request.congestion = p.cc.empty() ? "none" : p.cc;
    apps::set_rocev2_timers(p.rocev2, request);
    metaroce::Connection* made = e->connect_static(p.peer_ip, by_hand_options(p, request), run.error);
    if (made == nullptr) return false;
    by_hand.push_back(made);
    metaroce::IncomingRequest in;
    in.peer_ip = p.peer_ip;
    in.peer_qpn = p.peer_qpn;
    in.mode = request.mode;
    in.congestion = request.congestion == "none" ? "" : request.congestion;
    in.paths = 1;
    in.streams = 1;
    in.mtu = made->mtu();
    in.private_data = encode(offer_for(p, p.sizes.front()));
    std::vector<std::uint8_t> reply;
    if (accept(in, *made, reply) != metaroce::Verdict::accept) {
      run.error = "no room for the connection's buffers and receives: lower -s or -t";
      return false;
    }
    const Session& s = *sessions.at(made->qpn());
    print_local_address(progress, p, *made, reinterpret_cast<std::uint64_t>(s.write_region.data()),
                        s.write_memory.valid() ? s.write_memory.key : 0);
    return true;
  };
  if (o.by_hand && o.oob_port == 0 && !set_up_by_hand(o)) return run;
  // perftest's exchange: the steps before the test now, the rest when the
  // client moves on after it (common/oob_exchange.hpp).
  std::unique_ptr<apps::PerftestLink> perftest;
  apps::OobKeys perftest_keys;  // ours for the first connection, sent at every step after the keys
  if (o.by_hand && o.oob_port != 0) {
    if (progress != nullptr) {
      std::fprintf(progress, " Waiting for a client's out-of-band exchange on TCP port %u; Ctrl-C stops\n",
                   o.oob_port);
      std::fflush(progress);
    }
    std::string oob_error;
    perftest = apps::PerftestLink::accept(
        o.oob_port, 86400.0, [&] { e->idle(e->poll()); }, [] { return interrupted.load(); }, oob_error);
    PerfOptions p = o;
    int agreed = 0;
    std::string version;
    bool ok = perftest != nullptr && perftest->open(cm::ibta::mtu_code(o.mtu), agreed, version, oob_error);
    if (ok) {
      p.mtu = cm::ibta::mtu_of_code(static_cast<std::uint8_t>(agreed));
      perftest_layout = apps::perftest_write_layout(o.sizes.front(), perftest->cycle_buffer(), perftest->cache_line());
      if (progress != nullptr)
        std::fprintf(progress, " out-of-band peer: perftest %s; MTU %u agreed (ours %u)\n", version.c_str(), p.mtu,
                     o.mtu);
      // One keys step per connection (perftest's -q), the client's first.
      for (std::uint32_t k = 0; ok && k < o.qps; ++k)
        ok = perftest->keys(
            [&](const apps::OobKeys& theirs, apps::OobKeys& mine, std::string& error) {
              p.peer_qpn = theirs.qpn;
              p.peer_psn = theirs.psn;
              p.peer_ip = apps::gid_address(theirs.gid);
              if (!set_up_by_hand(p)) {
                error = run.error;
                return false;
              }
              const Session& s = *sessions.at(by_hand.back()->qpn());
              mine = out_of_band_keys(o, *by_hand.back(), reinterpret_cast<std::uint64_t>(s.write_region.data()),
                                      s.write_memory.valid() ? s.write_memory.key : 0);
              if (k == 0) perftest_keys = mine;
              return true;
            },
            oob_error);
    }
    // Our QP receives (the barrier), and for SEND, our receives are posted.
    apps::OobKeys theirs;
    ok = ok && perftest->keys(perftest_keys, theirs, oob_error);
    if (ok && o.op == PerfOp::send) ok = perftest->keys(perftest_keys, theirs, oob_error);
    if (!ok) {
      if (run.error.empty()) run.error = oob_error;
      return run;
    }
  }
  // After the test: ib_write_bw's keys step and report, then the close;
  // ib_send_bw only closes. `completed` gets what the client's report says
  // it completed (write, write-imm). False with the step's error.
  const auto perftest_finish = [&](std::uint64_t size, std::uint64_t received, std::uint64_t& completed,
                                   std::string& error) {
    apps::OobKeys theirs;
    if (o.op != PerfOp::send) {
      apps::PerftestReport mine, their_report;
      mine.size = size;
      mine.iterations = received;
      if (!perftest->keys(perftest_keys, theirs, error) || !perftest->report(mine, their_report, error)) return false;
      completed = their_report.iterations;
      if (progress != nullptr)
        std::fprintf(progress,
                     " the client's report: %llu messages of %llu B, BW peak %.2f MB/sec, average %.2f MB/sec, "
                     "%.6f Mpps\n",
                     static_cast<unsigned long long>(their_report.iterations),
                     static_cast<unsigned long long>(their_report.size), their_report.bw_peak,
                     their_report.bw_average, their_report.message_rate);
    }
    return perftest->close(perftest_keys, error);
  };
  // The client's next step is looked for once a millisecond, not every
  // turn: it is a system call, and the turns carry the test's traffic.
  std::uint64_t next_look_ns = 0;
  const auto perftest_client_moved = [&] {
    const std::uint64_t now = apps::monotonic_ns();
    if (now < next_look_ns) return false;
    next_look_ns = now + 1'000'000;
    return perftest->peer_moved(apps::oob_message_size);
  };
  while (!interrupted.load()) {
    const std::uint64_t turn_start = __rdtsc();
    const std::size_t work = e->poll();
    ++me.turns;
    if (work != 0) {
      ++me.busy_turns;
      me.busy_cycles += __rdtsc() - turn_start;
    }
    if (finished && apps::monotonic_ns() >= finish_at) break;
    // Another lane's client said its last connection is done, and nothing
    // is open here: this lane is done too.
    if (!finished && o.server_once && sessions.empty() && all.last_seen.load(std::memory_order_relaxed)) {
      finished = true;
      finish_at = apps::monotonic_ns() + server_linger_ns;
    }
    if (!by_hand.empty() && !finished) {
      // Done when -n messages arrived (or a connection failed): no
      // disconnect request comes. With perftest's exchange, the client's
      // next step after the test says it is done (a plain WRITE completes
      // nothing here), and -n counts per connection, as perftest's does.
      bool broken = false;
      std::uint64_t received = 0;
      for (metaroce::Connection* c : by_hand) {
        const Session& s = *sessions.at(c->qpn());
        broken |= c->failed() || !s.problem.empty();
        received += s.summary.received;
      }
      if (broken || (perftest ? perftest_client_moved() : received >= o.iterations)) {
        std::uint64_t reported = 0;
        std::string error;
        const std::uint64_t size = sessions.at(by_hand.front()->qpn())->offer.size;
        const bool talked = perftest && !broken && perftest_finish(size, received, reported, error);
        perftest.reset();
        for (std::size_t k = 0; k < by_hand.size(); ++k) {
          Session& s = *sessions.at(by_hand[k]->qpn());
          ClientSummary client;
          client.completed = o.iterations;
          if (!error.empty() && s.problem.empty()) s.problem = error;
          // Plain WRITEs: the client's word, spread as its messages are
          // (message m on connection m % connections).
          if (talked && o.op == PerfOp::write)
            s.summary.received = client.completed = reported / by_hand.size() + (k < reported % by_hand.size());
          if (by_hand[k]->failed() && s.problem.empty()) s.problem = "the connection failed";
          const std::uint32_t qpn = by_hand[k]->qpn();
          report(s, qpn, client);
          close_session(s);
          sessions.erase(qpn);
        }
        by_hand.clear();
        finished = true;
        finish_at = apps::monotonic_ns() + server_linger_ns;  // the last ACKs leave
      }
    }
    e->idle(work);
  }
  if (interrupted.load() && progress != nullptr) std::fprintf(progress, " interrupted\n");
  for (auto& [qpn, s] : sessions) {
    const metaroce::CounterGroup counters = s->connection->counters();
    add_by_name(run.connection_b, counters);
    me.data_packets += counters.get("data_packets_received");
  }
  const std::vector<metaroce::CounterGroup> counters = e->counters();
  add_by_name(run.host_b, counters);
  run.cm_counters = cm_counters(counters);
  me.cpu_ns = apps::thread_cpu_ns() - cpu_start;
  if (shared != nullptr) run.lanes.push_back(lane_of(me, run.host_b, run.sizes));
  return run;
}

}  // namespace

RunResult run_server(const PerfOptions& o, std::FILE* progress) {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  RunResult run;
  if (o.lcores <= 1) {
    std::unique_ptr<metaroce::Endpoint> e = metaroce::Endpoint::open(endpoint_config(o), run.error);
    return e ? serve(o, e, progress, 0, nullptr) : run;
  }
  std::vector<std::unique_ptr<metaroce::Endpoint>> lanes =
      metaroce::Endpoint::open_lanes(endpoint_config(o), o.lcores, run.error);
  if (lanes.empty()) return run;
  if (progress != nullptr) std::fprintf(progress, " %u lcores, each driving queue k of the port\n", unsigned{o.lcores});
  ServerShared shared;
  std::vector<RunResult> results(lanes.size());
  std::vector<std::thread> threads;
  std::atomic<unsigned> done{0};
  for (std::uint16_t k = 0; k < lanes.size(); ++k)
    threads.emplace_back([&, k] {
      results[k] = serve(o, lanes[k], k == 0 ? progress : nullptr, k, &shared);
      apps::turn_until_lanes_done(lanes[k].get(), done, o.lcores);
    });
  for (auto& t : threads) t.join();
  for (auto& lane : lanes) lane.reset();  // one after another, once no thread turns them
  return merge_lanes(std::move(results), false);
}

// ---------------------------------------------------------------- client ---

namespace {

// One of the client's -q connections of one size. Message m of the size goes
// to connection m % qps as that connection's message m / qps: each
// connection numbers its own messages 0, 1, ... (immediate, pattern, slot),
// so the server checks each one as it would a lone connection.
struct ClientConnection {
  metaroce::Connection* connection = nullptr;
  std::uint64_t remote_base = 0;
  std::uint32_t rkey = 0;
  std::uint64_t completed = 0;  // its messages completed successfully
  ServerSummary theirs;         // the server's, from the DREP
  bool by_hand = false;         // set up by hand: no DREP, the server checks on its own
  // Message m's place in the server's buffer: (m % remote_slots) * remote_stride.
  std::uint32_t remote_slots = 1;
  std::uint64_t remote_stride = 0;
};

// DREQs for every connection, each carrying its count of completed
// messages, and the server's summaries from the DREPs. The one that says
// `last` goes only once every other has its answer, so a server that exits
// on it has closed them all. Their counters go into `counters`. The first
// problem, or "".
std::string close_connections(metaroce::Endpoint& e, std::vector<ClientConnection>& conns, bool last,
                              std::uint64_t& torn_down, transport::ConnectionCounters& counters) {
  std::string problem;
  const auto note = [&](std::string what) {
    if (problem.empty()) problem = std::move(what);
  };
  const auto close = [&](std::span<ClientConnection> which, bool with_last) {
    std::vector<metaroce::Connection*> connections;
    std::vector<std::vector<std::uint8_t>> summaries;
    for (const ClientConnection& c : which) {
      ClientSummary mine;
      mine.completed = c.completed;
      mine.last = with_last;
      connections.push_back(c.connection);
      summaries.push_back(encode(mine));
    }
    const std::vector<metaroce::CloseResult> closed = e.close_all(connections, summaries);
    for (std::size_t i = 0; i < which.size(); ++i) {
      which[i].connection = nullptr;
      add_by_name(counters, closed[i].counters);
      if (which[i].by_hand) {  // nobody to ask: the server counts and checks on its own
        which[i].theirs.received = which[i].completed;
        ++torn_down;
      } else if (!closed[i].error.empty())
        note(closed[i].error);
      else if (!decode_summary(closed[i].reply_data, which[i].theirs))
        note("the server's disconnect reply carried no summary");
      else
        ++torn_down;
    }
  };
  if (!conns.empty()) {
    const std::span<ClientConnection> all(conns);
    close(all.first(all.size() - 1), false);
    close(all.last(1), last);
  }
  return problem;
}

// perftest's exchange, client side, from the set-up to the close: the link,
// and our first connection's keys, which every step after the keys steps
// sends.
struct PerftestSide {
  std::unique_ptr<apps::PerftestLink> link;
  apps::OobKeys keys;
};

// Opens the -q connections of one size, all handshakes at once; false and
// `error` (which connection failed and why) when one fails, after closing
// those the server accepted.
bool open_connections(const PerfOptions& o, metaroce::Endpoint& e, const metaroce::ConnectOptions& request,
                      Offer offer, std::vector<ClientConnection>& conns, PerftestSide& perftest, RunResult& run,
                      std::string& error, std::FILE* progress) {
  const std::uint32_t qps = o.qps;
  conns.clear();
  if (o.by_hand) {  // the server's buffer from the command line, or -q connections by the exchange
    // Each connection's options: set up by hand, ours; by the exchange,
    // what the server sent for it.
    std::vector<PerfOptions> each(1, o);
    if (!o.oob_address.empty()) {
      perftest.link = apps::PerftestLink::connect(
          o.oob_address, o.cm_timeout_s + 30.0, [&] { e.idle(e.poll()); }, [] { return interrupted.load(); }, error);
      if (!perftest.link) return false;
      perftest.link->set_step_timeout(o.cm_timeout_s + 30.0);
      int agreed = 0;
      std::string version;
      if (!perftest.link->open(cm::ibta::mtu_code(o.mtu), agreed, version, error)) return false;
      if (progress != nullptr)
        std::fprintf(progress, " out-of-band peer: perftest %s; MTU %u agreed (ours %u)\n", version.c_str(),
                     cm::ibta::mtu_of_code(static_cast<std::uint8_t>(agreed)), o.mtu);
      // One keys step per connection (perftest's -q): our QPN and first PSN
      // go first, so we draw them now (--qpn and --psn: the first's).
      each.assign(qps, o);
      for (std::uint32_t k = 0; k < qps; ++k) {
        PerfOptions& p = each[k];
        p.mtu = cm::ibta::mtu_of_code(static_cast<std::uint8_t>(agreed));
        if (o.qpn >= 2) p.qpn = (o.qpn + k) & wire::qpn_mask;
        while (p.qpn < 2) p.qpn = random24();
        if (!p.psn_given) p.psn = random24();
        p.psn_given = true;
        apps::OobKeys mine, theirs;
        mine.out_reads = 16;
        mine.qpn = p.qpn;
        mine.psn = p.psn;
        wire::IpAddress local;
        if (wire::parse_ip(o.local_ip, local)) mine.gid = apps::gid_bytes(local);
        if (k == 0) perftest.keys = mine;
        if (!perftest.link->keys(mine, theirs, error)) return false;
        p.peer_qpn = theirs.qpn;
        p.peer_psn = theirs.psn;
        p.remote_addr = theirs.vaddr;
        p.rkey = theirs.rkey;
      }
    }
    for (const PerfOptions& p : each) {
      ClientConnection c;
      c.connection = e.connect_static(o.server_address, by_hand_options(p, request), error);
      if (c.connection == nullptr) return false;
      c.remote_base = p.remote_addr;
      c.rkey = p.rkey;
      c.by_hand = true;
      c.remote_slots = offer.slots;
      c.remote_stride = offer.size;
      if (perftest.link) {
        const apps::PerftestLayout layout =
            apps::perftest_write_layout(offer.size, perftest.link->cycle_buffer(), perftest.link->cache_line());
        c.remote_slots = layout.slots;
        c.remote_stride = layout.stride;
      }
      conns.push_back(c);
      print_local_address(progress, p, *c.connection, 0, 0);
    }
    if (perftest.link) {
      // Our QPs are ready (the barrier); for SEND, the server's receives are posted.
      apps::OobKeys theirs;
      if (!perftest.link->keys(perftest.keys, theirs, error) ||
          (o.op == PerfOp::send && !perftest.link->keys(perftest.keys, theirs, error)))
        return false;
    }
    return true;
  }
  std::vector<metaroce::ConnectOptions> requests(qps, request);
  for (std::uint32_t k = 0; k < qps; ++k) {
    offer.connection = static_cast<std::uint16_t>(k);  // -q is at most 16384: the offer's 16 bits hold it
    offer.connections = static_cast<std::uint16_t>(qps);
    requests[k].private_data = encode(offer);
  }
  const auto which = [&](std::size_t k) {
    return qps > 1 ? fmt::format("connection {} of {} (-q {}) for {} B messages: ", k + 1, qps, qps, offer.size)
                   : std::string();
  };
  const std::uint64_t setup_start = apps::monotonic_ns();
  const std::vector<metaroce::ConnectResult> made = e.connect_each(o.server_address, requests);
  const double setup_s = double(apps::monotonic_ns() - setup_start) / 1e9;
  std::string problem;
  for (std::size_t k = 0; k < qps; ++k) {
    if (made[k].connection != nullptr || !problem.empty()) continue;
    problem = which(k) + made[k].error;
    // The server's connection limit (or memory) when it is a -q run.
    if (qps > 1 && made[k].error.find("takes no more connections") != std::string::npos)
      problem += fmt::format(": lower -q {}, or raise the server's --max-connections", qps);
  }
  if (problem.empty()) {
    run.cm_connections_set_up += qps;
    run.cm_setup_seconds += setup_s;
  }
  for (std::uint32_t k = 0; k < qps; ++k) {
    if (made[k].connection == nullptr) continue;
    ClientConnection c;
    c.connection = made[k].connection;
    c.remote_slots = offer.slots;
    c.remote_stride = offer.size;
    const std::vector<std::uint8_t>& reply = c.connection->peer_private_data();
    if (reply.size() >= 12) {
      c.remote_base = wire::load_be64(reply.data());
      c.rkey = wire::load_be32(reply.data() + 8);
    } else if (problem.empty()) {
      problem = which(k) + "the server's reply carried no buffer address: is it a metaroce-perf --server?";
    }
    conns.push_back(c);
  }
  if (problem.empty()) return true;
  std::uint64_t closed = 0;
  close_connections(e, conns, true, closed, run.connection_a);
  error = problem;
  return false;
}

// A barrier whose waiters go on turning their endpoints: on a driver that
// does not pair queues, lanes hand each other frames, so a lane that waits
// must still read its queue for the others.
class PollingBarrier {
 public:
  explicit PollingBarrier(unsigned lanes) : expected_(lanes) {}
  // Returns once every lane still taking part has arrived.
  void arrive_and_wait(metaroce::Endpoint& e) {
    std::uint64_t generation = 0;
    {
      const std::lock_guard lock(mutex_);
      generation = generation_.load();
      if (++arrived_ == expected_) {
        release();
        return;
      }
    }
    while (generation_.load() == generation)
      if (e.poll() == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  // This lane takes no further part; the others no longer wait for it.
  void arrive_and_drop() {
    const std::lock_guard lock(mutex_);
    --expected_;
    if (expected_ != 0 && arrived_ == expected_) release();
  }

 private:
  void release() {  // under mutex_
    arrived_ = 0;
    generation_.fetch_add(1);
  }
  std::mutex mutex_;
  unsigned expected_ = 0, arrived_ = 0;
  std::atomic<std::uint64_t> generation_{0};
};

// The lanes of a client (--lcores N) keep each size in step: every lane
// opens its connections, then all send; every lane finishes, then all
// close. A lane that stops early leaves, so the others do not wait for it.
struct LaneStep {
  PollingBarrier* barrier = nullptr;
  metaroce::Endpoint* endpoint = nullptr;
  bool left = false;
  void sync() {
    if (barrier != nullptr && !left) barrier->arrive_and_wait(*endpoint);
  }
  void leave() {
    if (barrier == nullptr || left) return;
    barrier->arrive_and_drop();
    left = true;
  }
};

bool client_size(const PerfOptions& o, metaroce::Endpoint& e, const metaroce::ConnectOptions& request,
                 std::uint64_t size, bool last, std::FILE* progress, RunResult& run, LaneStep& step) {
  const std::uint32_t qps = o.qps;
  const Offer offer = offer_for(o, size);
  std::uint32_t slots = offer.slots;

  std::vector<ClientConnection> conns;
  PerftestSide perftest;
  const double setup_before = run.cm_setup_seconds;
  if (!open_connections(o, e, request, offer, conns, perftest, run, run.error, progress)) return false;
  step.sync();
  // With perftest's exchange the server's buffer holds perftest's layout;
  // --verify keeps no more messages in flight than it has places, so none
  // is overwritten before the server checks it.
  if (perftest.link && o.verify && o.op != PerfOp::send) slots = std::min(slots, conns[0].remote_slots);
  // -n: all connections' messages together; with perftest's exchange, each
  // connection's, as perftest counts.
  const std::uint64_t iterations = perftest.link ? o.iterations * qps : o.iterations;
  const double setup_seconds = run.cm_setup_seconds - setup_before;
  // A port (or the server's) that carries less than --mtu: the payload per
  // packet the two ends agreed on, said once.
  if (progress != nullptr && !conns.empty() && conns[0].connection->mtu() < o.mtu && size == o.sizes.front())
    std::fprintf(progress, " MTU %u agreed: --mtu %u is more than the ports carry\n", conns[0].connection->mtu(), o.mtu);

  // Connection k's slots are k * slots .. (k + 1) * slots - 1 of the source.
  std::vector<std::uint8_t> source(std::uint64_t{slots} * qps * size, 0x5a);
  std::string error;
  const metaroce::MemoryRegion source_memory =
      e.register_memory(source.data(), source.size(), metaroce::access_local_write, error);
  SizeResult result;
  result.size = size;
  result.connections = qps;
  result.cm_setup_per_s = setup_seconds > 0 ? double(qps) / setup_seconds : 0.0;
  std::vector<std::uint8_t> slot_busy(std::size_t{slots} * qps, 0);
  std::vector<std::uint64_t> slot_posted_ns(std::size_t{slots} * qps, 0);
  std::vector<std::uint64_t> latencies_ns;
  // --verify of the atomics: the value each slot's 8 bytes at the server
  // hold, as this side expects them; every returned old value must equal it.
  std::vector<std::uint64_t> atomic_expected(is_atomic(o.op) ? std::size_t{slots} * qps : 0, 0);
  std::uint64_t posted = 0, completed = 0, failed = 0, wrong_here = 0;
  std::uint64_t now = apps::monotonic_ns();
  const std::uint64_t t0 = now;
  const std::uint64_t duration_ns = static_cast<std::uint64_t>(o.duration_s * 1e9);
  std::uint64_t last_progress = t0, last_event = t0, window_start = t0, window_done = 0, end = t0, progress_done = 0;
  bool posting = true;
  std::string problem;
  // Message m: connection m % qps, its message m / qps, in its slot
  // (m / qps) % slots.
  const auto slot_of = [&](std::uint64_t m) {
    return static_cast<std::size_t>((m % qps) * slots + (m / qps) % slots);
  };
  // A READ's bytes and an atomic's old value, here where they landed.
  const auto check_answer = [&](std::uint64_t m, std::size_t slot) {
    const std::uint64_t own = m / qps;
    const std::uint8_t* bytes = source.data() + slot * size;
    std::string what;
    if (o.op == PerfOp::read) {
      if (!check_pattern(bytes, size, own % slots)) what = fmt::format("message {} read wrong bytes", m);
    } else if (is_atomic(o.op)) {
      std::uint64_t old = 0;
      std::memcpy(&old, bytes, sizeof old);
      if (old != atomic_expected[slot])
        what = fmt::format("message {}: {} returned {:#x}, expected {:#x}", m, to_string(o.op), old,
                           atomic_expected[slot]);
      // Both add own + 1 / swap in own + 1 (the compare is the value expected).
      atomic_expected[slot] = o.op == PerfOp::fetch_add ? old + own + 1 : own + 1;
    }
    if (what.empty()) return;
    ++wrong_here;
    if (problem.empty()) problem = std::move(what);
  };
  // Completions are delivered by the endpoint's poll, each connection's in order.
  const auto on_completion = [&](const metaroce::Completion& c) {
    const std::size_t slot = slot_of(c.wr_id);
    slot_busy[slot] = false;
    last_event = end = now;
    if (o.test == PerfTest::lat) latencies_ns.push_back(now - slot_posted_ns[slot]);
    if (c.status != metaroce::Status::success) {
      ++failed;
      if (problem.empty()) problem = fmt::format("message {} completed with {}", c.wr_id, metaroce::to_string(c.status));
      return;
    }
    ++completed;
    ++conns[c.wr_id % qps].completed;
    if (o.verify) check_answer(c.wr_id, slot);
  };
  for (ClientConnection& c : conns) c.connection->set_completion_handler(on_completion);
  const auto data_packets = [&] {
    std::uint64_t n = 0;
    for (const auto& c : conns) {
      const metaroce::CounterGroup counters = c.connection->counters();
      n += counters.get("data_packets_sent") + counters.get("retransmitted_packets");
    }
    return n;
  };
  const auto retransmissions = [&] {
    std::uint64_t n = 0;
    for (const auto& c : conns)
      for (const metaroce::PathStats& p : c.connection->paths()) n += p.resent;
    return n;
  };
  const std::uint64_t sent_before = data_packets();
  const bool receives_answer = o.op == PerfOp::read || is_atomic(o.op);
  constexpr metaroce::Op ops[] = {metaroce::Op::write, metaroce::Op::write_imm, metaroce::Op::send,
                                  metaroce::Op::read,  metaroce::Op::fetch_add, metaroce::Op::compare_swap};
  const metaroce::Op op = ops[static_cast<int>(o.op)];
  for (;;) {
    const std::uint64_t turn_start = __rdtsc();
    const std::uint64_t posted_before = posted;
    now = apps::monotonic_ns();
    std::size_t work = e.poll();
    if (posting && (duration_ns != 0 ? now - t0 >= duration_ns : posted >= iterations)) posting = false;
    if (interrupted.load()) posting = false;
    // Each connection has its `slots` (at most tx_depth) messages in flight.
    while (posting && (duration_ns != 0 || posted < iterations) && !slot_busy[slot_of(posted)] && failed == 0) {
      const std::uint64_t m = posted;
      const std::uint64_t own = m / qps;  // the connection's own message number
      ClientConnection& c = conns[m % qps];
      const std::size_t slot = slot_of(m);
      std::uint8_t* buffer = source.data() + slot * size;
      // A READ's and an atomic's answer lands here: cleared, so a byte not
      // placed is found.
      if (o.verify && receives_answer) std::memset(buffer, 0, size);
      else if (o.verify) fill_pattern(buffer, size, own);
      metaroce::SendWork w;
      w.wr_id = m;
      w.op = op;
      w.stream = static_cast<std::uint16_t>(own % o.streams);
      w.local = buffer;
      w.length = size;
      w.lkey = source_memory.key;
      w.remote_addr = c.remote_base + (own % c.remote_slots) * c.remote_stride;
      w.rkey = c.rkey;
      w.imm = static_cast<std::uint32_t>(own);
      w.swap_add = own + 1;
      if (is_atomic(o.op)) w.compare = atomic_expected[slot];
      const metaroce::PostResult pr = c.connection->post_send(w);
      if (pr != metaroce::PostResult::ok) {
        problem = fmt::format("post_send refused message {}: {}", m, metaroce::to_string(pr));
        posting = false;
        break;
      }
      slot_busy[slot] = true;
      slot_posted_ns[slot] = now;
      ++posted;
      last_event = now;
    }
    if (now - window_start >= peak_window_ns) {
      result.peak_bps = std::max(result.peak_bps, double(completed - window_done) * double(size) * 8e9 /
                                                      double(now - window_start));
      window_start = now;
      window_done = completed;
    }
    if (progress != nullptr && now - last_progress >= 1'000'000'000) {
      std::fprintf(progress, "[%6.1f s] %llu B: %.2f Gb/s, %llu messages, %llu retransmitted\n",
                   double(now - t0) / 1e9, static_cast<unsigned long long>(size),
                   double(completed - progress_done) * double(size) * 8.0 / double(now - last_progress),
                   static_cast<unsigned long long>(completed), static_cast<unsigned long long>(retransmissions()));
      std::fflush(progress);
      last_progress = now;
      progress_done = completed;
    }
    if (!posting && completed + failed == posted) break;
    ++result.sender_turns;
    if (work != 0 || posted != posted_before) {
      ++result.sender_busy_turns;
      result.sender_busy_cycles += __rdtsc() - turn_start;
    }
    if (!posting && now - last_event > drain_limit_ns) {
      if (problem.empty()) problem = fmt::format("{} messages never completed", posted - completed - failed);
      break;
    }
    e.idle(work);
  }
  result.packets_sent = data_packets() - sent_before;
  run.retransmitted += retransmissions();
  // Per plane, summed over the connections and sizes (the table's and
  // --json's plane lines; one plane: none).
  for (const ClientConnection& c : conns) {
    const std::vector<metaroce::PlaneStats> planes = c.connection->planes();
    if (planes.size() < 2) continue;
    if (run.planes.size() < planes.size()) run.planes.resize(planes.size());
    for (std::size_t k = 0; k < planes.size(); ++k) {
      PlaneResult& pr = run.planes[k];
      pr.plane = static_cast<std::uint16_t>(k);
      pr.data_packets += planes[k].data_packets;
      pr.retransmits += planes[k].resent;
      pr.failures += planes[k].failures;
      pr.state = planes[k].failed ? "failed" : "active";
    }
  }
  for (ClientConnection& c : conns) c.connection->set_completion_handler({});  // flushed ones are not counted
  if (perftest.link) {
    // ib_write_bw's keys step and report after the test, then the close;
    // ib_send_bw only closes.
    std::string error;
    apps::OobKeys theirs;
    bool ok = true;
    if (o.op != PerfOp::send) {
      const double seconds = double(end - t0) / 1e9;
      const double mib = 1024.0 * 1024.0;
      apps::PerftestReport mine, their_report;
      mine.size = size;
      mine.iterations = completed;
      mine.bw_average = seconds > 0 ? double(completed) * double(size) / seconds / mib : 0.0;
      mine.bw_peak = std::max(result.peak_bps / 8.0 / mib, mine.bw_average);
      mine.message_rate = seconds > 0 ? double(completed) / seconds / 1e6 : 0.0;
      ok = perftest.link->keys(perftest.keys, theirs, error) && perftest.link->report(mine, their_report, error);
    }
    ok = ok && perftest.link->close(perftest.keys, error);
    if (!ok && problem.empty()) problem = error;
    perftest.link.reset();
  }

  // The server's view of each connection: what it received and verified.
  step.sync();
  const std::uint64_t teardown_start = apps::monotonic_ns();
  std::uint64_t torn_down = 0;
  const std::string closing = close_connections(e, conns, last, torn_down, run.connection_a);
  run.cm_connections_torn_down += torn_down;
  run.cm_teardown_seconds += double(apps::monotonic_ns() - teardown_start) / 1e9;
  if (problem.empty()) problem = closing;
  result.messages = completed;
  result.seconds = double(end - t0) / 1e9;
  result.average_bps = result.seconds > 0 ? double(completed) * double(size) * 8.0 / result.seconds : 0.0;
  result.peak_bps = std::max(result.peak_bps, result.average_bps);
  result.message_rate = result.seconds > 0 ? double(completed) / result.seconds : 0.0;
  result.missing_messages = posted - completed;
  std::uint64_t first_wrong = no_message;
  for (std::uint32_t k = 0; k < qps; ++k) {
    const ClientConnection& c = conns[k];
    if (c.theirs.received < c.completed &&
        (o.op != PerfOp::write || c.theirs.received < std::min<std::uint64_t>(c.completed, slots)))
      result.missing_messages += c.completed - c.theirs.received;
    result.wrong_messages += c.theirs.wrong;  // the server's check of its own memory
    if (c.theirs.wrong != 0) first_wrong = std::min(first_wrong, c.theirs.first_wrong * qps + k);  // as numbered here
  }
  result.wrong_messages += wrong_here;
  if (problem.empty() && result.wrong_messages != 0)
    problem = fmt::format("the server found wrong bytes in {} messages, the first message {}", result.wrong_messages,
                          first_wrong);
  result.first_problem = problem;
  if (result.packets_sent != 0)
    result.cycles_per_packet = double(result.sender_busy_cycles) / double(result.packets_sent);
  summarize_latencies(latencies_ns, result);
  run.sizes.push_back(result);
  e.deregister_memory(source_memory);
  return true;
}

// The client's run on endpoint `e`: lane `lane` of a client of several
// when `step` has a barrier (its options then carry the lane's -q and -n).
RunResult client_run(const PerfOptions& o, metaroce::Endpoint& e, std::FILE* progress, std::uint16_t lane,
                     LaneStep& step) {
  RunResult run;
  const std::uint64_t cpu_start = apps::thread_cpu_ns();
  metaroce::ConnectOptions request;
  request.mode = std::string(transport::to_string(o.mode));
  request.mtu = o.mtu;
  request.paths = o.paths;
  request.streams = o.streams;
  request.path_window = o.path_window;
  request.psn_window = o.psn_window;
  request.gateway = o.gateway;
  request.peer_mac = o.peer_mac;
  request.congestion = o.cc.empty() ? "none" : o.cc;
  if (o.mode == transport::Mode::rocev2) apps::set_rocev2_timers(o.rocev2, request);
  // The next hop's MAC once, before the first size (each size's requests
  // find it in the neighbour cache).
  metaroce::NextHop hop;
  if (!e.next_hop(o.server_address, request, hop, run.error)) return run;
  if (progress != nullptr) {
    std::fprintf(progress, " next hop towards %s: %s at %s (%s)\n", o.server_address.c_str(), hop.address.c_str(),
                 hop.mac.c_str(), hop.learned == "given" ? "--peer-mac" : hop.learned.c_str());
    std::fprintf(progress, " GID: %s\n", apps::gid_text(o.local_ip).c_str());
    if (o.mode == transport::Mode::rocev2) std::fprintf(progress, " rocev2: %s\n", apps::rocev2_summary(o.rocev2).c_str());
    std::fflush(progress);
  }
  for (std::size_t i = 0; i < o.sizes.size(); ++i)
    if (!client_size(o, e, request, o.sizes[i], i + 1 == o.sizes.size(), progress, run, step)) break;
  step.leave();
  // Let the last RTU / DREQ answers out before the port stops.
  for (int i = 0; i < 100; ++i) e.poll();
  const std::vector<metaroce::CounterGroup> counters = e.counters();
  add_by_name(run.host_a, counters);
  run.cm_counters = cm_counters(counters);
  if (step.barrier != nullptr) {
    LcoreResult me;
    me.side = "sender";
    me.lcore = lane;
    me.connections = o.qps;
    for (const SizeResult& s : run.sizes) {
      me.data_packets += s.packets_sent;
      me.busy_cycles += s.sender_busy_cycles;
      me.turns += s.sender_turns;
      me.busy_turns += s.sender_busy_turns;
    }
    me.cpu_ns = apps::thread_cpu_ns() - cpu_start;
    run.lanes.push_back(lane_of(me, run.host_a, run.sizes));
  }
  return run;
}

}  // namespace

RunResult run_client(const PerfOptions& o, std::FILE* progress) {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  RunResult run;
  std::vector<std::unique_ptr<metaroce::Endpoint>> lanes;
  if (o.lcores <= 1) {
    std::unique_ptr<metaroce::Endpoint> e = metaroce::Endpoint::open(endpoint_config(o), run.error);
    if (!e) return run;
    LaneStep alone;
    run = client_run(o, *e, progress, 0, alone);
    lanes.push_back(std::move(e));
  } else {
    lanes = metaroce::Endpoint::open_lanes(endpoint_config(o), o.lcores, run.error);
    if (lanes.empty()) return run;
    if (progress != nullptr)
      std::fprintf(progress, " %u lcores, each driving queue k of the port with its share of -q and -n\n",
                   unsigned{o.lcores});
    PollingBarrier barrier(o.lcores);
    std::atomic<unsigned> done{0};
    std::vector<RunResult> results(lanes.size());
    std::vector<std::thread> threads;
    for (std::uint16_t k = 0; k < lanes.size(); ++k)
      threads.emplace_back([&, k] {
        // Lane k: connections k, k + N, .. of -q, and as many of -n's messages.
        PerfOptions mine = o;
        mine.qps = o.qps / o.lcores + (k < o.qps % o.lcores ? 1u : 0u);
        mine.iterations = o.iterations / o.lcores + (k < o.iterations % o.lcores ? 1u : 0u);
        LaneStep step{&barrier, lanes[k].get()};
        results[k] = client_run(mine, *lanes[k], k == 0 ? progress : nullptr, k, step);
        apps::turn_until_lanes_done(lanes[k].get(), done, o.lcores);
      });
    for (auto& t : threads) t.join();
    run = merge_lanes(std::move(results), true);
  }
  // DPDK 22.11's memif unmaps a departed peer's rings on its interrupt
  // thread, racing with an lcore in rx burst (a crash, seen with thousands
  // of connections): stop polling and let the server, which lingers
  // server_linger_ns after the last connection, go first.
  if (lanes.front()->driver() == "net_memif")
    std::this_thread::sleep_for(std::chrono::nanoseconds(2 * server_linger_ns + 100'000'000));
  for (auto& lane : lanes) lane.reset();  // one after another
  return run;
}

}  // namespace metaroce::perf
