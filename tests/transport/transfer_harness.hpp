// A verified transfer between two simulated hosts: random messages on
// several streams, mixing WRITE, WRITE_IMM and SEND, every byte checked,
// every completion checked for order and uniqueness, canaries around every
// registered region, window limits sampled at every simulator step.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "fabric/config.hpp"
#include "fabric/counters.hpp"
#include "sim/network.hpp"
#include "host/sim_endpoint.hpp"
#include "cc/fair_share.hpp"
#include "cc/registry.hpp"
#include "transport/connection.hpp"

namespace metaroce::test {

struct TransferSpec {
  std::uint16_t paths = 8;  // of the connection in metaroce mode; rocev2 always uses 1
  std::uint16_t streams = 4;
  std::uint32_t mtu = 4096;
  std::size_t messages = 10'000;
  std::uint64_t max_message = 1u << 20;  // sizes log-uniform in [1, max]
  std::uint64_t seed = 1;
  fabric::FabricConfig forward{};   // data direction
  fabric::FabricConfig backward{};  // ACK direction
  std::uint64_t nic_rate_bps = 100'000'000'000;
  std::uint64_t time_limit_ns = 60'000'000'000;  // virtual
  std::size_t max_outstanding_messages = 256;
  bool sends = true;  // include SEND (needs posted receives)
  // Include READ (the receiver's pattern-filled bytes into the sender's)
  // and FETCH_ADD of 1 on one of atomic_counters counters at the receiver:
  // each returned value must be seen exactly once and the counters end at
  // the number of increments.
  bool reads = false;
  bool atomics = false;
  std::uint32_t atomic_counters = 4;
  // mode, windows, timers (addresses are filled in). base.mode selects the
  // connection's implementation: Mode::rocev2 runs the go-back-N baseline.
  transport::ConnectionConfig base{};
  // Congestion control of both ends, by name (lib/cc); with "fixed" the
  // windows below, which the harness also checks are never exceeded.
  std::string cc = "fixed";
  std::uint32_t fixed_path_window = 16;
  std::uint32_t fixed_connection_window = 96;
  std::uint64_t receive_capacity_bps = 0;  // > 0: the receiver gives fair-share hints (cc::FairShare)
  // Both ends secure (Host::set_security, fixed test keys): every frame
  // sealed and checked.
  bool secure = false;
  secure::Protection protection = secure::Protection::encrypt;
  std::uint64_t rotate_after_frames = secure::default_rotate_after;  // both directions' key epochs
};

struct TransferResult {
  bool finished = false;
  std::string error;  // first violated expectation, empty if none
  std::uint64_t virtual_ns = 0;
  std::uint64_t bytes_verified = 0;
  std::uint64_t messages_completed = 0;
  std::uint64_t reads_verified = 0;
  std::uint64_t atomics_verified = 0;
  std::uint64_t data_frames_sent = 0;       // by the sender, all transmissions
  std::uint64_t data_frames_delivered = 0;  // to the receiver (after the fabric), parsed intact
  std::uint64_t max_path_in_flight = 0;
  std::uint64_t max_outstanding_psns = 0;
  transport::ConnectionCounters sender{};
  transport::ConnectionCounters receiver{};
  std::vector<transport::PathInfo> paths;
  fabric::FabricCounters forward_counters{};
  fabric::FabricCounters backward_counters{};
  std::array<std::uint64_t, wire::parse_error_count> receiver_parse_errors{};

  // Data frames that never reached the receiver intact.
  [[nodiscard]] std::uint64_t data_frames_lost() const noexcept {
    return data_frames_sent + forward_counters.duplicated - data_frames_delivered;
  }
};

TransferResult run_transfer(const TransferSpec& spec);

}  // namespace metaroce::test
