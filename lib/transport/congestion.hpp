// What the transport asks of congestion control: how many packets each path
// and the connection may have in flight, fed by send, ACK and loss events.
// lib/cc brings the real algorithms (metaroce ECN-AIMD, DCQCN); FixedWindow
// is the no-control baseline used by tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "transport/types.hpp"

namespace metaroce::transport {

class CongestionControl {
 public:
  virtual ~CongestionControl() = default;
  virtual void on_send(std::uint16_t path, std::uint32_t bytes, Time now) = 0;
  // `ce_marks`: new ECN-CE marks the receiver reported for the path.
  virtual void on_ack(std::uint16_t path, std::uint32_t packets_acked, std::uint32_t ce_marks,
                      Time rtt_sample, Time now) = 0;
  virtual void on_loss(std::uint16_t path, Time now) = 0;
  virtual void on_rate_hint(std::uint32_t mbps, Time now) = 0;
  // A congestion notification packet (RoCEv2 CNP) arrived for this connection.
  virtual void on_congestion_notification(Time) {}
  // Packets the path may have in flight (the transport also caps it at 256).
  [[nodiscard]] virtual std::uint32_t path_window(std::uint16_t path) const = 0;
  // Packets the connection may have in flight over all paths.
  [[nodiscard]] virtual std::uint32_t connection_window() const = 0;
  // Bits per second the connection may send at, as of `now` (algorithms
  // with timers, such as DCQCN's, bring themselves up to date here); 0
  // means unpaced. The transport spaces its transmissions by it on the
  // timing wheel.
  [[nodiscard]] virtual std::uint64_t pacing_rate_bps(Time) { return 0; }
  [[nodiscard]] virtual std::string_view name() const = 0;
  // True when it paces by the receiver's rate hint (on_rate_hint): the
  // receiving end's connection then reports to its host's receive share.
  [[nodiscard]] virtual bool follows_rate_hint() const noexcept { return false; }
  // Bytes the algorithm's state takes (the object and what it allocated).
  [[nodiscard]] virtual std::size_t memory_bytes() const noexcept = 0;
};

class FixedWindow final : public CongestionControl {
 public:
  FixedWindow(std::uint32_t per_path, std::uint32_t per_connection)
      : per_path_(per_path), per_connection_(per_connection) {}
  void on_send(std::uint16_t, std::uint32_t, Time) override {}
  void on_ack(std::uint16_t, std::uint32_t, std::uint32_t, Time, Time) override {}
  void on_loss(std::uint16_t, Time) override {}
  void on_rate_hint(std::uint32_t, Time) override {}
  [[nodiscard]] std::uint32_t path_window(std::uint16_t) const override { return per_path_; }
  [[nodiscard]] std::uint32_t connection_window() const override { return per_connection_; }
  [[nodiscard]] std::string_view name() const override { return "fixed"; }
  [[nodiscard]] std::size_t memory_bytes() const noexcept override { return sizeof(*this); }

 private:
  std::uint32_t per_path_;
  std::uint32_t per_connection_;
};

}  // namespace metaroce::transport
