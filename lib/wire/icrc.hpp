// RoCEv2 invariant CRC (ICRC), for IPv4 and IPv6.
//
// CRC-32 (IEEE 802.3, reflected) over: 8 bytes of 0xFF (the absent LRH),
// the IP header with its variant fields set to ones (IPv4: TOS, TTL, header
// checksum; IPv6: traffic class, flow label, hop limit), the UDP header with
// its checksum set to ones, the BTH with its byte 4 (FECN, BECN, reserved)
// set to ones, and every byte after the BTH up to the ICRC. The result goes
// on the wire least-significant byte first (store_le32). doc/WIRE.md has the
// byte-by-byte rules.
//
// The frame may be given in pieces (headers in one buffer, payload in
// another, pad and ICRC in a third). In one piece, up to 512 bytes with the
// plain IPv4 header or IPv6 (every ACK and small message on the data path:
// a received mbuf, a transmit arena where short payloads follow their
// headers), it is read in place: each block loaded where it lies, the
// filler and the variant fields' ones put in by masks, no byte before the
// IP header read (crc_fold.hpp, crc32_fold_front_masked). Otherwise only
// the masked headers (<= 88 bytes) are copied, or the whole frame when it
// is at most 512 bytes; the rest is read in place, the pieces chained
// through the CRC seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace metaroce::wire {

using ByteSpan = std::span<const std::uint8_t>;

// `pieces` together hold the frame from the first byte of the IP header to
// the last byte before the ICRC. The IP, UDP and BTH headers may span pieces.
// Returns 0 when the pieces are shorter than those headers (the parser never
// calls it so).
[[nodiscard]] std::uint32_t compute_icrc(std::span<const ByteSpan> pieces) noexcept;

[[nodiscard]] inline std::uint32_t compute_icrc(ByteSpan from_ip_to_icrc) noexcept {
  return compute_icrc(std::span<const ByteSpan>(&from_ip_to_icrc, 1));
}

// compute_icrc of each frame (one piece each, from the IP header to the
// ICRC), out[i] for frames[i]. Four frames in a row of the same length and
// IP version (a burst of equal messages) are folded together, sharing the
// fold's latency and its reduction.
void compute_icrcs(std::span<const ByteSpan> frames, std::uint32_t* out) noexcept;

namespace detail {
// compute_icrc's way for pieces, long frames and IPv4 options: the masked
// headers (or a whole short frame) gathered into a buffer. Tests check it
// against the in-place way.
[[nodiscard]] std::uint32_t compute_icrc_gathered(std::span<const ByteSpan> pieces) noexcept;
}  // namespace detail

// Plain CRC-32 (IEEE, as zlib's crc32) continuing from `crc` (0 to start).
[[nodiscard]] std::uint32_t crc32_update(std::uint32_t crc, ByteSpan bytes) noexcept;

// Name of the CRC code path in use, for benchmark reports.
[[nodiscard]] const char* crc_implementation() noexcept;

}  // namespace metaroce::wire
