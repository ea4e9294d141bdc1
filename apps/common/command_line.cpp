#include "common/command_line.hpp"

#include <algorithm>
#include <iterator>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

namespace po = boost::program_options;

namespace metaroce::apps {

namespace {

// DPDK 22.11's EAL options (rte_eal_init's --help): one of them before `--`
// is a misplaced EAL argument, not a typo of the app's.
constexpr std::string_view eal_long_options[] = {
    "allow", "base-virtaddr", "block", "create-uio-dev", "file-prefix", "force-max-simd-bitwidth", "huge-dir",
    "huge-unlink", "huge-worker-stack", "in-memory", "iova-mode", "lcores", "legacy-mem", "log-level",
    "main-lcore", "match-allocations", "mbuf-pool-ops-name", "no-hpet", "no-huge", "no-pci", "no-shconf",
    "no-telemetry", "proc-type", "service-corelist", "service-coremask", "single-file-segments",
    "socket-limit", "socket-mem", "syslog", "telemetry", "trace", "trace-bufsz", "trace-dir", "trace-mode",
    "vdev", "vfio-intr", "vfio-vf-token", "vmware-tsc-map", "version", "pci-whitelist", "pci-blacklist",
    "master-lcore", "no-vmbus"};

// EAL's one-letter options.
constexpr std::string_view eal_short_options = "abcdlmnrsSv";

// The key Boost looks an option up by: "--vdev=x" -> "vdev", "-l0-1" ->
// "-l"; "" when `arg` is not an option.
std::string option_key(std::string_view arg) {
  if (arg.size() > 2 && arg.substr(0, 2) == "--") {
    const std::string_view name = arg.substr(2);
    return std::string(name.substr(0, name.find('=')));
  }
  if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') return std::string(arg.substr(0, 2));
  return {};
}

// "vdev" -> "--vdev", "-l" -> "-l".
std::string spelled(const std::string& key) { return key.size() == 2 && key[0] == '-' ? key : "--" + key; }

bool is_eal_option(const std::string& key) {
  if (key.size() == 2 && key[0] == '-') return eal_short_options.find(key[1]) != std::string_view::npos;
  return std::find(std::begin(eal_long_options), std::end(eal_long_options), key) != std::end(eal_long_options);
}

// The option that takes no value and stands right before `token`, if any:
// "-q 4" when -q is a switch.
std::string switch_before(const std::vector<std::string>& args, std::size_t at,
                          const po::options_description& description) {
  if (at == 0) return {};
  const std::string& previous = args[at - 1];
  const std::string key = option_key(previous);
  if (key.empty() || previous.find('=') != std::string::npos) return {};
  const po::option_description* option = description.find_nothrow(key, false);
  if (option == nullptr || option->semantic()->max_tokens() != 0) return {};
  return previous;
}

}  // namespace

ParseOutcome parse_command_line(int argc, const char* const* argv, const po::options_description& description,
                                const std::string& usage, po::variables_map& vm, std::vector<std::string>& eal_args,
                                std::string& message) {
  std::vector<std::string> app_args;
  int i = 1;
  for (; i < argc && std::string(argv[i]) != "--"; ++i) app_args.emplace_back(argv[i]);
  for (++i; i < argc; ++i) eal_args.emplace_back(argv[i]);
  // An EAL option before `--`: say where it goes rather than "unrecognised".
  for (const std::string& arg : app_args) {
    const std::string key = option_key(arg);
    if (!key.empty() && is_eal_option(key) && description.find_nothrow(key, false) == nullptr) {
      // perftest users type -c for connections where this app has -q.
      if (key == "-c" && description.find_nothrow("qps", false) != nullptr)
        message = "-c is not an option here (connections are -q N); as EAL's core mask it goes after `--`";
      else
        message = fmt::format("{} is an EAL option: put it after `--` (OPTIONS -- EAL-ARGS)", spelled(key));
      return ParseOutcome::error;
    }
  }
  // One of the app's own options after `--`: EAL would print its whole usage.
  // Only its long options: EAL's one-letter ones (-l, -n, -s, ...) clash.
  for (const std::string& arg : eal_args) {
    if (arg.substr(0, 2) != "--") continue;
    const std::string key = option_key(arg);
    if (key == "help" || is_eal_option(key)) continue;
    if (description.find_nothrow(key, false) != nullptr) {
      message = fmt::format("--{} is an option of this app, not of EAL: put it before `--` (OPTIONS -- EAL-ARGS)",
                            key);
      return ParseOutcome::error;
    }
  }
  try {
    const po::parsed_options parsed = po::command_line_parser(app_args).options(description).run();
    // Boost keeps words that belong to no option aside; nothing here takes
    // positional arguments, so each one is a mistake (a value given to a
    // switch, a value with a space inside it unquoted, a missing `--`).
    for (const po::option& option : parsed.options) {
      if (option.position_key < 0 || option.original_tokens.empty()) continue;
      const std::string& word = option.original_tokens.front();
      const auto at = static_cast<std::size_t>(
          std::find(app_args.begin(), app_args.end(), word) - app_args.begin());
      const std::string switch_option = switch_before(app_args, at, description);
      if (!switch_option.empty())
        message = fmt::format("unexpected argument '{}': {} takes no value (EAL arguments go after `--`)", word,
                              switch_option);
      else
        message = fmt::format("unexpected argument '{}': every option is --NAME VALUE (EAL arguments go after "
                              "`--`)", word);
      return ParseOutcome::error;
    }
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    message = e.what();
    return ParseOutcome::error;
  }
  if (vm.count("help")) {
    std::ostringstream text;
    text << usage << "\n" << description;
    message = text.str();
    return ParseOutcome::help;
  }
  return ParseOutcome::run;
}

}  // namespace metaroce::apps
