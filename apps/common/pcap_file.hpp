// Reading and writing capture files: classic pcap (microsecond or nanosecond,
// either byte order) and pcapng (section, interface, enhanced and simple
// packet blocks; other blocks are skipped). What tcpdump, tshark, scapy and
// DPDK's rte_pcapng write, we read.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace metaroce::apps {

inline constexpr std::uint32_t linktype_ethernet = 1;

struct PcapRecord {
  std::span<const std::uint8_t> data;  // valid until the next call to next()
  std::uint32_t original_length = 0;
  std::uint32_t linktype = linktype_ethernet;
  std::uint64_t timestamp_ns = 0;
};

class PcapReader {
 public:
  // On failure returns false with a message that says what is wrong.
  bool open(const std::string& path, std::string& error);
  // False at the end of the file, or on a malformed file (then error() is set).
  bool next(PcapRecord& record);
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  bool next_classic(PcapRecord& record);
  bool next_pcapng(PcapRecord& record);
  bool read_exact(void* out, std::size_t n);
  std::uint32_t u32(const std::uint8_t* p) const noexcept;
  std::uint16_t u16(const std::uint8_t* p) const noexcept;

  struct FileCloser {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, FileCloser> file_;
  bool pcapng_ = false;
  bool swapped_ = false;  // file byte order differs from the host's
  bool nanoseconds_ = false;
  std::uint32_t classic_linktype_ = linktype_ethernet;
  struct Interface {
    std::uint32_t linktype;
    std::uint32_t snaplen;
  };
  std::vector<Interface> interfaces_;
  std::vector<std::uint8_t> buffer_;
  std::string error_;
};

// Writes classic pcap with nanosecond timestamps (magic 0xa1b23c4d).
class PcapWriter {
 public:
  bool open(const std::string& path, std::string& error, std::uint32_t linktype = linktype_ethernet);
  bool write(std::span<const std::uint8_t> frame, std::uint64_t timestamp_ns);
  bool close();

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, FileCloser> file_;
};

}  // namespace metaroce::apps
