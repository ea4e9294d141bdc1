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
// Long inputs fold 32 bytes per VPCLMULQDQ where the CPU has it with AVX2
// (eight lanes, 128 bytes a step), which ISA-L does only with AVX-512.
//
// Chosen at run time: machines without PCLMULQDQ and AVX get the byte
// table. AVX only for the VEX encoding of the same 128-bit instructions:
// legacy SSE code runs at half speed here (AMD EPYC, family 26) after
// AVX-512 code such as ISA-L's has left the upper register halves dirty.
#pragma once

#include <cstddef>
#include <array>
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
// Whether crc32_fold folds inputs over 512 bytes 32 bytes per VPCLMULQDQ
// (AVX2 with VPCLMULQDQ) rather than 16 per PCLMULQDQ.
[[nodiscard]] bool crc32_fold_long_is_ymm() noexcept;
// crc32_fold without the 32-byte fold (tests compare both on every length).
[[nodiscard]] std::uint32_t crc32_fold_narrow(std::uint32_t crc, const std::uint8_t* p, std::size_t len) noexcept;

// What to do to the bytes near the start of an input before they are CRCed:
// the byte at offset o (-before <= o < reach) counts as
// (byte & keep[before + o]) | ones[before + o]; bytes from `reach` on count
// as they are. keep is 0 before kept_from (those bytes are never read: the
// ICRC's filler is 8 such bytes, with ones in the last four) and 0xff from
// it up to the array's end; ones is 0 from reach on; negative offsets
// stand for the CRC's leading zeros.
struct FrontMasks {
  static constexpr std::size_t before = 64;
  static constexpr std::size_t reach = 64;
  static constexpr std::size_t size = before + reach + 64;
  std::array<std::uint8_t, size> keep{};
  std::array<std::uint8_t, size> ones{};
  // The first byte read (see keep).
  std::size_t kept_from = 0;
};

enum class FoldWidth : std::uint8_t {
  best,    // 64-byte VPCLMULQDQ where the machine has AVX-512, else 16-byte
  narrow,  // 16-byte PCLMULQDQ (tests check both on every machine)
};

// The register form, from register 0, of the CRC of the `len` bytes at p,
// FrontMasks applied, reading only the bytes from p + kept_from to p + len.
// From kept_from + 16 (and 32) up to 512 bytes it folds 16-byte blocks that
// end where the input ends, with PCLMULQDQ, or four at a time with AVX-512
// (BW, VL, VBMI, VPCLMULQDQ); a block that starts before kept_from is
// loaded from there and shifted into place. Otherwise the byte table.
inline constexpr std::size_t crc32_fold_front_max = 512;
[[nodiscard]] std::uint32_t crc32_fold_front_masked(const std::uint8_t* p, std::size_t len, const FrontMasks& m,
                                                    FoldWidth width = FoldWidth::best) noexcept;
// crc32_fold_front_masked (FoldWidth::best) of four inputs of the same
// length and masks, p[j] giving out[j]: with AVX-512 the four folds run
// interleaved and share one reduction.
void crc32_fold_front_masked4(const std::uint8_t* const* p, std::size_t len, const FrontMasks& m,
                              std::uint32_t* out) noexcept;
// Whether FoldWidth::best folds 64 bytes at a time here.
[[nodiscard]] bool crc32_fold_front_is_wide() noexcept;

}  // namespace metaroce::wire
