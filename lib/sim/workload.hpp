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

// Flow-completion-time slowdown of each transfer: its FCT over the ideal,
// bytes at `rate_bps` plus `base_rtt_ns`. Percentile p (0..100) of a sample,
// nearest rank; 0 for an empty one.
[[nodiscard]] double percentile(std::vector<double> values, double p);

}  // namespace metaroce::sim
