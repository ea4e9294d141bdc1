#include "engine/engine_host.hpp"

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "engine/port.hpp"
#include "engine/steering.hpp"
#include "wire/byte_order.hpp"
#include "wire/frame.hpp"

namespace metaroce::engine {

namespace {
host::HostConfig host_config(const EngineHostConfig& c) {
  host::HostConfig h;
  h.name = c.name;
  h.queue = c.queue;
  h.queues = c.queues;
  h.max_connections = c.max_connections;
  h.pool_limits = c.pool_limits;
  h.tx_budget_frames = c.tx_budget_frames;
  return h;
}
}  // namespace

EngineHost::EngineHost(const EngineHostConfig& config) : config_(config), host_(host_config(config)) {
  ports_.push_back(TxPort{config.port_id, config.queue, true, {}, 0});
  for (const EnginePortQueue& p : config.more_ports) ports_.push_back(TxPort{p.port_id, p.queue, true, {}, 0});
}

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
    host->host_.set_tx_inline_limit(host->tx_builder_->zero_copy_threshold() - 1);
  host->host_.advance(host->clock_.now_ns());
  for (TxPort& p : host->ports_) p.pending.reserve(4 * transport::Connection::burst_limit);
  if (host->ports_.size() > 1) host->poll_links(host->clock_.now_ns());
  return host;
}

EngineHost::~EngineHost() {
  // Frames nobody will send any more go back to their pools (held ones are
  // plain bytes).
  for (TxPort& p : ports_)
    for (std::size_t i = p.head; i < p.pending.size(); ++i) rte_pktmbuf_free(p.pending[i]);
}

transport::Connection* EngineHost::add_connection(const transport::ConnectionConfig& config,
                                                  std::unique_ptr<transport::CongestionControl> congestion,
                                                  std::string& error) {
  return host_.add_connection(config, std::move(congestion), error);
}

transport::Connection* EngineHost::connection(std::uint32_t local_qpn) noexcept {
  return host_.connection(local_qpn);
}

bool EngineHost::remove_connection(std::uint32_t local_qpn) { return host_.remove_connection(local_qpn); }

bool EngineHost::send_frame(std::span<const std::uint8_t> frame) { return host_.send_frame(frame, sink_); }

std::size_t EngineHost::MbufSink::take(const transport::TxBatch& batch, std::size_t first) {
  TxMbufBuilder& builder = *owner_.tx_builder_;
  EngineCounters& counters = owner_.host_.counters();
  std::size_t i = first;
  for (; i < batch.size(); ++i) {
    if ((i - first) % TxMbufBuilder::prepared_max == 0) builder.prepare(batch, i, batch.size() - i);
    const std::uint16_t port = batch[i].port;
    if (port >= owner_.ports_.size()) {
      ++counters.tx_no_such_port;
      continue;
    }
    if (owner_.drops_for_link(port)) {
      ++counters.tx_dropped_link_down;
      continue;
    }
    std::vector<rte_mbuf*>& pending = owner_.ports_[port].pending;
    rte_mbuf* m = nullptr;
    const TxBuild built = builder.build(batch, i, m);
    if (built == TxBuild::mempool_empty) break;
    switch (built) {
      case TxBuild::copied: ++counters.tx_copied; pending.push_back(m); break;
      case TxBuild::zero_copy: ++counters.tx_zero_copy; pending.push_back(m); break;
      case TxBuild::too_large: ++counters.tx_frame_too_large; break;
      case TxBuild::mempool_empty: break;
    }
  }
  builder.release_prepared();
  return i - first;
}

// Frames the host builds itself (connection manager, neighbours) leave
// through port 0.
bool EngineHost::MbufSink::take_copy(std::span<const std::uint8_t> frame) {
  if (owner_.drops_for_link(0)) {
    ++owner_.host_.counters().tx_dropped_link_down;
    return true;
  }
  rte_mbuf* m = owner_.tx_builder_->copy_frame(frame);
  if (m == nullptr) return false;
  owner_.ports_[0].pending.push_back(m);
  return true;
}

