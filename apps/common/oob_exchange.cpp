#include "common/oob_exchange.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace metaroce::apps {
namespace {

using Clock = std::chrono::steady_clock;

bool hex_field(std::string_view text, std::size_t digits, std::uint64_t& out) {
  if (text.size() != digits) return false;
  out = 0;
  for (const char c : text) {
    int v = -1;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    if (v < 0) return false;
    out = out << 4 | static_cast<std::uint64_t>(v);
  }
  return true;
}

// A socket closed when it goes out of scope, unless released.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

bool non_blocking(int fd) { return ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) == 0; }

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

std::string format_oob_message(const OobKeys& k) {
  std::string s = fmt::format("{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:", k.lid, k.out_reads, k.qpn & 0xffffff,
                              k.psn & 0xffffff, k.rkey, k.vaddr);
  for (const std::uint8_t b : k.gid) s += fmt::format("{:02x}:", b);
  s += fmt::format("{:08x}:", k.srqn);
  s.push_back('\0');
  return s;
}

bool parse_oob_message(std::string_view bytes, OobKeys& out, std::string& error) {
  if (bytes.size() != oob_message_size || bytes.back() != '\0') {
    error = fmt::format("an out-of-band message is {} bytes ending in NUL, not {}", oob_message_size, bytes.size());
    return false;
  }
  bytes.remove_suffix(1);
  constexpr std::size_t widths[] = {4, 4, 6, 6, 8, 16, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 8};
  std::uint64_t v[std::size(widths)] = {};
  std::size_t at = 0;
  for (std::size_t i = 0; i < std::size(widths); ++i) {
    if (at + widths[i] + 1 > bytes.size() || bytes[at + widths[i]] != ':' ||
        !hex_field(bytes.substr(at, widths[i]), widths[i], v[i])) {
      error = fmt::format("out-of-band message field {} (at byte {}) is not {} hex digits and a ':'", i + 1, at,
                          widths[i]);
      return false;
    }
    at += widths[i] + 1;
  }
  OobKeys k;
  k.lid = static_cast<std::uint16_t>(v[0]);
  k.out_reads = static_cast<std::uint16_t>(v[1]);
  k.qpn = static_cast<std::uint32_t>(v[2]);
  k.psn = static_cast<std::uint32_t>(v[3]);
  k.rkey = static_cast<std::uint32_t>(v[4]);
  k.vaddr = v[5];
  for (std::size_t i = 0; i < 16; ++i) k.gid[i] = static_cast<std::uint8_t>(v[6 + i]);
  k.srqn = static_cast<std::uint32_t>(v[22]);
  out = k;
  return true;
}

std::string gid_address(const std::array<std::uint8_t, 16>& g) {
  bool mapped = g[10] == 0xff && g[11] == 0xff;
  for (int i = 0; i < 10; ++i) mapped &= g[static_cast<std::size_t>(i)] == 0;
  char text[INET6_ADDRSTRLEN] = {};
  if (mapped) return fmt::format("{}.{}.{}.{}", g[12], g[13], g[14], g[15]);
  ::inet_ntop(AF_INET6, g.data(), text, sizeof text);
  return text;
}

PerftestLayout perftest_write_layout(std::uint64_t size, std::uint32_t cycle_buffer, std::uint32_t cache_line) {
  PerftestLayout l;
  l.stride = size;
  if (cache_line != 0 && size <= cycle_buffer / 2) {
    l.stride = (size + cache_line - 1) / cache_line * cache_line;
    l.slots = static_cast<std::uint32_t>(cycle_buffer / l.stride);
  }
  l.region = (l.slots - 1) * l.stride + size;
  return l;
}

bool split_host_port(const std::string& text, std::string& host, std::uint16_t& port) {
  std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) return false;
  host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned long p = 0;
  try {
    std::size_t used = 0;
    p = std::stoul(text.substr(colon + 1), &used, 10);
    if (used != text.size() - colon - 1) return false;
  } catch (...) {
    return false;
  }
  if (p < 1 || p > 65535 || host.empty()) return false;
  port = static_cast<std::uint16_t>(p);
  return true;
}

std::string format_perftest_version(std::string_view version) {
  std::string out(version.substr(0, perftest_version_size - 1));
  out.resize(perftest_version_size, '\0');
  return out;
}

bool parse_perftest_version(std::string_view bytes, std::string& text, double& number, std::string& error) {
  const std::size_t nul = bytes.find('\0');
  text = std::string(bytes.substr(0, nul));
  // perftest reads the number with atof: the leading digits and one point.
  number = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) number = number * 10 + (text[i] - '0');
  if (i < text.size() && text[i] == '.') {
    double scale = 0.1;
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, scale /= 10) number += (text[i] - '0') * scale;
  }
  if (number < 5.33) {
    std::string shown;
    for (const char c : text) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
    error = fmt::format("the out-of-band peer says it is perftest version '{}': metaroce speaks the exchange of "
                        "perftest 5.33 and later (is the peer perftest, without -R/--rdma_cm?)", shown);
    return false;
  }
  return true;
}

