#include "common/command_line.hpp"

#include <sstream>

namespace po = boost::program_options;

namespace metaroce::apps {

ParseOutcome parse_command_line(int argc, const char* const* argv, const po::options_description& description,
                                const std::string& usage, po::variables_map& vm, std::vector<std::string>& eal_args,
                                std::string& message) {
  std::vector<std::string> app_args;
  int i = 1;
  for (; i < argc && std::string(argv[i]) != "--"; ++i) app_args.emplace_back(argv[i]);
  for (++i; i < argc; ++i) eal_args.emplace_back(argv[i]);
  try {
    po::store(po::command_line_parser(app_args).options(description).run(), vm);
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
