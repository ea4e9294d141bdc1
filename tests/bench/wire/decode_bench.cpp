// What metaroce-decode spends per frame: reading a record from a capture
// file, and turning a frame into its JSON line. The line is built twice,
// with the decoder's own writer (apps/common/json_line) and with
// nlohmann::ordered_json (ordered: the decoder's keys keep their order);
// both are checked to give the same text before anything is timed. The
// figures are the reason the decoder keeps its writer (doc/DESIGN.md,
// "What we write ourselves, and what we take"). Last line: JSON.
#include <unistd.h>

#include <arpa/inet.h>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../common/capture_reporter.hpp"
#include "common/json_line.hpp"
#include "common/pcap_file.hpp"
#include "metaroce-decode/frame_json.hpp"
#include "wire/frame.hpp"
#include "wire_samples.hpp"

namespace {

using namespace metaroce::wire;
using ordered_json = nlohmann::ordered_json;

std::vector<std::uint8_t> sample_frame(std::uint8_t op, std::size_t payload_len) {
  const FrameSpec spec = metaroce::test::sample_spec(op, 4, false);
  std::vector<std::uint8_t> payload(payload_len, 0x5a);
  std::vector<std::uint8_t> frame(headers_size(spec) + payload.size() + 8);
  frame.resize(build_frame(spec, payload, frame));
  return frame;
}

// A data packet of a 1 KiB message and an ACK of three paths: the two
// frames a metaroce capture is made of.
const std::vector<std::uint8_t>& write_frame() {
  static const auto f = sample_frame(opcode::mr_write, 1024);
  return f;
}
const std::vector<std::uint8_t>& ack_frame() {
  static const auto f = sample_frame(opcode::mr_ack, 0);
  return f;
}

std::string mac_text(const MacAddress& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
}

std::string ipv4_text(std::uint32_t a) {
  return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
}

constexpr char hex_digits[] = "0123456789abcdef";

void add_syndrome(ordered_json& j, std::uint8_t syn) {
  j["syndrome"] = syn;
  j["aeth_kind"] = "ack";
  j["credit"] = syn & 0x1f;
}

// The decoder's line for the two frames above (IPv4, no VLAN, ICRC
// verified), built with nlohmann::ordered_json: the same keys in the same
// order as apps/metaroce-decode/frame_json.cpp, for these frames only.
std::string nlohmann_line(std::uint64_t frame_number, std::span<const std::uint8_t> frame) {
  ordered_json j;
  j["frame"] = frame_number;
  j["frame_len"] = frame.size();
  ParsedFrame f;
  const ParseError err = parse_frame(frame, f, ParseOptions{true, true});
  if (err != ParseError::ok) {
    j["error"] = to_string(err);
    return j.dump();
  }
  const EthernetHeader eth = f.ethernet();
  j["eth_src"] = mac_text(eth.src);
  j["eth_dst"] = mac_text(eth.dst);
  j["ip_version"] = f.ip_version;
  const Ipv4Header ip = f.ipv4();
  j["src"] = ipv4_text(ip.src);
  j["dst"] = ipv4_text(ip.dst);
  j["ttl"] = ip.ttl;
  j["dscp"] = f.dscp();
  j["ecn"] = f.ecn();
  const UdpHeader udp = f.udp();
  j["sport"] = udp.src_port;
  j["dport"] = udp.dst_port;
  const Bth& b = f.bth;
  j["opcode"] = b.opcode;
  j["opcode_name"] = opcode_info(b.opcode).name;
  j["solicited"] = b.solicited;
  j["mig_req"] = b.mig_req;
  j["pad"] = b.pad;
  j["tver"] = b.tver;
  j["pkey"] = b.pkey;
  j["fecn"] = b.fecn;
  j["becn"] = b.becn;
  j["dest_qp"] = b.dest_qp;
  j["ack_req"] = b.ack_req;
  j["psn"] = b.psn;
  j["payload_len"] = f.payload.size();
  j["icrc"] = f.icrc;
  if (f.has(has_mr_data)) {
    const MrDataHeader& d = f.mr_data;
    ordered_json o;
    o["path_id"] = d.path_id;
    o["flags"] = d.flags;
    o["last"] = (d.flags & mr_flag::last) != 0;
    o["retransmit"] = (d.flags & mr_flag::retransmit) != 0;
    o["stream_id"] = d.stream_id;
    o["path_seq"] = d.path_seq;
    o["msg_seq"] = d.msg_seq;
    o["tsval"] = d.tsval;
    j["mr_data"] = std::move(o);
  }
  if (f.has(has_mr_write)) {
    const MrWriteHeader& w = f.mr_write;
    ordered_json o;
    o["va"] = w.va;
    o["rkey"] = w.rkey;
    o["msg_len"] = w.msg_len;
    o["msg_offset"] = w.msg_offset;
    j["mr_write"] = std::move(o);
  }
  if (f.has(has_mr_ack)) {
    const MrAckHeader& a = f.mr_ack;
    ordered_json o;
    add_syndrome(o, a.syndrome);
    o["path_count"] = a.path_count;
    o["delivered_psn"] = a.delivered_psn;
    o["completed_msn"] = a.completed_msn;
    o["rate_hint_mbps"] = a.rate_hint_mbps;
    ordered_json paths = ordered_json::array();
    for (std::size_t i = 0; i < a.path_count; ++i) {
      const MrPathAck p = f.path_ack(i);
      std::string sack;
      unsigned sacked = 0;
      sack.reserve(2 * p.sack.size());
      for (std::uint8_t byte : p.sack) {
        sack.push_back(hex_digits[byte >> 4]);
        sack.push_back(hex_digits[byte & 0xf]);
        sacked += static_cast<unsigned>(std::popcount(byte));
      }
      ordered_json e;
      e["path_id"] = p.path_id;
      e["ce_count"] = p.ce_count;
      e["cum_seq"] = p.cum_seq;
      e["ts_echo"] = p.ts_echo;
      e["sack"] = std::move(sack);
      e["sacked"] = sacked;
      paths.push_back(std::move(e));
    }
    o["paths"] = std::move(paths);
    j["mr_ack"] = std::move(o);
  }
  j["icrc_ok"] = true;
  return j.dump();
}

void BM_LineWriteJsonLine(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(metaroce::apps::frame_to_json(1, write_frame(), 1, true));
}
BENCHMARK(BM_LineWriteJsonLine);
void BM_LineWriteNlohmann(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann_line(1, write_frame()));
}
BENCHMARK(BM_LineWriteNlohmann);
void BM_LineAckJsonLine(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(metaroce::apps::frame_to_json(1, ack_frame(), 1, true));
}
BENCHMARK(BM_LineAckJsonLine);
void BM_LineAckNlohmann(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann_line(1, ack_frame()));
}
BENCHMARK(BM_LineAckNlohmann);

