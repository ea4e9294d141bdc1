// perftest's out-of-band exchange over TCP (its "ethernet" exchange, the
// default without rdma_cm), spoken as ib_write_bw and ib_send_bw speak it.
// doc/WIRE.md, "Out-of-band exchange", has it byte by byte. Every step is
// one exchange of a fixed size: the client writes its part, then reads the
// server's; the server reads first, then writes. In order:
//   version   16 bytes: perftest's version string, NUL-padded
//   sys data  4 + 4 bytes: page size, cache line size (big-endian)
//   MTU       2 bytes: the IB MTU code (1..5) as text, NUL-terminated
//   keys      108 bytes: LID:OUT_READS:QPN:PSN:RKEY:VADDR:G0:...:G15:SRQN: + NUL
//   keys      again, once the QP is ready to receive (a barrier)
//   [send: keys once more, the receives posted]   ... the test runs ...
//   [write: keys; the report: 5 x 8 bytes, one exchange each]
//   keys, then "done" + NUL (5 bytes) written by both, and the close
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace metaroce::apps {

inline constexpr std::size_t oob_message_size = 108;  // 107 characters and a NUL
inline constexpr std::size_t perftest_version_size = 16;
// The perftest version metaroce announces: the one whose conversation it
// speaks. perftest branches on the peer's number (5.1, 5.31, 5.32, 5.33,
// 6.28); from 6.28 on it adds a parameter negotiation that it only starts
// with a peer of 6.28 or later, so none takes place with metaroce.
inline constexpr std::string_view perftest_version = "6.24";

struct OobKeys {
  std::uint16_t lid = 0;        // 0 on RoCE
  std::uint16_t out_reads = 0;  // READs and atomics outstanding at once
  std::uint32_t qpn = 0;        // 24 bits
  std::uint32_t psn = 0;        // 24 bits: the first PSN this side sends
  std::uint32_t rkey = 0;
  std::uint64_t vaddr = 0;
  std::array<std::uint8_t, 16> gid{};  // RoCEv2: the IPv6 or IPv4-mapped address
  std::uint32_t srqn = 0;       // XRC only; 0
  bool operator==(const OobKeys&) const = default;
};

// The 108 bytes for `k` (the last one NUL).
[[nodiscard]] std::string format_oob_message(const OobKeys& k);
// `bytes` (108 of them) into `out`; false with what is wrong.
bool parse_oob_message(std::string_view bytes, OobKeys& out, std::string& error);
// The GID's address as text: A.B.C.D when IPv4-mapped (::ffff:A.B.C.D), else IPv6.
[[nodiscard]] std::string gid_address(const std::array<std::uint8_t, 16>& gid);

// The version step's 16 bytes: `version`, then NULs.
[[nodiscard]] std::string format_perftest_version(std::string_view version);
// The peer's 16 bytes: its version text and number (the leading decimal, as
// perftest reads it). False, saying why, for one older than 5.33, whose
// steps have other sizes.
bool parse_perftest_version(std::string_view bytes, std::string& text, double& number, std::string& error);
// The MTU step's 2 bytes ("5" and a NUL): an IB MTU code (IBV_MTU_256 = 1
// .. IBV_MTU_4096 = 5, cm::ibta::mtu_code), and the code the peer's give
// (0 when they are not one).
[[nodiscard]] std::string format_mtu_step(int code);
[[nodiscard]] int parse_mtu_step(std::string_view bytes);
// 32- and 64-bit big-endian fields (sys data; the report's sizes and the
// bit patterns of its doubles).
[[nodiscard]] std::string be32_bytes(std::uint32_t v);
[[nodiscard]] std::string be64_bytes(std::uint64_t v);
[[nodiscard]] std::uint64_t from_be_bytes(std::string_view bytes);

// Where perftest's WRITE client puts its messages in the server's buffer:
// message m at (m % slots) * stride. Messages of at most half the cycle
// buffer walk through it in steps of the size rounded up to the cache line;
// larger ones all go to the buffer's start. The buffer must hold
// `region` bytes.
struct PerftestLayout {
  std::uint32_t slots = 1;
  std::uint64_t stride = 0;
  std::uint64_t region = 0;
};
[[nodiscard]] PerftestLayout perftest_write_layout(std::uint64_t size, std::uint32_t cycle_buffer,
                                                   std::uint32_t cache_line);

// What ib_write_bw's two ends tell each other after the test (its
// bw_report_data): bandwidths in MiB/s (perftest's MB/sec), the message rate
// in millions per second.
struct PerftestReport {
  std::uint64_t size = 0;
  std::uint64_t iterations = 0;
  double bw_peak = 0;
  double bw_average = 0;
  double message_rate = 0;
};

// The conversation's second and later steps, over one TCP connection. Waits
// call `turn` (the endpoint keeps answering) and end at `stop` or after
// each step's timeout; every failure is one line naming the step and the fix.
class PerftestLink {
 public:
  using Turn = std::function<void()>;
  using Stop = std::function<bool()>;
  ~PerftestLink();
  PerftestLink(const PerftestLink&) = delete;
  PerftestLink& operator=(const PerftestLink&) = delete;

  // Server: listens on `port` (every address), takes one client.
  static std::unique_ptr<PerftestLink> accept(std::uint16_t port, double timeout_s, Turn turn, Stop stop,
                                              std::string& error);
  // Client: connects to `address` (A.B.C.D:PORT or [IPv6]:PORT), trying
  // again until the server listens or the timeout.
  static std::unique_ptr<PerftestLink> connect(const std::string& address, double timeout_s, Turn turn, Stop stop,
                                               std::string& error);

  // Version, sys data and MTU. `mtu_code` is ours; `agreed` the smaller of
  // the two (perftest's rule), `peer_version` the peer's text.
  bool open(int mtu_code, int& agreed, std::string& peer_version, std::string& error);
  // One keys step: the client writes `mine` and reads `theirs`; the server
  // reads `theirs` and only then asks `reply` for `mine` (its connection is
  // made from what it read).
  bool keys(const std::function<bool(const OobKeys& theirs, OobKeys& mine, std::string& error)>& reply,
            std::string& error);
  bool keys(const OobKeys& mine, OobKeys& theirs, std::string& error);
  // ib_write_bw's report step.
  bool report(const PerftestReport& mine, PerftestReport& theirs, std::string& error);
  // The close: one keys step, "done" written, the peer's read if it comes.
  bool close(const OobKeys& mine, std::string& error);
  // True once the peer has written at least `bytes` (or closed): the step it
  // sends after the test has begun. Never waits.
  [[nodiscard]] bool peer_moved(std::size_t bytes) const;
  [[nodiscard]] bool client() const { return client_; }
  // perftest's cycle buffer after `open`: the larger page size of the two
  // (the peer's counted up to 1 MiB).
  // A perftest client writing messages of at most half of it moves its
  // remote address through that many bytes past the buffer's start.
  [[nodiscard]] std::uint32_t cycle_buffer() const { return cycle_buffer_; }
  // And the larger cache line size (the peer's counted up to 4 KiB).
  [[nodiscard]] std::uint32_t cache_line() const { return cache_line_; }
  void set_step_timeout(double seconds) { step_timeout_s_ = seconds; }

 private:
  PerftestLink(int fd, bool client, Turn turn, Stop stop);
  bool exchange(const std::string& mine, std::string& theirs, std::string_view step, std::string& error);
  bool move(char* data, std::size_t size, bool writing, std::string_view step, std::string& error);
  int fd_ = -1;
  bool client_ = false;
  Turn turn_;
  Stop stop_;
  double step_timeout_s_ = 30.0;
  std::uint32_t cycle_buffer_ = 0;
  std::uint32_t cache_line_ = 64;
};

// "A.B.C.D:PORT" or "[v6]:PORT" into host and port; false otherwise.
bool split_host_port(const std::string& text, std::string& host, std::uint16_t& port);

}  // namespace metaroce::apps
