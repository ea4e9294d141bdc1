// The public API's promises, in virtual time (metaroce::Simulation): bytes
// placed exactly, completions in order per stream, post results, the
// completion handler, counters, determinism; and the helpers of types.hpp.
// Everything here includes only <metaroce/...>.
#include <metaroce/metaroce.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace {

using metaroce::Simulation;

TEST(PublicTypes, RemoteBufferRoundTripsAndShortBytesAreRefused) {
  const metaroce::RemoteBuffer b{0x0102030405060708, 0x1122334455667788, 0xa1b2c3d4};
  const std::vector<std::uint8_t> bytes = metaroce::encode_remote_buffer(b);
  ASSERT_EQ(bytes.size(), 20u);
  EXPECT_EQ(bytes[0], 0x01);   // big-endian
  EXPECT_EQ(bytes[19], 0xd4);
  metaroce::RemoteBuffer out;
  ASSERT_TRUE(metaroce::decode_remote_buffer(bytes, out));
  EXPECT_EQ(out.addr, b.addr);
  EXPECT_EQ(out.length, b.length);
  EXPECT_EQ(out.rkey, b.rkey);
  EXPECT_FALSE(metaroce::decode_remote_buffer(std::vector<std::uint8_t>(bytes.begin(), bytes.end() - 1), out));
}

TEST(PublicTypes, NamesOfResultsAndStatuses) {
  EXPECT_EQ(metaroce::to_string(metaroce::PostResult::queue_full), "queue_full");
  EXPECT_EQ(metaroce::to_string(metaroce::PostResult::no_resources), "no_resources");
  EXPECT_EQ(metaroce::to_string(metaroce::Status::success), "success");
  EXPECT_EQ(metaroce::to_string(metaroce::Status::flushed), "flushed");
  EXPECT_EQ(metaroce::to_string(metaroce::Status::local_length_error), "local_length_error");
  EXPECT_STREQ(metaroce::version_string, "0.1.0");
}

struct Pair {
  Simulation sim;
  metaroce::Connection* a = nullptr;
  metaroce::Connection* b = nullptr;
  explicit Pair(double loss, metaroce::SimulatedConnectOptions options = {})
      : sim(link(loss, 1), link(loss, 2)) {
    std::string error;
    const auto p = sim.connect(options, error);
    a = p.first;
    b = p.second;
    EXPECT_NE(a, nullptr) << error;
  }
  static metaroce::SimulatedLink link(double loss, std::uint64_t seed) {
    metaroce::SimulatedLink l;
    l.loss = loss;
    l.seed = seed;
    return l;
  }
};

std::uint8_t pattern(std::size_t i) { return static_cast<std::uint8_t>(i * 13 + 5); }

metaroce::SimulatedConnectOptions two_streams() {
  metaroce::SimulatedConnectOptions o;
  o.streams = 2;
  return o;
}

// 8 WRITEs of 64 KiB on 2 streams; returns the completions in the order they came.
std::vector<metaroce::Completion> write_all(Pair& p, std::vector<std::uint8_t>& src, std::vector<std::uint8_t>& dst) {
  std::string error;
  const auto s = p.sim.register_memory(Simulation::Side::a, src.data(), src.size(), metaroce::access_local_write, error);
  const auto d = p.sim.register_memory(Simulation::Side::b, dst.data(), dst.size(), metaroce::access_remote_write, error);
  EXPECT_TRUE(s.valid() && d.valid()) << error;
  const std::size_t chunk = src.size() / 8;
  for (std::size_t k = 0; k < 8; ++k) {
    metaroce::SendWork w;
    w.wr_id = 100 + k;
    w.stream = static_cast<std::uint16_t>(k % 2);
    w.local = src.data() + k * chunk;
    w.length = chunk;
    w.lkey = s.key;
    w.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data()) + k * chunk;
    w.rkey = d.key;
    EXPECT_EQ(p.a->post_send(w), metaroce::PostResult::ok);
  }
  std::vector<metaroce::Completion> got;
  EXPECT_TRUE(p.sim.run_until([&] {
    metaroce::Completion c;
    while (p.a->poll_completions(&c, 1) == 1) got.push_back(c);
    return got.size() == 8;
  }, 1.0));
  return got;
}

