// Reading and writing capture files, through libpcap: classic pcap
// (microsecond or nanosecond, either byte order) and pcapng, which is what
// tcpdump, tshark, scapy and DPDK's rte_pcapng write; we write classic pcap
// with nanosecond timestamps. pcap.h stays out of this header.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

struct pcap;
struct pcap_dumper;

namespace metaroce::apps {

// Frees libpcap's handles; defined where pcap.h is included.
struct PcapCloser {
  void operator()(pcap* p) const noexcept;
  void operator()(pcap_dumper* d) const noexcept;
};

inline constexpr std::uint32_t linktype_ethernet = 1;

struct PcapRecord {
  std::span<const std::uint8_t> data;  // valid until the next call to next()
  std::uint32_t original_length = 0;
  // libpcap's DLT_ value: the file's LINKTYPE_ for Ethernet (1) and for
  // most others. A pcapng file whose interfaces differ in link type is
  // refused by libpcap (open or next() says so).
  std::uint32_t linktype = linktype_ethernet;
  std::uint64_t timestamp_ns = 0;  // pcapng if_tsresol honoured
};

class PcapReader {
 public:
  // On failure returns false with a message that says what is wrong.
  bool open(const std::string& path, std::string& error);
  // False at the end of the file, or on a malformed file (then error() is set).
  bool next(PcapRecord& record);
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  std::unique_ptr<pcap, PcapCloser> pcap_;
  std::string error_;
};

// Writes classic pcap with nanosecond timestamps (magic 0xa1b23c4d).
class PcapWriter {
 public:
  bool open(const std::string& path, std::string& error, std::uint32_t linktype = linktype_ethernet);
  // False if the file could not be written (disk full, I/O error).
  bool write(std::span<const std::uint8_t> frame, std::uint64_t timestamp_ns);
  bool close();

 private:
  std::unique_ptr<pcap, PcapCloser> dead_;  // the link type and precision the dumper writes
  std::unique_ptr<pcap_dumper, PcapCloser> dumper_;
};

}  // namespace metaroce::apps
