#include "host/sim_endpoint.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace metaroce::host {

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
    out->emplace_back();
    out->back().reserve(batch.frame_size(i));
    batch.serialize(i, out->back());
  }
  return batch.size() - first;
}

bool SimEndpoint::CopySink::take_copy(std::span<const std::uint8_t> frame) {
  out->emplace_back(frame.begin(), frame.end());
  return true;
}

}  // namespace metaroce::host
