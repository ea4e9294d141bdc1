// Header build and parse cost per packet, without the ICRC (measured by the
// icrc benchmark) and with it. Last line: JSON.
#include <iostream>
#include <vector>

#include <benchmark/benchmark.h>

#include "../common/capture_reporter.hpp"
#include "common/json_line.hpp"
#include "wire/frame.hpp"
#include "wire/header_template.hpp"
#include "wire_samples.hpp"

namespace {

using namespace metaroce::wire;

constexpr std::uint32_t payload_len = 4096;

// Builds the headers of a metaroce WRITE into an mbuf-like headroom, as the
// engine will: the payload stays where it is.
void BM_BuildHeaders(benchmark::State& state) {
  FrameSpec spec = metaroce::test::sample_spec(opcode::mr_write, 4, false);
  std::array<std::uint8_t, 128> headers{};
  std::uint32_t psn = 0;
  for (auto _ : state) {
    spec.bth.psn = psn++ & psn_mask;
    spec.mr_data.path_seq = psn;
    std::size_t size = build_headers(spec, payload_len, headers);
    benchmark::DoNotOptimize(size);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_BuildHeaders);

std::vector<std::uint8_t> sample_frame(std::uint8_t op) {
  const FrameSpec spec = metaroce::test::sample_spec(op, 4, false);
  std::vector<std::uint8_t> payload(opcode_info(op).has(has_payload) ? payload_len : 0, 0x5a);
  std::vector<std::uint8_t> frame(headers_size(spec) + payload.size() + 8);
  frame.resize(build_frame(spec, payload, frame));
  return frame;
}

void parse_loop(benchmark::State& state, std::uint8_t op, bool verify_icrc) {
  const auto frame = sample_frame(op);
  ParsedFrame parsed;
  for (auto _ : state) {
    ParseError e = parse_frame(frame, parsed, ParseOptions{true, verify_icrc});
    benchmark::DoNotOptimize(e);
    benchmark::DoNotOptimize(parsed);
  }
}

void BM_ParseMrWrite(benchmark::State& state) { parse_loop(state, opcode::mr_write, false); }
BENCHMARK(BM_ParseMrWrite);
void BM_ParseMrAck(benchmark::State& state) { parse_loop(state, opcode::mr_ack, false); }
BENCHMARK(BM_ParseMrAck);
void BM_ParseRcWriteFirst(benchmark::State& state) {
  parse_loop(state, opcode::rc | opcode::write_first, false);
}
BENCHMARK(BM_ParseRcWriteFirst);
void BM_ParseMrWriteWithIcrc(benchmark::State& state) { parse_loop(state, opcode::mr_write, true); }
BENCHMARK(BM_ParseMrWriteWithIcrc);

void BM_BuildAndParse(benchmark::State& state) {
  FrameSpec spec = metaroce::test::sample_spec(opcode::mr_write, 4, false);
  std::array<std::uint8_t, 256> frame{};
  ParsedFrame parsed;
  std::uint32_t psn = 0;
  // Headers only: the payload of a real packet is elsewhere, so parse the
  // header bytes as a frame of zero payload.
  for (auto _ : state) {
    spec.bth.psn = psn++ & psn_mask;
    const std::size_t size = build_headers(spec, 0, frame);
    ParseError e = parse_frame(ByteSpan(frame.data(), size + icrc_size), parsed,
                               ParseOptions{true, false});
    benchmark::DoNotOptimize(e);
    benchmark::DoNotOptimize(parsed);
  }
}
BENCHMARK(BM_BuildAndParse);

// The transmit fast path: stamp a path's template, encode the per-packet
// metaroce extensions, then parse the result as the receiver would.
void BM_StampAndParse(benchmark::State& state) {
  const FrameSpec spec = metaroce::test::sample_spec(opcode::mr_write, 4, false);
  HeaderTemplate tmpl;
  if (!tmpl.prepare(spec)) state.SkipWithError("template");
  std::array<std::uint8_t, 256> frame{};
  ParsedFrame parsed;
  MrDataHeader data = spec.mr_data;
  MrWriteHeader write = spec.mr_write;
  std::uint32_t psn = 0;
  for (auto _ : state) {
    ++psn;
    const std::size_t size = tmpl.stamp(frame, 0, psn, false);
    data.path_seq = psn;
    write.msg_offset = psn * 4096;
    encode(data, frame.data() + tmpl.ext_offset());
    encode(write, frame.data() + tmpl.ext_offset() + mr_data_header_size);
    ParseError e = parse_frame(ByteSpan(frame.data(), size + icrc_size), parsed, ParseOptions{true, false});
    benchmark::DoNotOptimize(e);
    benchmark::DoNotOptimize(parsed);
  }
}
BENCHMARK(BM_StampAndParse);

void BM_Stamp(benchmark::State& state) {
  HeaderTemplate tmpl;
  if (!tmpl.prepare(metaroce::test::sample_spec(opcode::mr_write, 4, false))) state.SkipWithError("template");
  std::array<std::uint8_t, 256> frame{};
  std::uint32_t psn = 0;
  for (auto _ : state) {
    std::size_t size = tmpl.stamp(frame, 4096, ++psn, false);
    benchmark::DoNotOptimize(size);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Stamp);

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = metaroce::bench::with_default_repetitions(argc, argv);
  int args_count = static_cast<int>(args.size());
  benchmark::Initialize(&args_count, args.data());
  metaroce::bench::CaptureReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  metaroce::apps::JsonLine j;
  j.add("bench", "wire");
  j.add("build_headers_ns", reporter.ns("BM_BuildHeaders"));
  j.add("parse_mr_write_ns", reporter.ns("BM_ParseMrWrite"));
  j.add("parse_mr_ack_ns", reporter.ns("BM_ParseMrAck"));
  j.add("parse_rc_write_first_ns", reporter.ns("BM_ParseRcWriteFirst"));
  j.add("stamp_headers_ns", reporter.ns("BM_Stamp"));
  j.add("build_parse_ns", reporter.ns("BM_StampAndParse"));
  j.add("build_from_spec_parse_ns", reporter.ns("BM_BuildAndParse"));
  j.add("parse_mr_write_4k_with_icrc_ns", reporter.ns("BM_ParseMrWriteWithIcrc"));
  std::cout << std::move(j).finish() << std::endl;  // after the reporter's std::cout lines
  return 0;
}
