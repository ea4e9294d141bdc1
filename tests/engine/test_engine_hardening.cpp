// The engine against hostile frames and exhausted resources, on DPDK ports
// without a NIC.
//
// EngineHostile: frames only the engine sees (unknown QPN, every parse
// error, truncation at every length, VLAN) injected into B's receive ring
// in the middle of a verified transfer, each counted under its own name,
// exactly, and the transfer completes. EngineExhaustion: the tx mempool
// empty (frames held, nothing lost), the rx mempool empty (net_pcap, whose
// PMD allocates on receive; net_ring never does), too many connections, a
// peer that never answers.
#include <gtest/gtest.h>

#include <rte_bus_vdev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

#include "common/pcap_file.hpp"
#include "engine/engine_host.hpp"
#include "engine/loopback.hpp"
#include "engine/mbuf_frames.hpp"
#include "guarded_buffers.hpp"
#include "transport/connection.hpp"
#include "wire/byte_order.hpp"
#include "wire/frame.hpp"

namespace metaroce::engine {
namespace {

using Frame = std::vector<std::uint8_t>;
using wire::ParseError;

constexpr std::size_t guard = 4096;

// Timers far beyond the test's duration: on a shared machine a stall of a
// few ms must not turn into probes or failed paths (the counts are exact).
LoopbackConfig quiet_loopback(transport::Mode mode) {
  LoopbackConfig c;
  c.ports.mbufs = 4096;
  c.hosts.tx_mbufs = 4096;
  c.hosts.zero_copy_threshold = zero_copy_never;
  c.connection.mode = mode;
  c.connection.mtu = 1024;
  c.connection.paths = mode == transport::Mode::metaroce ? 4 : 1;
  c.connection.initial_rto = 200'000'000;
  c.connection.min_rto = 100'000'000;
  c.connection.max_rto = 1'000'000'000;
  return c;
}

// Source and destination of a transfer, the destination between canaries.
struct Buffers : test::GuardedBuffers {
  Buffers(Loopback& lb, std::size_t size) : GuardedBuffers(lb.host_a().memory(), lb.host_b().memory(), size) {}
};

// Polls both sides until `count` completions arrived at A (in order, all
// successful) or the time limit; then lets the last ACKs drain.
bool complete(Loopback& lb, std::size_t count, std::chrono::seconds limit) {
  std::vector<transport::Completion> done;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (done.size() < count && std::chrono::steady_clock::now() < deadline) {
    lb.poll_side_a();
    lb.poll_side_b();
    lb.connection_a().poll_completions(done);
  }
  for (int i = 0; i < 200; ++i) {
    lb.poll_side_a();
    lb.poll_side_b();
  }
  for (std::size_t k = 0; k < done.size(); ++k) {
    EXPECT_EQ(done[k].wr_id, k);
    EXPECT_EQ(done[k].status, transport::CompletionStatus::success);
  }
  return done.size() == count;
}

// Puts frames on host A's transmit queue: they arrive on B's receive ring.
void inject(Loopback& lb, TxMbufBuilder& builder, const std::vector<Frame>& frames) {
  for (const Frame& f : frames) {
    rte_mbuf* m = builder.copy_frame(f);
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(rte_eth_tx_burst(lb.host_a().config().port_id, 0, &m, 1), 1);
    lb.poll_side_b();  // so B's ring never holds more than a few
  }
}

// The IPv4 header checksum made right again after a change (IHL from the frame).
void fix_ip_checksum(Frame& f, std::size_t l3 = wire::ethernet_header_size) {
  const std::size_t ihl = std::size_t{f[l3] & 0x0fu} * 4;
  wire::store_be16(f.data() + l3 + 10, 0);
  wire::store_be16(f.data() + l3 + 10, wire::ipv4_header_checksum(f.data() + l3, ihl));
}
// The ICRC made right again (IPv4, no VLAN).
void fix_icrc(Frame& f) {
  const std::size_t end = f.size() - 4;
  wire::store_le32(f.data() + end, wire::compute_icrc(wire::ByteSpan(f.data() + 14, end - 14)));
}

Frame build(const wire::FrameSpec& s, std::size_t payload_len) {
  std::vector<std::uint8_t> payload(payload_len);
  std::iota(payload.begin(), payload.end(), std::uint8_t{1});
  Frame f(wire::headers_size(s) + payload_len + 8);
  f.resize(wire::build_frame(s, payload, f));
  EXPECT_FALSE(f.empty());
  return f;
}

TEST(EngineHostile, FramesOnlyTheEngineSeesAreCountedByReasonAndTheTransferCompletes) {
  std::string error;
  auto lb = Loopback::create(quiet_loopback(transport::Mode::metaroce), error);
  ASSERT_TRUE(lb) << error;
  TxMbufSetup setup;
  setup.name = "hostile";
  setup.mbufs = 1024;
  auto builder = TxMbufBuilder::create(setup, error);
  ASSERT_TRUE(builder) << error;

  // A genuine-looking MR_WRITE for B's connection (QPN 0x202), PSN far
  // beyond its window: the engine's checks are all it must fail.
  const transport::ConnectionConfig& ca = lb->connection_a().config();
  wire::FrameSpec base = transport::frame_spec(ca, wire::opcode::mr_write, ca.base_src_port, true);
  base.bth.psn = (ca.initial_psn + 0x100000) & wire::psn_mask;
  base.mr_data.path_id = 1;
  base.mr_write = {0x1000, 7, 100, 0};
  const Frame genuine = build(base, 100);
  const std::size_t bth = 42;

  std::map<ParseError, std::uint64_t> parse_errors;
  std::vector<Frame> hostile;
  const auto add = [&](Frame f, ParseError reason) {
    hostile.push_back(std::move(f));
    if (reason != ParseError::ok) ++parse_errors[reason];
  };
  {
    wire::FrameSpec s = base;
    s.bth.dest_qp = 0x777;
    add(build(s, 100), ParseError::ok);  // rx_unknown_qpn
    s.bth.dest_qp = 1;
    add(build(s, 100), ParseError::ok);  // the connection manager's QP, with no manager: rx_unknown_qpn
  }
  {
    Frame f = genuine;
    f[f.size() - 20] ^= 0x01;  // a payload bit
    add(f, ParseError::bad_icrc);
  }
  {
    Frame arp(60, 0);
    std::memcpy(arp.data(), genuine.data(), 12);
    wire::store_be16(arp.data() + 12, 0x0806);
    add(arp, ParseError::not_ip);
    Frame qinq = genuine;  // an 802.1ad outer tag: not ours to unwrap
    qinq.insert(qinq.begin() + 12, {0x88, 0xa8, 0x00, 0x05});
    add(qinq, ParseError::not_ip);
    Frame two_tags = genuine;
    two_tags.insert(two_tags.begin() + 12, {0x81, 0x00, 0x00, 0x05, 0x81, 0x00, 0x00, 0x06});
    add(two_tags, ParseError::not_ip);
  }
  {
    Frame f = genuine;
    wire::store_be16(f.data() + 12, 0x86dd);  // IPv6 ethertype, IPv4 header
    add(f, ParseError::bad_ip_version);
  }
  {
    Frame f = genuine;
    f[14] = 0x44;  // IHL 4
    add(f, ParseError::bad_ip_header_length);
  }
  {
    Frame f = genuine;  // IHL 6: four bytes of options (NOPs) inserted
    f.insert(f.begin() + 34, {0x01, 0x01, 0x01, 0x01});
    f[14] = 0x46;
    wire::store_be16(f.data() + 16, static_cast<std::uint16_t>(wire::load_be16(f.data() + 16) + 4));
    fix_ip_checksum(f);
    add(f, ParseError::ipv4_options);
  }
  {
    Frame f = genuine;
    f[20] = 0x20;  // MF, offset 0
    fix_ip_checksum(f);
    add(f, ParseError::ip_fragment);
    Frame g = genuine;
    wire::store_be16(g.data() + 20, 0x0010);  // DF clear, fragment offset 16
    fix_ip_checksum(g);
    add(g, ParseError::ip_fragment);
  }
  {
    Frame f = genuine;
    wire::store_be16(f.data() + 16, 10);  // total length below the header
    fix_ip_checksum(f);
    add(f, ParseError::bad_ip_length);
  }
  {
    Frame f = genuine;
    f[24] ^= 0xff;  // the checksum itself
    add(f, ParseError::bad_ip_checksum);
  }
  {
    Frame f = genuine;
    wire::store_be16(f.data() + 16, static_cast<std::uint16_t>(wire::load_be16(f.data() + 16) + 8));
    fix_ip_checksum(f);
    add(f, ParseError::truncated);  // the IP header claims 8 bytes more than came
  }
  {
    Frame f = genuine;
    f[23] = 6;  // TCP
    fix_ip_checksum(f);
    add(f, ParseError::not_udp);
  }
  {
    wire::FrameSpec s = base;
    s.udp.dst_port = 4790;
    add(build(s, 100), ParseError::not_roce_port);
    s.udp.dst_port = 53;
    add(build(s, 100), ParseError::not_roce_port);
  }
  {
    Frame f = genuine;
    wire::store_be16(f.data() + 38, static_cast<std::uint16_t>(wire::load_be16(f.data() + 38) - 4));
    add(f, ParseError::bad_udp_length);
  }
  {
    Frame f = genuine;
    f[bth] = 0x1f;  // not an opcode of either mode
    fix_icrc(f);
    add(f, ParseError::unknown_opcode);
  }
  {
    Frame f = genuine;
    f[bth + 1] |= 0x01;  // TVer 1
    fix_icrc(f);
    add(f, ParseError::bad_header_field);
  }
  {
    wire::FrameSpec s = base;
    s.bth.opcode = wire::opcode::mr_probe;
    Frame f = build(s, 0);
    f[bth + 1] = static_cast<std::uint8_t>(f[bth + 1] | 0x20);  // pad 2 on a frame without payload
    add(f, ParseError::bad_pad);
    Frame g = build(s, 0);
    g[bth] = wire::opcode::write_only_imm;  // RETH + ImmDt do not fit where the MDH was
    add(g, ParseError::length_mismatch);
  }
  // Truncated at every length, 0 to one byte short.
  for (std::size_t len = 0; len < genuine.size(); ++len)
    add(Frame(genuine.begin(), genuine.begin() + static_cast<std::ptrdiff_t>(len)), ParseError::truncated);
  const std::size_t engine_drops = hostile.size();
  // Past the engine's checks but not the connection's: a VLAN the
  // connection is not on (the engine), then a PSN far beyond the window and
  // a P_Key of another incarnation (the connection).
  {
    wire::FrameSpec s = base;
    s.eth.vlan_present = true;
    s.eth.vlan_tci = 5;
    add(build(s, 100), ParseError::ok);
    add(genuine, ParseError::ok);
    s = base;
    s.bth.pkey = 0x8123;
    add(build(s, 100), ParseError::ok);
  }

  // The transfer: 512 KiB in 16 KiB WRITEs; the hostile frames go in while
  // it runs.
  Buffers buffers(*lb, 512 * 1024);
  const std::size_t writes = buffers.post_writes(lb->connection_a(), 16 * 1024);
  for (int i = 0; i < 20; ++i) {
    lb->poll_side_a();
    lb->poll_side_b();
  }
  inject(*lb, *builder, hostile);
  ASSERT_TRUE(complete(*lb, writes, std::chrono::seconds(30)));
  EXPECT_TRUE(buffers.placed());
  EXPECT_TRUE(buffers.canaries_intact());

  const EngineCounters& a = lb->host_a().counters();
  const EngineCounters& b = lb->host_b().counters();
  std::uint64_t parse_total = 0;
  for (std::size_t r = 1; r < wire::parse_error_count; ++r) {
    const auto reason = static_cast<ParseError>(r);
    const std::uint64_t expected = parse_errors.contains(reason) ? parse_errors[reason] : 0;
    EXPECT_EQ(b.rx_parse_errors[r], expected) << wire::to_string(reason);
    parse_total += expected;
  }
  EXPECT_EQ(parse_errors[ParseError::truncated], genuine.size() + 1);
  EXPECT_EQ(b.rx_unknown_qpn, 2u);
  EXPECT_EQ(b.rx_vlan_mismatch, 1u);
  EXPECT_EQ(parse_total + b.rx_unknown_qpn, engine_drops);
  EXPECT_EQ(b.dropped(), engine_drops + 1);
  EXPECT_EQ(b.rx_frames, a.tx_frames + hostile.size());
  EXPECT_EQ(b.rx_delivered, a.tx_frames + 2);
  EXPECT_EQ(a.dropped(), 0u);
  EXPECT_EQ(a.rx_frames, b.tx_frames);
  EXPECT_EQ(a.rx_delivered, a.rx_frames);
  const transport::ConnectionCounters& cb = lb->connection_b().counters();
  EXPECT_EQ(cb.psn_beyond_window, 1u);
  EXPECT_EQ(cb.pkey_mismatch, 1u);
  EXPECT_EQ(cb.data_packets_received, lb->connection_a().counters().data_packets_sent);
  EXPECT_EQ(cb.remote_access_errors + cb.inconsistent_message + cb.wrong_mode_packets, 0u);
  EXPECT_EQ(lb->connection_a().state(), transport::ConnectionState::ready);
  EXPECT_EQ(lb->connection_b().state(), transport::ConnectionState::ready);
  std::vector<std::string> names;
  b.visit([&](const std::string& name, std::uint64_t) { names.push_back(name); });
  EXPECT_NE(std::find(names.begin(), names.end(), "rx_vlan_mismatch"), names.end());
}

// A connection on a VLAN takes its own VLAN's frames (priority bits aside)
// and no others, untagged ones included.
TEST(EngineHostile, AConnectionOnAVlanTakesOnlyItsVlan) {
  LoopbackConfig c = quiet_loopback(transport::Mode::rocev2);
  c.connection.endpoints.vlan_present = true;
  c.connection.endpoints.vlan_tci = 0x0064;  // VID 100
  std::string error;
  auto lb = Loopback::create(c, error);
  ASSERT_TRUE(lb) << error;
  TxMbufSetup setup;
  setup.name = "vlan";
  setup.mbufs = 1024;
  auto builder = TxMbufBuilder::create(setup, error);
  ASSERT_TRUE(builder) << error;
  Buffers buffers(*lb, 64 * 1024);
  const std::size_t writes = buffers.post_writes(lb->connection_a(), 8 * 1024);
  // CNPs to B's connection: harmless when taken (counted), so each is seen.
  const transport::ConnectionConfig& ca = lb->connection_a().config();
  wire::FrameSpec cnp = transport::frame_spec(ca, wire::opcode::cnp, ca.base_src_port, false);
  std::vector<Frame> frames;
  cnp.eth.vlan_tci = 0xe064;  // VID 100, priority 7: ours
  frames.push_back(build(cnp, 0));
  cnp.eth.vlan_tci = 0x0065;  // VID 101
  frames.push_back(build(cnp, 0));
  cnp.eth.vlan_present = false;  // untagged
  frames.push_back(build(cnp, 0));
  inject(*lb, *builder, frames);
  ASSERT_TRUE(complete(*lb, writes, std::chrono::seconds(30)));
  EXPECT_TRUE(buffers.placed());
  EXPECT_EQ(lb->host_b().counters().rx_vlan_mismatch, 2u);
  EXPECT_EQ(lb->connection_b().counters().cnp_received, 1u);
  EXPECT_EQ(lb->host_a().counters().rx_vlan_mismatch, 0u);
  EXPECT_EQ(Frame(frames[0].begin() + 12, frames[0].begin() + 14), (Frame{0x81, 0x00}));
}

// ------------------------------------------------------------ exhaustion

// A transmit mempool far smaller than what the sender has to send, and a
// receiver that is not polled for a while: the pool runs dry, the frames
// the connections emitted meanwhile are held (copied) and sent later, in
// order. Nothing is lost, so nothing is retransmitted.
class TxMempool : public ::testing::TestWithParam<transport::Mode> {};

TEST_P(TxMempool, EmptyTxMempoolHoldsFramesAndLosesNothing) {
  LoopbackConfig c = quiet_loopback(GetParam());
  c.hosts.tx_mbufs = 512;  // the least with a 256-mbuf per-lcore cache
  std::string error;
  auto lb = Loopback::create(c, error);
  ASSERT_TRUE(lb) << error;
  Buffers buffers(*lb, 2 * 1024 * 1024);
  const std::size_t writes = buffers.post_writes(lb->connection_a(), 64 * 1024);
  // Only A turns: its frames fill B's receive ring and hold every mbuf.
  for (int i = 0; i < 50; ++i) lb->poll_side_a();
  const EngineCounters& a = lb->host_a().counters();
  EXPECT_EQ(a.tx_frames, 512u) << "every mbuf of A's pool is in B's ring";
  EXPECT_GT(a.tx_mempool_empty, 0u);
  EXPECT_EQ(lb->host_a().tx_held(), a.tx_mempool_empty) << "none built yet";
  // 512 = 8 polls of 64 frames: the ninth poll's 64 found the pool empty,
  // and the connection was not polled again while they waited.
  EXPECT_EQ(a.tx_mempool_empty, transport::Connection::burst_limit);
  const std::uint64_t held = a.tx_mempool_empty;
  const std::uint64_t sent_before = lb->connection_a().counters().data_packets_sent;
  for (int i = 0; i < 50; ++i) lb->poll_side_a();
  EXPECT_EQ(a.tx_mempool_empty, held);
  EXPECT_EQ(lb->connection_a().counters().data_packets_sent, sent_before);

  ASSERT_TRUE(complete(*lb, writes, std::chrono::seconds(60)));
  EXPECT_TRUE(buffers.placed());
  EXPECT_TRUE(buffers.canaries_intact());
  EXPECT_EQ(lb->host_a().tx_held(), 0u);
  EXPECT_EQ(a.dropped(), 0u);
  EXPECT_EQ(lb->host_b().counters().dropped(), 0u);
  EXPECT_EQ(lb->host_b().counters().rx_frames, a.tx_frames);
  EXPECT_EQ(lb->connection_a().counters().retransmitted_packets, 0u) << "a held frame was lost";
  EXPECT_EQ(lb->connection_b().counters().duplicate_packets, 0u);
  EXPECT_EQ(lb->connection_b().counters().out_of_sequence_drops, 0u);
  EXPECT_EQ(lb->connection_b().counters().data_packets_received, lb->connection_a().counters().data_packets_sent);
}

INSTANTIATE_TEST_SUITE_P(Engine, TxMempool, ::testing::Values(transport::Mode::metaroce, transport::Mode::rocev2),
                         [](const auto& info) { return std::string(transport::to_string(info.param)); });

// A net_pcap port (its PMD allocates an mbuf per frame it reads) with a
// receive pool of 8 mbufs: each burst takes 8 frames, the ninth finds no
// mbuf and is dropped by the PMD (rx_nombuf, our rx_mempool_empty).
struct PcapPort {
  PcapPort(const std::string& vdev, const std::string& args, unsigned rx_mbufs, std::string& error) : name(vdev) {
    if (rte_vdev_init(name.c_str(), args.c_str()) != 0 || rte_eth_dev_get_port_by_name(name.c_str(), &id) != 0) {
      error = "cannot create " + name + " with " + args;
      return;
    }
    created = true;
    rte_eth_conf conf{};
    pool = rte_pktmbuf_pool_create((name + "_rx").c_str(), rx_mbufs, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                   static_cast<int>(rte_socket_id()));
    if (pool == nullptr || rte_eth_dev_configure(id, 1, 1, &conf) != 0 ||
        rte_eth_rx_queue_setup(id, 0, 64, rte_socket_id(), nullptr, pool) != 0 ||
        rte_eth_tx_queue_setup(id, 0, 64, rte_socket_id(), nullptr) != 0 || rte_eth_dev_start(id) != 0)
      error = "cannot set up " + name;
  }
  ~PcapPort() {
    if (created) {
      rte_eth_dev_stop(id);
      rte_eth_dev_close(id);
      rte_vdev_uninit(name.c_str());
    }
    rte_mempool_free(pool);
  }
  std::string name;
  std::uint16_t id = 0;
  bool created = false;
  rte_mempool* pool = nullptr;
};

// The engine counts what the PMD dropped for want of receive mbufs; the
// connection's ACKs report exactly those packets missing; the sender, given
// them, resends exactly those; with them the message completes, every byte
// right. (The sender runs in virtual time in the test, and its
// retransmissions are handed to B's connection directly: a pcap port reads
// its file once.)
TEST(EngineExhaustion, EmptyRxMempoolIsCountedAndTheSenderResendsExactlyWhatWasDropped) {
  const std::string dir = std::filesystem::temp_directory_path() / ("metaroce-rxpool-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string rx_path = dir + "/in.pcap", tx_path = dir + "/out.pcap";

  // A, the sender: one SEND of 44 packets over 4 paths.
  transport::ConnectionConfig ca;
  ca.mtu = 1024;
  ca.paths = 4;
  ca.local_qpn = 0x11;
  ca.peer_qpn = 0x22;
  ca.initial_psn = 0x100;
  ca.peer_initial_psn = 0x200;
  ca.endpoints.local_ipv4 = 0x0a000001;
  ca.endpoints.peer_ipv4 = 0x0a000002;
  transport::ConnectionConfig cb = ca;
  std::swap(cb.local_qpn, cb.peer_qpn);
  std::swap(cb.initial_psn, cb.peer_initial_psn);
  std::swap(cb.endpoints.local_ipv4, cb.endpoints.peer_ipv4);
  transport::MemoryRegistry mem_a;
  timer::Wheel wheel_a{0};
  std::string error;
  auto a = transport::Connection::create(ca, mem_a, wheel_a, nullptr, error);
  ASSERT_TRUE(a) << error;
  a->connect();
  constexpr std::size_t packets = 44;
  std::vector<std::uint8_t> src(packets * 1024);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i ^ (i >> 8));
  const std::uint32_t lkey = mem_a.register_region(src.data(), src.size(), transport::access_local_write);
  transport::SendRequest send;
  send.wr_id = 1;
  send.op = transport::SendOp::send;
  send.local_addr = src.data();
  send.length = src.size();
  send.lkey = lkey;
  ASSERT_EQ(a->post_send(send), transport::PostResult::ok);
  transport::TxBatch batch;
  a->poll(1000, batch);
  ASSERT_EQ(batch.size(), packets);
  {
    apps::PcapWriter writer;
    ASSERT_TRUE(writer.open(rx_path, error)) << error;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Frame f;
      batch.serialize(i, f);
      writer.write(f, 1000 + i);
    }
  }

