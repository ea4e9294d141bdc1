// A deterministic network in virtual time (ns): endpoints joined pairwise by
// two fabric::Impairment directions, optionally behind a NIC line rate.
// Frames cross it as serialized bytes. Event-loop rules and the determinism
// guarantee: doc/FABRIC.md, "Simulator".
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "fabric/config.hpp"
#include "fabric/impairment.hpp"
#include "sim/endpoint.hpp"
#include "wire/headers.hpp"

namespace metaroce::sim {

using EndpointId = std::size_t;

// Used to route the frames of an endpoint that has more than one link: a
// frame goes to the peer whose MAC is its destination MAC, else whose IPv4 or
// IPv6 address is its destination address. Zero fields never match.
struct HostAddress {
  wire::MacAddress mac{};
  std::uint32_t ipv4 = 0;  // host order, as wire::Ipv4Header
  wire::Ipv6Address ipv6{};
};

struct HostConfig {
  HostAddress address{};
  std::uint64_t nic_rate_bps = 0;        // sender-side serialisation; 0 = none
  std::uint32_t nic_overhead_bytes = 0;  // added per frame at the NIC (24: preamble+IFG+FCS)
};

struct Delivery {
  std::uint64_t time = 0;
  EndpointId from = 0;
  EndpointId to = 0;
  std::span<const std::uint8_t> frame;
};

struct NetworkCounters {
  std::uint64_t sent = 0;        // frames endpoints handed to poll()'s `out`
  std::uint64_t delivered = 0;   // on_frame() calls
  std::uint64_t unroutable = 0;  // frames no link of their sender leads to: dropped
  std::uint64_t steps = 0;       // distinct event instants processed
};

class Network {
 public:
  Network() = default;
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  // The endpoint must outlive the network. Ids are given in order from 0.
  EndpointId add(Endpoint& endpoint, HostConfig config = {});

  // Joins a and b; at most one link per pair. Throws std::invalid_argument on
  // a bad id, a repeated pair or a bad fabric config.
  void connect(EndpointId a, EndpointId b, fabric::FabricConfig a_to_b, fabric::FabricConfig b_to_a);

  [[nodiscard]] std::uint64_t now() const noexcept { return now_; }

  // Processes every event at or before `t`, then sets now() to t.
  void run_until(std::uint64_t t);
  // Runs until `done()` holds (checked first and after every instant) or
  // `limit` is reached. Returns done(); now() is the instant it became true,
  // or `limit`.
  bool run_until(const std::function<bool()>& done, std::uint64_t limit);
  // Processes the next instant if it is at or before `limit`. False when there
  // is none.
  bool step(std::uint64_t limit);
  // The earliest pending event (fabric release, NIC departure, wake-up); UINT64_MAX if none.
  [[nodiscard]] std::uint64_t next_event_time() const;

  // Called for every delivery, before the endpoint's on_frame().
  void on_delivery(std::function<void(const Delivery&)> observer) { observer_ = std::move(observer); }

  [[nodiscard]] const fabric::Impairment& fabric(EndpointId from, EndpointId to) const;
  [[nodiscard]] fabric::Impairment& fabric(EndpointId from, EndpointId to);
  [[nodiscard]] const NetworkCounters& counters() const noexcept { return counters_; }
  [[nodiscard]] std::size_t endpoint_count() const noexcept { return hosts_.size(); }

  // Steps allowed at one instant before run_until() gives up: an endpoint
  // that keeps asking to be woken at now(), or frames ping-ponging over
  // zero-delay links, would otherwise never let time advance.
  static constexpr std::uint64_t max_steps_per_instant = 1'000'000;

 private:
  struct Link {
    EndpointId from;
    EndpointId to;
    fabric::Impairment impairment;
  };
  struct Host {
    Endpoint* endpoint;
    HostConfig config;
    std::unique_ptr<fabric::Impairment> nic;  // only with a NIC rate
    std::vector<std::size_t> links;           // indexes of the links leaving it
    bool poll_due = false;
  };

  [[nodiscard]] std::size_t link_index(EndpointId from, EndpointId to) const;
  void route(EndpointId from, std::vector<std::uint8_t> frame);
  void transmit(EndpointId from, std::vector<std::uint8_t> frame);

  std::vector<Host> hosts_;
  std::deque<Link> links_;  // deque: Impairment is not movable cheaply, addresses stay put
  std::uint64_t now_ = 0;
  std::uint64_t steps_at_now_ = 0;
  NetworkCounters counters_;
  std::function<void(const Delivery&)> observer_;
  std::vector<fabric::ReleasedFrame> released_;          // reused buffers
  std::vector<std::vector<std::uint8_t>> polled_;
};

}  // namespace metaroce::sim
