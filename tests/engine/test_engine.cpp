// The engine on DPDK ports without a NIC: net_ring pairs carry frames intact,
// two engine hosts transfer verified WRITEs of 1 B .. 16 MiB (payload copied
// and attached in place), through an inline fabric with loss too, and every
// bad frame is counted under its reason. Both sides are polled alternately
// from the test's thread: deterministic enough, and no second lcore needed.
#include <gtest/gtest.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "engine/eal.hpp"
#include "engine/loopback.hpp"
#include "engine/mbuf_frames.hpp"
#include "engine/port.hpp"
#include "fabric/spec.hpp"
#include "transport/tx_batch.hpp"
#include "wire/frame.hpp"
#include "wire/ip_address.hpp"

namespace metaroce::engine {
namespace {

PortSetup small_ports() {
  PortSetup s;
  s.mbufs = 4096;
  s.rx_desc = 1024;
  s.tx_desc = 1024;
  return s;
}

wire::FrameSpec write_only_spec(std::uint32_t dest_qp, std::uint32_t psn) {
  wire::FrameSpec spec;
  spec.eth.src = {2, 0, 0, 0, 0, 1};
  spec.eth.dst = {2, 0, 0, 0, 0, 2};
  spec.eth.ethertype = 0x0800;
  spec.ip_version = 4;
  spec.ipv4.src = 0x0a000001;
  spec.ipv4.dst = 0x0a000002;
  spec.ipv4.ttl = 64;
  spec.udp.src_port = 49152;
  spec.udp.dst_port = 4791;
  spec.bth.opcode = 0x0a;  // RC RDMA WRITE ONLY
  spec.bth.dest_qp = dest_qp;
  spec.bth.psn = psn;
  spec.reth.va = 0x1000;
  spec.reth.rkey = 7;
  spec.reth.dma_len = 100;
  return spec;
}

TEST(Eal, StartsOnceOnly) {
  ASSERT_TRUE(eal_started());
  std::string error;
  EXPECT_FALSE(start_eal(EalOptions{}, error));
  EXPECT_EQ(error, "EAL is already running in this process: start it once (one EAL per process)");
}

TEST(Eal, VdevOnTheCommandLineProbed) {
  std::uint16_t port = 0;
  EXPECT_EQ(rte_eth_dev_get_port_by_name("net_ring0", &port), 0) << "the net_ring PMD is not linked";
}

// `frame` added to a batch as a connection commits a short message:
// everything but the ICRC in the arena, the ICRC as the trailer.
void add_short_frame(transport::TxBatch& batch, const std::vector<std::uint8_t>& frame) {
  const std::size_t body = frame.size() - wire::icrc_size;
  const auto space = batch.header_space(body);
  std::copy(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(body), space.begin());
  batch.commit(body, {}, std::span<const std::uint8_t>(frame.data() + body, wire::icrc_size));
}

transport::TxBatch batch_of_short_frame(const std::vector<std::uint8_t>& frame) {
  transport::TxBatch batch;
  add_short_frame(batch, frame);
  return batch;
}

// build() copies a short frame to 30 bytes past the standard headroom, so
// its Ethernet and IPv4 headers end a cache line, and rewrites that line
// only when it changed. An mbuf that comes back from the pool must carry
// exactly the new frame whether its first line was the same or not, with
// its fields (offset, lengths, segments) set; long frames keep the headroom.
TEST(TxMbufBuilder, ReusedMbufsCarryExactlyTheNewFrame) {
  std::string error;
  TxMbufSetup setup;
  setup.name = "reuse";
  setup.mbufs = 1024;
  auto builder = TxMbufBuilder::create(setup, error);
  ASSERT_TRUE(builder) << error;
  rte_mbuf* previous = nullptr;
  std::size_t reused = 0;
  // Sizes: short (the shifted copy), just over the 1024-byte limit (plain).
  const std::vector<std::size_t> payload_sizes = {64, 64, 64, 64, 1, 2000, 64, 64};
  for (std::size_t k = 0; k < payload_sizes.size(); ++k) {
    std::vector<std::uint8_t> payload(payload_sizes[k]);
    std::iota(payload.begin(), payload.end(), static_cast<std::uint8_t>(k));
    wire::FrameSpec spec = write_only_spec(0x42, static_cast<std::uint32_t>(k));
    spec.ipv4.src = 0x0a000001 + static_cast<std::uint32_t>(k / 2);  // the first line changes every other frame
    spec.reth.dma_len = static_cast<std::uint32_t>(payload.size());
    std::vector<std::uint8_t> frame(4096);
    frame.resize(wire::build_frame(spec, payload, frame));
    ASSERT_FALSE(frame.empty());
    const transport::TxBatch batch = batch_of_short_frame(frame);
    rte_mbuf* m = nullptr;
    ASSERT_EQ(builder->build(batch, 0, m), TxBuild::copied);
    ASSERT_NE(m, nullptr);
    reused += m == previous ? 1 : 0;
    const bool shifted = frame.size() <= 1024;
    EXPECT_EQ(m->data_off, RTE_PKTMBUF_HEADROOM + (shifted ? 30 : 0)) << "frame " << k;
    EXPECT_EQ(rte_pktmbuf_mtod(m, std::uintptr_t) % RTE_CACHE_LINE_SIZE, shifted ? 30u : 0u);
    EXPECT_EQ(m->data_len, frame.size());
    EXPECT_EQ(m->pkt_len, frame.size());
    EXPECT_EQ(m->nb_segs, 1);
    EXPECT_EQ(m->next, nullptr);
    const auto* d = rte_pktmbuf_mtod(m, const std::uint8_t*);
    EXPECT_TRUE(std::equal(frame.begin(), frame.end(), d)) << "frame " << k;
    wire::ParsedFrame parsed;
    EXPECT_EQ(wire::parse_frame({d, m->data_len}, parsed), wire::ParseError::ok) << "frame " << k;
    EXPECT_EQ(parsed.bth.psn, k);
    previous = m;
    rte_pktmbuf_free(m);  // first out of this lcore's pool cache next time
  }
  // The same mbuf came back each time: the rewrite of a changed (and the
  // skip of an unchanged) first line was exercised.
  EXPECT_EQ(reused, payload_sizes.size() - 1);

  // A pool whose room fits a short frame after the standard headroom but
  // not after the shifted one: copied there, not refused.
  setup.name = "reuse_small";
  setup.data_room = RTE_PKTMBUF_HEADROOM + 300;
  auto small = TxMbufBuilder::create(setup, error);
  ASSERT_TRUE(small) << error;
  std::vector<std::uint8_t> payload(200, 0x5a);
  wire::FrameSpec spec = write_only_spec(0x42, 9);
  spec.reth.dma_len = static_cast<std::uint32_t>(payload.size());
  std::vector<std::uint8_t> frame(512);
  frame.resize(wire::build_frame(spec, payload, frame));
  ASSERT_GT(frame.size() + 30, 300u);
  ASSERT_LE(frame.size(), 300u);
  const transport::TxBatch batch = batch_of_short_frame(frame);
  rte_mbuf* m = nullptr;
  ASSERT_EQ(small->build(batch, 0, m), TxBuild::copied);
  EXPECT_EQ(m->data_off, RTE_PKTMBUF_HEADROOM);
  EXPECT_TRUE(std::equal(frame.begin(), frame.end(), rte_pktmbuf_mtod(m, const std::uint8_t*)));
  rte_pktmbuf_free(m);
}

// prepare() takes a burst's mbufs at once; build() fills them in order
// with exactly each frame, release_prepared() gives back the unused ones.
// A pool short of the burst gives none: build() then takes mbufs one by
// one until the pool is empty, as without prepare().
TEST(TxMbufBuilder, PreparedMbufsCarryTheBurstAndTheRestGoBack) {
  std::string error;
  TxMbufSetup setup;
  setup.name = "prepared";
  setup.mbufs = 1024;
  auto builder = TxMbufBuilder::create(setup, error);
  ASSERT_TRUE(builder) << error;
  const unsigned all = builder->frames_available();
  ASSERT_EQ(all, 1024u);

  transport::TxBatch batch;
  std::vector<std::vector<std::uint8_t>> frames;
  for (std::uint32_t k = 0; k < 5; ++k) {
    std::vector<std::uint8_t> payload(k == 2 ? 1500 : 64, static_cast<std::uint8_t>(0x10 + k));
    wire::FrameSpec spec = write_only_spec(0x42, 100 + k);
    spec.reth.dma_len = static_cast<std::uint32_t>(payload.size());
    std::vector<std::uint8_t> frame(4096);
    frame.resize(wire::build_frame(spec, payload, frame));
    ASSERT_FALSE(frame.empty());
    add_short_frame(batch, frame);
    frames.push_back(std::move(frame));
  }
  builder->prepare(batch, 1, 10);  // packets 1..4: the batch ends first
  EXPECT_EQ(builder->prepared(), 4u);
  EXPECT_EQ(builder->frames_available(), all - 4);
  std::vector<rte_mbuf*> built;
  for (std::size_t i = 1; i < 4; ++i) {
    rte_mbuf* m = nullptr;
    ASSERT_EQ(builder->build(batch, i, m), TxBuild::copied);
    EXPECT_EQ(m->data_len, frames[i].size());
    EXPECT_EQ(m->pkt_len, frames[i].size());
    EXPECT_EQ(m->data_off, RTE_PKTMBUF_HEADROOM + (frames[i].size() <= 1024 ? 30 : 0)) << "packet " << i;
    EXPECT_TRUE(std::equal(frames[i].begin(), frames[i].end(), rte_pktmbuf_mtod(m, const std::uint8_t*)))
        << "packet " << i;
    built.push_back(m);
  }
  EXPECT_EQ(builder->prepared(), 1u);
  builder->release_prepared();
  EXPECT_EQ(builder->prepared(), 0u);
  EXPECT_EQ(builder->frames_available(), all - 3);
  for (rte_mbuf* m : built) rte_pktmbuf_free(m);
  EXPECT_EQ(builder->frames_available(), all);

  // Leave 3 mbufs in the pool: a burst of 5 is not prepared, and build()
  // copies 3 frames and then reports the pool empty.
  std::vector<rte_mbuf*> held;
  while (builder->frames_available() > 3) {
    rte_mbuf* m = nullptr;
    ASSERT_EQ(builder->build(batch, 0, m), TxBuild::copied);
    held.push_back(m);
  }
  builder->prepare(batch, 0, batch.size());
  EXPECT_EQ(builder->prepared(), 0u);
  std::vector<TxBuild> results;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    rte_mbuf* m = nullptr;
    results.push_back(builder->build(batch, i, m));
    if (m != nullptr) held.push_back(m);
  }
  EXPECT_EQ(results, (std::vector<TxBuild>{TxBuild::copied, TxBuild::copied, TxBuild::copied,
                                           TxBuild::mempool_empty, TxBuild::mempool_empty}));
  EXPECT_EQ(builder->frames_available(), 0u);
  for (rte_mbuf* m : held) rte_pktmbuf_free(m);
  EXPECT_EQ(builder->frames_available(), all);
}

TEST(RingPair, FramesArriveIntact) {
  std::unique_ptr<Port> a, b;
  std::string error;
  ASSERT_TRUE(Port::create_ring_pair("rp_a", "rp_b", small_ports(), a, b, error)) << error;
  ASSERT_TRUE(a->start(error)) << error;
  ASSERT_TRUE(b->start(error)) << error;
  EXPECT_TRUE(a->multi_segment_tx());

  TxMbufSetup setup;
  setup.name = "rp";
  setup.mbufs = 1024;
  auto builder = TxMbufBuilder::create(setup, error);
  ASSERT_TRUE(builder) << error;

  std::vector<std::vector<std::uint8_t>> sent;
  std::vector<std::uint8_t> payload(100);
  for (int k = 0; k < 20; ++k) {
    std::iota(payload.begin(), payload.end(), static_cast<std::uint8_t>(k));
    std::vector<std::uint8_t> frame(256);
    frame.resize(wire::build_frame(write_only_spec(0x42, static_cast<std::uint32_t>(k)), payload, frame));
    ASSERT_FALSE(frame.empty());
    rte_mbuf* m = builder->copy_frame(frame);
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(rte_eth_tx_burst(a->id(), 0, &m, 1), 1);
    sent.push_back(frame);
  }
  std::vector<rte_mbuf*> got(32);
  const std::uint16_t n = rte_eth_rx_burst(b->id(), 0, got.data(), 32);
  ASSERT_EQ(n, sent.size());
  std::vector<std::uint8_t> scratch;
  for (std::uint16_t i = 0; i < n; ++i) {
    bool linearized = true;
    const auto bytes = frame_bytes(got[i], scratch, linearized);
    EXPECT_FALSE(linearized);
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), sent[i].begin(), sent[i].end())) << "frame " << i;
    wire::ParsedFrame parsed;
    EXPECT_EQ(wire::parse_frame(bytes, parsed), wire::ParseError::ok);
    EXPECT_EQ(parsed.bth.psn, i);
    rte_pktmbuf_free(got[i]);
  }
  // And back the other way: queue i of b feeds queue i of a.
  rte_mbuf* m = builder->copy_frame(sent[0]);
  ASSERT_EQ(rte_eth_tx_burst(b->id(), 0, &m, 1), 1);
  ASSERT_EQ(rte_eth_rx_burst(a->id(), 0, got.data(), 32), 1);
  EXPECT_EQ(got[0]->pkt_len, sent[0].size());
  rte_pktmbuf_free(got[0]);
}