std::string format_mtu_step(int code) { return std::string{static_cast<char>('0' + code), '\0'}; }

int parse_mtu_step(std::string_view bytes) {
  if (bytes.size() != 2 || bytes[0] < '1' || bytes[0] > '5' || bytes[1] != '\0') return 0;
  return bytes[0] - '0';
}

std::string be32_bytes(std::uint32_t v) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(v >> (24 - 8 * i));
  return out;
}

std::string be64_bytes(std::uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(v >> (56 - 8 * i));
  return out;
}

std::uint64_t from_be_bytes(std::string_view bytes) {
  std::uint64_t v = 0;
  for (const char c : bytes) v = v << 8 | static_cast<std::uint8_t>(c);
  return v;
}

PerftestLink::PerftestLink(int fd, bool client, Turn turn, Stop stop)
    : fd_(fd), client_(client), turn_(std::move(turn)), stop_(std::move(stop)) {}

PerftestLink::~PerftestLink() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<PerftestLink> PerftestLink::accept(std::uint16_t port, double timeout_s, Turn turn, Stop stop,
                                                   std::string& error) {
  const auto deadline = after(timeout_s);
  Fd listener{::socket(AF_INET6, SOCK_STREAM, 0)};
  if (listener.fd < 0) {
    error = fmt::format("out-of-band socket: {}", std::strerror(errno));
    return nullptr;
  }
  const int one = 1, zero = 0;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ::setsockopt(listener.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // IPv4 clients too
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  a.sin6_addr = in6addr_any;
  if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener.fd, 1) != 0 ||
      !non_blocking(listener.fd)) {
    error = fmt::format("--oob-port {}: {}: give a free TCP port", port, std::strerror(errno));
    return nullptr;
  }
  Fd peer;
  while ((peer.fd = ::accept(listener.fd, nullptr, nullptr)) < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      error = fmt::format("out-of-band accept: {}", std::strerror(errno));
      return nullptr;
    }
    if (stop()) {
      error = "interrupted";
      return nullptr;
    }
    if (Clock::now() >= deadline) {
      error = fmt::format("no client connected to --oob-port {} in {} s", port, timeout_s);
      return nullptr;
    }
    turn();
  }
  ::setsockopt(peer.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!non_blocking(peer.fd)) {
    error = fmt::format("out-of-band socket: {}", std::strerror(errno));
    return nullptr;
  }
  return std::unique_ptr<PerftestLink>(new PerftestLink(peer.release(), false, std::move(turn), std::move(stop)));
}

std::unique_ptr<PerftestLink> PerftestLink::connect(const std::string& address, double timeout_s, Turn turn,
                                                    Stop stop, std::string& error) {
  const auto deadline = after(timeout_s);
  std::string host;
  std::uint16_t port = 0;
  if (!split_host_port(address, host, port)) {
    error = fmt::format("--oob '{}' is not ADDR:PORT: give A.B.C.D:PORT or [IPv6]:PORT", address);
    return nullptr;
  }
  sockaddr_storage a{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    length = sizeof *v4;
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    length = sizeof *v6;
  } else {
    error = fmt::format("--oob '{}': '{}' is not an IP address", address, host);
    return nullptr;
  }
  // The server may not be listening yet: try again until the deadline.
  for (;;) {
    Fd s{::socket(a.ss_family, SOCK_STREAM, 0)};
    if (s.fd < 0) {
      error = fmt::format("out-of-band socket: {}", std::strerror(errno));
      return nullptr;
    }
    if (::connect(s.fd, reinterpret_cast<sockaddr*>(&a), length) == 0) {
      const int one = 1;
      ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (!non_blocking(s.fd)) {
        error = fmt::format("out-of-band socket: {}", std::strerror(errno));
        return nullptr;
      }
      return std::unique_ptr<PerftestLink>(new PerftestLink(s.release(), true, std::move(turn), std::move(stop)));
    }
    const int why = errno;
    if (stop()) {
      error = "interrupted";
      return nullptr;
    }
    if (Clock::now() >= deadline) {
      error = fmt::format("--oob {}: {}: is the server running with --oob-port {}?", address, std::strerror(why), port);
      return nullptr;
    }
    for (int i = 0; i < 100; ++i) turn();
    ::usleep(100'000);
  }
}

bool PerftestLink::move(char* data, std::size_t size, bool writing, std::string_view step, std::string& error) {
  const auto deadline = after(step_timeout_s_);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = writing ? ::send(fd_, data + done, size - done, MSG_NOSIGNAL)
                              : ::recv(fd_, data + done, size - done, 0);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) {
      error = fmt::format("the out-of-band peer closed the connection in the {} step, after {} of {} bytes: is it "
                          "perftest's exchange (no -R/--rdma_cm), with the same test (-s, -n, the verb) at both ends?",
                          step, done, size);
      return false;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      error = fmt::format("out-of-band {} in the {} step: {}", writing ? "send" : "receive", step, std::strerror(errno));
      return false;
    }
    if (stop_()) {
      error = "interrupted";
      return false;
    }
    if (Clock::now() >= deadline) {
      error = fmt::format("out-of-band exchange: no {} from the peer in the {} step in {} s",
                          writing ? "room to send" : "answer", step, step_timeout_s_);
      return false;
    }
    turn_();
  }
  return true;
}

