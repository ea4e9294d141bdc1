// A WRITE server: it offers one buffer to the network, lets a client fill
// it with RDMA WRITEs, and checks every byte when the client says it is done
// (with a WRITE_WITH_IMMEDIATE, which also consumes a posted receive).
//
//   write_server PORT LOCAL_IP [EAL arguments...]
//   write_server net_memif0 10.0.0.2 --vdev net_memif0,role=server,socket=/tmp/wr.sock
#include <metaroce/metaroce.hpp>

#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s PORT LOCAL_IP [EAL arguments...]\n", argv[0]);
    return 2;
  }
  // One port, driven by this thread. EAL starts here, with the arguments
  // that create the port; the library adds what they leave out (no
  // hugepages needed, no PCI scan).
  metaroce::EndpointConfig config;
  config.port = argv[1];
  config.local_ip = argv[2];
  config.eal_args.assign(argv + 3, argv + argc);
  config.program = "write_server";
  std::string error;
  auto endpoint = metaroce::Endpoint::open(config, error);
  if (!endpoint) {
    std::fprintf(stderr, "write_server: %s\n", error.c_str());
    return 1;
  }

  // The bytes the client may write: registered for remote writes, so a
  // packet that names them by key lands straight in place. Anything else it
  // names is refused and counted; it never writes outside this buffer.
  std::vector<std::uint8_t> buffer(1 << 20, 0);
  const metaroce::MemoryRegion region = endpoint->register_memory(
      buffer.data(), buffer.size(), metaroce::access_local_write | metaroce::access_remote_write, error);

  // Every connection request gets the buffer's address, length and key in
  // its reply: the client needs nothing else to write into it. The
  // connection exists already, so receives could be posted here, before
  // the client's first packet.
  endpoint->listen([&](const metaroce::IncomingRequest& request, metaroce::Connection&,
                       std::vector<std::uint8_t>& reply) {
    std::printf("write_server: connection request from %s\n", request.peer_ip.c_str());
    reply = metaroce::encode_remote_buffer({reinterpret_cast<std::uintptr_t>(buffer.data()), buffer.size(), region.key});
    return metaroce::Verdict::accept;
  });
  std::printf("write_server: listening on %s (MAC %s, %s)\n", endpoint->port_name().c_str(),
              endpoint->mac().c_str(), config.local_ip.c_str());
  std::fflush(stdout);
  metaroce::Connection* connection = endpoint->accept(60.0, error);
  if (connection == nullptr) {
    std::fprintf(stderr, "write_server: %s\n", error.c_str());
    return 1;
  }

  // A WRITE_WITH_IMMEDIATE consumes a posted receive: post one (no bytes:
  // the data goes where the client's WRITE said) and wait for it.
  connection->post_receive({.wr_id = 1, .stream = 0, .addr = nullptr, .length = 0, .lkey = 0});
  metaroce::Completion done;
  if (!connection->wait_completion(done, 60.0) || done.status != metaroce::Status::success) {
    std::fprintf(stderr, "write_server: no WRITE_WITH_IMMEDIATE arrived\n");
    return 1;
  }

  // Completions are in order per stream, so every WRITE the client posted
  // before the one with the immediate has been placed. Check each byte.
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < buffer.size(); ++i)
    if (buffer[i] != static_cast<std::uint8_t>(i * 7 + 1)) ++wrong;
  std::printf("write_server: immediate %#x, %zu bytes, %zu wrong\n", done.imm.value_or(0), buffer.size(), wrong);

  // The client closes; then this end goes too.
  endpoint->run_until([&] { return connection->closed_by_peer(); }, 10.0);
  endpoint->close(connection, error);
  std::printf("write_server: %s\n", wrong == 0 ? "verified" : "MISMATCH");
  // The endpoint goes (its last answers leave, its port stops), then DPDK
  // lets go of what it holds, before its threads could outlive main.
  endpoint.reset();
  metaroce::release_eal();
  return wrong == 0 ? 0 : 1;
}
