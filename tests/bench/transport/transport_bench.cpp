// The transport's own cost per small message, without DPDK: two metaroce (or
// rocev2) connections on one thread, frames serialized, parsed with the ICRC
// checked and delivered, in batches as an engine turn would. What one
// message costs both ends together bounds the message rate an engine can
// reach with one lcore per end (tools/bench transport; doc/BENCHMARKS.md).
// The metaroce 64 B case also runs secure, auth-only and encrypted (every
// frame sealed and opened, its ICRC left to the tag as a host does): what
// security adds to a message, without two threads sharing a noisy host.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "timer/wheel.hpp"
#include "transport/connection.hpp"
#include "secure/gcm.hpp"
#include "transport/memory_region.hpp"
#include "wire/frame.hpp"

namespace {

using namespace metaroce;

struct Pair {
  timer::Wheel wheel_a{0}, wheel_b{0};
  transport::MemoryRegistry mem_a, mem_b;
  std::unique_ptr<transport::Connection> a, b;
  std::vector<std::uint8_t> src, dst;
  std::uint32_t lkey = 0, rkey = 0;
  transport::TxBatch batch;
  std::vector<std::uint8_t> frame;
  std::vector<transport::Completion> completions;
  transport::Time now = 1'000'000;

  wire::ParseOptions parse_options;

  Pair(transport::Mode mode, std::uint64_t size, std::uint32_t slots, const secure::Protection* protection) {
    transport::ConnectionConfig c;
    c.mode = mode;
    c.mtu = 4096;
    c.paths = mode == transport::Mode::metaroce ? 4 : 1;
    c.local_qpn = 0x11;
    c.peer_qpn = 0x22;
    transport::ConnectionConfig d = c;
    std::swap(d.local_qpn, d.peer_qpn);
    std::string error;
    a = transport::Connection::create(c, mem_a, wheel_a, nullptr, error);
    b = transport::Connection::create(d, mem_b, wheel_b, nullptr, error);
    if (protection != nullptr) {
      transport::SecurityConfig ka, kb;
      ka.enabled = kb.enabled = true;
      ka.protection = kb.protection = *protection;
      for (std::size_t i = 0; i < ka.tx_key.size(); ++i) {
        ka.tx_key[i] = kb.rx_key[i] = static_cast<std::uint8_t>(i * 7 + 1);
        ka.rx_key[i] = kb.tx_key[i] = static_cast<std::uint8_t>(i * 11 + 3);
      }
      ka.tx_spi = kb.rx_spi = 0xa0000001u;
      ka.rx_spi = kb.tx_spi = 0xb0000001u;
      if (!a->set_security(ka, error) || !b->set_security(kb, error)) std::fprintf(stderr, "keys: %s\n", error.c_str());
      parse_options.secure_trailer = true;
      parse_options.verify_icrc = false;
    }
    a->connect();
    b->connect();
    src.assign(size * slots, 0x5a);
    dst.assign(size * slots, 0);
    lkey = mem_a.register_region(src.data(), src.size(), transport::access_local_write);
    rkey = mem_b.register_region(dst.data(), dst.size(), transport::access_local_write | transport::access_remote_write);
  }

  // Everything `from` has to send now, into `to`.
  std::size_t pump(transport::Connection& from, transport::Connection& to) {
    batch.clear();
    from.poll(now, batch);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      frame.clear();
      batch.serialize(i, frame);
      wire::ParsedFrame p;
      if (wire::parse_frame(frame, p, parse_options) == wire::ParseError::ok) to.on_frame(now, p);
    }
    return batch.size();
  }
};

void run(benchmark::State& state, transport::Mode mode, const secure::Protection* protection = nullptr) {
  const auto size = static_cast<std::uint64_t>(state.range(0));
  constexpr std::uint32_t depth = 128;
  Pair p(mode, size, depth, protection);
  std::uint64_t posted = 0, completed = 0;
  for (auto _ : state) {
    // One turn of each end: post up to the depth, move frames both ways,
    // collect completions.
    while (posted - completed < depth) {
      transport::SendRequest r;
      r.wr_id = posted;
      r.op = transport::SendOp::write;
      r.local_addr = p.src.data() + (posted % depth) * size;
      r.length = size;
      r.lkey = p.lkey;
      r.remote_addr = reinterpret_cast<std::uint64_t>(p.dst.data() + (posted % depth) * size);
      r.rkey = p.rkey;
      if (p.a->post_send(r) != transport::PostResult::ok) break;
      ++posted;
    }
    p.pump(*p.a, *p.b);
    p.now += 1000;
    p.wheel_b.advance(p.now);
    p.pump(*p.b, *p.a);
    p.wheel_a.advance(p.now);
    p.completions.clear();
    p.a->poll_completions(p.completions);
    completed += p.completions.size();
  }
  state.counters["msg_per_s"] = benchmark::Counter(double(completed), benchmark::Counter::kIsRate);
  state.counters["ns_per_msg"] =
      benchmark::Counter(double(completed), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<std::int64_t>(completed));
}

void BM_MetaroceWrites(benchmark::State& state) { run(state, transport::Mode::metaroce); }
void BM_Rocev2Writes(benchmark::State& state) { run(state, transport::Mode::rocev2); }
void BM_MetaroceWritesAuth(benchmark::State& state) {
  constexpr secure::Protection p = secure::Protection::auth_only;
  run(state, transport::Mode::metaroce, &p);
}
void BM_MetaroceWritesEncrypt(benchmark::State& state) {
  constexpr secure::Protection p = secure::Protection::encrypt;
  run(state, transport::Mode::metaroce, &p);
}

BENCHMARK(BM_MetaroceWrites)->Arg(64)->Arg(4096)->MinTime(1.0);
BENCHMARK(BM_Rocev2Writes)->Arg(64)->Arg(4096)->MinTime(1.0);
BENCHMARK(BM_MetaroceWritesAuth)->Arg(64)->MinTime(1.0);
BENCHMARK(BM_MetaroceWritesEncrypt)->Arg(64)->MinTime(1.0);

// The console table, and each run's nanoseconds per message kept for the
// closing JSON line.
class Reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs)
      if (const auto it = run.counters.find("ns_per_msg"); it != run.counters.end())
        ns_per_msg[run.run_name.str()] = it->second.value;
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> ns_per_msg;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  // kInvert of a rate is seconds per message: nanoseconds here.
  const auto ns = [&](const char* name) { return reporter.ns_per_msg[name] * 1e9; };
  std::printf("{\"bench\":\"transport\",\"metaroce_64b_ns_per_msg\":%.1f,\"metaroce_4k_ns_per_msg\":%.1f,"
              "\"rocev2_64b_ns_per_msg\":%.1f,\"rocev2_4k_ns_per_msg\":%.1f,"
              "\"metaroce_64b_auth_ns_per_msg\":%.1f,\"metaroce_64b_encrypt_ns_per_msg\":%.1f}\n",
              ns("BM_MetaroceWrites/64/min_time:1.000"), ns("BM_MetaroceWrites/4096/min_time:1.000"),
              ns("BM_Rocev2Writes/64/min_time:1.000"), ns("BM_Rocev2Writes/4096/min_time:1.000"),
              ns("BM_MetaroceWritesAuth/64/min_time:1.000"), ns("BM_MetaroceWritesEncrypt/64/min_time:1.000"));
  benchmark::Shutdown();
  return 0;
}
