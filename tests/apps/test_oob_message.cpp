// perftest's out-of-band exchange (apps/common/oob_exchange.hpp, doc/WIRE.md
// "Out-of-band exchange"): the exact bytes of every step, what a bad one is
// told, and both ends of the conversation against a peer written here with
// plain blocking sockets, step by step as ib_write_bw and ib_send_bw take
// them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/oob_exchange.hpp"

namespace metaroce::apps {
namespace {

OobKeys example() {
  OobKeys k;
  k.out_reads = 16;
  k.qpn = 0x000111;
  k.psn = 0x654321;
  k.rkey = 0x00000101;
  k.vaddr = 0x00007f19acb81010;
  k.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 79, 0, 2};  // ::ffff:10.79.0.2
  return k;
}

TEST(OobMessage, IsPerftestsGidMessageByteForByte) {
  const std::string m = format_oob_message(example());
  ASSERT_EQ(m.size(), oob_message_size);
  EXPECT_EQ(m, std::string("0000:0010:000111:654321:00000101:00007f19acb81010:"
                           "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4f:00:02:00000000:") +
                   '\0');
  OobKeys back;
  std::string error;
  ASSERT_TRUE(parse_oob_message(m, back, error)) << error;
  EXPECT_EQ(back, example());
  EXPECT_EQ(gid_address(back.gid), "10.79.0.2");
}

TEST(OobMessage, FieldsAreMaskedToTheirWidths) {
  OobKeys k = example();
  k.qpn = 0xabcdef12;  // 24 bits on the wire
  const std::string m = format_oob_message(k);
  EXPECT_EQ(m.substr(10, 6), "cdef12");
}

TEST(OobMessage, BadMessagesAreRefusedSayingWhere) {
  OobKeys out;
  std::string error;
  EXPECT_FALSE(parse_oob_message("0000:0010", out, error));
  EXPECT_EQ(error, "an out-of-band message is 108 bytes ending in NUL, not 9");
  std::string m = format_oob_message(example());
  m[10] = 'g';  // the QPN
  EXPECT_FALSE(parse_oob_message(m, out, error));
  EXPECT_EQ(error, "out-of-band message field 3 (at byte 10) is not 6 hex digits and a ':'");
  m = format_oob_message(example());
  m[49] = '-';  // the ':' after VADDR
  EXPECT_FALSE(parse_oob_message(m, out, error));
  EXPECT_EQ(error, "out-of-band message field 6 (at byte 33) is not 16 hex digits and a ':'");
  m = format_oob_message(example());
  m.back() = ':';
  EXPECT_FALSE(parse_oob_message(m, out, error));
}

TEST(OobMessage, Ipv6GidsAndAddresses) {
  std::array<std::uint8_t, 16> g{0xfd, 0, 0, 0x77, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  EXPECT_EQ(gid_address(g), "fd00:77:1::2");
  std::string host;
  std::uint16_t port = 0;
  EXPECT_TRUE(split_host_port("10.80.0.2:18515", host, port));
  EXPECT_EQ(host, "10.80.0.2");
  EXPECT_EQ(port, 18515);
  EXPECT_TRUE(split_host_port("[fd00::2]:7", host, port));
  EXPECT_EQ(host, "fd00::2");
  EXPECT_EQ(port, 7);
  EXPECT_FALSE(split_host_port("10.80.0.2", host, port));
  EXPECT_FALSE(split_host_port("10.80.0.2:0", host, port));
  EXPECT_FALSE(split_host_port("10.80.0.2:65536", host, port));
  EXPECT_FALSE(split_host_port("10.80.0.2:1x", host, port));
}

TEST(PerftestSteps, VersionIsSixteenBytesAndOldPeersAreRefused) {
  const std::string v = format_perftest_version(perftest_version);
  ASSERT_EQ(v.size(), 16u);
  EXPECT_EQ(v, std::string("6.24") + std::string(12, '\0'));
  std::string text, error;
  double number = 0;
  ASSERT_TRUE(parse_perftest_version(std::string("6.28") + std::string(12, '\0'), text, number, error)) << error;
  EXPECT_EQ(text, "6.28");
  EXPECT_DOUBLE_EQ(number, 6.28);
  ASSERT_TRUE(parse_perftest_version(std::string("5.33") + std::string(12, '\0'), text, number, error));
  EXPECT_FALSE(parse_perftest_version(std::string("5.32") + std::string(12, '\0'), text, number, error));
  EXPECT_EQ(error, "the out-of-band peer says it is perftest version '5.32': metaroce speaks the exchange of perftest "
                   "5.33 and later (is the peer perftest, without -R/--rdma_cm?)");
  EXPECT_FALSE(parse_perftest_version(std::string("0000:0010:00011") + '\0', text, number, error));
  EXPECT_FALSE(parse_perftest_version(std::string(16, '\xff'), text, number, error));
  EXPECT_NE(error.find("'" + std::string(16, '?') + "'"), std::string::npos) << error;
}

TEST(PerftestSteps, MtuStepAndFields) {
  EXPECT_EQ(format_mtu_step(5), std::string("5") + '\0');
  EXPECT_EQ(parse_mtu_step(std::string("3") + '\0'), 3);
  EXPECT_EQ(parse_mtu_step("3"), 0);
  EXPECT_EQ(parse_mtu_step(std::string("7") + '\0'), 0);
  EXPECT_EQ(be32_bytes(4096), std::string("\0\0\x10\0", 4));
  EXPECT_EQ(be64_bytes(0x0102030405060708), "\x01\x02\x03\x04\x05\x06\x07\x08");
  EXPECT_EQ(from_be_bytes(be64_bytes(0xfedcba9876543210)), 0xfedcba9876543210);
}

TEST(PerftestSteps, WriteLayoutIsPerftestsRemoteAddressWalk) {
  // 64 B messages in a 4 KiB cycle buffer: 64 places, 64 apart.
  PerftestLayout l = perftest_write_layout(64, 4096, 64);
  EXPECT_EQ(l.slots, 64u);
  EXPECT_EQ(l.stride, 64u);
  EXPECT_EQ(l.region, 4096u);
  // 100 B: rounded up to the cache line, 32 places of 128.
  l = perftest_write_layout(100, 4096, 64);
  EXPECT_EQ(l.slots, 32u);
  EXPECT_EQ(l.stride, 128u);
  EXPECT_EQ(l.region, 31u * 128 + 100);
  // Half the cycle buffer still walks; more goes to the start every time.
  l = perftest_write_layout(2048, 4096, 64);
  EXPECT_EQ(l.slots, 2u);
  l = perftest_write_layout(2049, 4096, 64);
  EXPECT_EQ(l.slots, 1u);
  EXPECT_EQ(l.region, 2049u);
  l = perftest_write_layout(65536, 65536, 128);  // a 64 KiB page
  EXPECT_EQ(l.slots, 1u);
  EXPECT_EQ(l.region, 65536u);
}

// A perftest end written with plain blocking sockets: each step is one
// write and one read of its exact size, the client's first.
class PlainEnd {
 public:
  explicit PlainEnd(int fd) : fd_(fd) {}
  ~PlainEnd() { ::close(fd_); }
  std::string read(std::size_t n) {
    std::string out(n, '\0');
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) return out.substr(0, got);
      got += static_cast<std::size_t>(r);
    }
    return out;
  }
  void write(const std::string& bytes) { ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size())); }
  bool closed() {
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_;
};