struct TransferCheck {
  std::uint64_t bytes = 0;
  std::size_t completions = 0;
  bool finished = false;
};

// Posts one WRITE per size from A to B (all at once), polls both sides until
// every completion is in, then compares every byte of B's region with A's.
TransferCheck transfer(Loopback& lb, const std::vector<std::uint64_t>& sizes, std::chrono::seconds limit) {
  const std::uint64_t total = std::accumulate(sizes.begin(), sizes.end(), std::uint64_t{0});
  std::vector<std::uint8_t> src(total), dst(total, 0);
  std::mt19937_64 rng(42);
  for (std::size_t i = 0; i + 8 <= total; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(&src[i], &v, 8);
  }
  for (std::size_t i = total & ~std::uint64_t{7}; i < total; ++i) src[i] = static_cast<std::uint8_t>(i);
  const std::uint32_t lkey = lb.host_a().memory().register_region(src.data(), total, transport::access_local_write);
  const std::uint32_t rkey =
      lb.host_b().memory().register_region(dst.data(), total, transport::access_local_write | transport::access_remote_write);
  std::uint64_t offset = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    transport::SendRequest r;
    r.wr_id = k;
    r.op = transport::SendOp::write;
    r.local_addr = src.data() + offset;
    r.length = sizes[k];
    r.lkey = lkey;
    r.remote_addr = reinterpret_cast<std::uint64_t>(dst.data() + offset);
    r.rkey = rkey;
    EXPECT_EQ(lb.connection_a().post_send(r), transport::PostResult::ok);
    offset += sizes[k];
  }
  TransferCheck check;
  std::vector<transport::Completion> completions;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (completions.size() < sizes.size() && std::chrono::steady_clock::now() < deadline) {
    lb.poll_side_a();
    lb.poll_side_b();
    lb.connection_a().poll_completions(completions);
  }
  check.completions = completions.size();
  check.finished = completions.size() == sizes.size();
  for (std::size_t k = 0; k < completions.size(); ++k) {
    EXPECT_EQ(completions[k].wr_id, k) << "completions in order";
    EXPECT_EQ(completions[k].status, transport::CompletionStatus::success);
    EXPECT_EQ(completions[k].kind, transport::CompletionKind::write);
  }
  if (check.finished) {
    offset = 0;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      EXPECT_EQ(std::memcmp(src.data() + offset, dst.data() + offset, sizes[k]), 0) << "message " << k << " of "
                                                                                     << sizes[k] << " bytes";
      offset += sizes[k];
    }
    check.bytes = total;
  }
  // Let the last ACKs drain so nothing refers to src/dst after they go.
  for (int i = 0; i < 1000; ++i) {
    lb.poll_side_a();
    lb.poll_side_b();
  }
  lb.host_a().memory().deregister(lkey);
  lb.host_b().memory().deregister(rkey);
  return check;
}

