// fuzz-cm: the connection manager's handshake (lib/cm) fed arbitrary
// management datagrams, mixed with the genuine frames the two ends send
// each other, so the fuzzer explores every state of REQ/REP/RTU/REJ/DREQ/DREP.
//
// Input: records [kind u8][length u16 big-endian][body]:
//   kind bit 7 set: relay: the frames the other end has sent so far are
//                   delivered (the body is ignored)
//   otherwise:      the body is a MAD, wrapped in a UD SEND to QP 1 with a
//                   valid ICRC and delivered
//   bit 0: to the client (else the server); bit 1: 150 ms pass first (REQ
//   retries, timeouts); bits 2-3: which of 4 source addresses sends it;
//   bit 6 (not relay): the client asks to disconnect first.
// Invariants (a violation aborts): every frame an end sends parses and
// decodes as a CM message; every connection the server accepts and every
// connection the client is told about passes transport::validate; a failure
// carries an error message; the server establishes no more connections than
// its application accepted; nothing crashes or leaks.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cm/manager.hpp"
#include "wire/opcode.hpp"

namespace {

using namespace metaroce;

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz-cm: invariant violated: %s\n", what);
  std::abort();
}
void require(bool condition, const char* what) {
  if (!condition) violated(what);
}

constexpr std::uint32_t client_ip = 0x0a000001;
constexpr std::uint32_t server_ip = 0x0a000002;
constexpr std::uint32_t max_connections = 4;

cm::ManagerConfig side(std::uint32_t ip, std::uint8_t mac_last, std::uint64_t seed) {
  cm::ManagerConfig c;
  c.local.local_ipv4 = ip;
  c.local.local_mac = {0x02, 0, 0, 0, 0, mac_last};
  c.seed = seed;
  c.retries = 4;
  c.retry_interval = 100'000'000;
  c.max_connections = max_connections;
  return c;
}

void check_frames(const std::vector<std::vector<std::uint8_t>>& frames) {
  for (const auto& f : frames) {
    wire::ParsedFrame p;
    require(wire::parse_frame(f, p) == wire::ParseError::ok, "an end sent a frame that does not parse");
    cm::Message m;
    require(cm::decode(p, m) == cm::DecodeError::ok, "an end sent a frame that is not a CM message");
  }
}

void deliver(cm::Manager& to, std::uint64_t now, const std::vector<std::uint8_t>& frame) {
  wire::ParsedFrame p;
  if (wire::parse_frame(frame, p) == wire::ParseError::ok) to.on_frame(now, p);
}

std::vector<std::uint8_t> wrap(std::span<const std::uint8_t> mad, std::uint32_t src_ip, std::uint32_t dst_ip) {
  wire::FrameSpec s;
  s.ipv4.src = src_ip;
  s.ipv4.dst = dst_ip;
  s.udp.src_port = 49151;
  s.bth.opcode = wire::opcode::ud | wire::opcode::send_only;
  s.bth.dest_qp = cm::gsi_qpn;
  s.deth.qkey = cm::gsi_qkey;
  s.deth.src_qp = cm::gsi_qpn;
  std::vector<std::uint8_t> frame(wire::headers_size(s) + mad.size() + 8);
  frame.resize(wire::build_frame(s, mad, frame));
  return frame;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cm::Manager server(side(server_ip, 2, 7));
  cm::Manager client(side(client_ip, 1, 11));
  std::uint32_t accepted = 0;
  server.listen([&](const transport::ConnectionConfig& c, const cm::Message& m, std::vector<std::uint8_t>& reply) {
    require(transport::validate(c).empty(), "the server was offered a connection that does not validate");
    ++accepted;
    reply.assign(m.private_data.begin(), m.private_data.end());  // echo: exercises private data both ways
    return (m.sender_qpn & 1) != 0 ? cm::RejectReason::refused : cm::RejectReason::none;
  });
  cm::ConnectRequest request;
  request.connection.mtu = 4096;
  request.connection.paths = 4;
  request.connection.endpoints.peer_ipv4 = server_ip;
  request.private_data = {1, 2, 3};
  std::string error;
  const std::uint64_t id = client.connect(0, request, error);
  require(id != 0, "the genuine connect was refused");

  std::uint64_t now = 0;
  std::vector<std::vector<std::uint8_t>> to_server, to_client;
  std::vector<cm::Event> events;
  const auto turn = [&] {
    std::vector<std::vector<std::uint8_t>> out;
    client.poll(now, out);
    check_frames(out);
    to_server.insert(to_server.end(), out.begin(), out.end());
    out.clear();
    server.poll(now, out);
    check_frames(out);
    to_client.insert(to_client.end(), out.begin(), out.end());
    events.clear();
    client.take_events(events);
    for (const auto& e : events) {
      if (e.kind == cm::EventKind::established)
        require(transport::validate(e.config).empty(), "the client was told of a connection that does not validate");
      require(e.kind != cm::EventKind::failed || !e.error.empty(), "a failure without an error message");
    }
    events.clear();
    server.take_events(events);
    for (const auto& e : events)
      if (e.kind == cm::EventKind::disconnected) server.set_disconnect_reply(static_cast<std::uint32_t>(e.id), {9});
  };

  std::size_t at = 0;
  while (at + 3 <= size) {
    const std::uint8_t kind = data[at];
    const std::size_t length = (std::size_t{data[at + 1]} << 8) | data[at + 2];
    at += 3;
    const std::size_t take = std::min(length, size - at);
    const std::span<const std::uint8_t> body(data + at, take);
    at += take;
    if ((kind & 2) != 0) now += 150'000'000;
    turn();
    const bool to_the_client = (kind & 1) != 0;
    cm::Manager& to = to_the_client ? client : server;
    if ((kind & 0x80) != 0) {
      auto& queue = to_the_client ? to_client : to_server;
      for (const auto& f : queue) deliver(to, now, f);
      queue.clear();
    } else {
      if ((kind & 0x40) != 0) client.disconnect(now, id, {5, 6}, error);
      const std::uint32_t src = (to_the_client ? server_ip : client_ip) + ((kind >> 2) & 3) * 0x100;
      deliver(to, now, wrap(body, src, to_the_client ? client_ip : server_ip));
    }
    turn();
  }
  require(server.counters().established <= accepted, "the server established more than it accepted");
  return 0;
}
