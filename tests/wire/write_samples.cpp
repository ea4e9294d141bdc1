// Writes a pcap with one frame of every opcode we build, in both modes, over
// IPv4 and IPv6, with and without a VLAN tag: the input of the tshark oracle
// (tests/oracles/check_tshark.py) and of the tools/run demonstration.
#include <cstdio>
#include <string>
#include <vector>

#include "common/pcap_file.hpp"
#include "wire_samples.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.pcap\n", argv[0]);
    return 2;
  }
  metaroce::apps::PcapWriter writer;
  std::string error;
  if (!writer.open(argv[1], error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 2;
  }
  const std::vector<std::vector<std::uint8_t>> frames = metaroce::test::sample_frames();
  std::uint64_t ts = 1'700'000'000'000'000'000ull;
  for (const auto& f : frames) {
    if (!writer.write(f, ts)) {
      std::fprintf(stderr, "%s: write failed\n", argv[1]);
      return 2;
    }
    ts += 1000;
  }
  if (!writer.close()) {
    std::fprintf(stderr, "%s: write failed\n", argv[1]);
    return 2;
  }
  std::printf("wrote %zu frames to %s\n", frames.size(), argv[1]);
  return 0;
}
