// fuzz-wire-parse: wire::parse_frame on arbitrary bytes.
//
// The input is copied into a heap buffer of exactly its size so that
// AddressSanitizer reports any read past the frame. When the frame parses,
// its invariants are checked and it is rebuilt from what the parser decoded
// (wire::build_frame); the rebuilt frame must parse to the same fields and
// carry the same bytes except those the parser ignores by design. Any
// violation aborts, which libFuzzer reports as a crash with the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "wire/frame.hpp"

namespace {

using namespace metaroce::wire;

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz-wire-parse: invariant violated: %s\n", what);
  std::abort();
}

void require(bool condition, const char* what) {
  if (!condition) violated(what);
}

// Every header the parser decoded, re-encoded into bytes, so that two parses
// compare with memcmp whatever the struct padding.
std::vector<std::uint8_t> decoded_fields(const ParsedFrame& f) {
  std::vector<std::uint8_t> out;
  const auto put = [&out](auto&& encoder, std::size_t size) {
    const std::size_t at = out.size();
    out.resize(at + size);
    encoder(out.data() + at);
  };
  put([&](std::uint8_t* p) { encode(f.ethernet(), p); }, 18);
  if (f.ip_version == 4) {
    put([&](std::uint8_t* p) { encode(f.ipv4(), p); }, ipv4_header_size);
  } else {
    put([&](std::uint8_t* p) { encode(f.ipv6(), p); }, ipv6_header_size);
  }
  put([&](std::uint8_t* p) { encode(f.udp(), p); }, udp_header_size);
  put([&](std::uint8_t* p) { encode(f.bth, p); }, bth_size);
  put([&](std::uint8_t* p) {
    store_be16(p, f.headers);
    store_be16(p + 2, f.udp_src_port);
    p[4] = f.ip_version;
  }, 5);
  if (f.has(has_deth)) put([&](std::uint8_t* p) { encode(f.deth, p); }, deth_size);
  if (f.has(has_reth)) put([&](std::uint8_t* p) { encode(f.reth, p); }, reth_size);
  if (f.has(has_atomic_eth)) put([&](std::uint8_t* p) { encode(f.atomic_eth, p); }, atomic_eth_size);
  if (f.has(has_aeth)) put([&](std::uint8_t* p) { encode(f.aeth, p); }, aeth_size);
  if (f.has(has_atomic_ack_eth)) put([&](std::uint8_t* p) { store_be64(p, f.atomic_ack_orig); }, 8);
  if (f.has(has_imm)) put([&](std::uint8_t* p) { store_be32(p, f.imm); }, 4);
  if (f.has(has_ieth)) put([&](std::uint8_t* p) { store_be32(p, f.ieth_rkey); }, 4);
  if (f.has(has_mr_data)) put([&](std::uint8_t* p) { encode(f.mr_data, p); }, mr_data_header_size);
  if (f.has(has_mr_write)) put([&](std::uint8_t* p) { encode(f.mr_write, p); }, mr_write_header_size);
  if (f.has(has_mr_send)) put([&](std::uint8_t* p) { encode(f.mr_send, p); }, mr_send_header_size);
  if (f.has(has_mr_read)) put([&](std::uint8_t* p) { encode(f.mr_read, p); }, mr_read_header_size);
  if (f.has(has_mr_ack)) {
    put([&](std::uint8_t* p) { encode(f.mr_ack, p); }, mr_ack_header_size);
    for (std::size_t i = 0; i < f.mr_ack.path_count; ++i)
      put([&](std::uint8_t* p) { encode(f.path_ack(i), p); }, mr_path_ack_size);
  }
  out.insert(out.end(), f.payload.begin(), f.payload.end());
  return out;
}

