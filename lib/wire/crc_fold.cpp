#include "wire/crc_fold.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace metaroce::wire {
namespace {

constexpr std::uint32_t reflected_poly = 0xEDB88320u;

constexpr std::array<std::uint32_t, 256> make_table() noexcept {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) != 0 ? (c >> 1) ^ reflected_poly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<std::uint32_t, 256> table = make_table();

// `c` is the running register (already inverted), as inside zlib.
std::uint32_t bytes_raw(std::uint32_t c, const std::uint8_t* p, std::size_t len) noexcept {
  for (std::size_t i = 0; i < len; ++i) c = table[(c ^ p[i]) & 0xffu] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
// Folding constants for P(x) = 0x104C11DB7 in the reflected domain: each is
// (x^n mod P), bit-reflected over 32 bits and shifted left by one; mu is
// floor(x^64 / P) and p the polynomial, both reflected over 33 bits. The
// derivation is checked by the tests against ISA-L on every length.
constexpr std::uint64_t k_fold4_lo = 0x154442bd4;  // n = 4 * 128 + 32
constexpr std::uint64_t k_fold4_hi = 0x1c6e41596;  // n = 4 * 128 - 32
constexpr std::uint64_t k_fold1_lo = 0x1751997d0;  // n = 128 + 32
constexpr std::uint64_t k_fold1_hi = 0x0ccaa009e;  // n = 128 - 32
constexpr std::uint64_t k_64 = 0x163cd6124;        // n = 64
constexpr std::uint64_t k_poly = 0x1db710641;
constexpr std::uint64_t k_mu = 0x1f7011641;

// The same constants for any n, computed: x^n mod P, reflected and shifted.
constexpr std::uint64_t fold_constant(unsigned n) noexcept {
  std::uint64_t r = 1;  // x^0
  for (unsigned i = 0; i < n; ++i) {
    r <<= 1;
    if ((r & (std::uint64_t{1} << 32)) != 0) r ^= 0x104C11DB7u;
  }
  std::uint64_t reflected = 0;
  for (int b = 0; b < 32; ++b)
    if ((r >> b) & 1u) reflected |= std::uint64_t{1} << (31 - b);
  return reflected << 1;
}
static_assert(fold_constant(4 * 128 + 32) == k_fold4_lo && fold_constant(4 * 128 - 32) == k_fold4_hi &&
              fold_constant(128 + 32) == k_fold1_lo && fold_constant(128 - 32) == k_fold1_hi &&
              fold_constant(64) == k_64);

// Short inputs fold every block straight to the end: block i of n moves by
// d = n - 1 - i blocks with the pair (x^(128d+32), x^(128d-32)), all at once,
// instead of a chain of one-block steps; the chain a 4-lane fold still has
// (the merge, the last blocks) is what bounds a 150-byte frame's time.
constexpr std::size_t short_blocks = 32;  // up to 512 bytes
struct DistanceTable {
  alignas(16) std::array<std::uint64_t, 2 * short_blocks> k{};  // [2d] = lo, [2d + 1] = hi
};
constexpr DistanceTable make_distance_table() noexcept {
  DistanceTable t;
  for (unsigned d = 1; d < short_blocks; ++d) {
    t.k[2 * d] = fold_constant(128 * d + 32);
    t.k[2 * d + 1] = fold_constant(128 * d - 32);
  }
  return t;
}
constexpr DistanceTable distance = make_distance_table();

[[gnu::target("pclmul,avx")]] inline __m128i fold(__m128i x, __m128i k) noexcept {
  // The low half moves by k.lo, the high half by k.hi.
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

[[gnu::target("pclmul,avx")]] inline __m128i load(const std::uint8_t* p) noexcept {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// 128 bits of running remainder down to the CRC register.
[[gnu::target("pclmul,avx")]] inline std::uint32_t reduce(__m128i x) noexcept {
  const __m128i k1 = _mm_set_epi64x(static_cast<long long>(k_fold1_hi), static_cast<long long>(k_fold1_lo));
  // 128 -> 64 bits: the low half moves by x^(128-32), onto the high half.
  x = _mm_xor_si128(_mm_clmulepi64_si128(x, k1, 0x10), _mm_srli_si128(x, 8));
  // 96 -> 64 bits.
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
  const __m128i k5 = _mm_set_epi64x(0, static_cast<long long>(k_64));
  x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, mask32), k5, 0x00), _mm_srli_si128(x, 4));
  // Barrett reduction to 32 bits.
  const __m128i pmu = _mm_set_epi64x(static_cast<long long>(k_mu), static_cast<long long>(k_poly));
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), pmu, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), pmu, 0x00);
  x = _mm_xor_si128(x, t);
  return static_cast<std::uint32_t>(_mm_extract_epi32(x, 1));
}

