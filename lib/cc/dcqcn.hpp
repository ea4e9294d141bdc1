// `dcqcn`: the reaction point of DCQCN (Zhu et al., "Congestion Control for
// Large-Scale RDMA Deployments", SIGCOMM 2015), for rocev2 connections; the
// notification point is in RoceConnection (one CNP per cnp_interval while
// CE-marked packets arrive).
//
// Rate-based. On a CNP (at most one reaction per rate_reduce_period): the
// target rate takes the current rate, the current rate is cut by
// alpha / 2 (but never below min_decrease of itself), alpha grows by g.
// Every alpha_period without a CNP alpha decays by (1 - g). Rate increase
// events come from a timer (every increase_period) and a byte counter
// (every increase_bytes sent); with T timer and B byte events since the last
// cut: fast recovery while max(T, B) < threshold (current rate halfway to the
// target), additive increase when one of them has passed it (target +
// ai_rate), hyper increase when both have (target + hai_rate x (min(T, B) -
// threshold)). The current rate moves halfway to the target each time.
// Timers are kept lazily: every call catches up with the periods elapsed.
#pragma once

#include <cstdint>

#include "transport/congestion.hpp"

namespace metaroce::cc {

// Defaults as NVIDIA documents them for ConnectX-4 and later (DCQCN
// parameters: dce_tcp_g 1019/1024, dce_tcp_rtt 1 us, initial_alpha_value
// 1023/1024, rpg_min_dec_fac 50%, rpg_min_rate 1 Mb/s,
// rate_reduce_monitor_period 4 us; rpg_time_reset 300 us, rpg_byte_reset
// 32767 bytes, rpg_threshold 1, rpg_ai_rate 5 Mb/s, rpg_hai_rate 50 Mb/s).
// The paper's own values differ (timer 55 us, byte counter 10 MB,
// threshold 5, 40 Mb/s AI); every one is overridable.
struct DcqcnParams {
  std::uint64_t line_rate_bps = 100'000'000'000;
  double g = 5.0 / 1024;                 // 1 - dce_tcp_g / 1024
  transport::Time alpha_period = 1'000;  // ns
  double initial_alpha = 1023.0 / 1024;
  transport::Time rate_reduce_period = 4'000;
  double min_decrease = 0.5;             // a cut keeps at least this share of the rate
  std::uint64_t min_rate_bps = 1'000'000;
  transport::Time increase_period = 300'000;
  std::uint64_t increase_bytes = 32'767;
  std::uint32_t threshold = 1;
  std::uint64_t ai_rate_bps = 5'000'000;
  std::uint64_t hai_rate_bps = 50'000'000;
  std::uint32_t window = 1024;           // packets in flight: a safety cap, DCQCN itself is rate-based
};

class Dcqcn final : public transport::CongestionControl {
 public:
  explicit Dcqcn(const DcqcnParams& params);

  void on_send(std::uint16_t path, std::uint32_t bytes, transport::Time now) override;
  void on_ack(std::uint16_t, std::uint32_t, std::uint32_t, transport::Time, transport::Time) override {}
  void on_loss(std::uint16_t, transport::Time) override {}
  void on_rate_hint(std::uint32_t, transport::Time) override {}
  void on_congestion_notification(transport::Time now) override;
  [[nodiscard]] std::uint32_t path_window(std::uint16_t) const override { return params_.window; }
  [[nodiscard]] std::uint32_t connection_window() const override { return params_.window; }
  [[nodiscard]] std::uint64_t pacing_rate_bps(transport::Time now) override;
  [[nodiscard]] std::string_view name() const override { return "dcqcn"; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept override { return sizeof(*this); }

  [[nodiscard]] double current_rate_bps() const noexcept { return current_; }
  [[nodiscard]] double target_rate_bps() const noexcept { return target_; }
  [[nodiscard]] double alpha() const noexcept { return alpha_; }
  [[nodiscard]] std::uint64_t cuts() const noexcept { return cuts_; }

 private:
  void catch_up(transport::Time now);
  void increase();

  DcqcnParams params_;
  double current_;
  double target_;
  double alpha_;
  bool notified_ = false;  // any CNP yet: before the first, the flow runs at line rate
  transport::Time last_cut_ = 0;
  transport::Time next_alpha_update_ = 0;
  transport::Time next_increase_ = 0;
  bool cnp_in_alpha_period_ = false;
  std::uint64_t bytes_since_event_ = 0;
  std::uint32_t timer_events_ = 0;
  std::uint32_t byte_events_ = 0;
  std::uint64_t cuts_ = 0;
};

}  // namespace metaroce::cc
