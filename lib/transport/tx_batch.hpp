// Transmit descriptors: what a connection hands to whoever owns the port.
//
// A packet is its header bytes (in the batch's arena), a payload span that
// points into registered application memory, and a trailer of pad + ICRC.
// The engine attaches the payload to an mbuf as an external buffer; the
// simulator and tests serialize it. Short payloads (inline_limit) are
// copied into the arena after their headers instead, pad included: the
// descriptor's "header" is then the whole frame but its ICRC.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "wire/byte_order.hpp"
#include "wire/headers.hpp"
#include "wire/icrc.hpp"

namespace metaroce::transport {

struct TxDescriptor {
  std::uint32_t header_offset = 0;  // into TxBatch::header_bytes()
  std::uint32_t header_len = 0;
  wire::ByteSpan payload{};
  std::array<std::uint8_t, 8> trailer{};
  std::uint8_t trailer_len = 0;
  // Set by commit_unsealed until seal() computes the ICRC: its bytes are
  // the arena's from header_offset + icrc_from to header_offset + header_len.
  bool unsealed = false;
  std::uint16_t icrc_from = 0;
  // The plane the frame leaves on and that plane's port index (the
  // connection's config): the host sends it out of that port.
  std::uint8_t plane = 0;
  std::uint16_t port = 0;
  // Bytes of the arena kept free after an unsealed packet (commit_unsealed's
  // `spare`): a secure connection seals the packet there, in place.
  std::uint8_t spare = 0;
};

class TxBatch {
 public:
  // Payloads up to 256 bytes are copied into the arena after their headers
  // by default: the frame is then one buffer, whose ICRC is read in place,
  // and the engine copies one buffer into the mbuf. A host that attaches
  // payloads from a smaller size lowers the limit.
  static constexpr std::size_t default_inline_limit = 256;
  [[nodiscard]] std::size_t inline_limit() const noexcept { return inline_limit_; }
  void set_inline_limit(std::size_t bytes) noexcept { inline_limit_ = std::min(bytes, default_inline_limit); }

  // Packets committed from now on leave on `plane` through `port`, until
  // the next call or clear() (plane 0, port 0).
  void set_route(std::uint8_t plane, std::uint16_t port) noexcept {
    route_plane_ = plane;
    route_port_ = port;
  }

  // Room for `n` header bytes of the next packet; valid until the next call.
  std::span<std::uint8_t> header_space(std::size_t n) {
    if (arena_.size() < used_ + n) arena_.resize(std::max(arena_.size() * 2, used_ + n));
    return std::span<std::uint8_t>(arena_.data() + used_, n);
  }
  // Adds the packet whose `header_len` bytes were written into header_space().
  // (Both build the descriptor in place: one built on the stack and copied
  // in is read back from stores of other widths, which the CPU cannot
  // forward, a stall per packet.)
  void commit(std::size_t header_len, wire::ByteSpan payload, std::span<const std::uint8_t> trailer) {
    TxDescriptor& d = packets_.emplace_back();
    d.header_offset = static_cast<std::uint32_t>(used_);
    d.header_len = static_cast<std::uint32_t>(header_len);
    d.payload = payload;
    for (std::size_t i = 0; i < trailer.size(); ++i) d.trailer[i] = trailer[i];
    d.trailer_len = static_cast<std::uint8_t>(trailer.size());
    d.plane = route_plane_;
    d.port = route_port_;
    used_ += header_len;
  }

  // Adds a packet that is whole in the arena (headers, inline payload, pad:
  // `frame_len` bytes) but for its ICRC, computed over its bytes from
  // `icrc_from` (the IP header) by seal(). Computing the ICRCs of a burst
  // one after the other, with nothing in between, lets the CPU overlap
  // their folds: each alone is a chain of dependent multiplies. `spare`
  // bytes after the frame (within what header_space() gave) are kept free
  // for rebuild() to grow it in place.
  void commit_unsealed(std::size_t frame_len, std::size_t icrc_from, std::uint8_t spare = 0) {
    TxDescriptor& d = packets_.emplace_back();
    d.header_offset = static_cast<std::uint32_t>(used_);
    d.header_len = static_cast<std::uint32_t>(frame_len);
    d.unsealed = true;
    d.icrc_from = static_cast<std::uint16_t>(icrc_from);
    d.plane = route_plane_;
    d.port = route_port_;
    d.spare = spare;
    used_ += frame_len + spare;
  }
  // Computes the ICRC of every unsealed packet from index `from` on. Whoever
  // commits unsealed packets seals them before the batch leaves its hands.
  void seal(std::size_t from) noexcept {
    constexpr std::size_t chunk = 16;
    std::array<wire::ByteSpan, chunk> spans;
    std::array<std::uint32_t, chunk> icrcs;
    std::array<TxDescriptor*, chunk> owners;
    std::size_t n = 0;
    const auto finish = [&] {
      wire::compute_icrcs(std::span<const wire::ByteSpan>(spans.data(), n), icrcs.data());
      for (std::size_t k = 0; k < n; ++k) {
        wire::store_le32(owners[k]->trailer.data(), icrcs[k]);
        owners[k]->trailer_len = wire::icrc_size;
        owners[k]->unsealed = false;
      }
      n = 0;
    };
    for (std::size_t i = from; i < packets_.size(); ++i) {
      TxDescriptor& d = packets_[i];
      if (!d.unsealed) continue;
      spans[n] = wire::ByteSpan(arena_.data() + d.header_offset + d.icrc_from, d.header_len - d.icrc_from);
      owners[n++] = &d;
      if (n == chunk) finish();
    }
    if (n != 0) finish();
  }

