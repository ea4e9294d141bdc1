#include "cc/fair_share.hpp"

#include <algorithm>
#include <cmath>

namespace metaroce::cc {

FairShare::Sender& FairShare::find(std::uint32_t id) {
  for (Sender& s : senders_)
    if (s.id == id) return s;
  senders_.push_back(Sender{});
  senders_.back().id = id;
  return senders_.back();
}

void FairShare::roll_period(transport::Time now) {
  if (now < period_start_ + params_.measure_period) return;
  const double seconds = static_cast<double>(now - period_start_) / 1e9;
  for (Sender& s : senders_) {
    s.measured_bps = static_cast<double>(s.bytes_this_period) * 8 / seconds;
    s.bytes_this_period = 0;
    // What it was allowed while those bytes came: the hint of the period
    // (hints given from now on do not change how it is judged until the
    // next measurement, so judgements do not flip-flop within a period).
    s.hint_of_measured_period_bps = s.last_hint_bps;
  }
  period_start_ = now;
}

void FairShare::on_arrival(std::uint32_t sender, std::uint32_t bytes, transport::Time now) {
  roll_period(now);
  const std::size_t known = senders_.size();
  Sender& s = find(sender);
  if (senders_.size() != known || now - s.last_arrival > params_.active_window) ++generation_;
  s.last_arrival = now;
  s.bytes_this_period += bytes;
}

std::size_t FairShare::active_senders(transport::Time now) const {
  std::size_t n = 0;
  for (const Sender& s : senders_)
    if (now - s.last_arrival <= params_.active_window) ++n;
  return n;
}

std::uint32_t FairShare::share_mbps(std::uint32_t sender, transport::Time now) {
  roll_period(now);
  const double capacity = static_cast<double>(params_.capacity_bps);
  std::size_t active = 0;
  for (const Sender& s : senders_)
    if (now - s.last_arrival <= params_.active_window) ++active;
  if (active == 0) return static_cast<std::uint32_t>(capacity / 1e6);
  // Water-filling in one pass: light senders keep their use plus headroom,
  // the others split what remains.
  const double equal = capacity / static_cast<double>(active);
  double light_total = 0;
  std::size_t heavy = 0;
  double this_light = -1;
  for (const Sender& s : senders_) {
    if (now - s.last_arrival > params_.active_window) continue;
    // Light: it used well under the share it was last given, so it is
    // limited elsewhere (the application, another bottleneck). A sender
    // that uses its whole share is not light, whatever that share was.
    const bool light = s.measured_bps > 0 && s.hint_of_measured_period_bps > 0 &&
                       s.measured_bps < params_.light_fraction * s.hint_of_measured_period_bps;
    if (light) {
      const double keep = s.measured_bps * params_.light_headroom;
      light_total += keep;
      if (s.id == sender) this_light = keep;
    } else {
      ++heavy;
    }
  }
  const double share = this_light >= 0 ? this_light
                       : heavy == 0    ? equal
                                       : std::max(capacity - light_total, 0.0) / static_cast<double>(heavy);
  const double mbps = std::max(share / 1e6, 1.0);
  find(sender).last_hint_bps = mbps * 1e6;
  return static_cast<std::uint32_t>(std::llround(mbps));
}

}  // namespace metaroce::cc
