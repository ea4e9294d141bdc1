#include "metaroce-perf/raw_run.hpp"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "engine/mbuf_frames.hpp"
#include "engine/port.hpp"
#include "wire/byte_order.hpp"
#include "wire/frame.hpp"
#include "wire/headers.hpp"

namespace metaroce::perf {

namespace {

constexpr std::uint16_t ring_size = 256;  // as the loopback's rings
constexpr std::uint16_t burst = 32;       // as the engine's bursts
constexpr std::uint32_t pool_mbufs = 8192;
// Where each frame carries its sequence number (inside the UDP header and
// BTH: any 8 bytes past the Ethernet header do).
constexpr std::size_t seq_at = wire::ethernet_header_size + wire::ipv4_header_size;

struct PoolDeleter {
  void operator()(rte_mempool* p) const noexcept { rte_mempool_free(p); }
};

// The receiving lcore. Its counters are written by that lcore only, and read
// after it stopped; they sit on lines of their own.
struct alignas(64) RawReceiver {
  std::uint16_t port = 0;
  const std::vector<std::uint8_t>* pattern = nullptr;
  bool verify = false;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> received{0};  // read by the sender while it waits for the tail
  alignas(64) std::uint64_t frames = 0, wrong = 0, next_seq = 0, checksum = 0;
  TurnCounts counts;

  bool frame_ok(const std::uint8_t* d, std::uint32_t len) noexcept {
    const std::vector<std::uint8_t>& want = *pattern;
    const bool ok = len == want.size() && wire::load_be64(d + seq_at) == next_seq &&
                    std::memcmp(d, want.data(), seq_at) == 0 &&
                    std::memcmp(d + seq_at + 8, want.data() + seq_at + 8, len - seq_at - 8) == 0;
    ++next_seq;
    return ok;
  }

  std::size_t turn() noexcept {
    const std::uint64_t start = rte_rdtsc();
    std::array<rte_mbuf*, burst> rx;
    const std::uint16_t n = rte_eth_rx_burst(port, 0, rx.data(), burst);
    if (n != 0) {
      engine::prefetch_received(rx.data(), n);  // as the engine does
      for (std::uint16_t i = 0; i < n; ++i) {
        const auto* d = rte_pktmbuf_mtod(rx[i], const std::uint8_t*);
        const std::uint32_t len = rx[i]->data_len;
        if (verify) {
          if (!frame_ok(d, len)) ++wrong;
        } else {
          // Every byte read, as a receiver parsing and placing it would.
          std::uint64_t sum = 0;
          std::uint32_t k = 0;
          for (; k + 8 <= len; k += 8) sum += wire::load_be64(d + k);
          for (; k < len; ++k) sum += d[k];
          checksum += sum;
        }
      }
      rte_pktmbuf_free_bulk(rx.data(), n);
      frames += n;
      received.store(frames, std::memory_order_release);
    }
    counts.add(rte_rdtsc() - start, n != 0);
    return n;
  }
};

int raw_receiver_main(void* arg) {
  auto& r = *static_cast<RawReceiver*>(arg);
  while (!r.stop.load(std::memory_order_acquire)) r.turn();
  return 0;
}

// The frame a WRITE of `payload` bytes would be on the wire, its bytes a
// pattern (their values do not matter to the ring; --verify checks them).
std::vector<std::uint8_t> frame_pattern(std::uint32_t bytes) {
  std::vector<std::uint8_t> f(bytes);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<std::uint8_t>(i * 7 + 3);
  return f;
}

bool run_size(const PerfOptions& o, std::uint64_t size, engine::Port& a, engine::Port& b, rte_mempool* pool,
              std::FILE* progress, RunResult& run) {
  const std::uint32_t frame_bytes = write_frame_bytes(o.mode, static_cast<std::uint32_t>(size));
  const std::vector<std::uint8_t> pattern = frame_pattern(frame_bytes);
  RawReceiver receiver;
  receiver.port = b.id();
  receiver.pattern = &pattern;
  receiver.verify = o.verify;
  const unsigned worker = rte_get_next_lcore(rte_lcore_id(), 1, 0);
  const bool threaded = worker < RTE_MAX_LCORE && rte_eal_remote_launch(raw_receiver_main, &receiver, worker) == 0;

  SizeResult result;
  result.size = size;
  result.shared_lcore = !threaded;
  const std::uint64_t hz = rte_get_tsc_hz();
  const std::uint64_t t0 = rte_rdtsc();
  const std::uint64_t duration = o.duration_s > 0 ? static_cast<std::uint64_t>(o.duration_s * double(hz)) : 0;
  std::uint64_t last_progress = t0, progress_frames = 0;
  std::array<rte_mbuf*, burst> tx{};
  std::uint16_t pending = 0, pending_at = 0;  // tx[pending_at, pending_at + pending) wait for the ring
  std::uint64_t sent = 0, seq = 0, pool_empty = 0;
  for (;;) {
    const std::uint64_t turn_start = rte_rdtsc();
    const std::uint64_t receiver_before = threaded ? 0 : receiver.counts.cycles;
    const bool sending = duration != 0 ? turn_start - t0 < duration : sent < o.iterations;
    if (!sending && pending == 0) break;
    std::uint16_t moved = 0;
    if (pending == 0) {
      const auto want = static_cast<std::uint16_t>(
          duration != 0 ? burst : std::min<std::uint64_t>(burst, o.iterations - sent));
      if (rte_pktmbuf_alloc_bulk(pool, tx.data(), want) == 0) {
        for (std::uint16_t i = 0; i < want; ++i) {
          auto* d = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(tx[i], static_cast<std::uint16_t>(frame_bytes)));
          wire::copy_bytes(d, pattern.data(), frame_bytes);
          wire::store_be64(d + seq_at, seq++);
        }
        pending = want;
        pending_at = 0;
      } else {
        ++pool_empty;  // the receiver has not freed them yet
      }
    }
    if (pending != 0) {
      moved = rte_eth_tx_burst(a.id(), 0, tx.data() + pending_at, pending);
      pending = static_cast<std::uint16_t>(pending - moved);
      pending_at = static_cast<std::uint16_t>(pending_at + moved);
      sent += moved;
    }
    if (!threaded) receiver.turn();
    const std::uint64_t now = rte_rdtsc();
    ++result.sender_turns;
    if (moved != 0) {
      ++result.sender_busy_turns;
      result.sender_busy_cycles += now - turn_start - (threaded ? 0 : receiver.counts.cycles - receiver_before);
    }
    if (progress != nullptr && now - last_progress >= hz) {
      const std::uint64_t got = receiver.received.load(std::memory_order_acquire);
      std::fprintf(progress, "[%6.1f s] raw %u B frames: %.3f M frames/s\n", double(now - t0) / double(hz),
                   frame_bytes, double(got - progress_frames) * double(hz) / double(now - last_progress) / 1e6);
      std::fflush(progress);
      last_progress = now;
      progress_frames = got;
    }
  }
  const std::uint64_t end = rte_rdtsc();
  // The tail: wait (at most a second) for the receiver to take what was sent.
  while (receiver.received.load(std::memory_order_acquire) < sent && rte_rdtsc() - end < hz) {
    if (!threaded) receiver.turn();
  }
  receiver.stop.store(true, std::memory_order_release);
  if (threaded) rte_eal_wait_lcore(worker);
  b.drain_rx();

