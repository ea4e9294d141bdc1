// `metaroce` congestion control: ECN-driven AIMD per path and per
// connection, capped by the receiver's fair-share rate hint.
//
// Per path, a window in packets. Each ACK without CE marks grows the path's
// window by additive_increase / window packets (one packet per RTT); every
// RTT the fraction of packets that came back marked updates an estimate
// alpha (gain g, as DCTCP) and, if any were marked, the window shrinks by
// alpha / 2. A mark trims only the path that saw it, so the others keep
// their share and new packets, sprayed over paths with room, move to the
// clear ones. Loss without marks changes nothing: random loss is not
// congestion. The connection window is the sum of the path windows, capped.
// It starts at about one bandwidth-delay product split over the paths.
// The receiver's hint (Mb/s, in every ACK) is the pacing rate: with many
// senders into one port, each is told its share within one RTT instead of
// waiting for marks to build up.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/congestion.hpp"

namespace metaroce::cc {

struct MetaroceCcParams {
  std::uint16_t paths = 1;
  // Packets the connection starts with, split over its paths: about one
  // bandwidth-delay product (100 Gb/s x 10 us is 30 packets of 4 KiB), so
  // the first round cannot flood a bottleneck before any mark comes back.
  double initial_window = 32;
  double min_path_window = 1;
  double max_path_window = 256;     // the SACK bitmap's reach
  std::uint32_t max_connection_window = 16384;
  double additive_increase = 1;     // packets per path per RTT
  double g = 1.0 / 16;              // alpha gain (DCTCP's)
  transport::Time min_round = 2'000;  // ns: RTT floor for the per-round update
};

class MetaroceCc final : public transport::CongestionControl {
 public:
  explicit MetaroceCc(const MetaroceCcParams& params);

  void on_send(std::uint16_t path, std::uint32_t bytes, transport::Time now) override;
  void on_ack(std::uint16_t path, std::uint32_t packets_acked, std::uint32_t ce_marks, transport::Time rtt_sample,
              transport::Time now) override;
  void on_loss(std::uint16_t path, transport::Time now) override;
  void on_rate_hint(std::uint32_t mbps, transport::Time now) override;
  [[nodiscard]] std::uint32_t path_window(std::uint16_t path) const override;
  [[nodiscard]] std::uint32_t connection_window() const override;
  [[nodiscard]] std::uint64_t pacing_rate_bps(transport::Time now) override;
  [[nodiscard]] std::string_view name() const override { return "metaroce"; }
  [[nodiscard]] bool follows_rate_hint() const noexcept override { return true; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept override {
    return sizeof(*this) + paths_.capacity() * sizeof(Path);
  }

  [[nodiscard]] double window(std::uint16_t path) const { return paths_[path].window; }
  [[nodiscard]] double alpha(std::uint16_t path) const { return paths_[path].alpha; }

 private:
  struct Path {
    double window = 0;
    double alpha = 0;
    std::uint32_t acked_in_round = 0;
    std::uint32_t marked_in_round = 0;
    transport::Time round_end = 0;
    transport::Time rtt = 0;
  };
  MetaroceCcParams params_;
  std::vector<Path> paths_;
  std::uint64_t hint_bps_ = 0;
};

}  // namespace metaroce::cc
