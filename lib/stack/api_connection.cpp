// The public Connection and the public types' helpers
// (include/metaroce/endpoint.hpp, types.hpp).
#include <string>

#include "stack/api_internal.hpp"
#include "wire/byte_order.hpp"

namespace metaroce {

transport::SendOp internal(Op op) noexcept {
  switch (op) {
    case Op::write: return transport::SendOp::write;
    case Op::write_imm: return transport::SendOp::write_imm;
    case Op::send: return transport::SendOp::send;
    case Op::send_imm: return transport::SendOp::send_imm;
    case Op::read: return transport::SendOp::read;
    case Op::fetch_add: return transport::SendOp::fetch_add;
    case Op::compare_swap: return transport::SendOp::compare_swap;
  }
  return transport::SendOp::write;
}

PostResult public_result(transport::PostResult r) noexcept { return static_cast<PostResult>(r); }

// The public enums list the same statuses and kinds in the same order.
static_assert(static_cast<int>(transport::CompletionStatus::count_) ==
              static_cast<int>(Status::local_length_error) + 1);
static_assert(static_cast<int>(transport::CompletionStatus::flushed) == static_cast<int>(Status::flushed));
static_assert(static_cast<int>(transport::CompletionKind::receive_write_imm) ==
              static_cast<int>(CompletionKind::receive_write_imm));
static_assert(static_cast<int>(transport::CompletionKind::atomic) == static_cast<int>(CompletionKind::atomic));

Completion public_completion(const transport::Completion& c) noexcept {
  Completion out;
  out.wr_id = c.wr_id;
  out.status = static_cast<Status>(c.status);
  out.kind = static_cast<CompletionKind>(c.kind);
  out.stream = c.stream;
  out.byte_len = c.byte_len;
  if (c.has_imm) out.imm = c.imm;
  return out;
}

std::vector<Counter> counter_list(const transport::ConnectionCounters& counters) {
  std::vector<Counter> out;
  counters.for_each([&](std::string_view name, std::uint64_t v) { out.push_back({std::string(name), v}); });
  return out;
}

MemoryRegion register_region(transport::MemoryRegistry& memory, void* addr, std::size_t length,
                             std::uint32_t access, std::string& error) {
  if (addr == nullptr || length == 0) {
    error = "register_memory: give a non-empty buffer";
    return {};
  }
  const std::uint32_t key = memory.register_region(addr, length, access);
  if (key == 0) {
    error = "register_memory: the registry is full: deregister regions no longer in use";
    return {};
  }
  return MemoryRegion{addr, length, key};
}

bool mode_of(const std::string& name, transport::Mode& out, std::string& error) {
  if (transport::mode_from_string(name, out)) return true;
  error = "mode '" + name + "' is not one: give metaroce or rocev2";
  return false;
}

CounterGroup host_group(const host::HostCounters& counters) {
  CounterGroup g;
  g.name = "host";
  counters.visit([&](const std::string& name, std::uint64_t v) { g.counters.push_back({name, v}); });
  return g;
}

std::size_t deliver_completions(host::Host& host, std::vector<transport::Completion>& scratch) {
  return host.poll_completions(scratch, [](transport::Connection& c, std::vector<transport::Completion>& done) {
    auto* owner = reinterpret_cast<Connection*>(c.user_tag());
    if (owner == nullptr) return;  // not one of the public API's
    for (const auto& t : done) owner->impl().deliver(public_completion(t));
  });
}

std::unique_ptr<Connection> Connection::Impl::wrap(ConnectionOwner& owner, transport::Connection& c,
                                                   std::vector<std::uint8_t> peer_private_data) {
  auto impl = std::make_unique<Impl>();
  impl->owner = &owner;
  impl->connection = &c;
  impl->peer_private_data = std::move(peer_private_data);
  auto out = std::make_unique<Connection>(std::move(impl));
  c.set_user_tag(reinterpret_cast<std::uint64_t>(out.get()));
  return out;
}

std::vector<std::uint8_t> encode_remote_buffer(const RemoteBuffer& b) {
  std::vector<std::uint8_t> bytes(20);
  wire::store_be64(bytes.data(), b.addr);
  wire::store_be64(bytes.data() + 8, b.length);
  wire::store_be32(bytes.data() + 16, b.rkey);
  return bytes;
}

bool decode_remote_buffer(const std::vector<std::uint8_t>& bytes, RemoteBuffer& out) noexcept {
  if (bytes.size() < 20) return false;
  out.addr = wire::load_be64(bytes.data());
  out.length = wire::load_be64(bytes.data() + 8);
  out.rkey = wire::load_be32(bytes.data() + 16);
  return true;
}

// The public PostResult lists the transport's results in the same order.
static_assert(static_cast<int>(transport::PostResult::no_resources) == static_cast<int>(PostResult::no_resources));
static_assert(static_cast<int>(transport::PostResult::queue_full) == static_cast<int>(PostResult::queue_full));
static_assert(static_cast<int>(transport::PostResult::bad_length) == static_cast<int>(PostResult::bad_length));

std::string_view to_string(PostResult r) noexcept {
  return transport::to_string(static_cast<transport::PostResult>(r));
}

std::string_view to_string(Status s) noexcept {
  return transport::to_string(static_cast<transport::CompletionStatus>(s));
}

Connection::Connection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Connection::~Connection() {
  if (impl_ && impl_->connection != nullptr) impl_->connection->set_user_tag(0);
}

PostResult Connection::post_send(const SendWork& w) {
  transport::SendRequest r;
  r.wr_id = w.wr_id;
  r.op = internal(w.op);
  r.stream = w.stream;
  r.local_addr = static_cast<const std::uint8_t*>(w.local);
  r.length = w.length;
  r.lkey = w.lkey;
  r.remote_addr = w.remote_addr;
  r.rkey = w.rkey;
  r.imm = w.imm;
  r.swap_add = w.swap_add;
  r.compare = w.compare;
  return public_result(impl_->connection->post_send(r));
}

PostResult Connection::post_receive(const ReceiveWork& w) {
  transport::ReceiveRequest r;
  r.wr_id = w.wr_id;
  r.stream = w.stream;
  r.addr = static_cast<std::uint8_t*>(w.addr);
  r.length = w.length;
  r.lkey = w.lkey;
  return public_result(impl_->connection->post_receive(r));
}

std::size_t Connection::poll_completions(Completion* out, std::size_t max) {
  std::size_t n = 0;
  while (n < max && !impl_->completions.empty()) {
    out[n++] = impl_->completions.front();
    impl_->completions.pop_front();
  }
  return n;
}

bool Connection::wait_completion(Completion& out, double timeout_s) {
  if (!impl_->owner->turn_until([&] { return !impl_->completions.empty(); }, timeout_s)) return false;
  return poll_completions(&out, 1) == 1;
}

void Connection::set_completion_handler(std::function<void(const Completion&)> handler) {
  impl_->handler = std::move(handler);
  if (!impl_->handler) return;
  while (!impl_->completions.empty()) {  // what was queued goes first, in order
    const Completion c = impl_->completions.front();
    impl_->completions.pop_front();
    impl_->handler(c);
  }
}

const std::vector<std::uint8_t>& Connection::peer_private_data() const noexcept { return impl_->peer_private_data; }
std::uint32_t Connection::qpn() const noexcept { return impl_->connection->config().local_qpn; }
std::uint32_t Connection::peer_qpn() const noexcept { return impl_->connection->config().peer_qpn; }
std::uint32_t Connection::initial_psn() const noexcept { return impl_->connection->config().initial_psn; }
bool Connection::failed() const noexcept { return impl_->connection->state() == transport::ConnectionState::error; }
bool Connection::closed_by_peer() const noexcept { return impl_->closed_by_peer; }
const std::vector<std::uint8_t>& Connection::peer_close_data() const noexcept { return impl_->peer_close_data; }

void Connection::set_close_reply(std::vector<std::uint8_t> data) {
  impl_->close_reply = std::move(data);
  if (impl_->closed_by_peer && impl_->on_close_reply) impl_->on_close_reply(impl_->close_reply);
}

PathStats public_path(const transport::PathInfo& p) noexcept {
  PathStats out;
  out.failed = p.state == transport::PathState::failed;
  out.src_port = p.src_port;
  out.in_flight = p.in_flight;
  out.srtt_ns = p.srtt;
  out.rto_ns = p.rto;
  out.sent = p.sent;
  out.resent = p.retransmitted;
  out.declared_lost = p.declared_lost;
  out.timeouts = p.timeouts;
  out.ce_marks = p.ce_marks;
  out.port_changes = p.entropy_changes;
  return out;
}

std::vector<PathStats> Connection::paths() const {
  std::vector<PathStats> out;
  const transport::Connection& c = *impl_->connection;
  for (std::uint16_t p = 0; p < c.config().paths; ++p) out.push_back(public_path(c.path_info(p)));
  return out;
}
std::vector<PlaneStats> Connection::planes() const {
  std::vector<PlaneStats> out;
  const transport::Connection& c = *impl_->connection;
  for (std::uint16_t k = 0; k < c.config().planes; ++k) {
    const transport::PlaneInfo info = c.plane_info(k);
    out.push_back(PlaneStats{info.state == transport::PlaneState::failed, info.link_down, info.data_packets,
                             info.retransmits, info.failures});
  }
  return out;
}
std::uint16_t Connection::streams() const noexcept { return impl_->connection->config().streams; }
std::uint32_t Connection::mtu() const noexcept { return impl_->connection->config().mtu; }
std::string Connection::mode() const { return std::string(transport::to_string(impl_->connection->config().mode)); }

CounterGroup Connection::counters() const { return {"connection", counter_list(impl_->connection->counters())}; }

}  // namespace metaroce
