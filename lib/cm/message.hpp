// The connection manager's messages on the wire. They travel in band, on the
// data port, as RoCEv2 management datagrams do: a UD SEND ONLY to QP 1 (the
// GSI QP) with a DETH (Q_Key 0x80010000), carrying one 256-byte MAD. The MAD
// common header is standard (base version 1, a vendor-specific management
// class, method Send, transaction id, attribute id = message type); the
// attribute data is metaroce's own layout (doc/WIRE.md, "Connection
// manager"). No state here: encode and decode only.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "secure/keys.hpp"
#include "transport/config.hpp"
#include "wire/frame.hpp"

namespace metaroce::cm {

inline constexpr std::uint32_t gsi_qpn = 1;
inline constexpr std::uint32_t gsi_qkey = 0x8001'0000;
inline constexpr std::size_t mad_size = 256;
inline constexpr std::size_t mad_header_size = 24;
inline constexpr std::uint8_t mad_base_version = 1;
inline constexpr std::uint8_t mad_class_metaroce_cm = 0x09;  // vendor-specific class, range 1
inline constexpr std::uint8_t mad_class_version = 1;
inline constexpr std::uint8_t mad_method_send = 0x03;
inline constexpr std::uint32_t message_magic = 0x4d52434d;  // "MRCM"
inline constexpr std::uint8_t protocol_version = 1;
inline constexpr std::size_t max_private_data = 64;
inline constexpr std::size_t cc_name_size = 16;
// The security extension that follows the MAD in the same UD SEND when the
// sender runs secure (doc/WIRE.md, "Connection manager", security):
// magic "MRSC", flags, 3 reserved, the sender's X25519 public key, and an
// HMAC-SHA256 under the pre-shared key over the MAD and the extension's
// first 40 bytes.
inline constexpr std::uint32_t security_magic = 0x4d525343;  // "MRSC"
inline constexpr std::size_t security_extension_size = 4 + 1 + 3 + secure::public_key_bytes + secure::mac_bytes;
inline constexpr std::uint8_t security_flag_auth_only = 0x01;

enum class MessageType : std::uint8_t {
  request = 1,  // REQ: client -> server, carries the client's side
  reply = 2,    // REP: server -> client, the server's side and the agreed geometry
  ready = 3,    // RTU: client -> server, the client has the reply
  reject = 4,   // REJ: server -> client, with a reason
  disconnect = 5,        // DREQ: client -> server, the client is done (private data: its summary)
  disconnect_reply = 6,  // DREP: server -> client (private data: the server's summary)
};

enum class RejectReason : std::uint8_t {
  none = 0,
  not_listening = 1,        // no server role on this port
  no_resources = 2,         // the server takes no more connections
  unsupported_version = 3,  // protocol version not spoken here
  bad_parameters = 4,       // mode, MTU, paths, streams or CC not acceptable
  refused = 5,              // the application said no
  security_required = 6,    // the server runs secure and the REQ carried no security extension
  authentication_failed = 7,  // the REQ's HMAC did not check: the two ends hold different keys
  security_mismatch = 8,    // secure both, but one encrypts and the other only authenticates
  // The REQ would replace a live connection of the same peer address and
  // QPN: the client must send it again carrying the REJ's cookie, proving
  // it receives what is sent to that address. Not an error: the client's
  // manager answers it by itself.
  prove_address = 9,
  memory_limit = 10,  // the connection would commit more memory than the server allows
  // The REQ reached a lane (a manager of one queue) that its client's QPN
  // does not steer to: the two ends run different --lcores, or the port
  // does not bring lane k's frames to the peer's lane k.
  wrong_queue = 11,
};

[[nodiscard]] std::string_view to_string(MessageType t) noexcept;
[[nodiscard]] std::string_view to_string(RejectReason r) noexcept;

// Planes 1.. of the side sending a message: its own MAC and IP there
// (plane 0's are the frame's addresses).
struct PlaneAddress {
  wire::MacAddress mac{};
  std::uint32_t ipv4 = 0;
  wire::Ipv6Address ipv6{};
  bool operator==(const PlaneAddress&) const = default;
};
// Planes a message can carry the addresses of: all of them over IPv4
// (10 bytes each), 6 over IPv6 (22 bytes each).
[[nodiscard]] constexpr std::uint16_t max_cm_planes(std::uint8_t ip_version) noexcept {
  return ip_version == 6 ? 6 : transport::max_planes;
}

struct Message {
  MessageType type = MessageType::request;
  std::uint8_t version = protocol_version;
  transport::Mode mode = transport::Mode::metaroce;
  RejectReason reason = RejectReason::none;
  std::uint32_t nonce = 0;        // the client's, per connection attempt; echoed by the server
  std::uint32_t sender_qpn = 0;   // QPN of the side that sends this message
  std::uint32_t sender_psn = 0;   // first PSN that side sends
  std::uint32_t receiver_qpn = 0; // REP/RTU/REJ: QPN of the side this goes to
  std::uint32_t mtu = 0;          // payload bytes per packet
  std::uint16_t paths = 0;
  std::uint16_t streams = 0;
  std::uint16_t base_src_port = 0;  // the sender's first UDP source port
  // READs and atomics outstanding at once (REQ: asked; REP: agreed; 0: the
  // transport's default).
  std::uint16_t max_reads = 0;
  // Planes (REQ: offered; REP: agreed, the smaller of both sides'; 0 on
  // the wire, from a peer that does not know planes: 1), and the sender's
  // addresses on planes 1..planes-1, in the IP version `ip_version` (not
  // encoded: the frame's; decode sets it).
  std::uint16_t planes = 1;
  std::uint8_t ip_version = 4;
  std::array<PlaneAddress, transport::max_planes - 1> plane_addresses{};
  std::string cc;                   // congestion control name, at most 15 characters
  std::vector<std::uint8_t> private_data;  // at most max_private_data bytes
  // The security extension: carried (secured), encryption off (auth_only),
  // the sender's ephemeral X25519 key (REQ, REP; zero in the others).
  bool secured = false;
  bool auth_only = false;
  secure::PublicKey public_key{};
  // REJ prove_address: the server's cookie; REQ: the cookie echoed (0: none).
  // The MAD's AttributeModifier.
  std::uint32_t cookie = 0;

