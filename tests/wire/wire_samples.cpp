#include "wire_samples.hpp"

#include <array>

namespace metaroce::test {

using namespace metaroce::wire;

namespace {
const std::array<MrPathAck, 3> sample_path_acks = [] {
  std::array<MrPathAck, 3> acks{};
  for (std::size_t i = 0; i < acks.size(); ++i) {
    acks[i].path_id = static_cast<std::uint8_t>(i * 5);
    acks[i].ce_count = static_cast<std::uint16_t>(i * 3);
    acks[i].cum_seq = 1000 + static_cast<std::uint32_t>(i);
    acks[i].ts_echo = 0xabcd0000u + static_cast<std::uint32_t>(i);
    acks[i].set_sack_bit(i);
    acks[i].set_sack_bit(255 - i);
  }
  return acks;
}();
}  // namespace

FrameSpec sample_spec(std::uint8_t opcode, int ip_version, bool vlan) {
  FrameSpec s;
  s.eth.src = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
  s.eth.dst = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
  s.eth.vlan_present = vlan;
  s.eth.vlan_tci = vlan ? static_cast<std::uint16_t>((3u << 13) | 100u) : 0;
  s.ip_version = static_cast<std::uint8_t>(ip_version);
  s.ipv4.src = 0x0a000001;
  s.ipv4.dst = 0x0a000002;
  s.ipv4.dscp = 26;
  s.ipv4.ecn = 2;  // ECT(0)
  s.ipv4.identification = 0x1234;
  s.ipv6.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  s.ipv6.dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  s.ipv6.dscp = 26;
  s.ipv6.ecn = 2;
  s.ipv6.flow_label = 0x12345;
  s.udp.src_port = static_cast<std::uint16_t>(49152 + opcode);
  s.bth.opcode = opcode;
  s.bth.pkey = 0xffff;
  s.bth.dest_qp = 0x000123;
  s.bth.psn = 0xfffffe;
  s.bth.ack_req = (opcode & 1) != 0;
  s.bth.solicited = opcode == opcode::send_only;
  s.bth.becn = opcode == opcode::cnp;
  s.deth = {0x11111111, 0x000456};
  s.reth = {0x00007f00'12345678ull, 0xdeadbeef, 4096};
  s.atomic_eth = {0x1000, 0xcafe, 5, 7};
  s.aeth = {syndrome::ack | 0x1f, 0x00abcd};
  s.atomic_ack_orig = 0x0102030405060708ull;
  s.imm = 0x600df00d;
  s.ieth_rkey = 0x0badf00d;
  s.mr_data = {7, mr_flag::last, 3, 0xfffffff0u, 42, 123456};
  s.mr_write = {0x00007f00'00001000ull, 0x1234, 8192, 4096};
  s.mr_send = {17, 3000, 2048};
  s.mr_ack = {syndrome::ack, 0, 0x00fffe, 99, 25000};
  if (opcode == opcode::mr_ack) s.mr_path_acks = sample_path_acks;
  return s;
}

std::vector<FrameSpec> all_sample_specs() {
  std::vector<FrameSpec> specs;
  for (unsigned op = 0; op < 256; ++op) {
    if (!opcode_info(static_cast<std::uint8_t>(op)).known()) continue;
    for (int ipv : {4, 6}) {
      for (bool vlan : {false, true}) specs.push_back(sample_spec(static_cast<std::uint8_t>(op), ipv, vlan));
    }
  }
  return specs;
}

std::vector<std::vector<std::uint8_t>> sample_frames() {
  std::vector<std::vector<std::uint8_t>> frames;
  std::size_t n = 0;
  for (const FrameSpec& spec : all_sample_specs()) {
    const bool carries_payload = opcode_info(spec.bth.opcode).has(has_payload);
    // Rotate payload lengths so every pad value 0..3 appears.
    const std::size_t payload_len = carries_payload ? 61 + (n++ % 4) * 33 : 0;
    std::vector<std::uint8_t> payload(payload_len);
    for (std::size_t i = 0; i < payload_len; ++i) payload[i] = payload_byte(i);
    std::vector<std::uint8_t> frame(headers_size(spec) + payload_len + 8);
    frame.resize(build_frame(spec, payload, frame));
    frames.push_back(std::move(frame));
  }
  return frames;
}

}  // namespace metaroce::test
