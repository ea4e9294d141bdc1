// fuzz-secure-open: secure::Opener on arbitrary bytes, and on genuine
// frames with one byte changed.
//
// Input: byte 0 picks the protection (bit 0) and the clear header length
// (bits 1..7, up to 127 bytes); bytes 1-3 pick a byte to change and how;
// the rest is a frame. Invariants (any violation aborts):
//  - the input taken as a received frame never opens (no tag can be
//    forged) and its bytes are left exactly as given;
//  - the same bytes sealed by the genuine sender open, give back the
//    plaintext, and a second copy of them is refused as replayed;
//  - that sealed frame with one byte changed is refused, bytes untouched,
//    and the window does not move.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "secure/trailer.hpp"

namespace {

using namespace metaroce::secure;

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz-secure-open: invariant violated: %s\n", what);
  std::abort();
}

void require(bool condition, const char* what) {
  if (!condition) violated(what);
}

const std::uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
constexpr std::uint32_t spi = 0x11223344;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const Protection protection = (data[0] & 1) ? Protection::auth_only : Protection::encrypt;
  const std::size_t header = data[0] >> 1;
  const std::size_t change_at = static_cast<std::size_t>(data[1]) << 8 | data[2];
  const std::uint8_t change_mask = static_cast<std::uint8_t>(data[3] | 1);
  std::vector<std::uint8_t> frame(data + 4, data + size);

  Opener rx;
  require(rx.set_key(Algorithm::aes128_gcm, key, spi, protection, 256), "opener key");

  // Arbitrary bytes as a received frame.
  const std::vector<std::uint8_t> received = frame;
  require(rx.open(frame, header) != OpenResult::ok, "arbitrary bytes opened");
  require(frame == received, "a refused frame was changed");
  require(rx.window().highest() == 0, "a refused frame moved the window");

  // The same bytes as a genuine frame.
  Sealer tx;
  require(tx.set_key(Algorithm::aes128_gcm, key, spi, protection), "sealer key");
  std::vector<std::uint8_t> sealed = received;
  sealed.resize(received.size() + trailer_bytes);
  require(tx.seal(sealed, header), "seal");

  std::vector<std::uint8_t> changed = sealed;
  const std::size_t at = change_at % changed.size();
  changed[at] ^= change_mask;
  const std::vector<std::uint8_t> changed_copy = changed;
  require(rx.open(changed, header) != OpenResult::ok, "a changed frame opened");
  require(changed == changed_copy, "a changed frame's bytes were touched");
  require(rx.window().highest() == 0, "a changed frame moved the window");

  std::vector<std::uint8_t> copy = sealed;
  require(rx.open(sealed, header) == OpenResult::ok, "a genuine frame refused");
  require(std::equal(received.begin(), received.end(), sealed.begin()), "opened bytes differ from what was sealed");
  require(rx.open(copy, header) == OpenResult::replayed, "a replay was not refused as replayed");
  return 0;
}