// len >= 16 and a multiple of 16; c is the running register.
[[gnu::target("pclmul,avx")]] std::uint32_t blocks_pclmul(std::uint32_t c, const std::uint8_t* p,
                                                            std::size_t len) noexcept {
  const __m128i k1 = _mm_set_epi64x(static_cast<long long>(k_fold1_hi), static_cast<long long>(k_fold1_lo));
  __m128i x = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(c)));
  p += 16;
  len -= 16;
  if (len >= 48) {
    // Four lanes, 64 bytes per step, then merged into one.
    const __m128i k4 = _mm_set_epi64x(static_cast<long long>(k_fold4_hi), static_cast<long long>(k_fold4_lo));
    __m128i x1 = load(p);
    __m128i x2 = load(p + 16);
    __m128i x3 = load(p + 32);
    p += 48;
    len -= 48;
    while (len >= 64) {
      x = _mm_xor_si128(fold(x, k4), load(p));
      x1 = _mm_xor_si128(fold(x1, k4), load(p + 16));
      x2 = _mm_xor_si128(fold(x2, k4), load(p + 32));
      x3 = _mm_xor_si128(fold(x3, k4), load(p + 48));
      p += 64;
      len -= 64;
    }
    x = _mm_xor_si128(fold(x, k1), x1);
    x = _mm_xor_si128(fold(x, k1), x2);
    x = _mm_xor_si128(fold(x, k1), x3);
  }
  while (len >= 16) {
    x = _mm_xor_si128(fold(x, k1), load(p));
    p += 16;
    len -= 16;
  }
  return reduce(x);
}

// Long inputs with 256-bit VPCLMULQDQ (AVX2; no AVX-512 needed): eight
// lanes of 16 bytes in four registers, 128 bytes per step, each lane moved
// 8 blocks on by (x^(8*128+32), x^(8*128-32)); then every lane and the
// blocks left over folded straight to the end with the pair of its own
// distance, and one reduction. Where the CPU has VPCLMULQDQ but not
// AVX-512 (AMD Zen 3, say), ISA-L's widest kernel is the 128-bit one.
constexpr std::uint64_t k_fold8_lo = fold_constant(8 * 128 + 32);
constexpr std::uint64_t k_fold8_hi = fold_constant(8 * 128 - 32);

#define METAROCE_YMM [[gnu::target("avx2,vpclmulqdq,pclmul,avx")]]
METAROCE_YMM inline __m256i load256(const std::uint8_t* q) noexcept {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
}

// Both lanes of a moved 8 blocks on, plus the 32 bytes at q.
METAROCE_YMM inline __m256i step8(__m256i a, __m256i k8, const std::uint8_t* q) noexcept {
  return _mm256_xor_si256(
      _mm256_xor_si256(_mm256_clmulepi64_epi128(a, k8, 0x00), _mm256_clmulepi64_epi128(a, k8, 0x11)), load256(q));
}

METAROCE_YMM inline __m128i distance_pair(std::size_t d) noexcept {
  return _mm_load_si128(reinterpret_cast<const __m128i*>(&distance.k[2 * d]));
}

