#include "sim/fabric_network.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <stdexcept>
#include <utility>

#include "fabric/frame_peek.hpp"
#include "wire/byte_order.hpp"

namespace metaroce::sim {

namespace {
constexpr std::uint64_t never = ~std::uint64_t{0};

std::uint64_t mix(std::uint64_t x) noexcept {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Priority of a frame: the IP precedence (DSCP / 8); 0 when not IP.
std::uint8_t priority_of(std::span<const std::uint8_t> frame, const fabric::FramePeek& peek) noexcept {
  const std::uint8_t* ip = frame.data() + peek.l3_offset;
  if (peek.ip_version == 4) return static_cast<std::uint8_t>(ip[1] >> 5);
  if (peek.ip_version == 6) return static_cast<std::uint8_t>((ip[0] & 0x0f) >> 1);
  return 0;
}

std::uint64_t serialisation_ps(std::uint64_t bytes, std::uint64_t rate_bps) noexcept {
  return bytes * 8'000'000'000'000ull / rate_bps;  // frames below 2 MB: no overflow
}
}  // namespace

void Fabric::check_node(FabricNodeId node, const char* what) const {
  if (node >= nodes_.size())
    throw std::invalid_argument(std::string("sim::Fabric::") + what + ": node " + std::to_string(node) +
                                " does not exist (" + std::to_string(nodes_.size()) + " nodes)");
}

FabricNodeId Fabric::add_host(Endpoint& endpoint, std::uint32_t ipv4) {
  if (ipv4 == 0) throw std::invalid_argument("sim::Fabric::add_host: the IPv4 address must be nonzero");
  const auto at = std::lower_bound(host_by_ipv4_.begin(), host_by_ipv4_.end(), std::make_pair(ipv4, 0u));
  if (at != host_by_ipv4_.end() && at->first == ipv4)
    throw std::invalid_argument("sim::Fabric::add_host: IPv4 address " + std::to_string(ipv4) + " is taken");
  Node node;
  node.endpoint = &endpoint;
  node.ipv4 = ipv4;
  nodes_.push_back(std::move(node));
  const auto id = static_cast<FabricNodeId>(nodes_.size() - 1);
  host_by_ipv4_.insert(at, {ipv4, id});
  endpoint.use_spare_buffers(spare_frames_);
  return id;
}

FabricNodeId Fabric::add_switch(const FabricSwitchConfig& config) {
  Node node;
  node.config = config;
  node.switch_index = static_cast<std::uint32_t>(switches_.size());
  const auto id = static_cast<FabricNodeId>(nodes_.size());
  node.salt = mix(0x5eed0000ull + id);
  nodes_.push_back(std::move(node));
  switches_.push_back(id);
  routes_stale_ = true;
  return id;
}

FabricLinkId Fabric::connect(FabricNodeId a, FabricNodeId b, const FabricLinkConfig& a_to_b,
                             const FabricLinkConfig& b_to_a, std::uint64_t seed) {
  check_node(a, "connect");
  check_node(b, "connect");
  if (a == b) throw std::invalid_argument("sim::Fabric::connect: a node cannot be joined to itself");
  if (is_host(a) && is_host(b)) throw std::invalid_argument("sim::Fabric::connect: two hosts need a switch between them");
  for (FabricNodeId n : {a, b}) {
    if (is_host(n) && !nodes_[n].ports.empty())
      throw std::invalid_argument("sim::Fabric::connect: host " + std::to_string(n) + " already has its link");
  }
  if (a_to_b.rate_bps == 0 || b_to_a.rate_bps == 0)
    throw std::invalid_argument("sim::Fabric::connect: a link's rate must be above 0");
  const auto link = static_cast<FabricLinkId>(links_.size());
  links_.push_back(link);
  Port pa;
  pa.node = a;
  pa.config = a_to_b;
  pa.random = fabric::Random(seed, 2ull * link);
  Port pb;
  pb.node = b;
  pb.config = b_to_a;
  pb.random = fabric::Random(seed, 2ull * link + 1);
  ports_.push_back(std::move(pa));
  ports_.push_back(std::move(pb));
  nodes_[a].ports.push_back(2 * link);
  nodes_[b].ports.push_back(2 * link + 1);
  if (is_host(a)) nodes_[a].tor = b;
  if (is_host(b)) nodes_[b].tor = a;
  routes_stale_ = true;
  return link;
}

std::uint32_t Fabric::egress_of(FabricLinkId link, FabricNodeId from) const {
  if (link >= links_.size()) throw std::invalid_argument("sim::Fabric: link " + std::to_string(link) + " does not exist");
  if (ports_[2 * link].node == from) return 2 * link;
  if (ports_[2 * link + 1].node == from) return 2 * link + 1;
  throw std::invalid_argument("sim::Fabric: node " + std::to_string(from) + " is not an end of link " +
                              std::to_string(link));
}

const FabricPortCounters& Fabric::port_counters(FabricLinkId link, FabricNodeId from) const {
  return ports_[egress_of(link, from)].counters;
}

void Fabric::set_loss(FabricLinkId link, FabricNodeId from, double loss) {
  if (!(loss >= 0.0 && loss <= 1.0)) throw std::invalid_argument("sim::Fabric::set_loss: the loss must be in [0, 1]");
  ports_[egress_of(link, from)].config.loss = loss;
}

std::uint64_t Fabric::queued_bytes(FabricLinkId link, FabricNodeId from) const {
  return ports_[egress_of(link, from)].queued_bytes;
}

FabricPortCounters Fabric::total_port_counters() const {
  FabricPortCounters t;
  for (const Port& p : ports_) {
    const FabricPortCounters& c = p.counters;
    t.tx_frames += c.tx_frames;
    t.tx_bytes += c.tx_bytes;
    t.dropped_queue_full += c.dropped_queue_full;
    t.dropped_loss += c.dropped_loss;
    t.dropped_link_down += c.dropped_link_down;
    t.ecn_marked += c.ecn_marked;
    t.peak_queued_bytes = std::max(t.peak_queued_bytes, c.peak_queued_bytes);
    t.peak_ingress_bytes = std::max(t.peak_ingress_bytes, c.peak_ingress_bytes);
    t.pauses_sent += c.pauses_sent;
    t.resumes_sent += c.resumes_sent;
    t.pauses_received += c.pauses_received;
    t.resumes_received += c.resumes_received;
    t.paused_ns += c.paused_ns;
    for (std::size_t q = 0; q < pfc_priorities; ++q) {
      if ((p.paused >> q) & 1u) t.paused_ns += now_ - p.paused_since[q];  // still paused: up to now
    }
  }
  return t;
}

// --- Failures ---

void Fabric::fail_link(FabricLinkId link, std::uint64_t at_ns, std::uint64_t reroute_after_ns) {
  if (link >= links_.size()) throw std::invalid_argument("sim::Fabric: link " + std::to_string(link) + " does not exist");
  schedule(std::max(at_ns, now_), EventKind::link_state, link, 0);
  schedule(std::max(at_ns, now_) + reroute_after_ns, EventKind::reroute, 0, 0);
}

void Fabric::repair_link(FabricLinkId link, std::uint64_t at_ns, std::uint64_t reroute_after_ns) {
  if (link >= links_.size()) throw std::invalid_argument("sim::Fabric: link " + std::to_string(link) + " does not exist");
  schedule(std::max(at_ns, now_), EventKind::link_state, link, 1);
  schedule(std::max(at_ns, now_) + reroute_after_ns, EventKind::reroute, 0, 0);
}

void Fabric::group_ports(std::span<const FabricNodeId> ports) {
  for (std::size_t i = 0; i < ports.size(); ++i) {
    check_node(ports[i], "group_ports");
    if (!is_host(ports[i]))
      throw std::invalid_argument("sim::Fabric::group_ports: node " + std::to_string(ports[i]) + " is a switch");
    if (nodes_[ports[i]].sibling != none)
      throw std::invalid_argument("sim::Fabric::group_ports: node " + std::to_string(ports[i]) +
                                  " is already a port of a multi-port host");
    for (std::size_t j = 0; j < i; ++j) {
      if (ports[j] == ports[i])
        throw std::invalid_argument("sim::Fabric::group_ports: node " + std::to_string(ports[i]) + " is given twice");
    }
  }
  if (ports.size() < 2) return;
  for (std::size_t i = 0; i < ports.size(); ++i) nodes_[ports[i]].sibling = ports[(i + 1) % ports.size()];
}

void Fabric::fail_switch(FabricNodeId sw, std::uint64_t at_ns, std::uint64_t reroute_after_ns) {
  check_node(sw, "fail_switch");
  if (is_host(sw)) throw std::invalid_argument("sim::Fabric::fail_switch: node " + std::to_string(sw) + " is a host");
  for (std::uint32_t port : nodes_[sw].ports) fail_link(port / 2, at_ns, reroute_after_ns);
}

void Fabric::repair_switch(FabricNodeId sw, std::uint64_t at_ns, std::uint64_t reroute_after_ns) {
  check_node(sw, "repair_switch");
  if (is_host(sw)) throw std::invalid_argument("sim::Fabric::repair_switch: node " + std::to_string(sw) + " is a host");
  for (std::uint32_t port : nodes_[sw].ports) repair_link(port / 2, at_ns, reroute_after_ns);
}

void Fabric::drop_queued(std::uint32_t port) {
  Port& p = ports_[port];
  for (std::deque<Queued>& q : p.queue) {
    for (const auto [packet, size] : q) {
      (void)size;
      ++p.counters.dropped_link_down;
      release_ingress(packet);
      free_packet(packet);
    }
    q.clear();
  }
  // A frame being serialised finishes (tx_done drops it); the rest is gone.
  p.queued_bytes = 0;
  p.queued_frames = 0;
}

void Fabric::set_link(FabricLinkId link, bool up) {
  for (std::uint32_t port : {2 * link, 2 * link + 1}) {
    Port& p = ports_[port];
    if (p.up == up) continue;
    p.up = up;
    if (!up) {
      drop_queued(port);
      // A paused egress of a dead link stops counting paused time.
      for (std::size_t q = 0; q < pfc_priorities; ++q) {
        if ((p.paused >> q) & 1u) p.counters.paused_ns += now_ - p.paused_since[q];
      }
      p.paused = 0;
    } else {
      start_tx(port);
    }
  }
}

// --- Routing ---

void Fabric::rebuild_routes() {
  routes_stale_ = false;
  const std::size_t s_count = switches_.size();
  group_first_.assign(s_count * s_count + 1, 0);
  group_ports_.clear();
  std::vector<std::uint32_t> distance(s_count);
  std::vector<std::uint32_t> frontier;
  // For each destination switch: breadth-first over live switch-to-switch links.
  std::vector<std::vector<std::uint32_t>> groups(s_count * s_count);
  for (std::uint32_t d = 0; d < s_count; ++d) {
    std::fill(distance.begin(), distance.end(), none);
    distance[d] = 0;
    frontier.assign(1, d);
    for (std::size_t head = 0; head < frontier.size(); ++head) {
      const std::uint32_t s = frontier[head];
      for (std::uint32_t port : nodes_[switches_[s]].ports) {
        if (!ports_[port].up) continue;
        const Node& peer = nodes_[ports_[port ^ 1u].node];
        if (peer.endpoint != nullptr || distance[peer.switch_index] != none) continue;
        distance[peer.switch_index] = distance[s] + 1;
        frontier.push_back(peer.switch_index);
      }
    }
    for (std::uint32_t s = 0; s < s_count; ++s) {
      if (distance[s] == none || distance[s] == 0) continue;
      for (std::uint32_t port : nodes_[switches_[s]].ports) {
        if (!ports_[port].up) continue;
        const Node& peer = nodes_[ports_[port ^ 1u].node];
        if (peer.endpoint == nullptr && distance[peer.switch_index] + 1 == distance[s])
          groups[s * s_count + d].push_back(port);
      }
    }
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    group_first_[i] = static_cast<std::uint32_t>(group_ports_.size());
    group_ports_.insert(group_ports_.end(), groups[i].begin(), groups[i].end());
  }
  group_first_[groups.size()] = static_cast<std::uint32_t>(group_ports_.size());
}

std::uint32_t Fabric::host_of_ipv4(std::uint32_t ipv4) const {
  const auto at = std::lower_bound(host_by_ipv4_.begin(), host_by_ipv4_.end(), std::make_pair(ipv4, 0u));
  return at != host_by_ipv4_.end() && at->first == ipv4 ? at->second : none;
}

// --- Events ---

void Fabric::schedule(std::uint64_t time, EventKind kind, std::uint32_t a, std::uint32_t b) {
  events_.push(Event{time, seq_++, kind, a, b});
  counters_.peak_pending_events = std::max<std::uint64_t>(counters_.peak_pending_events, events_.size());
}

std::size_t Fabric::EventHeap::bucket_of(const Event& e) const noexcept {
  if (e.time != last_.time) return 1 + 64 + static_cast<std::size_t>(63 - std::countl_zero(e.time ^ last_.time));
  if (e.seq != last_.seq) return 1 + static_cast<std::size_t>(63 - std::countl_zero(e.seq ^ last_.seq));
  return 0;
}

void Fabric::EventHeap::push(const Event& e) {
  ++size_;
  if (last_ > e) {
    past_.push_back(e);
    std::push_heap(past_.begin(), past_.end(), std::greater<>{});
    return;
  }
  buckets_[bucket_of(e)].push_back(e);
}

void Fabric::EventHeap::settle() const {
  if (!buckets_[0].empty()) return;
  std::size_t i = 1;
  while (buckets_[i].empty()) ++i;  // the caller checked that one is not
  std::vector<Event>& from = buckets_[i];
  const Event* lowest = &from.front();
  for (const Event& e : from)
    if (*lowest > e) lowest = &e;
  last_ = *lowest;
  // Every event of bucket i differs from the new last_ below bit i - 1:
  // each goes to a lower bucket (the lowest itself to bucket 0).
  for (const Event& e : from) buckets_[bucket_of(e)].push_back(e);
  from.clear();
}

const Fabric::Event& Fabric::EventHeap::top() const {
  if (!past_.empty()) return past_.front();
  settle();
  return buckets_[0].back();
}

void Fabric::EventHeap::pop() {
  --size_;
  if (!past_.empty()) {
    std::pop_heap(past_.begin(), past_.end(), std::greater<>{});
    past_.pop_back();
    return;
  }
  settle();
  buckets_[0].pop_back();
}

std::uint32_t Fabric::new_packet() {
  if (!free_packets_.empty()) {
    const std::uint32_t id = free_packets_.back();
    free_packets_.pop_back();
    return id;
  }
  packets_.emplace_back();
  counters_.peak_frames = packets_.size();  // the pool only grows when every frame is in use
  return static_cast<std::uint32_t>(packets_.size() - 1);
}

void Fabric::free_packet(std::uint32_t id) {
  std::vector<std::uint8_t>& bytes = packets_[id].bytes;
  bytes.clear();
  if (bytes.capacity() >= Endpoint::spare_buffer_bytes) spare_frames_->push_back(std::move(bytes));  // leaves it empty
  free_packets_.push_back(id);
}

void Fabric::wake(FabricNodeId host) {
  check_node(host, "wake");
  Node& node = nodes_[host];
  if (node.endpoint == nullptr) return;
  if (node.scheduled_wake != now_) {
    node.scheduled_wake = now_;
    schedule(now_, EventKind::wake, host, 0);
  }
}

std::uint64_t Fabric::next_event_time() const noexcept {
  if (!due_.empty()) return now_;
  return events_.empty() ? never : events_.top().time;
}

void Fabric::enqueue(std::uint32_t port, std::uint32_t packet) {
  Port& p = ports_[port];
  Packet& pk = packets_[packet];
  if (!p.up) {
    ++p.counters.dropped_link_down;
    release_ingress(packet);
    free_packet(packet);
    return;
  }
  const std::uint64_t bytes = pk.bytes.size() + p.config.overhead_bytes;
  const Node& node = nodes_[p.node];
  const bool lossless = node.config.pfc.enabled && ((node.config.pfc.lossless_priorities >> pk.priority) & 1u);
  if (node.endpoint == nullptr && !lossless && p.config.buffer_bytes != 0 &&
      p.queued_bytes + bytes > p.config.buffer_bytes) {
    ++p.counters.dropped_queue_full;
    release_ingress(packet);
    free_packet(packet);
    return;
  }
  const fabric::EcnMarking& ecn = p.config.ecn;
  if (ecn.enabled && node.endpoint == nullptr && p.queued_bytes > ecn.min_bytes) {  // a NIC never marks
    fabric::FramePeek& peek = pk.peek;
    if (peek.ect()) {
      bool mark = p.queued_bytes >= ecn.max_bytes;
      if (!mark) {
        const double fraction = static_cast<double>(p.queued_bytes - ecn.min_bytes) /
                                static_cast<double>(ecn.max_bytes - ecn.min_bytes);
        mark = p.random.chance(ecn.max_probability * fraction);
      }
      if (mark && fabric::set_ecn_ce(pk.bytes, peek)) {
        ++p.counters.ecn_marked;
        peek.ecn = fabric::ecn::ce;
      }
    }
  }
  p.queued_bytes += bytes;
  ++p.queued_frames;
  p.counters.peak_queued_bytes = std::max(p.counters.peak_queued_bytes, p.queued_bytes);
  p.queue[pk.priority].push_back(Queued{packet, static_cast<std::uint32_t>(pk.bytes.size())});
  start_tx(port);
}

void Fabric::start_tx(std::uint32_t port) {
  Port& p = ports_[port];
  if (p.busy || !p.up) return;
  for (std::size_t q = pfc_priorities; q-- > 0;) {  // strict priority, highest first
    if (p.queue[q].empty() || ((p.paused >> q) & 1u)) continue;
    const auto [packet, size] = p.queue[q].front();
    p.queue[q].pop_front();
    const std::uint64_t bytes = std::uint64_t{size} + p.config.overhead_bytes;
    p.busy_until_ps = std::max(p.busy_until_ps, now_ * 1000) + serialisation_ps(bytes, p.config.rate_bps);
    p.busy = true;
    schedule((p.busy_until_ps + 999) / 1000, EventKind::tx_done, port, packet);
    return;
  }
}

void Fabric::release_ingress(std::uint32_t packet) {
  Packet& pk = packets_[packet];
  if (pk.in_port == none) return;
  Port& up = ports_[pk.in_port];  // the egress the frame arrived by
  const Node& node = nodes_[ports_[pk.in_port ^ 1u].node];  // the switch it is in
  up.ingress_bytes[pk.priority] -= pk.bytes.size();
  const std::uint8_t bit = static_cast<std::uint8_t>(1u << pk.priority);
  if ((up.xoff_sent & bit) != 0 && up.ingress_bytes[pk.priority] <= node.config.pfc.xon_bytes) {
    up.xoff_sent = static_cast<std::uint8_t>(up.xoff_sent & ~bit);
    ++ports_[pk.in_port ^ 1u].counters.resumes_sent;
    schedule(now_ + ports_[pk.in_port ^ 1u].config.delay_ns, EventKind::pause, pk.in_port, pk.priority);
  }
  pk.in_port = none;
}

void Fabric::tx_done(std::uint32_t port, std::uint32_t packet) {
  Port& p = ports_[port];
  p.busy = false;
  Packet& pk = packets_[packet];
  const std::uint64_t bytes = pk.bytes.size() + p.config.overhead_bytes;
  release_ingress(packet);
  if (!p.up) {
    ++p.counters.dropped_link_down;
    free_packet(packet);
    return;
  }
  p.queued_bytes -= std::min(p.queued_bytes, bytes);
  if (p.queued_frames > 0) --p.queued_frames;
  Node& owner = nodes_[p.node];
  if (owner.nic_blocked && p.queued_frames <= nic_ring_ / 2) {
    owner.nic_blocked = false;
    if (!owner.poll_due) {
      owner.poll_due = true;
      due_.push_back(p.node);
    }
  }
  ++p.counters.tx_frames;
  p.counters.tx_bytes += pk.bytes.size();
  if (p.config.loss > 0.0 && p.random.chance(p.config.loss)) {
    ++p.counters.dropped_loss;
    free_packet(packet);
  } else {
    schedule(now_ + p.config.delay_ns, EventKind::arrive, port, packet);
  }
  start_tx(port);
}

void Fabric::arrive(std::uint32_t port, std::uint32_t packet) {
  Port& from = ports_[port];
  if (!from.up) {
    ++from.counters.dropped_link_down;
    free_packet(packet);
    return;
  }
  const FabricNodeId at = ports_[port ^ 1u].node;
  Node& node = nodes_[at];
  Packet& pk = packets_[packet];
  if (node.endpoint != nullptr) {
    ++counters_.delivered;
    if (observer_) observer_(now_, pk.origin, at, pk.bytes);
    node.endpoint->on_frame(now_, pk.bytes);
    free_packet(packet);
    if (!node.poll_due) {
      node.poll_due = true;
      due_.push_back(at);
    }
    return;
  }
  // Ingress accounting (PFC) from arrival until the frame leaves the switch.
  pk.in_port = port;
  std::uint64_t& ingress = from.ingress_bytes[pk.priority];
  ingress += pk.bytes.size();
  from.counters.peak_ingress_bytes = std::max(from.counters.peak_ingress_bytes, ingress);
  const PfcConfig& pfc = node.config.pfc;
  const std::uint8_t bit = static_cast<std::uint8_t>(1u << pk.priority);
  if (pfc.enabled && (pfc.lossless_priorities & bit) != 0 && (from.xoff_sent & bit) == 0 && ingress > pfc.xoff_bytes) {
    from.xoff_sent = static_cast<std::uint8_t>(from.xoff_sent | bit);
    ++ports_[port ^ 1u].counters.pauses_sent;
    schedule(now_ + ports_[port ^ 1u].config.delay_ns, EventKind::pause, port, 0x100u | pk.priority);
  }
  if (node.config.forwarding_latency_ns != 0) {
    schedule(now_ + node.config.forwarding_latency_ns, EventKind::forwarded, at, packet);
  } else {
    forward(at, packet);
  }
}

void Fabric::classify(Packet& pk) const {
  pk.peek = fabric::peek_frame(pk.bytes);
  pk.priority = priority_of(pk.bytes, pk.peek);
  pk.destination = none;
  pk.tuple = 0;
  if (pk.peek.ip_version == 4) {
    const std::uint8_t* ip = pk.bytes.data() + pk.peek.l3_offset;
    pk.destination = host_of_ipv4(wire::load_be32(ip + 16));
    std::uint64_t tuple =
        (std::uint64_t{wire::load_be32(ip + 12)} << 32) ^ wire::load_be32(ip + 16) ^ (std::uint64_t{ip[9]} << 56);
    if (pk.peek.udp) {
      const std::uint8_t* udp = pk.bytes.data() + pk.peek.l4_offset;
      tuple = mix(tuple) ^ (std::uint64_t{wire::load_be16(udp)} << 16 | wire::load_be16(udp + 2));
    }
    pk.tuple = tuple;
  }
}

void Fabric::forward(FabricNodeId sw, std::uint32_t packet) {
  Packet& pk = packets_[packet];
  const std::uint32_t destination = pk.destination;
  const std::uint64_t tuple = pk.tuple;
  if (destination == none || nodes_[destination].tor == none) {
    ++counters_.unroutable;
    release_ingress(packet);
    free_packet(packet);
    return;
  }
  const Node& here = nodes_[sw];
  const Node& target = nodes_[destination];
  if (target.tor == sw) {
    enqueue(target.ports.front() ^ 1u, packet);
    return;
  }
  if (routes_stale_) rebuild_routes();
  const std::size_t group = here.switch_index * switches_.size() + nodes_[target.tor].switch_index;
  const std::uint32_t first = group_first_[group];
  const std::uint32_t count = group_first_[group + 1] - first;
  if (count == 0) {
    ++counters_.unroutable;
    release_ingress(packet);
    free_packet(packet);
    return;
  }
  const std::uint64_t h = mix(tuple ^ here.salt);
  enqueue(group_ports_[first + static_cast<std::uint32_t>(((h >> 32) * count) >> 32)], packet);
}

void Fabric::pause(std::uint32_t port, std::uint32_t state) {
  Port& p = ports_[port];
  const std::size_t q = state & 0xffu;
  const auto bit = static_cast<std::uint8_t>(1u << q);
  if ((state & 0x100u) != 0) {
    ++p.counters.pauses_received;
    if (!p.up || (p.paused & bit) != 0) return;
    p.paused = static_cast<std::uint8_t>(p.paused | bit);
    p.paused_since[q] = now_;
  } else {
    ++p.counters.resumes_received;
    if ((p.paused & bit) == 0) return;
    p.paused = static_cast<std::uint8_t>(p.paused & ~bit);
    p.counters.paused_ns += now_ - p.paused_since[q];
    start_tx(port);
  }
}

void Fabric::note_wakeup(FabricNodeId host) {
  Node& node = nodes_[host];
  const std::uint64_t w = node.endpoint->next_wakeup();
  if (w == never) return;
  if (w <= now_) {
    if (!node.poll_due) {
      node.poll_due = true;
      due_.push_back(host);
    }
    return;
  }
  if (node.scheduled_wake > now_ && node.scheduled_wake <= w) return;  // an earlier wake-up is pending
  node.scheduled_wake = w;
  schedule(w, EventKind::wake, host, 0);
}

void Fabric::poll_host(FabricNodeId host) {
  Node& node = nodes_[host];
  node.poll_due = false;
  if (nic_ring_ != 0 && !node.ports.empty() && ports_[node.ports.front()].queued_frames >= nic_ring_) {
    node.nic_blocked = true;  // polled again when the NIC has drained
    return;
  }
  ++counters_.events;
  polled_.clear();
  node.endpoint->poll(now_, polled_);
  for (std::vector<std::uint8_t>& frame : polled_) {
    ++counters_.sent;
    if (node.ports.empty()) {
      ++counters_.unroutable;
      continue;
    }
    const std::uint32_t packet = new_packet();
    Packet& pk = packets_[packet];
    pk.bytes = std::move(frame);
    pk.origin = host;
    pk.in_port = none;
    classify(pk);
    enqueue(node.ports.front(), packet);
  }
  if (poll_observer_) poll_observer_(host);
  note_wakeup(host);
  for (std::uint32_t s = node.sibling; s != none && s != host; s = nodes_[s].sibling) note_wakeup(s);
}

bool Fabric::step(std::uint64_t limit) {
  if (routes_stale_) rebuild_routes();
  if (!started_) {  // the hosts' first wake-ups
    started_ = true;
    for (FabricNodeId id = 0; id < nodes_.size(); ++id) {
      if (nodes_[id].endpoint != nullptr) note_wakeup(id);
    }
  }
  const std::uint64_t t = next_event_time();
  if (t == never || t > limit) return false;
  now_ = std::max(now_, t);
  while (!events_.empty() && events_.top().time <= now_) {
    const Event e = events_.top();
    events_.pop();
    ++counters_.events;
    switch (e.kind) {
      case EventKind::tx_done: tx_done(e.a, e.b); break;
      case EventKind::arrive: arrive(e.a, e.b); break;
      case EventKind::forwarded: forward(e.a, e.b); break;
      case EventKind::pause: pause(e.a, e.b); break;
      case EventKind::link_state: set_link(e.a, e.b != 0); break;
      case EventKind::reroute:
        ++counters_.reroutes;
        rebuild_routes();
        break;
      case EventKind::wake: {
        Node& node = nodes_[e.a];
        if (node.scheduled_wake == e.time) {
          node.scheduled_wake = never;
          if (!node.poll_due) {
            node.poll_due = true;
            due_.push_back(e.a);
          }
        }
        break;
      }
    }
  }
  // Polls, in id order; a host that asks to be woken now is polled again.
  std::uint64_t polls = 0;
  while (!due_.empty()) {
    // Both vectors keep their capacity: no allocation per instant.
    due_now_.swap(due_);
    due_.clear();
    std::sort(due_now_.begin(), due_now_.end());
    for (FabricNodeId host : due_now_) {
      if (++polls > max_polls_per_instant)
        throw std::runtime_error("sim::Fabric: more than " + std::to_string(max_polls_per_instant) +
                                 " polls at t=" + std::to_string(now_) +
                                 " ns: an endpoint keeps asking to be woken now");
      poll_host(host);
    }
  }
  return true;
}

void Fabric::run_until(std::uint64_t t) {
  while (step(t)) {
  }
  now_ = std::max(now_, t);
}

bool Fabric::run_until(const std::function<bool()>& done, std::uint64_t limit) {
  if (done()) return true;
  while (step(limit)) {
    if (done()) return true;
  }
  now_ = std::max(now_, limit);
  return done();
}

}  // namespace metaroce::sim
