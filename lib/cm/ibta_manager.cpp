// The connection manager speaking the IBTA CM (ManagerConfig::ibta_cm): its
// messages translated to and from IBTA REQ/REP/RTU/REJ/DREQ/DREP at the
// edge, so the handshake, its retries and its events stay the manager's.
//
// Communication IDs: the client's is the attempt's nonce, the server's its
// local QPN; an answer's Remote Communication ID names the attempt or the
// connection it is for. What an IBTA message does not carry is taken from
// the attempt (client: MTU, streams) or fixed (one path, one stream, one
// plane, no congestion control name).
#include <algorithm>

#include "cm/ibta_cm.hpp"
#include "cm/manager.hpp"

namespace metaroce::cm {

namespace {

// The service ID a REQ names: rdma_cm's TCP port space, perftest's port.
constexpr std::uint16_t ibta_service_port = 18515;

// IBTA 12.6.7 table 103 reject reasons.
constexpr std::uint16_t rej_no_resources = 3;
constexpr std::uint16_t rej_unsupported_request = 5;
constexpr std::uint16_t rej_invalid_service_id = 8;
constexpr std::uint16_t rej_consumer_reject = 28;
constexpr std::uint16_t rej_invalid_class_version = 31;

std::uint16_t ibta_reason(RejectReason r) noexcept {
  switch (r) {
    case RejectReason::not_listening: return rej_invalid_service_id;
    case RejectReason::no_resources: return rej_no_resources;
    case RejectReason::unsupported_version: return rej_invalid_class_version;
    case RejectReason::bad_parameters: return rej_unsupported_request;
    default: return rej_consumer_reject;
  }
}

RejectReason our_reason(std::uint16_t r) noexcept {
  switch (r) {
    case rej_invalid_service_id: return RejectReason::not_listening;
    case rej_no_resources: return RejectReason::no_resources;
    case rej_invalid_class_version: return RejectReason::unsupported_version;
    case rej_unsupported_request: return RejectReason::bad_parameters;
    default: return RejectReason::refused;
  }
}

std::vector<std::uint8_t> trimmed(std::vector<std::uint8_t> v) {
  if (v.size() > max_private_data) v.resize(max_private_data);
  return v;
}

}  // namespace

std::vector<std::uint8_t> Manager::ibta_frame_of(const transport::Endpoints& endpoints, const Message& m) const {
  ibta::Message x;
  x.transaction_id = (std::uint64_t{m.nonce} << 32) | m.sender_qpn;
  std::string error;
  switch (m.type) {
    case MessageType::request: {
      x.attribute = ibta::Attribute::req;
      x.local_comm_id = m.nonce;
      x.service_id = ibta::rdma_cm_service_id(ibta_service_port);
      x.local_qpn = m.sender_qpn;
      x.starting_psn = m.sender_psn;
      x.responder_resources = static_cast<std::uint8_t>(std::min<std::uint16_t>(m.max_reads, 255));
      x.initiator_depth = x.responder_resources;
      x.remote_cm_response_timeout = 20;
      x.local_cm_response_timeout = 20;
      x.retry_count = 7;
      x.rnr_retry_count = 7;
      x.max_cm_retries = 15;
      x.pkey = config_.pkey;
      x.path_mtu = ibta::mtu_code(m.mtu);
      x.primary.hop_limit = 64;
      x.primary.local_ack_timeout = 14;
      if (endpoints.ip_version == 4) {
        x.primary.local_gid = ibta::ipv4_gid(endpoints.local_ipv4);
        x.primary.remote_gid = ibta::ipv4_gid(endpoints.peer_ipv4);
        ibta::encode_rdma_cm_private(
            ibta::RdmaCmHeader{4, m.base_src_port, endpoints.local_ipv4, endpoints.peer_ipv4}, m.private_data,
            x.private_data, error);
      } else {
        std::copy(endpoints.local_ipv6.begin(), endpoints.local_ipv6.end(), x.primary.local_gid.begin());
        std::copy(endpoints.peer_ipv6.begin(), endpoints.peer_ipv6.end(), x.primary.remote_gid.begin());
        x.private_data = m.private_data;
      }
      break;
    }
    case MessageType::reply:
      x.attribute = ibta::Attribute::rep;
      x.local_comm_id = m.sender_qpn;
      x.remote_comm_id = m.nonce;
      x.local_qpn = m.sender_qpn;
      x.starting_psn = m.sender_psn;
      x.responder_resources = static_cast<std::uint8_t>(std::min<std::uint16_t>(m.max_reads, 255));
      x.initiator_depth = x.responder_resources;
      x.rnr_retry_count = 7;
      x.private_data = m.private_data;
      break;
    case MessageType::ready:
      x.attribute = ibta::Attribute::rtu;
      x.local_comm_id = m.nonce;
      x.remote_comm_id = m.receiver_qpn;
      break;
    case MessageType::reject:
      x.attribute = ibta::Attribute::rej;
      x.remote_comm_id = m.nonce;
      x.message_rejected = 0;
      x.reason = ibta_reason(m.reason);
      x.private_data = {static_cast<std::uint8_t>(m.reason)};  // ours, exact, for a metaroce client
      break;
    case MessageType::disconnect:
      x.attribute = ibta::Attribute::dreq;
      x.local_comm_id = m.nonce;
      x.remote_comm_id = m.receiver_qpn;
      x.remote_qpn = m.receiver_qpn;
      x.private_data = m.private_data;
      break;
    case MessageType::disconnect_reply:
      x.attribute = ibta::Attribute::drep;
      x.local_comm_id = m.sender_qpn;
      x.remote_comm_id = m.nonce;
      x.private_data = m.private_data;
      break;
  }
  return ibta::build_frame(endpoints, config_.cm_src_port, x);
}

bool Manager::ibta_decode(const wire::ParsedFrame& frame, Message& out) const {
  ibta::Message x;
  if (ibta::decode(frame, x) != ibta::DecodeError::ok) return false;
  Message m;
  m.mode = transport::Mode::rocev2;
  m.ip_version = frame.ip_version == 6 ? 6 : 4;
  m.paths = 1;
  m.streams = 1;
  m.planes = 1;
  // The server's connection whose QPN `comm_id` is: its peer's QPN.
  const auto server_peer_qpn = [&](std::uint32_t comm_id) -> std::uint32_t {
    const auto it = qpn_to_peer_.find(comm_id);
    return it == qpn_to_peer_.end() ? 0 : it->second.second;
  };
  switch (x.attribute) {
    case ibta::Attribute::req: {
      if (x.transport_service_type != 0) return false;  // RC only
      m.type = MessageType::request;
      m.nonce = x.local_comm_id;
      m.sender_qpn = x.local_qpn;
      m.sender_psn = x.starting_psn;
      m.mtu = ibta::mtu_of_code(x.path_mtu);
      if (m.mtu == 0) return false;
      m.max_reads = x.initiator_depth;
      m.base_src_port = 49152;
      ibta::RdmaCmHeader h;
      if (ibta::decode_rdma_cm_private(x.private_data, h)) {
        if (h.src_port >= 1024) m.base_src_port = h.src_port;
        m.private_data.assign(x.private_data.begin() + ibta::rdma_cm_header_size, x.private_data.end());
      } else {
        m.private_data = x.private_data;
      }
      m.private_data = trimmed(std::move(m.private_data));
      break;
    }
    case ibta::Attribute::rep: {
      m.type = MessageType::reply;
      m.nonce = x.remote_comm_id;
      m.sender_qpn = x.local_qpn;
      m.sender_psn = x.starting_psn;
      m.max_reads = x.responder_resources;
      // The REQ's path MTU and streams: the attempt's.
      const auto id = nonce_to_id_.find(m.nonce);
      if (id != nonce_to_id_.end()) {
        const Attempt& a = attempts_.at(id->second);
        m.receiver_qpn = a.config.local_qpn;
        m.mtu = a.config.mtu;
        m.streams = a.config.streams;
        m.base_src_port = a.config.base_src_port;
      }
      m.private_data = trimmed(x.private_data);
      break;
    }
    case ibta::Attribute::rtu:
      m.type = MessageType::ready;
      m.nonce = x.local_comm_id;
      m.receiver_qpn = x.remote_comm_id;
      m.sender_qpn = server_peer_qpn(x.remote_comm_id);
      break;
    case ibta::Attribute::rej:
      m.type = MessageType::reject;
      m.nonce = x.remote_comm_id;
      m.reason = !x.private_data.empty() && x.private_data[0] >= 1 &&
                         x.private_data[0] <= static_cast<std::uint8_t>(RejectReason::security_mismatch)
                     ? static_cast<RejectReason>(x.private_data[0])
                     : our_reason(x.reason);
      break;
    case ibta::Attribute::dreq:
      m.type = MessageType::disconnect;
      m.nonce = x.local_comm_id;
      m.receiver_qpn = x.remote_comm_id;
      m.sender_qpn = server_peer_qpn(x.remote_comm_id);
      m.private_data = trimmed(x.private_data);
      break;
    case ibta::Attribute::drep:
      m.type = MessageType::disconnect_reply;
      m.nonce = x.remote_comm_id;
      m.private_data = trimmed(x.private_data);
      break;
    case ibta::Attribute::mra: return false;
  }
  out = std::move(m);
  return true;
}

}  // namespace metaroce::cm