// len >= 128 and a multiple of 16; c is the running register.
METAROCE_YMM std::uint32_t blocks_ymm(std::uint32_t c, const std::uint8_t* p, std::size_t len) noexcept {
  const __m256i k8 = _mm256_set_epi64x(static_cast<long long>(k_fold8_hi), static_cast<long long>(k_fold8_lo),
                                       static_cast<long long>(k_fold8_hi), static_cast<long long>(k_fold8_lo));
  __m256i a0 = _mm256_xor_si256(load256(p), _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(c))));
  __m256i a1 = load256(p + 32);
  __m256i a2 = load256(p + 64);
  __m256i a3 = load256(p + 96);
  p += 128;
  len -= 128;
  while (len >= 128) {
    a0 = step8(a0, k8, p);
    a1 = step8(a1, k8, p + 32);
    a2 = step8(a2, k8, p + 64);
    a3 = step8(a3, k8, p + 96);
    p += 128;
    len -= 128;
  }
  // Lane i (of 8, in input order) is 7 - i blocks before the group's end,
  // then the t blocks left over follow.
  const std::size_t t = len / 16;
  const __m128i lanes[8] = {_mm256_castsi256_si128(a0), _mm256_extracti128_si256(a0, 1),
                            _mm256_castsi256_si128(a1), _mm256_extracti128_si256(a1, 1),
                            _mm256_castsi256_si128(a2), _mm256_extracti128_si256(a2, 1),
                            _mm256_castsi256_si128(a3), _mm256_extracti128_si256(a3, 1)};
  __m128i x = _mm_setzero_si128();
  __m128i y = _mm_setzero_si128();
  for (std::size_t i = 0; i < 8; i += 2) {
    x = _mm_xor_si128(x, fold(lanes[i], distance_pair(7 - i + t)));
    const std::size_t d = 6 - i + t;
    y = _mm_xor_si128(y, d == 0 ? lanes[i + 1] : fold(lanes[i + 1], distance_pair(d)));
  }
  for (std::size_t j = 0; j < t; ++j) {
    const std::size_t d = t - 1 - j;
    const __m128i b = load(p + 16 * j);
    y = _mm_xor_si128(y, d == 0 ? b : fold(b, distance_pair(d)));
  }
  return reduce(_mm_xor_si128(x, y));
}
#undef METAROCE_YMM

// 16 <= len <= 16 * short_blocks, a multiple of 16.
[[gnu::target("pclmul,avx")]] std::uint32_t blocks_short(std::uint32_t c, const std::uint8_t* p,
                                                           std::size_t len) noexcept {
  const std::size_t n = len / 16;
  const auto k = [](std::size_t d) { return _mm_load_si128(reinterpret_cast<const __m128i*>(&distance.k[2 * d])); };
  __m128i x = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(c)));
  if (n > 1) {
    __m128i a = fold(x, k(n - 1));
    __m128i b = _mm_setzero_si128();
    std::size_t i = 1;
    for (; i + 2 < n; i += 2) {
      a = _mm_xor_si128(a, fold(load(p + 16 * i), k(n - 1 - i)));
      b = _mm_xor_si128(b, fold(load(p + 16 * (i + 1)), k(n - 2 - i)));
    }
    if (i + 1 < n) a = _mm_xor_si128(a, fold(load(p + 16 * i), k(n - 1 - i)));
    x = _mm_xor_si128(_mm_xor_si128(a, b), load(p + 16 * (n - 1)));
  }
  return reduce(x);
}

// Short input at p, with the blocks that start within the patterns' reach
// ANDed and ORed with them. Block 0 starts 16n - len bytes before p, as if
// behind leading zeros; no byte before p + kept_from is read.
// PSHUFB controls moving a block up by k bytes (zeros in): the 16 bytes
// from 16 - k.
constexpr std::array<std::uint8_t, 32> shift_up = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                                   0x80, 0x80, 0x80, 0x80, 0x80, 0,    1,    2,    3,    4,    5,
                                                   6,    7,    8,    9,    10,   11,   12,   13,   14,   15};
// VPERMB indices moving 64 bytes up by k lanes: the 64 from 64 - k.
constexpr std::array<std::uint8_t, 128> make_lane_shift() noexcept {
  std::array<std::uint8_t, 128> t{};
  for (std::size_t q = 0; q < t.size(); ++q) t[q] = static_cast<std::uint8_t>(q & 63);
  return t;
}
constexpr std::array<std::uint8_t, 128> lane_shift = make_lane_shift();

