// Burst loss: the Gilbert-Elliott two-state chain of tc-netem's
// `loss gemodel p r 1-h 1-k` (parameters in fabric/config.hpp).
#pragma once

#include "fabric/config.hpp"
#include "fabric/random.hpp"

namespace metaroce::fabric {

class GilbertElliottLoss {
 public:
  explicit GilbertElliottLoss(const GilbertElliott& params) noexcept : params_(params) {}
  // Decides the loss of one frame in the current state, then takes one step
  // of the chain.
  bool lose(Random& random) noexcept {
    const bool lost = random.chance(bad_ ? params_.loss_in_bad : params_.loss_in_good);
    if (bad_) {
      if (random.chance(params_.r)) bad_ = false;
    } else if (random.chance(params_.p)) {
      bad_ = true;
    }
    return lost;
  }
  [[nodiscard]] bool bad() const noexcept { return bad_; }

 private:
  GilbertElliott params_;
  bool bad_ = false;
};

}  // namespace metaroce::fabric