bool PerftestLink::exchange(const std::string& mine, std::string& theirs, std::string_view step, std::string& error) {
  std::string out = mine;
  theirs.assign(mine.size(), '\0');
  if (client_)
    return move(out.data(), out.size(), true, step, error) && move(theirs.data(), theirs.size(), false, step, error);
  return move(theirs.data(), theirs.size(), false, step, error) && move(out.data(), out.size(), true, step, error);
}

bool PerftestLink::open(int mtu_code, int& agreed, std::string& peer_version, std::string& error) {
  std::string theirs;
  double number = 0;
  if (!exchange(format_perftest_version(perftest_version), theirs, "version", error) ||
      !parse_perftest_version(theirs, peer_version, number, error))
    return false;
  // Page size and cache line size: perftest lays its buffers out by the
  // larger of each; metaroce tells its own and needs neither.
  const long page = ::sysconf(_SC_PAGESIZE);
  const auto ours = static_cast<std::uint32_t>(page > 0 ? page : 4096);
  if (!exchange(be32_bytes(ours), theirs, "page size", error)) return false;
  // A page of more than 1 MiB is no machine's: it is not honoured.
  cycle_buffer_ = std::max(ours, std::min(static_cast<std::uint32_t>(from_be_bytes(theirs)), std::uint32_t{1} << 20));
  if (!exchange(be32_bytes(64), theirs, "cache line size", error)) return false;
  cache_line_ = std::max(std::uint32_t{64}, std::min(static_cast<std::uint32_t>(from_be_bytes(theirs)), std::uint32_t{4096}));
  if (!exchange(format_mtu_step(mtu_code), theirs, "MTU", error)) return false;
  const int peer = parse_mtu_step(theirs);
  // perftest's rule: the peer's MTU when it is a valid one and smaller.
  agreed = peer != 0 && peer < mtu_code ? peer : mtu_code;
  return true;
}

bool PerftestLink::keys(const std::function<bool(const OobKeys&, OobKeys&, std::string&)>& reply,
                        std::string& error) {
  std::string in(oob_message_size, '\0');
  if (!move(in.data(), in.size(), false, "keys", error)) return false;
  OobKeys theirs, mine;
  if (!parse_oob_message(in, theirs, error) || !reply(theirs, mine, error)) return false;
  std::string out = format_oob_message(mine);
  return move(out.data(), out.size(), true, "keys", error);
}

bool PerftestLink::keys(const OobKeys& mine, OobKeys& theirs, std::string& error) {
  std::string in;
  return exchange(format_oob_message(mine), in, "keys", error) && parse_oob_message(in, theirs, error);
}

bool PerftestLink::report(const PerftestReport& mine, PerftestReport& theirs, std::string& error) {
  const auto bits = [](double d) { return std::bit_cast<std::uint64_t>(d); };
  const std::uint64_t out[] = {mine.size, mine.iterations, bits(mine.bw_peak), bits(mine.bw_average),
                               bits(mine.message_rate)};
  std::uint64_t in[std::size(out)] = {};
  std::string piece;
  for (std::size_t i = 0; i < std::size(out); ++i) {
    if (!exchange(be64_bytes(out[i]), piece, "report", error)) return false;
    in[i] = from_be_bytes(piece);
  }
  theirs.size = in[0];
  theirs.iterations = in[1];
  theirs.bw_peak = std::bit_cast<double>(in[2]);
  theirs.bw_average = std::bit_cast<double>(in[3]);
  theirs.message_rate = std::bit_cast<double>(in[4]);
  return true;
}

bool PerftestLink::close(const OobKeys& mine, std::string& error) {
  OobKeys theirs;
  if (!keys(mine, theirs, error)) return false;
  char done[] = "done";  // and its NUL: 5 bytes
  if (!move(done, sizeof done, true, "done", error)) return false;
  // Read the peer's "done" too when it comes, so that closing with it
  // unread does not reset the connection under the peer's own write.
  const auto deadline = after(1.0);
  char in[sizeof done] = {};
  std::size_t got = 0;
  while (got < sizeof in && Clock::now() < deadline && !stop_()) {
    const ssize_t n = ::recv(fd_, in + got, sizeof in - got, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    if (n > 0) got += static_cast<std::size_t>(n);
    else turn_();
  }
  ::close(fd_);
  fd_ = -1;
  return true;
}

bool PerftestLink::peer_moved(std::size_t bytes) const {
  if (fd_ < 0) return true;
  char probe[oob_message_size];
  const ssize_t n = ::recv(fd_, probe, std::min(bytes, sizeof probe), MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;  // closed: the next step says so
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  return static_cast<std::size_t>(n) >= std::min(bytes, sizeof probe);
}

}  // namespace metaroce::apps
