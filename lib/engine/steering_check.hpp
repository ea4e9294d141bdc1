// The start-up check that a port's frames reach the lcore that owns their
// QPN (doc/ENGINE.md, "Steering by destination QPN"): one probe frame per
// queue, addressed to a QPN that queue's lcore owns, sent by the peer
// node's lcore of the same queue; the check sees which of the receiving
// node's queues took it from the port.
//
// Start-up only, from one thread, before the nodes' lcores run. Each probe
// is dropped by its owner and counted there as rx_steering_probes
// (rx_misdirected where it landed wrong without hand-off).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/node.hpp"
#include "host/host.hpp"

namespace metaroce::engine {

// The QPN a probe for lcore `lcore` of `lcores` is sent to (lib/host).
using host::steering_probe_qpn;

struct SteeringCheck {
  // By lcore: the receiver's queue its probe arrived on (-1: it did not).
  std::vector<int> arrived_on;
  // Probes that arrived on another queue and were handed off to their owner.
  std::uint16_t handed_off = 0;
};

// True when every probe arrived on its owner's queue, or arrived elsewhere
// and the receiver hands frames off in software; otherwise false with a
// one-line error naming the fix. `turns` bounds the polls per probe.
bool check_steering(Node& sender, Node& receiver, SteeringCheck& result, std::string& error, int turns = 1000);

}  // namespace metaroce::engine
