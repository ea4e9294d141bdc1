// The transport in virtual time: two simulated hosts joined by a simulated
// fabric (loss, delay, paths, rate) that run exactly the code an Endpoint
// runs over DPDK, without DPDK, a port or a clock. Deterministic: the same
// program gives the same result, byte for byte. Connections are the same
// metaroce::Connection as an endpoint's; their waits run in virtual time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "metaroce/counters.hpp"
#include "metaroce/endpoint.hpp"
#include "metaroce/types.hpp"

namespace metaroce {

// One direction between the two hosts.
struct SimulatedLink {
  double gbps = 100.0;                  // the sending NIC's rate
  std::uint64_t one_way_delay_ns = 5'000;
  std::uint32_t fabric_paths = 8;       // ECMP paths: a connection's paths hash onto them
  double loss = 0.0;                    // each frame lost with this probability
  std::uint64_t seed = 1;               // the loss draws
};

struct SimulatedConnectOptions {
  std::string mode = "metaroce";        // or "rocev2": go-back-N over one path, the baseline
  std::string congestion = "metaroce";  // a lib/cc algorithm, or "none" (fixed windows)
  std::uint16_t paths = 8;
  std::uint16_t streams = 1;
  std::uint32_t mtu = 4096;
};

class Simulation {
 public:
  enum class Side : std::uint8_t { a, b };

  Simulation(const SimulatedLink& a_to_b, const SimulatedLink& b_to_a);
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  MemoryRegion register_memory(Side side, void* addr, std::size_t length, std::uint32_t access, std::string& error);

  // A connection between the two hosts, established at once (no connection
  // manager in virtual time): first its end on a, then its end on b.
  // {nullptr, nullptr} and `error` when the options are not usable.
  std::pair<Connection*, Connection*> connect(const SimulatedConnectOptions& options, std::string& error);

  // Advances virtual time to the next event (frames, timers) and delivers
  // completions. False when nothing is left to happen.
  bool step();
  // Steps until `done()` or until `virtual_seconds` of virtual time passed.
  bool run_until(const std::function<bool()>& done, double virtual_seconds);
  [[nodiscard]] std::uint64_t now_ns() const noexcept;

  // "host" and "connection" (summed over the side's connections).
  [[nodiscard]] std::vector<CounterGroup> counters(Side side) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace metaroce
