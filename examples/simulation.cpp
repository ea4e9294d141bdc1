// Two connections through a lossy simulated fabric, in virtual time: the
// same transport code an endpoint runs over DPDK, with no port and no
// clock. Each connection WRITEs 64 MiB over 8 paths while 1% of the
// frames are lost each way; only the lost ones are resent.
//
//   simulation [LOSS]     (default 0.01)
#include <metaroce/metaroce.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  metaroce::SimulatedLink link;  // 100 Gb/s, 5 us one way, 8 ECMP paths
  link.loss = argc > 1 ? std::atof(argv[1]) : 0.01;
  metaroce::SimulatedLink back = link;
  back.seed = 2;  // the other direction draws its own losses
  metaroce::Simulation simulation(link, back);

  constexpr std::size_t bytes = 64u << 20, message = 1u << 20;
  std::vector<std::uint8_t> source(bytes, 0x5a), sink_one(bytes, 0), sink_two(bytes, 0);
  std::string error;
  const auto src = simulation.register_memory(metaroce::Simulation::Side::a, source.data(), bytes,
                                              metaroce::access_local_write, error);
  const auto dst_one = simulation.register_memory(metaroce::Simulation::Side::b, sink_one.data(), bytes,
                                                  metaroce::access_remote_write, error);
  const auto dst_two = simulation.register_memory(metaroce::Simulation::Side::b, sink_two.data(), bytes,
                                                  metaroce::access_remote_write, error);

  // Each pair: the sending end on host a, the receiving end on host b.
  const auto one = simulation.connect({}, error);
  const auto two = simulation.connect({}, error);
  if (one.first == nullptr || two.first == nullptr) {
    std::fprintf(stderr, "simulation: %s\n", error.c_str());
    return 1;
  }

  // 64 WRITEs of 1 MiB per connection, all posted at once; the transport
  // paces them by its congestion windows.
  std::size_t completed = 0;
  for (auto [sender, sink] : {std::pair{one.first, &dst_one}, std::pair{two.first, &dst_two}}) {
    sender->set_completion_handler([&](const metaroce::Completion& c) {
      if (c.status == metaroce::Status::success) ++completed;
    });
    for (std::size_t k = 0; k < bytes / message; ++k) {
      metaroce::SendWork w;
      w.wr_id = k;
      w.local = source.data() + k * message;
      w.length = message;
      w.lkey = src.key;
      w.remote_addr = reinterpret_cast<std::uintptr_t>(sink->addr) + k * message;
      w.rkey = sink->key;
      if (sender->post_send(w) != metaroce::PostResult::ok) return 1;
    }
  }
  const std::size_t total = 2 * bytes / message;
  if (!simulation.run_until([&] { return completed == total; }, 10.0)) {
    std::fprintf(stderr, "simulation: %zu of %zu WRITEs completed\n", completed, total);
    return 1;
  }
  const double seconds = static_cast<double>(simulation.now_ns()) / 1e9;
  const bool intact = sink_one == source && sink_two == source;
  const auto counters = simulation.counters(metaroce::Simulation::Side::a);
  std::printf("simulation: loss %.3f, %zu MiB in %.3f ms of virtual time: %.1f Gb/s goodput, "
              "%llu of %llu data packets resent, bytes %s\n",
              link.loss, 2 * bytes >> 20, seconds * 1e3, 2.0 * bytes * 8 / seconds / 1e9,
              static_cast<unsigned long long>(counters[1].get("retransmitted_packets")),
              static_cast<unsigned long long>(counters[1].get("data_packets_sent")), intact ? "intact" : "WRONG");
  return intact ? 0 : 1;
}