[[gnu::target("pclmul,avx")]] std::uint32_t front_masked(const std::uint8_t* p, std::size_t len,
                                                          const FrontMasks& m) noexcept {
  const std::size_t n = (len + 15) / 16;
  const auto k = [](std::size_t d) { return _mm_load_si128(reinterpret_cast<const __m128i*>(&distance.k[2 * d])); };
  const std::ptrdiff_t first = static_cast<std::ptrdiff_t>(len) - static_cast<std::ptrdiff_t>(16 * n);
  const auto at = [&](std::ptrdiff_t off, const std::array<std::uint8_t, FrontMasks::size>& a) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.data() + FrontMasks::before + off));
  };
  __m128i a = _mm_setzero_si128();
  __m128i b = _mm_setzero_si128();
  std::size_t i = 0;
  // The masked blocks (the patterns reach FrontMasks::reach bytes in).
  // Blocks that start before kept_from take their bytes from a load at
  // kept_from, shifted into place: nothing before it is read (on a
  // receiver, the mbuf's headroom is a cache line nobody else touches).
  const auto kept = static_cast<std::ptrdiff_t>(m.kept_from);
  for (std::ptrdiff_t s = first; i < n && s < static_cast<std::ptrdiff_t>(FrontMasks::reach); ++i, s += 16) {
    __m128i v;
    if (s >= kept) {
      v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + s));
    } else if (kept - s >= 16) {
      v = _mm_setzero_si128();
    } else {
      const __m128i from_kept = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kept));
      v = _mm_shuffle_epi8(from_kept, _mm_loadu_si128(reinterpret_cast<const __m128i*>(shift_up.data() + 16 - (kept - s))));
    }
    v = _mm_or_si128(_mm_and_si128(v, at(s, m.keep)), at(s, m.ones));
    if (i + 1 == n) {
      a = _mm_xor_si128(a, v);
    } else {
      a = _mm_xor_si128(a, fold(v, k(n - 1 - i)));
    }
  }
  // The rest as they are, two accumulators.
  for (; i + 2 < n; i += 2) {
    a = _mm_xor_si128(a, fold(load(p + first + 16 * static_cast<std::ptrdiff_t>(i)), k(n - 1 - i)));
    b = _mm_xor_si128(b, fold(load(p + first + 16 * static_cast<std::ptrdiff_t>(i + 1)), k(n - 2 - i)));
  }
  if (i + 1 < n) {
    a = _mm_xor_si128(a, fold(load(p + first + 16 * static_cast<std::ptrdiff_t>(i)), k(n - 1 - i)));
    ++i;
  }
  if (i < n) a = _mm_xor_si128(a, load(p + first + 16 * static_cast<std::ptrdiff_t>(i)));
  return reduce(_mm_xor_si128(a, b));
}

// The same with AVX-512: four blocks per 64-byte load and per VPCLMULQDQ,
// each lane moved by the constants of its own distance (a table in
// descending distance, so that four neighbouring blocks read four
// neighbouring pairs). Every block but the last is folded; the groups of
// four start early enough to end just before it, the blocks before the
// input being zeros. Nothing before m.kept_from is read (a group that
// starts before it is loaded from there and its lanes moved up); the ones
// come from the pattern, which has no zeros to AND in (keep is 0xff from
// kept_from on).
constexpr std::size_t wide_distances = short_blocks + 4;
// Read four pairs at a time, unaligned: a group starts on any pair.
struct WideTable {
  alignas(16) std::array<std::uint64_t, 2 * wide_distances> k{};  // pair i: distance wide_distances - 1 - i
};
constexpr WideTable make_wide_table() noexcept {
  WideTable t;
  for (unsigned i = 0; i + 1 < wide_distances; ++i) {
    const unsigned d = static_cast<unsigned>(wide_distances) - 1 - i;
    t.k[2 * i] = fold_constant(128 * d + 32);
    t.k[2 * i + 1] = fold_constant(128 * d - 32);
  }
  return t;  // the last pair (distance 0) stays zero: no lane uses it
}
constexpr WideTable wide = make_wide_table();

