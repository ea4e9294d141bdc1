// SEND/RECV ping-pong: the client SENDs a 64-byte message, the server
// SENDs it back; repeated, timed. A SEND lands in the receive the other
// side posted (on the same stream), so each side keeps one posted.
//
//   ping_pong server PORT LOCAL_IP [EAL arguments...]
//   ping_pong client PORT LOCAL_IP SERVER_IP SERVER_MAC [EAL arguments...]
#include <metaroce/metaroce.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const bool client = argc >= 6 && std::strcmp(argv[1], "client") == 0;
  if (!client && !(argc >= 4 && std::strcmp(argv[1], "server") == 0)) {
    std::fprintf(stderr, "usage: %s server PORT LOCAL_IP [EAL...]\n"
                         "       %s client PORT LOCAL_IP SERVER_IP SERVER_MAC [EAL...]\n", argv[0], argv[0]);
    return 2;
  }
  metaroce::EndpointConfig config;
  config.port = argv[2];
  config.local_ip = argv[3];
  config.eal_args.assign(argv + (client ? 6 : 4), argv + argc);
  config.program = client ? "ping_client" : "ping_server";
  std::string error;
  auto endpoint = metaroce::Endpoint::open(config, error);
  if (!endpoint) {
    std::fprintf(stderr, "ping_pong: %s\n", error.c_str());
    return 1;
  }
  metaroce::Connection* connection = nullptr;
  if (client) {
    metaroce::ConnectOptions options;
    options.peer_mac = argv[5];
    options.paths = 1;  // one message in flight: nothing to spray
    connection = endpoint->connect(argv[4], options, error);
  } else {
    endpoint->listen();  // accept anyone
    connection = endpoint->accept(60.0, error);
  }
  if (connection == nullptr) {
    std::fprintf(stderr, "ping_pong: %s\n", error.c_str());
    return 1;
  }

  // One buffer for what arrives, one for what leaves; both registered.
  char in[64] = {}, out[64] = {};
  const auto in_region = endpoint->register_memory(in, sizeof in, metaroce::access_local_write, error);
  const auto out_region = endpoint->register_memory(out, sizeof out, metaroce::access_local_write, error);
  const auto post_receive = [&] { connection->post_receive({1, 0, in, sizeof in, in_region.key}); };
  const auto send = [&] {
    metaroce::SendWork w;
    w.op = metaroce::Op::send;
    w.local = out;
    w.length = sizeof out;
    w.lkey = out_region.key;
    return connection->post_send(w) == metaroce::PostResult::ok;
  };
  // Waits for the completion of `kind`; the other kind (our SEND's) is taken on the way.
  const auto wait_for = [&](metaroce::CompletionKind kind) {
    metaroce::Completion c;
    while (connection->wait_completion(c, 5.0))
      if (c.kind == kind) return c.status == metaroce::Status::success;
    return false;
  };

  constexpr int rounds = 1000;
  std::vector<double> rtt_us;
  post_receive();  // before the peer's first SEND can arrive
  for (int i = 0; i < rounds; ++i) {
    if (client) {
      std::snprintf(out, sizeof out, "ping %d", i);
      const auto start = std::chrono::steady_clock::now();
      if (!send() || !wait_for(metaroce::CompletionKind::receive)) break;
      rtt_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
      if (std::strncmp(in, out, sizeof out) != 0) break;  // the echo must be our message
      post_receive();
    } else {
      if (!wait_for(metaroce::CompletionKind::receive)) break;
      std::memcpy(out, in, sizeof out);
      post_receive();  // for the next ping, before this pong leaves
      if (!send()) break;
    }
  }
  if (client) {
    std::sort(rtt_us.begin(), rtt_us.end());
    const metaroce::CounterGroup counters = connection->counters();
    std::printf("ping_pong: %zu of %d round trips, median %.1f us, %llu packets resent\n", rtt_us.size(), rounds,
                rtt_us.empty() ? 0.0 : rtt_us[rtt_us.size() / 2],
                static_cast<unsigned long long>(counters.get("retransmitted_packets")));
    endpoint->close(connection, error);
    endpoint.reset();
    metaroce::release_eal();
    return rtt_us.size() == rounds ? 0 : 1;
  }
  endpoint->run_until([&] { return connection->closed_by_peer(); }, 10.0);
  endpoint->close(connection, error);
  std::printf("ping_pong: echoed %d messages\n", rounds);
  endpoint.reset();
  metaroce::release_eal();
  return 0;
}
