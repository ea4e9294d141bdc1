// metaroce-perf --loopback --raw: the I/O ceiling under the transport, like
// perftest's raw_ethernet_bw. Frames of the size a WRITE of -s bytes takes
// on the wire (headers, payload, pad, ICRC) go over the same kind of
// net_ring pair the loopback uses, with no transport at all: the sender
// lcore takes mbufs, copies a frame into each and sends them in bursts; the
// receiver lcore reads every byte of every frame (prefetching the burst, as
// the engine does) and frees them. What is left of a message rate here is
// what the loopback can do on this machine, whatever the protocol.
//
// --verify checks every frame: its sequence number (frames stay in order
// on a ring) and every other byte against the pattern.
#pragma once

#include <cstdint>
#include <cstdio>

#include "metaroce-perf/loopback_run.hpp"
#include "metaroce-perf/perf_options.hpp"

namespace metaroce::perf {

// The bytes on the wire of one packet carrying `payload` bytes of a WRITE in
// `mode` (IPv4, no VLAN): Ethernet, IP, UDP, BTH, the mode's placement
// headers, payload, pad to 4, ICRC.
[[nodiscard]] std::uint32_t write_frame_bytes(transport::Mode mode, std::uint32_t payload) noexcept;

// Needs a started EAL. One result per size: `messages` are frames received,
// `packets_sent` frames sent.
RunResult run_raw(const PerfOptions& options, std::FILE* progress);

}  // namespace metaroce::perf
