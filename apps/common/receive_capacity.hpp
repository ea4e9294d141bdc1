// --receive-capacity RATE, which metaroce-perf, metaroce-gen and
// metaroce-sink share: what the port may receive, the receive share's
// capacity (EndpointConfig::receive_capacity_bps), in the fabric spec's
// rate units.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "fabric/spec.hpp"

namespace metaroce::apps {

inline constexpr const char* receive_capacity_help =
    "with --cc metaroce: what this port may receive, a rate such as 2gbit or 500mbit, divided among the "
    "connections sending here as their rate hint (default: the port's link rate less 3%; 100gbit when the "
    "driver reports none)";

// Reads it into `out` when given; false with one line naming the fix.
inline bool read_receive_capacity(const boost::program_options::variables_map& vm, std::uint64_t& out,
                                  std::string& message) {
  const auto given = vm.find("receive-capacity");
  if (given == vm.end()) return true;
  const std::string& text = given->second.as<std::string>();
  const std::optional<std::uint64_t> rate = fabric::parse_rate(text);
  if (!rate || *rate < 1'000'000) {
    message = fmt::format("--receive-capacity '{}' is not a rate: give one of at least 1mbit, such as 2gbit or 500mbit",
                          text);
    return false;
  }
  out = *rate;
  return true;
}

}  // namespace metaroce::apps
