#include "sim/workload.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
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

FlowSizeCdf::FlowSizeCdf(std::vector<Point> points) : points_(std::move(points)) {
  const auto bad = [](std::size_t i, const std::string& what) {
    throw std::invalid_argument("flow-size CDF: point " + std::to_string(i + 1) + ": " + what);
  };
  if (points_.size() < 2) throw std::invalid_argument("flow-size CDF: needs at least 2 points, has " +
                                                      std::to_string(points_.size()));
  for (std::size_t i = 0; i < points_.size(); ++i) {
    const Point& p = points_[i];
    if (!std::isfinite(p.bytes)) bad(i, "the size is not a finite number");
    if (!std::isfinite(p.probability) || p.probability < 0 || p.probability > 1)
      bad(i, "probability " + (std::ostringstream{} << p.probability).str() + " outside [0, 1]");
    if (p.bytes < 1 && p.probability > 0) bad(i, "a size below 1 byte with probability above 0");
    if (i > 0 && p.bytes < points_[i - 1].bytes) bad(i, "sizes must not fall");
    if (i > 0 && p.probability < points_[i - 1].probability) bad(i, "probabilities must not fall");
  }
  if (points_.back().probability != 1.0) bad(points_.size() - 1, "the last probability must be 1");
}

FlowSizeCdf FlowSizeCdf::parse(std::string_view text, const std::string& source, double unit_bytes) {
  std::vector<Point> points;
  std::size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const std::size_t end = text.find('\n');
    std::string line(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (const std::size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream in(line);
    std::string size_word, probability_word;
    if (!(in >> size_word)) continue;  // blank
    const auto number = [&](const std::string& word, const char* what) {
      double v = 0;
      const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
      if (ec != std::errc{} || ptr != word.data() + word.size() || !std::isfinite(v))
        throw std::invalid_argument(source + ":" + std::to_string(line_number) + ": " + what + " '" + word +
                                    "' is not a number");
      return v;
    };
    if (!(in >> probability_word))
      throw std::invalid_argument(source + ":" + std::to_string(line_number) +
                                  ": want SIZE PROBABILITY, found only '" + size_word + "'");
    points.push_back(Point{number(size_word, "size") * unit_bytes, number(probability_word, "probability")});
  }
  if (!points.empty() && points.back().probability == 100.0) {
    for (Point& p : points) p.probability /= 100.0;
  }
  try {
    return FlowSizeCdf(std::move(points));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }
}

FlowSizeCdf FlowSizeCdf::load(const std::string& path, double unit_bytes) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot read the flow-size CDF file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path, unit_bytes);
}

std::uint64_t FlowSizeCdf::sample(double u) const noexcept {
  if (points_.empty()) return 1;
  // The first point whose probability reaches u.
  const auto it = std::lower_bound(points_.begin(), points_.end(), u,
                                   [](const Point& p, double v) { return p.probability < v; });
  double bytes = points_.back().bytes;
  if (it == points_.begin()) {
    bytes = it->bytes;
  } else if (it != points_.end()) {
    const Point& lo = *(it - 1);
    const double span = it->probability - lo.probability;
    bytes = span <= 0 ? it->bytes : lo.bytes + (u - lo.probability) / span * (it->bytes - lo.bytes);
  }
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(bytes)));
}

double FlowSizeCdf::mean() const noexcept {
  if (points_.empty()) return 0;
  // A point mass at the first point, then each segment's mass at its middle.
  double m = points_.front().probability * points_.front().bytes;
  for (std::size_t i = 1; i < points_.size(); ++i)
    m += (points_[i].probability - points_[i - 1].probability) * (points_[i].bytes + points_[i - 1].bytes) / 2;
  return m;
}

std::vector<BackgroundFlow> background_flows(std::span<const std::uint32_t> hosts, const FlowSizeCdf& sizes,
                                             double load, std::uint64_t rate_bps, std::uint64_t duration_ns,
                                             std::uint64_t seed) {
  if (hosts.size() < 2) throw std::invalid_argument("sim::background_flows: needs at least 2 hosts");
  if (sizes.empty()) throw std::invalid_argument("sim::background_flows: no flow-size distribution");
  if (!(load > 0 && load <= 1))
    throw std::invalid_argument("sim::background_flows: load " + (std::ostringstream{} << load).str() +
                                " outside (0, 1]");
  std::mt19937_64 rng(seed);
  // [0, 1) from the top 53 bits.
  const auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1p-53; };
  // Mean gap between one host's flows, ns.
  const double gap_ns = sizes.mean() * 8.0 * 1e9 / (load * static_cast<double>(rate_bps));
  std::vector<BackgroundFlow> flows;
  for (const std::uint32_t src : hosts) {
    double t = 0;
    for (;;) {
      t += -std::log1p(-uniform()) * gap_ns;
      if (t >= static_cast<double>(duration_ns)) break;
      // Another host, uniformly.
      auto k = static_cast<std::size_t>(uniform() * static_cast<double>(hosts.size() - 1));
      k = std::min(k, hosts.size() - 2);
      std::uint32_t dst = hosts[k];
      if (dst == src) dst = hosts[hosts.size() - 1];
      flows.push_back(BackgroundFlow{src, dst, sizes.sample(uniform()), static_cast<std::uint64_t>(t)});
    }
  }
  std::stable_sort(flows.begin(), flows.end(),
                   [](const BackgroundFlow& a, const BackgroundFlow& b) { return a.start_ns < b.start_ns; });
  return flows;
}

}  // namespace metaroce::sim
