// fuzz-neighbours: host::Neighbours::receive on arbitrary bytes.
//
// The input is copied into a heap buffer of exactly its size so that
// AddressSanitizer reports any read past the frame. The first byte picks
// how the input is framed (as is, or behind an ARP or an IPv6/ICMPv6
// header, so that most inputs reach the deeper checks). Every frame must
// be counted somewhere (a drop by reason, an answer, a refusal), and every
// frame the cache sends must parse back as ARP or neighbour discovery from
// our MAC. Any violation aborts, which libFuzzer reports as a crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "host/neighbours.hpp"
#include "wire/byte_order.hpp"
#include "wire/neighbour.hpp"

namespace {

using namespace metaroce;

void require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz-neighbours: invariant violated: %s\n", what);
  std::abort();
}

// Everything the cache counts for a received frame (what it sends, and
// the resolutions it starts or gives up, are not about the frame).
std::uint64_t outcomes(const host::NeighbourCounters& c) {
  std::uint64_t n = 0;
  c.visit([&](const std::string& name, std::uint64_t v) {
    if (name.find("_sent") == std::string::npos && name.rfind("resolutions", 0) != 0 && name != "entries_stale")
      n += v;
  });
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  host::NeighbourConfig config;
  config.local_mac = {2, 0, 0, 0, 0, 1};
  config.ipv4_present = true;
  config.local_ipv4 = 0x0a000001;
  config.ipv6_present = true;
  config.local_ipv6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  config.max_entries = 4;
  host::NeighbourCounters counters;
  host::Neighbours n(config, counters);
  n.resolve(0, wire::IpAddress::v4(0x0a000002));

  std::vector<std::uint8_t> bytes;
  const std::uint8_t mode = data[0] % 3;
  ++data;
  --size;
  if (mode == 1) {  // behind an Ethernet header of ARP
    const std::uint8_t eth[14] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 9, 0x08, 0x06};
    bytes.assign(eth, eth + 14);
  } else if (mode == 2) {  // behind Ethernet and IPv6 headers of ICMPv6, hop limit 255
    std::uint8_t head[54] = {0x33, 0x33, 0xff, 0, 0, 1, 2, 0, 0, 0, 0, 9, 0x86, 0xdd, 0x60};
    wire::store_be16(head + 18, static_cast<std::uint16_t>(size));
    head[20] = wire::ip_protocol_icmpv6;
    head[21] = 255;
    head[22] = 0xfe;  // from fe80::9
    head[23] = 0x80;
    head[37] = 9;
    head[38] = 0xff;  // to ff02::1:ff00:1, our solicited-node group
    head[39] = 0x02;
    head[49] = 1;
    head[50] = 0xff;
    head[53] = 1;
    bytes.assign(head, head + 54);
  }
  bytes.insert(bytes.end(), data, data + size);
  auto frame = std::make_unique<std::uint8_t[]>(bytes.size());
  if (!bytes.empty()) std::memcpy(frame.get(), bytes.data(), bytes.size());

  const std::uint64_t before = outcomes(counters);
  n.receive(5, wire::ByteSpan(frame.get(), bytes.size()));
  const bool kind = wire::classify(bytes) != wire::FrameKind::other;
  require(!kind || outcomes(counters) > before, "a neighbour frame left no counter");

  std::vector<std::vector<std::uint8_t>> out;
  for (std::uint64_t t : {std::uint64_t{5}, std::uint64_t{2'000'000'000}, std::uint64_t{10'000'000'000}})
    n.poll(t, out);
  for (const auto& f : out) {
    wire::NeighbourFrame parsed;
    require(wire::parse_neighbour_frame(f, parsed) == wire::NeighbourParseError::ok, "a frame we send must parse");
    require(parsed.eth.src == config.local_mac, "a frame we send comes from our MAC");
  }
  return 0;
}
