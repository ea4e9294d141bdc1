// A transport host for the simulator: one timing wheel, one memory registry
// and any number of connections, demultiplexed by destination QPN. It is
// what an engine lcore will be, in virtual time and without DPDK.
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/endpoint.hpp"
#include "timer/wheel.hpp"
#include "transport/connection.hpp"
#include "wire/frame.hpp"

namespace metaroce::test {

class SimHost final : public sim::Endpoint {
 public:
  transport::Connection& add(const transport::ConnectionConfig& config,
                             std::unique_ptr<transport::CongestionControl> cc = nullptr) {
    std::string error;
    auto c = transport::Connection::create(config, memory_, wheel_, std::move(cc), error);
    if (!c) throw std::invalid_argument(error);
    auto& ref = *c;
    connections_[config.local_qpn] = std::move(c);
    return ref;
  }

  transport::MemoryRegistry& memory() noexcept { return memory_; }

  void on_frame(std::uint64_t now, std::span<const std::uint8_t> frame) override {
    advance(now);
    wire::ParsedFrame parsed;
    const wire::ParseError e = wire::parse_frame(frame, parsed);
    if (e != wire::ParseError::ok) {
      ++parse_errors[static_cast<std::size_t>(e)];
      return;
    }
    const auto it = connections_.find(parsed.bth.dest_qp);
    if (it == connections_.end()) {
      ++unknown_qpn;
      return;
    }
    it->second->on_frame(now, parsed);
  }

  void poll(std::uint64_t now, std::vector<std::vector<std::uint8_t>>& out) override {
    advance(now);
    for (auto& [qpn, c] : connections_) {
      batch_.clear();
      c->poll(now, batch_);
      for (std::size_t i = 0; i < batch_.size(); ++i) {
        std::vector<std::uint8_t> frame;
        frame.reserve(batch_.frame_size(i));
        batch_.serialize(i, frame);
        out.push_back(std::move(frame));
      }
    }
  }

  std::uint64_t next_wakeup() const override {
    for (const auto& [qpn, c] : connections_)
      if (c->wants_poll()) return last_now_;
    const timer::Tick t = wheel_.next_deadline();
    return t == timer::kNever ? UINT64_MAX : std::max<std::uint64_t>(t, last_now_);
  }

  std::array<std::uint64_t, wire::parse_error_count> parse_errors{};
  std::uint64_t unknown_qpn = 0;

 private:
  void advance(std::uint64_t now) {
    last_now_ = now;
    wheel_.advance(now);
  }

  transport::MemoryRegistry memory_;
  timer::Wheel wheel_{0};
  std::map<std::uint32_t, std::unique_ptr<transport::Connection>> connections_;
  transport::TxBatch batch_;
  std::uint64_t last_now_ = 0;
};

}  // namespace metaroce::test
