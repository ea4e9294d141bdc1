// The public SansIoHost (include/metaroce/sans_io.hpp): lib/host's host,
// its frames carried by the caller.
#include <fmt/format.h>

#include "host/sim_endpoint.hpp"
#include "metaroce/sans_io.hpp"
#include "stack/api_internal.hpp"
#include "stack/endpoint.hpp"
#include "wire/ip_address.hpp"

namespace metaroce {

struct SansIoHost::Impl final : ConnectionOwner {
  host::SimEndpoint host;
  std::vector<std::unique_ptr<Connection>> connections;
  std::vector<transport::Completion> scratch;

  // Nothing moves time here but the caller: a wait only looks.
  bool turn_until(const std::function<bool()>& done, double) override { return done(); }
};

SansIoHost::SansIoHost() : impl_(std::make_unique<Impl>()) {}
SansIoHost::~SansIoHost() {
  if (impl_) impl_->connections.clear();
}

MemoryRegion SansIoHost::register_memory(void* addr, std::size_t length, std::uint32_t access, std::string& error) {
  return register_region(impl_->host.memory(), addr, length, access, error);
}

bool SansIoHost::deregister_memory(const MemoryRegion& region) { return impl_->host.memory().deregister(region.key); }

Connection* SansIoHost::add_connection(const SansIoConnectionConfig& o, std::string& error) {
  transport::ConnectionConfig c;
  if (!mode_of(o.mode, c.mode, error)) return nullptr;
  c.paths = c.mode == transport::Mode::rocev2 ? 1 : o.paths;
  c.streams = o.streams;
  c.mtu = o.mtu;
  if (!stack::parse_mac(o.local_mac, c.endpoints.local_mac) || !stack::parse_mac(o.peer_mac, c.endpoints.peer_mac)) {
    error = fmt::format("MACs '{}' and '{}': give each as xx:xx:xx:xx:xx:xx", o.local_mac, o.peer_mac);
    return nullptr;
  }
  wire::IpAddress local, peer;
  if (!wire::parse_ip(o.local_ip, local) || !wire::parse_ip(o.peer_ip, peer) || local.version != peer.version) {
    error = fmt::format("addresses '{}' and '{}': give two IPv4 or two IPv6 addresses", o.local_ip, o.peer_ip);
    return nullptr;
  }
  c.endpoints.ip_version = local.version;
  c.endpoints.local_ipv4 = local.ipv4;
  c.endpoints.peer_ipv4 = peer.ipv4;
  c.endpoints.local_ipv6 = local.ipv6;
  c.endpoints.peer_ipv6 = peer.ipv6;
  c.local_qpn = o.local_qpn;
  c.peer_qpn = o.peer_qpn;
  c.initial_psn = o.initial_psn;
  c.peer_initial_psn = o.peer_initial_psn;
  if (o.first_src_port != 0) c.base_src_port = o.first_src_port;
  auto congestion = stack::make_congestion_control(o.congestion == "none" ? "" : o.congestion, c, error);
  if (!error.empty()) return nullptr;
  transport::Connection* t = impl_->host.host().add_connection(c, std::move(congestion), error);
  if (t == nullptr) return nullptr;
  t->connect();
  impl_->connections.push_back(Connection::Impl::wrap(*impl_, *t, {}));
  return impl_->connections.back().get();
}

void SansIoHost::remove_connection(Connection* connection) {
  auto& all = impl_->connections;
  for (auto it = all.begin(); it != all.end(); ++it) {
    if (it->get() != connection) continue;
    const std::uint32_t qpn = connection->qpn();
    connection->impl().connection->close();
    deliver_completions(impl_->host.host(), impl_->scratch);  // the flushed ones
    all.erase(it);
    impl_->host.host().remove_connection(qpn);
    return;
  }
}

void SansIoHost::receive(std::uint64_t now_ns, std::span<const std::uint8_t> frame) {
  impl_->host.on_frame(now_ns, frame);
  deliver_completions(impl_->host.host(), impl_->scratch);
}

std::size_t SansIoHost::transmit(std::uint64_t now_ns, std::vector<std::vector<std::uint8_t>>& out) {
  const std::size_t before = out.size();
  impl_->host.poll(now_ns, out);
  deliver_completions(impl_->host.host(), impl_->scratch);
  return out.size() - before;
}

std::uint64_t SansIoHost::next_deadline() const { return impl_->host.next_wakeup(); }

std::vector<CounterGroup> SansIoHost::counters() const {
  std::vector<CounterGroup> out(2);
  out[0] = host_group(impl_->host.counters());
  transport::ConnectionCounters sum;
  for (const auto& c : impl_->connections) stack::add_counters(sum, c->impl().connection->counters());
  out[1] = {"connection", counter_list(sum)};
  return out;
}

}  // namespace metaroce
