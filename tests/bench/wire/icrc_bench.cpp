// ICRC throughput over whole frames (IP header to payload end) at the frame
// payload sizes of the ICRC target: 64 B, 1 KiB, 4 KiB, 9000 B, beside a
// bare CRC-32 of the same bytes in the same run: ISA-L's crc32_gzip_refl
// (the baseline of the target) and our fold (crc32_fold). Last line: JSON.
#include <isa-l/crc.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "../common/capture_reporter.hpp"
#include "common/json_line.hpp"
#include "wire/crc_fold.hpp"
#include "wire/frame.hpp"
#include "wire/icrc.hpp"
#include "wire_samples.hpp"

namespace {

using namespace metaroce::wire;

constexpr std::size_t sizes[] = {64, 1024, 4096, 9000};

struct Frame {
  std::vector<std::uint8_t> bytes;
  ByteSpan covered;  // IP header to the byte before the ICRC
};

Frame make_frame(std::size_t payload_len) {
  const FrameSpec spec = metaroce::test::sample_spec(opcode::mr_write, 4, false);
  std::vector<std::uint8_t> payload(payload_len, 0x5a);
  Frame f;
  f.bytes.resize(headers_size(spec) + payload_len + 8);
  f.bytes.resize(build_frame(spec, payload, f.bytes));
  f.covered = ByteSpan(f.bytes.data() + ethernet_header_size, f.bytes.size() - ethernet_header_size - icrc_size);
  return f;
}

void BM_Icrc(benchmark::State& state) {
  const Frame f = make_frame(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    std::uint32_t crc = compute_icrc(f.covered);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.covered.size()));
}
BENCHMARK(BM_Icrc)->Arg(64)->Arg(1024)->Arg(4096)->Arg(9000)->MinTime(0.2);

// The same bytes as BM_Icrc's frame, CRCed bare (no filler, no masks) by
// one call of ISA-L's crc32_gzip_refl ("isal") or of our fold ("fold":
// the widest the CPU has, 32 bytes per VPCLMULQDQ with AVX2, else 16 per
// PCLMULQDQ).
std::uint32_t bare_isal(std::uint32_t crc, ByteSpan b) { return crc32_gzip_refl(crc, b.data(), b.size()); }
std::uint32_t bare_fold(std::uint32_t crc, ByteSpan b) { return crc32_fold(crc, b.data(), b.size()); }

void BM_Bare(benchmark::State& state, std::uint32_t (*crc32)(std::uint32_t, ByteSpan)) {
  const Frame f = make_frame(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    std::uint32_t crc = crc32(0, f.covered);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.covered.size()));
}
BENCHMARK_CAPTURE(BM_Bare, isal, bare_isal)->Arg(1024)->Arg(4096)->Arg(9000)->MinTime(0.2);
BENCHMARK_CAPTURE(BM_Bare, fold, bare_fold)->Arg(1024)->Arg(4096)->Arg(9000)->MinTime(0.2);

// The payload in its own buffer, as with an mbuf whose payload is attached
// from registered memory.
void BM_IcrcScattered(benchmark::State& state) {
  const Frame f = make_frame(static_cast<std::size_t>(state.range(0)));
  const std::size_t headers = headers_size(metaroce::test::sample_spec(opcode::mr_write, 4, false)) -
                              ethernet_header_size;
  const std::vector<std::uint8_t> payload(f.covered.begin() + static_cast<std::ptrdiff_t>(headers),
                                          f.covered.end());
  const std::array<ByteSpan, 2> pieces = {f.covered.first(headers), ByteSpan(payload)};
  for (auto _ : state) {
    std::uint32_t crc = compute_icrc(pieces);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.covered.size()));
}
BENCHMARK(BM_IcrcScattered)->Arg(64)->Arg(4096)->MinTime(0.2);

// The gathering way (the whole short frame copied behind the filler, then
// folded), which frames in one buffer took before they were read in place.
void BM_IcrcGathered(benchmark::State& state) {
  const Frame f = make_frame(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    std::uint32_t crc = detail::compute_icrc_gathered(std::span<const ByteSpan>(&f.covered, 1));
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.covered.size()));
}
BENCHMARK(BM_IcrcGathered)->Arg(64)->Arg(256)->MinTime(0.2);

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = metaroce::bench::with_default_repetitions(argc, argv);
  int args_count = static_cast<int>(args.size());
  benchmark::Initialize(&args_count, args.data());
  metaroce::bench::CaptureReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  constexpr std::size_t long_sizes[] = {1024, 4096, 9000};
  const auto ns_of = [&](const char* name, std::size_t size) {
    return reporter.ns(std::string(name) + "/" + std::to_string(size) + "/min_time:0.200");
  };
  const auto gbps = [](double bytes, double ns) { return ns > 0 ? bytes / ns : 0.0; };
  std::printf("\n%-8s %14s %16s %16s %20s\n", "payload", "frame ICRC", "bare ISA-L", "bare fold",
              "ICRC / bare ISA-L");
  for (std::size_t size : long_sizes) {
    const double bytes = static_cast<double>(make_frame(size).covered.size());
    const double icrc = ns_of("BM_Icrc", size);
    const double isal = ns_of("BM_Bare/isal", size);
    std::printf("%-8zu %8.1f GB/s %10.1f GB/s %10.1f GB/s %19.2fx\n", size, gbps(bytes, icrc), gbps(bytes, isal),
                gbps(bytes, ns_of("BM_Bare/fold", size)), isal > 0 ? icrc / isal : 0.0);
  }
  std::printf("targets: frame ICRC <= 1.5x the bare CRC of the same bytes; >= 30 GB/s at 4 KiB\n");
  std::fflush(stdout);

  metaroce::apps::JsonLine j;
  j.add("bench", "icrc");
  j.begin_object("GBps");
  for (std::size_t size : sizes) {
    const double ns = reporter.ns("BM_Icrc/" + std::to_string(size) + "/min_time:0.200");
    const double bytes = static_cast<double>(make_frame(size).covered.size());
    j.add(std::to_string(size), ns > 0 ? bytes / ns : 0.0);
  }
  j.end_object();
  j.begin_object("ns_per_frame");
  for (std::size_t size : sizes) {
    j.add(std::to_string(size), reporter.ns("BM_Icrc/" + std::to_string(size) + "/min_time:0.200"));
  }
  j.end_object();
  j.begin_object("bare_GBps");
  for (std::size_t size : long_sizes)
    j.add(std::to_string(size), gbps(static_cast<double>(make_frame(size).covered.size()), ns_of("BM_Bare/isal", size)));
  j.end_object();
  j.begin_object("bare_fold_GBps");
  for (std::size_t size : long_sizes)
    j.add(std::to_string(size), gbps(static_cast<double>(make_frame(size).covered.size()), ns_of("BM_Bare/fold", size)));
  j.end_object();
  j.begin_object("of_bare");
  for (std::size_t size : long_sizes) {
    const double isal = ns_of("BM_Bare/isal", size);
    j.add(std::to_string(size), isal > 0 ? ns_of("BM_Icrc", size) / isal : 0.0);
  }
  j.end_object();
  j.add("scattered_4096_ns", reporter.ns("BM_IcrcScattered/4096/min_time:0.200"));
  j.add("gathered_64_ns", reporter.ns("BM_IcrcGathered/64/min_time:0.200"));
  j.add("gathered_256_ns", reporter.ns("BM_IcrcGathered/256/min_time:0.200"));
  j.add("isa", crc_implementation());
  std::cout << std::move(j).finish() << std::endl;  // after the reporter's std::cout lines
  return 0;
}
