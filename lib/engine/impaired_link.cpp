#include "engine/impaired_link.hpp"

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "engine/mbuf_frames.hpp"
#include "engine/port.hpp"
#include "fabric/impairment_impl.hpp"

namespace metaroce::engine {

namespace impaired_link_detail {

// An mbuf the fabric holds: one segment, freed when the handle goes.
class MbufFrame {
 public:
  MbufFrame() = default;
  explicit MbufFrame(rte_mbuf* m) noexcept : m_(m) {}
  MbufFrame(MbufFrame&& other) noexcept : m_(std::exchange(other.m_, nullptr)) {}
  MbufFrame& operator=(MbufFrame&& other) noexcept {
    reset(std::exchange(other.m_, nullptr));
    return *this;
  }
  ~MbufFrame() { reset(nullptr); }

  [[nodiscard]] rte_mbuf* get() const noexcept { return m_; }
  [[nodiscard]] rte_mbuf* release() noexcept { return std::exchange(m_, nullptr); }
  void reset(rte_mbuf* m) noexcept {
    if (m_ != nullptr) rte_pktmbuf_free(m_);
    m_ = m;
  }

 private:
  rte_mbuf* m_ = nullptr;
};

struct MbufFrameOps {
  using Frame = MbufFrame;
  rte_mempool* copies = nullptr;
  rte_mempool* clones = nullptr;
  ImpairedLinkCounters* counters = nullptr;

  static std::span<const std::uint8_t> bytes(const MbufFrame& frame) noexcept {
    const rte_mbuf* m = frame.get();
    return {rte_pktmbuf_mtod(m, const std::uint8_t*), m->data_len};
  }

  // An mbuf is ours to write when it is direct and referenced once: else
  // (a clone, the original of one, an external buffer) write a private copy.
  std::optional<std::span<std::uint8_t>> writable(MbufFrame& frame) const noexcept {
    rte_mbuf* m = frame.get();
    if (!RTE_MBUF_DIRECT(m) || rte_mbuf_refcnt_read(m) != 1) {
      rte_mbuf* copy = rte_pktmbuf_copy(m, copies, 0, UINT32_MAX);
      if (copy == nullptr) return std::nullopt;
      if (copy->nb_segs != 1) {  // a frame larger than the link's data room
        rte_pktmbuf_free(copy);
        return std::nullopt;
      }
      frame.reset(copy);
      m = copy;
      ++counters->private_copies;
    }
    return std::span<std::uint8_t>(rte_pktmbuf_mtod(m, std::uint8_t*), m->data_len);
  }

