// A host in the simulator: the engine's host (host.hpp) driven in virtual
// time, its frames copied into and out of the simulated network.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "host/host.hpp"
#include "sim/endpoint.hpp"

namespace metaroce::host {

class SimEndpoint final : public sim::Endpoint {
 public:
  explicit SimEndpoint(const HostConfig& config = {});

  // Adds a connection; throws std::invalid_argument (with the reason) when
  // the host refuses it.
  transport::Connection& add(const transport::ConnectionConfig& config,
                             std::unique_ptr<transport::CongestionControl> cc = nullptr);
  [[nodiscard]] Host& host() noexcept { return host_; }
  [[nodiscard]] transport::MemoryRegistry& memory() noexcept { return host_.memory(); }
  [[nodiscard]] const HostCounters& counters() const noexcept { return host_.counters(); }

  void on_frame(std::uint64_t now, std::span<const std::uint8_t> frame) override;
  void poll(std::uint64_t now, std::vector<std::vector<std::uint8_t>>& out) override;
  [[nodiscard]] std::uint64_t next_wakeup() const override;

 private:
  // Copies every frame out: the simulated network always has room.
  class CopySink final : public FrameSink {
   public:
    std::size_t take(const transport::TxBatch& batch, std::size_t first) override;
    bool take_copy(std::span<const std::uint8_t> frame) override;
    [[nodiscard]] std::size_t max_copied_frame() const override { return SIZE_MAX; }
    std::vector<std::vector<std::uint8_t>>* out = nullptr;
  };

  Host host_;
  CopySink sink_;
  std::uint64_t last_now_ = 0;
};

}  // namespace metaroce::host
