// metaroce-fabric's switch: which output port a frame leaves on, from a
// static table of destination addresses (IPv4 or IPv6, exact: one host per
// entry), as `--route ADDRESS=PORT` or a file of such lines. A frame is
// forwarded by its IP destination; ARP by its target protocol address
// (requests and replies alike, so neighbours resolve through the switch)
// and an IPv6 neighbour solicitation by its target address (its IP
// destination is a solicited-node group). The connection manager's frames
// (QP 1) are RoCE frames like any other. No DPDK type.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "wire/ip_address.hpp"

namespace metaroce::fabric {

struct Route {
  wire::IpAddress address{};
  std::uint16_t port = 0;
};

class ForwardingTable {
 public:
  explicit ForwardingTable(std::uint16_t ports) : ports_(ports) {}

  // "ADDRESS=PORT" (blanks around either allowed): false with one line
  // naming what to give for a bad address, a port outside 0..ports-1, or
  // an address that already has another port.
  bool add(std::string_view entry, std::string& error);
  bool add(const Route& route, std::string& error);
  // A file's text: one entry a line; blank lines and `#` comments skipped.
  // False with the first bad line's number and why (`source` names the file).
  bool add_lines(std::string_view text, std::string_view source, std::string& error);

  [[nodiscard]] std::optional<std::uint16_t> lookup(const wire::IpAddress& address) const;
  // The output port of a whole frame (from its Ethernet header on): nullopt
  // when it carries no address (not IP or ARP, truncated) or one without a route.
  [[nodiscard]] std::optional<std::uint16_t> route_frame(std::span<const std::uint8_t> frame) const;

  [[nodiscard]] std::uint16_t ports() const noexcept { return ports_; }
  [[nodiscard]] std::size_t size() const noexcept { return routes_.size(); }
  // In the order they were added.
  [[nodiscard]] const std::vector<Route>& routes() const noexcept { return order_; }

 private:
  std::uint16_t ports_;
  std::unordered_map<wire::IpAddress, std::uint16_t, wire::IpAddressHash> routes_;
  std::vector<Route> order_;
};

// The address a frame is forwarded by (see above); false when it has none.
[[nodiscard]] bool forwarding_address(std::span<const std::uint8_t> frame, wire::IpAddress& out) noexcept;

}  // namespace metaroce::fabric