  bool duplicate(MbufFrame& original, MbufFrame& copy) const noexcept {
    rte_mbuf* clone = rte_pktmbuf_clone(original.get(), clones);
    if (clone == nullptr) return false;
    copy.reset(clone);
    ++counters->clones;
    return true;
  }
};

}  // namespace impaired_link_detail

using impaired_link_detail::MbufFrame;
using impaired_link_detail::MbufFrameOps;

struct ImpairedLink::Fabric {
  fabric::BasicImpairment<MbufFrameOps> model;
};

namespace {

rte_mempool* make_pool(const std::string& base, std::uint32_t n, std::uint16_t data_room, int socket,
                       std::string& error) {
  static std::atomic<unsigned> next{0};
  const std::string name = fmt::format("{}_{}", base.substr(0, 20), next.fetch_add(1));
  rte_mempool* pool = rte_pktmbuf_pool_create(name.c_str(), n, 256, 0, data_room, socket);
  if (pool == nullptr)
    error = fmt::format("link mempool '{}' of {} mbufs of {} bytes: {}; lower the link's mbufs or give EAL more "
                        "memory (-m)",
                        name, n, data_room, rte_strerror(rte_errno));
  return pool;
}

}  // namespace

std::unique_ptr<ImpairedLink> ImpairedLink::create(ImpairedLinkConfig config, std::string& error) {
  std::unique_ptr<ImpairedLink> link(new ImpairedLink());
  const int socket = rte_eth_dev_socket_id(config.from_port);
  const std::uint16_t room = config.data_room != 0 ? config.data_room : data_room_for_mtu(9000);
  link->copies_ = make_pool(config.name + "_cpy", config.mbufs, room, socket, error);
  if (link->copies_ == nullptr) return nullptr;
  link->clones_ = make_pool(config.name + "_cln", config.mbufs, 0, socket, error);
  if (link->clones_ == nullptr) return nullptr;
  MbufFrameOps ops{link->copies_, link->clones_, &link->counters_};
  try {
    link->fabric_ = std::make_unique<Fabric>(Fabric{fabric::BasicImpairment<MbufFrameOps>(config.fabric, ops)});
  } catch (const std::invalid_argument& e) {
    error = e.what();
    return nullptr;
  }
  link->config_ = std::move(config);
  return link;
}

ImpairedLink::~ImpairedLink() {
  fabric_.reset();  // frees the frames in flight
  for (std::size_t i = tx_head_; i < tx_pending_.size(); ++i) rte_pktmbuf_free(tx_pending_[i]);
  rte_mempool_free(clones_);
  rte_mempool_free(copies_);
}

const fabric::FabricCounters& ImpairedLink::fabric_counters() const noexcept { return fabric_->model.counters(); }

const fabric::FabricConfig& ImpairedLink::fabric_config() const noexcept { return fabric_->model.config(); }

std::size_t ImpairedLink::in_flight() const noexcept {
  return fabric_->model.in_flight() + (tx_pending_.size() - tx_head_);
}

std::uint64_t ImpairedLink::next_release_ns() const noexcept { return fabric_->model.next_release_time(); }

std::size_t ImpairedLink::forward_once(std::uint64_t now_ns) {
  constexpr std::uint16_t burst = 32;
  std::array<rte_mbuf*, burst> rx{};
  const std::uint16_t n = rte_eth_rx_burst(config_.from_port, config_.from_queue, rx.data(), burst);
  for (std::uint16_t i = 0; i < n; ++i) submit(now_ns, rx[i]);
  return n + release_once(now_ns);
}

void ImpairedLink::submit(std::uint64_t now_ns, rte_mbuf* m) {
  ++counters_.received;
  counters_.received_bytes += m->pkt_len;
  if (config_.tap) {
    bool linearized = false;
    config_.tap(frame_bytes(m, scratch_, linearized), now_ns);
  }
  if (m->nb_segs != 1) {
    // The model reads and writes a frame as one span.
    rte_mbuf* flat = rte_pktmbuf_copy(m, copies_, 0, UINT32_MAX);
    rte_pktmbuf_free(m);
    if (flat == nullptr || flat->nb_segs != 1) {
      if (flat != nullptr) rte_pktmbuf_free(flat);
      ++counters_.dropped_no_mbuf;
      return;
    }
    ++counters_.rx_linearized;
    m = flat;
  }
  fabric_->model.submit(now_ns, MbufFrame(m));
}

std::size_t ImpairedLink::release_once(std::uint64_t now_ns) {
  fabric_->model.release_to(now_ns, [this](std::uint64_t, std::uint32_t, MbufFrame&& frame) {
    rte_mbuf* m = frame.release();
    tx_pending_.push_back(m);
    tx_pending_len_.push_back(m->pkt_len);
  });
  const std::size_t before = counters_.transmitted;
  transmit_pending();
  return counters_.transmitted - before;
}

std::uint64_t ImpairedLink::queued_bytes(std::uint64_t now_ns) { return fabric_->model.queued_bytes(now_ns); }

void ImpairedLink::transmit_pending() {
  constexpr std::size_t burst = 32;
  while (tx_head_ < tx_pending_.size()) {
    const auto want = static_cast<std::uint16_t>(std::min(tx_pending_.size() - tx_head_, burst));
    const std::uint16_t took = rte_eth_tx_burst(config_.to_port, config_.to_queue, tx_pending_.data() + tx_head_, want);
    for (std::uint16_t i = 0; i < took; ++i) counters_.transmitted_bytes += tx_pending_len_[tx_head_ + i];
    tx_head_ += took;
    counters_.transmitted += took;
    if (took < want) break;
  }
  counters_.tx_deferred += tx_pending_.size() - tx_head_;
  if (tx_head_ == tx_pending_.size()) {
    tx_pending_.clear();
    tx_pending_len_.clear();
    tx_head_ = 0;
  } else if (tx_head_ >= 4096) {  // a long backlog: reclaim the sent prefix now and then
    tx_pending_.erase(tx_pending_.begin(), tx_pending_.begin() + static_cast<std::ptrdiff_t>(tx_head_));
    tx_pending_len_.erase(tx_pending_len_.begin(), tx_pending_len_.begin() + static_cast<std::ptrdiff_t>(tx_head_));
    tx_head_ = 0;
  }
}

}  // namespace metaroce::engine
