// A WRITE client: it connects to a write_server, learns where its buffer
// is from the connection reply, fills it with RDMA WRITEs and says it is
// done with a WRITE_WITH_IMMEDIATE.
//
//   write_client PORT LOCAL_IP SERVER_IP SERVER_MAC|- [EAL arguments...]
//   write_client net_memif0 10.0.0.1 10.0.0.2 02:00:00:00:00:02 --vdev net_memif0,role=client,socket=/tmp/wr.sock
//   write_client net_memif0 fd00::1 fd00::2 - --vdev net_memif0,role=client,socket=/tmp/wr.sock
// With "-" for the MAC, the endpoint asks for it (ARP, or IPv6 neighbour
// solicitation); the server's endpoint answers.
#include <metaroce/metaroce.hpp>

#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s PORT LOCAL_IP SERVER_IP SERVER_MAC|- [EAL arguments...]\n", argv[0]);
    return 2;
  }
  metaroce::EndpointConfig config;
  config.port = argv[1];
  config.local_ip = argv[2];
  config.eal_args.assign(argv + 5, argv + argc);
  config.program = "write_client";
  std::string error;
  auto endpoint = metaroce::Endpoint::open(config, error);
  if (!endpoint) {
    std::fprintf(stderr, "write_client: %s\n", error.c_str());
    return 1;
  }

  // The connection sprays its packets over 4 paths (UDP source ports);
  // each path has its own sequence and SACK, so a lost packet is resent
  // alone, whatever order the others arrive in.
  metaroce::ConnectOptions options;
  if (std::string(argv[4]) != "-") options.peer_mac = argv[4];
  options.paths = 4;
  metaroce::Connection* connection = endpoint->connect(argv[3], options, error);
  if (connection == nullptr) {
    std::fprintf(stderr, "write_client: %s\n", error.c_str());
    return 1;
  }
  metaroce::RemoteBuffer target;
  if (!metaroce::decode_remote_buffer(connection->peer_private_data(), target)) {
    std::fprintf(stderr, "write_client: the server's reply names no buffer: is it a write_server?\n");
    return 1;
  }

  // The source bytes must stay registered and unchanged until their WRITE
  // completes: the transport reads them again to resend what was lost.
  std::vector<std::uint8_t> source(target.length);
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<std::uint8_t>(i * 7 + 1);
  const metaroce::MemoryRegion region =
      endpoint->register_memory(source.data(), source.size(), metaroce::access_local_write, error);

  // 16 WRITEs of 64 KiB; the last one carries an immediate, which the
  // server's posted receive turns into its completion.
  const std::size_t chunk = source.size() / 16;
  for (std::size_t k = 0; k < 16; ++k) {
    metaroce::SendWork w;
    w.wr_id = k;
    w.op = k == 15 ? metaroce::Op::write_imm : metaroce::Op::write;
    w.local = source.data() + k * chunk;
    w.length = chunk;
    w.lkey = region.key;
    w.remote_addr = target.addr + k * chunk;
    w.rkey = target.rkey;
    w.imm = 0x600d;
    const metaroce::PostResult posted = connection->post_send(w);
    if (posted != metaroce::PostResult::ok) {
      std::fprintf(stderr, "write_client: post %zu: %s\n", k, std::string(metaroce::to_string(posted)).c_str());
      return 1;
    }
  }
  for (std::size_t k = 0; k < 16; ++k) {
    metaroce::Completion c;
    if (!connection->wait_completion(c, 30.0) || c.status != metaroce::Status::success) {
      std::fprintf(stderr, "write_client: WRITE %zu did not complete\n", k);
      return 1;
    }
  }
  const metaroce::CounterGroup counters = connection->counters();
  std::printf("write_client: wrote %zu bytes in 16 WRITEs, %llu data packets, %llu resent\n", source.size(),
              static_cast<unsigned long long>(counters.get("data_packets_sent")),
              static_cast<unsigned long long>(counters.get("retransmitted_packets")));
  if (!endpoint->close(connection, error)) std::fprintf(stderr, "write_client: close: %s\n", error.c_str());
  endpoint.reset();
  metaroce::release_eal();
  return 0;
}