TEST(PublicSimulation, WritesArePlacedExactlyAndCompleteInOrderPerStream) {
  Pair p(0.0, two_streams());
  std::vector<std::uint8_t> src(8 * 65536), dst(src.size(), 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = pattern(i);
  const auto got = write_all(p, src, dst);
  ASSERT_EQ(got.size(), 8u);
  std::vector<std::uint64_t> next = {100, 101};  // stream 0: 100, 102, ...; stream 1: 101, 103, ...
  for (const auto& c : got) {
    EXPECT_EQ(c.status, metaroce::Status::success);
    EXPECT_EQ(c.kind, metaroce::CompletionKind::write);
    EXPECT_EQ(c.wr_id, next[c.stream]);
    next[c.stream] += 2;
  }
  EXPECT_EQ(dst, src);
  const metaroce::CounterGroup counters = p.a->counters();
  EXPECT_EQ(counters.get("data_packets_sent"), 8u * 16u);  // 64 KiB in 4 KiB packets
  EXPECT_EQ(counters.get("retransmitted_packets"), 0u);
  EXPECT_EQ(counters.get("no_such_counter"), 0u);
  EXPECT_EQ(p.b->counters().get("data_bytes_placed"), src.size());
}

TEST(PublicSimulation, UnderLossOnlyTheLostAreResentAndTheRunIsDeterministic) {
  std::vector<std::uint64_t> resent, end_ns;
  for (int run = 0; run < 2; ++run) {
    Pair p(0.05, two_streams());
    std::vector<std::uint8_t> src(8 * 65536), dst(src.size(), 0);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = pattern(i);
    const auto got = write_all(p, src, dst);
    ASSERT_EQ(got.size(), 8u);
    EXPECT_EQ(dst, src);
    resent.push_back(p.a->counters().get("retransmitted_packets"));
    end_ns.push_back(p.sim.now_ns());
    EXPECT_EQ(p.b->counters().get("spurious_retransmissions"), 0u);
    // The sides' sums are the connections' own.
    EXPECT_EQ(p.sim.counters(Simulation::Side::a)[1].get("retransmitted_packets"), resent.back());
  }
  EXPECT_GT(resent[0], 0u);
  EXPECT_EQ(resent[0], resent[1]);
  EXPECT_EQ(end_ns[0], end_ns[1]);
}

TEST(PublicSimulation, SendLandsInThePostedReceiveWithItsImmediate) {
  Pair p(0.0);
  std::string error;
  std::vector<std::uint8_t> out(100), in(200, 0);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = pattern(i);
  const auto o = p.sim.register_memory(Simulation::Side::a, out.data(), out.size(), metaroce::access_local_write, error);
  const auto r = p.sim.register_memory(Simulation::Side::b, in.data(), in.size(), metaroce::access_local_write, error);
  ASSERT_EQ(p.b->post_receive({7, 0, in.data(), in.size(), r.key}), metaroce::PostResult::ok);
  metaroce::SendWork w;
  w.wr_id = 9;
  w.op = metaroce::Op::send_imm;
  w.local = out.data();
  w.length = out.size();
  w.lkey = o.key;
  w.imm = 0xfeed;
  ASSERT_EQ(p.a->post_send(w), metaroce::PostResult::ok);
  metaroce::Completion c;
  ASSERT_TRUE(p.b->wait_completion(c, 1.0));
  EXPECT_EQ(c.wr_id, 7u);
  EXPECT_EQ(c.kind, metaroce::CompletionKind::receive);
  EXPECT_EQ(c.byte_len, 100u);
  ASSERT_TRUE(c.imm.has_value());
  EXPECT_EQ(*c.imm, 0xfeedu);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin()));
  EXPECT_EQ(in[100], 0);  // nothing beyond the message
  ASSERT_TRUE(p.a->wait_completion(c, 1.0));
  EXPECT_EQ(c.wr_id, 9u);
  EXPECT_EQ(c.kind, metaroce::CompletionKind::send);
}

