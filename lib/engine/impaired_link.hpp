// One direction of an inline fabric between two ports: frames received on
// `from` go through a fabric::Impairment (loss, delay, paths, ...) in real
// time and leave on `to`. An optional tap sees every frame as it was sent,
// before the fabric touched it (for captures).
//
// This slice copies each frame into a std::vector for the impairment model
// and back into a fresh mbuf on release: simple, and fast enough for tens of
// Gb/s of MTU-sized frames on one core, but a copy per frame.
//
// Threading: one owner calls forward_once(); two links of opposite direction
// over the same two ports can be driven from two lcores (each uses only the
// rx side of `from` and the tx side of `to`).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/mbuf_frames.hpp"
#include "fabric/impairment.hpp"

struct rte_mbuf;

namespace metaroce::engine {

struct ImpairedLinkCounters {
  std::uint64_t received = 0;          // frames taken from `from`
  std::uint64_t transmitted = 0;       // frames taken by `to`
  std::uint64_t tx_deferred = 0;       // not taken by `to` this turn, retried
  std::uint64_t tx_mempool_empty = 0;  // dropped: no mbuf to carry a released frame
};

struct ImpairedLinkConfig {
  std::string name = "link";
  std::uint16_t from_port = 0;
  std::uint16_t from_queue = 0;
  std::uint16_t to_port = 0;
  std::uint16_t to_queue = 0;
  fabric::FabricConfig fabric{};
  std::uint32_t mbufs = 16384;
  std::uint16_t data_room = 0;  // 0: room for a 9000-byte frame
  // Called with every frame received from `from` and its time (ns).
  std::function<void(std::span<const std::uint8_t>, std::uint64_t)> tap;
};

class ImpairedLink {
 public:
  static std::unique_ptr<ImpairedLink> create(ImpairedLinkConfig config, std::string& error);

  // Moves what arrived and what is due at `now_ns`. Returns frames moved.
  std::size_t forward_once(std::uint64_t now_ns);

  [[nodiscard]] const ImpairedLinkCounters& counters() const noexcept { return counters_; }
  [[nodiscard]] const fabric::FabricCounters& fabric_counters() const noexcept { return impairment_->counters(); }

 private:
  ImpairedLink() = default;

  ImpairedLinkConfig config_;
  std::unique_ptr<fabric::Impairment> impairment_;
  std::unique_ptr<TxMbufBuilder> mbufs_;
  std::vector<fabric::ReleasedFrame> released_;
  std::vector<rte_mbuf*> tx_pending_;
  std::vector<std::uint8_t> scratch_;
  ImpairedLinkCounters counters_;
};

}  // namespace metaroce::engine