std::size_t EngineHost::MbufSink::max_copied_frame() const { return owner_.tx_builder_->max_copied_frame(); }

// A NIC frees what it has sent only when asked (or on later bursts, which
// we do not make while frames are held): ask.
void EngineHost::MbufSink::reclaim() {
  for (const TxPort& p : owner_.ports_) rte_eth_tx_done_cleanup(p.port_id, p.queue, 0);
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
  bool linearized = false;
  const auto bytes = frame_bytes(m, rx_scratch_, linearized);
  host_.counters().rx_linearized += linearized ? 1 : 0;
  wire::ParseOptions options;
  options.verify_icrc = !config_.icrc_offload;
  options.precomputed_icrc = icrc;
  host_.receive(now, bytes, options);
}

void EngineHost::receive_burst(std::uint64_t now, rte_mbuf* const* rx, std::uint16_t received) {
  // On a host whose connections are all secure the tags stand in for the
  // ICRCs (Host::all_secure): none is computed ahead.
  for (std::uint16_t i = 0; i < received;) {
    if (i + 4 <= received && !config_.icrc_offload && !host_.all_secure() && four_alike(rx + i)) {
      receive_four(now, rx + i);
      i += 4;
      continue;
    }
    receive(now, rx[i]);
    free_received(rx[i]);
    ++i;
  }
}

std::uint16_t EngineHost::hand_off(rte_mbuf** rx, std::uint16_t n) {
  EngineCounters& counters = host_.counters();
  const auto lcores = static_cast<std::uint16_t>(handoff_.rings.size());
  std::uint16_t kept = 0;
  for (std::uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = rx[i];
    const std::span<const std::uint8_t> bytes{rte_pktmbuf_mtod(m, const std::uint8_t*), m->data_len};
    std::uint32_t qpn = 0;
    std::uint16_t owner = handoff_.self;
    if (wire::peek_dest_qp(bytes, qpn)) {
      std::uint32_t inner = 0;
      if (qpn != management_qpn)
        owner = steering_queue(qpn, lcores);
      else if (handoff_.management_owner != nullptr && handoff_.management_owner(bytes, inner))
        owner = steering_queue(inner, lcores);
      else
        owner = handoff_.management_lcore;
    } else if (handoff_.share_other_frames) {
      for (std::uint16_t l = 0; l < lcores; ++l) {
        if (l == handoff_.self) continue;
        rte_mbuf_refcnt_update(m, 1);
        if (rte_ring_mp_enqueue(handoff_.rings[l], m) == 0) {
          ++counters.rx_shared;
        } else {
          rte_mbuf_refcnt_update(m, -1);
          ++counters.rx_handoff_ring_full;
        }
      }
    }
    if (owner == handoff_.self) {
      rx[kept++] = m;
    } else if (rte_ring_mp_enqueue(handoff_.rings[owner], m) == 0) {
      ++counters.rx_handed_off;
    } else {
      ++counters.rx_handoff_ring_full;
      rte_pktmbuf_free(m);
    }
  }
  return kept;
}

std::size_t EngineHost::flush_port(std::uint16_t k) {
  TxPort& p = ports_[k];
  const std::size_t waiting = p.pending.size() - p.head;
  if (waiting == 0) return 0;
  EngineCounters& counters = host_.counters();
  if (drops_for_link(k)) {
    // Built before the link went down: a NIC with its link down may never
    // take them, and the transport resends them on other planes.
    for (std::size_t i = p.head; i < p.pending.size(); ++i) rte_pktmbuf_free(p.pending[i]);
    counters.tx_dropped_link_down += waiting;
    p.pending.clear();
    p.head = 0;
    return 0;
  }
  std::size_t sent = 0;
  while (sent < waiting) {
    const auto n = static_cast<std::uint16_t>(std::min<std::size_t>(waiting - sent, burst_size));
    const std::uint16_t took = rte_eth_tx_burst(p.port_id, p.queue, p.pending.data() + p.head + sent, n);
    for (std::uint16_t i = 0; i < took; ++i) counters.tx_bytes += p.pending[p.head + sent + i]->pkt_len;
    sent += took;
    if (took < n) {
      ++counters.tx_ring_full;
      counters.tx_deferred += waiting - sent;
      break;
    }
  }
  counters.tx_frames += sent;
  p.head += sent;
  if (p.head == p.pending.size()) {
    p.pending.clear();
    p.head = 0;
  }
  return sent;
}

