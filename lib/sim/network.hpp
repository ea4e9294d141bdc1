// A deterministic network in virtual time (ns): endpoints joined pairwise by
// two fabric::Impairment directions, optionally behind a NIC line rate, and
// switches whose output ports are rate-limited queues with finite buffers,
// ECN marking and ECMP trunks. Frames cross it as serialized bytes.
// Event-loop rules and the determinism guarantee: doc/FABRIC.md, "Simulator"
// and "Switches".
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "fabric/config.hpp"
#include "fabric/impairment.hpp"
#include "sim/endpoint.hpp"
#include "sim/switch_port.hpp"
#include "wire/headers.hpp"

namespace metaroce::sim {

using EndpointId = std::size_t;
using SwitchId = std::size_t;
using PortId = std::size_t;  // a switch's output ports, numbered from 0 in creation order

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
  std::uint64_t unroutable = 0;  // frames no link of their sender (or no switch route) leads to: dropped
  std::uint64_t steps = 0;       // distinct event instants processed
};

struct SwitchConfig {
  // From a frame's arrival (last bit in) to its offer to the output port.
  std::uint64_t forwarding_latency_ns = 0;
};

struct SwitchCounters {
  std::uint64_t received = 0;    // frames that arrived at the switch
  std::uint64_t unroutable = 0;  // no port leads to their destination: dropped
};

// N parallel links between two switches; link k of a -> b is port
// a_first + k of a, link k of b -> a is port b_first + k of b.
struct Trunk {
  SwitchId a = 0;
  SwitchId b = 0;
  std::uint32_t links = 0;
  PortId a_first = 0;
  PortId b_first = 0;

  [[nodiscard]] PortId a_port(std::uint32_t link) const noexcept { return a_first + link; }
  [[nodiscard]] PortId b_port(std::uint32_t link) const noexcept { return b_first + link; }
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

  // --- Switches (doc/FABRIC.md, "Switches") ---

  // Ids are given in order from 0.
  SwitchId add_switch(SwitchConfig config = {});

  // Joins `host` to `sw`: host -> switch is a fabric::Impairment (`up`: the
  // wire after the host's NIC: delay, loss, ...), switch -> host is the
  // switch's output port toward the host (`down`). Returns that port. At most
  // one link per (host, switch). Throws std::invalid_argument on a bad id, a
  // repeated pair or a bad config; then nothing is changed.
  PortId connect_host(EndpointId host, SwitchId sw, fabric::FabricConfig up, LinkConfig down);

  // An ECMP trunk of `links` parallel links (1..256) each way between two
  // distinct switches, every link an output port configured by `each`.
  // RoCE frames (UDP destination port 4791) take link
  // fabric::path_of_port(UDP source port, links); other frames link 0.
  Trunk connect_switches(SwitchId a, SwitchId b, std::uint32_t links, LinkConfig each);

  // From virtual time `at_ns` on (an event; a time already past applies at
  // now()), frames reaching the port serialise at `rate_bps` (> 0); frames
  // already queued keep their departure times.
  void set_port_rate(SwitchId sw, PortId port, std::uint64_t rate_bps, std::uint64_t at_ns);

  [[nodiscard]] std::size_t switch_count() const noexcept { return switches_.size(); }
  [[nodiscard]] std::size_t port_count(SwitchId sw) const;
  [[nodiscard]] const SwitchPort& port(SwitchId sw, PortId port) const;
  [[nodiscard]] SwitchPort& port(SwitchId sw, PortId port);  // start_window()
  // The port of `sw` that connect_host() made toward `host`.
  [[nodiscard]] PortId port_toward(SwitchId sw, EndpointId host) const;
  // Bytes queued at the port now (sample it between run_until() calls).
  [[nodiscard]] std::uint64_t queued_bytes(SwitchId sw, PortId port) const;
  [[nodiscard]] const SwitchCounters& switch_counters(SwitchId sw) const;
  // The host -> switch direction made by connect_host() (its counters).
  [[nodiscard]] const fabric::Impairment& uplink(EndpointId host, SwitchId sw) const;

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
  // The earliest pending event (fabric release, NIC departure, wake-up,
  // switch forwarding or port release, rate change); UINT64_MAX if none.
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
  static constexpr std::size_t none = ~std::size_t{0};

  struct Link {
    EndpointId from;
    EndpointId to;         // `none` for a host -> switch uplink
    fabric::Impairment impairment;
    SwitchId to_switch = none;
  };
  struct Host {
    Endpoint* endpoint;
    HostConfig config;
    std::unique_ptr<fabric::Impairment> nic;  // only with a NIC rate
    std::vector<std::size_t> links;           // indexes of the links leaving it (uplinks too)
    bool poll_due = false;
  };
  // Where a switch sends frames for one destination host.
  struct Hop {
    enum class Kind : std::uint8_t { none, port, trunk } kind = Kind::none;
    std::size_t index = 0;  // PortId, or index into trunks_
  };
  struct OutputPort {
    SwitchPort port;
    bool to_host;
    std::size_t peer;  // EndpointId or SwitchId
  };
  struct Forwarding {
    std::uint64_t ready_ns;
    EndpointId origin;
    std::vector<std::uint8_t> bytes;
  };
  struct Switch {
    SwitchConfig config;
    std::vector<OutputPort> ports;
    std::vector<std::size_t> trunks;     // indexes into trunks_, creation order
    std::deque<Forwarding> forwarding;   // frames inside the switch (forwarding latency)
    std::vector<Hop> routes;             // by destination EndpointId
    SwitchCounters counters;
  };
  struct RateChange {
    SwitchId sw;
    PortId port;
    std::uint64_t rate_bps;
  };

  [[nodiscard]] std::size_t link_index(EndpointId from, EndpointId to) const;
  void route(EndpointId from, std::vector<std::uint8_t> frame);
  void transmit(EndpointId from, std::vector<std::uint8_t> frame);
  void check_switch(SwitchId sw, const char* what) const;
  // Destination host of a frame: by destination MAC, else IPv4/IPv6 (lowest id wins).
  [[nodiscard]] EndpointId destination_of(std::span<const std::uint8_t> frame) const;
  void rebuild_routes();
  void arrive_at_switch(SwitchId sw, EndpointId origin, std::vector<std::uint8_t> frame);
  void forward(SwitchId sw, EndpointId origin, std::vector<std::uint8_t> frame);
  void deliver(EndpointId from, EndpointId to, std::span<const std::uint8_t> frame);

  std::vector<Host> hosts_;
  std::deque<Link> links_;  // deque: Impairment is not movable cheaply, addresses stay put
  std::uint64_t now_ = 0;
  std::uint64_t steps_at_now_ = 0;
  NetworkCounters counters_;
  std::function<void(const Delivery&)> observer_;
  std::vector<fabric::ReleasedFrame> released_;          // reused buffers
  std::vector<std::vector<std::uint8_t>> polled_;

  std::vector<Switch> switches_;
  std::vector<Trunk> trunks_;
  std::multimap<std::uint64_t, RateChange> rate_changes_;  // by time, then scheduling order
  std::uint64_t ports_made_ = 0;  // RED random stream of the next port
  bool routes_stale_ = false;
  // Address -> host, rebuilt with the routes (lookups only: no iteration order matters).
  std::map<wire::MacAddress, EndpointId> by_mac_;
  std::map<std::uint32_t, EndpointId> by_ipv4_;
  std::map<wire::Ipv6Address, EndpointId> by_ipv6_;
  SwitchPort::Frame popped_;
};

}  // namespace metaroce::sim
