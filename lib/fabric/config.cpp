#include "fabric/config.hpp"

namespace metaroce::fabric {

double GilbertElliott::stationary_loss() const noexcept {
  if (p + r <= 0.0) return loss_in_good;  // never leaves the good state
  const double pi_bad = p / (p + r);
  return pi_bad * loss_in_bad + (1.0 - pi_bad) * loss_in_good;
}

std::uint64_t FabricConfig::path_delay_ns(std::uint32_t path) const noexcept {
  if (!path_delays_ns.empty()) return path < path_delays_ns.size() ? path_delays_ns[path] : 0;
  if (paths <= 1) return delay_ns;
  return delay_ns + spread_ns * path / (paths - 1);
}

namespace {
bool is_probability(double p) { return p >= 0.0 && p <= 1.0; }
}  // namespace

std::string validate(const FabricConfig& c) {
  if (c.paths < 1 || c.paths > max_fabric_paths)
    return "paths must be between 1 and " + std::to_string(max_fabric_paths) + ", got " +
           std::to_string(c.paths);
  if (!c.path_delays_ns.empty() && c.path_delays_ns.size() != c.paths)
    return "delays lists " + std::to_string(c.path_delays_ns.size()) + " paths but paths is " +
           std::to_string(c.paths) + ": give one delay per path";
  for (const auto& [name, p] : {std::pair{"loss", c.loss}, std::pair{"duplicate", c.duplicate},
                                std::pair{"corrupt", c.corrupt}, std::pair{"reorder", c.reorder},
                                std::pair{"gemodel p", c.gemodel.p}, std::pair{"gemodel r", c.gemodel.r},
                                std::pair{"gemodel 1-h", c.gemodel.loss_in_bad},
                                std::pair{"gemodel 1-k", c.gemodel.loss_in_good},
                                std::pair{"ecn-red probability", c.ecn.max_probability}}) {
    if (!is_probability(p)) return std::string(name) + " must be between 0% and 100%";
  }
  if (c.ecn.enabled && c.ecn.max_bytes < c.ecn.min_bytes)
    return "ecn-red max (" + std::to_string(c.ecn.max_bytes) + ") is below min (" +
           std::to_string(c.ecn.min_bytes) + ")";
  for (const Blackhole& b : c.blackholes) {
    if (b.path != Blackhole::every_path && b.path >= c.paths)
      return "blackhole path " + std::to_string(b.path) + " does not exist: paths are 0.." +
             std::to_string(c.paths - 1) + " (set paths first)";
  }
  return {};
}

}  // namespace metaroce::fabric