std::size_t EngineHost::flush_tx() {
  std::size_t sent = 0;
  for (std::uint16_t k = 0; k < ports_.size(); ++k) sent += flush_port(k);
  return sent;
}

void EngineHost::poll_links(std::uint64_t now) {
  next_link_poll_ns_ = now + config_.link_poll_ns;
  for (std::uint16_t k = 0; k < ports_.size(); ++k) {
    // The PMD's word, and for a port on a kernel interface (net_af_packet,
    // net_af_xdp, net_tap) that interface's IFF_RUNNING as well:
    // net_af_packet reports its link up whatever the interface's state.
    const bool up = port_link(ports_[k].port_id).up();
    if (up == ports_[k].link_up) continue;
    ports_[k].link_up = up;
    host_.set_port_link(now, k, up);
  }
}

std::size_t EngineHost::poll_once() {
  EngineCounters& counters = host_.counters();
  ++counters.polls;
  std::uint64_t now = clock_.now_ns();
  if (last_poll_ns_ != 0) {
    const std::uint64_t gap = now - last_poll_ns_;
    counters.max_poll_gap_ns = std::max(counters.max_poll_gap_ns, gap);
    counters.poll_stalls += gap >= stall_ns ? 1 : 0;
  }
  last_poll_ns_ = now;
  std::array<rte_mbuf*, burst_size> rx{};
  std::size_t received = 0;
  if (!handoff_.rings.empty()) {
    // What other lcores took for this one first: it arrived earlier.
    const auto n = static_cast<std::uint16_t>(
        rte_ring_sc_dequeue_burst(handoff_.rings[handoff_.self], reinterpret_cast<void**>(rx.data()), burst_size,
                                  nullptr));
    prefetch_received(rx.data(), n);
    receive_burst(now, rx.data(), n);
    received += n;
  }
  for (const TxPort& p : ports_) {
    const std::uint16_t taken = rte_eth_rx_burst(p.port_id, p.queue, rx.data(), burst_size);
    const std::uint16_t own = handoff_.rings.empty() ? taken : hand_off(rx.data(), taken);
    prefetch_received(rx.data(), own);
    receive_burst(now, rx.data(), own);
    received += taken;
  }
  if (received != 0) now = clock_.now_ns();
  host_.advance(now);
  // A host of one port has no other plane to move traffic to: its link is
  // left to the transport's timers, as before planes.
  if (config_.link_poll_ns != 0 && ports_.size() > 1 && now >= next_link_poll_ns_) poll_links(now);

  std::size_t sent = flush_tx();
  // Back-pressure: while the PMD has not taken last turn's frames, or held
  // frames wait for mbufs, the connections keep theirs (their windows hold
  // them); nothing is dropped.
  if (tx_waiting() == 0) {
    host_.transmit(now, sink_);
    sent += flush_tx();
  }
  const std::size_t work = received + sent;
  if (work == 0) ++counters.idle_polls;
  return work;
}

void EngineHost::idle(bool nothing_done) {
  if (!nothing_done || config_.idle_sleep_us == 0) return;
  ++host_.counters().idle_sleeps;
  std::this_thread::sleep_for(std::chrono::microseconds(config_.idle_sleep_us));
}

void EngineHost::refresh_port_counters() noexcept {
  std::uint64_t nombuf = 0;
  for (const TxPort& p : ports_) {
    rte_eth_stats stats{};
    if (rte_eth_stats_get(p.port_id, &stats) == 0) nombuf += stats.rx_nombuf;
  }
  host_.counters().rx_mempool_empty = nombuf;
}

}  // namespace metaroce::engine