[[gnu::target("avx512f,avx512bw,avx512vl,avx512vbmi,vpclmulqdq,pclmul,avx")]] std::uint32_t front_masked_wide(
    const std::uint8_t* p, std::size_t len, const FrontMasks& m) noexcept {
  const std::size_t n = (len + 15) / 16;          // blocks, the last one at len - 16
  const std::size_t groups = (n - 1 + 3) / 4;     // of four, before the last block
  const std::ptrdiff_t start = static_cast<std::ptrdiff_t>(len) - 16 - static_cast<std::ptrdiff_t>(64 * groups);
  const auto kept = static_cast<std::ptrdiff_t>(m.kept_from);
  __m512i acc = _mm512_setzero_si512();
  // Pair index of the first lane, whose distance to the last block is 4 * groups.
  std::size_t pair = wide_distances - 1 - 4 * groups;
  for (std::size_t g = 0; g < groups; ++g, pair += 4) {
    const std::ptrdiff_t at = start + static_cast<std::ptrdiff_t>(64 * g);
    __m512i v;
    if (at >= kept) {
      v = _mm512_loadu_si512(p + at);
    } else if (kept - at >= 64) {
      v = _mm512_setzero_si512();
    } else {
      // The bytes from kept_from on, loaded from there (nothing before it
      // is touched) and moved up into their lanes.
      const auto skip = static_cast<unsigned>(kept - at);
      const __m512i from_kept = _mm512_maskz_loadu_epi8(~std::uint64_t{0} >> skip, p + kept);
      v = _mm512_maskz_permutexvar_epi8(~std::uint64_t{0} << skip, _mm512_loadu_si512(lane_shift.data() + 64 - skip),
                                        from_kept);
    }
    if (at < static_cast<std::ptrdiff_t>(FrontMasks::reach))
      v = _mm512_or_si512(v, _mm512_loadu_si512(m.ones.data() + FrontMasks::before + at));
    const __m512i k = _mm512_loadu_si512(&wide.k[2 * pair]);  // 16-byte aligned only
    acc = _mm512_ternarylogic_epi64(acc, _mm512_clmulepi64_epi128(v, k, 0x00), _mm512_clmulepi64_epi128(v, k, 0x11),
                                    0x96);  // a ^ b ^ c
  }
  const std::ptrdiff_t last_at = static_cast<std::ptrdiff_t>(len) - 16;
  __m128i last = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + last_at));
  if (last_at < static_cast<std::ptrdiff_t>(FrontMasks::reach))
    last = _mm_or_si128(last, _mm_loadu_si128(reinterpret_cast<const __m128i*>(m.ones.data() + FrontMasks::before + last_at)));
  const __m256i halves = _mm256_xor_si256(_mm512_mask_extracti64x4_epi64(_mm256_setzero_si256(), 0xff, acc, 0), _mm512_mask_extracti64x4_epi64(_mm256_setzero_si256(), 0xff, acc, 1));
  const __m128i x = _mm_xor_si128(_mm_xor_si128(_mm256_castsi256_si128(halves), _mm256_extracti128_si256(halves, 1)), last);
  return reduce(x);
}

// reduce() on four 128-bit remainders at once, one per lane.
[[gnu::target("avx512f,avx512bw,avx512vl,vpclmulqdq,pclmul,avx")]] inline void reduce4(__m512i x,
                                                                                        std::uint32_t* out) noexcept {
  // Each constant in all four lanes (set, not broadcast: g++ 12 warns that
  // the broadcast's own source is uninitialized).
  const auto f1h = static_cast<long long>(k_fold1_hi), f1l = static_cast<long long>(k_fold1_lo);
  const __m512i k1 = _mm512_set_epi64(f1h, f1l, f1h, f1l, f1h, f1l, f1h, f1l);
  x = _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k1, 0x10), _mm512_bsrli_epi128(x, 8));
  const long long m32 = 0xffffffffLL, k64 = static_cast<long long>(k_64);
  const __m512i mask32 = _mm512_set_epi64(0, m32, 0, m32, 0, m32, 0, m32);
  const __m512i k5 = _mm512_set_epi64(0, k64, 0, k64, 0, k64, 0, k64);
  x = _mm512_xor_si512(_mm512_clmulepi64_epi128(_mm512_and_si512(x, mask32), k5, 0x00), _mm512_bsrli_epi128(x, 4));
  const auto mu = static_cast<long long>(k_mu), poly = static_cast<long long>(k_poly);
  const __m512i pmu = _mm512_set_epi64(mu, poly, mu, poly, mu, poly, mu, poly);
  __m512i t = _mm512_clmulepi64_epi128(_mm512_and_si512(x, mask32), pmu, 0x10);
  t = _mm512_clmulepi64_epi128(_mm512_and_si512(t, mask32), pmu, 0x00);
  x = _mm512_xor_si512(x, t);
  // Dword 1 of each lane.
  const __m512i pick = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 13, 9, 5, 1);
  const __m512i picked = _mm512_maskz_permutexvar_epi32(0xffff, pick, x);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_mask_extracti32x4_epi32(_mm_setzero_si128(), 0xf, picked, 0));
}

