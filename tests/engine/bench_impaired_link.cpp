// What one frame costs an ImpairedLink (rx burst, the fabric model, tx
// burst), by spec and frame size: TSC time inside forward_once() per frame,
// the link alone between two net_ring pairs, bursts of 32. Best of 3 rounds
// of 640,000 frames, so other work on the machine shows up as noise in the
// worse rounds only. The figures are in doc/ENGINE.md ("Inline fabric and
// loopback"). Run build/tests/engine/bench-impaired-link.
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/eal.hpp"
#include "engine/impaired_link.hpp"
#include "engine/port.hpp"
#include "fabric/spec.hpp"

namespace {

using namespace metaroce;

// Ethernet | IPv4 (ECT(0)) | UDP to 4791 | zeros: enough for the model's peek.
std::vector<std::uint8_t> roce_like_frame(std::size_t len) {
  std::vector<std::uint8_t> f(len, 0);
  f[12] = 0x08;
  f[14] = 0x45;
  f[15] = 2;
  f[16] = static_cast<std::uint8_t>((len - 14) >> 8);
  f[17] = static_cast<std::uint8_t>(len - 14);
  f[22] = 64;
  f[23] = 17;
  f[36] = 4791 >> 8;
  f[37] = 4791 & 0xff;
  return f;
}

}  // namespace

int main() {
  std::string error;
  engine::EalOptions eal;
  eal.program_name = "bench-impaired-link";
  eal.log_level = "error";
  eal.hugepages = engine::HugepagePolicy::no;
  if (!engine::start_eal(eal, error)) {
    std::fprintf(stderr, "bench-impaired-link: %s\n", error.c_str());
    return 1;
  }
  engine::PortSetup setup;
  setup.mbufs = 4096;
  std::unique_ptr<engine::Port> src, in, out, dst;
  if (!engine::Port::create_ring_pair("bsrc", "bin", setup, src, in, error) ||
      !engine::Port::create_ring_pair("bout", "bdst", setup, out, dst, error)) {
    std::fprintf(stderr, "bench-impaired-link: %s\n", error.c_str());
    return 1;
  }
  for (engine::Port* p : {src.get(), in.get(), out.get(), dst.get()}) p->start(error);
  rte_mempool* pool = rte_pktmbuf_pool_create("bench_gen", 8192, 256, 0, 9400, SOCKET_ID_ANY);
  if (pool == nullptr) {
    std::fprintf(stderr, "bench-impaired-link: no mempool: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  const double ns_per_cycle = 1e9 / static_cast<double>(rte_get_tsc_hz());
  std::printf("%-36s %6s %12s\n", "spec", "bytes", "ns/frame");
  for (const char* spec : {"delay 10us", "loss 1% rate 100gbit", "delay 10us duplicate 5% corrupt 1%"}) {
    for (const std::size_t len : {256u, 1024u, 4158u}) {
      const std::vector<std::uint8_t> frame = roce_like_frame(len);
      double best = 1e30;
      for (int round = 0; round < 3; ++round) {
        engine::ImpairedLinkConfig c;
        c.name = "bench";
        c.from_port = in->id();
        c.to_port = out->id();
        c.fabric = fabric::parse_fabric_spec_or_throw(spec);
        c.mbufs = 4096;
        const std::unique_ptr<engine::ImpairedLink> link = engine::ImpairedLink::create(c, error);
        if (!link) {
          std::fprintf(stderr, "bench-impaired-link: %s\n", error.c_str());
          return 1;
        }
        constexpr int bursts = 20'000;
        std::uint64_t cycles = 0, now = 0;
        for (int b = 0; b < bursts; ++b) {
          std::array<rte_mbuf*, 32> burst{};
          if (rte_pktmbuf_alloc_bulk(pool, burst.data(), burst.size()) != 0) return 1;
          for (rte_mbuf* m : burst) std::memcpy(rte_pktmbuf_append(m, static_cast<std::uint16_t>(len)), frame.data(), len);
          const std::uint16_t sent = rte_eth_tx_burst(src->id(), 0, burst.data(), burst.size());
          for (std::size_t i = sent; i < burst.size(); ++i) rte_pktmbuf_free(burst[i]);
          now += 20'000;  // 20 us a burst: each one is due by the next turn
          const std::uint64_t start = rte_rdtsc();
          link->forward_once(now);
          link->forward_once(now + 20'000);
          cycles += rte_rdtsc() - start;
          std::array<rte_mbuf*, 64> got{};
          while (const std::uint16_t n = rte_eth_rx_burst(dst->id(), 0, got.data(), got.size()))
            for (std::uint16_t i = 0; i < n; ++i) rte_pktmbuf_free(got[i]);
        }
        best = std::min(best, static_cast<double>(cycles) * ns_per_cycle / (bursts * 32.0));
      }
      std::printf("%-36s %6zu %12.1f\n", spec, len, best);
    }
  }
  for (engine::Port* p : {src.get(), in.get(), out.get(), dst.get()}) p->drain_rx();
  return 0;
}
