#include "engine/mbuf_frames.hpp"

#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_memory.h>
#include <rte_prefetch.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>

#include <fmt/format.h>

#include "wire/byte_order.hpp"

namespace metaroce::engine {

namespace {

// The application keeps its memory until the send completes: DPDK must not
// free it when the last mbuf that points at it is freed.
void keep_application_memory(void* /*addr*/, void* /*opaque*/) {}

// A shared-info must outlive every mbuf attached through it, and those may
// still sit in a peer's ring or a NIC queue when their builder is destroyed:
// they live for the process.
rte_mbuf_ext_shared_info* new_shared_info() {
  static std::mutex mutex;
  static std::deque<rte_mbuf_ext_shared_info> storage;
  std::lock_guard lock(mutex);
  auto& info = storage.emplace_back();
  info.free_cb = keep_application_memory;
  info.fcb_opaque = nullptr;
  // One reference held for ever: the count never reaches zero.
  rte_mbuf_ext_refcnt_set(&info, 1);
  return &info;
}

constexpr std::uint16_t small_data_room = 256 + RTE_PKTMBUF_HEADROOM;

// A short frame starts stable_prefix bytes before a cache line boundary:
// its Ethernet and IPv4 headers, the same in every frame of a connection
// and message size, fill the end of one line, and the bytes that change
// from frame to frame (the UDP source port that picks the path, PSN,
// sequence numbers, address, payload, ICRC) start on the next. That line
// is written only when its bytes differ from what the mbuf carried last
// time, so a 64-byte WRITE of a steady stream takes two lines back from
// the lcore that read it, not three. Larger frames keep the usual
// headroom (one line in dozens).
constexpr std::uint16_t stable_prefix = 34;
constexpr std::uint16_t shifted_headroom = RTE_PKTMBUF_HEADROOM + RTE_CACHE_LINE_SIZE - stable_prefix;
constexpr std::size_t shifted_max_frame = 1024;
static_assert(RTE_PKTMBUF_HEADROOM % RTE_CACHE_LINE_SIZE == 0);

rte_mempool* make_pool(const std::string& base, std::uint32_t n, std::uint16_t data_room, int socket,
                       std::string& error) {
  static std::atomic<unsigned> next{0};
  const std::string name = fmt::format("{}_{}", base.substr(0, 20), next.fetch_add(1));
  rte_mempool* pool = rte_pktmbuf_pool_create(name.c_str(), n, 256, 0, data_room, socket);
  if (pool == nullptr)
    error = fmt::format("cannot create mempool '{}' ({} mbufs of {} bytes): {}; lower mbufs= or give EAL more "
                        "memory (memory_mb=, -m)",
                        name, n, data_room, rte_strerror(rte_errno));
  return pool;
}

}  // namespace

std::unique_ptr<TxMbufBuilder> TxMbufBuilder::create(const TxMbufSetup& setup, std::string& error) {
  std::unique_ptr<TxMbufBuilder> b(new TxMbufBuilder());
  const std::uint16_t room = setup.data_room != 0 ? setup.data_room : std::uint16_t{9216 + RTE_PKTMBUF_HEADROOM};
  b->frames_ = make_pool(setup.name + "_frm", setup.mbufs, room, setup.socket, error);
  if (b->frames_ == nullptr) return nullptr;
  b->buf_offset_ = static_cast<std::uint32_t>(sizeof(rte_mbuf) + rte_pktmbuf_priv_size(b->frames_));
  b->max_copied_ = std::min<std::size_t>(rte_pktmbuf_data_room_size(b->frames_) - RTE_PKTMBUF_HEADROOM, 65535);
  // A short frame goes past the shifted headroom only where it fits there.
  const std::size_t pool_room = rte_pktmbuf_data_room_size(b->frames_);
  b->max_shifted_ =
      pool_room > shifted_headroom ? std::min<std::size_t>(shifted_max_frame, pool_room - shifted_headroom) : 0;
  // Attaching needs IOVA = VA (the address in the descriptor is what the
  // device reads) and a port that chains mbufs; otherwise we copy.
  b->zero_copy_ = setup.multi_segment_tx && setup.zero_copy_threshold != zero_copy_never &&
                  rte_eal_iova_mode() == RTE_IOVA_VA;
  b->threshold_ = b->zero_copy_ ? setup.zero_copy_threshold : zero_copy_never;
  if (b->zero_copy_) {
    b->small_ = make_pool(setup.name + "_sml", setup.mbufs * 2, small_data_room, setup.socket, error);
    if (b->small_ == nullptr) return nullptr;
    b->attach_ = make_pool(setup.name + "_ext", setup.mbufs, 0, setup.socket, error);
    if (b->attach_ == nullptr) return nullptr;
    b->shared_info_ = new_shared_info();
  }
  return b;
}

TxMbufBuilder::~TxMbufBuilder() {
  // The owner has drained every queue our mbufs could sit in (ports stopped
  // or drained first: Loopback's destructor does it).
  release_prepared();
  rte_mempool_free(frames_);
  rte_mempool_free(small_);
  rte_mempool_free(attach_);
}

namespace {

// Stores a field only when its value changes: a store to a line another
// lcore has read takes that line back from it (an invalidation across
// cores), a load that finds the value already there does not.
template <class Field, class Value>
inline void store_if_changed(Field& field, Value value) noexcept {
  if (field != static_cast<Field>(value)) field = static_cast<Field>(value);
}

// rte_pktmbuf_append(len) on a freshly allocated mbuf `m`, the data starting
// `headroom` bytes into the buffer, writing none of the mbuf's fields that
// already hold the values wanted. Over net_ring the receiving lcore read
// the mbuf's first line when it took the frame; an mbuf that carried a
// frame of the same length last time (every frame of a stream of equal
// messages) gets no store at all, and the line does not cross back. Null
// (m back in its pool) when len does not fit.
rte_mbuf* shape_frame(rte_mbuf* m, std::uint16_t headroom, std::uint16_t len) noexcept {
  if (std::uint32_t{headroom} + len > m->buf_len) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  // The second line (next, tx_offload) is not even read: a pool's mbuf has
  // next == NULL (DPDK's rule for a freed mbuf), and tx_offload is 0 from
  // the pool's initialization on, nothing here setting it.
  store_if_changed(m->pkt_len, len);
  store_if_changed(m->vlan_tci, 0);
  store_if_changed(m->vlan_tci_outer, 0);
  store_if_changed(m->nb_segs, 1);
  store_if_changed(m->port, RTE_MBUF_PORT_INVALID);
  store_if_changed(m->ol_flags, m->ol_flags & RTE_MBUF_F_EXTERNAL);
  store_if_changed(m->packet_type, 0);
  store_if_changed(m->data_off, headroom);
  store_if_changed(m->data_len, len);
  return m;
}

// Asks for the line at p with the intent to write it (PREFETCHW): the line
// comes exclusive, so the store that follows finds it ready.
inline void prefetch_for_write(const void* p) noexcept {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

// Whether the n bytes (8 <= n) at a and b are equal, without a call.
inline bool same_bytes(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) noexcept {
  const auto load = [](const std::uint8_t* p) {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  std::uint64_t diff = 0;
  for (std::size_t i = 0; i + 8 < n; i += 8) diff |= load(a + i) ^ load(b + i);
  diff |= load(a + n - 8) ^ load(b + n - 8);
  return diff == 0;
}

}  // namespace

TxBuild TxMbufBuilder::build_copy(std::span<const std::uint8_t> header, const transport::TxDescriptor& d,
                                  rte_mbuf*& out) noexcept {
  const std::size_t len = header.size() + d.payload.size() + d.trailer_len;
  if (len > max_copied_frame()) return TxBuild::too_large;
  const std::uint16_t headroom = headroom_for(len, header.size());
  const bool shifted = headroom == shifted_headroom;
  rte_mbuf* m = prepared_next_ < prepared_size_ ? prepared_[prepared_next_++] : rte_mbuf_raw_alloc(frames_);
  if (m == nullptr) return TxBuild::mempool_empty;
  m = shape_frame(m, headroom, static_cast<std::uint16_t>(len));
  if (m == nullptr) return TxBuild::mempool_empty;
  auto* p = rte_pktmbuf_mtod(m, std::uint8_t*);
  if (shifted) {
    if (!same_bytes(p, header.data(), stable_prefix)) wire::copy_bytes(p, header.data(), stable_prefix);
    wire::copy_bytes(p + stable_prefix, header.data() + stable_prefix, header.size() - stable_prefix);
  } else {
    wire::copy_bytes(p, header.data(), header.size());
  }
  if (!d.payload.empty()) wire::copy_bytes(p + header.size(), d.payload.data(), d.payload.size());
  wire::copy_bytes(p + header.size() + d.payload.size(), d.trailer.data(), d.trailer_len);
  out = m;
  return TxBuild::copied;
}

std::uint16_t TxMbufBuilder::headroom_for(std::size_t frame_len, std::size_t header_len) const noexcept {
  return frame_len <= max_shifted_ && header_len >= stable_prefix ? shifted_headroom
                                                                  : std::uint16_t{RTE_PKTMBUF_HEADROOM};
}

bool TxMbufBuilder::copies(const transport::TxBatch& batch, std::size_t i) const noexcept {
  const transport::TxDescriptor& d = batch[i];
  return d.payload.size() < threshold_ || d.header_len > 256 || d.payload.size() > 65535;
}

void TxMbufBuilder::prepare(const transport::TxBatch& batch, std::size_t first, std::size_t n) noexcept {
  release_prepared();
  // The run of packets from `first` on that build() copies whole, and that fit.
  std::size_t take = 0;
  while (take < std::min(n, prepared_max) && first + take < batch.size() && copies(batch, first + take) &&
         batch.frame_size(first + take) <= max_copied_)
    ++take;
  if (take == 0 || rte_mempool_get_bulk(frames_, reinterpret_cast<void**>(prepared_.data()),
                                        static_cast<unsigned>(take)) != 0)
    return;  // a pool short of a burst: build() takes them one by one, as without this
  prepared_size_ = take;
  for (std::size_t k = 0; k < take; ++k) {
    const auto* m = reinterpret_cast<const std::uint8_t*>(prepared_[k]);
    rte_prefetch0(m);  // read, and written only when a field changes (shape_frame)
    const std::size_t len = batch.frame_size(first + k);
    const std::uint16_t headroom = headroom_for(len, batch[first + k].header_len);
    // A pool's mbuf has its buffer right after itself and its private area
    // (rte_pktmbuf_init): the address is known without reading the mbuf.
    const std::uint8_t* data = m + buf_offset_ + headroom;
    std::size_t from = 0;
    if (headroom == shifted_headroom) {
      rte_prefetch0(data);  // the stable prefix's line: compared, rarely written
      from = stable_prefix;
    }
    const auto end = reinterpret_cast<std::uintptr_t>(data + std::min<std::size_t>(len, 256));
    for (auto line = reinterpret_cast<std::uintptr_t>(data + from) & ~std::uintptr_t{RTE_CACHE_LINE_SIZE - 1};
         line < end; line += RTE_CACHE_LINE_SIZE)
      prefetch_for_write(reinterpret_cast<const void*>(line));
  }
}

unsigned TxMbufBuilder::frames_available() const noexcept { return rte_mempool_avail_count(frames_); }

void TxMbufBuilder::release_prepared() noexcept {
  if (prepared_next_ < prepared_size_)
    rte_mempool_put_bulk(frames_, reinterpret_cast<void* const*>(prepared_.data() + prepared_next_),
                         static_cast<unsigned>(prepared_size_ - prepared_next_));
  prepared_next_ = prepared_size_ = 0;
}

TxBuild TxMbufBuilder::build(const transport::TxBatch& batch, std::size_t i, rte_mbuf*& out) noexcept {
  const transport::TxDescriptor& d = batch[i];
  const auto header = batch.header(i);
  if (copies(batch, i)) return build_copy(header, d, out);

  rte_mbuf* head = rte_pktmbuf_alloc(small_);
  rte_mbuf* body = rte_pktmbuf_alloc(attach_);
  rte_mbuf* tail = rte_pktmbuf_alloc(small_);
  if (head == nullptr || body == nullptr || tail == nullptr) {
    rte_pktmbuf_free(head);
    rte_pktmbuf_free(body);
    rte_pktmbuf_free(tail);
    return TxBuild::mempool_empty;
  }
  std::memcpy(rte_pktmbuf_append(head, static_cast<std::uint16_t>(header.size())), header.data(), header.size());
  auto* payload = const_cast<std::uint8_t*>(d.payload.data());  // DPDK's API is not const; nothing writes it
  const auto payload_len = static_cast<std::uint16_t>(d.payload.size());
  rte_mbuf_ext_refcnt_update(shared_info_, 1);
  rte_pktmbuf_attach_extbuf(body, payload, reinterpret_cast<rte_iova_t>(payload), payload_len, shared_info_);
  body->data_off = 0;
  body->data_len = payload_len;
  body->pkt_len = payload_len;
  std::memcpy(rte_pktmbuf_append(tail, d.trailer_len), d.trailer.data(), d.trailer_len);
  rte_pktmbuf_chain(head, body);
  rte_pktmbuf_chain(head, tail);
  out = head;
  return TxBuild::zero_copy;
}

rte_mbuf* TxMbufBuilder::copy_frame(std::span<const std::uint8_t> frame) noexcept {
  if (frame.size() > 65535) return nullptr;
  rte_mbuf* m = rte_pktmbuf_alloc(frames_);
  if (m == nullptr) return nullptr;
  char* p = rte_pktmbuf_append(m, static_cast<std::uint16_t>(frame.size()));
  if (p == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  if (!frame.empty()) std::memcpy(p, frame.data(), frame.size());  // an empty span's data() may be null
  return m;
}

std::span<const std::uint8_t> frame_bytes(const rte_mbuf* m, std::vector<std::uint8_t>& scratch,
                                          bool& linearized) noexcept {
  if (m->nb_segs == 1) {
    linearized = false;
    return {rte_pktmbuf_mtod(m, const std::uint8_t*), m->data_len};
  }
  linearized = true;
  scratch.resize(m->pkt_len);
  std::size_t off = 0;
  for (const rte_mbuf* s = m; s != nullptr; s = s->next) {
    std::memcpy(scratch.data() + off, rte_pktmbuf_mtod(s, const std::uint8_t*), s->data_len);
    off += s->data_len;
  }
  return {scratch.data(), off};
}

void free_received(rte_mbuf* m) noexcept {
  // One direct segment nobody else holds: back to its pool without
  // reading the second line (next is NULL in a single segment, DPDK's
  // rule), which rte_pktmbuf_free reads to check it. That line is a cache
  // miss per frame on a receiver whose frames come from another lcore.
  if (m->nb_segs == 1 && RTE_MBUF_DIRECT(m) && rte_mbuf_refcnt_read(m) == 1) {
    rte_mempool_put(m->pool, m);
    return;
  }
  rte_pktmbuf_free(m);
}

void prefetch_received(rte_mbuf* const* frames, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    const auto* m = reinterpret_cast<const char*>(frames[i]);
    rte_prefetch0(m);
    // Where a frame usually is (no private area, the standard headroom,
    // ours 30 bytes further), asked for without waiting for the mbuf's
    // line to tell: the loop below asks again where it really is.
    rte_prefetch0(m + sizeof(rte_mbuf) + RTE_PKTMBUF_HEADROOM);
    rte_prefetch0(m + sizeof(rte_mbuf) + RTE_PKTMBUF_HEADROOM + RTE_CACHE_LINE_SIZE);
    rte_prefetch0(m + sizeof(rte_mbuf) + RTE_PKTMBUF_HEADROOM + 2 * RTE_CACHE_LINE_SIZE);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const char* d = rte_pktmbuf_mtod(frames[i], const char*);
    const std::uint32_t len = std::min<std::uint32_t>(rte_pktmbuf_data_len(frames[i]), 256);
    for (std::uint32_t off = 0; off < len; off += RTE_CACHE_LINE_SIZE) rte_prefetch0(d + off);
  }
}

}  // namespace metaroce::engine