// front_masked_wide on four inputs of the same length and masks: the same
// loads and multiplies, four independent chains interleaved, and the four
// remainders reduced together in the lanes of one register. A burst of
// equal frames pays the fold's latency (and its reduction) once per four.
[[gnu::target("avx512f,avx512bw,avx512vl,avx512vbmi,vpclmulqdq,pclmul,avx")]] void front_masked_wide4(
    const std::uint8_t* const* p, std::size_t len, const FrontMasks& m, std::uint32_t* out) noexcept {
  const std::size_t n = (len + 15) / 16;
  const std::size_t groups = (n - 1 + 3) / 4;
  const std::ptrdiff_t start = static_cast<std::ptrdiff_t>(len) - 16 - static_cast<std::ptrdiff_t>(64 * groups);
  const auto kept = static_cast<std::ptrdiff_t>(m.kept_from);
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                    _mm512_setzero_si512()};
  std::size_t pair = wide_distances - 1 - 4 * groups;
  for (std::size_t g = 0; g < groups; ++g, pair += 4) {
    const std::ptrdiff_t at = start + static_cast<std::ptrdiff_t>(64 * g);
    const __m512i k = _mm512_loadu_si512(&wide.k[2 * pair]);
    const bool ones = at < static_cast<std::ptrdiff_t>(FrontMasks::reach);
    const __m512i pattern = ones ? _mm512_loadu_si512(m.ones.data() + FrontMasks::before + at) : _mm512_setzero_si512();
#pragma GCC unroll 4
    for (std::size_t j = 0; j < 4; ++j) {
      __m512i v;
      if (at >= kept) {
        v = _mm512_loadu_si512(p[j] + at);
      } else if (kept - at >= 64) {
        v = _mm512_setzero_si512();  // only the pattern's ones (the filler's)
      } else {
        const auto skip = static_cast<unsigned>(kept - at);
        const __m512i from_kept = _mm512_maskz_loadu_epi8(~std::uint64_t{0} >> skip, p[j] + kept);
        v = _mm512_maskz_permutexvar_epi8(~std::uint64_t{0} << skip,
                                          _mm512_loadu_si512(lane_shift.data() + 64 - skip), from_kept);
      }
      v = _mm512_or_si512(v, pattern);
      acc[j] = _mm512_ternarylogic_epi64(acc[j], _mm512_clmulepi64_epi128(v, k, 0x00),
                                         _mm512_clmulepi64_epi128(v, k, 0x11), 0x96);
    }
  }
  const std::ptrdiff_t last_at = static_cast<std::ptrdiff_t>(len) - 16;
  const __m128i last_ones =
      last_at < static_cast<std::ptrdiff_t>(FrontMasks::reach)
          ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(m.ones.data() + FrontMasks::before + last_at))
          : _mm_setzero_si128();
  __m512i x = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (std::size_t j = 0; j < 4; ++j) {
    const __m128i last = _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[j] + last_at)), last_ones);
    const __m256i halves = _mm256_xor_si256(_mm512_mask_extracti64x4_epi64(_mm256_setzero_si256(), 0xff, acc[j], 0),
                                            _mm512_mask_extracti64x4_epi64(_mm256_setzero_si256(), 0xff, acc[j], 1));
    const __m128i r =
        _mm_xor_si128(_mm_xor_si128(_mm256_castsi256_si128(halves), _mm256_extracti128_si256(halves, 1)), last);
    // Lane j of x (a 128-bit broadcast kept in lane j only).
    x = _mm512_mask_broadcast_i32x4(x, static_cast<__mmask16>(0xfu << (4 * j)), r);
  }
  reduce4(x, out);
}

bool detect_wide() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
         __builtin_cpu_supports("vpclmulqdq") &&
         __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("avx");
}

bool detect_ymm() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") &&
         __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("avx");
}

bool detect_pclmul() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("avx");
}
#else
bool detect_ymm() noexcept { return false; }
bool detect_pclmul() noexcept { return false; }
bool detect_wide() noexcept { return false; }
#endif

