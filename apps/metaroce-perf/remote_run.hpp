// metaroce-perf --server / --client: one end per process, each on a real
// DPDK port (a drivers-config preset, e.g. net_af_packet on a veth), joined
// by the in-band connection manager (lib/cm). One connection per message
// size, or -q of them (message m on connection m % q as its message m / q):
// each REQ says what the client will send on it (operation, size, slots,
// verify, which of the q it is); the server's REP gives the buffer address
// and rkey; each DREQ says how many messages that connection completed and
// the server's DREP answers with what it received and verified, so the
// client's table and exit status cover both ends. The server keeps up to
// --max-connections open at once and refuses more. With --lcores N each
// end is N lanes (metaroce::Endpoint::open_lanes), a thread each driving
// queue k with its own connection manager: client lane k carries
// connections k, k + N, .. and their share of -n, the lanes in step size
// by size (doc/ENGINE.md, "Lanes").
#pragma once

#include <cstdio>
#include <string>

#include "metaroce-perf/loopback_run.hpp"
#include "metaroce-perf/perf_options.hpp"

namespace metaroce::perf {

// Each opens a metaroce::Endpoint (include/metaroce), which starts EAL:
// from the preset (its lcores, memory, hugepages and vdev; --iface replaces
// the vdev's iface=), or from the EAL arguments after `--`, with a
// per-process file prefix so that two run on one host. `progress` gets a
// line each second and the server's per-connection summaries.
RunResult run_server(const PerfOptions& options, std::FILE* progress);
RunResult run_client(const PerfOptions& options, std::FILE* progress);

}  // namespace metaroce::perf