  // Packet i whole in the arena but for its ICRC (when it has one), with
  // `extra` bytes of room after it: how a secure connection rebuilds a
  // packet as its sealed form. An unsealed packet committed with at least
  // `extra` spare bytes grows where it is; any other is copied into fresh
  // room (with `copy_payload` false the room is the same size but only the
  // headers are copied: the caller writes the attached payload itself,
  // encrypting it as it goes). The room is valid until the next call;
  // finish_rebuild(i, len, icrc_from) then makes packet i its first `len`
  // bytes, unsealed: its ICRC over its bytes from `icrc_from` on is
  // computed by seal() (its plane and port kept).
  std::span<std::uint8_t> rebuild(std::size_t i, std::size_t extra, bool copy_payload = true) {
    const TxDescriptor& old = packets_[i];
    if (grows_in_place(old, extra))
      return std::span<std::uint8_t>(arena_.data() + old.header_offset, old.header_len + extra);
    const std::size_t kept_trailer = old.unsealed ? 0 : old.trailer_len - wire::icrc_size;
    const std::size_t n = old.header_len + old.payload.size() + kept_trailer;
    const std::span<std::uint8_t> room = header_space(n + extra);  // may move the arena
    const TxDescriptor& d = packets_[i];
    std::uint8_t* out = room.data();
    std::copy_n(arena_.data() + d.header_offset, d.header_len, out);
    out += d.header_len;
    if (copy_payload && !d.payload.empty()) std::copy_n(d.payload.data(), d.payload.size(), out);
    out += d.payload.size();
    std::copy_n(d.trailer.data(), kept_trailer, out);
    return std::span<std::uint8_t>(room.data(), n + extra);
  }
  void finish_rebuild(std::size_t i, std::size_t len, std::size_t icrc_from) noexcept {
    TxDescriptor& d = packets_[i];
    // rebuild() gave room of len bytes: where the packet was when it could
    // grow there by the difference, else fresh room at the arena's end.
    if (!grows_in_place(d, len - d.header_len)) {
      d.header_offset = static_cast<std::uint32_t>(used_);
      used_ += len;
    }
    d.header_len = static_cast<std::uint32_t>(len);
    d.payload = {};
    d.trailer_len = 0;
    d.unsealed = true;
    d.spare = 0;
    d.icrc_from = static_cast<std::uint16_t>(icrc_from);
  }

  // Drops packet i (the ones after it move up).
  void remove(std::size_t i) { packets_.erase(packets_.begin() + static_cast<std::ptrdiff_t>(i)); }

  [[nodiscard]] std::size_t size() const noexcept { return packets_.size(); }
  [[nodiscard]] bool empty() const noexcept { return packets_.empty(); }
  [[nodiscard]] const TxDescriptor& operator[](std::size_t i) const noexcept { return packets_[i]; }
  [[nodiscard]] std::span<const std::uint8_t> header(std::size_t i) const noexcept {
    return std::span<const std::uint8_t>(arena_.data() + packets_[i].header_offset, packets_[i].header_len);
  }
  [[nodiscard]] std::size_t frame_size(std::size_t i) const noexcept {
    const TxDescriptor& d = packets_[i];
    return d.header_len + d.payload.size() + d.trailer_len;
  }
  // The whole frame of packet i, appended to `out`.
  void serialize(std::size_t i, std::vector<std::uint8_t>& out) const {
    const TxDescriptor& d = packets_[i];
    const auto h = header(i);
    out.insert(out.end(), h.begin(), h.end());
    out.insert(out.end(), d.payload.begin(), d.payload.end());
    out.insert(out.end(), d.trailer.begin(), d.trailer.begin() + d.trailer_len);
  }
  void clear() noexcept {
    packets_.clear();
    used_ = 0;
    route_plane_ = 0;
    route_port_ = 0;
  }

 private:
  // An unsealed packet with `extra` spare bytes after it is rebuilt where it is.
  static bool grows_in_place(const TxDescriptor& d, std::size_t extra) noexcept {
    return d.unsealed && d.spare >= extra;
  }

  std::vector<std::uint8_t> arena_ = std::vector<std::uint8_t>(16384);
  std::size_t used_ = 0;
  std::size_t inline_limit_ = default_inline_limit;
  std::uint8_t route_plane_ = 0;
  std::uint16_t route_port_ = 0;
  std::vector<TxDescriptor> packets_;
};

}  // namespace metaroce::transport