  result.messages = receiver.frames;
  result.packets_sent = sent;
  result.seconds = double(end - t0) / double(hz);
  result.message_rate = result.seconds > 0 ? double(receiver.frames) / result.seconds : 0.0;
  result.average_bps = result.message_rate * double(size) * 8.0;
  result.peak_bps = result.average_bps;
  result.wrong_messages = receiver.wrong;
  result.missing_messages = sent - receiver.frames;
  if (receiver.wrong != 0) result.first_problem = fmt::format("{} frames arrived out of order or with wrong bytes", receiver.wrong);
  else if (result.missing_messages != 0) result.first_problem = "frames sent never arrived";
  result.receiver_busy_cycles = receiver.counts.busy_cycles;
  result.receiver_turns = receiver.counts.turns;
  result.receiver_busy_turns = receiver.counts.busy_turns;
  if (sent != 0) {
    result.cycles_per_packet = double(result.sender_busy_cycles) / double(sent);
    result.receiver_cycles_per_packet = double(result.receiver_busy_cycles) / double(sent);
  }
  if (progress != nullptr && pool_empty != 0)
    std::fprintf(progress, " (the sender found its pool empty on %llu turns)\n", static_cast<unsigned long long>(pool_empty));
  run.sizes.push_back(result);
  return true;
}

}  // namespace

std::uint32_t write_frame_bytes(transport::Mode mode, std::uint32_t payload) noexcept {
  wire::FrameSpec spec;  // IPv4, no VLAN
  spec.bth.opcode = mode == transport::Mode::metaroce ? wire::opcode::mr_write
                                                      : static_cast<std::uint8_t>(wire::opcode::rc | wire::opcode::write_only);
  return static_cast<std::uint32_t>(wire::headers_size(spec) + payload + wire::pad_for(payload) + wire::icrc_size);
}

RunResult run_raw(const PerfOptions& o, std::FILE* progress) {
  RunResult run;
  std::uint64_t largest = 0;
  for (const std::uint64_t s : o.sizes) largest = std::max(largest, s);
  if (largest > o.mtu) {
    run.error = fmt::format("--raw sends one frame per message: every size must be at most the MTU ({} B); give "
                            "-s {} or less (not -a), or raise --mtu", o.mtu, o.mtu);
    return run;
  }
  engine::PortSetup setup;
  setup.rx_desc = ring_size;
  setup.tx_desc = ring_size;
  setup.mbufs = 1024;  // net_ring receives the sender's mbufs: this pool stays unused
  setup.mtu = o.mtu + 100;
  std::unique_ptr<engine::Port> a, b;
  std::string error;
  if (!engine::Port::create_ring_pair("raw_a", "raw_b", setup, a, b, error) || !a->start(error) || !b->start(error)) {
    run.error = "--raw: " + error;
    return run;
  }
  static std::atomic<unsigned> instance{0};
  const std::string pool_name = fmt::format("raw_tx_{}", instance.fetch_add(1));
  const std::uint32_t room = write_frame_bytes(o.mode, static_cast<std::uint32_t>(largest)) + RTE_PKTMBUF_HEADROOM;
  std::unique_ptr<rte_mempool, PoolDeleter> pool(
      rte_pktmbuf_pool_create(pool_name.c_str(), pool_mbufs, 256, 0, static_cast<std::uint16_t>((room + 63) & ~63u),
                              static_cast<int>(rte_socket_id())));
  if (!pool) {
    run.error = fmt::format("--raw: cannot create a pool of {} mbufs: give EAL more memory (-m)", pool_mbufs);
    return run;
  }
  for (const std::uint64_t size : o.sizes) run_size(o, size, *a, *b, pool.get(), progress, run);
  a->stop();
  b->stop();
  b->drain_rx();
  return run;
}

}  // namespace metaroce::perf
