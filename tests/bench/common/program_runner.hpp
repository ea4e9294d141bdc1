// What the benchmarks that time other programs share (tools/bench perf,
// tools/bench scale): run a command with its output echoed, indented; read
// a file; and the first number after a key in a JSON text.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <fmt/format.h>

namespace metaroce::bench {

using Figure = std::optional<double>;

inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The first number after "key": at or after `from` in a JSON text. The
// producers (metaroce-perf --json, iperf3 -J) write plain numbers, so a
// string search and strtod are enough and keep this free of a JSON library
// (std::regex trips a false -Wmaybe-uninitialized in g++ 12's <regex> in
// the sanitizer build).
inline Figure json_number(const std::string& json, const std::string& key, std::size_t from = 0) {
  const std::string quoted = "\"" + key + "\"";
  std::size_t at = json.find(quoted, std::min(from, json.size()));
  while (at != std::string::npos) {
    std::size_t i = at + quoted.size();
    while (i < json.size() && (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' || json[i] == '\r')) ++i;
    if (i < json.size() && json[i] == ':') {
      ++i;
      while (i < json.size() && (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' || json[i] == '\r')) ++i;
      const char* start = json.c_str() + i;
      char* end = nullptr;
      const double value = std::strtod(start, &end);
      if (end != start) return value;
      return std::nullopt;
    }
    at = json.find(quoted, at + 1);
  }
  return std::nullopt;
}

// Runs a shell command, echoing its output indented; its exit status.
inline int run(const std::string& command) {
  std::fflush(stdout);
  std::FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char line[512];
  while (std::fgets(line, sizeof line, p) != nullptr) std::printf("    %s", line);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::string json_value(const Figure& f, int decimals) {
  return f ? fmt::format("{:.{}f}", *f, decimals) : "null";
}

inline std::string show(const Figure& f, const char* unit, int decimals = 2) {
  return f ? fmt::format("{:.{}f} {}", *f, decimals, unit) : "not measured";
}

// The start of a benchmark that runs programs: tools/bench passes Google
// Benchmark's flags (--benchmark_color=false), which are accepted and
// ignored; anything else is an error (exit 2). Then a scratch directory
// /tmp/metaroce-bench-NAME.XXXXXX. Returns the directory, or nullopt with
// `exit_code` set and the reason printed.
inline std::optional<std::string> start_benchmark(const char* name, int argc, char** argv, int& exit_code) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]).rfind("--benchmark", 0) == 0) continue;
    std::fprintf(stderr, "metaroce-bench-%s: unknown argument '%s' (it takes none)\n", name, argv[i]);
    exit_code = 2;
    return std::nullopt;
  }
  std::string dir_template = fmt::format("/tmp/metaroce-bench-{}.XXXXXX", name);
  if (::mkdtemp(dir_template.data()) == nullptr) {
    std::fprintf(stderr, "metaroce-bench-%s: cannot create a directory in /tmp\n", name);
    exit_code = 1;
    return std::nullopt;
  }
  return dir_template;
}

}  // namespace metaroce::bench
