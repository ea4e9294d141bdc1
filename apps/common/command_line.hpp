// The command line every app shares: its own options (Boost.Program_options)
// before `--`, EAL's arguments after it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace metaroce::apps {

enum class ParseOutcome : std::uint8_t { run, help, error };

// Splits argv at `--` (EAL's arguments after it go to `eal_args`) and parses
// the app's part with `description` into `vm`. help: `message` is `usage`
// followed by the options; error: one line.
ParseOutcome parse_command_line(int argc, const char* const* argv,
                                const boost::program_options::options_description& description,
                                const std::string& usage, boost::program_options::variables_map& vm,
                                std::vector<std::string>& eal_args, std::string& message);

}  // namespace metaroce::apps
