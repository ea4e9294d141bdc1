// What a connection is: addresses, mode, geometry and protocol timers.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "secure/trailer.hpp"
#include "transport/types.hpp"
#include "wire/frame.hpp"
#include "wire/headers.hpp"

namespace metaroce::transport {

struct Endpoints {
  wire::MacAddress local_mac{};
  wire::MacAddress peer_mac{};
  std::uint8_t ip_version = 4;
  std::uint32_t local_ipv4 = 0;
  std::uint32_t peer_ipv4 = 0;
  wire::Ipv6Address local_ipv6{};
  wire::Ipv6Address peer_ipv6{};
  bool vlan_present = false;
  std::uint16_t vlan_tci = 0;
  std::uint8_t dscp = 26;
};

// A connection's planes: separate fabrics, each reached through its own
// port with its own addresses. Path p belongs to plane p % planes.
inline constexpr std::uint16_t max_planes = 8;

// Plane k's port index on the host and its addresses. Plane 0's addresses
// are Endpoints' own (its entry here names only its port); the others use
// the MACs and IPs here, with Endpoints' IP version, VLAN and DSCP.
struct PlaneAddresses {
  std::uint16_t port = 0;
  wire::MacAddress local_mac{};
  wire::MacAddress peer_mac{};
  std::uint32_t local_ipv4 = 0;
  std::uint32_t peer_ipv4 = 0;
  wire::Ipv6Address local_ipv6{};
  wire::Ipv6Address peer_ipv6{};
};

// The keys of a secure connection (doc/WIRE.md, "Secure trailer"): one per
// direction, each named by its SPI. Both ends hold the same two, crossed:
// one end's tx is the other's rx. The connection manager derives them
// (doc/DESIGN.md, "Security").
struct SecurityConfig {
  bool enabled = false;  // false: no trailer, no check (the keys are ignored)
  secure::Algorithm algorithm = secure::Algorithm::aes256_gcm;
  secure::Protection protection = secure::Protection::encrypt;
  std::array<std::uint8_t, secure::max_key_bytes> tx_key{};
  std::array<std::uint8_t, secure::max_key_bytes> rx_key{};
  std::uint32_t tx_spi = 0;  // epoch 0's; the top byte is the epoch (doc/WIRE.md, "Secure trailer")
  std::uint32_t rx_spi = 0;
  // Frames sealed under one key before the sender moves to the next
  // epoch's (derived from it by HKDF); the receiver follows by itself.
  std::uint64_t rotate_after_frames = secure::default_rotate_after;
};

struct ConnectionConfig {
  Mode mode = Mode::metaroce;
  Endpoints endpoints{};
  std::uint32_t local_qpn = 1;      // 24 bits; packets for us carry it as destination QP
  std::uint32_t peer_qpn = 1;
  std::uint32_t initial_psn = 0;    // first PSN we send
  std::uint32_t peer_initial_psn = 0;  // first PSN the peer sends
  // BTH P_Key of every frame both ways. In metaroce mode the connection
  // manager puts the connection's nonce here (0x8000 | 15 bits) so frames of
  // an earlier incarnation of the same QPNs are dropped (pkey_mismatch). In
  // rocev2 mode it is the partition, 0xffff (the default partition) unless
  // chosen, as standard peers expect.
  std::uint16_t pkey = 0xffff;
  // Payload bytes per packet: 256..9000 (metaroce); an IB path MTU, 256,
  // 512, 1024, 2048 or 4096 (rocev2).
  std::uint32_t mtu = 4096;
  std::uint16_t paths = 1;          // metaroce: 1..64; rocev2: 1
  std::uint16_t streams = 1;        // ordered streams above, 1..1024
  std::uint16_t base_src_port = 49152;  // path i starts at base + i
  // Planes the paths are spread over: 1..max_planes and at most `paths`
  // (metaroce); rocev2: 1. One plane is a connection over one port.
  std::uint16_t planes = 1;
  std::array<PlaneAddresses, max_planes> plane{};

  // Connection window: PSNs sent and not yet acknowledged, and the receive
  // bitmap that drops duplicates. A power of two.
  std::uint32_t psn_window = 16384;
  // Messages of one stream in flight at once (receive tracking ring). A power of two.
  std::uint32_t stream_window = 1024;
  // Packets a path may have in flight: at most 256, the SACK bitmap's reach.
  std::uint32_t path_window = 256;
  // Completions the connection's queue holds. Each work request posted makes
  // exactly one, so post_send and post_receive refuse (queue_full) once this
  // many are posted and their completions not yet polled: the queue never
  // overflows and no completion is lost. At least 1.
  std::uint32_t completion_queue_depth = 65536;
  // READs and atomics outstanding at once, each way (IBTA's max_rd_atomic):
  // the connection manager agrees on it. A requester holds back more; a
  // responder serves this many at a time and queues as many again (an
  // older answer's acknowledgement may still be on its way), and NAKs a
  // request beyond that (read_requests_over_limit). 1..256.
  std::uint32_t max_outstanding_reads = 16;

