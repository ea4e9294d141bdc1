#include "metaroce-perf/loopback_run.hpp"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cc/fair_share.hpp"
#include "cc/registry.hpp"
#include "cm/manager.hpp"
#include "common/cpu_time.hpp"
#include "common/process_memory.hpp"
#include "engine/loopback.hpp"
#include "engine/telemetry.hpp"
#include "fabric/spec.hpp"
#include "metaroce-perf/message_pattern.hpp"

namespace metaroce::perf {

namespace {

// Memory for messages in flight on each side: enough for the windows, small
// enough for a laptop.
constexpr std::uint64_t slot_budget_bytes = 64ull << 20;
// Without --verify, messages share buffers of this many bytes in all (one
// message when larger): perftest's cycle buffer.
constexpr std::uint64_t reused_buffer_bytes = 4096;
// Messages posted to one connection before the next, at most (-t bounds it too).
constexpr std::uint32_t max_burst = 4096;

// Which connection and stream message m goes to, in perftest's order: each
// connection in turn takes a burst of messages (perftest fills a QP's
// tx_depth before it posts to the next), and each round of bursts over the
// connections goes to the next stream. A connection's poll then sends a
// burst together, as it would one connection's, and one ACK covers many.
struct MessageOrder {
  std::uint32_t burst = 1;
  std::uint32_t qps = 1;
  std::uint16_t streams = 1;
  [[nodiscard]] std::uint64_t first_of(std::uint32_t qp, std::uint16_t stream) const noexcept {
    return (std::uint64_t{stream} * qps + qp) * burst;
  }
  // The message after m on m's connection and stream.
  [[nodiscard]] std::uint64_t next_of_same(std::uint64_t m) const noexcept {
    return (m + 1) % burst != 0 ? m + 1 : m + 1 + (std::uint64_t{streams} * qps - 1) * burst;
  }
};
// A run that makes no progress this long after posting stopped has lost
// messages for good.
constexpr std::uint64_t drain_limit_ns = 5'000'000'000;
constexpr std::uint16_t loopback_ring_size = 256;
constexpr std::uint64_t peak_window_ns = 100'000'000;

// Side B: the receiving host, on its own lcore during one size.
struct alignas(64) Receiver {
  engine::Loopback* loopback = nullptr;
  std::uint16_t lane = 0;                           // its lcore's host index on side B
  std::vector<transport::Connection*> connections;  // the lane's, index: user tag
  engine::TelemetryPublisher* telemetry = nullptr;  // host B's; published from B's lcore
  const PerfOptions* options = nullptr;
  std::uint64_t size = 0;
  std::uint32_t slots = 0;             // write region slots (sender's choice)
  std::uint32_t receives_per_stream = 0;
  std::uint8_t* write_region = nullptr;
  std::vector<std::uint8_t> receive_region;
  std::uint32_t receive_key = 0;
  std::uint32_t qps = 1;
  std::uint32_t burst = 1;  // messages posted to one connection before the next (MessageOrder)
  // Per (connection, stream), index qp * streams + stream: the next message
  // it completes (MessageOrder::next_of_same).
  std::vector<std::uint64_t> expected_next;
  std::vector<transport::Completion> completions;  // (the host's scratch)
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::uint64_t> wrong{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<bool> stop{false};
  // Set by the sender when its timed window ends: the receiver then counts
  // what its connections hold (it owns them) into connection_memory.
  std::atomic<bool> count_memory{false};
  std::atomic<std::uint64_t> connection_memory{0};
  std::atomic<bool> memory_counted{false};
  std::string first_problem;  // written by B, read after it stopped
  // B's turns (written by B, read after it stopped). A line of their own,
  // and the last: the sender's variables next to this object stay off it.
  alignas(64) TurnCounts counts;
  std::uint64_t cpu_ns = 0;  // thread CPU time of its lcore's run (receiver_main)

  void problem(std::string what) {
    if (first_problem.empty()) first_problem = std::move(what);
  }

  bool post_receive(std::uint64_t wr_id, std::size_t qp, std::uint16_t stream) {
    transport::ReceiveRequest r;
    r.wr_id = wr_id;
    r.stream = stream;
    r.addr = receive_region.data() + wr_id * (options->op == PerfOp::send ? size : 0);
    r.length = options->op == PerfOp::send ? size : 0;
    r.lkey = receive_key;
    return connections[qp]->post_receive(r) == transport::PostResult::ok;
  }

  // One turn, counted; returns the frames moved and completions handled
  // (0: idle).
  std::size_t turn() {
    const std::uint64_t start = rte_rdtsc();
    const std::size_t work = untimed_turn();
    counts.add(rte_rdtsc() - start, work != 0);
    return work;
  }

  std::size_t untimed_turn() {
    const std::size_t work = loopback->poll_side_b(lane);
    telemetry->maybe_publish();
    if (count_memory.load(std::memory_order_relaxed) && !memory_counted.load(std::memory_order_relaxed)) {
      connection_memory.store(loopback->host_b(lane).host().connection_memory_bytes(), std::memory_order_relaxed);
      memory_counted.store(true, std::memory_order_release);
    }
    if (!receiver_completes(options->op)) return work;  // a WRITE, READ or atomic completes nothing here
    // Only the connections with completions (their user tag: the index).
    const std::size_t handled = loopback->host_b(lane).host().poll_completions(
        completions, [this](transport::Connection& c, const std::vector<transport::Completion>& got) {
          complete(c.user_tag(), got);
        });
    return work + handled;
  }

  void complete(std::size_t qp, const std::vector<transport::Completion>& got) {
    for (const auto& c : got) {
      if (c.status != transport::CompletionStatus::success) {
        failed.fetch_add(1, std::memory_order_relaxed);
        problem(fmt::format("receive completion {}", transport::to_string(c.status)));
        continue;
      }
      const std::size_t key = qp * options->streams + c.stream;
      const std::uint64_t m = expected_next[key];
      expected_next[key] = MessageOrder{burst, qps, options->streams}.next_of_same(m);
      bool ok = true;
      if (options->op == PerfOp::write_imm) {
        ok = c.has_imm && c.imm == static_cast<std::uint32_t>(m);
        if (ok && options->verify) ok = check_pattern(write_region + (m % slots) * size, size, m);
      } else {
        ok = c.byte_len == size;
        if (ok && options->verify) ok = check_pattern(receive_region.data() + c.wr_id * size, size, m);
      }
      // No engine turn in here (unlike the sender): the ACKs of these
      // messages are out, so a turn could take in the next message for a
      // slot not checked yet.
      if (!ok) {
        wrong.fetch_add(1, std::memory_order_relaxed);
        problem(fmt::format("message {} arrived with wrong bytes (or out of order on stream {})", m, c.stream));
      }
      if (!post_receive(c.wr_id, qp, c.stream)) problem("re-posting a receive was refused");
      received.fetch_add(1, std::memory_order_release);
    }
  }
};

// --idle-sleep-us: lets other processes have the core when a turn found nothing.
void idle(const PerfOptions& o, std::size_t work) {
  if (work == 0 && o.idle_sleep_us != 0) std::this_thread::sleep_for(std::chrono::microseconds(o.idle_sleep_us));
}

void add(transport::ConnectionCounters& a, const transport::ConnectionCounters& b) {
#define METAROCE_PERF_ADD(name, what) a.name += b.name;
  METAROCE_CONNECTION_COUNTERS(METAROCE_PERF_ADD)
#undef METAROCE_PERF_ADD
}

void add(fabric::FabricCounters& a, const fabric::FabricCounters& b) {
  a.received += b.received;
  a.forwarded += b.forwarded;
  a.dropped_random_loss += b.dropped_random_loss;
  a.dropped_burst_loss += b.dropped_burst_loss;
  a.dropped_queue_full += b.dropped_queue_full;
  a.dropped_blackhole += b.dropped_blackhole;
  a.corrupted += b.corrupted;
  a.duplicated += b.duplicated;
  a.ecn_marked += b.ecn_marked;
  a.reordered += b.reordered;
  a.reordered_in_path += b.reordered_in_path;
}

std::uint64_t retransmissions(const transport::Connection& c) {
  std::uint64_t n = 0;
  for (std::uint16_t p = 0; p < c.config().paths; ++p) n += c.path_info(p).retransmitted;
  return n;
}

// Over the connections of one side.
std::uint64_t retransmissions(const std::vector<transport::Connection*>& cs) {
  std::uint64_t n = 0;
  for (const auto* c : cs) n += retransmissions(*c);
  return n;
}
std::uint64_t data_packets_sent(const std::vector<transport::Connection*>& cs) {
  std::uint64_t n = 0;
  for (const auto* c : cs) n += c->counters().data_packets_sent + c->counters().retransmitted_packets;
  return n;
}

// Room for the latency samples of one size without regrowing: -n, or a
// generous rate for -D (regrowing is correct, just slower).
std::size_t latency_samples_hint(const PerfOptions& o) {
  return static_cast<std::size_t>(o.duration_s > 0 ? std::min(o.duration_s * 200'000.0, 2e6)
                                                   : double(std::min<std::uint64_t>(o.iterations, 2'000'000)));
}

int receiver_main(void* arg) {
  auto& r = *static_cast<Receiver*>(arg);
  const std::uint64_t cpu_start = apps::thread_cpu_ns();
  while (!r.stop.load(std::memory_order_acquire)) idle(*r.options, r.turn());
  r.cpu_ns = apps::thread_cpu_ns() - cpu_start;
  return 0;
}

// Side A of one lane (one lcore of the sender's node): posts this lane's
// share of the messages to its connections, in perftest's order over them,
// and completes them; its receiver is side B of the same lane.
struct alignas(64) SenderLane {
  engine::Loopback* loopback = nullptr;
  engine::TelemetryPublisher* telemetry = nullptr;
  const PerfOptions* options = nullptr;
  Receiver* receiver = nullptr;
  std::uint16_t lane = 0;
  std::uint64_t size = 0;
  std::uint64_t iterations = 0;  // this lane's share of -n
  bool threaded = true;          // its receiver runs on an lcore of its own
  std::FILE* progress = nullptr;
  std::vector<transport::Connection*> senders;  // index: the connection's user tag
  std::uint32_t slots = 0, burst = 1, buffers = 1;
  std::vector<std::uint8_t> source, write_region;
  std::uint32_t lkey = 0, rkey = 0;
  SizeResult result;
  std::vector<std::uint64_t> latencies_ns;
  std::string problem;
  std::uint64_t posted = 0, completed = 0, failed = 0, wrong = 0;
  std::uint64_t cpu_ns = 0;  // thread CPU time of run()

  void run();
};

int sender_main(void* arg) {
  static_cast<SenderLane*>(arg)->run();
  return 0;
}

void SenderLane::run() {
  const std::uint64_t cpu_start = apps::thread_cpu_ns();
  const PerfOptions& o = *options;
  engine::Loopback& lb = *loopback;
  const auto qps = static_cast<std::uint32_t>(senders.size());
  std::vector<std::uint8_t> slot_busy(slots, 0);  // bytes, not vector<bool>: one store per message
  std::vector<std::uint32_t> in_flight(qps, 0);   // per connection, at most tx_depth
  std::vector<std::uint64_t> slot_posted_ns(o.test == PerfTest::lat ? slots : 0, 0);  // --test lat only
  if (o.test == PerfTest::lat) latencies_ns.reserve(latency_samples_hint(o));
  std::vector<transport::Completion> completions;
  const std::uint64_t t0 = lb.host_a(lane).now_ns();
  const std::uint64_t duration_ns = static_cast<std::uint64_t>(o.duration_s * 1e9);
  std::uint64_t last_progress = t0, last_event = t0, window_start = t0, window_done = 0, end = t0;
  std::uint64_t progress_done = 0;
  bool posting = true;
  // Checking or filling a large message takes longer than an RTT: keep the
  // engine turning in between, or ACKs wait and timers fire for nothing.
  const auto keep_engine_turning = [&] {
    if (size < 16384) return;
    lb.poll_side_a(lane);
    if (!threaded) receiver->turn();
  };

  // Message m's slot (m % slots), connection and stream (MessageOrder) and
  // buffer (m % buffers), stepped along with m: no division per message on
  // the sender's lcore.
  struct {
    std::uint32_t slot = 0, qp = 0, buffer = 0, in_burst = 0;
    std::uint16_t stream = 0;
    std::uint32_t slots = 0, qps = 0, buffers = 0, burst = 1;
    std::uint16_t streams = 0;
    void advance() noexcept {
      if (++slot == slots) slot = 0;
      if (++buffer == buffers) buffer = 0;
      if (++in_burst < burst) return;
      in_burst = 0;
      if (++qp == qps) {
        qp = 0;
        if (++stream == streams) stream = 0;
      }
    }
  } next;
  next.slots = slots;
  next.qps = qps;
  next.buffers = buffers;
  next.streams = o.streams;
  next.burst = burst;
  std::vector<transport::Completion> polled;  // one connection's, then appended to completions
  const bool slots_power_of_two = (slots & (slots - 1)) == 0;
  const auto slot_of = [&](std::uint64_t m) {
    return static_cast<std::uint32_t>(slots_power_of_two ? m & (slots - 1) : m % slots);
  };
  transport::SendRequest request;
  request.op = send_op(o.op);
  // --verify of the atomics: the value each slot's 8 bytes at B hold, as
  // this side expects them; every returned old value must equal it.
  std::vector<std::uint64_t> atomic_expected(is_atomic(o.op) ? buffers : 0, 0);
  request.length = size;
  request.lkey = lkey;
  request.rkey = rkey;
  const std::uint64_t sent_before = data_packets_sent(senders);
  engine::EngineHost& host = lb.host_a(lane);
  for (;;) {
    const std::uint64_t turn_start = rte_rdtsc();
    // Both sides on this lcore: the receiver's turns are not the sender's cost.
    const std::uint64_t receiver_cycles_before = threaded ? 0 : receiver->counts.cycles;
    const std::uint64_t posted_before = posted;
    std::size_t work = lb.poll_side_a(lane);
    telemetry->maybe_publish();
    if (!threaded) work += receiver->turn();
    const std::uint64_t now = host.now_ns();
    // Only the connections with completions, oldest first.
    completions.clear();
    work += host.host().poll_completions(
        polled, [&](transport::Connection& c, const std::vector<transport::Completion>& got) {
          in_flight[c.user_tag()] -= static_cast<std::uint32_t>(got.size());
          completions.insert(completions.end(), got.begin(), got.end());
        });
    for (const auto& c : completions) {
      const std::uint64_t m = c.wr_id;
      const std::uint32_t slot = slot_of(m);
      slot_busy[slot] = false;
      last_event = end = now;
      if (o.test == PerfTest::lat) latencies_ns.push_back(now - slot_posted_ns[slot]);
      if (c.status != transport::CompletionStatus::success) {
        ++failed;
        if (problem.empty()) problem = fmt::format("message {} completed with {}", m, transport::to_string(c.status));
        continue;
      }
      ++completed;
      if (o.verify && (o.op == PerfOp::write || o.op == PerfOp::read)) {
        // A WRITE's bytes at B, a READ's here.
        const std::uint8_t* bytes = (o.op == PerfOp::read ? source.data() : write_region.data()) +
                                    std::uint64_t{slot} * size;
        if (!check_pattern(bytes, size, m)) {
          ++wrong;
          if (problem.empty())
            problem = fmt::format("message {} ({} bytes) has wrong bytes at the {}", m, size,
                                  o.op == PerfOp::read ? "reader" : "receiver");
        }
        keep_engine_turning();
      } else if (o.verify && is_atomic(o.op)) {
        std::uint64_t old = 0;
        std::memcpy(&old, source.data() + std::uint64_t{slot} * size, sizeof old);
        if (old != atomic_expected[slot]) {
          ++wrong;
          if (problem.empty())
            problem = fmt::format("message {}: {} returned {:#x}, expected {:#x}", m, to_string(o.op), old,
                                  atomic_expected[slot]);
        }
        // Both add m + 1 / swap in m + 1 (the compare is the value expected).
        atomic_expected[slot] = o.op == PerfOp::fetch_add ? old + m + 1 : m + 1;
      }
    }
    if (posting && (duration_ns != 0 ? now - t0 >= duration_ns : posted >= iterations)) {
      posting = false;
      // What the connections hold with the window's traffic in flight, by
      // the host's own count (Connection::memory_bytes), on both ends.
      result.connection_memory_sender_bytes = host.host().connection_memory_bytes();
      receiver->count_memory.store(true, std::memory_order_relaxed);
      if (!threaded) receiver->turn();
    }
    while (posting && (duration_ns != 0 || posted < iterations) && in_flight[next.qp] < o.tx_depth &&
           !slot_busy[next.slot]) {
      const std::uint64_t m = posted;
      const std::uint32_t slot = next.slot;
      if (o.verify && is_atomic(o.op)) {
        request.swap_add = m + 1;
        request.compare = atomic_expected[slot];
      } else if (o.verify) {
        // A READ's pattern is at B, where it is read from; its place here is cleared.
        std::uint8_t* pattern = (o.op == PerfOp::read ? write_region.data() : source.data()) + std::uint64_t{slot} * size;
        fill_pattern(pattern, size, m);
        if (o.op == PerfOp::read) std::memset(source.data() + std::uint64_t{slot} * size, 0, size);
        keep_engine_turning();
      }
      transport::SendRequest& r = request;  // what every message shares is set once, above
      r.wr_id = m;
      r.stream = next.stream;
      const std::uint64_t buffer = std::uint64_t{next.buffer} * size;
      r.local_addr = source.data() + buffer;
      r.remote_addr = reinterpret_cast<std::uint64_t>(write_region.data() + buffer);
      r.imm = static_cast<std::uint32_t>(m);
      const auto pr = senders[next.qp]->post_send(r);
      if (pr != transport::PostResult::ok) {
        problem = fmt::format("post_send refused message {}: {}", m, transport::to_string(pr));
        posting = false;
        break;
      }
      slot_busy[slot] = true;
      ++in_flight[next.qp];
      if (o.test == PerfTest::lat) slot_posted_ns[slot] = now;
      ++posted;
      next.advance();
      last_event = now;
    }
    if (now - window_start >= peak_window_ns) {
      result.peak_bps = std::max(result.peak_bps, double(completed - window_done) * double(size) * 8e9 /
                                                      double(now - window_start));
      window_start = now;
      window_done = completed;
    }
    if (progress != nullptr && now - last_progress >= 1'000'000'000) {
      std::fprintf(progress, "[%6.1f s] %llu B%s: %.2f Gb/s, %llu messages, %llu retransmitted\n",
                   double(now - t0) / 1e9, static_cast<unsigned long long>(size),
                   lb.lcores() > 1 ? " (lcore 0 of the sender)" : "",
                   double(completed - progress_done) * double(size) * 8.0 / double(now - last_progress),
                   static_cast<unsigned long long>(completed), static_cast<unsigned long long>(retransmissions(senders)));
      std::fflush(progress);
      last_progress = now;
      progress_done = completed;
    }
    const bool sender_done = !posting && completed + failed == posted;
    const bool receiver_done = !receiver_completes(o.op) ||
                               receiver->received.load(std::memory_order_acquire) +
                                       receiver->failed.load(std::memory_order_relaxed) >= completed;
    if (sender_done && receiver_done) break;
    ++result.sender_turns;
    if (work != 0 || posted != posted_before) {
      ++result.sender_busy_turns;
      result.sender_busy_cycles +=
          rte_rdtsc() - turn_start - (threaded ? 0 : receiver->counts.cycles - receiver_cycles_before);
    }
    if (!posting && now - last_event > drain_limit_ns) {
      if (problem.empty()) problem = fmt::format("{} messages never completed", posted - completed - failed);
      break;
    }
    idle(o, work);
  }
  result.messages = completed;
  result.seconds = double(end - t0) / 1e9;
  result.packets_sent = data_packets_sent(senders) - sent_before;
  cpu_ns = apps::thread_cpu_ns() - cpu_start;
}

// A lane's connections: those of lcore `lane` (Loopback::lcore_of), each
// tagged with its index in the lane.
std::vector<transport::Connection*> lane_connections(engine::Loopback& lb, std::uint16_t lane, bool side_a) {
  std::vector<transport::Connection*> out;
  for (std::size_t i = 0; i < lb.qps(); ++i) {
    if (lb.lcore_of(i) != lane) continue;
    transport::Connection& c = side_a ? lb.connection_a(i) : lb.connection_b(i);
    c.set_user_tag(out.size());
    out.push_back(&c);
  }
  return out;
}

// Sets up lane k's regions, registrations and receives (the sender and
// receiver of one lcore pair); false with run.error.
bool prepare_lane(const PerfOptions& o, std::uint64_t size, engine::Loopback& lb, SenderLane& s, Receiver& receiver,
                  RunResult& run) {
  // Slots of the source and write regions: up to tx_depth per connection
  // within the budget (at least one each), the budget shared by the lanes.
  // Messages go to the connections in bursts, as perftest posts
  // (MessageOrder): each connection takes `burst` messages (as many as its
  // share of the slots allows, at most tx_depth) before the next one does.
  // Slots are a multiple of burst x connections, so slot m % slots always
  // belongs to message m's connection.
  const auto qps = static_cast<std::uint32_t>(s.senders.size());
  const std::uint64_t budget = slot_budget_bytes / lb.lcores();
  auto slots = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(budget / size, 1, std::uint64_t{o.tx_depth} * qps));
  const std::uint32_t burst = std::clamp<std::uint32_t>(slots / qps, 1, std::min(o.tx_depth, max_burst));
  slots = std::max(burst * qps, slots - slots % (burst * qps));
  // Where message m's bytes live: with --verify each message in flight has
  // its own slot (its pattern must survive until it is checked); without,
  // like perftest, messages share one buffer (cycling through a 4 KiB page
  // when smaller), so the figures measure the transport rather than DRAM.
  const std::uint32_t buffers =
      o.verify ? slots : static_cast<std::uint32_t>(std::clamp<std::uint64_t>(reused_buffer_bytes / size, 1, slots));
  s.slots = slots;
  s.burst = burst;
  s.buffers = buffers;
  s.source.assign(std::uint64_t{buffers} * size, 0x5a);
  // B's memory the sender's WRITEs land in, or its READs and atomics read.
  s.write_region.assign(o.op == PerfOp::send ? 0 : std::uint64_t{buffers} * size, 0);
  receiver.loopback = &lb;
  receiver.lane = s.lane;
  receiver.options = &o;
  receiver.size = size;
  receiver.slots = buffers;
  receiver.qps = qps;
  receiver.burst = burst;
  // Receives per stream: what the window can have in flight on one stream,
  // plus as many again for completions the receiver has not re-posted yet
  // (else the sender meets RNR), within the memory budget.
  const std::uint64_t per_stream_in_flight = (slots / qps + o.streams - 1) / o.streams;
  receiver.receives_per_stream = static_cast<std::uint32_t>(std::max<std::uint64_t>(
      per_stream_in_flight + 1,
      std::min<std::uint64_t>(2 * per_stream_in_flight + 16,
                              o.op == PerfOp::send ? 2 * budget / (size * o.streams * qps) : ~0ull)));
  receiver.receive_region.assign(
      o.op == PerfOp::send ? std::uint64_t{qps} * o.streams * receiver.receives_per_stream * size : 64, 0);
  receiver.write_region = s.write_region.data();
  receiver.expected_next.resize(std::size_t{qps} * o.streams);
  for (std::uint32_t qp = 0; qp < qps; ++qp)
    for (std::uint16_t st = 0; st < o.streams; ++st)
      receiver.expected_next[qp * o.streams + st] = MessageOrder{burst, qps, o.streams}.first_of(qp, st);

  engine::EngineHost& host_a = lb.host_a(s.lane);
  engine::EngineHost& host_b = lb.host_b(s.lane);
  s.lkey = host_a.memory().register_region(s.source.data(), s.source.size(), transport::access_local_write);
  s.rkey = s.write_region.empty()
               ? 0
               : host_b.memory().register_region(s.write_region.data(), s.write_region.size(),
                                                 transport::access_local_write | transport::access_remote_write |
                                                     transport::access_remote_read | transport::access_remote_atomic);
  receiver.receive_key = host_b.memory().register_region(receiver.receive_region.data(),
                                                         receiver.receive_region.size(), transport::access_local_write);
  if (receiver_completes(o.op)) {
    for (std::uint32_t qp = 0; qp < qps; ++qp)
      for (std::uint16_t st = 0; st < o.streams; ++st)
        for (std::uint32_t j = 0; j < receiver.receives_per_stream; ++j)
          if (!receiver.post_receive((std::uint64_t{qp} * o.streams + st) * receiver.receives_per_stream + j, qp,
                                     st)) {
            run.error = "posting the initial receives was refused";
            return false;
          }
  }
  if (!o.verify) std::fill(s.source.begin(), s.source.end(), 0x5a);
  return true;
}

std::uint64_t data_packets_received(const std::vector<transport::Connection*>& cs) {
  std::uint64_t n = 0;
  for (const auto* c : cs) n += c->counters().data_packets_received;
  return n;
}

bool run_size(const PerfOptions& o, std::uint64_t size, const FrameTap& tap, std::FILE* progress, RunResult& run) {
  engine::LoopbackConfig config;
  config.connection.mode = o.mode;
  config.connection.mtu = o.mtu;
  config.connection.paths = o.paths;
  config.planes = o.planes;
  config.connection.streams = o.streams;
  config.connection.path_window = o.path_window;
  config.connection.psn_window = o.psn_window;
  // Software ends on shared cores see RTTs of hundreds of microseconds and
  // scheduling stalls of tens of milliseconds (max_poll_gap_ns in --json):
  // keep the RTO above the usual stall, and let a connection ride out a
  // long one instead of declaring the peer gone after 7 rounds.
  config.connection.initial_rto = 5'000'000;
  config.connection.min_rto = loopback_min_rto_ns;
  config.connection.retry_limit = 50;
  config.connection.rnr_retry_limit = 50;
  if (o.mode == transport::Mode::rocev2) {
    config.connection.pkey = o.rocev2.pkey;
    // Asked for: IBTA's timers instead.
    if (o.rocev2.timers_given)
      transport::apply(transport::IbtaTimers{o.rocev2.qp_timeout, o.rocev2.retry_count, o.rocev2.rnr_retry},
                       config.connection);
  }
  // A short ring: the backlog waits in the connection's window (no timer
  // running) instead of in the ring (timer running).
  config.ports.rx_desc = loopback_ring_size;
  config.ports.tx_desc = loopback_ring_size;
  config.hosts.zero_copy_threshold = loopback_zero_copy_threshold(o);
  config.hosts.idle_sleep_us = o.idle_sleep_us;
  // Frames in flight are bounded by the windows (paths x path_window) plus
  // the rings: 8192 mbufs per side leave room and fit the 512 MB EAL
  // default with both hosts and both fabric links; several lcores share
  // them (each host carries its share of the connections).
  config.hosts.tx_mbufs = std::max<std::uint32_t>(4096, 8192 / o.lcores);
  if (!o.fabric_spec.empty()) {
    config.forward = fabric::parse_fabric_spec(o.fabric_spec).config;
    config.backward = config.forward;
  }
  for (const auto& [plane, spec] : o.fabric_plane_specs) {
    engine::LoopbackConfig::PlaneFabric pf;
    pf.plane = plane;
    pf.forward = fabric::parse_fabric_spec(spec).config;
    pf.backward = pf.forward;
    config.plane_fabrics.push_back(std::move(pf));
  }
  config.tap = tap;
  config.qps = o.qps;
  config.lcores = o.lcores;
  config.software_handoff = o.software_handoff;
  config.hosts.max_connections = o.qps;  // each host owns one end of each, at most
  if (!o.cc.empty() && o.cc != "none") {
    std::string cc_error;
    if (!cc::make(o.cc, cc::CcConfig{}, cc_error)) {
      run.error = fmt::format("--cc: {}", cc_error);
      return false;
    }
    config.congestion = [&o] {
      cc::CcConfig cc_config;
      cc_config.metaroce.paths = o.paths;  // one window per path of the connection
      std::string ignored;
      return cc::make(o.cc, cc_config, ignored);
    };
    // Each host's receive share; with several lcores per side each host
    // takes an equal slice of the port's capacity (Loopback divides the
    // link rate, this an explicit capacity).
    config.receive_share = [&o](std::uint32_t link_speed_mbps) -> std::unique_ptr<cc::FairShare> {
      return cc::make_receive_share(o.receive_capacity_bps / o.lcores, link_speed_mbps);
    };
  }
  // Both sides of every lane on lcores of their own, or (one lane, one
  // lcore) both here.
  std::vector<unsigned> workers;
  for (unsigned l = rte_get_next_lcore(rte_lcore_id(), 1, 0); l < RTE_MAX_LCORE; l = rte_get_next_lcore(l, 1, 0))
    workers.push_back(l);
  const std::uint16_t lanes = o.lcores;
  if (lanes > 1 && workers.size() < 2u * lanes - 1) {
    run.error = fmt::format("--lcores {} needs {} EAL lcores (a sender and a receiver per lcore), EAL has {}: give "
                            "none after -- (metaroce-perf maps them onto the CPUs) or --lcores '(0-{})@(0-1)'",
                            lanes, 2 * lanes, workers.size() + 1, 2 * lanes - 1);
    return false;
  }
  // What the connections cost: resident memory once the ports, pools and
  // hosts exist, after the connections are created, and once traffic has
  // touched their windows (then with this size's message buffers too).
  std::uint64_t rss_before = 0;
  config.before_connections = [&rss_before] { rss_before = apps::resident_bytes(); };
  if (!o.key_file.empty())
    config.secure_pair = [&o](transport::ConnectionConfig& a, transport::ConnectionConfig& b, std::string& error) {
      if (cm::pair_keys(o.psk, o.auth_only ? secure::Protection::auth_only : secure::Protection::encrypt,
                        a.local_qpn, b.local_qpn, a.security, b.security))
        return true;
      error = "--secure: OpenSSL could not derive the connections' keys";
      return false;
    };
  auto loopback = engine::Loopback::create(config, run.error);
  if (!loopback) {
    if (o.mode == transport::Mode::rocev2)
      run.error = fmt::format("--mode rocev2: {} (the rocev2 baseline may not be built yet; use --mode metaroce)",
                              run.error);
    return false;
  }
  engine::Loopback& lb = *loopback;
  const std::uint64_t rss_connected = apps::resident_bytes();
  if (lanes > 1 && progress != nullptr) {
    const unsigned handed = lb.steering_a_to_b().handed_off + lb.steering_b_to_a().handed_off;
    std::fprintf(progress, " steering: a probe per queue each way, %s\n",
                 handed == 0 ? "each on its owner's queue"
                             : fmt::format("{} of {} handed off to their owner in software", handed, 2 * lanes).c_str());
  }

  std::vector<std::unique_ptr<SenderLane>> senders;
  std::vector<std::unique_ptr<Receiver>> receivers;
  // Readable with dpdk-telemetry.py while this size runs (/metaroce/...);
  // each host publishes its snapshot from its own lcore.
  std::vector<std::unique_ptr<engine::TelemetryPublisher>> telemetry;
  for (std::uint16_t k = 0; k < lanes; ++k) {
    auto s = std::make_unique<SenderLane>();
    auto r = std::make_unique<Receiver>();
    s->loopback = &lb;
    s->options = &o;
    s->receiver = r.get();
    s->lane = k;
    s->size = size;
    s->iterations = o.iterations / lanes + (k < o.iterations % lanes ? 1 : 0);
    s->progress = k == 0 ? progress : nullptr;
    s->senders = lane_connections(lb, k, true);
    r->connections = lane_connections(lb, k, false);
    if (s->senders.empty()) {
      run.error = fmt::format("--lcores {} with -q {}: lcore {} would carry no connection; give -q {} at least", lanes,
                              o.qps, k, lanes);
      return false;
    }
    telemetry.push_back(std::make_unique<engine::TelemetryPublisher>(lb.host_a(k), s->senders));
    telemetry.push_back(std::make_unique<engine::TelemetryPublisher>(lb.host_b(k), r->connections));
    s->telemetry = telemetry[telemetry.size() - 2].get();
    r->telemetry = telemetry.back().get();
    if (!prepare_lane(o, size, lb, *s, *r, run)) return false;
    senders.push_back(std::move(s));
    receivers.push_back(std::move(r));
  }

  // Receivers first (lane k's on worker k), then senders 1.. on the next
  // workers; sender 0 runs here.
  bool threaded = true;
  for (std::uint16_t k = 0; k < lanes && threaded; ++k)
    // One lane, one lcore: its receiver turns inside the sender's turns.
    threaded = k < workers.size() && rte_eal_remote_launch(receiver_main, receivers[k].get(), workers[k]) == 0;
  for (auto& s : senders) s->threaded = threaded;
  std::vector<bool> sender_launched(lanes, false);
  for (std::uint16_t k = 1; k < lanes; ++k)
    sender_launched[k] = rte_eal_remote_launch(sender_main, senders[k].get(), workers[lanes + k - 1]) == 0;
  senders[0]->run();
  // A lane whose lcore was not free (not expected: checked above) runs after lane 0.
  for (std::uint16_t k = 1; k < lanes; ++k)
    if (!sender_launched[k]) senders[k]->run();
  // With software hand-off, side A's lcore 0 takes every lane's ACKs from
  // the port and hands them on: it keeps turning until the other lanes end.
  for (std::uint16_t k = 1; k < lanes && o.software_handoff; ++k)
    while (sender_launched[k] && rte_eal_get_lcore_state(workers[lanes + k - 1]) == RUNNING)
      idle(o, lb.poll_side_a(0));
  for (std::uint16_t k = 1; k < lanes; ++k)
    if (sender_launched[k]) rte_eal_wait_lcore(workers[lanes + k - 1]);
  for (auto& r : receivers) r->stop.store(true, std::memory_order_release);
  if (threaded)
    for (std::uint16_t k = 0; k < lanes; ++k) rte_eal_wait_lcore(workers[k]);

  SizeResult result;
  result.size = size;
  result.connections = o.qps;
  result.resident_before_bytes = rss_before;
  result.resident_connected_bytes = rss_connected;
  result.resident_after_bytes = apps::resident_bytes();
  std::vector<std::uint64_t> latencies_ns;
  std::uint64_t wrong = 0, received = 0, completed = 0, posted = 0;
  std::string problem;
  for (std::uint16_t k = 0; k < lanes; ++k) {
    SenderLane& s = *senders[k];
    Receiver& r = *receivers[k];
    if (r.memory_counted.load(std::memory_order_acquire))
      result.connection_memory_receiver_bytes += r.connection_memory.load(std::memory_order_relaxed);
    result.connection_memory_sender_bytes += s.result.connection_memory_sender_bytes;
    result.messages += s.completed;
    result.seconds = std::max(result.seconds, s.result.seconds);
    // Each lane's best window (they run side by side).
    result.peak_bps += s.result.peak_bps;
    result.sender_busy_cycles += s.result.sender_busy_cycles;
    result.sender_turns += s.result.sender_turns;
    result.sender_busy_turns += s.result.sender_busy_turns;
    result.packets_sent += s.result.packets_sent;
    result.receiver_busy_cycles += r.counts.busy_cycles;
    result.receiver_turns += r.counts.turns;
    result.receiver_busy_turns += r.counts.busy_turns;
    wrong += s.wrong + r.wrong.load();
    received += r.received.load();
    completed += s.completed;
    posted += s.posted;
    if (problem.empty()) problem = !s.problem.empty() ? s.problem : r.first_problem;
    latencies_ns.insert(latencies_ns.end(), s.latencies_ns.begin(), s.latencies_ns.end());
    LcoreResult sl;
    sl.side = "sender";
    sl.lcore = k == 0 ? rte_lcore_id() : workers[lanes + k - 1];
    sl.connections = static_cast<std::uint32_t>(s.senders.size());
    sl.data_packets = s.result.packets_sent;
    sl.busy_cycles = s.result.sender_busy_cycles;
    sl.turns = s.result.sender_turns;
    sl.busy_turns = s.result.sender_busy_turns;
    sl.cpu_ns = s.cpu_ns;
    if (const cc::PortShareBoard* b = lb.port_share_a()) sl.receive_part_bps = b->part_bps(k);
    LcoreResult rl;
    rl.side = "receiver";
    rl.lcore = threaded ? workers[k] : rte_lcore_id();
    rl.connections = static_cast<std::uint32_t>(r.connections.size());
    rl.data_packets = data_packets_received(r.connections);
    rl.busy_cycles = r.counts.busy_cycles;
    rl.turns = r.counts.turns;
    rl.busy_turns = r.counts.busy_turns;
    rl.cpu_ns = r.cpu_ns;
    if (const cc::PortShareBoard* b = lb.port_share_b()) rl.receive_part_bps = b->part_bps(k);
    result.lcores.push_back(sl);
    result.lcores.push_back(rl);
  }
  // Let the last ACKs and retransmissions settle before tearing down; a
  // plane failed near the end gets up to half a second for its probes to
  // bring it back, so each plane's state below is what it came to.
  const auto a_plane_failed = [&] {
    for (std::uint16_t k = 0; k < lanes; ++k)
      for (auto* c : senders[k]->senders)
        for (std::uint16_t p = 0; p < lb.planes(); ++p)
          if (c->plane_info(p).state == transport::PlaneState::failed) return true;
    return false;
  };
  const std::uint64_t settle_until = lb.host_a(0).now_ns() + 500'000'000;
  for (int i = 0; i < 1000 || (a_plane_failed() && lb.host_a(0).now_ns() < settle_until); ++i)
    for (std::uint16_t k = 0; k < lanes; ++k) {
      lb.poll_side_a(k);
      lb.poll_side_b(k);
    }

  result.average_bps = result.seconds > 0 ? double(result.messages) * double(size) * 8.0 / result.seconds : 0.0;
  result.peak_bps = std::max(result.peak_bps, result.average_bps);
  result.message_rate = result.seconds > 0 ? double(result.messages) / result.seconds : 0.0;
  result.wrong_messages = wrong;
  result.missing_messages = posted - completed;
  if (receiver_completes(o.op) && received < completed) result.missing_messages += completed - received;
  result.first_problem = problem;
  result.shared_lcore = !threaded;
  if (result.packets_sent != 0) {
    result.cycles_per_packet = double(result.sender_busy_cycles) / double(result.packets_sent);
    result.receiver_cycles_per_packet = double(result.receiver_busy_cycles) / double(result.packets_sent);
  }
  summarize_latencies(latencies_ns, result);

  for (std::uint16_t k = 0; k < lanes; ++k) {
    lb.host_a(k).refresh_port_counters();
    lb.host_b(k).refresh_port_counters();
    run.host_a += lb.host_a(k).counters();
    run.host_b += lb.host_b(k).counters();
    for (auto* c : senders[k]->senders) add(run.connection_a, c->counters());
    for (auto* c : receivers[k]->connections) add(run.connection_b, c->counters());
    run.retransmitted += retransmissions(senders[k]->senders);
  }
  if (run.planes.size() < lb.planes()) run.planes.resize(lb.planes());
  for (std::uint16_t p = 0; p < lb.planes(); ++p) {
    PlaneResult& pr = run.planes[p];
    pr.plane = p;
    pr.state = "active";
    for (std::uint16_t k = 0; k < lanes; ++k)
      for (auto* c : senders[k]->senders) {
        const transport::PlaneInfo info = c->plane_info(p);
        pr.data_packets += info.data_packets;
        pr.retransmits += info.retransmits;
        pr.failures += info.failures;
        if (info.state == transport::PlaneState::failed) pr.state = "failed";
      }
    rte_eth_stats stats{};
    if (rte_eth_stats_get(lb.plane_port_a(p), &stats) == 0) pr.sender_port_frames += stats.opackets;
    // Every plane's links add up into the run's fabric counters too.
    if (const engine::ImpairedLink* f = lb.forward_link(p)) {
      pr.fabric_dropped += f->fabric_counters().dropped();
      add(run.forward, f->fabric_counters());
    }
    if (const engine::ImpairedLink* b = lb.backward_link(p)) {
      pr.fabric_dropped += b->fabric_counters().dropped();
      add(run.backward, b->fabric_counters());
    }
  }
  run.sizes.push_back(std::move(result));
  telemetry.clear();  // they read the hosts: unregister before the hosts go
  loopback.reset();   // before the regions it may still point into
  return true;
}

}  // namespace

void summarize_latencies(std::vector<std::uint64_t>& latencies_ns, SizeResult& result) {
  if (latencies_ns.empty()) return;
  std::sort(latencies_ns.begin(), latencies_ns.end());
  // Nearest rank: the smallest sample with at least q of them at or below it.
  const auto at = [&](double q) {
    const auto rank = static_cast<std::size_t>(std::ceil(q * double(latencies_ns.size())));
    return double(latencies_ns[std::clamp<std::size_t>(rank, 1, latencies_ns.size()) - 1]) / 1e3;
  };
  double sum = 0;
  for (const auto v : latencies_ns) sum += double(v);
  result.lat_min_us = double(latencies_ns.front()) / 1e3;
  result.lat_p50_us = at(0.50);
  result.lat_p99_us = at(0.99);
  result.lat_max_us = double(latencies_ns.back()) / 1e3;
  result.lat_avg_us = sum / double(latencies_ns.size()) / 1e3;
}

std::uint32_t loopback_zero_copy_threshold(const PerfOptions& o) noexcept {
  // net_ring hands a chain to the receiver as a chain, which must copy it
  // to parse it: attaching moves the copy instead of saving it and costs
  // two more mbufs. Measured (doc/ENGINE.md): copying is faster at every
  // size over net_ring, so the loopback copies unless told otherwise.
  if (o.zero_copy_threshold == 0 || o.zero_copy_threshold == 65535) return engine::zero_copy_never;
  return o.zero_copy_threshold;
}

RunResult run_loopback(const PerfOptions& options, const FrameTap& tap, std::FILE* progress) {
  RunResult run;
  if (progress != nullptr && options.mode == transport::Mode::rocev2 && !options.raw) {
    if (options.rocev2.timers_given)
      std::fprintf(progress, " rocev2 timers: %s\n", apps::rocev2_summary(options.rocev2).c_str());
    else  // run_size's own: what a shared VM's stalls need
      std::fprintf(progress, " rocev2 timers (the loopback's, tuned for shared cores; --qp-timeout, --retry-count "
                   "and --rnr-retry for IBTA's): P_Key %#06x, RTO 5 ms at first, 2 ms at least, backing off; "
                   "50 retries, 50 RNR retries\n", options.rocev2.pkey);
  }
  for (const std::uint64_t size : options.sizes)
    if (!run_size(options, size, tap, progress, run)) break;
  return run;
}

}  // namespace metaroce::perf
