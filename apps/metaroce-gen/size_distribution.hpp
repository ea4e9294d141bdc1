// Message sizes of metaroce-gen: fixed, uniform over a range, drawn from a
// list (optionally weighted) or from a CSV file of sizes and weights. No DPDK.
//
//   --size 4096                 every message 4096 bytes
//   --size 64-65536             uniform over [64, 65536]
//   --size 64,4096,65536        each equally likely
//   --size 64:90,65536:10       weighted (90% 64 B, 10% 64 KiB)
//   --size-file sizes.csv       one "size[,weight]" per line; blank lines,
//                               lines starting with '#' and a first line
//                               that is not a number (a header) are skipped
//
// Sizes are bytes, from traffic::header_size (32: every message carries its
// header) to 1 GiB.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/random.hpp"

namespace metaroce::apps::traffic {

class SizeDistribution {
 public:
  // False with a one-line error that names the fix.
  static bool parse(const std::string& spec, SizeDistribution& out, std::string& error);
  static bool load_csv(const std::string& path, SizeDistribution& out, std::string& error);
  // The same from CSV text; `source` names it in errors.
  static bool parse_csv(const std::string& text, const std::string& source, SizeDistribution& out,
                        std::string& error);

  [[nodiscard]] std::uint64_t draw(fabric::Random& random) const;
  [[nodiscard]] std::uint64_t min() const noexcept { return min_; }
  [[nodiscard]] std::uint64_t max() const noexcept { return max_; }
  [[nodiscard]] double mean() const noexcept { return mean_; }
  // How it was given, for reports: "4096", "64-65536", "list of 3", "file sizes.csv (12 sizes)".
  [[nodiscard]] const std::string& description() const noexcept { return description_; }

 private:
  static bool make_weighted(std::vector<std::uint64_t> sizes, std::vector<double> weights,
                            const std::string& description, const std::string& where, SizeDistribution& out,
                            std::string& error);

  bool uniform_ = false;
  std::uint64_t min_ = 0, max_ = 0;
  double mean_ = 0.0;
  std::vector<std::uint64_t> sizes_;  // weighted: the sizes
  std::vector<double> cumulative_;    // and their cumulative weights, normalised to 1
  std::string description_;
};

}  // namespace metaroce::apps::traffic
