// For the IBTA CM oracle (check_ibta_cm.py):
//   ibta-cm-tool write OUT.pcap   writes one frame of each attribute (REQ
//                                 with rdma_cm's private data header, REP,
//                                 RTU, REJ, DREQ, DREP) and prints each as JSON
//   ibta-cm-tool decode IN.pcap   prints each frame's decoded message as
//                                 JSON, or {"error": ...}
#include <cstdio>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "cm/ibta_cm.hpp"
#include "common/pcap_file.hpp"
#include "wire/frame.hpp"

namespace {

using namespace metaroce;
using namespace metaroce::cm::ibta;

std::string hex(std::span<const std::uint8_t> b) {
  std::string s;
  for (std::uint8_t c : b) s += fmt::format("{:02x}", c);
  return s;
}

std::string json(const Message& m) {
  std::string s = fmt::format(
      "{{\"attribute\": \"{}\", \"tid\": {}, \"local_comm_id\": {}, \"remote_comm_id\": {}", to_string(m.attribute),
      m.transaction_id, m.local_comm_id, m.remote_comm_id);
  if (m.attribute == Attribute::req) {
    s += fmt::format(
        ", \"service_id\": {}, \"local_ca_guid\": {}, \"local_qkey\": {}, \"local_qpn\": {}, "
        "\"responder_resources\": {}, \"initiator_depth\": {}, \"remote_cm_timeout\": {}, \"transport\": {}, "
        "\"flow_control\": {}, \"starting_psn\": {}, \"local_cm_timeout\": {}, \"retry_count\": {}, \"pkey\": {}, "
        "\"path_mtu\": {}, \"rnr_retry_count\": {}, \"max_cm_retries\": {}, \"srq\": {}, \"local_lid\": {}, "
        "\"remote_lid\": {}, \"local_gid\": \"{}\", \"remote_gid\": \"{}\", \"flow_label\": {}, \"packet_rate\": {}, "
        "\"traffic_class\": {}, \"hop_limit\": {}, \"sl\": {}, \"subnet_local\": {}, \"local_ack_timeout\": {}",
        m.service_id, m.local_ca_guid, m.local_qkey, m.local_qpn, m.responder_resources, m.initiator_depth,
        m.remote_cm_response_timeout, m.transport_service_type, m.end_to_end_flow_control, m.starting_psn,
        m.local_cm_response_timeout, m.retry_count, m.pkey, m.path_mtu, m.rnr_retry_count, m.max_cm_retries, m.srq,
        m.primary.local_lid, m.primary.remote_lid, hex(m.primary.local_gid), hex(m.primary.remote_gid),
        m.primary.flow_label, m.primary.packet_rate, m.primary.traffic_class, m.primary.hop_limit, m.primary.sl,
        m.primary.subnet_local, m.primary.local_ack_timeout);
    RdmaCmHeader h;
    if (decode_rdma_cm_private(m.private_data, h))
      s += fmt::format(", \"rdma_cm\": {{\"src_port\": {}, \"src_ipv4\": {}, \"dst_ipv4\": {}}}", h.src_port,
                       h.src_ipv4, h.dst_ipv4);
  } else if (m.attribute == Attribute::rep) {
    s += fmt::format(
        ", \"local_qkey\": {}, \"local_qpn\": {}, \"starting_psn\": {}, \"responder_resources\": {}, "
        "\"initiator_depth\": {}, \"target_ack_delay\": {}, \"failover_accepted\": {}, \"flow_control\": {}, "
        "\"rnr_retry_count\": {}, \"srq\": {}, \"local_ca_guid\": {}",
        m.local_qkey, m.local_qpn, m.starting_psn, m.responder_resources, m.initiator_depth, m.target_ack_delay,
        m.failover_accepted, m.end_to_end_flow_control, m.rnr_retry_count, m.srq, m.local_ca_guid);
  } else if (m.attribute == Attribute::rej) {
    s += fmt::format(", \"message_rejected\": {}, \"reason\": {}", m.message_rejected, m.reason);
  } else if (m.attribute == Attribute::dreq) {
    s += fmt::format(", \"remote_qpn\": {}", m.remote_qpn);
  }
  s += fmt::format(", \"private_data\": \"{}\"}}", hex(m.private_data));
  return s;
}

std::vector<Message> samples() {
  std::vector<Message> out;
  Message req;
  req.attribute = Attribute::req;
  req.transaction_id = 0x0000000412345678ull;
  req.local_comm_id = 0x1e2d3c4b;
  req.service_id = rdma_cm_service_id(7471);
  req.local_ca_guid = 0x0002c90300a1b2c3ull;
  req.local_qpn = 0x000111;
  req.responder_resources = 16;
  req.initiator_depth = 16;
  req.remote_cm_response_timeout = 20;
  req.end_to_end_flow_control = true;
  req.starting_psn = 0x654321;
  req.local_cm_response_timeout = 20;
  req.retry_count = 7;
  req.pkey = 0xffff;
  req.path_mtu = mtu_code(1024);
  req.rnr_retry_count = 7;
  req.max_cm_retries = 15;
  req.primary.local_gid = ipv4_gid(0x0a4f0001);
  req.primary.remote_gid = ipv4_gid(0x0a4f0002);
  req.primary.flow_label = 0x12345;
  req.primary.packet_rate = 3;
  req.primary.traffic_class = 104;
  req.primary.hop_limit = 64;
  req.primary.sl = 0;
  req.primary.local_ack_timeout = 14;
  std::string error;
  const std::vector<std::uint8_t> user = {'m', 'r', 'o', 'c', 'e'};
  encode_rdma_cm_private(RdmaCmHeader{4, 38001, 0x0a4f0001, 0x0a4f0002}, user, req.private_data, error);
  req.private_data.resize(private_data_size(Attribute::req), 0);
  out.push_back(req);
  Message rep;
  rep.attribute = Attribute::rep;
  rep.transaction_id = req.transaction_id;
  rep.local_comm_id = 0x5a6b7c8d;
  rep.remote_comm_id = req.local_comm_id;
  rep.local_qpn = 0x000222;
  rep.starting_psn = 0x123456;
  rep.responder_resources = 8;
  rep.initiator_depth = 4;
  rep.target_ack_delay = 15;
  rep.end_to_end_flow_control = true;
  rep.rnr_retry_count = 7;
  rep.local_ca_guid = 0x0002c90300d4e5f6ull;
  rep.private_data.assign(private_data_size(Attribute::rep), 0);
  rep.private_data[0] = 0xaa;
  out.push_back(rep);
  Message rtu;
  rtu.attribute = Attribute::rtu;
  rtu.transaction_id = req.transaction_id;
  rtu.local_comm_id = req.local_comm_id;
  rtu.remote_comm_id = rep.local_comm_id;
  rtu.private_data.assign(private_data_size(Attribute::rtu), 0);
  out.push_back(rtu);
  Message rej;
  rej.attribute = Attribute::rej;
  rej.transaction_id = 0x99;
  rej.local_comm_id = 0x77;
  rej.remote_comm_id = 0x66;
  rej.message_rejected = 0;
  rej.reason = 28;
  rej.private_data.assign(private_data_size(Attribute::rej), 0);
  out.push_back(rej);
  Message dreq;
  dreq.attribute = Attribute::dreq;
  dreq.transaction_id = 0x0000000500000001ull;
  dreq.local_comm_id = req.local_comm_id;
  dreq.remote_comm_id = rep.local_comm_id;
  dreq.remote_qpn = 0x000222;
  dreq.private_data.assign(private_data_size(Attribute::dreq), 0);
  dreq.private_data[0] = 'b';
  out.push_back(dreq);
  Message drep;
  drep.attribute = Attribute::drep;
  drep.transaction_id = dreq.transaction_id;
  drep.local_comm_id = rep.local_comm_id;
  drep.remote_comm_id = req.local_comm_id;
  drep.private_data.assign(private_data_size(Attribute::drep), 0);
  out.push_back(drep);
  return out;
}

int fail(const std::string& what) {
  std::fprintf(stderr, "ibta-cm-tool: %s\n", what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return fail("usage: ibta-cm-tool write OUT.pcap | decode IN.pcap");
  const std::string_view cmd = argv[1];
  std::string error;
  if (cmd == "write") {
    apps::PcapWriter w;
    if (!w.open(argv[2], error)) return fail(error);
    transport::Endpoints e;
    e.local_mac = {2, 0, 0, 0, 0, 1};
    e.peer_mac = {2, 0, 0, 0, 0, 2};
    e.local_ipv4 = 0x0a4f0001;
    e.peer_ipv4 = 0x0a4f0002;
    std::uint64_t t = 0;
    for (const Message& m : samples()) {
      const std::vector<std::uint8_t> frame = build_frame(e, 49151, m);
      if (frame.empty() || !w.write(frame, t += 1000)) return fail("cannot write");
      std::printf("%s\n", json(m).c_str());
    }
    return w.close() ? 0 : fail("cannot write");
  }
  if (cmd == "decode") {
    apps::PcapReader r;
    if (!r.open(argv[2], error)) return fail(error);
    apps::PcapRecord rec;
    while (r.next(rec)) {
      const std::vector<std::uint8_t> bytes(rec.data.begin(), rec.data.end());
      wire::ParsedFrame p;
      const wire::ParseError pe = wire::parse_frame(bytes, p);
      if (pe != wire::ParseError::ok) {
        std::printf("{\"error\": \"parse: %s\"}\n", std::string(wire::to_string(pe)).c_str());
        continue;
      }
      Message m;
      const DecodeError de = decode(p, m);
      if (de != DecodeError::ok) {
        std::printf("{\"error\": \"%s\"}\n", std::string(to_string(de)).c_str());
        continue;
      }
      std::printf("%s\n", json(m).c_str());
    }
    return r.error().empty() ? 0 : fail(r.error());
  }
  return fail("usage: ibta-cm-tool write OUT.pcap | decode IN.pcap");
}
