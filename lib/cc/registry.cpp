#include "cc/registry.hpp"

namespace metaroce::cc {

const std::vector<std::string_view>& algorithm_names() {
  static const std::vector<std::string_view> names = {"metaroce", "dcqcn", "fixed"};
  return names;
}

std::unique_ptr<transport::CongestionControl> make(std::string_view name, const CcConfig& config, std::string& error) {
  if (name == "metaroce") return std::make_unique<MetaroceCc>(config.metaroce);
  if (name == "dcqcn") return std::make_unique<Dcqcn>(config.dcqcn);
  if (name == "fixed")
    return std::make_unique<transport::FixedWindow>(config.fixed_path_window, config.fixed_connection_window);
  error = "unknown congestion control '" + std::string(name) + "': use metaroce, dcqcn or fixed";
  return nullptr;
}

}  // namespace metaroce::cc
