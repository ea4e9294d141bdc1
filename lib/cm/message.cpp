#include "cm/message.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "wire/byte_order.hpp"
#include "wire/opcode.hpp"

namespace metaroce::cm {
namespace {

// Offsets in the MAD (doc/WIRE.md, "Connection manager").
constexpr std::size_t tid_at = 8;
constexpr std::size_t attribute_id_at = 16;
constexpr std::size_t attribute_modifier_at = 20;
constexpr std::size_t data_at = mad_header_size;
constexpr std::size_t magic_at = data_at + 0;
constexpr std::size_t version_at = data_at + 4;
constexpr std::size_t mode_at = data_at + 5;
constexpr std::size_t reason_at = data_at + 6;
constexpr std::size_t private_length_at = data_at + 7;
constexpr std::size_t nonce_at = data_at + 8;
constexpr std::size_t sender_qpn_at = data_at + 12;
constexpr std::size_t sender_psn_at = data_at + 16;
constexpr std::size_t receiver_qpn_at = data_at + 20;
constexpr std::size_t mtu_at = data_at + 24;
constexpr std::size_t paths_at = data_at + 28;
constexpr std::size_t streams_at = data_at + 30;
constexpr std::size_t base_src_port_at = data_at + 32;
constexpr std::size_t max_reads_at = data_at + 34;
constexpr std::size_t cc_at = data_at + 36;
constexpr std::size_t private_at = cc_at + cc_name_size;
static_assert(private_at + max_private_data <= mad_size);
// After the private data's 64 bytes: the planes.
constexpr std::size_t planes_at = private_at + max_private_data;
constexpr std::size_t plane_addresses_at = planes_at + 1;
constexpr std::size_t plane_entry_size(std::uint8_t ip_version) { return ip_version == 6 ? 22 : 10; }
static_assert(plane_addresses_at + (transport::max_planes - 1) * plane_entry_size(4) <= mad_size);
static_assert(plane_addresses_at + (max_cm_planes(6) - 1) * plane_entry_size(6) <= mad_size);

// The security extension, from the end of the MAD.
constexpr std::size_t ext_flags_at = 4;
constexpr std::size_t ext_public_key_at = 8;
constexpr std::size_t ext_mac_at = ext_public_key_at + secure::public_key_bytes;
static_assert(ext_mac_at + secure::mac_bytes == security_extension_size);

}  // namespace

std::string_view to_string(MessageType t) noexcept {
  switch (t) {
    case MessageType::request: return "REQ";
    case MessageType::reply: return "REP";
    case MessageType::ready: return "RTU";
    case MessageType::reject: return "REJ";
    case MessageType::disconnect: return "DREQ";
    case MessageType::disconnect_reply: return "DREP";
  }
  return "?";
}

std::string_view to_string(RejectReason r) noexcept {
  switch (r) {
    case RejectReason::none: return "none";
    case RejectReason::not_listening: return "no server is listening on that port";
    case RejectReason::no_resources: return "the server takes no more connections";
    case RejectReason::security_required:
      return "the server runs --secure: run the client with --secure and the server's key file";
    case RejectReason::authentication_failed:
      return "the server could not authenticate the request: the two ends hold different key files";
    case RejectReason::security_mismatch:
      return "one end encrypts and the other only authenticates: give both the same --secure mode";
    case RejectReason::unsupported_version: return "the server speaks another CM protocol version";
    case RejectReason::bad_parameters: return "the server refused the parameters (mode, MTU, paths, streams or CC)";
    case RejectReason::refused: return "the server application refused the connection";
    case RejectReason::memory_limit:
      return "the connection would need more memory than the server allows (its --max-connection-memory): ask "
             "for smaller or fewer messages, or raise that limit on the server";
    case RejectReason::wrong_queue:
      return "the request reached a lane of the server that its QPN does not steer to: give both ends the same "
             "--lcores (a driver such as net_memif pairs queue k with the peer's queue k)";
    case RejectReason::prove_address:
      return "the server asked for proof of the client's address before replacing its live connection";
  }
  return "unknown reason";
}

std::string_view to_string(DecodeError e) noexcept {
  switch (e) {
    case DecodeError::ok: return "ok";
    case DecodeError::not_cm: return "not_cm";
    case DecodeError::short_mad: return "short_mad";
    case DecodeError::not_metaroce_mad: return "not_metaroce_mad";
    case DecodeError::bad_magic: return "bad_magic";
    case DecodeError::bad_type: return "bad_type";
    case DecodeError::bad_field: return "bad_field";
  }
  return "?";
}

bool encode_mad(const Message& m, std::array<std::uint8_t, mad_size>& out, std::string& error) {
  if (m.cc.size() >= cc_name_size) {
    error = fmt::format("congestion control name '{}' is longer than {} characters", m.cc, cc_name_size - 1);
    return false;
  }
  if (m.private_data.size() > max_private_data) {
    error = fmt::format("{} bytes of private data: at most {}", m.private_data.size(), max_private_data);
    return false;
  }
  if (m.planes < 1 || m.planes > max_cm_planes(m.ip_version)) {
    error = fmt::format("{} planes: the connection manager carries 1..{} over IPv{}", m.planes,
                        max_cm_planes(m.ip_version), m.ip_version);
    return false;
  }
  out.fill(0);
  std::uint8_t* p = out.data();
  p[0] = mad_base_version;
  p[1] = mad_class_metaroce_cm;
  p[2] = mad_class_version;
  p[3] = mad_method_send;
  wire::store_be64(p + tid_at, (std::uint64_t{m.nonce} << 32) | m.sender_qpn);
  wire::store_be16(p + attribute_id_at, static_cast<std::uint16_t>(m.type));
  wire::store_be32(p + attribute_modifier_at, m.cookie);
  wire::store_be32(p + magic_at, message_magic);
  p[version_at] = m.version;
  p[mode_at] = static_cast<std::uint8_t>(m.mode);
  p[reason_at] = static_cast<std::uint8_t>(m.reason);
  p[private_length_at] = static_cast<std::uint8_t>(m.private_data.size());
  wire::store_be32(p + nonce_at, m.nonce);
  wire::store_be32(p + sender_qpn_at, m.sender_qpn);
  wire::store_be32(p + sender_psn_at, m.sender_psn);
  wire::store_be32(p + receiver_qpn_at, m.receiver_qpn);
  wire::store_be32(p + mtu_at, m.mtu);
  wire::store_be16(p + paths_at, m.paths);
  wire::store_be16(p + streams_at, m.streams);
  wire::store_be16(p + base_src_port_at, m.base_src_port);
  wire::store_be16(p + max_reads_at, m.max_reads);
  std::memcpy(p + cc_at, m.cc.data(), m.cc.size());
  if (!m.private_data.empty()) std::memcpy(p + private_at, m.private_data.data(), m.private_data.size());
  p[planes_at] = static_cast<std::uint8_t>(m.planes);
  for (std::uint16_t k = 1; k < m.planes; ++k) {
    std::uint8_t* e = p + plane_addresses_at + (k - 1) * plane_entry_size(m.ip_version);
    const PlaneAddress& a = m.plane_addresses[k - 1];
    std::memcpy(e, a.mac.data(), 6);
    if (m.ip_version == 6)
      std::memcpy(e + 6, a.ipv6.data(), 16);
    else
      wire::store_be32(e + 6, a.ipv4);
  }
  return true;
}

bool peek_owner_qpn(std::span<const std::uint8_t> frame, std::uint32_t& qpn) noexcept {
  std::size_t bth = 0;
  if (!wire::peek_bth_offset(frame, bth)) return false;
  constexpr std::size_t bth_size = 12, deth_size = 8;
  const std::size_t mad = bth + bth_size + deth_size;
  if (frame.size() < mad + receiver_qpn_at + 4) return false;
  const std::uint8_t* b = frame.data() + bth;
  const std::uint32_t dest_qp = wire::load_be32(b + 4) & wire::qpn_mask;
  const std::uint8_t* p = frame.data() + mad;
  if (b[0] != (wire::opcode::ud | wire::opcode::send_only) || dest_qp != gsi_qpn || p[0] != mad_base_version ||
      p[1] != mad_class_metaroce_cm || wire::load_be32(p + magic_at) != message_magic)
    return false;
  const std::uint32_t receiver = wire::load_be32(p + receiver_qpn_at) & wire::qpn_mask;
  qpn = receiver != 0 ? receiver : wire::load_be32(p + sender_qpn_at) & wire::qpn_mask;
  return qpn > gsi_qpn;
}

DecodeError decode(const wire::ParsedFrame& frame, Message& out) {
  if (frame.bth.opcode != (wire::opcode::ud | wire::opcode::send_only) || frame.bth.dest_qp != gsi_qpn ||
      frame.deth.qkey != gsi_qkey)
    return DecodeError::not_cm;
  if (frame.payload.size() < mad_size) return DecodeError::short_mad;
  const std::uint8_t* p = frame.payload.data();
  if (p[0] != mad_base_version || p[1] != mad_class_metaroce_cm || p[2] != mad_class_version ||
      p[3] != mad_method_send)
    return DecodeError::not_metaroce_mad;
  if (wire::load_be32(p + magic_at) != message_magic) return DecodeError::bad_magic;
  const std::uint16_t type = wire::load_be16(p + attribute_id_at);
  if (type < 1 || type > 6) return DecodeError::bad_type;
  const std::uint8_t mode = p[mode_at];
  const std::uint8_t private_length = p[private_length_at];
  const std::uint8_t ip_version = frame.ip_version == 6 ? 6 : 4;
  const std::uint16_t planes = p[planes_at] == 0 ? 1 : p[planes_at];
  if (mode > static_cast<std::uint8_t>(transport::Mode::rocev2) || private_length > max_private_data ||
      p[cc_at + cc_name_size - 1] != 0 || planes > max_cm_planes(ip_version))
    return DecodeError::bad_field;
  out.type = static_cast<MessageType>(type);
  out.cookie = wire::load_be32(p + attribute_modifier_at);
  out.version = p[version_at];
  out.mode = static_cast<transport::Mode>(mode);
  out.reason = static_cast<RejectReason>(p[reason_at]);
  out.nonce = wire::load_be32(p + nonce_at);
  out.sender_qpn = wire::load_be32(p + sender_qpn_at) & wire::qpn_mask;
  out.sender_psn = wire::load_be32(p + sender_psn_at) & wire::psn_mask;
  out.receiver_qpn = wire::load_be32(p + receiver_qpn_at) & wire::qpn_mask;
  out.mtu = wire::load_be32(p + mtu_at);
  out.paths = wire::load_be16(p + paths_at);
  out.streams = wire::load_be16(p + streams_at);
  out.base_src_port = wire::load_be16(p + base_src_port_at);
  out.max_reads = wire::load_be16(p + max_reads_at);
  out.cc.assign(reinterpret_cast<const char*>(p + cc_at),
                ::strnlen(reinterpret_cast<const char*>(p + cc_at), cc_name_size));
  out.private_data.assign(p + private_at, p + private_at + private_length);
  out.ip_version = ip_version;
  out.planes = planes;
  out.secured = false;
  out.auth_only = false;
  out.public_key = {};
  if (frame.payload.size() >= mad_size + security_extension_size &&
      wire::load_be32(p + mad_size) == security_magic) {
    const std::uint8_t* x = p + mad_size;
    out.secured = true;
    out.auth_only = (x[ext_flags_at] & security_flag_auth_only) != 0;
    std::memcpy(out.public_key.data(), x + ext_public_key_at, out.public_key.size());
  }
  out.plane_addresses = {};
  for (std::uint16_t k = 1; k < planes; ++k) {
    const std::uint8_t* e = p + plane_addresses_at + (k - 1) * plane_entry_size(ip_version);
    PlaneAddress& a = out.plane_addresses[k - 1];
    std::memcpy(a.mac.data(), e, 6);
    if (ip_version == 6)
      std::memcpy(a.ipv6.data(), e + 6, 16);
    else
      a.ipv4 = wire::load_be32(e + 6);
  }
  return DecodeError::ok;
}

bool authentic(const wire::ParsedFrame& frame, const secure::Psk& psk) noexcept {
  if (frame.payload.size() < mad_size + security_extension_size) return false;
  const std::uint8_t* p = frame.payload.data();
  const secure::Mac mac = secure::hmac(psk, std::span<const std::uint8_t>(p, mad_size + ext_mac_at));
  return secure::same_mac(mac, std::span<const std::uint8_t>(p + mad_size + ext_mac_at, secure::mac_bytes));
}

std::vector<std::uint8_t> build_frame(const transport::Endpoints& e, std::uint16_t src_port, const Message& m,
                                      const secure::Psk* psk) {
  std::array<std::uint8_t, mad_size + security_extension_size> body{};
  std::string error;
  std::array<std::uint8_t, mad_size> mad{};
  if (!encode_mad(m, mad, error)) return {};
  std::memcpy(body.data(), mad.data(), mad_size);
  const bool secured = m.secured && psk != nullptr;
  if (secured) {
    std::uint8_t* x = body.data() + mad_size;
    wire::store_be32(x, security_magic);
    x[ext_flags_at] = m.auth_only ? security_flag_auth_only : 0;
    std::memcpy(x + ext_public_key_at, m.public_key.data(), m.public_key.size());
    const secure::Mac mac = secure::hmac(*psk, std::span<const std::uint8_t>(body.data(), mad_size + ext_mac_at));
    std::memcpy(x + ext_mac_at, mac.data(), mac.size());
  }
  const std::span<const std::uint8_t> payload(body.data(), secured ? body.size() : mad_size);
  return gsi_frame(e, src_port, payload);
}

std::vector<std::uint8_t> gsi_frame(const transport::Endpoints& e, std::uint16_t src_port,
                                    std::span<const std::uint8_t> payload) {
  wire::FrameSpec s;
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
  s.udp.src_port = src_port;
  s.bth.opcode = (wire::opcode::ud | wire::opcode::send_only);
  s.bth.dest_qp = gsi_qpn;
  s.deth.qkey = gsi_qkey;
  s.deth.src_qp = gsi_qpn;
  std::vector<std::uint8_t> frame(wire::headers_size(s) + payload.size() + wire::icrc_size);
  frame.resize(wire::build_frame(s, payload, frame));
  return frame;
}

}  // namespace metaroce::cm