bool has_wide() noexcept {
  static const bool yes = detect_wide();
  return yes;
}

bool has_ymm() noexcept {
  static const bool yes = detect_ymm();
  return yes;
}

bool has_pclmul() noexcept {
  static const bool yes = detect_pclmul();  // first use, not static-init order
  return yes;
}

}  // namespace

std::uint32_t crc32_bytewise(std::uint32_t crc, const std::uint8_t* p, std::size_t len) noexcept {
  return ~bytes_raw(~crc, p, len);
}

namespace {

// The register form; `ymm`: inputs over 512 bytes may fold 32 bytes per
// VPCLMULQDQ where the CPU has it.
std::uint32_t fold_register(std::uint32_t c, const std::uint8_t* p, std::size_t len, bool ymm) noexcept {
#if defined(__x86_64__)
  if (len >= 16 && has_pclmul()) {
    // The odd bytes first, so whole blocks end the buffer.
    const std::size_t head = len % 16;
    if (head != 0) c = bytes_raw(c, p, head);
    if (len - head <= 16 * short_blocks) return blocks_short(c, p + head, len - head);
    return ymm && has_ymm() ? blocks_ymm(c, p + head, len - head) : blocks_pclmul(c, p + head, len - head);
  }
#endif
  (void)ymm;
  return bytes_raw(c, p, len);
}

}  // namespace

std::uint32_t crc32_fold_register(std::uint32_t c, const std::uint8_t* p, std::size_t len) noexcept {
  return fold_register(c, p, len, true);
}

std::uint32_t crc32_fold(std::uint32_t crc, const std::uint8_t* p, std::size_t len) noexcept {
  return ~crc32_fold_register(~crc, p, len);
}

bool crc32_fold_uses_pclmul() noexcept { return has_pclmul(); }

bool crc32_fold_long_is_ymm() noexcept { return has_ymm(); }

std::uint32_t crc32_fold_narrow(std::uint32_t crc, const std::uint8_t* p, std::size_t len) noexcept {
  return ~fold_register(~crc, p, len, false);
}

static_assert(crc32_fold_front_max == 16 * short_blocks);

bool crc32_fold_front_is_wide() noexcept { return has_wide(); }

void crc32_fold_front_masked4(const std::uint8_t* const* p, std::size_t len, const FrontMasks& m,
                              std::uint32_t* out) noexcept {
#if defined(__x86_64__)
  if (len >= m.kept_from + 16 && len >= 32 && len <= crc32_fold_front_max && has_wide()) {
    front_masked_wide4(p, len, m, out);
    return;
  }
#endif
  for (std::size_t j = 0; j < 4; ++j) out[j] = crc32_fold_front_masked(p[j], len, m);
}

std::uint32_t crc32_fold_front_masked(const std::uint8_t* p, std::size_t len, const FrontMasks& m,
                                      FoldWidth width) noexcept {
#if defined(__x86_64__)
  // The shifted first blocks read the 16 bytes from kept_from.
  const bool fits = len >= m.kept_from + 16 && len >= 32 && len <= crc32_fold_front_max;
  if (fits && width == FoldWidth::best && has_wide()) return front_masked_wide(p, len, m);
  if (fits && has_pclmul()) return front_masked(p, len, m);
#endif
  // The byte table over the same bytes, reading none whose keep is 0.
  std::uint32_t c = 0;
  const std::size_t lead = (16 - len % 16) % 16;
  for (std::size_t j = 0; j < lead + len; ++j) {
    const std::ptrdiff_t off = static_cast<std::ptrdiff_t>(j) - static_cast<std::ptrdiff_t>(lead);
    std::uint8_t x = 0;
    if (off >= static_cast<std::ptrdiff_t>(FrontMasks::reach)) {
      x = p[off];
    } else {
      const auto idx = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(FrontMasks::before) + off);
      if (off >= 0 && m.keep[idx] != 0) x = static_cast<std::uint8_t>(p[off] & m.keep[idx]);
      x = static_cast<std::uint8_t>(x | m.ones[idx]);
    }
    c = table[(c ^ x) & 0xffu] ^ (c >> 8);
  }
  return c;
}

}  // namespace metaroce::wire
