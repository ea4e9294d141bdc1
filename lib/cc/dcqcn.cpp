#include "cc/dcqcn.hpp"

#include <algorithm>

namespace metaroce::cc {

Dcqcn::Dcqcn(const DcqcnParams& params)
    : params_(params),
      current_(static_cast<double>(params.line_rate_bps)),
      target_(static_cast<double>(params.line_rate_bps)),
      alpha_(params.initial_alpha) {}

void Dcqcn::increase() {
  const std::uint32_t t = timer_events_;
  const std::uint32_t b = byte_events_;
  if (std::max(t, b) < params_.threshold) {
    // Fast recovery: back toward the rate before the cut.
  } else if (std::min(t, b) > params_.threshold) {
    target_ += static_cast<double>(params_.hai_rate_bps) * (std::min(t, b) - params_.threshold);
  } else {
    target_ += static_cast<double>(params_.ai_rate_bps);
  }
  target_ = std::min(target_, static_cast<double>(params_.line_rate_bps));
  current_ = std::min((current_ + target_) / 2, static_cast<double>(params_.line_rate_bps));
}

void Dcqcn::catch_up(transport::Time now) {
  if (!notified_) return;
  while (next_alpha_update_ <= now) {
    if (!cnp_in_alpha_period_) alpha_ *= 1 - params_.g;
    cnp_in_alpha_period_ = false;
    next_alpha_update_ += params_.alpha_period;
  }
  while (next_increase_ <= now) {
    ++timer_events_;
    increase();
    next_increase_ += params_.increase_period;
  }
}

void Dcqcn::on_send(std::uint16_t, std::uint32_t bytes, transport::Time now) {
  catch_up(now);
  if (!notified_) return;
  bytes_since_event_ += bytes;
  while (bytes_since_event_ >= params_.increase_bytes) {
    bytes_since_event_ -= params_.increase_bytes;
    ++byte_events_;
    increase();
  }
}

void Dcqcn::on_congestion_notification(transport::Time now) {
  catch_up(now);
  if (notified_ && now - last_cut_ < params_.rate_reduce_period) {
    cnp_in_alpha_period_ = true;
    return;
  }
  if (notified_) alpha_ = (1 - params_.g) * alpha_ + params_.g;
  notified_ = true;
  cnp_in_alpha_period_ = true;
  target_ = current_;
  current_ = std::max({current_ * (1 - alpha_ / 2), current_ * params_.min_decrease,
                       static_cast<double>(params_.min_rate_bps)});
  last_cut_ = now;
  next_alpha_update_ = now + params_.alpha_period;
  next_increase_ = now + params_.increase_period;
  timer_events_ = 0;
  byte_events_ = 0;
  bytes_since_event_ = 0;
  ++cuts_;
}

std::uint64_t Dcqcn::pacing_rate_bps(transport::Time now) {
  catch_up(now);
  return static_cast<std::uint64_t>(current_);
}

}  // namespace metaroce::cc
