#include "common/pcap_file.hpp"

#include <cerrno>
#include <cstring>

namespace metaroce::apps {
namespace {

constexpr std::uint32_t classic_magic_us = 0xa1b2c3d4;
constexpr std::uint32_t classic_magic_ns = 0xa1b23c4d;
constexpr std::uint32_t pcapng_section_header = 0x0a0d0d0a;
constexpr std::uint32_t pcapng_byte_order_magic = 0x1a2b3c4d;
constexpr std::uint32_t pcapng_interface_description = 1;
constexpr std::uint32_t pcapng_simple_packet = 3;
constexpr std::uint32_t pcapng_enhanced_packet = 6;
// Larger records are corrupt, not jumbo frames: refuse rather than allocate.
constexpr std::uint32_t max_record_size = 256 * 1024;

}  // namespace

std::uint32_t PcapReader::u32(const std::uint8_t* p) const noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return swapped_ ? __builtin_bswap32(v) : v;
}

std::uint16_t PcapReader::u16(const std::uint8_t* p) const noexcept {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return swapped_ ? __builtin_bswap16(v) : v;
}

bool PcapReader::read_exact(void* out, std::size_t n) {
  return std::fread(out, 1, n, file_.get()) == n;
}

bool PcapReader::open(const std::string& path, std::string& error) {
  file_.reset(std::fopen(path.c_str(), "rb"));
  if (!file_) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  std::uint8_t header[24];
  if (!read_exact(header, 4)) {
    error = path + ": empty or too short to be a pcap or pcapng file";
    return false;
  }
  std::uint32_t magic;
  std::memcpy(&magic, header, 4);
  if (magic == pcapng_section_header) {
    // Rewind: next_pcapng reads whole blocks, the section header included.
    pcapng_ = true;
    std::fseek(file_.get(), 0, SEEK_SET);
    return true;
  }
  if (!read_exact(header + 4, 20)) {
    error = path + ": truncated pcap file header";
    return false;
  }
  if (magic == classic_magic_us || magic == classic_magic_ns) {
    swapped_ = false;
  } else if (__builtin_bswap32(magic) == classic_magic_us ||
             __builtin_bswap32(magic) == classic_magic_ns) {
    swapped_ = true;
    magic = __builtin_bswap32(magic);
  } else {
    error = path + ": not a pcap or pcapng file (unknown magic number)";
    return false;
  }
  nanoseconds_ = magic == classic_magic_ns;
  classic_linktype_ = u32(header + 20) & 0x0fffffff;
  return true;
}

bool PcapReader::next(PcapRecord& record) {
  if (!file_) return false;
  return pcapng_ ? next_pcapng(record) : next_classic(record);
}

bool PcapReader::next_classic(PcapRecord& record) {
  std::uint8_t header[16];
  const std::size_t got = std::fread(header, 1, sizeof header, file_.get());
  if (got == 0) return false;
  if (got != sizeof header) {
    error_ = "truncated record header at the end of the file";
    return false;
  }
  const std::uint32_t caplen = u32(header + 8);
  if (caplen > max_record_size) {
    error_ = "record of " + std::to_string(caplen) + " bytes: the file is corrupt";
    return false;
  }
  buffer_.resize(caplen);
  if (!read_exact(buffer_.data(), caplen)) {
    error_ = "truncated record at the end of the file";
    return false;
  }
  const std::uint64_t sub = u32(header + 4);
  record.timestamp_ns = std::uint64_t{u32(header)} * 1'000'000'000u + (nanoseconds_ ? sub : sub * 1000);
  record.original_length = u32(header + 12);
  record.linktype = classic_linktype_;
  record.data = std::span<const std::uint8_t>(buffer_.data(), caplen);
  return true;
}

