#include "sim/switch_port.hpp"

#include <algorithm>
#include <utility>

#include "fabric/frame_peek.hpp"

namespace metaroce::sim {

std::string validate(const LinkConfig& config) {
  const fabric::EcnMarking& ecn = config.ecn;
  if (ecn.enabled && ecn.min_bytes > ecn.max_bytes)
    return "ECN marking: min (" + std::to_string(ecn.min_bytes) + " B) is above max (" +
           std::to_string(ecn.max_bytes) + " B)";
  if (ecn.enabled && !(ecn.max_probability >= 0.0 && ecn.max_probability <= 1.0))
    return "ECN marking: max probability must be in [0, 1]";
  return {};
}

SwitchPort::SwitchPort(const LinkConfig& config, std::uint64_t random_stream)
    : config_(config),
      queue_(config.rate_bps, config.overhead_bytes, config.limit_bytes, config.ecn),
      random_(config.seed, random_stream) {}

bool SwitchPort::enqueue(std::uint64_t now, std::size_t origin, std::vector<std::uint8_t> frame) {
  advance(now);
  const fabric::FramePeek peek = fabric::peek_frame(frame);
  const fabric::RateQueue::Admission admission = queue_.offer(now, frame.size(), peek.ect(), random_);
  if (!admission.accepted) {
    ++counters_.dropped_queue_full;
    return false;
  }
  ++counters_.enqueued;
  if (admission.mark_ce && fabric::set_ecn_ce(frame, peek)) ++counters_.ecn_marked;
  if (queue_.rate_bps() != 0) {  // without a rate the queue is always empty
    const std::uint64_t bytes = frame.size() + config_.overhead_bytes;
    backlog_.push_back({admission.departure_ns, bytes});
    backlog_bytes_ += bytes;
    counters_.peak_queued_bytes = std::max(counters_.peak_queued_bytes, backlog_bytes_);
    window_peak_bytes_ = std::max(window_peak_bytes_, backlog_bytes_);
  }
  // Departures never decrease and the delay is fixed, so the link is FIFO;
  // the max() only states it.
  last_due_ns_ = std::max(last_due_ns_, admission.departure_ns + config_.delay_ns);
  on_link_.push_back(Frame{last_due_ns_, origin, std::move(frame)});
  return true;
}

bool SwitchPort::pop_due(std::uint64_t now, Frame& out) {
  if (on_link_.empty() || on_link_.front().due_ns > now) return false;
  out = std::move(on_link_.front());
  on_link_.pop_front();
  ++counters_.forwarded;
  return true;
}

void SwitchPort::set_rate(std::uint64_t now, std::uint64_t rate_bps) {
  advance(now);
  queue_.set_rate(rate_bps);
}

void SwitchPort::advance(std::uint64_t now) {
  while (!backlog_.empty() && backlog_.front().departure_ns <= now) {
    integral_ += backlog_bytes_ * (backlog_.front().departure_ns - integral_time_ns_);
    integral_time_ns_ = backlog_.front().departure_ns;
    backlog_bytes_ -= backlog_.front().bytes;
    backlog_.pop_front();
  }
  integral_ += backlog_bytes_ * (now - integral_time_ns_);
  integral_time_ns_ = now;
}

std::uint64_t SwitchPort::integral_until(std::uint64_t now) const noexcept {
  std::uint64_t integral = integral_;
  std::uint64_t time = integral_time_ns_;
  std::uint64_t bytes = backlog_bytes_;
  for (const Backlog& queued : backlog_) {
    if (queued.departure_ns > now) break;
    integral += bytes * (queued.departure_ns - time);
    time = queued.departure_ns;
    bytes -= queued.bytes;
  }
  return now > time ? integral + bytes * (now - time) : integral;
}

std::uint64_t SwitchPort::queued_bytes(std::uint64_t now) const noexcept {
  std::uint64_t bytes = backlog_bytes_;
  for (const Backlog& queued : backlog_) {
    if (queued.departure_ns > now) break;
    bytes -= queued.bytes;
  }
  return bytes;
}

double SwitchPort::average_queued_bytes(std::uint64_t now) const noexcept {
  if (now <= window_start_ns_) return 0.0;
  return static_cast<double>(integral_until(now)) / static_cast<double>(now - window_start_ns_);
}

void SwitchPort::start_window(std::uint64_t now) {
  advance(now);
  integral_ = 0;
  window_start_ns_ = now;
  window_peak_bytes_ = backlog_bytes_;
}

}  // namespace metaroce::sim
