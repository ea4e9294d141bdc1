// metaroce-perf's command line: perftest's flag names (spelled with '-'),
// the app's options before `--`, EAL's after it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/command_line.hpp"
#include "common/plane_ports.hpp"
#include "common/rocev2_options.hpp"

#include "secure/keys.hpp"
#include "transport/types.hpp"

namespace metaroce::perf {

// read: ib_read_bw's READ of the peer's bytes; fetch_add, cmp_swap:
// ib_atomic_bw's atomics on 8 bytes of the peer's.
enum class PerfOp : std::uint8_t { write, write_imm, send, read, fetch_add, cmp_swap };

// bw: a window of tx_depth messages, bandwidth and message rate (ib_write_bw).
// lat: one message at a time, each one's completion latency (ib_write_lat).
enum class PerfTest : std::uint8_t { bw, lat };

[[nodiscard]] constexpr const char* to_string(PerfOp op) noexcept {
  constexpr const char* names[] = {"write", "write-imm", "send", "read", "fetch-add", "cmp-swap"};
  return names[static_cast<int>(op)];
}
// The transport's operation for each.
[[nodiscard]] constexpr transport::SendOp send_op(PerfOp op) noexcept {
  constexpr transport::SendOp ops[] = {transport::SendOp::write, transport::SendOp::write_imm,
                                       transport::SendOp::send,  transport::SendOp::read,
                                       transport::SendOp::fetch_add, transport::SendOp::compare_swap};
  return ops[static_cast<int>(op)];
}
// Whether the receiving side sees the operation (posted receives, completions).
[[nodiscard]] constexpr bool receiver_completes(PerfOp op) noexcept {
  return op == PerfOp::write_imm || op == PerfOp::send;
}
[[nodiscard]] constexpr bool is_atomic(PerfOp op) noexcept {
  return op == PerfOp::fetch_add || op == PerfOp::cmp_swap;
}

// loopback: both ends here over a net_ring pair. server / client: one end
// each, over a real port, connected by the in-band connection manager.
enum class PerfRole : std::uint8_t { loopback, server, client };

struct PerfOptions {
  bool loopback = true;  // role == loopback
  PerfRole role = PerfRole::loopback;
  std::string server_address;  // --client ADDR (IPv4 or IPv6, the family of --local-ip)
  std::string preset_path;     // --preset FILE (drivers-config)
  std::string iface;           // --iface NAME: the preset's iface= (net_af_packet, net_tap)
  std::string port_name;       // --port NAME: an EAL device given after `--` (instead of --preset)
  // --preset / --port (with --iface, --local-ip) repeated: planes 1..'s ports.
  std::vector<apps::PlanePortOptions> more_planes;
  std::string local_ip;        // --local-ip ADDR: this end's address, IPv4 or IPv6
  std::string gateway;         // --gateway ADDR: the router towards the server when it is not on this link
  std::string peer_mac;        // --peer-mac MAC: the next hop towards the server (empty: asked by ARP or ND)
  std::string cc;              // --cc NAME; empty: no congestion control (path_window bounds each path)
  double cm_timeout_s = 3.0;   // --cm-timeout: connection requests are repeated for this long
  bool server_once = true;     // the server exits after the client's last connection
  std::vector<std::uint64_t> sizes = {65536};  // one, or every power of two with -a
  std::uint64_t iterations = 5000;             // messages per size (unless -D)
  double duration_s = 0.0;                     // -D: seconds per size instead of -n
  std::uint32_t tx_depth = 128;                // messages in flight per connection (perftest's -t, per QP)
  std::uint16_t paths = 4;
  std::uint16_t streams = 1;
  // -q: connections (--loopback, --client); message m goes to connection
  // m % qps, -n counts messages over all of them.
  std::uint32_t qps = 1;
  std::uint32_t max_connections = 256;  // --server: connections open at once; more are refused
  // --server: bytes one connection request may make it allocate and register.
  std::uint64_t max_connection_memory = std::uint64_t{256} << 20;
  // Each connection's PSN window (transport::ConnectionConfig::psn_window):
  // its retransmission state and receive bitmap, most of its memory.
  std::uint32_t psn_window = 16384;
  // Packets a path may have in flight (metaroce mode). Without --cc this
  // bounds the queue the ends build in the rings between them.
  std::uint32_t path_window = 32;
  transport::Mode mode = transport::Mode::metaroce;
  apps::Rocev2Options rocev2;  // --pkey, --qp-timeout, --retry-count, --rnr-retry (--mode rocev2)
  std::uint32_t mtu = 4096;
  PerfOp op = PerfOp::write;
  PerfTest test = PerfTest::bw;  // lat forces tx_depth 1 (one message in flight per connection)
  bool verify = false;
  bool report_gbits = false;
  std::string json_path;
  std::string fabric_spec;
  // --fabric-plane K SPEC (repeatable): plane K's fabric instead of
  // --fabric's, in the order given (a later one for the same plane wins).
  std::vector<std::pair<std::uint16_t, std::string>> fabric_plane_specs;
  std::string capture_path;
  std::uint32_t zero_copy_threshold = 0;  // 0: the engine's default
  std::uint32_t idle_sleep_us = 0;
  // --lcores: lcores per side (--loopback: a sender and a receiver each,
  // lane k carrying the connections of queue k).
  std::uint16_t lcores = 1;
  // --planes: --loopback over this many net_ring pairs, one per plane, and
  // connections with as many planes (at most --paths).
  std::uint16_t planes = 1;
  // --software-handoff: the loopback's pair does not steer; lcore 0 of each
  // side takes every frame and hands the others' to them.
  bool software_handoff = false;
  std::uint64_t receive_capacity_bps = 0;  // --receive-capacity; 0: each receiving port's link rate
  // --secure FILE: its key (loaded when parsed), --auth-only.
  std::string key_file;
  secure::Psk psk{};
  bool auth_only = false;
  bool raw = false;  // --raw: bare frames over the loopback's rings, no transport (raw_run.hpp)
  std::vector<std::string> eal_args;  // after `--`; empty: no-hugepage defaults
  // Set up by hand (--peer-qpn): no connection manager; both ends are given
  // each other's QPN and first PSN (and the client the server's buffer),
  // and print their own at start. One connection, one size, --mode rocev2.
  bool by_hand = false;
  std::uint32_t qpn = 0;         // --qpn: this end's (0: drawn from getrandom)
  bool psn_given = false;
  std::uint32_t psn = 0;         // --psn: this end's first PSN
  std::uint32_t peer_qpn = 0;    // --peer-qpn
  std::uint32_t peer_psn = 0;    // --peer-psn
  std::uint64_t remote_addr = 0;  // --remote-addr: client, the server's buffer
  std::uint32_t rkey = 0;         // --rkey: client, its R_Key
  std::string peer_ip;            // --peer-ip: server, the client's address
  // Or the same values by perftest's out-of-band TCP exchange
  // (common/oob_exchange.hpp): the server listens on --oob-port, the
  // client connects to --oob ADDR:PORT.
  std::uint16_t oob_port = 0;  // server; 0: none
  std::string oob_address;     // client
};

using ParseOutcome = apps::ParseOutcome;

// On error, `message` is one line saying what is wrong; on help, the usage.
ParseOutcome parse_perf_options(int argc, const char* const* argv, PerfOptions& out, std::string& message);

}  // namespace metaroce::perf
