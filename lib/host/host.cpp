#include "host/host.hpp"

#include <fmt/format.h>

#include "wire/byte_order.hpp"

namespace metaroce::host {

Host::Host(const HostConfig& config) : config_(config), pools_(config.pool_limits) {}

Host::~Host() {
  // Connections hold timers on the wheel, blocks of the pools and places
  // on the ready list: they go first.
  by_qpn_.clear();
  connections_.clear();
}

transport::Connection* Host::add_connection(const transport::ConnectionConfig& config,
                                            std::unique_ptr<transport::CongestionControl> congestion,
                                            std::string& error) {
  if (connections_.size() >= config_.max_connections) {
    ++counters_.connections_refused;
    error = fmt::format("{}: already {} connections, its max_connections: raise max_connections, or put the "
                        "connection on another host (lcore, queue)",
                        config_.name, connections_.size());
    return nullptr;
  }
  if (connections_.contains(config.local_qpn)) {
    error = fmt::format("{}: QPN {:#x} already has a connection: pick another local_qpn", config_.name,
                        config.local_qpn);
    return nullptr;
  }
  if (steering_queue(config.local_qpn, config_.queues) != config_.queue ||
      steering_queue(config.peer_qpn, config_.queues) != config_.queue) {
    error = fmt::format("{}: QPNs {:#x} -> {:#x} steer to queues {} and {}, but this host owns queue {} of {}: pick "
                        "QPNs with qpn % {} == {} on both ends",
                        config_.name, config.local_qpn, config.peer_qpn, steering_queue(config.local_qpn, config_.queues),
                        steering_queue(config.peer_qpn, config_.queues), config_.queue, config_.queues,
                        config_.queues, config_.queue);
    return nullptr;
  }
  const bool hinted = receive_share_ != nullptr && config.mode == transport::Mode::metaroce &&
                      congestion != nullptr && congestion->follows_rate_hint();
  auto c = transport::Connection::create(config, memory_, wheel_, std::move(congestion), error, &pools_);
  if (!c) return nullptr;
  auto* raw = c.get();
  if (hinted) raw->attach_receive_share(receive_share_);
  if (raw->secure()) ++secure_connections_;
  connections_[config.local_qpn] = std::move(c);
  by_qpn_.insert(config.local_qpn, raw);
  raw->attach_ready_list(&ready_);
  raw->attach_completion_list(&with_completions_);
  return raw;
}

transport::Connection* Host::connection(std::uint32_t local_qpn) noexcept { return by_qpn_.find(local_qpn); }

void Host::set_port_link(std::uint64_t now, std::uint16_t port, bool up) {
  if (port >= 64 || port_link_up(port) == up) return;
  ports_down_ ^= std::uint64_t{1} << port;
  ++counters_.link_changes;
  for (auto& [qpn, c] : connections_) {
    const transport::ConnectionConfig& config = c->config();
    for (std::uint16_t k = 0; k < config.planes; ++k)
      if (config.plane[k].port == port) c->set_plane_link(now, k, up);
  }
}

bool Host::remove_connection(std::uint32_t local_qpn) {
  const auto it = connections_.find(local_qpn);
  if (it == connections_.end()) return false;
  if (it->second->secure()) --secure_connections_;
  by_qpn_.erase(local_qpn);
  connections_.erase(it);
  return true;
}

// A secure connection's frames carry a trailer before their ICRC: parsed
// without it, a frame without payload fails (bytes after its headers) and
// a data frame's payload takes the trailer in. So on a host with secure
// connections, the destination QP is read first, and a frame for a secure
// connection is parsed with the trailer. One that does not parse so (one
// without a trailer, say) is parsed as it is, for the connection to count
// (secure_no_trailer) or the parser to name what is wrong.
//
// A frame parsed for a secure connection has its ICRC left unchecked: the
// tag the connection checks next covers every byte from the BTH to the
// trailer, and of the bytes before the BTH that the ICRC covers the
// transport uses none but the ECN bits, which the ICRC masks too. So the
// tag stands in for the ICRC (doc/WIRE.md, "Secure trailer"), and a frame
// damaged in flight is dropped as secure_bad_tag.
wire::ParseError Host::parse_for_connection(std::span<const std::uint8_t> frame, const wire::ParseOptions& options,
                                            wire::ParsedFrame& parsed, LookedUp& looked_up) const {
  std::uint32_t qpn = 0;
  if (wire::peek_dest_qp(frame, qpn)) {
    looked_up = LookedUp{true, qpn, by_qpn_.find(qpn)};
    if (looked_up.found != nullptr && looked_up.found->secure()) {
      wire::ParseOptions with = options;
      with.secure_trailer = true;
      with.verify_icrc = false;
      with.precomputed_icrc = nullptr;
      if (wire::parse_frame(frame, parsed, with) == wire::ParseError::ok) return wire::ParseError::ok;
      parsed = wire::ParsedFrame{};
    }
  }
  return wire::parse_frame(frame, parsed, options);
}

bool Host::set_security(std::uint32_t local_qpn, const transport::SecurityConfig& config, std::string& error) {
  transport::Connection* c = connection(local_qpn);
  if (c == nullptr) {
    error = "no connection with that QPN";
    return false;
  }
  const bool was = c->secure();
  if (!c->set_security(config, error)) return false;
  if (!was) ++secure_connections_;
  return true;
}

void Host::receive(std::uint64_t now, std::span<const std::uint8_t> frame, const wire::ParseOptions& options) {
  ++counters_.rx_frames;
  counters_.rx_bytes += frame.size();
  if (neighbours_ && wire::classify(frame) != wire::FrameKind::other) {
    ++counters_.rx_neighbour;
    neighbours_->receive(now, frame);
    return;
  }
  wire::ParsedFrame parsed;
  LookedUp looked_up;
  const wire::ParseError e = secure_connections_ != 0 ? parse_for_connection(frame, options, parsed, looked_up)
                                                      : wire::parse_frame(frame, parsed, options);
  if (e != wire::ParseError::ok) {
    ++counters_.rx_parse_errors[static_cast<std::size_t>(e)];
    return;
  }
  if (parsed.bth.dest_qp == management_qpn && management_) {
    ++counters_.rx_management;
    management_(now, parsed);
    return;
  }
  transport::Connection* connection = nullptr;
  if (looked_up.done && looked_up.qpn == parsed.bth.dest_qp) {
    connection = looked_up.found;  // parse_for_connection looked it up already
  } else {
    connection = by_qpn_.find(parsed.bth.dest_qp);
  }
  if (connection == nullptr) {
    if (steering_queue(parsed.bth.dest_qp, config_.queues) != config_.queue)
      ++counters_.rx_misdirected;  // another queue's QPN: the sender or the NIC steered it wrong
    else if (parsed.bth.opcode == wire::opcode::mr_probe && is_steering_probe_qpn(parsed.bth.dest_qp))
      ++counters_.rx_steering_probes;
    else
      ++counters_.rx_unknown_qpn;
    return;
  }
  // The connection's VLAN (by VID; the priority bits may be rewritten on
  // the way), or none: the same QPN on another VLAN is another network's.
  // The engine enables no VLAN stripping, so the tag is in the frame.
  const transport::Endpoints& endpoints = connection->config().endpoints;
  const bool tagged = parsed.l3_offset != wire::ethernet_header_size;
  if (tagged != endpoints.vlan_present ||
      (tagged && ((wire::load_be16(frame.data() + wire::ethernet_header_size) ^ endpoints.vlan_tci) & 0x0fff) != 0)) {
    ++counters_.rx_vlan_mismatch;
    return;
  }
  ++counters_.rx_delivered;
  // The payload is placed (copied to its destination) inside on_frame: the
  // frame's buffer can be reused right after.
  connection->on_frame(now, parsed);
}

Neighbours& Host::enable_neighbours(const NeighbourConfig& config) {
  neighbours_ = std::make_unique<Neighbours>(config, counters_.neighbour);
  return *neighbours_;
}

void Host::send_neighbour_frames(std::uint64_t now, FrameSink& sink) {
  neighbour_frames_.clear();
  neighbours_->poll(now, neighbour_frames_);
  for (const auto& f : neighbour_frames_) send_frame(f, sink);
}

bool Host::send_frame(std::span<const std::uint8_t> frame, FrameSink& sink) {
  if (frame.size() > sink.max_copied_frame()) {
    ++counters_.tx_frame_too_large;
    return false;
  }
  if (tx_held() == 0 && sink.take_copy(frame)) return true;
  ++counters_.tx_mempool_empty;
  held_bytes_.insert(held_bytes_.end(), frame.begin(), frame.end());
  held_ends_.push_back(held_bytes_.size());
  return true;
}

// Not a drop: the connection counts the frame sent, and it will be.
void Host::hold(std::size_t i, const FrameSink& sink) {
  if (batch_.frame_size(i) > sink.max_copied_frame()) {
    ++counters_.tx_frame_too_large;  // held frames are copied: this one never fits
    return;
  }
  ++counters_.tx_mempool_empty;
  batch_.serialize(i, held_bytes_);
  held_ends_.push_back(held_bytes_.size());
}

bool Host::release_held(FrameSink& sink) {
  while (held_head_ < held_ends_.size()) {
    const std::size_t from = held_head_ == 0 ? 0 : held_ends_[held_head_ - 1];
    if (!sink.take_copy(std::span<const std::uint8_t>(held_bytes_.data() + from, held_ends_[held_head_] - from))) {
      sink.reclaim();
      return false;
    }
    ++held_head_;
  }
  held_bytes_.clear();
  held_ends_.clear();
  held_head_ = 0;
  return true;
}

void Host::poll_connections(std::uint64_t now, FrameSink& sink) {
  // Those ready when the turn began, each once: one that asks again (it
  // stopped at its burst limit) goes behind the others, to the next turn.
  // Once the turn's frames reach the budget, the rest wait for the next
  // turn, in their places.
  const std::size_t budget = config_.tx_budget_frames;
  std::size_t taken = 0;
  for (std::size_t n = ready_.size(); n > 0; --n) {
    if (budget != 0 && taken >= budget) {
      ++counters_.tx_budget_stops;
      return;
    }
    transport::Connection* c = ready_.pop();
    ++counters_.connections_polled;
    batch_.clear();
    c->poll(now, batch_);
    if (batch_.empty()) continue;
    const std::size_t took = sink.take(batch_, 0);
    taken += took;
    if (took == batch_.size()) continue;
    // The sink ran out of buffers: the rest of this connection's frames
    // wait in order, and so do the other connections, whose places at the
    // front of the ready list go first once the sink has buffers again.
    for (std::size_t i = took; i < batch_.size(); ++i) hold(i, sink);
    return;
  }
}

std::size_t Host::connection_memory_bytes() const noexcept {
  std::size_t bytes = 0;
  for (const auto& [qpn, c] : connections_) bytes += c->memory_bytes();
  return bytes;
}

}  // namespace metaroce::host
