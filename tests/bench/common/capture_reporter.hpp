// A console reporter that also keeps each benchmark's CPU time per
// iteration, so a benchmark's main can print its summary JSON line last; and
// the argument defaults our benchmarks share.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

namespace metaroce::bench {

class CaptureReporter : public benchmark::ConsoleReporter {
 public:
  // Colours only on a terminal: piped output (tools/bench, CI logs) stays
  // plain, and the JSON line stays clean.
  CaptureReporter() : ConsoleReporter(::isatty(STDOUT_FILENO) ? OO_Defaults : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      // GetAdjustedCPUTime is in the run's time unit, nanoseconds unless a
      // benchmark asks otherwise (ours do not).
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name == "median") {
        medians_[run.run_name.str()] = run.GetAdjustedCPUTime();
      } else if (run.run_type == Run::RT_Iteration && run.iterations > 0) {
        samples_[run.run_name.str()].push_back(run.GetAdjustedCPUTime());
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

  // Median over repetitions of CPU nanoseconds per iteration of the named
  // benchmark (0 if it did not run). This machine is a shared VM: single
  // runs vary by tens of percent, medians of five by a few.
  [[nodiscard]] double ns(const std::string& name) const {
    if (const auto m = medians_.find(name); m != medians_.end()) return m->second;
    const auto it = samples_.find(name);
    if (it == samples_.end() || it->second.empty()) return 0.0;
    std::vector<double> v = it->second;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }

 private:
  std::map<std::string, double> medians_;
  std::map<std::string, std::vector<double>> samples_;
};

// Five repetitions with only their aggregates shown, unless the command line
// says otherwise.
inline std::vector<char*> with_default_repetitions(int argc, char** argv) {
  static char repetitions[] = "--benchmark_repetitions=5";
  static char aggregates[] = "--benchmark_display_aggregates_only=true";
  std::vector<char*> args(argv, argv + argc);
  const bool given = std::any_of(args.begin(), args.end(), [](const char* a) {
    return std::string(a).rfind("--benchmark_repetitions", 0) == 0;
  });
  if (!given) {
    args.push_back(repetitions);
    args.push_back(aggregates);
  }
  return args;
}

}  // namespace metaroce::bench
