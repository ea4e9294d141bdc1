#include "metaroce-fabric/switch_node.hpp"

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <array>
#include <utility>

namespace metaroce::fabric_app {

SwitchNode::SwitchNode(std::vector<std::uint16_t> port_ids, std::vector<std::string> port_names,
                       std::vector<std::unique_ptr<Direction>> out, fabric::ForwardingTable table)
    : port_ids_(std::move(port_ids)),
      port_names_(std::move(port_names)),
      out_(std::move(out)),
      table_(std::move(table)),
      in_(port_ids_.size()),
      depth_(port_ids_.size()),
      published_(port_ids_.size()) {}

std::size_t SwitchNode::turn_st(std::uint64_t now_ns) {
  constexpr std::uint16_t burst = 32;
  std::array<rte_mbuf*, burst> rx{};
  std::size_t moved = 0;
  for (std::size_t i = 0; i < port_ids_.size(); ++i) {
    const std::uint16_t n = rte_eth_rx_burst(port_ids_[i], 0, rx.data(), burst);
    moved += n;
    for (std::uint16_t k = 0; k < n; ++k) {
      rte_mbuf* m = rx[k];
      ++in_[i].received;
      in_[i].received_bytes += m->pkt_len;
      // The addresses are in the first segment of any frame a port hands us.
      const std::optional<std::uint16_t> to =
          table_.route_frame({rte_pktmbuf_mtod(m, const std::uint8_t*), m->data_len});
      if (!to) {
        ++in_[i].dropped_no_route;
        rte_pktmbuf_free(m);
        continue;
      }
      depth_[*to].add(out_[*to]->queued_bytes_st(now_ns));
      out_[*to]->submit_st(now_ns, m);
    }
  }
  for (const auto& d : out_) moved += d->turn_st(now_ns);
  bool holding = false;
  for (const auto& d : out_) holding = holding || d->in_flight_st() != 0;
  if (moved != 0 || holding) last_busy_ns_ = now_ns;
  if (now_ns - last_publish_ns_ >= publish_period_ns) publish_st(now_ns, false);
  return moved;
}

std::uint64_t SwitchNode::next_release_ns_st() const noexcept {
  std::uint64_t next = ~std::uint64_t{0};
  for (const auto& d : out_) next = std::min(next, d->next_release_ns_st());
  return next;
}

void SwitchNode::publish_st(std::uint64_t now_ns, bool wait) {
  std::vector<SwitchPortSnapshot> s(port_ids_.size());
  for (std::size_t i = 0; i < port_ids_.size(); ++i) {
    out_[i]->publish_st(now_ns, true);  // our own lcore's: never contended but by a reader's copy
    SwitchPortSnapshot& p = s[i];
    p.name = port_names_[i];
    p.spec = out_[i]->spec();
    p.in = in_[i];
    rte_eth_stats stats{};
    if (rte_eth_stats_get(port_ids_[i], &stats) == 0) p.in.rx_missed = stats.imissed + stats.rx_nombuf;
    p.out = out_[i]->snapshot().totals;
    p.queue.samples = depth_[i].count();
    p.queue.p50_bytes = depth_[i].percentile(0.50);
    p.queue.p99_bytes = depth_[i].percentile(0.99);
    p.queue.max_bytes = depth_[i].max();
    p.taken_ns = now_ns;
    p.last_busy_ns = last_busy_ns_;
  }
  std::unique_lock lock(published_mutex_, std::defer_lock);
  if (wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return;
  }
  published_ = std::move(s);
  last_publish_ns_ = now_ns;
}

std::vector<SwitchPortSnapshot> SwitchNode::snapshot() const {
  std::lock_guard lock(published_mutex_);
  return published_;
}

void SwitchNode::destroy_links_st() noexcept {
  for (auto& d : out_) d->destroy_link_st();
}

void run_switch_st(SwitchNode& node, const engine::TscClock& clock, NodeControl& control,
                   const std::function<void(std::uint64_t)>& on_turn) {
  run_turns_st(
      clock, control, [&](std::uint64_t now) { return node.turn_st(now); },
      [&] { return node.next_release_ns_st(); }, on_turn);
  node.publish_st(clock.now_ns(), true);
}

}  // namespace metaroce::fabric_app
