// The studies' short forms, with exact checks: every byte of the job (and
// of the background flows) is placed, counters add up (pauses sent = pauses received, frames lost on the
// wire = the lossy runs' only drops), PFC drops nothing, and the runs are
// deterministic (fixed seeds: exact completion times).
#include <gtest/gtest.h>

#include "study.hpp"

namespace metaroce::study {
namespace {

void expect_every_byte(const StudyResult& r, bool failures = false) {
  EXPECT_TRUE(r.completed);
  EXPECT_EQ(r.failed_completions, 0u);
  EXPECT_EQ(r.connections_in_error, 0u);
  EXPECT_EQ(r.transfers_done, r.transfers);
  EXPECT_EQ(r.background_done, r.background_flows);
  EXPECT_EQ(r.bytes_placed, r.job_bytes + r.background_bytes);
  EXPECT_EQ(r.fabric.unroutable, 0u);
  EXPECT_EQ(r.ports.pauses_sent, r.ports.pauses_received);
  EXPECT_EQ(r.ports.resumes_sent, r.ports.resumes_received);
  if (!failures) {
    EXPECT_EQ(r.ports.dropped_link_down, 0u);
  }
}

// 16 hosts on 4 leaves and 2 spines, ring all-reduce of 1 MiB per rank:
// 30 steps of 16 transfers of 64 KiB.
TEST(Study, AllreduceShortFormDeliversEveryByteInEveryMode) {
  const StudySpec spec = allreduce_128(true);
  const std::vector<Variant> variants = allreduce_variants();
  ASSERT_EQ(variants.size(), 8u);
  std::vector<std::uint64_t> completion;
  for (const Variant& v : variants) {
    const StudyResult r = run(spec, v);
    SCOPED_TRACE(v.mode + " " + v.cc + (v.pfc ? " pfc" : "") + (v.receive_share ? " share" : "") + " loss " +
                 std::to_string(v.loss));
    expect_every_byte(r);
    EXPECT_EQ(r.job_bytes, 30u * 16u * 65536u);
    EXPECT_EQ(r.step_end_ns.size(), 30u);
    EXPECT_EQ(r.connections, 32u);
    EXPECT_EQ(r.ports.dropped_queue_full, 0u);
    if (v.loss == 0.0) {
      EXPECT_EQ(r.ports.dropped_loss, 0u);
      EXPECT_EQ(r.retransmitted_packets, 0u);
    } else {
      EXPECT_GT(r.ports.dropped_loss, 0u);
      EXPECT_GT(r.retransmitted_packets, 0u);
    }
    completion.push_back(r.completion_ns);
  }
  // Exact, deterministic virtual times (ns). A ring has no incast: the
  // rocev2 runs with and without PFC see no pause and are identical.
  EXPECT_EQ(completion, (std::vector<std::uint64_t>{486'495, 484'804, 497'725, 497'725,
                                                    1'009'974, 1'123'030, 992'068, 992'068}));
  // metaroce's receive share costs at most 1% of the completion time, with
  // and without loss (it cost 34% at 0% loss and stalled at 1%, each
  // sender alone at its receiver told its past use: doc/SIMULATOR.md).
  EXPECT_LE(completion[0] * 100, completion[1] * 101);
  EXPECT_LE(completion[4] * 100, completion[5] * 101);
}

// k=4 fat-tree, 4 groups of 4 hosts (one per pod), 64 KiB to each peer.
TEST(Study, AlltoallShortFormDeliversEveryByte) {
  const StudySpec spec = alltoall_1024(true);
  for (const Variant& v : alltoall_variants()) {
    const StudyResult r = run(spec, v);
    SCOPED_TRACE(v.mode);
    expect_every_byte(r);
    EXPECT_EQ(r.job_bytes, 16u * 3u * 65536u);
    EXPECT_EQ(r.connections, 16u * 3u);  // one queue pair per pair of peers, both ways
    EXPECT_EQ(r.ports.dropped_loss, 0u);
    if (v.pfc) {
      EXPECT_EQ(r.ports.dropped_queue_full, 0u);
    }
  }
}

// An incast on the leaf-spine with PFC: the receiver's port backs up, the
// leaf pauses its senders, and every pause sent is received.
TEST(Study, IncastWithPfcPausesAndCountersAddUp) {
  StudySpec spec = allreduce_128(true);
  spec.pfc_xoff_bytes = 20'000;
  spec.pfc_xon_bytes = 10'000;
  spec.job = [](std::uint32_t) {
    const std::vector<std::uint32_t> senders = {1, 2, 3, 4, 5, 6, 7, 8};
    return sim::incast(senders, 0, 256 * 1024, 2);
  };
  const StudyResult pfc = run(spec, Variant{"rocev2", "fixed", true, 0.0, false});
  expect_every_byte(pfc);
  EXPECT_EQ(pfc.job_bytes, 2u * 8u * 256u * 1024u);
  EXPECT_GT(pfc.ports.pauses_sent, 0u);
  EXPECT_GT(pfc.ports.paused_ns, 0u);
  EXPECT_EQ(pfc.ports.dropped_queue_full, 0u);
  EXPECT_EQ(pfc.step_end_ns.size(), 2u);
  EXPECT_EQ(pfc.ports.pauses_sent, 162u);
  // 4 MiB into one 100 Gb/s port: 335.5 us of payload, plus headers.
  EXPECT_EQ(pfc.completion_ns, 363'047u);
}

// The short all-reduce with leaf 0's link to spine 0 failing at 100 us and
// the routes converging 200 us later: frames sent into the dead link are
// counted, every byte still arrives, in every mode.
TEST(Study, LinkFailureShortFormRecoversEveryByte) {
  const StudySpec spec = link_failure(true);
  std::vector<std::uint64_t> completion;
  for (const Variant& v : link_failure_variants()) {
    const StudyResult r = run(spec, v);
    SCOPED_TRACE(v.mode + " " + v.cc + (v.pfc ? " pfc" : "") + (v.receive_share ? " share" : ""));
    expect_every_byte(r, true);
    EXPECT_GT(r.ports.dropped_link_down, 0u);
    EXPECT_EQ(r.fabric.reroutes, 1u);
    EXPECT_GT(r.retransmitted_packets, 0u);
    completion.push_back(r.completion_ns);
  }
  EXPECT_EQ(completion, (std::vector<std::uint64_t>{722'756, 714'587, 859'216, 859'216}));
}

// The same failure with routing converging only after 2 ms, past the
// point where a connection that hears no ACK runs out of retries (about
// 0.8 ms after the failure). The dead link is the ACK route of some
// connections toward leaf 0; their ACKs spread over their paths' routes,
// so they lose only some ACKs and no connection fails.
TEST(Study, LinkFailureShortFormBeforeRoutesConvergeFailsNoConnection) {
  StudySpec spec = link_failure(true);
  spec.failures.front().reroute_after_ns = 2'000'000;
  const StudyResult r = run(spec, Variant{"metaroce", "metaroce", false, 0.0, false});
  expect_every_byte(r, true);
  EXPECT_GT(r.ports.dropped_link_down, 0u);
  EXPECT_EQ(r.fabric.reroutes, 0u);  // done before the routes converge
  EXPECT_EQ(r.completion_ns, 863'348u);
}

// The web-search background load at 50% on 16 hosts for 1 ms: every flow
// of the 76 finishes in every mode, their bytes all placed, and the size
// bins hold every flow once.
TEST(Study, BackgroundShortFormFinishesEveryFlow) {
  const StudySpec spec = background_128(true);
  std::vector<std::uint64_t> completion;
  for (const Variant& v : background_variants()) {
    const StudyResult r = run(spec, v);
    SCOPED_TRACE(v.mode + " " + v.cc + (v.pfc ? " pfc" : ""));
    expect_every_byte(r);
    EXPECT_EQ(r.transfers, 0u);
    EXPECT_EQ(r.background_flows, 76u);
    EXPECT_EQ(r.background_done, 76u);
    EXPECT_EQ(r.background_bytes, 90'282'910u);
    EXPECT_EQ(r.bytes_placed, r.background_bytes);
    EXPECT_EQ(r.ports.dropped_queue_full, 0u);
    EXPECT_EQ(r.ports.dropped_loss, 0u);
    ASSERT_EQ(r.background_bins.size(), 5u);
    std::vector<std::uint64_t> flows, done;
    for (const SizeBin& b : r.background_bins) {
      flows.push_back(b.flows);
      done.push_back(b.done);
    }
    EXPECT_EQ(flows, (std::vector<std::uint64_t>{9, 28, 16, 23, 0}));
    EXPECT_EQ(done, flows);
    EXPECT_GE(r.background_p50_slowdown, 1.0);
    EXPECT_GE(r.background_p99_slowdown, r.background_p50_slowdown);
    completion.push_back(r.completion_ns);
  }
  EXPECT_EQ(completion, (std::vector<std::uint64_t>{1'707'012, 9'622'924, 12'263'058}));
}

// A background load beside a job (web-search at 30% for 0.5 ms: 22 flows):
// the job's bytes and the flows' are all placed.
TEST(Study, BackgroundBesideAJobPlacesBoth) {
  StudySpec spec = allreduce_128(true);
  spec.background.load = 0.3;
  spec.background.sizes_name = "web-search";
  spec.background.sizes = flow_sizes("web-search");
  spec.background.duration_ns = 500'000;
  const StudyResult r = run(spec, Variant{"metaroce", "metaroce", false, 0.0, true});
  expect_every_byte(r);
  EXPECT_EQ(r.background_flows, 22u);
  EXPECT_EQ(r.job_bytes, 30u * 16u * 65536u);
}

// The shipped distributions, and a name that is neither one nor a file.
TEST(Study, FlowSizeDistributionsByNameOrFile) {
  const sim::FlowSizeCdf web = flow_sizes("web-search");
  EXPECT_EQ(web.points().size(), 12u);
  EXPECT_NEAR(web.mean(), 1'665'831, 1);
  const sim::FlowSizeCdf mining = flow_sizes("data-mining");
  EXPECT_EQ(mining.points().back().bytes, 666'667.0 * 1460);
  EXPECT_EQ(mining.sample(0.25), 1460u);  // half the flows are one packet
  try {
    (void)flow_sizes("hadoop");
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "study: no flow-size distribution named 'hadoop': use web-search, data-mining or the path of a CDF file");
  }
  EXPECT_THROW((void)flow_sizes("/nonexistent/sizes.cdf"), std::invalid_argument);
}

TEST(Study, RejectsAnUnknownModeOrCc) {
  const StudySpec spec = allreduce_128(true);
  EXPECT_THROW(static_cast<void>(run(spec, Variant{"iwarp", "metaroce", false, 0.0, false})), std::invalid_argument);
  EXPECT_THROW(static_cast<void>(run(spec, Variant{"rocev2", "bbr", false, 0.0, false})), std::invalid_argument);
}

}  // namespace
}  // namespace metaroce::study
