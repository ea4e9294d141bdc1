#include "fabric/rate_queue.hpp"

#include <algorithm>

#include "fabric/random.hpp"

namespace metaroce::fabric {

RateQueue::RateQueue(std::uint64_t rate_bps, std::uint32_t overhead_bytes, std::uint64_t limit_bytes,
                     EcnMarking ecn) noexcept
    : rate_bps_(rate_bps), overhead_bytes_(overhead_bytes), limit_bytes_(limit_bytes), ecn_(ecn) {}

void RateQueue::drain(std::uint64_t now_ps) {
  while (!queued_.empty() && queued_.front().departure_ps <= now_ps) {
    queued_bytes_ -= queued_.front().bytes;
    queued_.pop_front();
  }
}

std::uint64_t RateQueue::queued_bytes(std::uint64_t now) {
  drain(now * 1000);
  return queued_bytes_;
}

bool RateQueue::should_mark(std::uint64_t queued, Random& random) const {
  if (!ecn_.enabled || queued <= ecn_.min_bytes) return false;
  if (queued >= ecn_.max_bytes) return true;
  const double fraction = static_cast<double>(queued - ecn_.min_bytes) /
                          static_cast<double>(ecn_.max_bytes - ecn_.min_bytes);
  return random.chance(ecn_.max_probability * fraction);
}

RateQueue::Admission RateQueue::offer(std::uint64_t now, std::size_t frame_bytes, bool ect, Random& random) {
  Admission admission;
  if (rate_bps_ == 0) {
    admission.accepted = true;
    admission.departure_ns = now;
    return admission;
  }
  const std::uint64_t now_ps = now * 1000;
  drain(now_ps);
  const std::uint64_t bytes = frame_bytes + overhead_bytes_;
  admission.queued_bytes_before = queued_bytes_;
  if (limit_bytes_ != 0 && queued_bytes_ + bytes > limit_bytes_) return admission;
  admission.accepted = true;
  admission.mark_ce = ect && should_mark(queued_bytes_, random);
  busy_until_ps_ = std::max(busy_until_ps_, now_ps) + serialisation_ps(bytes, rate_bps_);
  admission.departure_ns = (busy_until_ps_ + 999) / 1000;
  queued_.push_back({busy_until_ps_, bytes});
  queued_bytes_ += bytes;
  return admission;
}

}  // namespace metaroce::fabric
