#include "sim/workload.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace metaroce::sim {

std::uint64_t CollectiveJob::total_bytes() const noexcept {
  std::uint64_t total = 0;
  for (const auto& step : steps) {
    for (const Transfer& t : step) total += t.bytes;
  }
  return total;
}

std::size_t CollectiveJob::transfer_count() const noexcept {
  std::size_t n = 0;
  for (const auto& step : steps) n += step.size();
  return n;
}

CollectiveJob ring_allreduce(std::span<const std::uint32_t> hosts, std::uint64_t bytes) {
  const std::size_t n = hosts.size();
  if (n < 2) throw std::invalid_argument("sim::ring_allreduce: a ring needs at least 2 ranks");
  CollectiveJob job;
  job.name = "ring-allreduce";
  const std::uint64_t chunk = (bytes + n - 1) / n;
  job.steps.resize(2 * (n - 1));
  for (auto& step : job.steps) {
    for (std::size_t r = 0; r < n; ++r) step.push_back(Transfer{hosts[r], hosts[(r + 1) % n], chunk});
  }
  return job;
}

CollectiveJob all_to_all(const std::vector<std::vector<std::uint32_t>>& groups, std::uint64_t bytes_per_peer) {
  CollectiveJob job;
  job.name = "all-to-all";
  job.steps.resize(1);
  for (const auto& group : groups) {
    for (std::uint32_t src : group) {
      for (std::uint32_t dst : group) {
        if (src != dst) job.steps[0].push_back(Transfer{src, dst, bytes_per_peer});
      }
    }
  }
  return job;
}

CollectiveJob incast(std::span<const std::uint32_t> senders, std::uint32_t receiver, std::uint64_t bytes,
                     std::uint32_t rounds) {
  CollectiveJob job;
  job.name = "incast";
  job.steps.resize(rounds);
  for (auto& step : job.steps) {
    for (std::uint32_t s : senders) step.push_back(Transfer{s, receiver, bytes});
  }
  return job;
}

JobTracker::JobTracker(const CollectiveJob& job, std::uint32_t hosts) : hosts_(hosts) {
  const std::size_t steps = job.steps.size();
  pending_.assign(steps * hosts, 0);
  by_src_.resize(steps * hosts);
  step_end_.assign(steps, 0);
  step_left_.assign(steps, 0);
  for (std::size_t s = 0; s < steps; ++s) {
    step_first_.push_back(transfers_.size());
    for (const Transfer& t : job.steps[s]) {
      if (t.src >= hosts || t.dst >= hosts || t.src == t.dst)
        throw std::invalid_argument("sim::JobTracker: a transfer from host " + std::to_string(t.src) + " to " +
                                    std::to_string(t.dst) + " (of " + std::to_string(hosts) + " hosts)");
      by_src_[s * hosts + t.src].push_back(transfers_.size());
      ++pending_[s * hosts + t.src];
      ++pending_[s * hosts + t.dst];
      ++step_left_[s];
      transfers_.push_back(State{t, static_cast<std::uint32_t>(s)});
    }
  }
  step_first_.push_back(transfers_.size());
  frontier_.assign(hosts, 0);
  for (std::uint32_t h = 0; h < hosts; ++h) {
    while (frontier_[h] < steps && pending_[frontier_[h] * hosts + h] == 0) ++frontier_[h];
  }
}

void JobTracker::initial(std::vector<std::size_t>& out) const {
  // A host's transfers of step s are ready when no earlier step involves it.
  for (std::uint32_t h = 0; h < hosts_; ++h) {
    for (std::size_t s = 0; s <= frontier_[h] && s < step_end_.size(); ++s) {
      const auto& mine = by_src_[s * hosts_ + h];
      out.insert(out.end(), mine.begin(), mine.end());
    }
  }
  std::sort(out.begin(), out.end());
}

void JobTracker::start(std::size_t id, std::uint64_t now) {
  State& s = transfers_.at(id);
  s.started = true;
  s.start = now;
}

void JobTracker::advance(std::uint32_t host, std::vector<std::size_t>& out) {
  // The host's first step with unfinished transfers moves on; the steps it
  // passes (and the one it reaches) release their transfers from the host.
  const std::size_t steps = step_end_.size();
  std::uint32_t& f = frontier_[host];
  const std::uint32_t from = f;
  while (f < steps && pending_[f * hosts_ + host] == 0) ++f;
  for (std::size_t s = from + 1; s <= f && s < steps; ++s) {
    const auto& mine = by_src_[s * hosts_ + host];
    out.insert(out.end(), mine.begin(), mine.end());
  }
}

void JobTracker::finish(std::size_t id, std::uint64_t now, std::vector<std::size_t>& released) {
  State& s = transfers_.at(id);
  if (!s.started || s.finished)
    throw std::logic_error("sim::JobTracker::finish: transfer " + std::to_string(id) + " is not running");
  s.finished = true;
  s.end = now;
  ++finished_;
  step_end_[s.step] = std::max(step_end_[s.step], now);
  --step_left_[s.step];
  for (std::uint32_t h : {s.t.src, s.t.dst}) {
    if (--pending_[s.step * hosts_ + h] == 0 && frontier_[h] == s.step) advance(h, released);
  }
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  const std::size_t index = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

}  // namespace metaroce::sim
