#include "transport/config.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace metaroce::transport {
namespace {
bool power_of_two(std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }
}  // namespace

std::string validate(const ConnectionConfig& c) {
  if (c.mtu < 256 || c.mtu > 9000)
    return fmt::format("mtu {} is outside 256..9000 payload bytes", c.mtu);
  if (c.mode == Mode::rocev2 && !is_ib_mtu(c.mtu))
    return fmt::format("mtu {} is not an IB MTU: rocev2 mode takes {}", c.mtu, ib_mtu_names);
  if (c.mode == Mode::metaroce && (c.paths < 1 || c.paths > wire::max_paths))
    return fmt::format("paths {} is outside 1..{} (metaroce mode)", c.paths, wire::max_paths);
  if (c.mode == Mode::rocev2 && c.paths != 1)
    return fmt::format("paths {}: rocev2 mode has exactly one path", c.paths);
  if (c.planes < 1 || c.planes > max_planes)
    return fmt::format("planes {} is outside 1..{}", c.planes, max_planes);
  if (c.planes > c.paths)
    return fmt::format("planes {} exceeds paths {}: every plane needs a path (path p is on plane p % planes)",
                       c.planes, c.paths);
  if (c.streams < 1 || c.streams > 1024) return fmt::format("streams {} is outside 1..1024", c.streams);
  if (c.local_qpn > wire::qpn_mask || c.peer_qpn > wire::qpn_mask) return "a QPN does not fit in 24 bits";
  if (c.initial_psn > wire::psn_mask || c.peer_initial_psn > wire::psn_mask)
    return "an initial PSN does not fit in 24 bits";
  if ((c.pkey & 0x7fff) == 0) return fmt::format("pkey {:#06x} is invalid (its low 15 bits must not be 0)", c.pkey);
  if (!power_of_two(c.psn_window) || c.psn_window > (1u << 22))
    return fmt::format("psn_window {} must be a power of two up to 4194304", c.psn_window);
  if (!power_of_two(c.stream_window) || c.stream_window > (1u << 16))
    return fmt::format("stream_window {} must be a power of two up to 65536", c.stream_window);
  if (c.path_window < 1 || c.path_window > wire::sack_bits)
    return fmt::format("path_window {} is outside 1..{}", c.path_window, wire::sack_bits);
  if (c.ack_every_packets < 1) return "ack_every_packets must be at least 1";
  if (c.completion_queue_depth < 1) return "completion_queue_depth must be at least 1";
  if (c.max_outstanding_reads < 1 || c.max_outstanding_reads > 256)
    return fmt::format("max_outstanding_reads {} is outside 1..256", c.max_outstanding_reads);
  if (c.endpoints.ip_version != 4 && c.endpoints.ip_version != 6) return "ip_version must be 4 or 6";
  if (c.min_rto == 0 || c.min_rto > c.max_rto) return "min_rto must be > 0 and <= max_rto";
  if (static_cast<std::uint32_t>(c.base_src_port) + c.paths > 65535u) return "base_src_port + paths exceeds 65535";
  return {};
}

std::string validate(const IbtaTimers& t) {
  if (t.local_ack_timeout < 1 || t.local_ack_timeout > 31)
    return fmt::format("local ACK timeout {} is outside 1..31 (4.096 us x 2^N; 14 is 67 ms)", t.local_ack_timeout);
  if (t.retry_count > 7) return fmt::format("retry count {} is outside 0..7", t.retry_count);
  if (t.rnr_retry > 7) return fmt::format("RNR retry {} is outside 0..7 (7: no limit)", t.rnr_retry);
  return {};
}

void apply(const IbtaTimers& t, ConnectionConfig& c) noexcept {
  const Time timeout = ibta_timeout_ns(t.local_ack_timeout);
  constexpr Time most = 60'000'000'000;
  c.initial_rto = timeout;
  c.min_rto = timeout;
  c.max_rto = std::max(timeout, std::min(timeout << 5, most));
  c.retry_limit = t.retry_count;
  c.rnr_retry_limit = t.rnr_retry == 7 ? ~std::uint32_t{0} : t.rnr_retry;
}

Endpoints plane_endpoints(const ConnectionConfig& c, std::uint16_t plane) {
  Endpoints e = c.endpoints;
  if (plane == 0 || plane >= c.planes) return e;
  const PlaneAddresses& a = c.plane[plane];
  e.local_mac = a.local_mac;
  e.peer_mac = a.peer_mac;
  e.local_ipv4 = a.local_ipv4;
  e.peer_ipv4 = a.peer_ipv4;
  e.local_ipv6 = a.local_ipv6;
  e.peer_ipv6 = a.peer_ipv6;
  return e;
}

wire::FrameSpec frame_spec(const ConnectionConfig& c, std::uint8_t opcode, std::uint16_t src_port, bool ect,
                           std::uint16_t plane) {
  wire::FrameSpec s;
  const Endpoints e = plane_endpoints(c, plane);
  s.eth.src = e.local_mac;
  s.eth.dst = e.peer_mac;
  s.eth.vlan_present = e.vlan_present;
  s.eth.vlan_tci = e.vlan_tci;
  s.ip_version = e.ip_version;
  s.ipv4.src = e.local_ipv4;
  s.ipv4.dst = e.peer_ipv4;
  s.ipv4.dscp = e.dscp;
  s.ipv6.src = e.local_ipv6;
  s.ipv6.dst = e.peer_ipv6;
  s.ipv6.dscp = e.dscp;
  if (ect) {
    s.ipv4.ecn = 2;
    s.ipv6.ecn = 2;
  }
  s.udp.src_port = src_port;
  s.bth.opcode = opcode;
  s.bth.dest_qp = c.peer_qpn;
  s.bth.pkey = c.pkey;
  return s;
}

}  // namespace metaroce::transport
