// How much one transmit frame costs the sender, payload copied vs attached
// in place, by payload size; and what a chained frame costs a receiver that
// must linearize it (net_ring hands chains over as they are; a NIC does not).
// Best of 5 rounds of 100,000 frames each, so other work on the machine
// shows up as noise in the worse rounds only. Used to pick
// engine::default_zero_copy_threshold (doc/ENGINE.md).
#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/eal.hpp"
#include "engine/mbuf_frames.hpp"
#include "transport/tx_batch.hpp"

namespace {

using metaroce::engine::TxMbufBuilder;

double best_ns_per_frame(TxMbufBuilder& builder, const metaroce::transport::TxBatch& batch, bool linearize,
                         double ns_per_cycle) {
  constexpr int rounds = 5;
  constexpr int frames = 100'000;
  std::vector<std::uint8_t> scratch;
  double best = 1e30;
  std::uint64_t sink = 0;
  for (int r = 0; r < rounds; ++r) {
    const std::uint64_t start = rte_rdtsc();
    for (int i = 0; i < frames; ++i) {
      rte_mbuf* m = nullptr;
      builder.build(batch, 0, m);
      if (linearize) {
        bool copied = false;
        sink += metaroce::engine::frame_bytes(m, scratch, copied)[20];
      }
      rte_pktmbuf_free(m);
    }
    best = std::min(best, double(rte_rdtsc() - start) * ns_per_cycle / frames);
  }
  if (sink == 42) std::puts("");  // keeps the reads
  return best;
}

}  // namespace

int main() {
  metaroce::engine::EalOptions eal;
  eal.program_name = "bench-zero-copy";
  eal.hugepages = metaroce::engine::HugepagePolicy::no;
  eal.log_level = "error";
  std::string error;
  if (!metaroce::engine::start_eal(eal, error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  const double ns_per_cycle = 1e9 / double(rte_get_tsc_hz());
  metaroce::engine::TxMbufSetup copy_setup;
  copy_setup.name = "bcopy";
  copy_setup.mbufs = 4096;
  copy_setup.zero_copy_threshold = metaroce::engine::zero_copy_never;
  metaroce::engine::TxMbufSetup attach_setup = copy_setup;
  attach_setup.name = "battach";
  attach_setup.zero_copy_threshold = 1;
  auto copier = TxMbufBuilder::create(copy_setup, error);
  auto attacher = TxMbufBuilder::create(attach_setup, error);
  if (!copier || !attacher) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  std::vector<std::uint8_t> payload(9000, 0x5a);
  std::printf("%8s %12s %12s %14s %16s\n", "payload", "copy ns", "attach ns", "attach+linearize", "attach pays (tx)");
  for (const std::size_t size : {64u, 256u, 512u, 1024u, 1536u, 2048u, 3072u, 4096u, 8192u}) {
    metaroce::transport::TxBatch batch;
    auto header = batch.header_space(70);
    std::fill(header.begin(), header.end(), std::uint8_t{0x11});
    const std::uint8_t trailer[4] = {1, 2, 3, 4};
    batch.commit(70, std::span<const std::uint8_t>(payload.data(), size), trailer);
    const double copy = best_ns_per_frame(*copier, batch, false, ns_per_cycle);
    const double attach = best_ns_per_frame(*attacher, batch, false, ns_per_cycle);
    const double attach_linear = best_ns_per_frame(*attacher, batch, true, ns_per_cycle);
    std::printf("%8zu %12.1f %12.1f %14.1f %16s\n", size, copy, attach, attach_linear, attach < copy ? "yes" : "no");
  }
  return 0;
}