  bool operator==(const Message&) const = default;
};

// The P_Key both ends stamp on every frame of the connection `nonce` names:
// the full-membership bit and 15 bits of the nonce, never the invalid 0x8000.
[[nodiscard]] constexpr std::uint16_t pkey_of(std::uint32_t nonce) noexcept {
  const auto low = static_cast<std::uint16_t>(nonce & 0x7fff);
  return static_cast<std::uint16_t>(0x8000 | (low == 0 ? 1 : low));
}

// The MAD (256 bytes) for `m`; false when a field does not fit (CC name,
// private data).
bool encode_mad(const Message& m, std::array<std::uint8_t, mad_size>& out, std::string& error);

enum class DecodeError : std::uint8_t {
  ok,
  not_cm,            // not a UD SEND ONLY to QP 1 with the GSI Q_Key
  short_mad,         // fewer than 256 payload bytes
  not_metaroce_mad,  // another management class, version or method
  bad_magic,
  bad_type,
  bad_field,         // mode, private data length, or an unterminated name
};
[[nodiscard]] std::string_view to_string(DecodeError e) noexcept;

// A CM message from a parsed frame (parse_frame checked the ICRC).
DecodeError decode(const wire::ParsedFrame& frame, Message& out);

// Which QPN of this end a CM frame concerns, read from the bytes at hand
// (a first segment will do) without decoding or checking the rest: the
// receiver's QPN (REP, RTU, REJ, DREQ, DREP), else the sender's (a REQ:
// the client's, on whose queue a server draws its own). Lanes that each
// run a connection manager hand QP 1's frames to the lane of this QPN.
// False for anything but a metaroce CM MAD to QP 1, or a QPN of 0 or 1.
[[nodiscard]] bool peek_owner_qpn(std::span<const std::uint8_t> frame, std::uint32_t& qpn) noexcept;

// A whole frame carrying `m` from `from` to `to`: Ethernet, IP and UDP from
// the endpoints (local = sender), UDP source port `src_port`. With `psk`
// (m.secured), the security extension follows the MAD, its HMAC under
// `psk`.
std::vector<std::uint8_t> build_frame(const transport::Endpoints& endpoints, std::uint16_t src_port,
                                      const Message& m, const secure::Psk* psk = nullptr);

// A frame to the peer's QP 1 (UD SEND, the GSI Q_Key) carrying `payload`
// (a MAD and what follows it): what build_frame and the IBTA CM send.
std::vector<std::uint8_t> gsi_frame(const transport::Endpoints& endpoints, std::uint16_t src_port,
                                    std::span<const std::uint8_t> payload);

// True when `frame` (decoded with secured set) carries an HMAC that checks
// under `psk`.
[[nodiscard]] bool authentic(const wire::ParsedFrame& frame, const secure::Psk& psk) noexcept;

}  // namespace metaroce::cm
