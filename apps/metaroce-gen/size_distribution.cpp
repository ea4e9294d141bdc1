#include "metaroce-gen/size_distribution.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "common/byte_size.hpp"
#include "common/traffic_message.hpp"

namespace metaroce::apps::traffic {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A size: bytes, or with a k, M or G suffix as perftest users type them.
bool parse_u64(std::string_view s, std::uint64_t& out) { return parse_byte_size(trim(s), out); }

bool parse_weight(std::string_view s, double& out) {
  s = trim(s);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty() && std::isfinite(out) && out >= 0.0;
}

bool size_in_range(std::uint64_t size, const std::string& where, std::string& error) {
  if (size >= header_size && size <= max_message_size) return true;
  error = fmt::format("{}: size {} is out of range: give {}..{} bytes (every message starts with its {}-byte header)",
                      where, size, header_size, max_message_size, header_size);
  return false;
}

std::vector<std::string_view> split(std::string_view s, char by) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto at = s.find(by);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

}  // namespace

bool SizeDistribution::make_weighted(std::vector<std::uint64_t> sizes, std::vector<double> weights,
                                     const std::string& description, const std::string& where,
                                     SizeDistribution& out, std::string& error) {
  double total = 0.0;
  for (const double w : weights) total += w;
  if (sizes.empty() || !(total > 0.0)) {
    error = fmt::format("{}: no size with a positive weight: give at least one", where);
    return false;
  }
  SizeDistribution d;
  d.sizes_ = std::move(sizes);
  double sum = 0.0;
  d.min_ = ~std::uint64_t{0};
  for (std::size_t i = 0; i < d.sizes_.size(); ++i) {
    sum += weights[i];
    d.cumulative_.push_back(sum / total);
    d.mean_ += double(d.sizes_[i]) * weights[i] / total;
    if (weights[i] > 0.0) {
      d.min_ = std::min(d.min_, d.sizes_[i]);
      d.max_ = std::max(d.max_, d.sizes_[i]);
    }
  }
  d.cumulative_.back() = 1.0;
  d.description_ = description;
  out = std::move(d);
  return true;
}

bool SizeDistribution::parse(const std::string& spec, SizeDistribution& out, std::string& error) {
  SizeDistribution d;
  const std::string where = fmt::format("--size '{}'", spec);
  std::uint64_t lo = 0, hi = 0;
  const auto dash = spec.find('-');
  if (spec.find_first_of(",:") == std::string::npos && dash == std::string::npos) {
    if (!parse_u64(spec, lo)) {
      error = fmt::format("{} is not a size: give BYTES (65536, 64k, 1M), MIN-MAX, A,B,C or A:WEIGHT,B:WEIGHT", where);
      return false;
    }
    if (!size_in_range(lo, where, error)) return false;
    d.uniform_ = true;
    d.min_ = d.max_ = lo;
    d.mean_ = double(lo);
    d.description_ = std::to_string(lo);
  } else if (spec.find_first_of(",:") == std::string::npos) {
    if (!parse_u64(std::string_view(spec).substr(0, dash), lo) ||
        !parse_u64(std::string_view(spec).substr(dash + 1), hi)) {
      error = fmt::format("{} is not a range: give MIN-MAX in bytes, e.g. 64-65536 or 64-64k", where);
      return false;
    }
    if (!size_in_range(lo, where, error) || !size_in_range(hi, where, error)) return false;
    if (lo > hi) {
      error = fmt::format("{}: the range is empty: give MIN-MAX with MIN <= MAX", where);
      return false;
    }
    d.uniform_ = true;
    d.min_ = lo;
    d.max_ = hi;
    d.mean_ = (double(lo) + double(hi)) / 2.0;
    d.description_ = fmt::format("{}-{}", lo, hi);
  } else {
    std::vector<std::uint64_t> sizes;
    std::vector<double> weights;
    for (const std::string_view item : split(spec, ',')) {
      const auto colon = item.find(':');
      std::uint64_t size = 0;
      double weight = 1.0;
      if (!parse_u64(item.substr(0, colon), size) ||
          (colon != std::string_view::npos && !parse_weight(item.substr(colon + 1), weight))) {
        error = fmt::format("{}: '{}' is not SIZE or SIZE:WEIGHT (weights are numbers >= 0)", where, item);
        return false;
      }
      if (!size_in_range(size, where, error)) return false;
      sizes.push_back(size);
      weights.push_back(weight);
    }
    const std::string description = fmt::format("list of {}", sizes.size());
    return make_weighted(std::move(sizes), std::move(weights), description, where, out, error);
  }
  out = std::move(d);
  return true;
}

bool SizeDistribution::parse_csv(const std::string& text, const std::string& source, SizeDistribution& out,
                                 std::string& error) {
  std::vector<std::uint64_t> sizes;
  std::vector<double> weights;
  std::istringstream in(text);
  std::string line;
  std::size_t number = 0;
  bool first_data_line = true;
  while (std::getline(in, line)) {
    ++number;
    const std::string_view l = trim(line);
    if (l.empty() || l.front() == '#') continue;
    const std::vector<std::string_view> fields = split(l, ',');
    std::uint64_t size = 0;
    double weight = 1.0;
    const bool numeric = parse_u64(fields[0], size);
    if (!numeric && first_data_line) {  // a header row
      first_data_line = false;
      continue;
    }
    first_data_line = false;
    const std::string where = fmt::format("{} line {}", source, number);
    if (!numeric || fields.size() > 2 || (fields.size() == 2 && !parse_weight(fields[1], weight))) {
      error = fmt::format("{}: '{}' is not SIZE or SIZE,WEIGHT (bytes, then a number >= 0)", where, l);
      return false;
    }
    if (!size_in_range(size, where, error)) return false;
    sizes.push_back(size);
    weights.push_back(weight);
  }
  const std::string description = fmt::format("file {} ({} sizes)", source, sizes.size());
  return make_weighted(std::move(sizes), std::move(weights), description, source, out, error);
}

bool SizeDistribution::load_csv(const std::string& path, SizeDistribution& out, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = fmt::format("--size-file: cannot read '{}': check the path", path);
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_csv(text.str(), path, out, error);
}

std::uint64_t SizeDistribution::draw(fabric::Random& random) const {
  if (uniform_) return min_ == max_ ? min_ : min_ + random.below(max_ - min_ + 1);
  const double u = random.uniform();
  const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
  return sizes_[std::min<std::size_t>(static_cast<std::size_t>(it - cumulative_.begin()), sizes_.size() - 1)];
}

}  // namespace metaroce::apps::traffic
