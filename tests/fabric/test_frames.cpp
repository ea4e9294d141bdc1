#include "test_frames.hpp"

#include <stdexcept>

#include "fabric/frame_peek.hpp"
#include "wire/frame.hpp"
#include "wire/opcode.hpp"
#include "wire_samples.hpp"

namespace metaroce::test {

std::vector<std::uint8_t> make_frame(const TestFrame& frame) {
  wire::FrameSpec spec = sample_spec(wire::opcode::mr_write, frame.ip_version, frame.vlan);
  spec.udp.src_port = frame.sport;
  spec.bth.psn = frame.psn & wire::psn_mask;
  spec.ipv4.ecn = frame.ecn;
  spec.ipv6.ecn = frame.ecn;
  std::vector<std::uint8_t> payload(frame.payload_len);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = payload_byte(i + frame.psn);
  std::vector<std::uint8_t> bytes(frame.payload_len + 256);
  const std::size_t len = wire::build_frame(spec, payload, bytes);
  if (len == 0) throw std::logic_error("make_frame: build_frame failed");
  bytes.resize(len);
  return bytes;
}

std::uint32_t psn_of(std::span<const std::uint8_t> frame) {
  const fabric::FramePeek peek = fabric::peek_frame(frame);
  const std::size_t bth = peek.l4_offset + wire::udp_header_size;
  if (!peek.udp || frame.size() < bth + wire::bth_size) throw std::logic_error("psn_of: not a RoCE frame");
  return wire::load_be32(frame.data() + bth + 8) & wire::psn_mask;
}

std::uint16_t port_on_path(std::uint32_t path, std::uint32_t paths) {
  for (std::uint32_t port = 49152; port < 65536; ++port) {
    if (fabric::path_of_port(static_cast<std::uint16_t>(port), paths) == path) return static_cast<std::uint16_t>(port);
  }
  throw std::logic_error("port_on_path: no port");
}

}  // namespace metaroce::test
