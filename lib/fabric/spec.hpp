// A FabricConfig from a tc-netem-like string, and back. Grammar and units:
// doc/FABRIC.md. Example:
//   "loss 1% delay 10us jitter 2us rate 25gbit paths 8 spread 20us"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fabric/config.hpp"

namespace metaroce::fabric {

struct FabricSpecResult {
  FabricConfig config;
  std::string error;  // empty on success; names the bad token and what was expected

  [[nodiscard]] bool ok() const noexcept { return error.empty(); }
};

// Parses `spec` (tokens separated by blanks; later items override earlier
// ones, blackholes add up) and validates the result.
[[nodiscard]] FabricSpecResult parse_fabric_spec(std::string_view spec);

// Throws std::invalid_argument carrying the parser's message.
[[nodiscard]] FabricConfig parse_fabric_spec_or_throw(std::string_view spec);

// A rate as the spec writes one ("2gbit", "500mbit": bit, kbit, mbit, gbit
// or tbit) in bits per second; nullopt for anything else.
[[nodiscard]] std::optional<std::uint64_t> parse_rate(std::string_view text);

// The canonical spec of a config: parse_fabric_spec(to_spec(c)).config == c.
[[nodiscard]] std::string to_spec(const FabricConfig& config);

}  // namespace metaroce::fabric
