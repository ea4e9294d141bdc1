// lib/secure's cost per frame: seal and open of one frame (a 12-byte BTH
// in the clear, then the payload) with AES-128-GCM, encrypted and
// auth-only, and the library's own AES-128-GCM over one 1 MiB buffer, the
// library's speed the frame path is set against. Last line: one JSON
// object.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "common/capture_reporter.hpp"
#include "common/json_line.hpp"
#include "secure/trailer.hpp"

namespace {

using namespace metaroce::secure;

constexpr std::size_t bth = 12;
const std::vector<std::uint8_t> key(16, 0x42);
const std::size_t payloads[] = {64, 1024, 4096};

void BM_Seal(benchmark::State& state, Protection p) {
  const auto payload = static_cast<std::size_t>(state.range(0));
  Sealer tx;
  if (!tx.set_key(Algorithm::aes128_gcm, key, 1, p)) state.SkipWithError("key");
  std::vector<std::uint8_t> frame(bth + payload + trailer_bytes, 0x5a);
  for (auto _ : state) {
    benchmark::DoNotOptimize(tx.seal(frame, bth));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * (bth + payload)));
}

// Open of frames sealed beforehand, in counter order (the common case: no
// reordering), through a window wide enough to take them all.
void BM_Open(benchmark::State& state, Protection p) {
  const auto payload = static_cast<std::size_t>(state.range(0));
  constexpr std::size_t batch = 256;
  Sealer tx;
  Opener rx;
  if (!tx.set_key(Algorithm::aes128_gcm, key, 1, p) ||
      !rx.set_key(Algorithm::aes128_gcm, key, 1, p, 1024))
    state.SkipWithError("key");
  std::vector<std::vector<std::uint8_t>> sealed(batch);
  std::vector<std::vector<std::uint8_t>> work(batch);
  std::size_t i = batch;
  for (auto _ : state) {
    if (i == batch) {
      state.PauseTiming();
      for (auto& f : sealed) {
        f.assign(bth + payload + trailer_bytes, 0x5a);
        (void)tx.seal(f, bth);
      }
      work = sealed;
      i = 0;
      state.ResumeTiming();
    }
    if (rx.open(work[i++], bth) != OpenResult::ok) state.SkipWithError("open refused");
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * (bth + payload)));
}

void BM_LibraryGcm(benchmark::State& state) {
  Gcm gcm;
  if (!gcm.set_key(Algorithm::aes128_gcm, key)) state.SkipWithError("key");
  std::vector<std::uint8_t> data(std::size_t{1} << 20, 0x5a);
  Nonce nonce{};
  Tag tag{};
  for (auto _ : state) {
    ++nonce[11];
    benchmark::DoNotOptimize(gcm.seal(nonce, {}, data, tag));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.size()));
}

BENCHMARK_CAPTURE(BM_Seal, encrypt, Protection::encrypt)->Arg(64)->Arg(1024)->Arg(4096)->MinTime(0.2);
BENCHMARK_CAPTURE(BM_Seal, auth_only, Protection::auth_only)->Arg(64)->Arg(1024)->Arg(4096)->MinTime(0.2);
BENCHMARK_CAPTURE(BM_Open, encrypt, Protection::encrypt)->Arg(64)->Arg(1024)->Arg(4096)->MinTime(0.2);
BENCHMARK_CAPTURE(BM_Open, auth_only, Protection::auth_only)->Arg(64)->Arg(1024)->Arg(4096)->MinTime(0.2);
BENCHMARK(BM_LibraryGcm)->MinTime(0.2);

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = metaroce::bench::with_default_repetitions(argc, argv);
  int args_count = static_cast<int>(args.size());
  benchmark::Initialize(&args_count, args.data());
  metaroce::bench::CaptureReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  metaroce::apps::JsonLine j;
  j.add("bench", "secure-frame");
  j.add("algorithm", "aes-128-gcm");
  for (const char* op : {"Seal", "Open"}) {
    for (const char* mode : {"encrypt", "auth_only"}) {
      j.begin_object(std::string(op == std::string("Seal") ? "seal_" : "open_") + mode + "_ns");
      for (std::size_t payload : payloads) {
        j.add(std::to_string(payload),
              reporter.ns(std::string("BM_") + op + "/" + mode + "/" + std::to_string(payload) +
                          "/min_time:0.200"));
      }
      j.end_object();
    }
  }
  const double lib_ns = reporter.ns("BM_LibraryGcm/min_time:0.200");
  j.add("library_gcm_gbps", lib_ns > 0 ? 8.0 * double(std::size_t{1} << 20) / lib_ns : 0.0);
  std::cout << std::move(j).finish() << std::endl;
  return 0;
}
