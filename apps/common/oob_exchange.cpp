#include "common/oob_exchange.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

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

// A socket closed when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool non_blocking(int fd) { return ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) == 0; }

// Moves all of `data` (write) or fills it (read), turning while the socket
// is not ready. False with `error` on a closed peer, an error or the deadline.
bool transfer(int fd, char* data, std::size_t size, bool writing, Clock::time_point deadline,
              const std::function<void()>& turn, const std::function<bool()>& stop, std::string& error) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = writing ? ::send(fd, data + done, size - done, MSG_NOSIGNAL) : ::recv(fd, data + done, size - done, 0);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) {
      error = fmt::format("the peer closed the out-of-band connection after {} of {} bytes: is it speaking "
                          "perftest's exchange (a GID, no rdma_cm)?", done, size);
      return false;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      error = fmt::format("out-of-band {}: {}", writing ? "send" : "receive", std::strerror(errno));
      return false;
    }
    if (stop()) {
      error = "interrupted";
      return false;
    }
    if (Clock::now() >= deadline) {
      error = fmt::format("out-of-band exchange: no {} from the peer in time", writing ? "room to send" : "message");
      return false;
    }
    turn();
  }
  return true;
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

bool oob_serve(std::uint16_t port, double timeout_s, const std::function<void()>& turn,
               const std::function<bool()>& stop,
               const std::function<bool(const OobKeys&, OobKeys&, std::string&)>& reply, std::string& error) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  Fd listener{::socket(AF_INET6, SOCK_STREAM, 0)};
  if (listener.fd < 0) {
    error = fmt::format("out-of-band socket: {}", std::strerror(errno));
    return false;
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
    return false;
  }
  Fd peer;
  while ((peer.fd = ::accept(listener.fd, nullptr, nullptr)) < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      error = fmt::format("out-of-band accept: {}", std::strerror(errno));
      return false;
    }
    if (stop()) {
      error = "interrupted";
      return false;
    }
    if (Clock::now() >= deadline) {
      error = fmt::format("no client connected to --oob-port {} in {} s", port, timeout_s);
      return false;
    }
    turn();
  }
  if (!non_blocking(peer.fd)) {
    error = fmt::format("out-of-band socket: {}", std::strerror(errno));
    return false;
  }
  std::string in(oob_message_size, '\0');
  if (!transfer(peer.fd, in.data(), in.size(), false, deadline, turn, stop, error)) return false;
  OobKeys theirs, mine;
  if (!parse_oob_message(in, theirs, error) || !reply(theirs, mine, error)) return false;
  std::string out = format_oob_message(mine);
  return transfer(peer.fd, out.data(), out.size(), true, deadline, turn, stop, error);
}

bool oob_connect(const std::string& address, double timeout_s, const std::function<void()>& turn,
                 const std::function<bool()>& stop, const OobKeys& mine, OobKeys& theirs, std::string& error) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::string host;
  std::uint16_t port = 0;
  if (!split_host_port(address, host, port)) {
    error = fmt::format("--oob '{}' is not ADDR:PORT: give A.B.C.D:PORT or [IPv6]:PORT", address);
    return false;
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
    return false;
  }
  // The server may not be listening yet: try again until the deadline.
  for (;;) {
    Fd s{::socket(a.ss_family, SOCK_STREAM, 0)};
    if (s.fd < 0) {
      error = fmt::format("out-of-band socket: {}", std::strerror(errno));
      return false;
    }
    if (::connect(s.fd, reinterpret_cast<sockaddr*>(&a), length) == 0) {
      if (!non_blocking(s.fd)) {
        error = fmt::format("out-of-band socket: {}", std::strerror(errno));
        return false;
      }
      std::string out = format_oob_message(mine);
      if (!transfer(s.fd, out.data(), out.size(), true, deadline, turn, stop, error)) return false;
      std::string in(oob_message_size, '\0');
      if (!transfer(s.fd, in.data(), in.size(), false, deadline, turn, stop, error)) return false;
      return parse_oob_message(in, theirs, error);
    }
    const int why = errno;
    if (stop()) {
      error = "interrupted";
      return false;
    }
    if (Clock::now() >= deadline) {
      error = fmt::format("--oob {}: {}: is the server running with --oob-port {}?", address, std::strerror(why), port);
      return false;
    }
    for (int i = 0; i < 100; ++i) turn();
    ::usleep(100'000);
  }
}

}  // namespace metaroce::apps
