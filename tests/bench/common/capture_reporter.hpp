// A console reporter that also keeps each benchmark's time per iteration, so
// a benchmark's main can print its summary JSON line last.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

namespace metaroce::bench {

class CaptureReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.iterations == 0) continue;
      ns_per_iteration_[run.benchmark_name()] =
          run.cpu_accumulated_time * 1e9 / static_cast<double>(run.iterations);
    }
    ConsoleReporter::ReportRuns(runs);
  }

  // CPU nanoseconds per iteration of the named benchmark (0 if it did not run).
  [[nodiscard]] double ns(const std::string& name) const {
    const auto it = ns_per_iteration_.find(name);
    return it == ns_per_iteration_.end() ? 0.0 : it->second;
  }

 private:
  std::map<std::string, double> ns_per_iteration_;
};

}  // namespace metaroce::bench
