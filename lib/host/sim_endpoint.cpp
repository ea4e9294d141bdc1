#include "host/sim_endpoint.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace metaroce::host {
namespace {

// An empty buffer at the end of `to` for a frame of `bytes`: for a large
// frame one of the network's spares (capacity kept) when it has one, else
// a new one. Small frames (ACKs) are left to the allocator, so that they do
// not take a full frame's buffer.
std::vector<std::uint8_t>& frame_buffer(std::vector<std::vector<std::uint8_t>>& to,
                                        std::vector<std::vector<std::uint8_t>>* spares, std::size_t bytes) {
  std::vector<std::uint8_t>& f = to.emplace_back();
  if (bytes >= sim::Endpoint::spare_buffer_bytes && spares != nullptr && !spares->empty()) {
    f.swap(spares->back());
    spares->pop_back();
  }
  f.reserve(bytes);
  return f;
}

}  // namespace

SimEndpoint::SimEndpoint(const HostConfig& config) : host_(config) {}

transport::Connection& SimEndpoint::add(const transport::ConnectionConfig& config,
                                        std::unique_ptr<transport::CongestionControl> cc) {
  std::string error;
  transport::Connection* c = host_.add_connection(config, std::move(cc), error);
  if (c == nullptr) throw std::invalid_argument(error);
  return *c;
}

void SimEndpoint::on_frame(std::uint64_t now, std::span<const std::uint8_t> frame) {
  last_now_ = now;
  host_.advance(now);
  host_.receive(now, frame);
}

void SimEndpoint::poll(std::uint64_t now, std::vector<std::vector<std::uint8_t>>& out) {
  last_now_ = now;
  host_.advance(now);
  sink_.out = &out;
  host_.transmit(now, sink_);
  sink_.out = nullptr;
}

std::uint64_t SimEndpoint::next_wakeup() const {
  const std::uint64_t t = host_.next_deadline(last_now_);
  return t == timer::kNever ? UINT64_MAX : std::max(t, last_now_);
}

std::size_t SimEndpoint::CopySink::take(const transport::TxBatch& batch, std::size_t first) {
  for (std::size_t i = first; i < batch.size(); ++i) {
    batch.serialize(i, frame_buffer(*out, spares.get(), batch.frame_size(i)));
  }
  return batch.size() - first;
}

bool SimEndpoint::CopySink::take_copy(std::span<const std::uint8_t> frame) {
  frame_buffer(*out, spares.get(), frame.size()).assign(frame.begin(), frame.end());
  return true;
}

MultiportSimEndpoint::MultiportSimEndpoint(std::uint16_t ports, const HostConfig& config) : host_(config) {
  if (ports == 0) throw std::invalid_argument("a multiport host needs at least one port");
  for (std::uint16_t k = 0; k < ports; ++k) ports_.push_back(std::make_unique<Port>(*this, k));
  sink_.ports = &ports_;
  sink_.host = &host_;
}

transport::Connection& MultiportSimEndpoint::add(const transport::ConnectionConfig& config,
                                                 std::unique_ptr<transport::CongestionControl> cc) {
  std::string error;
  transport::Connection* c = host_.add_connection(config, std::move(cc), error);
  if (c == nullptr) throw std::invalid_argument(error);
  return *c;
}

void MultiportSimEndpoint::pump(std::uint64_t now) {
  last_now_ = now;
  host_.advance(now);
  host_.transmit(now, sink_);
}

void MultiportSimEndpoint::Port::on_frame(std::uint64_t now, std::span<const std::uint8_t> frame) {
  owner_.last_now_ = now;
  owner_.host_.advance(now);
  owner_.host_.receive(now, frame);
}

void MultiportSimEndpoint::Port::poll(std::uint64_t now, std::vector<std::vector<std::uint8_t>>& out) {
  // The network polls ports in id order: the first polled at an instant
  // runs the host, and every port takes what it was given.
  owner_.pump(now);
  for (auto& f : outbox) out.push_back(std::move(f));
  outbox.clear();
  (void)index_;
}

std::uint64_t MultiportSimEndpoint::Port::next_wakeup() const {
  if (!outbox.empty()) return owner_.last_now_;
  const std::uint64_t t = owner_.host_.next_deadline(owner_.last_now_);
  return t == timer::kNever ? UINT64_MAX : std::max(t, owner_.last_now_);
}

std::size_t MultiportSimEndpoint::SplitSink::take(const transport::TxBatch& batch, std::size_t first) {
  for (std::size_t i = first; i < batch.size(); ++i) {
    const std::uint16_t port = batch[i].port;
    if (port >= ports->size()) {
      ++no_such_port;
      continue;
    }
    if (!host->port_link_up(port)) {
      ++link_down;
      continue;
    }
    batch.serialize(i, frame_buffer((*ports)[port]->outbox, spares.get(), batch.frame_size(i)));
  }
  return batch.size() - first;
}

bool MultiportSimEndpoint::SplitSink::take_copy(std::span<const std::uint8_t> frame) {
  if (!host->port_link_up(0)) {
    ++link_down;
    return true;
  }
  frame_buffer((*ports)[0]->outbox, spares.get(), frame.size()).assign(frame.begin(), frame.end());
  return true;
}

}  // namespace metaroce::host