  // B: an engine host on the pcap port, a receive posted.
  std::vector<std::uint8_t> dst(src.size() + 2 * guard, 0xc5);
  std::memset(dst.data() + guard, 0, src.size());
  PcapPort port("net_pcap_rxpool", "rx_pcap=" + rx_path + ",tx_pcap=" + tx_path, 8, error);
  ASSERT_TRUE(error.empty()) << error;
  EngineHostConfig hc;
  hc.name = "rxpool";
  hc.port_id = port.id;
  hc.tx_mbufs = 512;
  hc.zero_copy_threshold = zero_copy_never;
  auto host = EngineHost::create(hc, error);
  ASSERT_TRUE(host) << error;
  transport::Connection* b = host->add_connection(cb, nullptr, error);
  ASSERT_NE(b, nullptr) << error;
  b->connect();
  const std::uint32_t key =
      host->memory().register_region(dst.data() + guard, src.size(), transport::access_local_write);
  ASSERT_EQ(b->post_receive({7, 0, dst.data() + guard, src.size(), key}), transport::PostResult::ok);
  for (int i = 0; i < 100; ++i) host->poll_once();
  host->refresh_port_counters();
  const EngineCounters& counters = host->counters();
  // Bursts of 32 from a pool of 8: 8 frames taken and the 9th dropped, four
  // times (frames 8, 17, 26, 35), then the last 8.
  EXPECT_EQ(counters.rx_mempool_empty, 4u);
  EXPECT_EQ(counters.rx_frames, packets - 4);
  EXPECT_EQ(counters.rx_delivered, packets - 4);
  EXPECT_EQ(counters.dropped(), 4u);
  EXPECT_EQ(b->counters().data_packets_received, packets - 4);
  std::vector<transport::Completion> rx;
  EXPECT_EQ(b->poll_completions(rx), 0u) << "the message is not whole";
  rte_eth_dev_stop(port.id);  // closes the capture of what B sent

