// metaroce-perf's output: the perftest-style table, a summary of what the
// transport and the fabric did, and the JSON file.
#pragma once

#include <cstdio>
#include <string>

#include "metaroce-perf/loopback_run.hpp"
#include "metaroce-perf/perf_options.hpp"

namespace metaroce::perf {

void print_header(std::FILE* out, const PerfOptions& options);
void print_table(std::FILE* out, const PerfOptions& options, const RunResult& run);
// False with `error` when the file cannot be written.
bool write_json(const std::string& path, const PerfOptions& options, const RunResult& run, std::string& error);

}  // namespace metaroce::perf
