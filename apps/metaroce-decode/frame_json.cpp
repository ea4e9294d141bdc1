#include "metaroce-decode/frame_json.hpp"

#include <arpa/inet.h>

#include <bit>

#include <fmt/format.h>

#include "common/json_line.hpp"
#include "common/pcap_file.hpp"
#include "wire/frame.hpp"
#include "wire/neighbour.hpp"

namespace metaroce::apps {
namespace {

using namespace metaroce::wire;

std::string mac_text(const MacAddress& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
}

std::string ipv4_text(std::uint32_t a) {
  return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
}

// The SACK bitmap in hex, a digit pair per byte by table: fmt::format per
// byte made an ACK's line three times as costly as a data packet's.
constexpr char hex_digits[] = "0123456789abcdef";

std::string ipv6_text(const Ipv6Address& a) {
  char text[INET6_ADDRSTRLEN];
  return inet_ntop(AF_INET6, a.data(), text, sizeof text) ? std::string(text) : std::string("?");
}

std::string_view ack_kind_name(std::uint8_t syn) {
  switch (ack_kind(syn)) {
    case AckKind::ack: return "ack";
    case AckKind::rnr_nak: return "rnr_nak";
    case AckKind::nak: return "nak";
    case AckKind::reserved: break;
  }
  return "reserved";
}

// The syndrome's kind and its low five bits under the name they have.
void add_syndrome(JsonLine& j, std::uint8_t syn) {
  j.add("syndrome", unsigned{syn});
  j.add("aeth_kind", ack_kind_name(syn));
  const unsigned low = syn & 0x1f;
  switch (ack_kind(syn)) {
    case AckKind::ack: j.add("credit", low); break;
    case AckKind::rnr_nak: j.add("rnr_timer", low); break;
    case AckKind::nak: j.add("nak_code", low); break;
    case AckKind::reserved: break;
  }
}

void add_link_and_ip(JsonLine& j, const ParsedFrame& f) {
  const EthernetHeader eth = f.ethernet();
  j.add("eth_src", mac_text(eth.src));
  j.add("eth_dst", mac_text(eth.dst));
  if (eth.vlan_present) {
    j.add("vlan", unsigned{eth.vlan_id()});
    j.add("pcp", unsigned{eth.vlan_pcp()});
  }
  j.add("ip_version", unsigned{f.ip_version});
  if (f.ip_version == 4) {
    const Ipv4Header ip = f.ipv4();
    j.add("src", ipv4_text(ip.src));
    j.add("dst", ipv4_text(ip.dst));
    j.add("ttl", unsigned{ip.ttl});
  } else {
    const Ipv6Header ip = f.ipv6();
    j.add("src", ipv6_text(ip.src));
    j.add("dst", ipv6_text(ip.dst));
    j.add("ttl", unsigned{ip.hop_limit});
    j.add("flow_label", unsigned{ip.flow_label});
  }
  j.add("dscp", unsigned{f.dscp()});
  j.add("ecn", unsigned{f.ecn()});
  const UdpHeader udp = f.udp();
  j.add("sport", unsigned{udp.src_port});
  j.add("dport", unsigned{udp.dst_port});
}

void add_transport(JsonLine& j, const ParsedFrame& f) {
  const Bth& b = f.bth;
  j.add("opcode", unsigned{b.opcode});
  j.add("opcode_name", opcode_info(b.opcode).name);
  j.add("solicited", b.solicited);
  j.add("mig_req", b.mig_req);
  j.add("pad", unsigned{b.pad});
  j.add("tver", unsigned{b.tver});
  j.add("pkey", unsigned{b.pkey});
  j.add("fecn", b.fecn);
  j.add("becn", b.becn);
  j.add("dest_qp", unsigned{b.dest_qp});
  j.add("ack_req", b.ack_req);
  j.add("psn", unsigned{b.psn});
  j.add("payload_len", std::uint64_t{f.payload.size()});
  j.add("icrc", unsigned{f.icrc});

  if (f.has(has_deth)) {
    j.begin_object("deth").add("qkey", unsigned{f.deth.qkey}).add("src_qp", unsigned{f.deth.src_qp}).end_object();
  }
  if (f.has(has_reth)) {
    j.begin_object("reth")
        .add("va", std::uint64_t{f.reth.va})
        .add("rkey", unsigned{f.reth.rkey})
        .add("dma_len", unsigned{f.reth.dma_len})
        .end_object();
  }
  if (f.has(has_atomic_eth)) {
    j.begin_object("atomic_eth")
        .add("va", std::uint64_t{f.atomic_eth.va})
        .add("rkey", unsigned{f.atomic_eth.rkey})
        .add("swap_add", std::uint64_t{f.atomic_eth.swap_add})
        .add("compare", std::uint64_t{f.atomic_eth.compare})
        .end_object();
  }
  if (f.has(has_aeth)) {
    j.begin_object("aeth");
    add_syndrome(j, f.aeth.syndrome);
    j.add("msn", unsigned{f.aeth.msn});
    j.end_object();
  }
  if (f.has(has_atomic_ack_eth)) j.begin_object("atomic_ack").add("orig", std::uint64_t{f.atomic_ack_orig}).end_object();
  if (f.has(has_imm)) j.add("imm", unsigned{f.imm});
  if (f.has(has_ieth)) j.begin_object("ieth").add("rkey", unsigned{f.ieth_rkey}).end_object();
  if (f.has(has_mr_data)) {
    const MrDataHeader& d = f.mr_data;
    j.begin_object("mr_data")
        .add("path_id", unsigned{d.path_id})
        .add("flags", unsigned{d.flags})
        .add("last", (d.flags & mr_flag::last) != 0)
        .add("retransmit", (d.flags & mr_flag::retransmit) != 0)
        .add("stream_id", unsigned{d.stream_id})
        .add("path_seq", unsigned{d.path_seq})
        .add("msg_seq", unsigned{d.msg_seq})
        .add("tsval", unsigned{d.tsval})
        .end_object();
  }
  if (f.has(has_mr_write)) {
    const MrWriteHeader& w = f.mr_write;
    j.begin_object("mr_write")
        .add("va", std::uint64_t{w.va})
        .add("rkey", unsigned{w.rkey})
        .add("msg_len", unsigned{w.msg_len})
        .add("msg_offset", unsigned{w.msg_offset})
        .end_object();
  }
  if (f.has(has_mr_send)) {
    const MrSendHeader& s = f.mr_send;
    j.begin_object("mr_send")
        .add("recv_seq", unsigned{s.recv_seq})
        .add("msg_len", unsigned{s.msg_len})
        .add("msg_offset", unsigned{s.msg_offset})
        .end_object();
  }
  if (f.has(has_mr_read)) {
    const MrReadHeader& r = f.mr_read;
    j.begin_object("mr_read").add("va", std::uint64_t{r.va}).add("key", unsigned{r.key}).end_object();
  }
  if (f.has(has_mr_ack)) {
    const MrAckHeader& a = f.mr_ack;
    j.begin_object("mr_ack");
    add_syndrome(j, a.syndrome);
    j.add("path_count", unsigned{a.path_count});
    j.add("delivered_psn", unsigned{a.delivered_psn});
    j.add("completed_msn", unsigned{a.completed_msn});
    j.add("rate_hint_mbps", unsigned{a.rate_hint_mbps});
    j.begin_array("paths");
    for (std::size_t i = 0; i < a.path_count; ++i) {
      const MrPathAck p = f.path_ack(i);
      std::string sack;
      unsigned sacked = 0;
      sack.reserve(2 * p.sack.size());
      for (std::uint8_t byte : p.sack) {
        sack.push_back(hex_digits[byte >> 4]);
        sack.push_back(hex_digits[byte & 0xf]);
        sacked += static_cast<unsigned>(std::popcount(byte));
      }
      j.begin_array_object()
          .add("path_id", unsigned{p.path_id})
          .add("ce_count", unsigned{p.ce_count})
          .add("cum_seq", unsigned{p.cum_seq})
          .add("ts_echo", unsigned{p.ts_echo})
          .add("sack", sack)
          .add("sacked", sacked)
          .end_object();
    }
    j.end_array();
    j.end_object();
  }
}

// An ARP or neighbour discovery frame: what it asks or answers.
DecodedLine neighbour_to_json(JsonLine& j, std::span<const std::uint8_t> frame) {
  NeighbourFrame f;
  const NeighbourParseError err = parse_neighbour_frame(frame, f);
  if (err != NeighbourParseError::ok) {
    j.add("error", to_string(err));
    return {std::move(j).finish(), false};
  }
  j.add("eth_src", mac_text(f.eth.src));
  j.add("eth_dst", mac_text(f.eth.dst));
  if (f.eth.vlan_present) {
    j.add("vlan", unsigned{f.eth.vlan_id()});
    j.add("pcp", unsigned{f.eth.vlan_pcp()});
  }
  if (f.is_arp) {
    j.add("neighbour", f.arp.operation == arp_request ? "arp_request" : "arp_reply");
    j.add("sender_mac", mac_text(f.arp.sender_mac));
    j.add("sender_ip", ipv4_text(f.arp.sender_ip));
    j.add("target_mac", mac_text(f.arp.target_mac));
    j.add("target_ip", ipv4_text(f.arp.target_ip));
  } else {
    const bool solicitation = f.nd.type == icmpv6_neighbour_solicitation;
    j.add("neighbour", solicitation ? "nd_solicitation" : "nd_advertisement");
    j.add("ip_version", 6u);
    j.add("src", ipv6_text(f.ip_src));
    j.add("dst", ipv6_text(f.ip_dst));
    j.add("target", ipv6_text(f.nd.target));
    if (!solicitation) {
      j.add("router", f.nd.router);
      j.add("solicited", f.nd.solicited);
      j.add("override", f.nd.override_entry);
    }
    if (f.nd.link_address_present) j.add("link_address", mac_text(f.nd.link_address));
  }
  return {std::move(j).finish(), true};
}

}  // namespace

DecodedLine frame_to_json(std::uint64_t frame_number, std::span<const std::uint8_t> frame,
                          std::uint32_t linktype, bool verify_icrc) {
  JsonLine j;
  j.add("frame", frame_number);
  j.add("frame_len", std::uint64_t{frame.size()});
  if (linktype != linktype_ethernet) {
    j.add("error", fmt::format("unsupported_linktype_{}", linktype));
    return {std::move(j).finish(), false};
  }
  if (classify(frame) != FrameKind::other) return neighbour_to_json(j, frame);
  ParsedFrame parsed;
  const ParseError err = parse_frame(frame, parsed, ParseOptions{true, verify_icrc});
  // A bad ICRC is found last, after every field decoded: show them all, so a
  // reader can see which packet it was.
  if (err == ParseError::ok || err == ParseError::bad_icrc) {
    add_link_and_ip(j, parsed);
    add_transport(j, parsed);
    if (verify_icrc) j.add("icrc_ok", err == ParseError::ok);
  }
  if (err != ParseError::ok) {
    j.add("error", to_string(err));
    return {std::move(j).finish(), false};
  }
  return {std::move(j).finish(), true};
}

}  // namespace metaroce::apps