std::uint16_t free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

int plain_connect(std::uint16_t port) {
  for (int i = 0; i < 200; ++i) {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return s;
    ::close(s);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

std::string page_size_bytes() { return be32_bytes(static_cast<std::uint32_t>(::sysconf(_SC_PAGESIZE))); }

TEST(PerftestLink, ClientSpeaksIbWriteBwsConversationByteForByte) {
  const std::uint16_t port = free_port();
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  OobKeys server_keys = example();
  OobKeys client_keys = example();
  client_keys.qpn = 0x222;
  client_keys.psn = 0x123456;
  client_keys.rkey = 0;
  client_keys.vaddr = 0;
  std::vector<std::string> seen;  // what the client sent, step by step
  std::thread server([&] {
    PlainEnd peer(::accept(listener, nullptr, nullptr));
    const auto step = [&](std::size_t n, const std::string& answer) {
      seen.push_back(peer.read(n));
      peer.write(answer);
    };
    step(16, std::string("6.20") + std::string(12, '\0'));
    step(4, be32_bytes(8192));
    step(4, be32_bytes(128));
    step(2, std::string("3") + '\0');  // the peer's port carries 1024
    step(108, format_oob_message(server_keys));
    step(108, format_oob_message(server_keys));  // the barrier
    step(108, format_oob_message(server_keys));  // after the test
    for (int i = 0; i < 5; ++i) step(8, be64_bytes(0));  // the report
    step(108, format_oob_message(server_keys));  // the close
    seen.push_back(peer.read(5));
    peer.write(std::string("done") + '\0');
    seen.push_back(peer.closed() ? "closed" : "open");
  });
  std::string error;
  auto link = PerftestLink::connect(fmt::format("127.0.0.1:{}", port), 5.0, [] {}, [] { return false; }, error);
  ASSERT_NE(link, nullptr) << error;
  int agreed = 0;
  std::string version;
  ASSERT_TRUE(link->open(5, agreed, version, error)) << error;
  EXPECT_EQ(agreed, 3);
  EXPECT_EQ(version, "6.20");
  OobKeys theirs;
  ASSERT_TRUE(link->keys(client_keys, theirs, error)) << error;
  EXPECT_EQ(theirs, server_keys);
  ASSERT_TRUE(link->keys(client_keys, theirs, error)) << error;
  ASSERT_TRUE(link->keys(client_keys, theirs, error)) << error;
  PerftestReport mine, their_report;
  mine.size = 65536;
  mine.iterations = 5000;
  mine.bw_peak = 2500.5;
  mine.bw_average = 2400.25;
  mine.message_rate = 0.0384;
  ASSERT_TRUE(link->report(mine, their_report, error)) << error;
  EXPECT_EQ(their_report.iterations, 0u);
  ASSERT_TRUE(link->close(client_keys, error)) << error;
  server.join();
  ::close(listener);
  ASSERT_EQ(seen.size(), 15u);
  EXPECT_EQ(seen[0], std::string("6.24") + std::string(12, '\0'));
  EXPECT_EQ(seen[1], page_size_bytes());
  EXPECT_EQ(seen[2], std::string("\0\0\0\x40", 4));
  EXPECT_EQ(seen[3], std::string("5") + '\0');
  for (int i = 4; i < 7; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], format_oob_message(client_keys)) << i;
  EXPECT_EQ(seen[7], be64_bytes(65536));
  EXPECT_EQ(seen[8], be64_bytes(5000));
  EXPECT_EQ(seen[9], be64_bytes(std::bit_cast<std::uint64_t>(2500.5)));
  EXPECT_EQ(seen[10], be64_bytes(std::bit_cast<std::uint64_t>(2400.25)));
  EXPECT_EQ(seen[11], be64_bytes(std::bit_cast<std::uint64_t>(0.0384)));
  EXPECT_EQ(seen[12], format_oob_message(client_keys));
  EXPECT_EQ(seen[13], std::string("done") + '\0');
  EXPECT_EQ(seen[14], "closed");
}

TEST(PerftestLink, ServerSpeaksIbSendBwsConversationReadingFirst) {
  const std::uint16_t port = free_port();
  OobKeys server_keys = example();
  OobKeys client_keys = example();
  client_keys.qpn = 0x222;
  std::string error;
  std::vector<std::string> answers;  // what the server sent, step by step
  std::thread client([&] {
    PlainEnd peer(plain_connect(port));
    const auto step = [&](const std::string& mine, std::size_t n) {
      peer.write(mine);
      answers.push_back(peer.read(n));
    };
    step(std::string("6.28") + std::string(12, '\0'), 16);
    step(be32_bytes(4096), 4);
    step(be32_bytes(64), 4);
    step(std::string("4") + '\0', 2);
    step(format_oob_message(client_keys), 108);
    step(format_oob_message(client_keys), 108);  // the barrier
    step(format_oob_message(client_keys), 108);  // receives posted
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the test
    step(format_oob_message(client_keys), 108);  // the close
    peer.write(std::string("done") + '\0');
    answers.push_back(peer.read(5));
  });
  auto link = PerftestLink::accept(port, 5.0, [] {}, [] { return false; }, error);
  ASSERT_NE(link, nullptr) << error;
  EXPECT_FALSE(link->client());
  int agreed = 0;
  std::string version;
  ASSERT_TRUE(link->open(5, agreed, version, error)) << error;
  EXPECT_EQ(agreed, 4);
  EXPECT_EQ(version, "6.28");
  bool asked = false;
  ASSERT_TRUE(link->keys(
      [&](const OobKeys& theirs, OobKeys& mine, std::string&) {
        EXPECT_EQ(theirs, client_keys);
        mine = server_keys;
        asked = true;
        return true;
      },
      error))
      << error;
  EXPECT_TRUE(asked);
  OobKeys theirs;
  ASSERT_TRUE(link->keys(server_keys, theirs, error)) << error;
  ASSERT_TRUE(link->keys(server_keys, theirs, error)) << error;
  // The test runs: nothing waits until the client's next step is all there.
  while (!link->peer_moved(oob_message_size)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(link->close(server_keys, error)) << error;
  client.join();
  ASSERT_EQ(answers.size(), 9u);
  EXPECT_EQ(answers[0], std::string("6.24") + std::string(12, '\0'));
  EXPECT_EQ(answers[3], std::string("5") + '\0');
  for (int i = 4; i < 8; ++i) EXPECT_EQ(answers[static_cast<std::size_t>(i)], format_oob_message(server_keys)) << i;
  EXPECT_EQ(answers[8], std::string("done") + '\0');
}

TEST(PerftestLink, APeerThatClosesMidStepIsNamedWithTheStep) {
  const std::uint16_t port = free_port();
  std::thread client([&] {
    PlainEnd peer(plain_connect(port));
    peer.write(std::string("6.24") + std::string(12, '\0'));
    peer.read(16);
    peer.write(std::string(2, '\0'));  // half the page size, then gone
  });
  std::string error;
  auto link = PerftestLink::accept(port, 5.0, [] {}, [] { return false; }, error);
  ASSERT_NE(link, nullptr) << error;
  int agreed = 0;
  std::string version;
  EXPECT_FALSE(link->open(5, agreed, version, error));
  client.join();
  EXPECT_EQ(error, "the out-of-band peer closed the connection in the page size step, after 2 of 4 bytes: is it "
                   "perftest's exchange (no -R/--rdma_cm), with the same test (-s, -n, the verb) at both ends?");
}

}  // namespace
}  // namespace metaroce::apps
