// The definitions of fabric::BasicImpairment (fabric/impairment.hpp). Include
// this only where a frame type is instantiated: impairment.cpp for byte
// vectors, lib/engine/impaired_link.cpp for mbufs.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "fabric/frame_peek.hpp"
#include "fabric/impairment.hpp"

namespace metaroce::fabric {

namespace impairment_detail {
// Stream ids: one generator per model (fabric/random.hpp).
enum Stream : std::uint64_t { queue_stream = 1, loss_stream, burst_stream, duplicate_stream,
                              corrupt_stream, jitter_stream, reorder_stream };

inline FabricConfig checked(FabricConfig config) {
  if (std::string error = validate(config); !error.empty())
    throw std::invalid_argument("fabric config: " + error);
  return config;
}
}  // namespace impairment_detail

template <FrameOps Ops>
BasicImpairment<Ops>::BasicImpairment(FabricConfig config, Ops ops)
    : config_(impairment_detail::checked(std::move(config))),
      ops_(std::move(ops)),
      gilbert_elliott_(config_.gemodel),
      queue_random_(config_.seed, impairment_detail::queue_stream),
      loss_random_(config_.seed, impairment_detail::loss_stream),
      burst_random_(config_.seed, impairment_detail::burst_stream),
      duplicate_random_(config_.seed, impairment_detail::duplicate_stream),
      corrupt_random_(config_.seed, impairment_detail::corrupt_stream),
      jitter_random_(config_.seed, impairment_detail::jitter_stream),
      reorder_random_(config_.seed, impairment_detail::reorder_stream) {
  for (std::uint32_t k = 0; k < config_.paths; ++k) path_delay_ns_.push_back(config_.path_delay_ns(k));
  path_last_due_ns_.assign(config_.paths, 0);
  const std::size_t queue_count = config_.queue_mode == QueueMode::per_path ? config_.paths : 1;
  for (std::size_t i = 0; i < queue_count; ++i)
    queues_.emplace_back(config_.rate_bps, config_.overhead_bytes, config_.limit_bytes, config_.ecn);
}

template <FrameOps Ops>
std::uint32_t BasicImpairment<Ops>::path_of(std::span<const std::uint8_t> frame) const noexcept {
  const FramePeek peek = peek_frame(frame);
  return peek.roce ? path_of_port(peek.udp_src_port, config_.paths) : 0;
}

template <FrameOps Ops>
void BasicImpairment<Ops>::set_rate(std::uint64_t rate_bps) noexcept {
  config_.rate_bps = rate_bps;
  for (RateQueue& queue : queues_) queue.set_rate(rate_bps);
}

template <FrameOps Ops>
void BasicImpairment<Ops>::add_blackhole(const Blackhole& blackhole) {
  if (blackhole.path != Blackhole::every_path && blackhole.path >= config_.paths)
    throw std::invalid_argument("fabric blackhole: path " + std::to_string(blackhole.path) +
                                " does not exist (paths " + std::to_string(config_.paths) + ")");
  config_.blackholes.push_back(blackhole);
}

template <FrameOps Ops>
bool BasicImpairment<Ops>::blackholed(std::uint32_t path, std::uint64_t now) const noexcept {
  return std::any_of(config_.blackholes.begin(), config_.blackholes.end(),
                     [&](const Blackhole& b) { return b.covers(path, now); });
}

template <FrameOps Ops>
void BasicImpairment<Ops>::submit(std::uint64_t now, Frame frame) {
  const std::uint64_t order = counters_.received++;
  const std::span<const std::uint8_t> bytes = ops_.bytes(frame);
  const FramePeek peek = peek_frame(bytes);
  const std::uint32_t path = peek.roce ? path_of_port(peek.udp_src_port, config_.paths) : 0;

  RateQueue& queue = queues_[queues_.size() == 1 ? 0 : path];
  const RateQueue::Admission admission = queue.offer(now, bytes.size(), peek.ect(), queue_random_);
  if (!admission.accepted) {
    ++counters_.dropped_queue_full;
    return;
  }
  if (admission.mark_ce) {
    const std::optional<std::span<std::uint8_t>> writable = ops_.writable(frame);
    if (!writable) {
      ++counters_.dropped_no_buffer;
      return;
    }
    if (set_ecn_ce(*writable, peek)) ++counters_.ecn_marked;
  }

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
    Frame copy{};
    const bool copied = ops_.duplicate(frame, copy);
    schedule(due, order, path, std::move(frame));
    if (copied) {
      schedule(due, order, path, std::move(copy));
    } else {
      ++counters_.dropped_no_buffer;  // the copy that could not be made
    }
  } else {
    schedule(due, order, path, std::move(frame));
  }
}

template <FrameOps Ops>
void BasicImpairment<Ops>::schedule(std::uint64_t due_ns, std::uint64_t order, std::uint32_t path, Frame frame) {
  if (corrupt_random_.chance(config_.corrupt)) {
    const std::optional<std::span<std::uint8_t>> writable = ops_.writable(frame);
    if (!writable) {
      ++counters_.dropped_no_buffer;
      return;
    }
    if (flip_random_bit(*writable, peek_frame(*writable), corrupt_random_)) ++counters_.corrupted;
  }
  in_flight_.push_back({due_ns, next_seq_++, order, path, std::move(frame)});
  std::push_heap(in_flight_.begin(), in_flight_.end(), LaterFirst{});
}

template <FrameOps Ops>
template <class Sink>
std::size_t BasicImpairment<Ops>::release_to(std::uint64_t now, Sink&& sink) {
  std::size_t released = 0;
  while (!in_flight_.empty() && in_flight_.front().due_ns <= now) {
    std::pop_heap(in_flight_.begin(), in_flight_.end(), LaterFirst{});
    InFlight& frame = in_flight_.back();
    if (frame.order + 1 < released_order_end_) {
      ++counters_.reordered;
    } else {
      released_order_end_ = frame.order + 1;
    }
    ++counters_.forwarded;
    ++released;
    sink(frame.due_ns, frame.path, std::move(frame.frame));
    in_flight_.pop_back();
  }
  return released;
}

template <FrameOps Ops>
std::size_t BasicImpairment<Ops>::release(std::uint64_t now, std::vector<ReleasedFrame>& out)
  requires std::same_as<typename Ops::Frame, ByteFrame>
{
  return release_to(now, [&out](std::uint64_t due_ns, std::uint32_t path, Frame&& frame) {
    out.push_back({due_ns, path, std::move(frame)});
  });
}

}  // namespace metaroce::fabric
