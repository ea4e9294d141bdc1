// One congestion-control algorithm per connection, chosen by name:
// "metaroce" (ECN-AIMD per path + receiver hints), "dcqcn" (rocev2), "fixed".
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cc/dcqcn.hpp"
#include "cc/metaroce_cc.hpp"
#include "transport/congestion.hpp"

namespace metaroce::cc {

struct CcConfig {
  MetaroceCcParams metaroce{};
  DcqcnParams dcqcn{};
  std::uint32_t fixed_path_window = 16;
  std::uint32_t fixed_connection_window = 96;
};

[[nodiscard]] const std::vector<std::string_view>& algorithm_names();

// nullptr, with `error` naming the known algorithms, for an unknown name.
[[nodiscard]] std::unique_ptr<transport::CongestionControl> make(std::string_view name, const CcConfig& config,
                                                                 std::string& error);

}  // namespace metaroce::cc
