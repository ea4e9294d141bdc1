// Between the transport's frames and mbufs.
//
// Transmit: a TxBatch descriptor (header bytes, payload span in registered
// memory, pad + ICRC trailer) becomes either one mbuf with everything copied,
// or, for payloads at or above the zero-copy threshold on a port that chains
// mbufs, a chain of three: the header copied into a small mbuf, the payload
// attached in place as an external buffer, the trailer in a small mbuf.
// External buffers are never freed by DPDK: their free callback does nothing
// because the application owns the memory until the send completes.
//
// Receive: the contiguous bytes of a frame, the mbuf's own data when it is one
// segment, else a copy into a scratch buffer (the parser wants one span).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/tx_batch.hpp"

struct rte_mbuf;
struct rte_mempool;
struct rte_mbuf_ext_shared_info;

namespace metaroce::engine {

// Payload bytes from which attaching beats copying. Measured with
// metaroce-perf over a net_ring pair (doc/ENGINE.md, "Zero-copy threshold").
inline constexpr std::uint32_t default_zero_copy_threshold = 2048;
// Never attach: every payload is copied.
inline constexpr std::uint32_t zero_copy_never = ~std::uint32_t{0};

enum class TxBuild : std::uint8_t { copied, zero_copy, mempool_empty, too_large };

struct TxMbufSetup {
  std::string name = "tx";
  std::uint32_t mbufs = 16384;      // per pool (frames, small segments, attach)
  std::uint16_t data_room = 0;      // frames pool; must hold a whole frame
  std::uint32_t zero_copy_threshold = default_zero_copy_threshold;
  bool multi_segment_tx = true;     // the port chains mbufs
  int socket = -1;                  // SOCKET_ID_ANY
};

class TxMbufBuilder {
 public:
  static std::unique_ptr<TxMbufBuilder> create(const TxMbufSetup& setup, std::string& error);
  // Frees the pools: every mbuf built here must be back (drain ports first).
  ~TxMbufBuilder();
  TxMbufBuilder(const TxMbufBuilder&) = delete;
  TxMbufBuilder& operator=(const TxMbufBuilder&) = delete;

  // Takes from the pool, in one go, the mbufs that packets [first, first +
  // n) of `batch` will be copied into (at most prepared_max; none when the
  // pool has fewer) and asks for the lines each will be written in: mbufs
  // freed by an lcore that read them have those lines in its cache, and
  // asking for all of a burst's at once overlaps what would otherwise be
  // one wait per frame. build() uses them in order; release_prepared()
  // gives back what it did not use.
  static constexpr std::size_t prepared_max = 64;
  void prepare(const transport::TxBatch& batch, std::size_t first, std::size_t n) noexcept;
  void release_prepared() noexcept;
  [[nodiscard]] std::size_t prepared() const noexcept { return prepared_size_ - prepared_next_; }
  // The frames pool's free mbufs (lcore caches included).
  [[nodiscard]] unsigned frames_available() const noexcept;

  // Builds packet i of `batch` into `out` (set only on copied / zero_copy).
  TxBuild build(const transport::TxBatch& batch, std::size_t i, rte_mbuf*& out) noexcept;
  // One mbuf holding `frame` (fabric links, tests); nullptr when the pool is
  // empty or the frame does not fit.
  rte_mbuf* copy_frame(std::span<const std::uint8_t> frame) noexcept;

  // The largest frame build() copies, or copy_frame takes, into one mbuf.
  [[nodiscard]] std::size_t max_copied_frame() const noexcept { return max_copied_; }
  [[nodiscard]] bool zero_copy_enabled() const noexcept { return zero_copy_; }
  [[nodiscard]] std::uint32_t zero_copy_threshold() const noexcept { return threshold_; }

 private:
  TxMbufBuilder() = default;
  TxBuild build_copy(std::span<const std::uint8_t> header, const transport::TxDescriptor& d, rte_mbuf*& out) noexcept;
  [[nodiscard]] bool copies(const transport::TxBatch& batch, std::size_t i) const noexcept;
  [[nodiscard]] std::uint16_t headroom_for(std::size_t frame_len, std::size_t header_len) const noexcept;

  rte_mempool* frames_ = nullptr;  // whole frames, copied
  rte_mempool* small_ = nullptr;   // header and trailer segments of a chain
  rte_mempool* attach_ = nullptr;  // no data room: carry an external buffer
  rte_mbuf_ext_shared_info* shared_info_ = nullptr;  // process lifetime (see .cpp)
  std::size_t max_copied_ = 0;
  std::size_t max_shifted_ = 0;  // the largest frame copied past the shifted headroom (.cpp)
  std::uint32_t threshold_ = zero_copy_never;
  bool zero_copy_ = false;
  std::uint32_t buf_offset_ = 0;  // from an mbuf of frames_ to its buffer (mbuf + private area)
  std::array<rte_mbuf*, prepared_max> prepared_{};
  std::size_t prepared_next_ = 0;
  std::size_t prepared_size_ = 0;
};

// The bytes of a received frame as one span: valid while the mbuf and
// `scratch` are. `linearized` says whether they were copied.
std::span<const std::uint8_t> frame_bytes(const rte_mbuf* m, std::vector<std::uint8_t>& scratch,
                                          bool& linearized) noexcept;

// rte_pktmbuf_free for a received frame, reading only the mbuf's first
// line when it is one direct segment with one reference (every frame a
// copying sender built).
void free_received(rte_mbuf* m) noexcept;

// Asks for every line a received burst will be read from (each mbuf, then
// up to 256 bytes of its frame) before the first is parsed: from a ring fed
// by another lcore each of them is a cache miss, and this way they overlap
// instead of coming one frame after another.
void prefetch_received(rte_mbuf* const* frames, std::size_t n) noexcept;

}  // namespace metaroce::engine
