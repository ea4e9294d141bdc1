// The connection API both modes share: what the application, the engine
// and the simulator see. MetaroceConnection (metaroce_connection.hpp) is the
// reorder-free multipath transport; RoceConnection (roce_connection.hpp) is
// standard RoCEv2 RC with go-back-N, the baseline.
//
// The owner (an engine lcore, the simulator, a test) drives a connection:
//   post_send / post_receive     from the application;
//   on_frame(now, parsed)        for each frame addressed to local_qpn;
//   poll(now, batch)             to collect what to transmit now;
//   the timing wheel it was given, advanced by the owner, for its timers;
//   poll_completions             for completions, in order per stream.
// Threading: everything runs on the owner's thread (the wheel's too).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "secure/trailer.hpp"
#include "timer/wheel.hpp"
#include "transport/config.hpp"
#include "transport/congestion.hpp"
#include "transport/counters.hpp"
#include "transport/memory_region.hpp"
#include "transport/pacer.hpp"
#include "transport/pools.hpp"
#include "transport/ready_list.hpp"
#include "transport/receive_share.hpp"
#include "transport/tx_batch.hpp"
#include "transport/types.hpp"
#include "wire/frame.hpp"

namespace metaroce::transport {


enum class ConnectionState : std::uint8_t { init, ready, error, closed, count_ };

inline constexpr std::array<std::string_view, 4> connection_state_names = {"INIT", "READY", "ERROR",
                                                                            "CLOSED"};

[[nodiscard]] constexpr std::string_view to_string(ConnectionState s) noexcept {
  return connection_state_names[static_cast<std::size_t>(s)];
}

enum class PostResult : std::uint8_t {
  ok,
  not_ready,      // the connection is not READY
  bad_stream,     // stream >= config.streams
  bad_lkey,       // local bytes not inside a region registered for them
  bad_rkey,       // (WRITE) rkey 0 is never valid
  too_long,       // message longer than 4 GiB - 1 (the wire's message length field)
  queue_full,     // completion_queue_depth work requests posted and not yet polled
  no_resources,   // the host's pool has no room for the request now: post it again later
  bad_length,     // an atomic's length is not 8 bytes
};

[[nodiscard]] std::string_view to_string(PostResult r) noexcept;

enum class PathState : std::uint8_t { active, failed };

// What telemetry and tests may read about one path.
struct PathInfo {
  PathState state = PathState::active;
  std::uint16_t src_port = 0;
  std::uint32_t in_flight = 0;
  std::uint32_t next_seq = 0;
  Time srtt = 0;
  Time rto = 0;
  std::uint64_t sent = 0;
  std::uint64_t retransmitted = 0;
  std::uint64_t declared_lost = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t ce_marks = 0;
  std::uint64_t entropy_changes = 0;
};

enum class PlaneState : std::uint8_t { active, failed };

// What telemetry and tests may read about one plane.
struct PlaneInfo {
  PlaneState state = PlaneState::active;
  bool link_down = false;      // the owner said its port's link is down
  std::uint16_t port = 0;
  std::uint64_t data_packets = 0;  // data transmissions on it, first and again
  std::uint64_t retransmits = 0;
  std::uint64_t failures = 0;
};

class alignas(64) Connection {
 public:
  // Returns nullptr and sets `error` (what is wrong, how to fix it) when the
  // config is not usable. `congestion` may be null: a fixed window of
  // config.path_window per path and config.psn_window per connection.
  // `pools`: the host's, shared by its connections (they must outlive the
  // connection); null gives the connection pools of its own.
  static std::unique_ptr<Connection> create(const ConnectionConfig& config, MemoryRegistry& memory,
                                            timer::Wheel& wheel,
                                            std::unique_ptr<CongestionControl> congestion,
                                            std::string& error, HostPools* pools = nullptr);
  virtual ~Connection() {
    attach_receive_share(nullptr);
    wheel_.cancel(pacing_timer_);
    if (ready_list_ != nullptr) ready_list_->remove(*this);
    if (completion_list_ != nullptr) completion_list_->remove(*this);
    pools_->forget(*this);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // INIT -> READY: the peer is known (in-band handshake: the engine's job).
  void connect() {
    if (state_ == ConnectionState::init) set_state(ConnectionState::ready);
  }
  // Any state -> CLOSED: outstanding work completes as flushed.
  virtual void close() = 0;

  virtual PostResult post_send(const SendRequest& request) = 0;
  virtual PostResult post_receive(const ReceiveRequest& request) = 0;

  // A secure connection (set_security) first checks the frame's trailer
  // (parsed with ParseOptions::secure_trailer): a frame without one, with
  // another key's SPI, a counter seen before or a tag that does not match
  // is dropped under its counter before any of it is read. Encrypted
  // payloads are opened into the connection's own buffer, so the frame's
  // bytes are never written.
  void on_frame(Time now, const wire::ParsedFrame& frame) {
    if (opener_ == nullptr) {
      on_checked_frame(now, frame);
      return;
    }
    on_secure_frame(now, frame);
  }
  // A secure connection seals every frame it emits (data, retransmission,
  // probe, ACK, NAK, request) with the next counter of its key.
  void poll(Time now, TxBatch& out) {
    if (sealer_ == nullptr) {
      poll_frames(now, out);
      return;
    }
    const std::size_t start = out.size();
    poll_frames(now, out);
    seal_frames(out, start);
  }
  // From now on every frame sent is sealed with config.tx_key and every
  // frame received must open with config.rx_key; before the first frame
  // either way. False (and the connection as it was) when the library refuses
  // a key: `error` says why.
  bool set_security(const SecurityConfig& config, std::string& error);
  [[nodiscard]] bool secure() const noexcept { return sealer_ != nullptr; }
  // The ICRC of a frame built to be sent, over its bytes from the IP
  // header on (`pieces`, in order): 0 for a secure connection, whose
  // frames get theirs once sealed.
  [[nodiscard]] std::uint32_t icrc_unless_secure(std::span<const wire::ByteSpan> pieces) const noexcept {
    return secure() ? 0u : wire::compute_icrc(pieces);
  }
  [[nodiscard]] std::uint32_t icrc_unless_secure(wire::ByteSpan from_l3) const noexcept {
    return icrc_unless_secure(std::span<const wire::ByteSpan>(&from_l3, 1));
  }
  // True when poll() has something to send right now (it stopped at its
  // burst limit, or a timer or an arrival made work); the owner should call
  // it again without waiting.
  [[nodiscard]] bool wants_poll() const noexcept { return wants_poll_; }
  // The owner's list of connections with completions waiting: the
  // connection joins it with its first one and leaves it when they are
  // polled. Null: none.
  void attach_completion_list(ReadyList* list) noexcept {
    if (completion_list_ != nullptr) completion_list_->remove(*this);
    completion_list_ = list;
    if (!completions_.empty() && list != nullptr) list->push(*this);
  }
  // The application's own number for this connection (an index, say), for
  // when a list hands it the connection.
  void set_user_tag(std::uint64_t tag) noexcept { user_tag_ = tag; }
  [[nodiscard]] std::uint64_t user_tag() const noexcept { return user_tag_; }
  // The owner's ready list: from now on the connection joins it whenever
  // it turns wants_poll() true (and at once if it is true now). Null: none.
  void attach_ready_list(ReadyList* list) noexcept {
    if (ready_list_ != nullptr) ready_list_->remove(*this);
    ready_list_ = list;
    if (wants_poll_ && list != nullptr) list->push(*this);
  }

  // Moves completions into `out` (appended), oldest first.
  std::size_t poll_completions(std::vector<Completion>& out) {
    if (completion_list_ != nullptr) completion_list_->remove(*this);
    const std::size_t n = completions_.size();
    out.insert(out.end(), completions_.begin(), completions_.end());
    completions_.clear();
    // A burst's room goes back: an idle connection keeps little.
    if (completions_.capacity() > kept_completions) std::vector<Completion>().swap(completions_);
    work_in_use_ -= n;
    return n;
  }
  // Completions' room a connection keeps between polls.
  static constexpr std::size_t kept_completions = 64;

  [[nodiscard]] ConnectionState state() const noexcept { return state_; }
  [[nodiscard]] const ConnectionCounters& counters() const noexcept { return counters_; }
  [[nodiscard]] const ConnectionConfig& config() const noexcept { return config_; }
  [[nodiscard]] std::uint64_t state_transitions(ConnectionState to) const noexcept {
    return transitions_[static_cast<std::size_t>(to)];
  }
  [[nodiscard]] virtual PathInfo path_info(std::uint16_t path) const noexcept = 0;
  // Plane `plane` (< config().planes).
  [[nodiscard]] virtual PlaneInfo plane_info(std::uint16_t plane) const noexcept {
    PlaneInfo info;
    info.port = config_.plane[plane].port;
    return info;
  }
  // The owner saw the link of plane `plane`'s port go down (up == false)
  // or come back. Down: the plane fails at once, its unresolved packets are
  // resent on the other planes. Up: its paths probe, and the plane is back
  // in use when a probe is acknowledged. One-plane modes ignore it.
  virtual void set_plane_link(Time now, std::uint16_t plane, bool up) {
    (void)now;
    (void)plane;
    (void)up;
  }
  [[nodiscard]] const CongestionControl& congestion() const noexcept { return *congestion_; }
  // The host's receive share (may be null: no rate hints in our ACKs).
  void attach_receive_share(ReceiveShare* share);
  // Data packets in flight: sent, and neither acknowledged nor known lost.
  [[nodiscard]] virtual std::uint64_t packets_outstanding() const noexcept = 0;
  // Bytes this connection holds now: its object, what it allocated itself
  // and the pool blocks it has taken (its congestion control's included).
  [[nodiscard]] virtual std::size_t memory_bytes() const noexcept = 0;
  [[nodiscard]] HostPools& pools() noexcept { return *pools_; }
  // Asks for a poll (a pool has a block again): as request_poll().
  void wake() noexcept { request_poll(); }

  // Packets poll() may emit per call before yielding (wants_poll()).
  static constexpr std::size_t burst_limit = 64;

 protected:
  // Each mode's receive and transmit: on_frame and poll around them.
  virtual void on_checked_frame(Time now, const wire::ParsedFrame& frame) = 0;
  virtual void poll_frames(Time now, TxBatch& out) = 0;

  Connection(const ConnectionConfig& config, MemoryRegistry& memory, timer::Wheel& wheel,
             std::unique_ptr<CongestionControl> congestion, HostPools* pools)
      : config_(config),
        memory_(memory),
        wheel_(wheel),
        congestion_(std::move(congestion)),
        own_pools_(pools == nullptr ? std::make_unique<HostPools>() : nullptr),
        pools_(pools == nullptr ? own_pools_.get() : pools),
        pacing_timer_(&Connection::pacing_callback, this) {
    transitions_[static_cast<std::size_t>(ConnectionState::init)] = 1;
  }
  // Pacing: may a data packet leave now? If not, the pacing timer is armed
  // for when it may, and wants_poll() turns true then.
  bool pacing_allows(Time now) {
    pacing_rate_ = congestion_->pacing_rate_bps(now);
    if (pacer_.ready(now, pacing_rate_)) return true;
    if (!pacing_timer_.armed()) wheel_.arm(pacing_timer_, pacer_.next());
    return false;
  }
  // What a std::deque of n elements of `element` bytes holds (libstdc++: a
  // map of at least 8 pointers and a 512-byte node per 512 bytes of
  // elements, one even when empty), for memory_bytes().
  [[nodiscard]] static constexpr std::size_t deque_bytes(std::size_t n, std::size_t element) noexcept {
    return (n * element / 512 + 1) * 512 + 8 * sizeof(void*);
  }
  // The checks every post_send and post_receive make, whatever the mode
  // (they count posts_refused_queue_full).
  [[nodiscard]] PostResult check_send(const SendRequest& request) noexcept;
  [[nodiscard]] PostResult check_receive(const ReceiveRequest& request) noexcept;

  void paced(Time now, std::size_t wire_bytes) {
    pacer_.sent(now, static_cast<std::uint32_t>(wire_bytes), pacing_rate_);
  }
  // Something is to be done in poll(): wants_poll() turns true and the
  // connection joins its owner's ready list.
  void request_poll() noexcept {
    wants_poll_ = true;
    if (ready_list_ != nullptr && !links_[ReadyList::work].listed) ready_list_->push(*this);
  }
  // Every completion goes through here (it may list the connection).
  void add_completion(const Completion& c) {
    completions_.push_back(c);
    if (completion_list_ != nullptr && !links_[ReadyList::completions].listed) completion_list_->push(*this);
  }
  void set_state(ConnectionState s) {
    if (s == state_) return;
    state_ = s;
    ++transitions_[static_cast<std::size_t>(s)];
  }

  ConnectionConfig config_;
  MemoryRegistry& memory_;
  timer::Wheel& wheel_;
  ConnectionState state_ = ConnectionState::init;
  std::array<std::uint64_t, static_cast<std::size_t>(ConnectionState::count_)> transitions_{};
  ConnectionCounters counters_;
  std::vector<Completion> completions_;
  // Work requests posted whose completion has not been polled: each
  // implementation's post_* adds one when it accepts a request.
  std::uint64_t work_in_use_ = 0;
  bool wants_poll_ = false;
  std::unique_ptr<CongestionControl> congestion_;
  ReceiveShare* receive_share_ = nullptr;
  std::unique_ptr<HostPools> own_pools_;  // when created without a host's
  HostPools* pools_;

 private:
  void on_secure_frame(Time now, const wire::ParsedFrame& frame);
  void seal_frames(TxBatch& out, std::size_t start);
  std::unique_ptr<secure::Sealer> sealer_;  // null: no security, nothing checked or added
  std::unique_ptr<secure::Opener> opener_;
  secure::Protection protection_ = secure::Protection::encrypt;
  std::vector<std::uint8_t> secure_rx_;  // an encrypted frame's payload and pad, opened (only grows)

  friend class ReadyList;
  friend class BlockPool;
  friend class ReceiveShare;
  static void pacing_callback(timer::Timer& t, timer::Wheel&, timer::Tick) {
    static_cast<Connection*>(t.owner())->request_poll();
  }
  ReadyList* ready_list_ = nullptr;
  ReadyList* completion_list_ = nullptr;
  struct ListLinks {
    Connection* next = nullptr;
    Connection* prev = nullptr;
    bool listed = false;
  };
  std::array<ListLinks, 2> links_{};  // in the ready list, in the completion list (ReadyList::Kind)
  std::uint64_t user_tag_ = 0;
  std::uint8_t pool_waits_ = 0;
  std::size_t share_index_ = 0;  // in receive_share_->listeners_  // BlockPool waiter bits: the pools this connection waits on
  Pacer pacer_;
  std::uint64_t pacing_rate_ = 0;
  timer::Timer pacing_timer_;
};

inline void ReadyList::push(Connection& c) noexcept {
  Connection::ListLinks& l = c.links_[kind_];
  if (l.listed) return;
  l.listed = true;
  l.next = nullptr;
  l.prev = tail_;
  if (tail_ != nullptr) tail_->links_[kind_].next = &c; else head_ = &c;
  tail_ = &c;
  ++size_;
}

inline Connection* ReadyList::pop() noexcept {
  Connection* c = head_;
  if (c == nullptr) return nullptr;
  Connection::ListLinks& l = c->links_[kind_];
  head_ = l.next;
  if (head_ != nullptr) head_->links_[kind_].prev = nullptr; else tail_ = nullptr;
  l = Connection::ListLinks{};
  --size_;
  return c;
}

inline void ReadyList::remove(Connection& c) noexcept {
  Connection::ListLinks& l = c.links_[kind_];
  if (!l.listed) return;
  if (l.prev != nullptr) l.prev->links_[kind_].next = l.next; else head_ = l.next;
  if (l.next != nullptr) l.next->links_[kind_].prev = l.prev; else tail_ = l.prev;
  l = Connection::ListLinks{};
  --size_;
}

}  // namespace metaroce::transport
