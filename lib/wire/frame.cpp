#include "wire/frame.hpp"

#include <array>
#include <cstring>

namespace metaroce::wire {
namespace {

constexpr std::array<std::string_view, parse_error_count> parse_error_names = {
    "ok",           "truncated",        "not_ip",          "bad_ip_version",
    "bad_ip_header_length", "ipv4_options", "ip_fragment", "bad_ip_length",
    "bad_ip_checksum", "not_udp",       "not_roce_port",   "bad_udp_length",
    "unknown_opcode", "bad_header_field", "bad_pad",       "length_mismatch",
    "bad_icrc",
};

// Bytes of the headers that follow the BTH for an opcode's header set.
constexpr std::size_t extension_size(std::uint16_t headers, std::size_t path_count) noexcept {
  std::size_t n = 0;
  if (headers & has_deth) n += deth_size;
  if (headers & has_reth) n += reth_size;
  if (headers & has_atomic_eth) n += atomic_eth_size;
  if (headers & has_aeth) n += aeth_size;
  if (headers & has_atomic_ack_eth) n += atomic_ack_eth_size;
  if (headers & has_imm) n += immdt_size;
  if (headers & has_ieth) n += ieth_size;
  if (headers & has_cnp_reserved) n += cnp_reserved_size;
  if (headers & has_mr_data) n += mr_data_header_size;
  if (headers & has_mr_write) n += mr_write_header_size;
  if (headers & has_mr_send) n += mr_send_header_size;
  if (headers & has_mr_read) n += mr_read_header_size;
  if (headers & has_mr_ack) n += mr_ack_header_size + path_count * mr_path_ack_size;
  return n;
}

// Fixed extension bytes per opcode (metaroce ACK path blocks come on top).
constexpr std::array<std::uint8_t, 256> extension_sizes = [] {
  std::array<std::uint8_t, 256> sizes{};
  for (std::size_t op = 0; op < sizes.size(); ++op) {
    sizes[op] = static_cast<std::uint8_t>(extension_size(opcode_table[op].headers, 0));
  }
  return sizes;
}();

std::size_t ip_header_size(std::uint8_t ip_version) noexcept {
  return ip_version == 6 ? ipv6_header_size : ipv4_header_size;
}

}  // namespace

std::string_view to_string(ParseError e) noexcept {
  const auto i = static_cast<std::size_t>(e);
  return i < parse_error_names.size() ? parse_error_names[i] : "invalid";
}

std::size_t headers_size(const FrameSpec& spec) noexcept {
  return spec.eth.size() + ip_header_size(spec.ip_version) + udp_header_size + bth_size +
         extension_sizes[spec.bth.opcode] + spec.mr_path_acks.size() * mr_path_ack_size;
}

std::size_t build_headers(const FrameSpec& spec, std::uint32_t payload_len,
                          std::span<std::uint8_t> out) noexcept {
  if (spec.ip_version != 4 && spec.ip_version != 6) return {};
  if (spec.mr_path_acks.size() > max_paths) return {};
  const OpcodeInfo& info = opcode_info(spec.bth.opcode);
  const std::size_t size = headers_size(spec);
  const std::uint8_t pad = pad_for(payload_len);
  const std::size_t ip_len = ip_header_size(spec.ip_version);
  const std::size_t l3 = spec.eth.size();
  const std::size_t udp_len = size - l3 - ip_len + payload_len + pad + icrc_size;
  if (size > out.size() || udp_len + ip_len > 0xffff) return {};

  // Fields are written straight from the spec with the computed ones laid
  // over them, and the IPv4 checksum is summed from values, not read back
  // from the bytes just stored (that read stalls on store forwarding).
  std::uint8_t* p = out.data();
  std::memcpy(p, spec.eth.dst.data(), 6);
  std::memcpy(p + 6, spec.eth.src.data(), 6);
  const std::uint16_t ethertype = spec.ip_version == 6 ? ethertype_ipv6 : ethertype_ipv4;
  if (spec.eth.vlan_present) {
    store_be16(p + 12, ethertype_vlan);
    store_be16(p + 14, spec.eth.vlan_tci);
    store_be16(p + 16, ethertype);
  } else {
    store_be16(p + 12, ethertype);
  }
  std::uint8_t* ip = p + l3;
  if (spec.ip_version == 4) {
    const Ipv4Header& v4 = spec.ipv4;
    const auto total_length = static_cast<std::uint16_t>(ip_len + udp_len);
    const auto tos = static_cast<std::uint8_t>((v4.dscp << 2) | (v4.ecn & 3));
    const std::uint16_t flags = v4.dont_fragment ? 0x4000 : 0;
    std::uint32_t sum = 0x4500u + tos + total_length + v4.identification + flags +
                        ((std::uint32_t{v4.ttl} << 8) | ip_protocol_udp) + (v4.src >> 16) +
                        (v4.src & 0xffff) + (v4.dst >> 16) + (v4.dst & 0xffff);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    ip[0] = 0x45;
    ip[1] = tos;
    store_be16(ip + 2, total_length);
    store_be16(ip + 4, v4.identification);
    store_be16(ip + 6, flags);
    ip[8] = v4.ttl;
    ip[9] = ip_protocol_udp;
    store_be16(ip + 10, static_cast<std::uint16_t>(~sum));
    store_be32(ip + 12, v4.src);
    store_be32(ip + 16, v4.dst);
  } else {
    encode(spec.ipv6, ip);
    store_be16(ip + 4, static_cast<std::uint16_t>(udp_len));
    ip[6] = ip_protocol_udp;
  }
  std::size_t at = l3 + ip_len;
  store_be16(p + at, spec.udp.src_port);
  store_be16(p + at + 2, spec.udp.dst_port);
  store_be16(p + at + 4, static_cast<std::uint16_t>(udp_len));
  store_be16(p + at + 6, spec.udp.checksum);
  at += udp_header_size;
  encode(spec.bth, p + at);
  p[at + 1] = static_cast<std::uint8_t>((p[at + 1] & ~0x30u) | (pad << 4));
  at += bth_size;

  const std::uint16_t h = info.headers;
  // The MDH comes first: only metaroce opcodes carry it, and a metaroce
  // atomic's AtomicETH follows it.
  if (h & has_mr_data) { encode(spec.mr_data, p + at); at += mr_data_header_size; }
  if (h & has_deth) { encode(spec.deth, p + at); at += deth_size; }
  if (h & has_reth) { encode(spec.reth, p + at); at += reth_size; }
  if (h & has_atomic_eth) { encode(spec.atomic_eth, p + at); at += atomic_eth_size; }
  if (h & has_aeth) { encode(spec.aeth, p + at); at += aeth_size; }
  if (h & has_atomic_ack_eth) { store_be64(p + at, spec.atomic_ack_orig); at += atomic_ack_eth_size; }
  if (h & has_mr_write) { encode(spec.mr_write, p + at); at += mr_write_header_size; }
  if (h & has_mr_send) { encode(spec.mr_send, p + at); at += mr_send_header_size; }
  if (h & has_mr_read) { encode(spec.mr_read, p + at); at += mr_read_header_size; }
  if (h & has_mr_ack) {
    MrAckHeader ack = spec.mr_ack;
    ack.path_count = static_cast<std::uint8_t>(spec.mr_path_acks.size());
    encode(ack, p + at);
    at += mr_ack_header_size;
    for (const MrPathAck& path : spec.mr_path_acks) {
      encode(path, p + at);
      at += mr_path_ack_size;
    }
  }
  if (h & has_imm) { store_be32(p + at, spec.imm); at += immdt_size; }
  if (h & has_ieth) { store_be32(p + at, spec.ieth_rkey); at += ieth_size; }
  if (h & has_cnp_reserved) { std::memset(p + at, 0, cnp_reserved_size); at += cnp_reserved_size; }

  return at;
}

std::size_t build_trailer(std::uint8_t pad, std::uint32_t icrc, std::span<std::uint8_t> out) noexcept {
  const std::size_t n = std::size_t{pad} + icrc_size;
  if (pad > 3 || out.size() < n) return 0;
  for (std::size_t i = 0; i < pad; ++i) out[i] = 0;
  store_le32(out.data() + pad, icrc);
  return n;
}

std::size_t build_frame(const FrameSpec& spec, ByteSpan payload, std::span<std::uint8_t> out) noexcept {
  if (payload.size() > 0xffff) return 0;
  const std::size_t headers = build_headers(spec, static_cast<std::uint32_t>(payload.size()), out);
  if (headers == 0) return 0;
  const std::size_t pad = pad_for(payload.size());
  const std::size_t total = headers + payload.size() + pad + icrc_size;
  if (total > out.size()) return 0;
  if (!payload.empty()) std::memcpy(out.data() + headers, payload.data(), payload.size());
  std::memset(out.data() + headers + payload.size(), 0, pad);
  const std::size_t l3 = spec.eth.size();
  const std::size_t icrc_at = total - icrc_size;
  const std::uint32_t icrc =
      compute_icrc(ByteSpan(out.data() + l3, icrc_at - l3));
  store_le32(out.data() + icrc_at, icrc);
  return total;
}

EthernetHeader ParsedFrame::ethernet() const noexcept {
  EthernetHeader h;
  const std::uint8_t* p = frame.data();
  std::memcpy(h.dst.data(), p, 6);
  std::memcpy(h.src.data(), p + 6, 6);
  h.vlan_present = load_be16(p + 12) == ethertype_vlan;
  h.vlan_tci = h.vlan_present ? load_be16(p + 14) : 0;
  h.ethertype = load_be16(p + (h.vlan_present ? 16 : 12));
  return h;
}

// An ACK's MAH comes right after its BTH: no opcode with path blocks has
// another extension header (transport_headers_size relies on it).
static_assert([] {
  for (const OpcodeInfo& info : opcode_table)
    if ((info.headers & has_mr_ack) != 0 && info.headers != has_mr_ack) return false;
  return true;
}());

std::size_t transport_headers_size(ByteSpan from_bth) noexcept {
  if (from_bth.size() < bth_size) return 0;
  const std::uint8_t opcode = from_bth[0];
  const OpcodeInfo& info = opcode_info(opcode);
  if (!info.known()) return 0;
  std::size_t n = bth_size + extension_sizes[opcode];
  if (info.has(has_mr_ack)) {
    if (from_bth.size() < bth_size + 2) return 0;
    n += std::size_t{from_bth[bth_size + 1]} * mr_path_ack_size;  // the MAH's second byte counts the blocks
  }
  return n <= from_bth.size() ? n : 0;
}

bool peek_bth_offset(ByteSpan f, std::size_t& bth) noexcept {
  std::size_t l3 = ethernet_header_size;
  if (f.size() < l3) return false;
  std::uint16_t type = load_be16(f.data() + 12);
  if (type == ethertype_vlan) {
    if (f.size() < l3 + vlan_tag_size) return false;
    type = load_be16(f.data() + 16);
    l3 += vlan_tag_size;
  }
  std::size_t l4 = 0;
  if (type == ethertype_ipv4) {
    if (f.size() < l3 + ipv4_header_size || f[l3 + 9] != ip_protocol_udp) return false;
    l4 = l3 + 4u * (f[l3] & 0x0f);
  } else if (type == ethertype_ipv6) {
    if (f.size() < l3 + ipv6_header_size || f[l3 + 6] != ip_protocol_udp) return false;
    l4 = l3 + ipv6_header_size;
  } else {
    return false;
  }
  if (f.size() < l4 + udp_header_size + 8 || load_be16(f.data() + l4 + 2) != roce_udp_port) return false;
  bth = l4 + udp_header_size;
  return true;
}

bool peek_dest_qp(ByteSpan f, std::uint32_t& qpn) noexcept {
  std::size_t bth = 0;
  if (!peek_bth_offset(f, bth)) return false;
  constexpr std::size_t dest_qp_at = 5;  // in the BTH: 24 bits after the reserved byte
  const std::uint8_t* q = f.data() + bth + dest_qp_at;
  qpn = (std::uint32_t{q[0]} << 16) | (std::uint32_t{q[1]} << 8) | q[2];
  return true;
}

ParseError parse_frame(ByteSpan frame, ParsedFrame& out, ParseOptions options) noexcept {
  const std::uint8_t* p = frame.data();
  const std::size_t len = frame.size();
  out.frame = frame;

  // Ethernet, with at most one 802.1Q tag.
  if (len < ethernet_header_size) return ParseError::truncated;
  std::size_t l3 = ethernet_header_size;
  std::uint16_t ethertype = load_be16(p + 12);
  if (ethertype == ethertype_vlan) {
    if (len < ethernet_header_size + vlan_tag_size) return ParseError::truncated;
    ethertype = load_be16(p + 16);
    l3 += vlan_tag_size;
  }
  out.l3_offset = static_cast<std::uint16_t>(l3);

  // IP: validated from the bytes; the accessors decode the rest on demand.
  std::size_t ip_payload_len = 0;
  std::size_t l4 = 0;
  if (ethertype == ethertype_ipv4) {
    if (len < l3 + ipv4_header_size) return ParseError::truncated;
    const std::uint8_t* ip = p + l3;
    out.ip_version = static_cast<std::uint8_t>(ip[0] >> 4);
    if (out.ip_version != 4) return ParseError::bad_ip_version;
    const std::size_t ihl = std::size_t{ip[0] & 0x0fu} * 4;
    if (ihl < ipv4_header_size) return ParseError::bad_ip_header_length;
    const std::size_t total_length = load_be16(ip + 2);
    if (total_length < ihl) return ParseError::bad_ip_length;
    if (len < l3 + total_length) return ParseError::truncated;
    if (options.verify_ip_checksum && ipv4_header_checksum(ip, ihl) != 0)
      return ParseError::bad_ip_checksum;
    if (ihl != ipv4_header_size) return ParseError::ipv4_options;
    if ((load_be16(ip + 6) & 0x3fff) != 0) return ParseError::ip_fragment;
    if (ip[9] != ip_protocol_udp) return ParseError::not_udp;
    ip_payload_len = total_length - ihl;
    l4 = l3 + ihl;
  } else if (ethertype == ethertype_ipv6) {
    if (len < l3 + ipv6_header_size) return ParseError::truncated;
    const std::uint8_t* ip = p + l3;
    out.ip_version = static_cast<std::uint8_t>(ip[0] >> 4);
    if (out.ip_version != 6) return ParseError::bad_ip_version;
    ip_payload_len = load_be16(ip + 4);
    if (len < l3 + ipv6_header_size + ip_payload_len) return ParseError::truncated;
    if (ip[6] != ip_protocol_udp) return ParseError::not_udp;
    l4 = l3 + ipv6_header_size;
  } else {
    out.ip_version = 0;
    return ParseError::not_ip;
  }
  out.l4_offset = static_cast<std::uint16_t>(l4);

  // UDP.
  if (ip_payload_len < udp_header_size) return ParseError::bad_udp_length;
  if (load_be16(p + l4 + 4) != ip_payload_len) return ParseError::bad_udp_length;
  if (load_be16(p + l4 + 2) != roce_udp_port) return ParseError::not_roce_port;
  out.udp_src_port = load_be16(p + l4);
  const std::size_t udp_payload_len = ip_payload_len - udp_header_size;

  // BTH.
  const std::size_t bth_at = l4 + udp_header_size;
  out.bth_offset = static_cast<std::uint16_t>(bth_at);
  if (udp_payload_len < bth_size + icrc_size) return ParseError::length_mismatch;
  decode(p + bth_at, out.bth);
  if (out.bth.tver != 0) return ParseError::bad_header_field;
  const OpcodeInfo& info = opcode_info(out.bth.opcode);
  if (!info.known()) return ParseError::unknown_opcode;
  out.headers = info.headers;

  // Extension headers, in wire order. Their fixed part is checked once
  // against the bytes before the ICRC; only the ACK's path blocks vary.
  const std::size_t icrc_at = bth_at + udp_payload_len - icrc_size;  // ICRC starts here
  // A secure trailer sits between the pad and the ICRC: the headers and
  // payload end before it. A frame too short to hold one is parsed as it
  // is (secure_trailer_offset 0), for its connection to refuse.
  const bool trailed = options.secure_trailer && udp_payload_len >= bth_size + secure_trailer_size + icrc_size;
  const std::size_t end_of_data = trailed ? icrc_at - secure_trailer_size : icrc_at;
  out.secure_trailer_offset = trailed ? static_cast<std::uint16_t>(end_of_data) : std::uint16_t{0};
  std::size_t at = bth_at + bth_size;
  if (at + extension_sizes[out.bth.opcode] > end_of_data) return ParseError::length_mismatch;
  const std::uint16_t h = info.headers;
  if (h & has_mr_data) {
    decode(p + at, out.mr_data);
    at += mr_data_header_size;
    if ((out.mr_data.flags & ~mr_flag::defined) != 0 || out.mr_data.path_id >= max_paths)
      return ParseError::bad_header_field;
  }
  if (h & has_deth) {
    decode(p + at, out.deth);
    at += deth_size;
  }
  if (h & has_reth) {
    decode(p + at, out.reth);
    at += reth_size;
  }
  if (h & has_atomic_eth) {
    decode(p + at, out.atomic_eth);
    at += atomic_eth_size;
  }
  if (h & has_aeth) {
    decode(p + at, out.aeth);
    at += aeth_size;
  }
  if (h & has_atomic_ack_eth) {
    out.atomic_ack_orig = load_be64(p + at);
    at += atomic_ack_eth_size;
  }
  if (h & has_mr_write) {
    decode(p + at, out.mr_write);
    at += mr_write_header_size;
  }
  if (h & has_mr_send) {
    decode(p + at, out.mr_send);
    at += mr_send_header_size;
  }
  if (h & has_mr_read) {
    decode(p + at, out.mr_read);
    at += mr_read_header_size;
  }
  if (h & has_mr_ack) {
    decode(p + at, out.mr_ack);
    at += mr_ack_header_size;
    if (out.mr_ack.path_count > max_paths) return ParseError::bad_header_field;
    const std::size_t blocks = std::size_t{out.mr_ack.path_count} * mr_path_ack_size;
    if (at + blocks > end_of_data) return ParseError::length_mismatch;
    out.mr_path_acks_raw = ByteSpan(p + at, blocks);
    at += blocks;
  } else {
    out.mr_path_acks_raw = {};
  }
  if (h & has_imm) {
    out.imm = load_be32(p + at);
    at += immdt_size;
  }
  if (h & has_ieth) {
    out.ieth_rkey = load_be32(p + at);
    at += ieth_size;
  }
  if (h & has_cnp_reserved) at += cnp_reserved_size;

  // Payload and pad.
  const std::size_t payload_and_pad = end_of_data - at;
  out.payload_offset = static_cast<std::uint16_t>(at);
  if (!(h & has_payload)) {
    if (payload_and_pad != 0) return ParseError::length_mismatch;
    if (out.bth.pad != 0) return ParseError::bad_pad;
  } else if (out.bth.pad > payload_and_pad || (payload_and_pad & 3) != 0) {
    return ParseError::bad_pad;
  }
  out.payload = ByteSpan(p + at, payload_and_pad - out.bth.pad);
  out.icrc = load_le32(p + icrc_at);
  out.icrc_checked = options.verify_icrc;
  if (options.verify_icrc) {
    const ParseOptions::Precomputed* pre = options.precomputed_icrc;
    const std::uint32_t icrc = pre != nullptr && pre->from == l3 && pre->to == icrc_at
                                   ? pre->icrc
                                   : compute_icrc(ByteSpan(p + l3, icrc_at - l3));
    if (icrc != out.icrc) return ParseError::bad_icrc;
  }
  return ParseError::ok;
}

}  // namespace metaroce::wire