const std::vector<std::uint64_t> all_sizes = {1,     2,    3,    7,     64,    255,       1000,   2047,  2048,
                                              4095,  4096, 4097, 8191,  65536, 100'003,   1 << 20, 16 << 20};

LoopbackConfig base_config() {
  LoopbackConfig c;
  c.ports = small_ports();
  c.hosts.tx_mbufs = 4096;
  c.connection.mtu = 4096;
  c.connection.paths = 4;
  return c;
}

TEST(EngineHosts, WritesOneByteTo16MiBZeroCopyAndCopy) {
  std::string error;
  auto lb = Loopback::create(base_config(), error);
  ASSERT_TRUE(lb) << error;
  const TransferCheck check = transfer(*lb, all_sizes, std::chrono::seconds(20));
  ASSERT_TRUE(check.finished) << check.completions << " of " << all_sizes.size() << " completions";
  const EngineCounters& a = lb->host_a().counters();
  const EngineCounters& b = lb->host_b().counters();
  EXPECT_GT(a.tx_zero_copy, 4000u) << "full-MTU payloads are attached";
  EXPECT_GT(a.tx_copied, 0u) << "small payloads (and ACKs) are copied";
  EXPECT_EQ(b.rx_linearized, a.tx_zero_copy) << "a chained frame arrives chained on net_ring";
  EXPECT_EQ(a.dropped(), 0u);
  EXPECT_EQ(b.dropped(), 0u);
  EXPECT_EQ(b.rx_delivered, b.rx_frames);
}

TEST(EngineHosts, WritesWithEveryPayloadCopied) {
  LoopbackConfig c = base_config();
  c.hosts.zero_copy_threshold = zero_copy_never;
  std::string error;
  auto lb = Loopback::create(c, error);
  ASSERT_TRUE(lb) << error;
  const TransferCheck check = transfer(*lb, all_sizes, std::chrono::seconds(20));
  ASSERT_TRUE(check.finished);
  EXPECT_EQ(lb->host_a().counters().tx_zero_copy, 0u);
  EXPECT_EQ(lb->host_b().counters().rx_linearized, 0u);
  EXPECT_EQ(lb->host_b().counters().dropped(), 0u);
}

// The transport copies short payloads next to their headers (TxBatch's
// inline limit) unless the engine would attach them: with the threshold at
// 64 bytes, exactly the three payloads of 64 bytes and more go out attached.
TEST(EngineHosts, PayloadsFromTheThresholdOnAreAttachedNotInlined) {
  LoopbackConfig c = base_config();
  c.hosts.zero_copy_threshold = 64;
  std::string error;
  auto lb = Loopback::create(c, error);
  ASSERT_TRUE(lb) << error;
  const TransferCheck check = transfer(*lb, {1, 63, 64, 100, 255}, std::chrono::seconds(20));
  ASSERT_TRUE(check.finished);
  EXPECT_EQ(lb->host_a().counters().tx_zero_copy, 3u);
  EXPECT_EQ(lb->host_b().counters().rx_linearized, 3u);
  EXPECT_EQ(lb->host_b().counters().dropped(), 0u);
}

TEST(EngineHosts, InlineFabricLossStillVerifiesEveryByte) {
  LoopbackConfig c = base_config();
  const auto spec = fabric::parse_fabric_spec("loss 1%");
  ASSERT_TRUE(spec.ok()) << spec.error;
  c.forward = spec.config;
  c.backward = spec.config;
  std::string error;
  auto lb = Loopback::create(c, error);
  ASSERT_TRUE(lb) << error;
  std::vector<std::uint64_t> sizes(48, 256 * 1024);
  sizes.push_back(3);
  sizes.push_back(5000);
  const TransferCheck check = transfer(*lb, sizes, std::chrono::seconds(20));
  ASSERT_TRUE(check.finished) << check.completions << " of " << sizes.size();
  ASSERT_NE(lb->forward_link(), nullptr);
  EXPECT_GT(lb->forward_link()->fabric_counters().dropped_random_loss, 10u);
  EXPECT_GT(lb->connection_a().counters().retransmitted_packets + 0, 0u);
}

// Host B's counters after `frames` went to it in one burst from A's port,
// straight through the pass-through forward link of an inline-link
// loopback, and both sides were polled.
EngineCounters counters_after_injecting(const std::vector<std::vector<std::uint8_t>>& frames,
                                        const std::string& name) {
  LoopbackConfig c = base_config();
  c.inline_link = true;  // so the test can put frames on B's wire
  std::string error;
  auto lb = Loopback::create(c, error);
  EXPECT_TRUE(lb) << error;
  TxMbufSetup setup;
  setup.name = name;
  setup.mbufs = 1024;
  auto builder = TxMbufBuilder::create(setup, error);
  EXPECT_TRUE(builder) << error;
  if (!lb || !builder) return {};
  std::vector<rte_mbuf*> burst;
  for (const auto& f : frames) burst.push_back(builder->copy_frame(f));
  const auto n = static_cast<std::uint16_t>(burst.size());
  EXPECT_EQ(rte_eth_tx_burst(lb->host_a().config().port_id, 0, burst.data(), n), n);
  for (int i = 0; i < 100; ++i) {
    lb->poll_side_a();
    lb->poll_side_b();
  }
  return lb->host_b().counters();
}

TEST(EngineHosts, BadFramesAreCountedByReason) {
  std::vector<std::uint8_t> payload(100, 0xab);
  std::vector<std::uint8_t> good(256);
  good.resize(wire::build_frame(write_only_spec(0x777, 1), payload, good));
  std::vector<std::uint8_t> bad_icrc = good;
  bad_icrc[60] ^= 1;
  std::vector<std::uint8_t> truncated(good.begin(), good.begin() + 30);
  const EngineCounters b = counters_after_injecting({good, bad_icrc, truncated}, "inj");
  EXPECT_EQ(b.rx_unknown_qpn, 1u);
  EXPECT_EQ(b.rx_parse_errors[static_cast<std::size_t>(wire::ParseError::bad_icrc)], 1u);
  EXPECT_EQ(b.rx_parse_errors[static_cast<std::size_t>(wire::ParseError::truncated)], 1u);
  std::vector<std::string> names;
  b.visit([&](const std::string& name, std::uint64_t) { names.push_back(name); });
  EXPECT_NE(std::find(names.begin(), names.end(), "rx_parse_error.bad_icrc"), names.end());
}

// A receive burst's frames of one length are checked four at a time
// (their ICRCs folded together); each frame still gets its own verdict. A
// frame with Ethernet padding after its ICRC, the same length as the
// others, has its ICRC elsewhere: the parser computes that one itself.
TEST(EngineHosts, AlikeFramesOfABurstEachGetTheirIcrcChecked) {
  std::vector<std::vector<std::uint8_t>> frames;
  for (std::uint32_t k = 0; k < 8; ++k) {
    const bool padded = k == 6;
    std::vector<std::uint8_t> payload(padded ? 96 : 100, static_cast<std::uint8_t>(k));
    wire::FrameSpec spec = write_only_spec(0x777, k);  // no such QP: a good frame counts rx_unknown_qpn
    spec.reth.dma_len = static_cast<std::uint32_t>(payload.size());
    std::vector<std::uint8_t> f(256);
    f.resize(wire::build_frame(spec, payload, f));
    ASSERT_FALSE(f.empty());
    if (padded) f.resize(f.size() + 4, 0);  // Ethernet padding, past the ICRC
    if (k == 2 || k == 5) f[f.size() - 10] ^= 0x01;  // a payload bit: a bad ICRC
    frames.push_back(std::move(f));
  }
  ASSERT_EQ(frames[6].size(), frames[0].size());
  const EngineCounters b = counters_after_injecting(frames, "four");
  EXPECT_EQ(b.rx_frames, 8u);
  EXPECT_EQ(b.rx_unknown_qpn, 6u);
  EXPECT_EQ(b.rx_parse_errors[static_cast<std::size_t>(wire::ParseError::bad_icrc)], 2u);
}

// Two engine hosts on a net_ring pair, each with a neighbour cache: A asks
// for B's IPv4 and IPv6 addresses, B's cache answers through its engine,
// and A learns B's port MAC: one request and one answer each way per
// family, and nothing else counted.
TEST(EngineHosts, NeighbourCachesResolveEachOtherOverARingPair) {
  std::unique_ptr<Port> a, b;
  std::string error;
  ASSERT_TRUE(Port::create_ring_pair("nd_a", "nd_b", small_ports(), a, b, error)) << error;
  ASSERT_TRUE(a->start(error)) << error;
  ASSERT_TRUE(b->start(error)) << error;
  const auto host_for = [&](const Port& port, const char* name) {
    EngineHostConfig c;
    c.name = name;
    c.port_id = port.id();
    c.tx_mbufs = 1024;
    auto h = EngineHost::create(c, error);
    EXPECT_TRUE(h) << error;
    return h;
  };
  auto ha = host_for(*a, "nd_a");
  auto hb = host_for(*b, "nd_b");
  ASSERT_TRUE(ha && hb);
  const auto neighbours = [](const Port& port, std::uint32_t ipv4, const char* ipv6) {
    host::NeighbourConfig c;
    c.port_name = port.name();
    c.local_mac = port.mac();
    c.ipv4_present = true;
    c.local_ipv4 = ipv4;
    c.ipv6_present = true;
    wire::IpAddress v6;
    EXPECT_TRUE(wire::parse_ip(ipv6, v6));
    c.local_ipv6 = v6.ipv6;
    return c;
  };
  host::Neighbours& na = ha->host().enable_neighbours(neighbours(*a, 0x0a000001, "fd00::1"));
  hb->host().enable_neighbours(neighbours(*b, 0x0a000002, "fd00::2"));
  wire::IpAddress b4 = wire::IpAddress::v4(0x0a000002), b6;
  ASSERT_TRUE(wire::parse_ip("fd00::2", b6));
  host::Resolution r4, r6;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    r4 = na.resolve(ha->now_ns(), b4);
    r6 = na.resolve(ha->now_ns(), b6);
    if (r4.usable() && r6.usable()) break;
    ha->poll_once();
    hb->poll_once();
  }
  ASSERT_EQ(r4.state, host::NeighbourState::reachable) << r4.error;
  ASSERT_EQ(r6.state, host::NeighbourState::reachable) << r6.error;
  EXPECT_EQ(r4.mac, b->mac());
  EXPECT_EQ(r6.mac, b->mac());
  const host::NeighbourCounters& ca = ha->counters().neighbour;
  const host::NeighbourCounters& cb = hb->counters().neighbour;
  EXPECT_EQ(ca.arp_requests_sent, 1u);
  EXPECT_EQ(ca.nd_solicitations_sent, 1u);
  EXPECT_EQ(ca.arp_replies_learned, 1u);
  EXPECT_EQ(ca.nd_advertisements_learned, 1u);
  EXPECT_EQ(cb.arp_requests_answered, 1u);
  EXPECT_EQ(cb.nd_solicitations_answered, 1u);
  EXPECT_EQ(ha->counters().rx_neighbour, 2u);
  EXPECT_EQ(hb->counters().rx_neighbour, 2u);
  EXPECT_EQ(ha->counters().dropped() + hb->counters().dropped(), 0u);
  EXPECT_EQ(ca.resolutions_failed, 0u);
  hb.reset();
  ha.reset();
  a->stop();
  b->stop();
}

}  // namespace
}  // namespace metaroce::engine
