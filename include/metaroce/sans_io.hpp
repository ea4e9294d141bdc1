// The transport with no I/O at all: a host whose frames you carry. Hand it
// each frame that arrives (receive) and take the frames it has to send
// (transmit); time is whatever you pass in, in nanoseconds. This is the
// very code an Endpoint runs on DPDK and a Simulation runs in virtual time,
// for a behavioural model, a NIC's reference or a network of your own.
// Frames are whole Ethernet frames, the RoCEv2 ICRC included (doc/WIRE.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "metaroce/counters.hpp"
#include "metaroce/endpoint.hpp"
#include "metaroce/types.hpp"

namespace metaroce {

// Both ends of a connection are made with no connection manager: each
// side's config names the other's addresses, QPN and first PSN.
struct SansIoConnectionConfig {
  std::string mode = "metaroce";        // or "rocev2"
  std::string congestion = "metaroce";  // a lib/cc algorithm, or "none"
  std::uint16_t paths = 4;
  std::uint16_t streams = 1;
  std::uint32_t mtu = 4096;
  std::string local_mac, peer_mac;      // xx:xx:xx:xx:xx:xx
  std::string local_ip, peer_ip;        // both IPv4 or both IPv6
  std::uint32_t local_qpn = 0x100;      // 24 bits; packets for this end carry it
  std::uint32_t peer_qpn = 0x200;
  std::uint32_t initial_psn = 0;        // the first PSN this end sends ...
  std::uint32_t peer_initial_psn = 0;   // ... and the first it expects
  std::uint16_t first_src_port = 0;     // the first path's UDP source port (0: the default)
};

class SansIoHost {
 public:
  SansIoHost();
  ~SansIoHost();
  SansIoHost(const SansIoHost&) = delete;
  SansIoHost& operator=(const SansIoHost&) = delete;

  MemoryRegion register_memory(void* addr, std::size_t length, std::uint32_t access, std::string& error);
  bool deregister_memory(const MemoryRegion& region);

  // A connection, ready at once; nullptr and `error` when the config is not
  // usable. Its waits (wait_completion) do not wait: time moves only when
  // you call receive and transmit.
  Connection* add_connection(const SansIoConnectionConfig& config, std::string& error);
  // The connection and its unfinished work go (completed as flushed first).
  void remove_connection(Connection* connection);

  // One frame from the wire at `now_ns`. A frame that is not for this host,
  // or is malformed, is counted under its reason ("host" counters) and
  // dropped; none can write outside registered memory.
  void receive(std::uint64_t now_ns, std::span<const std::uint8_t> frame);
  // Fires the timers due at `now_ns`, then appends the frames to send now
  // to `out`; completions go to their connections. Returns how many frames.
  std::size_t transmit(std::uint64_t now_ns, std::vector<std::vector<std::uint8_t>>& out);
  // When transmit next has something to do with no frame arriving first
  // (a timer: a retransmission, an ACK, pacing); UINT64_MAX: nothing.
  [[nodiscard]] std::uint64_t next_deadline() const;

  // "host" and "connection" (summed over its connections).
  [[nodiscard]] std::vector<CounterGroup> counters() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace metaroce
