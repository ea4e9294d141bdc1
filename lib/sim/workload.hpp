// AI training traffic as collective jobs: a job is a sequence of steps, each
// a set of transfers (source host, destination host, bytes). A host starts
// its transfers of step s once every transfer of step s - 1 it takes part in
// (as source or destination) has finished, as a ring all-reduce's rank
// forwards a chunk only after it has received the previous one. Transport
// independent: a study maps transfers onto connections (tests/study).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace metaroce::sim {

struct Transfer {
  std::uint32_t src = 0;  // host indexes
  std::uint32_t dst = 0;
  std::uint64_t bytes = 0;
};

struct CollectiveJob {
  std::string name;
  std::vector<std::vector<Transfer>> steps;

  [[nodiscard]] std::uint64_t total_bytes() const noexcept;
  [[nodiscard]] std::size_t transfer_count() const noexcept;
};

// Ring all-reduce of `bytes` per rank over `hosts` (n ranks): 2(n - 1)
// steps (reduce-scatter, then all-gather), in each rank r sends bytes / n
// (rounded up) to rank r + 1. Throws std::invalid_argument below 2 ranks.
CollectiveJob ring_allreduce(std::span<const std::uint32_t> hosts, std::uint64_t bytes);

// All-to-all within each group, in one step: every member sends
// `bytes_per_peer` to every other member (expert-parallel dispatch).
CollectiveJob all_to_all(const std::vector<std::vector<std::uint32_t>>& groups, std::uint64_t bytes_per_peer);

// `rounds` steps in which every sender sends `bytes` to `receiver`
// (parameter-server style incast).
CollectiveJob incast(std::span<const std::uint32_t> senders, std::uint32_t receiver, std::uint64_t bytes,
                     std::uint32_t rounds);

// Runs a job's dependencies: which transfers may start, given which finished.
class JobTracker {
 public:
  JobTracker(const CollectiveJob& job, std::uint32_t hosts);

  // Transfer ids are (step, index within step) flattened in step order.
  [[nodiscard]] std::size_t transfer_count() const noexcept { return transfers_.size(); }
  [[nodiscard]] const Transfer& transfer(std::size_t id) const { return transfers_[id].t; }
  [[nodiscard]] std::uint32_t step_of(std::size_t id) const { return transfers_[id].step; }

  // Transfers that became ready (appended to `out`): at construction, the
  // first step's; then those that finish(...) releases.
  void initial(std::vector<std::size_t>& out) const;
  void start(std::size_t id, std::uint64_t now);
  // Marks `id` finished at `now` and appends the transfers it releases.
  // Throws std::logic_error when `id` was not started or already finished.
  void finish(std::size_t id, std::uint64_t now, std::vector<std::size_t>& released);

  [[nodiscard]] bool done() const noexcept { return finished_ == transfers_.size(); }
  [[nodiscard]] std::size_t finished() const noexcept { return finished_; }
  [[nodiscard]] std::uint64_t start_time(std::size_t id) const { return transfers_[id].start; }
  [[nodiscard]] std::uint64_t end_time(std::size_t id) const { return transfers_[id].end; }
  // Time the last transfer of each step finished (0 for a step not done).
  [[nodiscard]] const std::vector<std::uint64_t>& step_end() const noexcept { return step_end_; }

 private:
  struct State {
    Transfer t;
    std::uint32_t step = 0;
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    bool started = false;
    bool finished = false;
  };
  void advance(std::uint32_t host, std::vector<std::size_t>& out);

  std::uint32_t hosts_;
  std::vector<State> transfers_;
  std::vector<std::size_t> step_first_;            // first transfer id of each step (+ end)
  std::vector<std::uint32_t> pending_;             // [step * hosts + host]: unfinished transfers it takes part in
  std::vector<std::vector<std::size_t>> by_src_;   // [step * hosts + host]: transfer ids it sends
  std::vector<std::uint64_t> step_end_;
  std::vector<std::uint32_t> step_left_;
  std::vector<std::uint32_t> frontier_;            // per host: first step it still takes part in
  std::size_t finished_ = 0;
};

// A flow-size distribution given as points of its CDF: sizes in bytes,
// ascending, each with the probability that a flow is at most that size;
// the last probability is 1. Between two points the CDF is linear (sizes
// are drawn by inverting it), so a step in probability at one size is a
// point mass there, as in the CDF files of the HPCC and pFabric simulators.
class FlowSizeCdf {
 public:
  struct Point {
    double bytes = 0;
    double probability = 0;
  };
  FlowSizeCdf() = default;
  // Throws std::invalid_argument, naming the first bad point: fewer than
  // two, sizes that fall, probabilities that fall or leave [0, 1], a last
  // probability other than 1, a size below 1 byte where the probability
  // is above 0.
  explicit FlowSizeCdf(std::vector<Point> points);
  // The text of a CDF file: one point per line, "SIZE PROBABILITY" (more
  // columns are ignored); blank lines and lines from '#' on are skipped.
  // PROBABILITY is in [0, 1], or in percent when the last one is 100.
  // SIZE is in bytes, or in units of `unit_bytes` (the pFabric files count
  // 1460-byte packets). Errors name `source` and the line.
  static FlowSizeCdf parse(std::string_view text, const std::string& source, double unit_bytes = 1);
  // The file at `path`, as parse(); a file that cannot be read throws too.
  static FlowSizeCdf load(const std::string& path, double unit_bytes = 1);

  // The size whose CDF is u (0 <= u < 1), at least 1 byte.
  [[nodiscard]] std::uint64_t sample(double u) const noexcept;
  // The mean of the distribution (bytes).
  [[nodiscard]] double mean() const noexcept;
  [[nodiscard]] const std::vector<Point>& points() const noexcept { return points_; }
  [[nodiscard]] bool empty() const noexcept { return points_.empty(); }

 private:
  std::vector<Point> points_;
};

// One flow of a background load: `bytes` from `src` to `dst`, starting at
// `start_ns`.
struct BackgroundFlow {
  std::uint32_t src = 0;
  std::uint32_t dst = 0;
  std::uint64_t bytes = 0;
  std::uint64_t start_ns = 0;
};

// A background load of random flows, as the HPCC and pFabric simulators
// make it: every host of `hosts` starts flows at Poisson arrivals whose
// rate makes it offer `load` of `rate_bps` (load * rate / (8 * mean size)
// flows per second), each to a host drawn uniformly from the others, with a
// size drawn from `sizes`, from time 0 until `duration_ns`. Sorted by start
// time (then source). Deterministic for a seed (mt19937_64, its draws turned
// into uniforms and exponentials here, not by the standard library's
// distributions, whose output differs between libraries). Throws
// std::invalid_argument for fewer than 2 hosts, an empty distribution, or
// a load outside (0, 1].
[[nodiscard]] std::vector<BackgroundFlow> background_flows(std::span<const std::uint32_t> hosts,
                                                           const FlowSizeCdf& sizes, double load,
                                                           std::uint64_t rate_bps, std::uint64_t duration_ns,
                                                           std::uint64_t seed);

// Flow-completion-time slowdown of each transfer: its FCT over the ideal,
// bytes at `rate_bps` plus `base_rtt_ns`. Percentile p (0..100) of a sample,
// nearest rank; 0 for an empty one.
[[nodiscard]] double percentile(std::vector<double> values, double p);

}  // namespace metaroce::sim