// Where the parsed frame lies in the buffer, and whether its lengths agree.
void check_layout(const ParsedFrame& f, const std::uint8_t* data, std::size_t size) {
  require(f.frame.data() == data && f.frame.size() == size, "frame span is not the input");
  require(f.ip_version == 4 || f.ip_version == 6, "ip_version");
  const EthernetHeader eth = f.ethernet();
  require(f.l3_offset == eth.size(), "l3_offset disagrees with the VLAN tag");
  require(f.l4_offset == f.l3_offset + (f.ip_version == 4 ? ipv4_header_size : ipv6_header_size),
          "l4_offset disagrees with the IP version");
  require(f.bth_offset == f.l4_offset + udp_header_size, "bth_offset");
  require(f.bth.pad <= 3, "pad above 3");
  require(f.payload_offset >= f.bth_offset + bth_size, "payload before the end of the BTH");
  require(f.payload.data() == data + f.payload_offset, "payload span does not start at payload_offset");
  const std::size_t end_of_data = f.payload_offset + f.payload.size() + f.bth.pad;  // where the ICRC starts
  require(end_of_data + icrc_size <= size, "payload, pad and ICRC run past the frame");
  const UdpHeader udp = f.udp();
  require(udp.dst_port == roce_udp_port, "UDP destination port");
  require(udp.src_port == f.udp_src_port, "udp_src_port disagrees with the UDP header");
  require(std::size_t{udp.length} == end_of_data + icrc_size - f.l4_offset,
          "UDP length disagrees with the parsed layout");
  if (f.ip_version == 4) {
    require(std::size_t{f.ipv4().total_length} == ipv4_header_size + udp.length, "IPv4 total length");
  } else {
    require(std::size_t{f.ipv6().payload_length} == udp.length, "IPv6 payload length");
  }
  const OpcodeInfo& info = opcode_info(f.bth.opcode);
  require(info.known() && info.headers == f.headers, "headers disagree with the opcode table");
  if (info.has(has_payload)) {
    require(((f.payload.size() + f.bth.pad) & 3) == 0, "payload + pad not a multiple of 4");
  } else {
    require(f.payload.empty() && f.bth.pad == 0, "payload on an opcode without one");
  }
  if (f.has(has_mr_ack)) {
    require(f.mr_ack.path_count <= max_paths, "path_count above 64");
    require(f.mr_path_acks_raw.size() == std::size_t{f.mr_ack.path_count} * mr_path_ack_size,
            "path block bytes disagree with path_count");
    require(f.mr_path_acks_raw.data() >= data + f.bth_offset &&
                f.mr_path_acks_raw.data() + f.mr_path_acks_raw.size() <= data + f.payload_offset,
            "path blocks outside the extension headers");
  }
  if (f.has(has_mr_data)) {
    require(f.mr_data.path_id < max_paths, "path id above 63");
    require((f.mr_data.flags & ~mr_flag::defined) == 0, "undefined metaroce flags");
  }
  require(load_le32(data + end_of_data) == f.icrc, "icrc is not the carried one");
  if (f.icrc_checked) {
    require(compute_icrc(ByteSpan(data + f.l3_offset, end_of_data - f.l3_offset)) == f.icrc,
            "ICRC said ok but does not recompute");
  }
}

// The spec that builds this frame again, from the decoded fields only.
FrameSpec spec_of(const ParsedFrame& f, std::vector<MrPathAck>& path_acks) {
  FrameSpec spec;
  spec.eth = f.ethernet();
  spec.ip_version = f.ip_version;
  if (f.ip_version == 4) spec.ipv4 = f.ipv4(); else spec.ipv6 = f.ipv6();
  spec.udp = f.udp();
  spec.bth = f.bth;
  spec.deth = f.deth;
  spec.reth = f.reth;
  spec.atomic_eth = f.atomic_eth;
  spec.aeth = f.aeth;
  spec.atomic_ack_orig = f.atomic_ack_orig;
  spec.imm = f.imm;
  spec.ieth_rkey = f.ieth_rkey;
  spec.mr_data = f.mr_data;
  spec.mr_write = f.mr_write;
  spec.mr_send = f.mr_send;
  spec.mr_read = f.mr_read;
  spec.mr_ack = f.mr_ack;
  path_acks.clear();
  if (f.has(has_mr_ack))
    for (std::size_t i = 0; i < f.mr_ack.path_count; ++i) path_acks.push_back(f.path_ack(i));
  spec.mr_path_acks = path_acks;
  return spec;
}

