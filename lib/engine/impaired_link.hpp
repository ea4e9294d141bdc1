// One direction of an inline fabric between two ports: frames received on
// `from` go through a fabric::BasicImpairment (loss, delay, paths, ...) in
// real time and leave on `to`. An optional tap sees every frame as it was
// sent, before the fabric touched it (for captures).
//
// The delay line holds the received mbufs themselves, not copies: a frame
// leaves on `to` in the mbuf it arrived in. Copies are made only where the
// model needs them, from the link's own pools:
//   - a chained frame (zero-copy payloads) is made contiguous on arrival;
//   - a duplicate is a clone (rte_pktmbuf_clone: a second mbuf header over the
//     same data, no byte copied);
//   - before a frame is written (CE mark, corrupted bit), a frame that shares
//     its bytes (a clone, its original, an mbuf with an external buffer or a
//     reference count above 1) is replaced by a private copy, so writing one
//     never changes another.
// So the `from` port's mbufs (its rx pool, or for net_ring the sender's pool)
// stay out of their pool for the whole delay: size that pool for the bytes
// in flight (rate x delay). A pool that runs dry shows as the port's
// rx_nombuf / imissed, frames never received and so never counted here.
//
// Counters. With in_flight() = frames in the model + frames waiting for `to`:
//   received + fabric.duplicated == transmitted + fabric.dropped()
//                                   + dropped_no_mbuf + in_flight()
//
// Threading: one owner calls forward_once(); two links of opposite direction
// over the same two ports can be driven from two lcores (each uses only the
// rx side of `from` and the tx side of `to`). Teardown: destroy the link
// before the pools its frames came from (the `from` port, or for net_ring
// the sender's pools), and after `to` no longer holds its mbufs (drained
// ring, stopped port).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fabric/config.hpp"
#include "fabric/counters.hpp"

struct rte_mbuf;
struct rte_mempool;

namespace metaroce::engine {

struct ImpairedLinkCounters {
  std::uint64_t received = 0;           // frames taken from `from`
  std::uint64_t received_bytes = 0;
  std::uint64_t transmitted = 0;        // frames taken by `to`
  std::uint64_t transmitted_bytes = 0;
  std::uint64_t tx_deferred = 0;        // not taken by `to` this turn, retried (not a drop)
  std::uint64_t rx_linearized = 0;      // chained frames copied into one mbuf on arrival
  std::uint64_t dropped_no_mbuf = 0;    // dropped on arrival: no mbuf to make a chained frame contiguous
  std::uint64_t clones = 0;             // duplicates made by reference
  std::uint64_t private_copies = 0;     // copies made before writing into a frame that shared its bytes
};

struct ImpairedLinkConfig {
  std::string name = "link";
  std::uint16_t from_port = 0;
  std::uint16_t from_queue = 0;
  std::uint16_t to_port = 0;
  std::uint16_t to_queue = 0;
  fabric::FabricConfig fabric{};
  std::uint32_t mbufs = 16384;  // the link's pools: contiguous copies, and clones
  std::uint16_t data_room = 0;  // 0: room for a 9000-byte frame
  // Called with every frame received from `from` and its time (ns).
  std::function<void(std::span<const std::uint8_t>, std::uint64_t)> tap;
};

class ImpairedLink {
 public:
  // nullptr with `error` set (a bad fabric config, no memory for the pools).
  static std::unique_ptr<ImpairedLink> create(ImpairedLinkConfig config, std::string& error);
  // Frees every frame it holds, then its pools.
  ~ImpairedLink();
  ImpairedLink(const ImpairedLink&) = delete;
  ImpairedLink& operator=(const ImpairedLink&) = delete;

  // Moves what arrived and what is due at `now_ns` (the clock of the fabric
  // config's times: blackholes start at `now_ns` = their `at`). Returns
  // frames received plus frames transmitted.
  std::size_t forward_once(std::uint64_t now_ns);

  // The same in two halves, for a switch's output port fed from several
  // input ports (the caller received and routed the frames; `from` is not
  // read): submit takes one frame (its mbuf now the link's), release_once
  // moves what is due to `to` and returns the frames `to` took.
  void submit(std::uint64_t now_ns, rte_mbuf* frame);
  std::size_t release_once(std::uint64_t now_ns);
  // Bytes in the model's output queue(s) at `now_ns` (0 without `rate`).
  [[nodiscard]] std::uint64_t queued_bytes(std::uint64_t now_ns);

  [[nodiscard]] const ImpairedLinkCounters& counters() const noexcept { return counters_; }
  [[nodiscard]] const fabric::FabricCounters& fabric_counters() const noexcept;
  [[nodiscard]] const fabric::FabricConfig& fabric_config() const noexcept;
  // Frames in the model plus frames released but not yet taken by `to`.
  [[nodiscard]] std::size_t in_flight() const noexcept;
  // When the model releases its next frame; UINT64_MAX when it holds none.
  [[nodiscard]] std::uint64_t next_release_ns() const noexcept;

 private:
  struct Fabric;  // the model over mbufs (impaired_link.cpp)
  ImpairedLink() = default;
  void transmit_pending();

  ImpairedLinkConfig config_;
  rte_mempool* copies_ = nullptr;  // whole frames: contiguous and private copies
  rte_mempool* clones_ = nullptr;  // no data room: duplicates by reference
  std::unique_ptr<Fabric> fabric_;
  std::vector<rte_mbuf*> tx_pending_;         // released, not yet taken by `to`; from tx_head_
  std::vector<std::uint32_t> tx_pending_len_;  // their lengths, for transmitted_bytes
  std::size_t tx_head_ = 0;
  std::vector<std::uint8_t> scratch_;  // the tap's view of a chained frame
  ImpairedLinkCounters counters_;
};

}  // namespace metaroce::engine
