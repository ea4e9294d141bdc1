#include "wire/icrc.hpp"

#include <isa-l/crc.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "wire/byte_order.hpp"
#include "wire/crc_fold.hpp"
#include "wire/headers.hpp"

namespace metaroce::wire {
namespace {

constexpr std::size_t lrh_filler_size = 8;
constexpr std::size_t max_masked_size = 60 /* IPv4 with options */ + udp_header_size + bth_size;
// Frames up to this many covered bytes are CRCed in one call from scratch.
constexpr std::size_t scratch_size = 512;
static_assert(max_masked_size <= scratch_size);

// Sets the fields the ICRC treats as variant to all ones; `h` starts at the
// IP header and holds ip_len + UDP + BTH bytes. (Applied to zeros, it also
// gives the in-place way its pattern of ones.)
constexpr void mask_variant_fields(std::uint8_t* h, std::size_t ip_len, bool ipv6) noexcept {
  if (ipv6) {
    h[0] |= 0x0f;  // low nibble of byte 0: traffic class high bits
    h[1] = 0xff;
    h[2] = 0xff;
    h[3] = 0xff;
    h[7] = 0xff;  // hop limit
  } else {
    h[1] = 0xff;   // TOS
    h[8] = 0xff;   // TTL
    h[10] = 0xff;  // header checksum
    h[11] = 0xff;
  }
  std::uint8_t* udp = h + ip_len;
  udp[6] = 0xff;
  udp[7] = 0xff;
  std::uint8_t* bth = udp + udp_header_size;
  bth[4] = 0xff;  // FECN, BECN and reserved bits
}

// The masks of the in-place ICRC over [filler][IP header ...]:
// the filler's 8 bytes are not read (keep 0); its last four are ones (the
// first four cancel the register's initial ones, as above); the variant
// fields are ones.
constexpr FrontMasks icrc_front_masks(bool ipv6) noexcept {
  FrontMasks m;
  constexpr std::size_t ip = lrh_filler_size;
  m.kept_from = ip;
  for (std::size_t o = ip; o < FrontMasks::reach + 64; ++o) m.keep[FrontMasks::before + o] = 0xff;
  for (std::size_t o = 4; o < ip; ++o) m.ones[FrontMasks::before + o] = 0xff;
  mask_variant_fields(m.ones.data() + FrontMasks::before + ip, ipv6 ? ipv6_header_size : ipv4_header_size, ipv6);
  return m;
}
constexpr FrontMasks front_ipv4 = icrc_front_masks(false);
constexpr FrontMasks front_ipv6 = icrc_front_masks(true);
static_assert(lrh_filler_size + ipv6_header_size + udp_header_size + 4 < FrontMasks::reach);

// The masks of a frame in one buffer that can be read in place: up to 512
// bytes with the plain IPv4 header, or IPv6. Null otherwise.
const FrontMasks* in_place_masks(ByteSpan from_ip) noexcept {
  if (from_ip.empty() || lrh_filler_size + from_ip.size() > crc32_fold_front_max) return nullptr;
  const std::uint8_t first = from_ip[0];
  const bool ipv6 = (first >> 4) == 6;
  const std::size_t masked_len = (ipv6 ? ipv6_header_size : ipv4_header_size) + udp_header_size + bth_size;
  if ((!ipv6 && first != 0x45) || from_ip.size() < masked_len) return nullptr;
  return ipv6 ? &front_ipv6 : &front_ipv4;
}

// The filler's 8 bytes are not read (keep 0): the pointer only sets where
// the input starts.
const std::uint8_t* filler_start(ByteSpan from_ip) noexcept {
  return reinterpret_cast<const std::uint8_t*>(reinterpret_cast<std::uintptr_t>(from_ip.data()) - lrh_filler_size);
}

// A frame in one buffer, up to 512 bytes with the plain IPv4 header or
// IPv6: read in place, nothing gathered.
bool icrc_in_place(ByteSpan from_ip, std::uint32_t& icrc) noexcept {
  const FrontMasks* masks = in_place_masks(from_ip);
  if (masks == nullptr) return false;
  icrc = ~crc32_fold_front_masked(filler_start(from_ip), lrh_filler_size + from_ip.size(), *masks);
  return true;
}

// Four frames of one length and IP version, each read in place, folded
// together; false (nothing written) otherwise.
bool four_in_place(const ByteSpan* f, std::uint32_t* out) noexcept {
  const FrontMasks* masks = in_place_masks(f[0]);
  if (masks == nullptr) return false;
  std::array<const std::uint8_t*, 4> starts{};
  for (std::size_t j = 0; j < 4; ++j) {
    if (f[j].size() != f[0].size() || in_place_masks(f[j]) != masks) return false;
    starts[j] = filler_start(f[j]);
  }
  crc32_fold_front_masked4(starts.data(), lrh_filler_size + f[0].size(), *masks, out);
  for (std::size_t j = 0; j < 4; ++j) out[j] = ~out[j];
  return true;
}

// A long span: ISA-L where the CPU has AVX-512 (its 64-byte VPCLMULQDQ
// kernel); our 32-byte VPCLMULQDQ fold where the CPU has VPCLMULQDQ
// without AVX-512 (AMD Zen 3, say), on which ISA-L's widest kernel folds
// 16 bytes per PCLMULQDQ, at half the speed (doc/BENCHMARKS.md).
bool long_by_fold() noexcept {
  static const bool yes = crc32_fold_long_is_ymm() && !crc32_fold_front_is_wide();
  return yes;
}

std::uint32_t crc_long(std::uint32_t crc, const std::uint8_t* p, std::size_t len) noexcept {
  return long_by_fold() ? crc32_fold(crc, p, len) : crc32_gzip_refl(crc, p, len);
}

}  // namespace

void compute_icrcs(std::span<const ByteSpan> frames, std::uint32_t* out) noexcept {
  std::size_t i = 0;
  while (i < frames.size()) {
    if (i + 4 <= frames.size() && four_in_place(frames.data() + i, out + i)) {
      i += 4;
      continue;
    }
    out[i] = compute_icrc(frames[i]);
    ++i;
  }
}

std::uint32_t crc32_update(std::uint32_t crc, ByteSpan bytes) noexcept {
  return crc_long(crc, bytes.data(), bytes.size());
}

std::uint32_t compute_icrc(std::span<const ByteSpan> pieces) noexcept {
  std::uint32_t icrc = 0;
  if (pieces.size() == 1 && icrc_in_place(pieces[0], icrc)) return icrc;
  return detail::compute_icrc_gathered(pieces);
}

std::uint32_t detail::compute_icrc_gathered(std::span<const ByteSpan> pieces) noexcept {
  std::size_t first_piece = 0;
  while (first_piece < pieces.size() && pieces[first_piece].empty()) ++first_piece;
  if (first_piece == pieces.size()) return 0;
  const std::uint8_t first = pieces[first_piece][0];
  const bool ipv6 = (first >> 4) == 6;
  const std::size_t ip_len = ipv6 ? ipv6_header_size : std::size_t{(first & 0x0fu) * 4u};
  if (!ipv6 && ip_len < ipv4_header_size) return 0;
  const std::size_t masked_len = ip_len + udp_header_size + bth_size;

  std::size_t total = 0;
  for (const ByteSpan& p : pieces) total += p.size();
  if (total < masked_len) return 0;

  // Every call to ISA-L costs a fixed ~10 ns, and below 256 bytes it loops
  // over a table instead of folding (36 ns for 140 bytes, 23 ns for 256,
  // measured here). A short frame (ACKs, small messages) is therefore
  // gathered whole with its masked headers and CRCed in one call of our
  // own folding code; a long one copies only the masked headers and reads
  // the payload in place (gathering 256 bytes up front measured slower
  // from 1 KiB on).
  const std::size_t gather = total <= scratch_size ? total : masked_len;
  // [zeros][filler][gathered bytes]: the filler is CRCed from register 0
  // with the register's initial ones folded into its first four bytes
  // (0xff ^ 0xff), so leading zeros change nothing and the input can start
  // on a 16-byte boundary of the fold.
  constexpr std::size_t front = 16 + lrh_filler_size;
  alignas(16) std::array<std::uint8_t, front + scratch_size> scratch;
  std::memset(scratch.data(), 0, 16);
  constexpr std::array<std::uint8_t, lrh_filler_size> filler = {0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  std::memcpy(scratch.data() + 16, filler.data(), filler.size());
  std::uint8_t* const gathered_at = scratch.data() + front;
  std::size_t gathered = 0;
  std::size_t piece = first_piece;
  std::size_t offset_in_piece = 0;
  if (gather == total) {  // a short frame: every piece whole, one after another
    for (; piece < pieces.size(); ++piece) {
      copy_bytes(gathered_at + gathered, pieces[piece].data(), pieces[piece].size());
      gathered += pieces[piece].size();
    }
  }
  while (gathered < gather) {
    const ByteSpan p = pieces[piece];
    const std::size_t take = std::min(gather - gathered, p.size());
    copy_bytes(gathered_at + gathered, p.data(), take);
    gathered += take;
    if (take == p.size()) {
      ++piece;
    } else {
      offset_in_piece = take;
    }
  }
  mask_variant_fields(gathered_at, ip_len, ipv6);

  // Short inputs fold with PCLMULQDQ here (crc_fold.hpp); long payloads go
  // to the widest kernel the CPU has (crc_long).
  const std::size_t zeros = (16 - (lrh_filler_size + gather) % 16) % 16;
  std::uint32_t crc =
      ~crc32_fold_register(0, scratch.data() + 16 - zeros, zeros + lrh_filler_size + gather);
  for (; piece < pieces.size(); ++piece) {
    const ByteSpan p = pieces[piece].subspan(offset_in_piece);
    offset_in_piece = 0;
    if (!p.empty()) crc = crc_long(crc, p.data(), p.size());
  }
  return crc;
}

const char* crc_implementation() noexcept {
  // ISA-L dispatches at run time to the widest folding kernel the CPU has
  // (PCLMULQDQ, or VPCLMULQDQ with AVX-512).
  if (long_by_fold()) return "vpclmulqdq 256-bit fold over 512 bytes + pclmul fold up to 512 bytes";
  return crc32_fold_uses_pclmul() ? "isa-l crc32_gzip_refl (multibinary dispatch) + pclmul fold up to 512 bytes"
                                  : "isa-l crc32_gzip_refl (multibinary dispatch) + byte table up to 512 bytes";
}

}  // namespace metaroce::wire