// The original frame with the bits the parser ignores by design cleared, as
// the builder writes them: IPv4's reserved flag, BTH reserved bits, DETH's
// reserved byte, the MAH and path-block reserved bytes, the top byte of
// the MAH's 24-bit delivered PSN, CNP's reserved bytes and the pad. Returns whether any bit had to be cleared.
bool normalize_ignored_bits(const ParsedFrame& f, std::vector<std::uint8_t>& bytes) {
  const std::vector<std::uint8_t> before = bytes;
  std::uint8_t* p = bytes.data();
  if (f.ip_version == 4) p[f.l3_offset + 6] &= 0x7f;
  const std::size_t bth = f.bth_offset;
  p[bth + 4] &= 0xc0;
  p[bth + 8] &= 0x80;
  std::size_t at = bth + bth_size;
  if (f.has(has_deth)) {
    p[at + 4] = 0;
    at += deth_size;
  }
  if (f.has(has_mr_ack)) {
    // MAH: BTH then MAH directly (no other header precedes it).
    p[at + 2] = 0;
    p[at + 3] = 0;
    p[at + 4] = 0;
    for (std::size_t i = 0; i < f.mr_ack.path_count; ++i) p[at + mr_ack_header_size + i * mr_path_ack_size + 1] = 0;
  }
  if (f.has(has_cnp_reserved)) std::memset(p + f.payload_offset - cnp_reserved_size, 0, cnp_reserved_size);
  std::memset(p + f.payload_offset + f.payload.size(), 0, f.bth.pad);
  return bytes != before;
}

void check_rebuild(const ParsedFrame& f) {
  std::vector<MrPathAck> path_acks;
  const FrameSpec spec = spec_of(f, path_acks);
  const std::size_t length = f.payload_offset + f.payload.size() + f.bth.pad + icrc_size;
  std::vector<std::uint8_t> rebuilt(length + 64);
  const std::size_t built = build_frame(spec, f.payload, rebuilt);
  require(built == length, "rebuilt frame has another length");
  rebuilt.resize(built);

  ParsedFrame again;
  require(parse_frame(rebuilt, again) == ParseError::ok, "rebuilt frame does not parse");
  require(decoded_fields(again) == decoded_fields(f), "rebuilt frame decodes to other fields");

  std::vector<std::uint8_t> original(f.frame.begin(), f.frame.begin() + static_cast<std::ptrdiff_t>(length));
  const bool normalized = normalize_ignored_bits(f, original);
  if (normalized) {
    // The IPv4 checksum and the ICRC cover the cleared bits: skip them.
    if (f.ip_version == 4) {
      original[f.l3_offset + 10] = rebuilt[f.l3_offset + 10];
      original[f.l3_offset + 11] = rebuilt[f.l3_offset + 11];
    }
    std::memcpy(original.data() + length - icrc_size, rebuilt.data() + length - icrc_size, icrc_size);
  }
  require(original == rebuilt, "rebuilt bytes differ from the frame");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Exact-size heap copy: libFuzzer's own buffer may be larger than `size`.
  const std::unique_ptr<std::uint8_t[]> frame(new std::uint8_t[size == 0 ? 1 : size]);
  if (size != 0) std::memcpy(frame.get(), data, size);
  const ByteSpan bytes(frame.get(), size);

  ParsedFrame checked;
  const ParseError result = parse_frame(bytes, checked);
  ParsedFrame unchecked;
  const ParseError lenient =
      parse_frame(bytes, unchecked, ParseOptions{.verify_ip_checksum = false, .verify_icrc = false});
  require(static_cast<std::size_t>(result) < parse_error_count, "parse error out of range");
  require(!to_string(result).empty(), "parse error without a name");

  if (result == ParseError::bad_icrc) require(lenient == ParseError::ok, "bad_icrc, yet fails unchecked");
  if (lenient != ParseError::ok) return 0;
  check_layout(unchecked, frame.get(), size);
  if (result != ParseError::ok) return 0;

  require(decoded_fields(checked) == decoded_fields(unchecked), "checks change the decoded fields");
  check_layout(checked, frame.get(), size);
  require(checked.icrc_checked, "icrc_checked not set");
  check_rebuild(checked);
  return 0;
}
