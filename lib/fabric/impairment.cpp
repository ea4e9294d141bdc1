#include "fabric/impairment.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "fabric/frame_peek.hpp"

namespace metaroce::fabric {

namespace {
// Stream ids: one generator per model (fabric/random.hpp).
enum Stream : std::uint64_t { queue_stream = 1, loss_stream, burst_stream, duplicate_stream,
                              corrupt_stream, jitter_stream, reorder_stream };

FabricConfig checked(FabricConfig config) {
  if (std::string error = validate(config); !error.empty())
    throw std::invalid_argument("fabric config: " + error);
  return config;
}
}  // namespace

Impairment::Impairment(FabricConfig config)
    : config_(checked(std::move(config))),
      gilbert_elliott_(config_.gemodel),
      queue_random_(config_.seed, queue_stream),
      loss_random_(config_.seed, loss_stream),
      burst_random_(config_.seed, burst_stream),
      duplicate_random_(config_.seed, duplicate_stream),
      corrupt_random_(config_.seed, corrupt_stream),
      jitter_random_(config_.seed, jitter_stream),
      reorder_random_(config_.seed, reorder_stream) {
  for (std::uint32_t k = 0; k < config_.paths; ++k) path_delay_ns_.push_back(config_.path_delay_ns(k));
  path_last_due_ns_.assign(config_.paths, 0);
  const std::size_t queue_count = config_.queue_mode == QueueMode::per_path ? config_.paths : 1;
  for (std::size_t i = 0; i < queue_count; ++i)
    queues_.emplace_back(config_.rate_bps, config_.overhead_bytes, config_.limit_bytes, config_.ecn);
}

std::uint32_t Impairment::path_of(std::span<const std::uint8_t> frame) const noexcept {
  const FramePeek peek = peek_frame(frame);
  return peek.roce ? path_of_port(peek.udp_src_port, config_.paths) : 0;
}

void Impairment::set_rate(std::uint64_t rate_bps) noexcept {
  config_.rate_bps = rate_bps;
  for (RateQueue& queue : queues_) queue.set_rate(rate_bps);
}

void Impairment::add_blackhole(const Blackhole& blackhole) {
  if (blackhole.path >= config_.paths)
    throw std::invalid_argument("fabric blackhole: path " + std::to_string(blackhole.path) +
                                " does not exist (paths " + std::to_string(config_.paths) + ")");
  config_.blackholes.push_back(blackhole);
}

bool Impairment::blackholed(std::uint32_t path, std::uint64_t now) const noexcept {
  return std::any_of(config_.blackholes.begin(), config_.blackholes.end(),
                     [&](const Blackhole& b) { return b.covers(path, now); });
}

void Impairment::submit(std::uint64_t now, std::vector<std::uint8_t> frame) {
  const std::uint64_t order = counters_.received++;
  const FramePeek peek = peek_frame(frame);
  const std::uint32_t path = peek.roce ? path_of_port(peek.udp_src_port, config_.paths) : 0;

  RateQueue& queue = queues_[queues_.size() == 1 ? 0 : path];
  const RateQueue::Admission admission = queue.offer(now, frame.size(), peek.ect(), queue_random_);
  if (!admission.accepted) {
    ++counters_.dropped_queue_full;
    return;
  }
  if (admission.mark_ce && set_ecn_ce(frame, peek)) ++counters_.ecn_marked;

  if (blackholed(path, now)) {
    ++counters_.dropped_blackhole;
    return;
  }
  if (loss_random_.chance(config_.loss)) {
    ++counters_.dropped_random_loss;
    return;
  }
  if (config_.gemodel.enabled() && gilbert_elliott_.lose(burst_random_)) {
    ++counters_.dropped_burst_loss;
    return;
  }

  std::uint64_t delay = path_delay_ns_[path];
  if (config_.jitter_ns != 0) {
    const std::uint64_t offset = jitter_random_.below(2 * config_.jitter_ns + 1);  // jitter + [-j, +j]
    delay = delay + offset >= config_.jitter_ns ? delay + offset - config_.jitter_ns : 0;
  }
  std::uint64_t due = std::max(admission.departure_ns + delay, path_last_due_ns_[path]);
  if (reorder_random_.chance(config_.reorder)) {
    // Held back without holding back the frames behind it: they overtake it.
    due += config_.reorder_gap_ns;
    ++counters_.reordered_in_path;
  } else {
    path_last_due_ns_[path] = due;
  }

  if (duplicate_random_.chance(config_.duplicate)) {
    ++counters_.duplicated;
    std::vector<std::uint8_t> copy = frame;
    schedule(due, order, path, std::move(frame));
    schedule(due, order, path, std::move(copy));
  } else {
    schedule(due, order, path, std::move(frame));
  }
}

void Impairment::schedule(std::uint64_t due_ns, std::uint64_t order, std::uint32_t path,
                          std::vector<std::uint8_t> bytes) {
  if (corrupt_random_.chance(config_.corrupt) && flip_random_bit(bytes, peek_frame(bytes), corrupt_random_))
    ++counters_.corrupted;
  in_flight_.push_back({due_ns, next_seq_++, order, path, std::move(bytes)});
  std::push_heap(in_flight_.begin(), in_flight_.end(), LaterFirst{});
}

std::size_t Impairment::release(std::uint64_t now, std::vector<ReleasedFrame>& out) {
  std::size_t released = 0;
  while (!in_flight_.empty() && in_flight_.front().due_ns <= now) {
    std::pop_heap(in_flight_.begin(), in_flight_.end(), LaterFirst{});
    InFlight& frame = in_flight_.back();
    if (frame.order + 1 < released_order_end_) {
      ++counters_.reordered;
    } else {
      released_order_end_ = frame.order + 1;
    }
    out.push_back({frame.due_ns, frame.path, std::move(frame.bytes)});
    in_flight_.pop_back();
    ++counters_.forwarded;
    ++released;
  }
  return released;
}

}  // namespace metaroce::fabric
