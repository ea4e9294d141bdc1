#include "engine/impaired_link.hpp"

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <array>

namespace metaroce::engine {

std::unique_ptr<ImpairedLink> ImpairedLink::create(ImpairedLinkConfig config, std::string& error) {
  std::unique_ptr<ImpairedLink> link(new ImpairedLink());
  try {
    link->impairment_ = std::make_unique<fabric::Impairment>(config.fabric);
  } catch (const std::invalid_argument& e) {
    error = e.what();
    return nullptr;
  }
  TxMbufSetup setup;
  setup.name = config.name;
  setup.mbufs = config.mbufs;
  setup.data_room = config.data_room;
  setup.zero_copy_threshold = zero_copy_never;
  setup.socket = rte_eth_dev_socket_id(config.to_port);
  link->mbufs_ = TxMbufBuilder::create(setup, error);
  if (!link->mbufs_) return nullptr;
  link->config_ = std::move(config);
  return link;
}

std::size_t ImpairedLink::forward_once(std::uint64_t now_ns) {
  constexpr std::uint16_t burst = 32;
  std::array<rte_mbuf*, burst> rx{};
  const std::uint16_t n = rte_eth_rx_burst(config_.from_port, config_.from_queue, rx.data(), burst);
  for (std::uint16_t i = 0; i < n; ++i) {
    bool linearized = false;
    const auto bytes = frame_bytes(rx[i], scratch_, linearized);
    if (config_.tap) config_.tap(bytes, now_ns);
    impairment_->submit(now_ns, std::vector<std::uint8_t>(bytes.begin(), bytes.end()));
    rte_pktmbuf_free(rx[i]);
  }
  counters_.received += n;

  released_.clear();
  impairment_->release(now_ns, released_);
  for (auto& frame : released_) {
    rte_mbuf* m = mbufs_->copy_frame(frame.bytes);
    if (m == nullptr) {
      ++counters_.tx_mempool_empty;
      continue;
    }
    tx_pending_.push_back(m);
  }
  std::size_t sent = 0;
  while (sent < tx_pending_.size()) {
    const auto want = static_cast<std::uint16_t>(std::min<std::size_t>(tx_pending_.size() - sent, burst));
    const std::uint16_t took = rte_eth_tx_burst(config_.to_port, config_.to_queue, tx_pending_.data() + sent, want);
    sent += took;
    if (took < want) break;
  }
  counters_.transmitted += sent;
  counters_.tx_deferred += tx_pending_.size() - sent;
  tx_pending_.erase(tx_pending_.begin(), tx_pending_.begin() + static_cast<std::ptrdiff_t>(sent));
  return n + sent;
}

}  // namespace metaroce::engine
