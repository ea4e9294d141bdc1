#include "cc/fair_share.hpp"

#include <algorithm>
#include <cmath>

namespace metaroce::cc {

std::uint64_t port_receive_capacity(std::uint64_t capacity_bps, std::uint32_t link_speed_mbps) noexcept {
  if (capacity_bps > 0) return capacity_bps;
  if (link_speed_mbps > 0) return static_cast<std::uint64_t>(link_speed_mbps) * 1'000'000 / 100 * 97;
  return FairShareParams{}.capacity_bps;
}

std::unique_ptr<FairShare> make_receive_share(std::uint64_t capacity_bps, std::uint32_t link_speed_mbps) {
  FairShareParams params;
  params.capacity_bps = port_receive_capacity(capacity_bps, link_speed_mbps);
  params.active_window = real_time_active_window;
  params.measure_period = real_time_measure_period;
  return std::make_unique<FairShare>(params);
}

FairShare::Sender& FairShare::find(std::uint32_t id) {
  for (Sender& s : senders_)
    if (s.id == id) return s;
  senders_.push_back(Sender{});
  senders_.back().id = id;
  return senders_.back();
}

void FairShare::roll_period(transport::Time now) {
  if (now < period_start_ + params_.measure_period) return;
  const double seconds = static_cast<double>(now - period_start_) / 1e9;
  for (Sender& s : senders_) {
    s.measured_bps = static_cast<double>(s.bytes_this_period) * 8 / seconds;
    s.bytes_this_period = 0;
    // What it was allowed while those bytes came: the hint of the period
    // (hints given from now on do not change how it is judged until the
    // next measurement, so judgements do not flip-flop within a period).
    s.hint_of_measured_period_bps = s.last_hint_bps;
  }
  period_start_ = now;
}

void FairShare::on_arrival(std::uint32_t sender, std::uint32_t bytes, transport::Time now) {
  roll_period(now);
  const std::size_t known = senders_.size();
  Sender& s = find(sender);
  if (senders_.size() != known || now - s.last_arrival > params_.active_window) {
    ++generation_;
    ++counters_.generations;
    s.last_arrival = now;
    // Only a start adds an active sender.
    counters_.max_active_senders = std::max<std::uint64_t>(counters_.max_active_senders, active_senders(now));
  }
  s.last_arrival = now;
  s.bytes_this_period += bytes;
  ++counters_.arrivals;
  counters_.arrival_bytes += bytes;
}

std::size_t FairShare::active_senders(transport::Time now) const {
  std::size_t n = 0;
  for (const Sender& s : senders_)
    if (active(s, now)) ++n;
  return n;
}

template <class F>
void FairShare::divide(transport::Time now, bool share_spare, F&& f) const {
  // Water-filling in one pass: light senders keep their use plus headroom,
  // the others split what remains, and never get less than an equal split
  // of the port (max-min fairness never gives less: light senders that
  // claim the whole port must not starve the rest down to the hint's floor).
  const double capacity = static_cast<double>(params_.capacity_bps);
  double light_total = 0;
  std::size_t heavy = 0;
  std::size_t active_count = 0;
  for (const Sender& s : senders_) {
    if (!active(s, now)) continue;
    ++active_count;
    if (light(s)) {
      light_total += s.measured_bps * params_.light_headroom;
    } else {
      ++heavy;
    }
  }
  const double equal = active_count == 0 ? capacity : capacity / static_cast<double>(active_count);
  const double each =
      heavy == 0 ? 0 : std::max(std::max(capacity - light_total, 0.0) / static_cast<double>(heavy), equal);
  // With nobody heavy, what the light senders leave is nobody's: a light
  // sender is limited elsewhere only for now (a ring waiting for its next
  // step, a sender recovering a loss), and when it has more to send a hint
  // of its past use would pace it at a rate of its idle time. They split
  // the rest, so one light sender alone is told the whole port. A front's
  // demand (PortShare) counts only their use.
  const std::size_t light_count = active_count - heavy;
  const double spare = share_spare && heavy == 0 && light_count != 0
                           ? std::max(capacity - light_total, 0.0) / static_cast<double>(light_count)
                           : 0;
  for (const Sender& s : senders_) {
    if (!active(s, now)) continue;
    const bool l = light(s);
    f(s.id, l ? s.measured_bps * params_.light_headroom + spare : each, l);
  }
}

std::vector<Allocation> FairShare::allocations(transport::Time now) const {
  std::vector<Allocation> out;
  divide(now, true, [&](std::uint32_t id, double bps, bool l) { out.push_back({id, bps, l}); });
  return out;
}

ShareDemand FairShare::demand(transport::Time now) const {
  ShareDemand d;
  divide(now, false, [&](std::uint32_t, double bps, bool l) {
    if (l) {
      d.light_bps += bps;
    } else {
      ++d.heavy;
    }
  });
  return d;
}

std::uint32_t FairShare::share_mbps(std::uint32_t sender, transport::Time now) {
  roll_period(now);
  ++counters_.hints;
  double share = -1;
  divide(now, true, [&](std::uint32_t id, double bps, bool) {
    if (id == sender) share = bps;
  });
  if (share < 0) {  // not active (no packet of it within the window): the heavy senders' split
    const ShareDemand d = demand(now);
    const double capacity = static_cast<double>(params_.capacity_bps);
    const std::size_t active = active_senders(now);
    share = active == 0    ? capacity
            : d.heavy == 0 ? capacity / static_cast<double>(active)
                           : std::max(std::max(capacity - d.light_bps, 0.0) / static_cast<double>(d.heavy),
                                      capacity / static_cast<double>(active));
  }
  const double mbps = std::max(share / 1e6, 1.0);
  find(sender).last_hint_bps = mbps * 1e6;
  return static_cast<std::uint32_t>(std::llround(mbps));
}

std::vector<std::uint64_t> PortShare::rebalance(const std::vector<ShareDemand>& demands) const {
  std::vector<std::uint64_t> out(demands.size(), 0);
  if (demands.empty()) return out;
  const double capacity = static_cast<double>(capacity_bps_);
  double light = 0;
  std::size_t heavy = 0;
  std::size_t idle = 0;
  for (const ShareDemand& d : demands) {
    light += d.light_bps;
    heavy += d.heavy;
    if (d.heavy == 0 && d.light_bps == 0) ++idle;
  }
  const double rest = std::max(capacity - light, 0.0);
  std::uint64_t given = 0;
  std::size_t last = 0;
  for (std::size_t i = 0; i < demands.size(); ++i) {
    const ShareDemand& d = demands[i];
    double part = 0;
    if (heavy > 0) {
      part = std::min(d.light_bps, capacity) + rest * static_cast<double>(d.heavy) / static_cast<double>(heavy);
    } else {
      // Only light senders or none: each front keeps its light use, the
      // idle ones split the rest (a newcomer there gets it at once).
      part = d.heavy == 0 && d.light_bps == 0 ? rest / static_cast<double>(idle) : d.light_bps;
      if (idle == 0 && i + 1 == demands.size()) part += rest;
    }
    out[i] = static_cast<std::uint64_t>(part);
    given += out[i];
    last = i;
  }
  // Rounding (and light use beyond the capacity) must not change the sum.
  if (given <= capacity_bps_) {
    out[last] += capacity_bps_ - given;
  } else {
    std::uint64_t over = given - capacity_bps_;
    for (std::uint64_t& v : out) {
      const std::uint64_t take = std::min(v, over);
      v -= take;
      over -= take;
    }
  }
  return out;
}

}  // namespace metaroce::cc
