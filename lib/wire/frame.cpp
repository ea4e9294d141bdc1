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
std::size_t extension_size(std::uint16_t headers, std::size_t path_count) noexcept {
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
  if (headers & has_mr_ack) n += mr_ack_header_size + path_count * mr_path_ack_size;
  return n;
}

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
         extension_size(opcode_info(spec.bth.opcode).headers, spec.mr_path_acks.size());
}

HeaderLayout build_headers(const FrameSpec& spec, std::uint32_t payload_len,
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

  std::uint8_t* p = out.data();
  EthernetHeader eth = spec.eth;
  eth.ethertype = spec.ip_version == 6 ? ethertype_ipv6 : ethertype_ipv4;
  encode(eth, p);
  if (spec.ip_version == 4) {
    Ipv4Header ip = spec.ipv4;
    ip.total_length = static_cast<std::uint16_t>(ip_len + udp_len);
    ip.protocol = ip_protocol_udp;
    ip.checksum = 0;
    encode(ip, p + l3);
    store_be16(p + l3 + 10, ipv4_header_checksum(p + l3, ipv4_header_size));
  } else {
    Ipv6Header ip = spec.ipv6;
    ip.payload_length = static_cast<std::uint16_t>(udp_len);
    ip.next_header = ip_protocol_udp;
    encode(ip, p + l3);
  }
  std::size_t at = l3 + ip_len;
  UdpHeader udp = spec.udp;
  udp.length = static_cast<std::uint16_t>(udp_len);
  encode(udp, p + at);
  at += udp_header_size;
  Bth bth = spec.bth;
  bth.pad = pad;
  encode(bth, p + at);
  at += bth_size;

  const std::uint16_t h = info.headers;
  if (h & has_deth) { encode(spec.deth, p + at); at += deth_size; }
  if (h & has_reth) { encode(spec.reth, p + at); at += reth_size; }
  if (h & has_atomic_eth) { encode(spec.atomic_eth, p + at); at += atomic_eth_size; }
  if (h & has_aeth) { encode(spec.aeth, p + at); at += aeth_size; }
  if (h & has_atomic_ack_eth) { store_be64(p + at, spec.atomic_ack_orig); at += atomic_ack_eth_size; }
  if (h & has_mr_data) { encode(spec.mr_data, p + at); at += mr_data_header_size; }
  if (h & has_mr_write) { encode(spec.mr_write, p + at); at += mr_write_header_size; }
  if (h & has_mr_send) { encode(spec.mr_send, p + at); at += mr_send_header_size; }
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

  return HeaderLayout{static_cast<std::uint16_t>(at), static_cast<std::uint16_t>(l3), pad};
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
  const HeaderLayout layout = build_headers(spec, static_cast<std::uint32_t>(payload.size()), out);
  if (layout.size == 0) return 0;
  const std::size_t total = layout.size + payload.size() + layout.pad + icrc_size;
  if (total > out.size()) return 0;
  if (!payload.empty()) std::memcpy(out.data() + layout.size, payload.data(), payload.size());
  std::memset(out.data() + layout.size + payload.size(), 0, layout.pad);
  const std::size_t icrc_at = total - icrc_size;
  const std::uint32_t icrc =
      compute_icrc(ByteSpan(out.data() + layout.l3_offset, icrc_at - layout.l3_offset));
  store_le32(out.data() + icrc_at, icrc);
  return total;
}

