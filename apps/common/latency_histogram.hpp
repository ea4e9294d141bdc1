// Latency percentiles without keeping every sample: log-linear buckets (64
// per power of two, exact below 64 ns), so a percentile is within 1/64
// (1.6%) of the true sample; min and max are exact. 3,776 buckets, 30 KiB.
// add_latency_json writes one into a JSON summary.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "common/json_line.hpp"

namespace metaroce::apps {

class LatencyHistogram {
 public:
  static constexpr unsigned sub_buckets = 64;
  static constexpr std::size_t bucket_count = sub_buckets + (64 - 6) * sub_buckets;

  void add(std::uint64_t ns) noexcept {
    ++counts_[index(ns)];
    ++count_;
    min_ = std::min(min_, ns);
    max_ = std::max(max_, ns);
  }
  void merge(const LatencyHistogram& other) noexcept {
    for (std::size_t i = 0; i < bucket_count; ++i) counts_[i] += other.counts_[i];
    count_ += other.count_;
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }

  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  [[nodiscard]] std::uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
  [[nodiscard]] std::uint64_t max() const noexcept { return max_; }
  // The sample of rank ceil(q * count) (q in (0, 1]), as the middle of its
  // bucket, clamped to [min, max]; 0 when empty.
  [[nodiscard]] std::uint64_t percentile(double q) const noexcept {
    if (count_ == 0) return 0;
    const auto rank = std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::ceil(q * double(count_))), 1, count_);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < bucket_count; ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::clamp(lower(i) + (width(i) - 1) / 2, min(), max_);
    }
    return max_;
  }

  [[nodiscard]] static std::size_t index(std::uint64_t v) noexcept {
    if (v < sub_buckets) return static_cast<std::size_t>(v);
    const unsigned e = 63u - static_cast<unsigned>(std::countl_zero(v));  // >= 6
    return sub_buckets + (e - 6) * sub_buckets + static_cast<std::size_t>((v >> (e - 6)) & (sub_buckets - 1));
  }
  [[nodiscard]] static std::uint64_t lower(std::size_t i) noexcept {
    if (i < sub_buckets) return i;
    const std::size_t e = (i - sub_buckets) / sub_buckets + 6;
    return (sub_buckets + (i - sub_buckets) % sub_buckets) << (e - 6);
  }
  [[nodiscard]] static std::uint64_t width(std::size_t i) noexcept {
    return i < sub_buckets ? 1 : std::uint64_t{1} << ((i - sub_buckets) / sub_buckets);
  }

 private:
  std::array<std::uint64_t, bucket_count> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t min_ = ~std::uint64_t{0};
  std::uint64_t max_ = 0;
};

// `key`: {"count", "p50", "p99", "p999", "max"}, the latencies in microseconds.
inline void add_latency_json(JsonLine& j, std::string_view key, const LatencyHistogram& h) {
  j.begin_object(key);
  j.add("count", h.count());
  j.add("p50", double(h.percentile(0.50)) / 1e3);
  j.add("p99", double(h.percentile(0.99)) / 1e3);
  j.add("p999", double(h.percentile(0.999)) / 1e3);
  j.add("max", double(h.max()) / 1e3);
  j.end_object();
}

}  // namespace metaroce::apps