TEST(PublicSimulation, PostsOutsideRegisteredMemoryOrStreamsAreRefused) {
  Pair p(0.0);
  std::string error;
  std::vector<std::uint8_t> buf(64);
  const auto m = p.sim.register_memory(Simulation::Side::a, buf.data(), buf.size(), metaroce::access_local_write, error);
  metaroce::SendWork w;
  w.op = metaroce::Op::send;
  w.local = buf.data();
  w.length = 65;  // one byte beyond the region
  w.lkey = m.key;
  EXPECT_EQ(p.a->post_send(w), metaroce::PostResult::bad_lkey);
  w.length = 64;
  w.stream = 1;  // the connection has one stream
  EXPECT_EQ(p.a->post_send(w), metaroce::PostResult::bad_stream);
  w.stream = 0;
  w.op = metaroce::Op::write;
  w.rkey = 0;
  EXPECT_EQ(p.a->post_send(w), metaroce::PostResult::bad_rkey);
  EXPECT_FALSE(p.sim.register_memory(Simulation::Side::a, nullptr, 8, 0, error).valid());
  EXPECT_FALSE(error.empty());
  std::string bad;
  metaroce::SimulatedConnectOptions options;
  options.mode = "tcp";
  EXPECT_EQ(p.sim.connect(options, bad).first, nullptr);
  EXPECT_EQ(bad, "mode 'tcp' is not one: give metaroce or rocev2");
}

TEST(PublicSimulation, TheHandlerTakesWhatWasQueuedFirstThenTheRestInOrder) {
  Pair p(0.0, two_streams());
  std::vector<std::uint8_t> src(8 * 65536, 1), dst(src.size(), 0);
  const auto queued = write_all(p, src, dst);  // drained by poll_completions
  ASSERT_EQ(queued.size(), 8u);
  // Two more, delivered before the handler is set: it gets them first.
  std::string error;
  const auto s = p.sim.register_memory(Simulation::Side::a, src.data(), src.size(), metaroce::access_local_write, error);
  const auto d = p.sim.register_memory(Simulation::Side::b, dst.data(), dst.size(), metaroce::access_remote_write, error);
  for (std::uint64_t k = 0; k < 4; ++k) {
    metaroce::SendWork w;
    w.wr_id = k;
    w.local = src.data();
    w.length = 4096;
    w.lkey = s.key;
    w.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
    w.rkey = d.key;
    ASSERT_EQ(p.a->post_send(w), metaroce::PostResult::ok);
    if (k == 1) {
      EXPECT_FALSE(p.sim.run_until([] { return false; }, 0.001));  // 0 and 1 complete, queued
    }
  }
  std::vector<std::uint64_t> order;
  p.a->set_completion_handler([&](const metaroce::Completion& c) { order.push_back(c.wr_id); });
  EXPECT_EQ(order, (std::vector<std::uint64_t>{0, 1}));
  p.sim.run_until([&] { return order.size() == 4; }, 1.0);
  EXPECT_EQ(order, (std::vector<std::uint64_t>{0, 1, 2, 3}));
  metaroce::Completion c;
  EXPECT_EQ(p.a->poll_completions(&c, 1), 0u);  // the handler took them all
}

// Two sans-I/O hosts whose frames the test carries itself, one way delay
// 5 us, dropping exactly the frames `drop` names (by their order a -> b).
struct Wire {
  metaroce::SansIoHost a, b;
  std::uint64_t now = 0;
  std::uint64_t a_to_b = 0;  // frames a sent so far
  std::vector<std::uint64_t> drop;
  std::uint64_t delivered_to_b = 0;

