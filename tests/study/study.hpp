// Fabric-scale studies: a collective job on a leaf-spine or fat-tree
// sim::Fabric, every host a host::SimEndpoint (the engine's transport core)
// with one queue pair per pair of hosts that exchange data (used both
// ways), each transfer one RDMA WRITE. Run by `tools/study NAME` (study_main.cpp) and,
// in short forms, by the meson test suite (test_study.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/fabric_network.hpp"
#include "sim/fabric_topology.hpp"
#include "sim/workload.hpp"

namespace metaroce::study {

enum class Topology { leaf_spine, fat_tree };

// One row of a study: the transport and the fabric's flow control.
struct Variant {
  std::string mode = "metaroce";  // metaroce | rocev2
  std::string cc = "metaroce";    // cc library name (metaroce, dcqcn, fixed)
  bool pfc = false;               // PFC at every switch (lossless priority 3)
  double loss = 0.0;              // every host's link toward its switch drops this share of frames
  bool receive_share = true;      // metaroce: each host's receive share (cc::FairShare) hints its senders
};

// A leaf-spine uplink that fails (both ways) at `at_ns`; the switches
// reroute `reroute_after_ns` later; repaired at `repair_at_ns` (0: never).
struct LinkFailure {
  std::uint32_t leaf = 0;
  std::uint32_t spine = 0;
  std::uint64_t at_ns = 0;
  std::uint64_t reroute_after_ns = 0;
  std::uint64_t repair_at_ns = 0;
};

// A background load of random flows over every host besides the job
// (sim::background_flows): none while `load` is 0.
struct Background {
  double load = 0;                // of each host's link rate
  sim::FlowSizeCdf sizes;
  std::string sizes_name;         // the distribution's name or file
  std::uint64_t duration_ns = 0;  // flows start from time 0 until then
};

// The CDF named `name`: a file of tests/study/flow-sizes (web-search,
// data-mining), or a path to a CDF file (one with a '/' or a '.').
// Throws std::invalid_argument saying what is known.
[[nodiscard]] sim::FlowSizeCdf flow_sizes(const std::string& name);

struct StudySpec {
  std::string name;
  Topology topology = Topology::leaf_spine;
  sim::LeafSpineConfig leaf_spine{};
  sim::FatTreeConfig fat_tree{};
  std::uint64_t host_rate_bps = 100'000'000'000;
  std::uint64_t link_delay_ns = 1'000;
  std::uint64_t ecn_threshold_bytes = 100'000;  // step marking at every switch egress
  std::uint64_t buffer_bytes = 2'000'000;       // per egress port, lossy priorities
  std::uint64_t pfc_xoff_bytes = 200'000;
  std::uint64_t pfc_xon_bytes = 100'000;
  std::uint16_t metaroce_paths = 4;
  // A host hands its NIC at most this many frames per transmit turn and is
  // not polled while `nic_ring_frames` wait there (sim::Fabric::set_nic_ring):
  // unsent packets stay in the transport, not as copies in the fabric.
  std::uint32_t host_tx_budget_frames = 64;
  std::uint32_t nic_ring_frames = 128;
  std::uint32_t mtu = 4096;
  std::uint64_t seed = 1;
  std::uint64_t time_limit_ns = 1'000'000'000;  // virtual
  double wall_limit_s = 0;                       // stop after this much real time (0: none): completed = false
  bool progress = false;                         // a line on stderr every 10 s of real time
  std::vector<LinkFailure> failures;  // leaf-spine only
  // The job over hosts 0..n-1 (none: no job, only the background).
  std::function<sim::CollectiveJob(std::uint32_t hosts)> job;
  Background background;
};

// The background flows of one size class: flow-completion-time slowdowns
// of those that finished (FCT over bytes at the host rate plus the base
// RTT of their path).
struct SizeBin {
  std::uint64_t max_bytes = 0;  // sizes in (previous bin's max, max]; 0: no bound
  std::uint64_t flows = 0;
  std::uint64_t done = 0;
  double p50_slowdown = 0, p99_slowdown = 0;
};

struct StudyResult {
  Variant variant;
  bool completed = false;
  std::uint64_t completion_ns = 0;             // job: last transfer finished (or the limit)
  std::vector<std::uint64_t> step_end_ns;      // per step: its last transfer finished
  double p50_fct_slowdown = 0, p99_fct_slowdown = 0;
  double goodput_gbps = 0;                     // bytes placed * 8 / completion time (or time reached), all hosts
  std::uint64_t job_bytes = 0;                 // what the job asks to move
  std::uint64_t bytes_placed = 0;              // payload written at the receivers
  std::uint64_t retransmitted_packets = 0;
  std::uint64_t rto_timeouts = 0;
  std::uint64_t transfers = 0, transfers_done = 0;
  std::uint64_t failed_completions = 0;        // WRITEs that completed in error (retry exceeded, flushed)
  std::uint64_t connections_in_error = 0;      // connection ends not READY at the end
  std::uint64_t hosts = 0;
  std::uint64_t connections = 0;               // connection ends
  std::uint64_t connection_bytes = 0;          // Connection::memory_bytes, all ends
  sim::FabricPortCounters ports{};             // summed over the fabric
  sim::FabricCounters fabric{};
  double wall_s = 0;
  double setup_s = 0;                          // building hosts, connections and the fabric
  // The background load (StudySpec::background): flows, those finished,
  // their bytes (placed on top of the job's), slowdowns overall and by size.
  std::uint64_t background_flows = 0, background_done = 0, background_bytes = 0;
  double background_p50_slowdown = 0, background_p99_slowdown = 0;
  std::vector<SizeBin> background_bins;
};

[[nodiscard]] StudyResult run(const StudySpec& spec, const Variant& variant);

// The named studies; `short_form` gives the quick version the tests run.
[[nodiscard]] StudySpec allreduce_128(bool short_form);
// k and bytes per peer may be overridden (nonzero) to measure how the cost scales.
[[nodiscard]] StudySpec alltoall_1024(bool short_form, std::uint32_t k = 0, std::uint64_t bytes_per_peer = 0);
// allreduce-128 with leaf 0's link to spine 0 failing mid-job.
[[nodiscard]] StudySpec link_failure(bool short_form);
// No job: the web-search background load at 50% of every host's link on the
// 128-host leaf-spine (short: 16 hosts), flows starting for 5 ms (short: 1 ms).
[[nodiscard]] StudySpec background_128(bool short_form);
[[nodiscard]] std::vector<Variant> background_variants();
[[nodiscard]] std::vector<Variant> allreduce_variants();
[[nodiscard]] std::vector<Variant> link_failure_variants();
[[nodiscard]] std::vector<Variant> alltoall_variants();

// Peak resident set of this process, MB (VmHWM).
[[nodiscard]] double peak_rss_mb();

}  // namespace metaroce::study
