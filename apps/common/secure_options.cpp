#include "common/secure_options.hpp"

#include <fmt/format.h>

namespace po = boost::program_options;

namespace metaroce::apps {

void add_secure_options(po::options_description& d) {
  d.add_options()
      ("secure", po::value<std::string>()->implicit_value("encrypt")->value_name("MODE"), secure_help)
      ("key-file", po::value<std::string>()->value_name("FILE"), key_file_help);
}

bool read_secure_options(const po::variables_map& vm, std::string& key_file, bool& auth_only, std::string& message,
                         secure::Psk* psk) {
  auth_only = false;
  if (!vm.count("secure")) {
    if (vm.count("key-file")) {
      message = "--key-file goes with --secure: add --secure (or --secure=auth-only)";
      return false;
    }
    return true;
  }
  const std::string mode = vm["secure"].as<std::string>();
  if (mode == "auth-only") {
    auth_only = true;
  } else if (mode != "encrypt") {
    message = fmt::format("--secure={}: give --secure (encrypt, the default) or --secure=auth-only", mode);
    return false;
  }
  if (!vm.count("key-file")) {
    message = "--secure needs --key-file FILE: a pre-shared key both ends hold (at least 32 random bytes, readable "
              "by its owner only)";
    return false;
  }
  key_file = vm["key-file"].as<std::string>();
  secure::Psk loaded;
  if (!secure::load_psk(key_file, psk != nullptr ? *psk : loaded, message)) {
    message = "--key-file: " + message;
    return false;
  }
  return true;
}

}  // namespace metaroce::apps