ParseError parse_frame(ByteSpan frame, ParsedFrame& out, ParseOptions options) noexcept {
  const std::uint8_t* p = frame.data();
  const std::size_t len = frame.size();

  // Ethernet, with at most one 802.1Q tag.
  if (len < ethernet_header_size) return ParseError::truncated;
  std::memcpy(out.eth.dst.data(), p, 6);
  std::memcpy(out.eth.src.data(), p + 6, 6);
  std::size_t l3 = ethernet_header_size;
  std::uint16_t ethertype = load_be16(p + 12);
  out.eth.vlan_present = ethertype == ethertype_vlan;
  if (out.eth.vlan_present) {
    if (len < ethernet_header_size + vlan_tag_size) return ParseError::truncated;
    out.eth.vlan_tci = load_be16(p + 14);
    ethertype = load_be16(p + 16);
    l3 += vlan_tag_size;
  } else {
    out.eth.vlan_tci = 0;
  }
  out.eth.ethertype = ethertype;
  out.l3_offset = static_cast<std::uint16_t>(l3);

  // IP.
  std::size_t ip_payload_len = 0;
  std::size_t l4 = 0;
  if (ethertype == ethertype_ipv4) {
    if (len < l3 + ipv4_header_size) return ParseError::truncated;
    const std::uint8_t* ip = p + l3;
    out.ip_version = static_cast<std::uint8_t>(ip[0] >> 4);
    if (out.ip_version != 4) return ParseError::bad_ip_version;
    const std::size_t ihl = std::size_t{ip[0] & 0x0fu} * 4;
    if (ihl < ipv4_header_size) return ParseError::bad_ip_header_length;
    decode(ip, out.ipv4);
    if (out.ipv4.total_length < ihl) return ParseError::bad_ip_length;
    if (len < l3 + out.ipv4.total_length) return ParseError::truncated;
    if (options.verify_ip_checksum && ipv4_header_checksum(ip, ihl) != 0)
      return ParseError::bad_ip_checksum;
    if (ihl != ipv4_header_size) return ParseError::ipv4_options;
    if ((load_be16(ip + 6) & 0x3fff) != 0) return ParseError::ip_fragment;
    if (out.ipv4.protocol != ip_protocol_udp) return ParseError::not_udp;
    ip_payload_len = out.ipv4.total_length - ihl;
    l4 = l3 + ihl;
  } else if (ethertype == ethertype_ipv6) {
    if (len < l3 + ipv6_header_size) return ParseError::truncated;
    const std::uint8_t* ip = p + l3;
    out.ip_version = static_cast<std::uint8_t>(ip[0] >> 4);
    if (out.ip_version != 6) return ParseError::bad_ip_version;
    decode(ip, out.ipv6);
    if (len < l3 + ipv6_header_size + out.ipv6.payload_length) return ParseError::truncated;
    if (out.ipv6.next_header != ip_protocol_udp) return ParseError::not_udp;
    ip_payload_len = out.ipv6.payload_length;
    l4 = l3 + ipv6_header_size;
  } else {
    out.ip_version = 0;
    return ParseError::not_ip;
  }
  out.l4_offset = static_cast<std::uint16_t>(l4);

  // UDP.
  if (ip_payload_len < udp_header_size) return ParseError::bad_udp_length;
  decode(p + l4, out.udp);
  if (out.udp.length != ip_payload_len) return ParseError::bad_udp_length;
  if (out.udp.dst_port != roce_udp_port) return ParseError::not_roce_port;
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

  // Extension headers, in wire order.
  const std::size_t end_of_data = bth_at + udp_payload_len - icrc_size;  // ICRC starts here
  std::size_t at = bth_at + bth_size;
  auto fits = [&](std::size_t n) { return at + n <= end_of_data; };
  const std::uint16_t h = info.headers;
  if (h & has_deth) {
    if (!fits(deth_size)) return ParseError::length_mismatch;
    decode(p + at, out.deth);
    at += deth_size;
  }
  if (h & has_reth) {
    if (!fits(reth_size)) return ParseError::length_mismatch;
    decode(p + at, out.reth);
    at += reth_size;
  }
  if (h & has_atomic_eth) {
    if (!fits(atomic_eth_size)) return ParseError::length_mismatch;
    decode(p + at, out.atomic_eth);
    at += atomic_eth_size;
  }
  if (h & has_aeth) {
    if (!fits(aeth_size)) return ParseError::length_mismatch;
    decode(p + at, out.aeth);
    at += aeth_size;
  }
  if (h & has_atomic_ack_eth) {
    if (!fits(atomic_ack_eth_size)) return ParseError::length_mismatch;
    out.atomic_ack_orig = load_be64(p + at);
    at += atomic_ack_eth_size;
  }
  if (h & has_mr_data) {
    if (!fits(mr_data_header_size)) return ParseError::length_mismatch;
    decode(p + at, out.mr_data);
    at += mr_data_header_size;
    if ((out.mr_data.flags & ~mr_flag::defined) != 0 || out.mr_data.path_id >= max_paths)
      return ParseError::bad_header_field;
  }
  if (h & has_mr_write) {
    if (!fits(mr_write_header_size)) return ParseError::length_mismatch;
    decode(p + at, out.mr_write);
    at += mr_write_header_size;
  }
  if (h & has_mr_send) {
    if (!fits(mr_send_header_size)) return ParseError::length_mismatch;
    decode(p + at, out.mr_send);
    at += mr_send_header_size;
  }
  if (h & has_mr_ack) {
    if (!fits(mr_ack_header_size)) return ParseError::length_mismatch;
    decode(p + at, out.mr_ack);
    at += mr_ack_header_size;
    if (out.mr_ack.path_count > max_paths) return ParseError::bad_header_field;
    const std::size_t blocks = std::size_t{out.mr_ack.path_count} * mr_path_ack_size;
    if (!fits(blocks)) return ParseError::length_mismatch;
    out.mr_path_acks_raw = ByteSpan(p + at, blocks);
    at += blocks;
  } else {
    out.mr_path_acks_raw = {};
  }
  if (h & has_imm) {
    if (!fits(immdt_size)) return ParseError::length_mismatch;
    out.imm = load_be32(p + at);
    at += immdt_size;
  }
  if (h & has_ieth) {
    if (!fits(ieth_size)) return ParseError::length_mismatch;
    out.ieth_rkey = load_be32(p + at);
    at += ieth_size;
  }
  if (h & has_cnp_reserved) {
    if (!fits(cnp_reserved_size)) return ParseError::length_mismatch;
    at += cnp_reserved_size;
  }

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
  out.icrc = load_le32(p + end_of_data);
  out.icrc_checked = options.verify_icrc;
  if (options.verify_icrc &&
      compute_icrc(ByteSpan(p + l3, end_of_data - l3)) != out.icrc)
    return ParseError::bad_icrc;
  return ParseError::ok;
}

}  // namespace metaroce::wire
