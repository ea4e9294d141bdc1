#include "engine/engine_host.hpp"

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "wire/byte_order.hpp"

namespace metaroce::engine {

std::unique_ptr<EngineHost> EngineHost::create(const EngineHostConfig& config, std::string& error) {
  std::unique_ptr<EngineHost> host(new EngineHost(config));
  TxMbufSetup setup;
  setup.name = config.name;
  setup.mbufs = config.tx_mbufs;
  setup.data_room = config.tx_data_room;
  setup.zero_copy_threshold = config.zero_copy_threshold;
  setup.multi_segment_tx = config.multi_segment_tx;
  setup.socket = rte_eth_dev_socket_id(config.port_id);
  host->tx_builder_ = TxMbufBuilder::create(setup, error);
  if (!host->tx_builder_) return nullptr;
  // Payloads the builder would attach stay out of the batch's arena.
  if (host->tx_builder_->zero_copy_threshold() != zero_copy_never)
    host->batch_.set_inline_limit(host->tx_builder_->zero_copy_threshold() - 1);
  host->wheel_.advance(host->clock_.now_ns());
  host->tx_pending_.reserve(4 * transport::Connection::burst_limit);
  return host;
}

EngineHost::~EngineHost() {
  // Frames nobody will send any more go back to their pools (held ones are
  // plain bytes).
  for (std::size_t i = tx_pending_head_; i < tx_pending_.size(); ++i) rte_pktmbuf_free(tx_pending_[i]);
  // Connections hold timers on the wheel: they go first.
  connection_list_.clear();
  connections_.clear();
}

transport::Connection* EngineHost::add_connection(const transport::ConnectionConfig& config,
                                                  std::unique_ptr<transport::CongestionControl> congestion,
                                                  std::string& error) {
  if (connections_.size() >= config_.max_connections) {
    ++counters_.connections_refused;
    error = fmt::format("{}: already {} connections, its max_connections: raise max_connections, or put the "
                        "connection on another host (lcore, queue)",
                        config_.name, connections_.size());
    return nullptr;
  }
  if (connections_.contains(config.local_qpn)) {
    error = fmt::format("{}: QPN {:#x} already has a connection: pick another local_qpn", config_.name,
                        config.local_qpn);
    return nullptr;
  }
  if (steering_queue(config.local_qpn, config_.queues) != config_.queue ||
      steering_queue(config.peer_qpn, config_.queues) != config_.queue) {
    error = fmt::format("{}: QPNs {:#x} -> {:#x} steer to queues {} and {}, but this host owns queue {} of {}: pick "
                        "QPNs with qpn % {} == {} on both ends",
                        config_.name, config.local_qpn, config.peer_qpn, steering_queue(config.local_qpn, config_.queues),
                        steering_queue(config.peer_qpn, config_.queues), config_.queue, config_.queues,
                        config_.queues, config_.queue);
    return nullptr;
  }
  auto c = transport::Connection::create(config, memory_, wheel_, std::move(congestion), error);
  if (!c) return nullptr;
  auto* raw = c.get();
  connections_[config.local_qpn] = std::move(c);
  connection_list_.push_back(raw);
  return raw;
}

transport::Connection* EngineHost::connection(std::uint32_t local_qpn) noexcept {
  const auto it = connections_.find(local_qpn);
  return it == connections_.end() ? nullptr : it->second.get();
}

bool EngineHost::remove_connection(std::uint32_t local_qpn) {
  const auto it = connections_.find(local_qpn);
  if (it == connections_.end()) return false;
  std::erase(connection_list_, it->second.get());
  connections_.erase(it);
  return true;
}

bool EngineHost::send_frame(std::span<const std::uint8_t> frame) {
  if (frame.size() > tx_builder_->max_copied_frame()) {
    ++counters_.tx_frame_too_large;
    return false;
  }
  if (rte_mbuf* m = tx_held() == 0 ? tx_builder_->copy_frame(frame) : nullptr; m != nullptr) {
    tx_pending_.push_back(m);
    return true;
  }
  ++counters_.tx_mempool_empty;
  held_bytes_.insert(held_bytes_.end(), frame.begin(), frame.end());
  held_ends_.push_back(held_bytes_.size());
  return true;
}

// Packet i of batch_ found no mbuf: copy it aside, to be built on a later
// turn. Not a drop: the connection counts it sent, and it will be.
void EngineHost::hold(std::size_t i) {
  if (batch_.frame_size(i) > tx_builder_->max_copied_frame()) {
    ++counters_.tx_frame_too_large;  // held frames are copied: this one never fits
    return;
  }
  ++counters_.tx_mempool_empty;
  batch_.serialize(i, held_bytes_);
  held_ends_.push_back(held_bytes_.size());
}

// Builds held frames, oldest first, while the pool gives mbufs; true when
// none is left.
bool EngineHost::release_held() {
  while (held_head_ < held_ends_.size()) {
    const std::size_t from = held_head_ == 0 ? 0 : held_ends_[held_head_ - 1];
    rte_mbuf* m = tx_builder_->copy_frame(
        std::span<const std::uint8_t>(held_bytes_.data() + from, held_ends_[held_head_] - from));
    if (m == nullptr) {
      // A NIC frees what it has sent only when asked (or on later bursts,
      // which we do not make while frames are held): ask.
      rte_eth_tx_done_cleanup(config_.port_id, config_.queue, 0);
      return false;
    }
    tx_pending_.push_back(m);
    ++held_head_;
  }
  held_bytes_.clear();
  held_ends_.clear();
  held_head_ = 0;
  return true;
}

namespace {

// Four received frames that look alike: one segment each, the same length,
// IPv4 or IPv6 right after an untagged Ethernet header. Their ICRCs can be
// folded together (wire::compute_icrcs); the parser still checks that this
// was the span the ICRC covers.
bool four_alike(rte_mbuf* const* f) noexcept {
  const std::uint16_t len = f[0]->data_len;
  if (len < 64) return false;
  for (int k = 0; k < 4; ++k) {
    if (f[k]->nb_segs != 1 || f[k]->data_len != len) return false;
    const auto* p = rte_pktmbuf_mtod(f[k], const std::uint8_t*);
    const std::uint16_t type = wire::load_be16(p + 12);
    if (type != 0x0800 && type != 0x86dd) return false;
  }
  return true;
}

}  // namespace

void EngineHost::receive_four(std::uint64_t now, rte_mbuf* const* frames) {
  constexpr std::uint32_t l3 = wire::ethernet_header_size;
  const std::uint32_t end = frames[0]->data_len - wire::icrc_size;
  std::array<wire::ByteSpan, 4> spans;
  for (int k = 0; k < 4; ++k)
    spans[k] = wire::ByteSpan(rte_pktmbuf_mtod(frames[k], const std::uint8_t*) + l3, end - l3);
  std::array<std::uint32_t, 4> icrcs;
  wire::compute_icrcs(spans, icrcs.data());
  for (int k = 0; k < 4; ++k) {
    const wire::ParseOptions::Precomputed pre{icrcs[k], l3, end};
    receive(now, frames[k], &pre);
    free_received(frames[k]);
  }
}

void EngineHost::receive(std::uint64_t now, rte_mbuf* m, const wire::ParseOptions::Precomputed* icrc) {
  ++counters_.rx_frames;
  counters_.rx_bytes += m->pkt_len;
  bool linearized = false;
  const auto bytes = frame_bytes(m, rx_scratch_, linearized);
  counters_.rx_linearized += linearized ? 1 : 0;
  wire::ParsedFrame parsed;
  wire::ParseOptions options;
  options.verify_icrc = !config_.icrc_offload;
  options.precomputed_icrc = icrc;
  const wire::ParseError e = wire::parse_frame(bytes, parsed, options);
  if (e != wire::ParseError::ok) {
    ++counters_.rx_parse_errors[static_cast<std::size_t>(e)];
    return;
  }
  if (parsed.bth.dest_qp == management_qpn && management_) {
    ++counters_.rx_management;
    management_(now, parsed);
    return;
  }
  const auto it = connections_.find(parsed.bth.dest_qp);
  if (it == connections_.end()) {
    if (steering_queue(parsed.bth.dest_qp, config_.queues) != config_.queue)
      ++counters_.rx_misdirected;  // another queue's QPN: the sender or the NIC steered it wrong
    else
      ++counters_.rx_unknown_qpn;
    return;
  }
  // The connection's VLAN (by VID; the priority bits may be rewritten on
  // the way), or none: the same QPN on another VLAN is another network's.
  // The engine enables no VLAN stripping, so the tag is in the frame.
  const transport::Endpoints& endpoints = it->second->config().endpoints;
  const bool tagged = parsed.l3_offset != wire::ethernet_header_size;
  if (tagged != endpoints.vlan_present ||
      (tagged && ((wire::load_be16(bytes.data() + wire::ethernet_header_size) ^ endpoints.vlan_tci) & 0x0fff) != 0)) {
    ++counters_.rx_vlan_mismatch;
    return;
  }
  ++counters_.rx_delivered;
  // The payload is placed (copied to its destination) inside on_frame: the
  // mbuf can be freed right after.
  it->second->on_frame(now, parsed);
}

std::size_t EngineHost::flush_tx() {
  const std::size_t waiting = tx_pending_.size() - tx_pending_head_;
  if (waiting == 0) return 0;
  std::size_t sent = 0;
  while (sent < waiting) {
    const auto n = static_cast<std::uint16_t>(std::min<std::size_t>(waiting - sent, burst_size));
    const std::uint16_t took =
        rte_eth_tx_burst(config_.port_id, config_.queue, tx_pending_.data() + tx_pending_head_ + sent, n);
    for (std::uint16_t k = 0; k < took; ++k) counters_.tx_bytes += tx_pending_[tx_pending_head_ + sent + k]->pkt_len;
    sent += took;
    if (took < n) {
      ++counters_.tx_ring_full;
      counters_.tx_deferred += waiting - sent;
      break;
    }
  }
  counters_.tx_frames += sent;
  tx_pending_head_ += sent;
  if (tx_pending_head_ == tx_pending_.size()) {
    tx_pending_.clear();
    tx_pending_head_ = 0;
  }
  return sent;
}

std::size_t EngineHost::poll_once() {
  ++counters_.polls;
  std::uint64_t now = clock_.now_ns();
  if (last_poll_ns_ != 0) counters_.max_poll_gap_ns = std::max(counters_.max_poll_gap_ns, now - last_poll_ns_);
  last_poll_ns_ = now;
  std::array<rte_mbuf*, burst_size> rx{};
  const std::uint16_t received = rte_eth_rx_burst(config_.port_id, config_.queue, rx.data(), burst_size);
  prefetch_received(rx.data(), received);
  for (std::uint16_t i = 0; i < received;) {
    if (i + 4 <= received && !config_.icrc_offload && four_alike(rx.data() + i)) {
      receive_four(now, rx.data() + i);
      i += 4;
      continue;
    }
    receive(now, rx[i]);
    free_received(rx[i]);
    ++i;
  }
  if (received != 0) now = clock_.now_ns();
  wheel_.advance(now);

  std::size_t sent = flush_tx();
  // Back-pressure: while the PMD has not taken last turn's frames, or held
  // frames wait for mbufs, the connections keep theirs (their windows hold
  // them); nothing is dropped.
  if (tx_waiting() == 0) {
    if (release_held()) poll_connections(now);
    sent += flush_tx();
  }
  const std::size_t work = received + sent;
  if (work == 0) ++counters_.idle_polls;
  return work;
}

void EngineHost::poll_connections(std::uint64_t now) {
  const std::size_t n = connection_list_.size();
  for (std::size_t k = 0; k < n; ++k) {
    transport::Connection* c = connection_list_[(poll_cursor_ + k) % n];
    batch_.clear();
    c->poll(now, batch_);
    for (std::size_t i = 0; i < batch_.size(); ++i) {
      if (tx_held() != 0) {  // behind a held frame of its connection, in order
        hold(i);
        continue;
      }
      if (i % TxMbufBuilder::prepared_max == 0) tx_builder_->prepare(batch_, i, batch_.size() - i);
      rte_mbuf* m = nullptr;
      switch (tx_builder_->build(batch_, i, m)) {
        case TxBuild::copied: ++counters_.tx_copied; tx_pending_.push_back(m); break;
        case TxBuild::zero_copy: ++counters_.tx_zero_copy; tx_pending_.push_back(m); break;
        case TxBuild::mempool_empty: hold(i); break;
        case TxBuild::too_large: ++counters_.tx_frame_too_large; break;
      }
    }
    tx_builder_->release_prepared();
    if (tx_held() != 0) {
      // The pool is empty: the other connections keep their frames, and the
      // next of them goes first once it refills (no connection starves).
      poll_cursor_ = (poll_cursor_ + k + 1) % n;
      return;
    }
  }
}

void EngineHost::idle(bool nothing_done) {
  if (!nothing_done || config_.idle_sleep_us == 0) return;
  ++counters_.idle_sleeps;
  std::this_thread::sleep_for(std::chrono::microseconds(config_.idle_sleep_us));
}

void EngineHost::refresh_port_counters() noexcept {
  rte_eth_stats stats{};
  if (rte_eth_stats_get(config_.port_id, &stats) == 0) counters_.rx_mempool_empty = stats.rx_nombuf;
}

}  // namespace metaroce::engine