bool PcapReader::next_pcapng(PcapRecord& record) {
  for (;;) {
    std::uint8_t head[8];
    const std::size_t got = std::fread(head, 1, sizeof head, file_.get());
    if (got == 0) return false;
    if (got != sizeof head) {
      error_ = "truncated pcapng block header at the end of the file";
      return false;
    }
    std::uint32_t type;
    std::memcpy(&type, head, 4);
    if (type == pcapng_section_header) {
      // The byte-order magic follows the length; the length itself is in the
      // section's byte order, so read the magic first.
      std::uint8_t bom[4];
      if (!read_exact(bom, 4)) {
        error_ = "truncated pcapng section header";
        return false;
      }
      std::uint32_t magic;
      std::memcpy(&magic, bom, 4);
      if (magic == pcapng_byte_order_magic) {
        swapped_ = false;
      } else if (__builtin_bswap32(magic) == pcapng_byte_order_magic) {
        swapped_ = true;
      } else {
        error_ = "pcapng section header with a bad byte-order magic";
        return false;
      }
      interfaces_.clear();
      const std::uint32_t total = u32(head + 4);
      if (total < 28 || total > max_record_size || (total & 3) != 0) {
        error_ = "pcapng section header with a bad length";
        return false;
      }
      buffer_.resize(total - 12);
      if (!read_exact(buffer_.data(), total - 12)) {
        error_ = "truncated pcapng section header";
        return false;
      }
      continue;
    }
    type = u32(head);
    const std::uint32_t total = u32(head + 4);
    if (total < 12 || total > max_record_size || (total & 3) != 0) {
      error_ = "pcapng block of bad length " + std::to_string(total);
      return false;
    }
    buffer_.resize(total - 8);
    if (!read_exact(buffer_.data(), total - 8)) {
      error_ = "truncated pcapng block at the end of the file";
      return false;
    }
    const std::uint8_t* body = buffer_.data();
    const std::size_t body_len = total - 12;  // without the trailing length
    if (type == pcapng_interface_description) {
      if (body_len < 8) {
        error_ = "pcapng interface description too short";
        return false;
      }
      interfaces_.push_back(Interface{u16(body), u32(body + 4)});
      continue;
    }
    if (type == pcapng_enhanced_packet) {
      if (body_len < 20) {
        error_ = "pcapng enhanced packet block too short";
        return false;
      }
      const std::uint32_t ifindex = u32(body);
      const std::uint32_t caplen = u32(body + 12);
      if (ifindex >= interfaces_.size()) {
        error_ = "pcapng packet names interface " + std::to_string(ifindex) + " that was never described";
        return false;
      }
      if (caplen > body_len - 20) {
        error_ = "pcapng packet longer than its block";
        return false;
      }
      // Timestamps default to microseconds; if_tsresol options are not read.
      const std::uint64_t ts = (std::uint64_t{u32(body + 4)} << 32) | u32(body + 8);
      record.timestamp_ns = ts * 1000;
      record.original_length = u32(body + 16);
      record.linktype = interfaces_[ifindex].linktype;
      record.data = std::span<const std::uint8_t>(body + 20, caplen);
      return true;
    }
    if (type == pcapng_simple_packet) {
      if (body_len < 4 || interfaces_.empty()) {
        error_ = "pcapng simple packet block without an interface";
        return false;
      }
      const std::uint32_t orig = u32(body);
      std::uint32_t caplen = orig;
      if (interfaces_[0].snaplen != 0 && caplen > interfaces_[0].snaplen) caplen = interfaces_[0].snaplen;
      if (caplen > body_len - 4) caplen = static_cast<std::uint32_t>(body_len - 4);
      record.timestamp_ns = 0;
      record.original_length = orig;
      record.linktype = interfaces_[0].linktype;
      record.data = std::span<const std::uint8_t>(body + 4, caplen);
      return true;
    }
    // Statistics, name resolution, custom blocks: nothing to decode.
  }
}

bool PcapWriter::open(const std::string& path, std::string& error, std::uint32_t linktype) {
  file_.reset(std::fopen(path.c_str(), "wb"));
  if (!file_) {
    error = path + ": cannot create: " + std::strerror(errno);
    return false;
  }
  const std::uint32_t header[6] = {classic_magic_ns, 0x00040002u /* version 2.4 */, 0, 0, 262144,
                                   linktype};
  if (std::fwrite(header, sizeof header, 1, file_.get()) != 1) {
    error = path + ": write failed: " + std::strerror(errno);
    return false;
  }
  return true;
}

bool PcapWriter::write(std::span<const std::uint8_t> frame, std::uint64_t timestamp_ns) {
  const std::uint32_t header[4] = {static_cast<std::uint32_t>(timestamp_ns / 1'000'000'000u),
                                   static_cast<std::uint32_t>(timestamp_ns % 1'000'000'000u),
                                   static_cast<std::uint32_t>(frame.size()),
                                   static_cast<std::uint32_t>(frame.size())};
  return std::fwrite(header, sizeof header, 1, file_.get()) == 1 &&
         std::fwrite(frame.data(), 1, frame.size(), file_.get()) == frame.size();
}

bool PcapWriter::close() {
  if (!file_) return true;
  const bool ok = std::fflush(file_.get()) == 0;
  file_.reset();
  return ok;
}

}  // namespace metaroce::apps
