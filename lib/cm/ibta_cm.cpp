#include "cm/ibta_cm.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "cm/message.hpp"
#include "wire/byte_order.hpp"
#include "wire/opcode.hpp"

namespace metaroce::cm::ibta {

namespace {

// MAD common header (IBTA 13.4.2).
constexpr std::size_t transaction_id_at = 8;
constexpr std::size_t attribute_id_at = 16;

// Offsets in the message, after the 24-byte header (IBTA 12.6); the whole
// layout, including fields this manager leaves 0.
namespace req {
[[maybe_unused]] constexpr std::size_t local_comm_id = 0, vendor_id = 5, service_id = 8, local_ca_guid = 16,
                                       local_qkey = 28, local_qpn = 32, responder_resources = 35, local_eecn = 36,
                                       initiator_depth = 39, remote_eecn = 40, timeouts_type_flow = 43,
                                       starting_psn = 44, local_timeout_retry = 47, pkey = 48, mtu_rdc_rnr = 50,
                                       max_retries_srq_ext = 51, primary = 52, alternate = 96, private_data = 140;
}  // namespace req
namespace rep {
[[maybe_unused]] constexpr std::size_t local_comm_id = 0, remote_comm_id = 4, local_qkey = 8, local_qpn = 12,
                                       local_eecn = 16, starting_psn = 20, responder_resources = 24,
                                       initiator_depth = 25, delay_failover_flow = 26, rnr_srq = 27,
                                       local_ca_guid = 28, private_data = 36;
}  // namespace rep
namespace rej {
constexpr std::size_t message_rejected = 8, info_length = 9, reason = 10, private_data = 84;
}
namespace dreq {
constexpr std::size_t remote_qpn = 8, private_data = 12;
}
constexpr std::size_t rtu_drep_private_data = 8;
// Within a path (44 bytes).
namespace path {
constexpr std::size_t local_lid = 0, remote_lid = 2, local_gid = 4, remote_gid = 20, flow_rate = 36,
                      traffic_class = 40, hop_limit = 41, sl_local = 42, ack_timeout = 43;
}

std::size_t private_data_at(Attribute a) noexcept {
  switch (a) {
    case Attribute::req: return req::private_data;
    case Attribute::rep: return rep::private_data;
    case Attribute::rej: return rej::private_data;
    case Attribute::dreq: return dreq::private_data;
    case Attribute::rtu:
    case Attribute::drep: return rtu_drep_private_data;
    case Attribute::mra: break;
  }
  return 0;
}

bool known(std::uint16_t a) noexcept {
  return a == 0x10 || (a >= 0x12 && a <= 0x16);
}

void encode_path(const Path& p, std::uint8_t* at) {
  wire::store_be16(at + path::local_lid, p.local_lid);
  wire::store_be16(at + path::remote_lid, p.remote_lid);
  std::memcpy(at + path::local_gid, p.local_gid.data(), 16);
  std::memcpy(at + path::remote_gid, p.remote_gid.data(), 16);
  // Flow label (20 bits), 6 reserved, packet rate (6 bits).
  wire::store_be32(at + path::flow_rate, ((p.flow_label & 0xfffffu) << 12) | (p.packet_rate & 0x3fu));
  at[path::traffic_class] = p.traffic_class;
  at[path::hop_limit] = p.hop_limit;
  at[path::sl_local] = static_cast<std::uint8_t>(((p.sl & 0xf) << 4) | (p.subnet_local ? 0x08 : 0));
  at[path::ack_timeout] = static_cast<std::uint8_t>((p.local_ack_timeout & 0x1f) << 3);
}

void decode_path(const std::uint8_t* at, Path& p) {
  p.local_lid = wire::load_be16(at + path::local_lid);
  p.remote_lid = wire::load_be16(at + path::remote_lid);
  std::memcpy(p.local_gid.data(), at + path::local_gid, 16);
  std::memcpy(p.remote_gid.data(), at + path::remote_gid, 16);
  const std::uint32_t fr = wire::load_be32(at + path::flow_rate);
  p.flow_label = fr >> 12;
  p.packet_rate = static_cast<std::uint8_t>(fr & 0x3f);
  p.traffic_class = at[path::traffic_class];
  p.hop_limit = at[path::hop_limit];
  p.sl = static_cast<std::uint8_t>(at[path::sl_local] >> 4);
  p.subnet_local = (at[path::sl_local] & 0x08) != 0;
  p.local_ack_timeout = static_cast<std::uint8_t>(at[path::ack_timeout] >> 3);
}

}  // namespace

std::string_view to_string(Attribute a) noexcept {
  switch (a) {
    case Attribute::req: return "REQ";
    case Attribute::mra: return "MRA";
    case Attribute::rej: return "REJ";
    case Attribute::rep: return "REP";
    case Attribute::rtu: return "RTU";
    case Attribute::dreq: return "DREQ";
    case Attribute::drep: return "DREP";
  }
  return "?";
}

std::string_view to_string(DecodeError e) noexcept {
  switch (e) {
    case DecodeError::ok: return "ok";
    case DecodeError::not_gsi: return "not a UD SEND ONLY to QP 1 with the GSI Q_Key";
    case DecodeError::short_mad: return "shorter than a 256-byte MAD";
    case DecodeError::not_cm: return "not a CM MAD (base version 1, class 0x07, class version 2, method Send)";
    case DecodeError::bad_attribute: return "a CM attribute other than REQ, REP, RTU, REJ, DREQ, DREP";
  }
  return "?";
}

std::size_t private_data_size(Attribute a) noexcept {
  const std::size_t at = private_data_at(a);
  return at == 0 ? 0 : mad_size - header_size - at;
}

Gid ipv4_gid(std::uint32_t ipv4) noexcept {
  Gid g{};
  g[10] = 0xff;
  g[11] = 0xff;
  wire::store_be32(g.data() + 12, ipv4);
  return g;
}

std::uint8_t mtu_code(std::uint32_t mtu) noexcept {
  for (std::uint8_t c = 1; c <= 5; ++c)
    if (mtu == (128u << c)) return c;
  return 0;
}

std::uint32_t mtu_of_code(std::uint8_t code) noexcept {
  return code >= 1 && code <= 5 ? 128u << code : 0;
}

bool encode_mad(const Message& m, std::array<std::uint8_t, mad_size>& out, std::string& error) {
  out.fill(0);
  if (!known(static_cast<std::uint16_t>(m.attribute))) {
    error = fmt::format("IBTA CM: {} is not sent", to_string(m.attribute));
    return false;
  }
  const std::size_t room = private_data_size(m.attribute);
  if (m.private_data.size() > room) {
    error = fmt::format("IBTA CM: {} private data of {} bytes: at most {}", to_string(m.attribute),
                        m.private_data.size(), room);
    return false;
  }
  out[0] = mad_base_version;
  out[1] = mgmt_class_cm;
  out[2] = cm_class_version;
  out[3] = method_send;
  wire::store_be64(out.data() + transaction_id_at, m.transaction_id);
  wire::store_be16(out.data() + attribute_id_at, static_cast<std::uint16_t>(m.attribute));
  std::uint8_t* d = out.data() + header_size;
  wire::store_be32(d, m.local_comm_id);
  switch (m.attribute) {
    case Attribute::req:
      wire::store_be24(d + req::vendor_id, m.vendor_id & 0xffffffu);
      wire::store_be64(d + req::service_id, m.service_id);
      wire::store_be64(d + req::local_ca_guid, m.local_ca_guid);
      wire::store_be32(d + req::local_qkey, m.local_qkey);
      wire::store_be24(d + req::local_qpn, m.local_qpn & wire::qpn_mask);
      d[req::responder_resources] = m.responder_resources;
      d[req::initiator_depth] = m.initiator_depth;
      d[req::timeouts_type_flow] = static_cast<std::uint8_t>(((m.remote_cm_response_timeout & 0x1f) << 3) |
                                                             ((m.transport_service_type & 0x3) << 1) |
                                                             (m.end_to_end_flow_control ? 1 : 0));
      wire::store_be24(d + req::starting_psn, m.starting_psn & wire::psn_mask);
      d[req::local_timeout_retry] =
          static_cast<std::uint8_t>(((m.local_cm_response_timeout & 0x1f) << 3) | (m.retry_count & 0x7));
      wire::store_be16(d + req::pkey, m.pkey);
      d[req::mtu_rdc_rnr] = static_cast<std::uint8_t>(((m.path_mtu & 0xf) << 4) | (m.rdc_exists ? 0x08 : 0) |
                                                      (m.rnr_retry_count & 0x7));
      d[req::max_retries_srq_ext] = static_cast<std::uint8_t>(((m.max_cm_retries & 0xf) << 4) |
                                                              (m.srq ? 0x08 : 0) | (m.extended_transport_type & 0x7));
      encode_path(m.primary, d + req::primary);
      break;
    case Attribute::rep:
      wire::store_be32(d + rep::remote_comm_id, m.remote_comm_id);
      wire::store_be32(d + rep::local_qkey, m.local_qkey);
      wire::store_be24(d + rep::local_qpn, m.local_qpn & wire::qpn_mask);
      wire::store_be24(d + rep::starting_psn, m.starting_psn & wire::psn_mask);
      d[rep::responder_resources] = m.responder_resources;
      d[rep::initiator_depth] = m.initiator_depth;
      d[rep::delay_failover_flow] = static_cast<std::uint8_t>(((m.target_ack_delay & 0x1f) << 3) |
                                                              ((m.failover_accepted & 0x3) << 1) |
                                                              (m.end_to_end_flow_control ? 1 : 0));
      d[rep::rnr_srq] = static_cast<std::uint8_t>(((m.rnr_retry_count & 0x7) << 5) | (m.srq ? 0x10 : 0));
      wire::store_be64(d + rep::local_ca_guid, m.local_ca_guid);
      break;
    case Attribute::rej:
      wire::store_be32(d + 4, m.remote_comm_id);
      d[rej::message_rejected] = static_cast<std::uint8_t>((m.message_rejected & 0x3) << 6);
      d[rej::info_length] = 0;
      wire::store_be16(d + rej::reason, m.reason);
      break;
    case Attribute::dreq:
      wire::store_be32(d + 4, m.remote_comm_id);
      wire::store_be24(d + dreq::remote_qpn, m.remote_qpn & wire::qpn_mask);
      break;
    case Attribute::rtu:
    case Attribute::drep:
      wire::store_be32(d + 4, m.remote_comm_id);
      break;
    case Attribute::mra: break;
  }
  if (!m.private_data.empty())
    std::memcpy(d + private_data_at(m.attribute), m.private_data.data(), m.private_data.size());
  return true;
}

DecodeError decode_mad(std::span<const std::uint8_t> mad, Message& out) {
  if (mad.size() < mad_size) return DecodeError::short_mad;
  const std::uint8_t* p = mad.data();
  if (p[0] != mad_base_version || p[1] != mgmt_class_cm || p[2] != cm_class_version || p[3] != method_send)
    return DecodeError::not_cm;
  const std::uint16_t attribute = wire::load_be16(p + attribute_id_at);
  if (!known(attribute)) return DecodeError::bad_attribute;
  Message m;
  m.attribute = static_cast<Attribute>(attribute);
  m.transaction_id = wire::load_be64(p + transaction_id_at);
  const std::uint8_t* d = p + header_size;
  m.local_comm_id = wire::load_be32(d);
  switch (m.attribute) {
    case Attribute::req:
      m.vendor_id = wire::load_be24(d + req::vendor_id);
      m.service_id = wire::load_be64(d + req::service_id);
      m.local_ca_guid = wire::load_be64(d + req::local_ca_guid);
      m.local_qkey = wire::load_be32(d + req::local_qkey);
      m.local_qpn = wire::load_be24(d + req::local_qpn);
      m.responder_resources = d[req::responder_resources];
      m.initiator_depth = d[req::initiator_depth];
      m.remote_cm_response_timeout = static_cast<std::uint8_t>(d[req::timeouts_type_flow] >> 3);
      m.transport_service_type = static_cast<std::uint8_t>((d[req::timeouts_type_flow] >> 1) & 0x3);
      m.end_to_end_flow_control = (d[req::timeouts_type_flow] & 1) != 0;
      m.starting_psn = wire::load_be24(d + req::starting_psn);
      m.local_cm_response_timeout = static_cast<std::uint8_t>(d[req::local_timeout_retry] >> 3);
      m.retry_count = static_cast<std::uint8_t>(d[req::local_timeout_retry] & 0x7);
      m.pkey = wire::load_be16(d + req::pkey);
      m.path_mtu = static_cast<std::uint8_t>(d[req::mtu_rdc_rnr] >> 4);
      m.rdc_exists = (d[req::mtu_rdc_rnr] & 0x08) != 0;
      m.rnr_retry_count = static_cast<std::uint8_t>(d[req::mtu_rdc_rnr] & 0x7);
      m.max_cm_retries = static_cast<std::uint8_t>(d[req::max_retries_srq_ext] >> 4);
      m.srq = (d[req::max_retries_srq_ext] & 0x08) != 0;
      m.extended_transport_type = static_cast<std::uint8_t>(d[req::max_retries_srq_ext] & 0x7);
      decode_path(d + req::primary, m.primary);
      break;
    case Attribute::rep:
      m.remote_comm_id = wire::load_be32(d + rep::remote_comm_id);
      m.local_qkey = wire::load_be32(d + rep::local_qkey);
      m.local_qpn = wire::load_be24(d + rep::local_qpn);
      m.starting_psn = wire::load_be24(d + rep::starting_psn);
      m.responder_resources = d[rep::responder_resources];
      m.initiator_depth = d[rep::initiator_depth];
      m.target_ack_delay = static_cast<std::uint8_t>(d[rep::delay_failover_flow] >> 3);
      m.failover_accepted = static_cast<std::uint8_t>((d[rep::delay_failover_flow] >> 1) & 0x3);
      m.end_to_end_flow_control = (d[rep::delay_failover_flow] & 1) != 0;
      m.rnr_retry_count = static_cast<std::uint8_t>(d[rep::rnr_srq] >> 5);
      m.srq = (d[rep::rnr_srq] & 0x10) != 0;
      m.local_ca_guid = wire::load_be64(d + rep::local_ca_guid);
      break;
    case Attribute::rej:
      m.remote_comm_id = wire::load_be32(d + 4);
      m.message_rejected = static_cast<std::uint8_t>(d[rej::message_rejected] >> 6);
      m.reason = wire::load_be16(d + rej::reason);
      break;
    case Attribute::dreq:
      m.remote_comm_id = wire::load_be32(d + 4);
      m.remote_qpn = wire::load_be24(d + dreq::remote_qpn);
      break;
    case Attribute::rtu:
    case Attribute::drep:
      m.remote_comm_id = wire::load_be32(d + 4);
      break;
    case Attribute::mra: break;
  }
  const std::size_t at = private_data_at(m.attribute);
  m.private_data.assign(d + at, p + mad_size);
  out = std::move(m);
  return DecodeError::ok;
}

DecodeError decode(const wire::ParsedFrame& frame, Message& out) {
  if (frame.bth.opcode != (wire::opcode::ud | wire::opcode::send_only) || frame.bth.dest_qp != gsi_qpn ||
      frame.deth.qkey != gsi_qkey)
    return DecodeError::not_gsi;
  return decode_mad(frame.payload, out);
}

std::vector<std::uint8_t> build_frame(const transport::Endpoints& e, std::uint16_t src_port, const Message& m) {
  std::array<std::uint8_t, mad_size> mad{};
  std::string error;
  if (!encode_mad(m, mad, error)) return {};
  return gsi_frame(e, src_port, mad);
}

bool encode_rdma_cm_private(const RdmaCmHeader& h, std::span<const std::uint8_t> user,
                            std::vector<std::uint8_t>& out, std::string& error) {
  if (h.ip_version != 4) {
    error = "rdma_cm header: only IPv4 addresses are encoded";
    return false;
  }
  if (user.size() > private_data_size(Attribute::req) - rdma_cm_header_size) {
    error = fmt::format("rdma_cm REQ private data of {} bytes: at most {}", user.size(),
                        private_data_size(Attribute::req) - rdma_cm_header_size);
    return false;
  }
  out.assign(rdma_cm_header_size, 0);
  out[0] = 0;  // version
  out[1] = static_cast<std::uint8_t>(h.ip_version << 4);
  wire::store_be16(out.data() + 2, h.src_port);
  wire::store_be32(out.data() + 4 + 12, h.src_ipv4);
  wire::store_be32(out.data() + 20 + 12, h.dst_ipv4);
  out.insert(out.end(), user.begin(), user.end());
  return true;
}

bool decode_rdma_cm_private(std::span<const std::uint8_t> data, RdmaCmHeader& h) {
  if (data.size() < rdma_cm_header_size || data[0] != 0 || (data[1] >> 4) != 4) return false;
  h.ip_version = 4;
  h.src_port = wire::load_be16(data.data() + 2);
  h.src_ipv4 = wire::load_be32(data.data() + 4 + 12);
  h.dst_ipv4 = wire::load_be32(data.data() + 20 + 12);
  return true;
}

}  // namespace metaroce::cm::ibta
