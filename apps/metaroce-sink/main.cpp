// metaroce-sink: takes metaroce-gen's connections over a real DPDK port and
// checks every byte they carry (doc/APPS.md, "metaroce-gen and metaroce-sink").
#include <cstdio>
#include <string>

#include "common/summary_file.hpp"
#include "metaroce-sink/sink_options.hpp"
#include "metaroce-sink/sink_run.hpp"

int main(int argc, char** argv) {
  using namespace metaroce::apps;
  sink::SinkOptions options;
  std::string message;
  const ParseOutcome parsed = sink::parse_sink_options(argc, argv, options, message);
  if (parsed == ParseOutcome::help) {
    std::fputs(message.c_str(), stdout);
    return 0;
  }
  if (parsed == ParseOutcome::error) {
    std::fprintf(stderr, "metaroce-sink: %s\nTry 'metaroce-sink --help'.\n", message.c_str());
    return 2;
  }
  std::string error;
  bool ok = false;
  {
    const sink::SinkResult result = sink::run_sink(options, stdout);
    if (!result.error.empty()) std::fprintf(stderr, "metaroce-sink: %s\n", result.error.c_str());
    else sink::print_sink_summary(stdout, result);
    ok = result.ok();
    if (!options.json_path.empty() && !write_summary_file(options.json_path, sink::sink_json(options, result), error)) {
      std::fprintf(stderr, "metaroce-sink: %s\n", error.c_str());
      ok = false;
    }
  }
  metaroce::release_eal();
  return ok ? 0 : 1;  // 1: a wrong byte, a missing or duplicated message, or a run-time failure
}