  // B's ACKs, from its capture, to A: four gaps, four retransmissions of
  // exactly the PSNs that were dropped.
  apps::PcapReader reader;
  ASSERT_TRUE(reader.open(tx_path, error)) << error;
  apps::PcapRecord record;
  std::vector<Frame> acks;
  while (reader.next(record)) acks.emplace_back(record.data.begin(), record.data.end());
  ASSERT_FALSE(acks.empty());
  for (const Frame& f : acks) {
    wire::ParsedFrame p;
    ASSERT_EQ(wire::parse_frame(f, p), ParseError::ok);
    EXPECT_EQ(p.bth.opcode, wire::opcode::mr_ack);
    a->on_frame(2000, p);
  }
  EXPECT_EQ(a->counters().packets_declared_lost, 4u);
  batch.clear();
  a->poll(3000, batch);
  ASSERT_EQ(batch.size(), 4u);
  const std::uint64_t now = host->now_ns();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Frame f;
    batch.serialize(i, f);
    wire::ParsedFrame p;
    ASSERT_EQ(wire::parse_frame(f, p), ParseError::ok);
    EXPECT_EQ(p.bth.psn, ca.initial_psn + 8 + 9 * i) << "retransmission " << i;
    b->on_frame(now, p);  // handed over directly: the pcap port has read its file
  }
  // With them the message is whole: one receive completion, every byte.
  ASSERT_EQ(b->poll_completions(rx), 1u);
  EXPECT_EQ(rx[0].wr_id, 7u);
  EXPECT_EQ(rx[0].status, transport::CompletionStatus::success);
  EXPECT_EQ(rx[0].byte_len, src.size());
  EXPECT_EQ(std::memcmp(dst.data() + guard, src.data(), src.size()), 0);
  for (std::size_t i = 0; i < guard; ++i)
    ASSERT_TRUE(dst[i] == 0xc5 && dst[guard + src.size() + i] == 0xc5) << "canary " << i;
  EXPECT_EQ(b->counters().duplicate_packets, 0u);
  host.reset();
  std::filesystem::remove_all(dir);
}

