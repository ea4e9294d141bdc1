// Spaces a connection's transmissions at the rate congestion control sets.
//
// The wheel fires a little late (up to its slot width), so a packet that
// leaves late does not push the next one back by the same amount: up to
// `catch_up` of lateness is credited, which keeps the average rate exact
// without allowing a burst after an idle spell.
#pragma once

#include <algorithm>
#include <cstdint>

#include "transport/types.hpp"

namespace metaroce::transport {

class Pacer {
 public:
  static constexpr Time catch_up = 2'000;  // ns

  // True when a packet may leave at `now` (rate 0: unpaced).
  [[nodiscard]] bool ready(Time now, std::uint64_t rate_bps) const noexcept {
    return rate_bps == 0 || next_ <= now;
  }
  // A packet of `wire_bytes` (headers included) left at `now`.
  void sent(Time now, std::uint32_t wire_bytes, std::uint64_t rate_bps) noexcept {
    if (rate_bps == 0) {
      next_ = now;
      return;
    }
    const Time interval = static_cast<Time>(static_cast<double>(wire_bytes) * 8e9 / static_cast<double>(rate_bps));
    next_ = std::max(next_, now > catch_up ? now - catch_up : 0) + interval;
  }
  // When the next packet may leave.
  [[nodiscard]] Time next() const noexcept { return next_; }

 private:
  Time next_ = 0;
};

}  // namespace metaroce::transport
