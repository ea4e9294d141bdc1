// Where the public API's types (include/metaroce) meet the library's own:
// a public Connection's state, the conversions between the two
// vocabularies, and the delivery of a host's completions to the public
// connections. Private to lib/stack; never installed.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "host/host.hpp"
#include "metaroce/endpoint.hpp"
#include "metaroce/types.hpp"
#include "transport/connection.hpp"
#include "transport/types.hpp"

namespace metaroce {

// What a public connection needs of the endpoint or simulation it lives
// on: turns (in real or virtual time) until `done()` or `seconds` passed.
class ConnectionOwner {
 public:
  virtual ~ConnectionOwner() = default;
  virtual bool turn_until(const std::function<bool()>& done, double seconds) = 0;
};

// A path's state in the public vocabulary.
[[nodiscard]] PathStats public_path(const transport::PathInfo& p) noexcept;

struct Connection::Impl {
  ConnectionOwner* owner = nullptr;
  transport::Connection* connection = nullptr;
  std::uint64_t cm_id = 0;  // client: the connection manager's handle
  bool server = false;
  bool by_hand = false;  // Endpoint::connect_static: no manager knows it
  bool closed_by_peer = false;
  std::vector<std::uint8_t> peer_private_data;
  std::vector<std::uint8_t> peer_close_data;  // server: the client's DREQ
  std::vector<std::uint8_t> close_reply;      // server: what our DREP carries
  // Server: hands close_reply to the connection manager (set once the DREQ is in).
  std::function<void(const std::vector<std::uint8_t>&)> on_close_reply;
  std::deque<Completion> completions;
  std::function<void(const Completion&)> handler;

  // A public connection for `c` (which it tags, so completions find it).
  static std::unique_ptr<metaroce::Connection> wrap(ConnectionOwner& owner, transport::Connection& c,
                                                    std::vector<std::uint8_t> peer_private_data);
  // To the handler, else to the queue poll_completions reads.
  void deliver(const Completion& c) {
    if (handler) {
      handler(c);
    } else {
      completions.push_back(c);
    }
  }
};

[[nodiscard]] transport::SendOp internal(Op op) noexcept;
[[nodiscard]] PostResult public_result(transport::PostResult r) noexcept;
[[nodiscard]] Completion public_completion(const transport::Completion& c) noexcept;
// A region registered in `memory` (the endpoint's, the simulated host's,
// the sans-I/O host's); invalid with `error` for an empty buffer or a full registry.
[[nodiscard]] MemoryRegion register_region(transport::MemoryRegistry& memory, void* addr, std::size_t length,
                                           std::uint32_t access, std::string& error);
// The public mode name into the transport's; false with `error` otherwise.
[[nodiscard]] bool mode_of(const std::string& name, transport::Mode& out, std::string& error);
// A host's counters as the public "host" group.
[[nodiscard]] CounterGroup host_group(const host::HostCounters& counters);

// A connection's counters as name/value pairs.
[[nodiscard]] std::vector<Counter> counter_list(const transport::ConnectionCounters& counters);

// The completions waiting on `host`, each to the public connection its
// transport connection is tagged with. Returns how many.
std::size_t deliver_completions(host::Host& host, std::vector<transport::Completion>& scratch);

using Clock = std::chrono::steady_clock;
[[nodiscard]] inline Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace metaroce