TEST(EngineExhaustion, TooManyConnectionsIsAClearError) {
  std::uint16_t port = 0;
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_ring0", &port), 0);
  EngineHostConfig hc;
  hc.name = "crowded";
  hc.port_id = port;
  hc.tx_mbufs = 512;
  hc.max_connections = 2;
  std::string error;
  auto host = EngineHost::create(hc, error);
  ASSERT_TRUE(host) << error;
  transport::ConnectionConfig c;
  for (std::uint32_t qpn = 0x100; qpn < 0x102; ++qpn) {
    c.local_qpn = qpn;
    ASSERT_NE(host->add_connection(c, nullptr, error), nullptr) << error;
  }
  c.local_qpn = 0x102;
  EXPECT_EQ(host->add_connection(c, nullptr, error), nullptr);
  EXPECT_EQ(error,
            "crowded: already 2 connections, its max_connections: raise max_connections, or put the connection on "
            "another host (lcore, queue)");
  EXPECT_EQ(host->counters().connections_refused, 1u);
  EXPECT_EQ(host->connection(0x102), nullptr);
  // A slot freed is a slot again.
  ASSERT_TRUE(host->remove_connection(0x100));
  EXPECT_NE(host->add_connection(c, nullptr, error), nullptr) << error;
  EXPECT_EQ(host->counters().connections_refused, 1u);
}

