// The receiver's half of congestion control: a host's inbound capacity
// shared among the senders that are sending to it. The transport reports
// every data packet that arrives and asks, for each ACK it sends, the rate
// the sender should keep to; lib/cc implements it (cc::FairShare). One per
// host (lcore), shared by its connections; single owner, no locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/types.hpp"

namespace metaroce::transport {

class Connection;

class ReceiveShare {
 public:
  // Detaches the connections still attached (they outlive it in some owners).
  virtual ~ReceiveShare();
  // `sender` identifies the connection (its local QPN) on this host.
  virtual void on_arrival(std::uint32_t sender, std::uint32_t bytes, Time now) = 0;
  // Mb/s the sender should keep to, carried in the ACK; 0 = no hint.
  [[nodiscard]] virtual std::uint32_t share_mbps(std::uint32_t sender, Time now) = 0;
  // Changes whenever a sender starts: every sender's share just shrank, so
  // connections ACK at once (with the new hint) when they see it change.
  [[nodiscard]] virtual std::uint64_t generation() const = 0;

  // The connections attached to this share (Connection::attach_receive_share).
  // A connection is polled only when it has work (the host's ready list),
  // so when the generation moves they are woken here, once per generation,
  // to send their new hint at once (connection.cpp).
  void wake_on_new_generation();
  [[nodiscard]] std::size_t listeners() const noexcept { return listeners_.size(); }

 private:
  friend class Connection;
  std::vector<Connection*> listeners_;  // each knows its index (Connection::share_index_)
  std::uint64_t announced_ = ~std::uint64_t{0};
};

}  // namespace metaroce::transport
