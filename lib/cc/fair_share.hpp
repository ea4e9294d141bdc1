// The receiver-driven half of `metaroce` congestion control: a host's
// inbound capacity divided among the senders that are sending to it.
//
// A sender is active while its packets keep arriving (within active_window
// of the last one). Its share is max-min fair: senders that used well under
// the share they were last given in the last measurement period (light
// ones: limited by something else) keep what they use plus headroom, and the
// rest of the capacity is split equally among the others. With N senders starting at once into one port
// the first ACK each gets already says capacity / N: incast settles in one
// round trip instead of waiting for queues to build and marks to come back.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/receive_share.hpp"

namespace metaroce::cc {

struct FairShareParams {
  std::uint64_t capacity_bps = 100'000'000'000;  // what the host may receive (its port, less headroom)
  transport::Time active_window = 50'000;        // ns without a packet before a sender counts as gone
  transport::Time measure_period = 20'000;       // ns over which arrival rates are measured
  double light_fraction = 0.5;                   // using less than this share of its hint makes a sender light
  double light_headroom = 1.25;                  // a light sender may grow by this factor before re-measure
};

class FairShare final : public transport::ReceiveShare {
 public:
  explicit FairShare(const FairShareParams& params) : params_(params) {}

  void on_arrival(std::uint32_t sender, std::uint32_t bytes, transport::Time now) override;
  [[nodiscard]] std::uint32_t share_mbps(std::uint32_t sender, transport::Time now) override;

  [[nodiscard]] std::uint64_t generation() const override { return generation_; }

  [[nodiscard]] std::size_t active_senders(transport::Time now) const;

 private:
  struct Sender {
    std::uint32_t id = 0;
    transport::Time last_arrival = 0;
    std::uint64_t bytes_this_period = 0;
    double measured_bps = 0;  // over the last complete period
    double last_hint_bps = 0;  // the share it was last told
    double hint_of_measured_period_bps = 0;
  };
  Sender& find(std::uint32_t id);
  void roll_period(transport::Time now);

  FairShareParams params_;
  std::vector<Sender> senders_;  // few per host: a linear scan beats a map
  transport::Time period_start_ = 0;
  std::uint64_t generation_ = 0;
};

}  // namespace metaroce::cc
