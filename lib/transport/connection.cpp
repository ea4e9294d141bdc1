// The factory that picks a connection's implementation by mode.
#include "transport/connection.hpp"

#include "transport/metaroce_connection.hpp"
#include "transport/roce_connection.hpp"

namespace metaroce::transport {

std::string_view to_string(PostResult r) noexcept {
  switch (r) {
    case PostResult::ok: return "ok";
    case PostResult::not_ready: return "not_ready";
    case PostResult::bad_stream: return "bad_stream";
    case PostResult::bad_lkey: return "bad_lkey";
    case PostResult::bad_rkey: return "bad_rkey";
    case PostResult::too_long: return "too_long";
    case PostResult::queue_full: return "queue_full";
    case PostResult::no_resources: return "no_resources";
    case PostResult::bad_length: return "bad_length";
  }
  return "invalid";
}

void Connection::attach_receive_share(ReceiveShare* share) {
  if (receive_share_ != nullptr) {
    auto& l = receive_share_->listeners_;
    l[share_index_] = l.back();
    l[share_index_]->share_index_ = share_index_;
    l.pop_back();
  }
  receive_share_ = share;
  if (share != nullptr) {
    share_index_ = share->listeners_.size();
    share->listeners_.push_back(this);
  }
}

ReceiveShare::~ReceiveShare() {
  for (Connection* c : listeners_) c->receive_share_ = nullptr;
}

void ReceiveShare::wake_on_new_generation() {
  const std::uint64_t g = generation();
  if (g == announced_) return;
  announced_ = g;
  for (Connection* c : listeners_) c->wake();
}

PostResult Connection::check_send(const SendRequest& request) noexcept {
  if (state_ != ConnectionState::ready) return PostResult::not_ready;
  if (request.stream >= config_.streams) return PostResult::bad_stream;
  if (request.length > 0xffff'ffffu) return PostResult::too_long;
  if (work_in_use_ >= config_.completion_queue_depth) {
    ++counters_.posts_refused_queue_full;
    return PostResult::queue_full;
  }
  if (is_atomic(request.op) && request.length != atomic_length) return PostResult::bad_length;
  // A READ's and an atomic's answer is written to the local bytes.
  if (request.length > 0 &&
      memory_.check(request.lkey, reinterpret_cast<std::uintptr_t>(request.local_addr), request.length,
                    is_request(request.op) ? std::uint32_t{access_local_write} : 0u) != AccessCheck::ok)
    return PostResult::bad_lkey;
  if ((is_write(request.op) || is_request(request.op)) && request.rkey == 0) return PostResult::bad_rkey;
  return PostResult::ok;
}

PostResult Connection::check_receive(const ReceiveRequest& request) noexcept {
  if (state_ != ConnectionState::ready && state_ != ConnectionState::init) return PostResult::not_ready;
  if (request.stream >= config_.streams) return PostResult::bad_stream;
  if (work_in_use_ >= config_.completion_queue_depth) {
    ++counters_.posts_refused_queue_full;
    return PostResult::queue_full;
  }
  if (request.length > 0 &&
      memory_.check(request.lkey, reinterpret_cast<std::uintptr_t>(request.addr), request.length,
                    access_local_write) != AccessCheck::ok)
    return PostResult::bad_lkey;
  return PostResult::ok;
}

std::unique_ptr<Connection> Connection::create(const ConnectionConfig& config, MemoryRegistry& memory,
                                               timer::Wheel& wheel,
                                               std::unique_ptr<CongestionControl> congestion,
                                               std::string& error, HostPools* pools) {
  error = validate(config);
  if (!error.empty()) return nullptr;
  if (!congestion) congestion = std::make_unique<FixedWindow>(config.path_window, config.psn_window);
  if (config.mode == Mode::rocev2)
    return std::make_unique<RoceConnection>(config, memory, wheel, std::move(congestion), pools);
  return std::make_unique<MetaroceConnection>(config, memory, wheel, std::move(congestion), pools);
}

}  // namespace metaroce::transport