  // ACK coalescing: an ACK after this many data packets or this long after
  // the first unacknowledged one, whichever comes first; at once on a gap
  // or AckReq.
  std::uint32_t ack_every_packets = 16;
  Time ack_delay = 4'000;

  Time initial_rto = 200'000;  // before any RTT sample
  Time min_rto = 50'000;
  Time max_rto = 100'000'000;
  std::uint32_t retry_limit = 7;      // timeouts of one packet before retry_exceeded
  std::uint32_t rnr_retry_limit = 7;  // RNR NAKs of one message before rnr_retry_exceeded
  Time rnr_delay = 20'000;
  // A path that times out this many times in a row is failed: it gets a
  // new UDP source port and carries only probes until one is acknowledged.
  std::uint32_t path_fail_timeouts = 2;

  // rocev2 notification point (DCQCN): at most one CNP per this interval
  // when CE-marked packets arrive (ConnectX's min_time_between_cnps).
  Time cnp_interval = 4'000;

  // Keys of this connection (enabled: every frame sealed and checked,
  // Connection::set_security at creation).
  SecurityConfig security{};
};

// The IB path MTUs (IBTA Vol. 1 9.7.1 and the PathRecord's MTU codes 1..5):
// the only payload sizes a rocev2 connection uses.
inline constexpr std::array<std::uint32_t, 5> ib_mtus = {256, 512, 1024, 2048, 4096};
inline constexpr const char* ib_mtu_names = "256, 512, 1024, 2048 or 4096";
[[nodiscard]] constexpr bool is_ib_mtu(std::uint32_t mtu) noexcept {
  for (const std::uint32_t m : ib_mtus)
    if (m == mtu) return true;
  return false;
}
// The largest IB MTU not above `mtu` (256 for less).
[[nodiscard]] constexpr std::uint32_t ib_mtu_at_most(std::uint32_t mtu) noexcept {
  std::uint32_t best = ib_mtus.front();
  for (const std::uint32_t m : ib_mtus)
    if (m <= mtu) best = m;
  return best;
}

// IBTA timers, as a QP's attributes give them (ibv_modify_qp: timeout,
// retry_cnt, rnr_retry; perftest -u, and the defaults rdma_cm and perftest
// use).
struct IbtaTimers {
  // Local ACK timeout: 4.096 us x 2^exponent, 1..31 (14: 67 ms). IBTA's 0,
  // no timeout at all, is not offered: a lost last packet would hang.
  std::uint8_t local_ack_timeout = 14;
  std::uint8_t retry_count = 7;  // timeouts in a row without progress before retry_exceeded, 0..7
  std::uint8_t rnr_retry = 7;    // RNR NAKs of one message before rnr_retry_exceeded, 0..7; 7: no limit
};
[[nodiscard]] constexpr Time ibta_timeout_ns(std::uint8_t exponent) noexcept {
  return Time{4096} << exponent;
}
// Empty when the timers are usable; otherwise what is wrong.
[[nodiscard]] std::string validate(const IbtaTimers& t);
// `c`'s retransmission timers from `t`: the RTO starts at, and never goes
// below, the local ACK timeout (a NIC's fixed timer; the measured RTT only
// raises it), backs off up to 32 times it (at most 60 s, at least the
// timeout), and the retry limits are IBTA's.
void apply(const IbtaTimers& t, ConnectionConfig& c) noexcept;

// Empty when the config is usable; otherwise what is wrong and how to fix it.
[[nodiscard]] std::string validate(const ConnectionConfig& c);

// The frame a connection sends with `opcode` from `src_port`: its addresses,
// DSCP, the peer's QPN; ECN ECT(0) when `ect` (data: a fabric may mark CE).
// On `plane` (< c.planes): that plane's addresses.
[[nodiscard]] wire::FrameSpec frame_spec(const ConnectionConfig& c, std::uint8_t opcode, std::uint16_t src_port,
                                         bool ect, std::uint16_t plane = 0);
// Plane k's addresses: Endpoints with its MACs and IPs (plane 0: Endpoints).
[[nodiscard]] Endpoints plane_endpoints(const ConnectionConfig& c, std::uint16_t plane);

}  // namespace metaroce::transport
