#include "engine/steering_check.hpp"

#include <fmt/format.h>

#include "wire/frame.hpp"

namespace metaroce::engine {

namespace {

// What host `h` took, from the port or from another lcore's hand-off.
std::uint64_t taken(const EngineHost& h) noexcept { return h.counters().rx_frames + h.counters().rx_handed_off; }

}  // namespace

bool check_steering(Node& sender, Node& receiver, SteeringCheck& result, std::string& error, int turns) {
  const std::uint16_t lcores = receiver.lcores();
  const std::uint16_t port = receiver.config().port_id;
  if (sender.lcores() != lcores) {
    error = fmt::format("port {}: the steering check needs as many lcores on both ends ({} and {})", port,
                        sender.lcores(), lcores);
    return false;
  }
  result = SteeringCheck{};
  result.arrived_on.assign(lcores, -1);
  for (std::uint16_t i = 0; i < lcores; ++i) {
    wire::FrameSpec s;
    s.bth.opcode = wire::opcode::mr_probe;  // headers only
    s.bth.dest_qp = steering_probe_qpn(i, lcores);
    std::vector<std::uint8_t> frame(256);
    frame.resize(wire::build_frame(s, {}, frame));
    if (!sender.host(i).send_frame(frame)) {
      error = fmt::format("port {}: cannot send the steering probe for lcore {}", sender.config().port_id, i);
      return false;
    }
    // The first of the receiver's lcores to take something took the probe
    // from the port (its owner sees it only on a later turn, from the ring).
    for (int turn = 0; turn < turns && result.arrived_on[i] < 0; ++turn) {
      for (std::uint16_t j = 0; j < lcores; ++j) sender.poll(j);
      for (std::uint16_t j = 0; j < lcores && result.arrived_on[i] < 0; ++j) {
        const std::uint64_t before = taken(receiver.host(j));
        receiver.poll(j);
        if (taken(receiver.host(j)) != before) result.arrived_on[i] = j;
      }
    }
    for (std::uint16_t j = 0; j < lcores; ++j) receiver.poll(j);  // a handed-off probe reaches its owner
    const int q = result.arrived_on[i];
    if (q < 0) {
      error = fmt::format("port {}: the steering probe for lcore {} did not arrive in {} turns: is the link up and "
                          "the peer polling?",
                          port, i, turns);
      return false;
    }
    if (q == i) continue;
    if (receiver.config().software_handoff) {
      ++result.handed_off;
      continue;
    }
    error = fmt::format("port {}: frames for lcore {}'s QPNs arrived on queue {}: the PMD does not steer by QPN; run "
                        "with software hand-off (the default for this PMD) or install a flow rule per queue on the "
                        "BTH destination QP (testpmd_command, doc/ENGINE.md \"Steering by destination QPN\")",
                        port, i, q);
    return false;
  }
  return true;
}

}  // namespace metaroce::engine
