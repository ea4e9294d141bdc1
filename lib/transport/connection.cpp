// The factory that picks a connection's implementation by mode.
#include "transport/connection.hpp"

#include "transport/metaroce_connection.hpp"
#include "transport/roce_connection.hpp"
#include "wire/frame.hpp"

namespace metaroce::transport {

std::string_view to_string(PostResult r) noexcept {
  switch (r) {
    case PostResult::ok: return "ok";
    case PostResult::not_ready: return "not_ready";
    case PostResult::bad_stream: return "bad_stream";
    case PostResult::bad_lkey: return "bad_lkey";
    case PostResult::bad_rkey: return "bad_rkey";
    case PostResult::too_long: return "too_long";
    case PostResult::queue_full: return "queue_full";
    case PostResult::no_resources: return "no_resources";
    case PostResult::bad_length: return "bad_length";
  }
  return "invalid";
}

void Connection::attach_receive_share(ReceiveShare* share) {
  if (receive_share_ != nullptr) {
    auto& l = receive_share_->listeners_;
    l[share_index_] = l.back();
    l[share_index_]->share_index_ = share_index_;
    l.pop_back();
  }
  receive_share_ = share;
  if (share != nullptr) {
    share_index_ = share->listeners_.size();
    share->listeners_.push_back(this);
  }
}

ReceiveShare::~ReceiveShare() {
  for (Connection* c : listeners_) c->receive_share_ = nullptr;
}

void ReceiveShare::wake_on_new_generation() {
  const std::uint64_t g = generation();
  if (g == announced_) return;
  announced_ = g;
  for (Connection* c : listeners_) c->wake();
}

PostResult Connection::check_send(const SendRequest& request) noexcept {
  if (state_ != ConnectionState::ready) return PostResult::not_ready;
  if (request.stream >= config_.streams) return PostResult::bad_stream;
  if (request.length > 0xffff'ffffu) return PostResult::too_long;
  if (work_in_use_ >= config_.completion_queue_depth) {
    ++counters_.posts_refused_queue_full;
    return PostResult::queue_full;
  }
  if (is_atomic(request.op) && request.length != atomic_length) return PostResult::bad_length;
  // A READ's and an atomic's answer is written to the local bytes.
  if (request.length > 0 &&
      memory_.check(request.lkey, reinterpret_cast<std::uintptr_t>(request.local_addr), request.length,
                    is_request(request.op) ? std::uint32_t{access_local_write} : 0u) != AccessCheck::ok)
    return PostResult::bad_lkey;
  if ((is_write(request.op) || is_request(request.op)) && request.rkey == 0) return PostResult::bad_rkey;
  return PostResult::ok;
}

PostResult Connection::check_receive(const ReceiveRequest& request) noexcept {
  if (state_ != ConnectionState::ready && state_ != ConnectionState::init) return PostResult::not_ready;
  if (request.stream >= config_.streams) return PostResult::bad_stream;
  if (work_in_use_ >= config_.completion_queue_depth) {
    ++counters_.posts_refused_queue_full;
    return PostResult::queue_full;
  }
  if (request.length > 0 &&
      memory_.check(request.lkey, reinterpret_cast<std::uintptr_t>(request.addr), request.length,
                    access_local_write) != AccessCheck::ok)
    return PostResult::bad_lkey;
  return PostResult::ok;
}

static_assert(wire::secure_trailer_size == secure::trailer_bytes);

bool Connection::set_security(const SecurityConfig& config, std::string& error) {
  const std::size_t n = secure::key_bytes(config.algorithm);
  auto sealer = std::make_unique<secure::Sealer>();
  auto opener = std::make_unique<secure::Opener>();
  if (!sealer->set_key(config.algorithm, std::span<const std::uint8_t>(config.tx_key.data(), n), config.tx_spi,
                       config.protection, config.rotate_after_frames) ||
      !opener->set_key(config.algorithm, std::span<const std::uint8_t>(config.rx_key.data(), n), config.rx_spi,
                       config.protection, secure::ReplayWindow::max_width)) {
    error =
        "the connection's AES-GCM key was refused: intel-ipsec-mb could not start, or OpenSSL could not derive "
        "the next key epoch";
    return false;
  }
  sealer_ = std::move(sealer);
  opener_ = std::move(opener);
  protection_ = config.protection;
  return true;
}

void Connection::on_secure_frame(Time now, const wire::ParsedFrame& frame) {
  if (frame.secure_trailer_offset == 0) {
    ++counters_.secure_no_trailer;
    return;
  }
  const std::size_t from = frame.bth_offset;
  const std::size_t to = std::size_t{frame.secure_trailer_offset} + wire::secure_trailer_size;
  const std::size_t header_bytes = std::size_t{frame.payload_offset} - from;
  const bool encrypted = protection_ == secure::Protection::encrypt;
  // Encrypted: the payload and pad are decrypted from the frame straight
  // into secure_rx_ (the frame itself is never written). Authentication
  // only writes nothing.
  std::span<std::uint8_t> plaintext;
  if (encrypted) {
    const std::size_t n = to - from - wire::secure_trailer_size - header_bytes;
    if (secure_rx_.size() < n) secure_rx_.resize(n);  // grows once: no zero fill per frame
    plaintext = std::span<std::uint8_t>(secure_rx_.data(), n);
  }
  switch (opener_->open_to(frame.frame.subspan(from, to - from), header_bytes, plaintext)) {
    case secure::OpenResult::ok: break;
    case secure::OpenResult::no_trailer: ++counters_.secure_no_trailer; return;
    case secure::OpenResult::wrong_spi: ++counters_.secure_bad_spi; return;
    case secure::OpenResult::replayed: ++counters_.secure_replayed; return;
    case secure::OpenResult::bad_tag: ++counters_.secure_bad_tag; return;
    case secure::OpenResult::unknown_epoch: ++counters_.secure_unknown_epoch; return;
  }
  ++counters_.secure_frames_opened;
  counters_.secure_epochs_received = opener_->rotations();
  if (!encrypted) {
    on_checked_frame(now, frame);
    return;
  }
  wire::ParsedFrame opened = frame;
  opened.payload = wire::ByteSpan(secure_rx_.data(), frame.payload.size());
  on_checked_frame(now, opened);
}

// Each frame poll_frames emitted becomes headers | payload | pad | trailer |
// ICRC: its IP and UDP lengths grow by the trailer, the region from the BTH
// to the pad is sealed (its headers clear, its payload encrypted unless
// auth-only) and its ICRC computed over the whole, the batch's together.
void Connection::seal_frames(TxBatch& out, std::size_t start) {
  const bool encrypted = protection_ == secure::Protection::encrypt;
  const transport::Endpoints& endpoints = config().endpoints;
  const bool ipv4 = endpoints.ip_version == 4;
  const std::size_t l3 = wire::ethernet_header_size + (endpoints.vlan_present ? wire::vlan_tag_size : 0);
  const std::size_t l4 = l3 + (ipv4 ? wire::ipv4_header_size : wire::ipv6_header_size);
  for (std::size_t i = start; i < out.size();) {
    // An encrypted frame whose payload is attached and needs no pad: its
    // payload is encrypted from the application's memory straight into
    // the frame, so it is read once (no copy, then a pass over the copy).
    const wire::ByteSpan attached = out[i].payload;
    const bool kept_pad = !out[i].unsealed && out[i].trailer_len > wire::icrc_size;
    const bool encrypt_from = encrypted && !attached.empty() && !kept_pad;
    // The frame as built, its ICRC left out, with room for the trailer.
    const std::span<std::uint8_t> room = out.rebuild(i, secure::trailer_bytes, !encrypt_from);
    const std::size_t len = room.size();  // through the trailer
    std::uint8_t* f = room.data();
    // Its offsets: the connection's link and IP headers (the same on every
    // plane), then the transport headers its opcode names.
    bool sealed = false;
    const std::size_t bth = l4 + wire::udp_header_size;
    const std::size_t header_bytes =
        len < bth + secure::trailer_bytes
            ? 0
            : wire::transport_headers_size(wire::ByteSpan(f + bth, len - secure::trailer_bytes - bth));
    if (header_bytes != 0) {
      std::uint8_t* ip = f + l3;
      if (ipv4) {
        const std::uint16_t length = wire::load_be16(ip + 2);
        const auto longer = static_cast<std::uint16_t>(length + secure::trailer_bytes);
        wire::store_be16(ip + 2, longer);
        wire::store_be16(ip + 10, wire::ipv4_checksum_update(wire::load_be16(ip + 10), length, longer));
      } else {
        wire::store_be16(ip + 4, static_cast<std::uint16_t>(wire::load_be16(ip + 4) + secure::trailer_bytes));
      }
      std::uint8_t* udp = f + l4;
      wire::store_be16(udp + 4, static_cast<std::uint16_t>(wire::load_be16(udp + 4) + secure::trailer_bytes));
      const std::span<std::uint8_t> region(f + bth, len - bth);
      sealed = encrypt_from ? sealer_->seal_from(region, header_bytes, attached) : sealer_->seal(region, header_bytes);
    }
    if (!sealed) {
      ++counters_.secure_seal_failures;
      out.remove(i);  // never unauthenticated: the peer would drop it; the sender resends what it carried
      continue;
    }
    out.finish_rebuild(i, len, l3);
    ++counters_.secure_frames_sealed;
    counters_.secure_epochs_sent = sealer_->rotations();
    ++i;
  }
  // The ICRCs of the sealed frames, folded together (TxBatch::seal).
  out.seal(start);
}

std::unique_ptr<Connection> Connection::create(const ConnectionConfig& config, MemoryRegistry& memory,
                                               timer::Wheel& wheel,
                                               std::unique_ptr<CongestionControl> congestion,
                                               std::string& error, HostPools* pools) {
  error = validate(config);
  if (!error.empty()) return nullptr;
  if (!congestion) congestion = std::make_unique<FixedWindow>(config.path_window, config.psn_window);
  std::unique_ptr<Connection> c;
  if (config.mode == Mode::rocev2)
    c = std::make_unique<RoceConnection>(config, memory, wheel, std::move(congestion), pools);
  else
    c = std::make_unique<MetaroceConnection>(config, memory, wheel, std::move(congestion), pools);
  if (config.security.enabled && !c->set_security(config.security, error)) return nullptr;
  return c;
}

}  // namespace metaroce::transport
