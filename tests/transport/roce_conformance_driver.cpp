// A rocev2 connection (RoceConnection) driven by a capture file, in virtual
// time: the conformance suite (tests/transport/check_conformance.py) builds
// the frames a peer sends, this program hands them to the connection at
// their timestamps and writes every frame the connection emits to another
// capture, stamped with the virtual time it was emitted at. Completions and
// the non-zero counters go to stdout as JSON lines.
//
// usage: roce-conformance-driver --info
//        roce-conformance-driver IN.pcap OUT.pcap [options]
//   --expect-psn N   the first PSN the peer sends (default 0)
//   --psn N          our first PSN (default 0x200)
//   --receives N     receives of 1024 bytes posted at time 0 (default 0)
//   --receive-at T   one more receive posted at virtual time T ns (repeatable)
//   --post OP:LEN    a request of ours posted at time 0 (write, write-imm,
//                    send, read), to the peer's buffer (repeatable)
//   --ack-every N    config.ack_every_packets (default 16)
//   --ack-delay NS   config.ack_delay (default 4000)
//   --until NS       run until this virtual time (default: last frame + 1 ms)
// The connection: QPN 0x22, peer QPN 0x11, MTU 256, P_Key 0xffff, 10.0.0.2
// (02:00:00:00:00:02) to 10.0.0.1 (02:00:00:00:00:01); a 64 KiB region at
// virtual address 0x100000000 registered for remote READ and WRITE (--info
// prints its rkey); the peer's buffer is 0x200000000, rkey 0x77.
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/pcap_file.hpp"
#include "timer/wheel.hpp"
#include "transport/connection.hpp"
#include "transport/memory_region.hpp"
#include "wire/frame.hpp"

namespace {

using namespace metaroce;
using namespace metaroce::transport;

constexpr std::uint64_t region_va = 0x100000000ull;
constexpr std::size_t region_size = 64 * 1024;
constexpr std::uint64_t peer_va = 0x200000000ull;
constexpr std::uint32_t peer_rkey = 0x77;

int usage(const char* what) {
  std::fprintf(stderr, "roce-conformance-driver: %s (see the comment at the top of the source)\n", what);
  return 2;
}

bool parse_op(const std::string& name, SendOp& out) {
  for (std::size_t i = 0; i < send_op_names.size(); ++i)
    if (name == send_op_names[i]) {
      out = static_cast<SendOp>(i);
      return true;
    }
  return false;
}

bool parse_u64(const char* s, std::uint64_t& out) {
  char* end = nullptr;
  out = std::strtoull(s, &end, 0);
  return end != s && *end == '\0';
}

struct Driver {
  MemoryRegistry memory;
  timer::Wheel wheel{0};
  std::unique_ptr<Connection> conn;
  std::uint8_t* region = nullptr;
  std::uint32_t rkey = 0;
  std::vector<std::uint8_t> local;  // our requests' source / READ destination
  std::uint32_t local_key = 0;
  apps::PcapWriter out;
  std::uint64_t emitted = 0;

  bool setup(const ConnectionConfig& config, std::string& error) {
    void* p = mmap(reinterpret_cast<void*>(region_va), region_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != reinterpret_cast<void*>(region_va)) {
      error = "cannot map the region at 0x100000000";
      return false;
    }
    region = static_cast<std::uint8_t*>(p);
    for (std::size_t i = 0; i < region_size; ++i) region[i] = static_cast<std::uint8_t>(i * 7 + 3);
    rkey = memory.register_region(region, region_size,
                                  access_local_write | access_remote_write | access_remote_read);
    local.assign(region_size, 0);
    for (std::size_t i = 0; i < local.size(); ++i) local[i] = static_cast<std::uint8_t>(i * 13 + 1);
    local_key = memory.register_region(local.data(), local.size(), access_local_write);
    conn = Connection::create(config, memory, wheel, nullptr, error);
    if (!conn) return false;
    conn->connect();
    return true;
  }

  bool drain(Time now) {
    wheel.advance(now);
    TxBatch batch;
    conn->poll(now, batch);
    std::vector<std::uint8_t> frame;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      frame.clear();
      batch.serialize(i, frame);
      if (!out.write(frame, now)) return false;
      ++emitted;
    }
    return true;
  }

  void print_completions() {
    std::vector<Completion> done;
    conn->poll_completions(done);
    for (const Completion& c : done)
      std::printf("{\"completion\": %llu, \"status\": \"%s\", \"kind\": %u, \"byte_len\": %llu, \"imm\": %u}\n",
                  static_cast<unsigned long long>(c.wr_id), std::string(to_string(c.status)).c_str(),
                  static_cast<unsigned>(c.kind), static_cast<unsigned long long>(c.byte_len),
                  c.has_imm ? c.imm : 0u);
  }
};

}  // namespace

