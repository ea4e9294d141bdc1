// metaroce-gen: traffic for metaroce-sink over a real DPDK port, every byte
// of it checkable (doc/APPS.md, "metaroce-gen and metaroce-sink").
#include <cstdio>
#include <string>

#include "common/summary_file.hpp"
#include "metaroce-gen/gen_options.hpp"
#include "metaroce-gen/gen_run.hpp"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_failed = 1;
constexpr int exit_usage = 2;

}  // namespace

int main(int argc, char** argv) {
  using namespace metaroce::apps;
  gen::GenOptions options;
  std::string message;
  switch (gen::parse_gen_options(argc, argv, options, message)) {
    case ParseOutcome::help:
      std::fputs(message.c_str(), stdout);
      return exit_ok;
    case ParseOutcome::error:
      std::fprintf(stderr, "metaroce-gen: %s\nTry 'metaroce-gen --help'.\n", message.c_str());
      return exit_usage;
    case ParseOutcome::run:
      break;
  }
  std::string error;
  int status = exit_ok;
  {
    const gen::GenResult result = gen::run_gen(options, stdout);
    if (!result.error.empty()) std::fprintf(stderr, "metaroce-gen: %s\n", result.error.c_str());
    if (!result.connections.empty()) gen::print_gen_summary(stdout, options, result);
    if (!result.ok()) status = exit_failed;
    if (!options.json_path.empty() && !write_summary_file(options.json_path, gen::gen_json(options, result), error)) {
      std::fprintf(stderr, "metaroce-gen: %s\n", error.c_str());
      status = exit_failed;
    }
  }
  metaroce::release_eal();
  return status;
}