// A peer that never answers, on real ports and the TSC: the connection
// times out to retry_exceeded, every work request completes once, the host
// sends nothing more for it and keeps running; teardown frees every mbuf
// still in the rings (LeakSanitizer checks the rest).
TEST(EngineExhaustion, PeerThatNeverAnswersFailsEveryWorkRequestOnce) {
  for (const transport::Mode mode : {transport::Mode::metaroce, transport::Mode::rocev2}) {
    LoopbackConfig c = quiet_loopback(mode);
    c.connection.initial_rto = 1'000'000;
    c.connection.min_rto = 1'000'000;
    c.connection.max_rto = 8'000'000;
    c.connection.retry_limit = 2;
    c.connection.streams = 2;
    std::string error;
    auto lb = Loopback::create(c, error);
    ASSERT_TRUE(lb) << error;
    Buffers buffers(*lb, 64 * 1024);
    transport::Connection& a = lb->connection_a();
    const std::size_t writes = buffers.post_writes(a, 16 * 1024);
    ASSERT_EQ(a.post_receive({100, 1, buffers.src.data(), 64, buffers.lkey}), transport::PostResult::ok);
    std::vector<transport::Completion> done;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (a.state() == transport::ConnectionState::ready && std::chrono::steady_clock::now() < deadline)
      lb->poll_side_a();  // B is never polled: nothing ever comes back
    ASSERT_EQ(a.state(), transport::ConnectionState::error) << transport::to_string(mode);
    a.poll_completions(done);
    ASSERT_EQ(done.size(), writes + 1);
    std::map<std::uint64_t, int> seen;
    std::size_t retry_exceeded = 0;
    for (const auto& d : done) {
      ++seen[d.wr_id];
      if (d.status == transport::CompletionStatus::retry_exceeded) ++retry_exceeded;
      else EXPECT_EQ(d.status, transport::CompletionStatus::flushed);
    }
    EXPECT_EQ(retry_exceeded, 1u);
    EXPECT_EQ(seen.size(), writes + 1) << "a work request completed twice";
    EXPECT_EQ(done.front().wr_id, 0u);
    EXPECT_EQ(done.front().status, transport::CompletionStatus::retry_exceeded);
    EXPECT_EQ(a.packets_outstanding(), 0u);
    const std::uint64_t tx = lb->host_a().counters().tx_frames;
    for (int i = 0; i < 1000; ++i) lb->poll_side_a();
    EXPECT_EQ(lb->host_a().counters().tx_frames, tx) << "frames sent after the failure";
    EXPECT_EQ(lb->host_a().counters().dropped(), 0u);
  }
}

}  // namespace
}  // namespace metaroce::engine