int main(int argc, char** argv) {
  ConnectionConfig config;
  config.mode = Mode::rocev2;
  config.mtu = 256;
  config.local_qpn = 0x22;
  config.peer_qpn = 0x11;
  config.initial_psn = 0x200;
  config.peer_initial_psn = 0;
  config.endpoints.local_mac = {2, 0, 0, 0, 0, 2};
  config.endpoints.peer_mac = {2, 0, 0, 0, 0, 1};
  config.endpoints.local_ipv4 = 0x0a000002;
  config.endpoints.peer_ipv4 = 0x0a000001;
  config.max_outstanding_reads = 16;

  if (argc == 2 && std::string_view(argv[1]) == "--info") {
    Driver d;
    std::string error;
    if (!d.setup(config, error)) return usage(error.c_str());
    std::printf("{\"va\": %llu, \"rkey\": %u, \"peer_va\": %llu, \"peer_rkey\": %u, \"mtu\": %u}\n",
                static_cast<unsigned long long>(region_va), d.rkey, static_cast<unsigned long long>(peer_va),
                peer_rkey, config.mtu);
    return 0;
  }
  if (argc < 3) return usage("needs IN.pcap OUT.pcap");
  std::uint64_t receives = 0, until = 0;
  std::vector<std::uint64_t> receive_at;
  std::vector<std::pair<SendOp, std::uint64_t>> posts;
  for (int i = 3; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) return usage("an option needs a value");
    const char* v = argv[++i];
    std::uint64_t n = 0;
    if (a == "--post") {
      const std::string s = v;
      const auto colon = s.find(':');
      SendOp op{};
      if (colon == std::string::npos || !parse_op(s.substr(0, colon), op) ||
          !parse_u64(s.substr(colon + 1).c_str(), n))
        return usage("--post OP:LEN");
      posts.emplace_back(op, n);
      continue;
    }
    if (!parse_u64(v, n)) return usage("not a number");
    if (a == "--expect-psn") {
      config.peer_initial_psn = static_cast<std::uint32_t>(n);
    } else if (a == "--psn") {
      config.initial_psn = static_cast<std::uint32_t>(n);
    } else if (a == "--receives") {
      receives = n;
    } else if (a == "--receive-at") {
      receive_at.push_back(n);
    } else if (a == "--ack-every") {
      config.ack_every_packets = static_cast<std::uint32_t>(n);
    } else if (a == "--ack-delay") {
      config.ack_delay = n;
    } else if (a == "--until") {
      until = n;
    } else {
      return usage("unknown option");
    }
  }

  Driver d;
  std::string error;
  if (!d.setup(config, error)) return usage(error.c_str());
  if (!d.out.open(argv[2], error)) return usage(error.c_str());
  apps::PcapReader in;
  if (!in.open(argv[1], error)) return usage(error.c_str());

  std::uint64_t next_wr = 1;
  const auto post_receive = [&] {
    const std::uint64_t offset = 1024 * (next_wr % 32);
    if (d.conn->post_receive(ReceiveRequest{next_wr, 0, d.region + offset, 1024, d.rkey}) != PostResult::ok)
      std::printf("{\"error\": \"receive refused\"}\n");
    ++next_wr;
  };
  for (std::uint64_t i = 0; i < receives; ++i) post_receive();
  std::uint64_t local_offset = 0;
  for (const auto& [op, len] : posts) {
    SendRequest r;
    r.wr_id = 1000 + next_wr++;
    r.op = op;
    r.local_addr = d.local.data() + local_offset;
    r.length = len;
    r.lkey = d.local_key;
    r.remote_addr = peer_va + local_offset;
    r.rkey = peer_rkey;
    r.imm = 0x1234;
    local_offset += (len + 255) & ~std::uint64_t{255};
    const PostResult res = d.conn->post_send(r);
    if (res != PostResult::ok)
      std::printf("{\"error\": \"post refused: %s\"}\n", std::string(to_string(res)).c_str());
  }
  Time now = 0;
  if (!d.drain(now)) return usage("cannot write the output capture");

  // Time advances in steps of at most 1 us between frames, so timers fire
  // close to when they are due.
  const auto advance_to = [&](Time t) {
    while (now < t) {
      now = std::min<Time>(t, now + 1000);
      for (auto it = receive_at.begin(); it != receive_at.end();) {
        if (*it <= now) {
          post_receive();
          it = receive_at.erase(it);
        } else {
          ++it;
        }
      }
      if (!d.drain(now)) return false;
    }
    return true;
  };
  apps::PcapRecord record;
  std::uint64_t frames = 0, unparsed = 0;
  while (in.next(record)) {
    if (!advance_to(record.timestamp_ns)) return usage("cannot write the output capture");
    wire::ParsedFrame parsed;
    const std::vector<std::uint8_t> bytes(record.data.begin(), record.data.end());
    ++frames;
    if (wire::parse_frame(bytes, parsed) != wire::ParseError::ok) {
      ++unparsed;
      continue;
    }
    d.conn->on_frame(now, parsed);
    if (!d.drain(now)) return usage("cannot write the output capture");
  }
  if (!in.error().empty()) return usage(in.error().c_str());
  if (until == 0) until = now + 1'000'000;
  if (!advance_to(until)) return usage("cannot write the output capture");
  if (!d.out.close()) return usage("cannot write the output capture");
  d.print_completions();
  std::printf("{\"frames_in\": %llu, \"unparsed\": %llu, \"frames_out\": %llu, \"state\": \"%s\"}\n",
              static_cast<unsigned long long>(frames), static_cast<unsigned long long>(unparsed),
              static_cast<unsigned long long>(d.emitted), std::string(to_string(d.conn->state())).c_str());
  std::string counters = "{\"counters\": {";
  bool first = true;
  d.conn->counters().for_each([&](std::string_view name, std::uint64_t value) {
    if (value == 0) return;
    counters += (first ? "\"" : ", \"") + std::string(name) + "\": " + std::to_string(value);
    first = false;
  });
  std::printf("%s}}\n", counters.c_str());
  return 0;
}
