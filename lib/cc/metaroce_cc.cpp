#include "cc/metaroce_cc.hpp"

#include <algorithm>
#include <cmath>

namespace metaroce::cc {

MetaroceCc::MetaroceCc(const MetaroceCcParams& params) : params_(params), paths_(params.paths) {
  // alpha starts at 1, as Linux's DCTCP does: the first marked round halves
  // the window, and alpha decays from there while rounds stay clear.
  for (Path& p : paths_) {
    p.window = std::clamp(params_.initial_window / params_.paths, params_.min_path_window, params_.max_path_window);
    p.alpha = 1;
  }
}

void MetaroceCc::on_send(std::uint16_t, std::uint32_t, transport::Time) {}

void MetaroceCc::on_ack(std::uint16_t path, std::uint32_t packets_acked, std::uint32_t ce_marks,
                        transport::Time rtt_sample, transport::Time now) {
  Path& p = paths_[path];
  if (rtt_sample != 0) p.rtt = rtt_sample;
  p.acked_in_round += packets_acked;
  p.marked_in_round += std::min(ce_marks, packets_acked);
  if (ce_marks == 0 && packets_acked != 0) {
    p.window = std::min(params_.max_path_window, p.window + params_.additive_increase * packets_acked / p.window);
  }
  if (now >= p.round_end && p.acked_in_round != 0) {
    const double fraction = static_cast<double>(p.marked_in_round) / p.acked_in_round;
    p.alpha = (1 - params_.g) * p.alpha + params_.g * fraction;
    if (p.marked_in_round != 0) p.window = std::max(params_.min_path_window, p.window * (1 - p.alpha / 2));
    p.acked_in_round = 0;
    p.marked_in_round = 0;
    p.round_end = now + std::max(p.rtt, params_.min_round);
  }
}

void MetaroceCc::on_loss(std::uint16_t, transport::Time) {
  // Random loss is not congestion: the SACK resends the packet, the window
  // stays. Congestion shows as ECN marks long before queues overflow.
}

void MetaroceCc::on_rate_hint(std::uint32_t mbps, transport::Time) { hint_bps_ = std::uint64_t{mbps} * 1'000'000; }

std::uint32_t MetaroceCc::path_window(std::uint16_t path) const {
  return static_cast<std::uint32_t>(std::floor(paths_[path].window));
}

std::uint32_t MetaroceCc::connection_window() const {
  double sum = 0;
  for (const Path& p : paths_) sum += p.window;
  return std::min(params_.max_connection_window, static_cast<std::uint32_t>(sum));
}

std::uint64_t MetaroceCc::pacing_rate_bps(transport::Time) { return hint_bps_; }

}  // namespace metaroce::cc