  // Runs until done() or 10 ms of time; false on timeout.
  bool run(const std::function<bool()>& done) {
    struct InFlight {
      std::uint64_t at;
      bool to_b;
      std::vector<std::uint8_t> frame;
    };
    std::vector<InFlight> flying;
    while (!done()) {
      if (now > 10'000'000) return false;
      std::vector<std::vector<std::uint8_t>> out;
      a.transmit(now, out);
      for (auto& f : out) {
        const bool dropped = std::find(drop.begin(), drop.end(), a_to_b++) != drop.end();
        if (!dropped) flying.push_back({now + 5'000, true, std::move(f)});
      }
      out.clear();
      b.transmit(now, out);
      for (auto& f : out) flying.push_back({now + 5'000, false, std::move(f)});
      // The next event: a frame landing, or either host's timer.
      std::uint64_t next = std::min(a.next_deadline(), b.next_deadline());
      for (const auto& f : flying) next = std::min(next, f.at);
      if (next == UINT64_MAX) return done();
      now = std::max(now + 1, next);
      for (std::size_t i = 0; i < flying.size();) {
        if (flying[i].at > now) {
          ++i;
          continue;
        }
        if (flying[i].to_b) {
          b.receive(now, flying[i].frame);
          ++delivered_to_b;
        } else {
          a.receive(now, flying[i].frame);
        }
        flying.erase(flying.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    return true;
  }
};

metaroce::SansIoConnectionConfig sans_io_end(bool a) {
  metaroce::SansIoConnectionConfig c;
  c.local_mac = a ? "02:00:00:00:00:0a" : "02:00:00:00:00:0b";
  c.peer_mac = a ? "02:00:00:00:00:0b" : "02:00:00:00:00:0a";
  c.local_ip = a ? "10.1.0.1" : "10.1.0.2";
  c.peer_ip = a ? "10.1.0.2" : "10.1.0.1";
  c.local_qpn = a ? 0x111 : 0x222;
  c.peer_qpn = a ? 0x222 : 0x111;
  c.initial_psn = a ? 100 : 200;
  c.peer_initial_psn = a ? 200 : 100;
  c.congestion = "none";
  return c;
}

TEST(PublicSansIo, OnlyTheDroppedFrameIsResentAndEveryByteLandsInPlace) {
  Wire w;
  w.drop = {4};  // the fifth frame a sends: one of the WRITE's 16 data packets
  std::string error;
  metaroce::Connection* a = w.a.add_connection(sans_io_end(true), error);
  metaroce::Connection* b = w.b.add_connection(sans_io_end(false), error);
  ASSERT_NE(a, nullptr) << error;
  ASSERT_NE(b, nullptr) << error;
  std::vector<std::uint8_t> src(65536), dst(65536 + 64, 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = pattern(i);
  const auto s = w.a.register_memory(src.data(), src.size(), metaroce::access_local_write, error);
  const auto d = w.b.register_memory(dst.data(), 65536, metaroce::access_remote_write, error);
  metaroce::SendWork work;
  work.wr_id = 5;
  work.local = src.data();
  work.length = src.size();
  work.lkey = s.key;
  work.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
  work.rkey = d.key;
  ASSERT_EQ(a->post_send(work), metaroce::PostResult::ok);
  metaroce::Completion c;
  ASSERT_TRUE(w.run([&] { return a->poll_completions(&c, 1) == 1; }));
  EXPECT_EQ(c.wr_id, 5u);
  EXPECT_EQ(c.status, metaroce::Status::success);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
  EXPECT_EQ(dst[65536], 0);  // nothing beyond the region
  EXPECT_EQ(a->counters().get("data_packets_sent"), 16u);
  EXPECT_EQ(a->counters().get("retransmitted_packets"), 1u);
  EXPECT_EQ(b->counters().get("data_packets_received"), 16u);
  EXPECT_EQ(w.b.counters()[1].get("data_packets_received"), 16u);
  EXPECT_EQ(w.b.counters()[0].get("rx_frames"), w.delivered_to_b);
  EXPECT_FALSE(a->wait_completion(c, 1.0));  // nothing more, and no time passes
}

TEST(PublicSansIo, AMalformedFrameIsCountedAndPlacesNothing) {
  metaroce::SansIoHost host;
  std::string error;
  metaroce::Connection* c = host.add_connection(sans_io_end(false), error);
  ASSERT_NE(c, nullptr) << error;
  const std::vector<std::uint8_t> runt(20, 0xff);
  host.receive(1000, runt);
  std::uint64_t parse_errors = 0;
  const std::vector<metaroce::CounterGroup> groups = host.counters();
  for (const metaroce::Counter& k : groups[0].counters)
    if (k.name.rfind("rx_parse_error.", 0) == 0) parse_errors += k.value;
  EXPECT_EQ(parse_errors, 1u);
  EXPECT_EQ(c->counters().get("data_packets_received"), 0u);
  metaroce::SansIoConnectionConfig bad = sans_io_end(true);
  bad.peer_ip = "fd00::1";
  EXPECT_EQ(host.add_connection(bad, error), nullptr);
  EXPECT_EQ(error, "addresses '10.1.0.1' and 'fd00::1': give two IPv4 or two IPv6 addresses");
}

}  // namespace
