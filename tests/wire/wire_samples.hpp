// Sample frames of every opcode we build, shared by the unit tests, the
// sample writer and the benchmarks.
#pragma once

#include <cstdint>
#include <vector>

#include "wire/frame.hpp"

namespace metaroce::test {

// A spec with plausible addresses for `opcode`, over IPv4 or IPv6.
wire::FrameSpec sample_spec(std::uint8_t opcode, int ip_version, bool vlan);

// Every opcode the opcode table knows, IPv4 and IPv6, with and without
// VLAN, payload lengths that exercise every pad value.
std::vector<wire::FrameSpec> all_sample_specs();

std::vector<std::vector<std::uint8_t>> sample_frames();

// Deterministic payload byte for offset i.
inline std::uint8_t payload_byte(std::size_t i) { return static_cast<std::uint8_t>(i * 7 + 3); }

}  // namespace metaroce::test
