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
  void use_spare_buffers(sim::Endpoint::SpareBuffers spares) override { sink_.spares = std::move(spares); }

 private:
  // Copies every frame out: the simulated network always has room.
  class CopySink final : public FrameSink {
   public:
    std::size_t take(const transport::TxBatch& batch, std::size_t first) override;
    bool take_copy(std::span<const std::uint8_t> frame) override;
    [[nodiscard]] std::size_t max_copied_frame() const override { return SIZE_MAX; }
    std::vector<std::vector<std::uint8_t>>* out = nullptr;
    sim::Endpoint::SpareBuffers spares;  // the network's, when it gives them
  };

  Host host_;
  CopySink sink_;
  std::uint64_t last_now_ = 0;
};

// A host with several ports in the simulator, one per plane: each port is
// an endpoint of its own (its own address, NIC and links, added to the
// network in port order), and a frame leaves through the port its transmit
// descriptor names (TxDescriptor::port; frames the host builds itself,
// such as ARP and CM, through port 0). Frames arriving on any port go to
// the one host.
class MultiportSimEndpoint {
 public:
  explicit MultiportSimEndpoint(std::uint16_t ports, const HostConfig& config = {});

  transport::Connection& add(const transport::ConnectionConfig& config,
                             std::unique_ptr<transport::CongestionControl> cc = nullptr);
  [[nodiscard]] Host& host() noexcept { return host_; }
  [[nodiscard]] transport::MemoryRegistry& memory() noexcept { return host_.memory(); }
  [[nodiscard]] std::uint16_t ports() const noexcept { return static_cast<std::uint16_t>(ports_.size()); }
  // Port k's endpoint, for sim::Network::add.
  [[nodiscard]] sim::Endpoint& port(std::uint16_t k) noexcept { return *ports_[k]; }
  // Frames whose descriptor named a port this host does not have: dropped.
  [[nodiscard]] std::uint64_t tx_no_such_port() const noexcept { return sink_.no_such_port; }
  // Port k's link goes down or comes back: the host and its connections
  // are told (Host::set_port_link), and while it is down the frames for it
  // are dropped (tx_dropped_link_down), as a NIC whose link is down does.
  void set_port_link(std::uint64_t now, std::uint16_t port, bool up) { host_.set_port_link(now, port, up); }
  [[nodiscard]] std::uint64_t tx_dropped_link_down() const noexcept { return sink_.link_down; }

 private:
  class Port final : public sim::Endpoint {
   public:
    Port(MultiportSimEndpoint& owner, std::uint16_t index) : owner_(owner), index_(index) {}
    void on_frame(std::uint64_t now, std::span<const std::uint8_t> frame) override;
    void poll(std::uint64_t now, std::vector<std::vector<std::uint8_t>>& out) override;
    [[nodiscard]] std::uint64_t next_wakeup() const override;
    void use_spare_buffers(sim::Endpoint::SpareBuffers spares) override { owner_.sink_.spares = std::move(spares); }
    std::vector<std::vector<std::uint8_t>> outbox;

   private:
    MultiportSimEndpoint& owner_;
    std::uint16_t index_;
  };
  class SplitSink final : public FrameSink {
   public:
    std::size_t take(const transport::TxBatch& batch, std::size_t first) override;
    bool take_copy(std::span<const std::uint8_t> frame) override;
    [[nodiscard]] std::size_t max_copied_frame() const override { return SIZE_MAX; }
    std::vector<std::unique_ptr<Port>>* ports = nullptr;
    const Host* host = nullptr;
    sim::Endpoint::SpareBuffers spares;  // the network's, when it gives them
    std::uint64_t no_such_port = 0;
    std::uint64_t link_down = 0;
  };
  // Polls the host once at `now`: its frames go to the ports' outboxes.
  void pump(std::uint64_t now);

  Host host_;
  std::vector<std::unique_ptr<Port>> ports_;
  SplitSink sink_;
  std::uint64_t last_now_ = 0;
};

}  // namespace metaroce::host
