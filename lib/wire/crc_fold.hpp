// CRC-32 (IEEE, reflected; zlib's crc32 convention) for short buffers by
// carry-less multiplication, for the ICRC of short frames.
//
// ISA-L's crc32_gzip_refl folds only from 256 bytes on; below that it walks
// a byte table (about 75 cycles for a 140-byte frame, and each call costs a
// fixed ~10 ns). Small messages and ACKs are all below 256 bytes, and every
// one of them is CRCed once on each end. This folds 16 bytes per step with
// PCLMULQDQ (four lanes from 64 bytes on) and reduces once at the end
// (Barrett), following the method of Gopal et al., "Fast CRC Computation for
// Generic Polynomials Using PCLMULQDQ Instruction" (Intel, 2009).
//
// Chosen at run time: machines without PCLMULQDQ get the byte table.
#pragma once

#include <cstddef>
#include <cstdint>

namespace metaroce::wire {

// Same result as zlib's crc32(crc, p, len) and ISA-L's crc32_gzip_refl.
[[nodiscard]] std::uint32_t crc32_fold(std::uint32_t crc, const std::uint8_t* p, std::size_t len) noexcept;

// The register form, without zlib's inversions: crc32_fold(crc, p, len) ==
// ~crc32_fold_register(~crc, p, len). With register 0, leading zero bytes
// change nothing, so a caller can pad its input at the front to a multiple
// of 16 bytes, which takes no byte-table step at all.
[[nodiscard]] std::uint32_t crc32_fold_register(std::uint32_t reg, const std::uint8_t* p, std::size_t len) noexcept;

// The byte-table path alone (tests compare both paths on every length).
[[nodiscard]] std::uint32_t crc32_bytewise(std::uint32_t crc, const std::uint8_t* p, std::size_t len) noexcept;

// Whether crc32_fold uses PCLMULQDQ on this machine.
[[nodiscard]] bool crc32_fold_uses_pclmul() noexcept;

}  // namespace metaroce::wire
