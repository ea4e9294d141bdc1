// The public Simulation (include/metaroce/simulation.hpp): two of
// lib/host's hosts in lib/sim's network, in virtual time.
#include <cmath>

#include <fmt/format.h>

#include "fabric/config.hpp"
#include "host/sim_endpoint.hpp"
#include "metaroce/simulation.hpp"
#include "sim/network.hpp"
#include "stack/api_internal.hpp"
#include "stack/endpoint.hpp"

namespace metaroce {

namespace {

fabric::FabricConfig fabric_of(const SimulatedLink& link) {
  fabric::FabricConfig f;
  f.paths = std::max<std::uint32_t>(1, link.fabric_paths);
  f.delay_ns = link.one_way_delay_ns;
  f.loss = link.loss;
  f.seed = link.seed;
  return f;
}

std::uint64_t bits_per_second(double gbps) { return static_cast<std::uint64_t>(std::llround(gbps * 1e9)); }

constexpr wire::MacAddress mac_a = {2, 0, 0, 0, 0, 0xa};
constexpr wire::MacAddress mac_b = {2, 0, 0, 0, 0, 0xb};
constexpr std::uint32_t ip_a = 0x0a00000a;  // 10.0.0.10
constexpr std::uint32_t ip_b = 0x0a00000b;  // 10.0.0.11

}  // namespace

struct Simulation::Impl final : ConnectionOwner {
  host::SimEndpoint a, b;
  sim::Network network;
  std::vector<std::unique_ptr<Connection>> connections;
  std::vector<transport::Completion> scratch;
  std::uint32_t next_qpn = 0x100;

  Impl(const SimulatedLink& a_to_b, const SimulatedLink& b_to_a) {
    const auto ia = network.add(a, sim::HostConfig{{mac_a, ip_a, {}}, bits_per_second(a_to_b.gbps), 24});
    const auto ib = network.add(b, sim::HostConfig{{mac_b, ip_b, {}}, bits_per_second(b_to_a.gbps), 24});
    network.connect(ia, ib, fabric_of(a_to_b), fabric_of(b_to_a));
  }

  host::SimEndpoint& side(Side s) { return s == Side::a ? a : b; }

  bool step(std::uint64_t limit) {
    const bool more = network.step(limit);
    deliver_completions(a.host(), scratch);
    deliver_completions(b.host(), scratch);
    return more;
  }

  bool turn_until(const std::function<bool()>& done, double seconds) override {
    const std::uint64_t limit = network.now() + static_cast<std::uint64_t>(std::llround(seconds * 1e9));
    while (!done()) {
      if (network.now() >= limit) return false;
      if (!step(limit) && !done()) return false;  // nothing left to happen
    }
    return true;
  }
};

Simulation::Simulation(const SimulatedLink& a_to_b, const SimulatedLink& b_to_a)
    : impl_(std::make_unique<Impl>(a_to_b, b_to_a)) {}
Simulation::~Simulation() {
  if (impl_) impl_->connections.clear();
}

MemoryRegion Simulation::register_memory(Side side, void* addr, std::size_t length, std::uint32_t access,
                                         std::string& error) {
  return register_region(impl_->side(side).memory(), addr, length, access, error);
}

std::pair<Connection*, Connection*> Simulation::connect(const SimulatedConnectOptions& o, std::string& error) {
  transport::ConnectionConfig ca;
  if (!mode_of(o.mode, ca.mode, error)) return {nullptr, nullptr};
  ca.paths = ca.mode == transport::Mode::rocev2 ? 1 : o.paths;
  ca.streams = o.streams;
  ca.mtu = o.mtu;
  ca.endpoints.local_mac = mac_a;
  ca.endpoints.peer_mac = mac_b;
  ca.endpoints.local_ipv4 = ip_a;
  ca.endpoints.peer_ipv4 = ip_b;
  ca.local_qpn = impl_->next_qpn++;
  ca.peer_qpn = impl_->next_qpn++;
  ca.initial_psn = 1000;
  ca.peer_initial_psn = 2000;
  transport::ConnectionConfig cb = ca;
  std::swap(cb.endpoints.local_mac, cb.endpoints.peer_mac);
  std::swap(cb.endpoints.local_ipv4, cb.endpoints.peer_ipv4);
  std::swap(cb.local_qpn, cb.peer_qpn);
  std::swap(cb.initial_psn, cb.peer_initial_psn);
  cb.base_src_port = static_cast<std::uint16_t>(ca.base_src_port + 1000);
  const std::string cc = o.congestion == "none" ? "" : o.congestion;
  auto cc_a = stack::make_congestion_control(cc, ca, error);
  if (!error.empty()) return {nullptr, nullptr};
  auto cc_b = stack::make_congestion_control(cc, cb, error);
  if (!error.empty()) return {nullptr, nullptr};
  transport::Connection* ta = impl_->a.host().add_connection(ca, std::move(cc_a), error);
  if (ta == nullptr) return {nullptr, nullptr};
  transport::Connection* tb = impl_->b.host().add_connection(cb, std::move(cc_b), error);
  if (tb == nullptr) {
    impl_->a.host().remove_connection(ca.local_qpn);
    return {nullptr, nullptr};
  }
  ta->connect();
  tb->connect();
  impl_->connections.push_back(Connection::Impl::wrap(*impl_, *ta, {}));
  Connection* pa = impl_->connections.back().get();
  impl_->connections.push_back(Connection::Impl::wrap(*impl_, *tb, {}));
  return {pa, impl_->connections.back().get()};
}

bool Simulation::step() { return impl_->step(impl_->network.now() + 1'000'000'000); }

bool Simulation::run_until(const std::function<bool()>& done, double virtual_seconds) {
  return impl_->turn_until(done, virtual_seconds);
}

std::uint64_t Simulation::now_ns() const noexcept { return impl_->network.now(); }

std::vector<CounterGroup> Simulation::counters(Side s) const {
  host::SimEndpoint& h = impl_->side(s);
  std::vector<CounterGroup> out(2);
  out[0] = host_group(h.counters());
  transport::ConnectionCounters sum;
  // connections holds each pair's end on a, then its end on b.
  for (std::size_t i = s == Side::a ? 0 : 1; i < impl_->connections.size(); i += 2)
    stack::add_counters(sum, impl_->connections[i]->impl().connection->counters());
  out[1] = {"connection", counter_list(sum)};
  return out;
}

}  // namespace metaroce