// A capture of 10,000 frames, data and ACKs alternating, read start to end
// (the page cache holds it): the reader's cost per record.
constexpr std::uint64_t capture_frames = 10'000;
bool capture_written = false;  // so that main removes only a file it made

const std::string& capture_path() {
  static const std::string path = [] {
    const std::string p =
        (std::filesystem::temp_directory_path() / fmt::format("metaroce-bench-decode-{}.pcap", ::getpid())).string();
    metaroce::apps::PcapWriter w;
    std::string error;
    if (!w.open(p, error)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      std::exit(1);
    }
    for (std::uint64_t i = 0; i < capture_frames; ++i) {
      if (!w.write(i % 2 ? ack_frame() : write_frame(), 1'000'000'000ull + i * 1000)) {
        std::fprintf(stderr, "%s: write failed\n", p.c_str());
        std::exit(1);
      }
    }
    if (!w.close()) {
      std::fprintf(stderr, "%s: write failed\n", p.c_str());
      std::exit(1);
    }
    capture_written = true;
    return p;
  }();
  return path;
}

void BM_ReadCapture(benchmark::State& state) {
  std::uint64_t records = 0;
  for (auto _ : state) {
    metaroce::apps::PcapReader r;
    std::string error;
    if (!r.open(capture_path(), error)) {
      state.SkipWithError(error.c_str());
      return;
    }
    metaroce::apps::PcapRecord rec;
    while (r.next(rec)) {
      benchmark::DoNotOptimize(rec.data.data());
      ++records;
    }
  }
  // Per record, not per file.
  state.counters["ns_per_record"] =
      benchmark::Counter(static_cast<double>(records), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ReadCapture)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  for (const auto* f : {&write_frame(), &ack_frame()}) {
    const std::string ours = metaroce::apps::frame_to_json(1, *f, 1, true).json;
    const std::string theirs = nlohmann_line(1, *f);
    if (ours != theirs) {
      std::fprintf(stderr, "metaroce-bench-decode: the two writers disagree:\n  %s\n  %s\n", ours.c_str(),
                   theirs.c_str());
      return 1;
    }
  }
  std::vector<char*> args = metaroce::bench::with_default_repetitions(argc, argv);
  int args_count = static_cast<int>(args.size());
  benchmark::Initialize(&args_count, args.data());
  metaroce::bench::CaptureReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (capture_written) std::remove(capture_path().c_str());
  const double read_ns = reporter.ns("BM_ReadCapture") * 1e6 / capture_frames;  // ms per file -> ns per record
  metaroce::apps::JsonLine j;
  j.add("bench", "decode");
  j.add("line_write_json_line_ns", reporter.ns("BM_LineWriteJsonLine"));
  j.add("line_write_nlohmann_ns", reporter.ns("BM_LineWriteNlohmann"));
  j.add("line_ack_json_line_ns", reporter.ns("BM_LineAckJsonLine"));
  j.add("line_ack_nlohmann_ns", reporter.ns("BM_LineAckNlohmann"));
  j.add("read_record_ns", read_ns);
  std::cout << std::move(j).finish() << std::endl;  // after the reporter's std::cout lines
  return 0;
}
