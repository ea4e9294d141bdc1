// perftest's out-of-band exchange over TCP (its "ethernet" exchange, the
// default without rdma_cm): each side sends one fixed-size text message
// naming its QP, and reads the other's. doc/WIRE.md, "Out-of-band exchange",
// has it byte by byte:
//   LID:OUT_READS:QPN:PSN:RKEY:VADDR:G0:G1:...:G15:SRQN:   + NUL = 108 bytes
//   "%04x:%04x:%06x:%06x:%08x:%016x:" 16 x "%02x:" "%08x:"  (lower-case hex)
// The client connects and writes first, then reads; the server reads
// first, then writes. Only this message is spoken: not perftest's version
// and parameter exchanges, so both ends here are metaroce-perf (or a
// script that speaks the message).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace metaroce::apps {

inline constexpr std::size_t oob_message_size = 108;  // 107 characters and a NUL

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

// The exchange itself, on blocking-free sockets: `turn` is called while
// waiting (the endpoint keeps answering ARP), `stop` ends the wait.
// Server: listens on `port` (all addresses), takes one client, reads its
// message and passes it to `reply`, which fills ours (the connection is
// made in between), writes it. Client: connects to `address` (A.B.C.D:PORT
// or [IPv6]:PORT), writes `mine`, reads theirs. Each waits up to
// `timeout_s`; false with one line naming the fix.
bool oob_serve(std::uint16_t port, double timeout_s, const std::function<void()>& turn,
               const std::function<bool()>& stop, const std::function<bool(const OobKeys& theirs, OobKeys& mine,
                                                                          std::string& error)>& reply,
               std::string& error);
bool oob_connect(const std::string& address, double timeout_s, const std::function<void()>& turn,
                 const std::function<bool()>& stop, const OobKeys& mine, OobKeys& theirs, std::string& error);
// "A.B.C.D:PORT" or "[v6]:PORT" into host and port; false otherwise.
bool split_host_port(const std::string& text, std::string& host, std::uint16_t& port);

}  // namespace metaroce::apps
