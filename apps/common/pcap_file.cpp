#include "common/pcap_file.hpp"

#include <pcap/pcap.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace metaroce::apps {
namespace {

// What a reader can do about a file libpcap refuses part-way through.
std::string hint_for(const std::string& libpcap_message) {
  if (libpcap_message.find("different from the type of the first interface") != std::string::npos) {
    return " (a pcapng file whose interfaces have different link types: keep one interface, e.g. "
           "tshark -r FILE -Y frame.interface_id==0 -w ONE.pcapng)";
  }
  return " (the file is truncated or corrupt from here on; the records before it were read)";
}

}  // namespace

void PcapCloser::operator()(pcap* p) const noexcept { pcap_close(p); }
void PcapCloser::operator()(pcap_dumper* d) const noexcept { pcap_dump_close(d); }

bool PcapReader::open(const std::string& path, std::string& error) {
  pcap_.reset();
  error_.clear();
  // Opened here, not by libpcap, so that a missing file says so in our words.
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_fopen_offline_with_tstamp_precision(file, PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (p == nullptr) {
    std::fclose(file);  // libpcap closes it only once it has taken it
    error = path + ": not a pcap or pcapng file libpcap can read (" + errbuf +
            "); expected a capture as tcpdump -w, tshark -w or dpdk-dumpcap write";
    return false;
  }
  pcap_.reset(p);
  return true;
}

bool PcapReader::next(PcapRecord& record) {
  if (!pcap_) return false;
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  const int status = pcap_next_ex(pcap_.get(), &header, &data);
  if (status == 1) {
    // Opened with nanosecond precision: tv_usec holds nanoseconds.
    record.timestamp_ns = static_cast<std::uint64_t>(header->ts.tv_sec) * 1'000'000'000u +
                          static_cast<std::uint64_t>(header->ts.tv_usec);
    record.original_length = header->len;
    record.linktype = static_cast<std::uint32_t>(pcap_datalink(pcap_.get()));
    record.data = std::span<const std::uint8_t>(data, header->caplen);
    return true;
  }
  if (status == PCAP_ERROR_BREAK) return false;  // the end of the file
  const std::string message = pcap_geterr(pcap_.get());
  error_ = message + hint_for(message);
  return false;
}

bool PcapWriter::open(const std::string& path, std::string& error, std::uint32_t linktype) {
  dumper_.reset();
  dead_.reset(pcap_open_dead_with_tstamp_precision(static_cast<int>(linktype), 262144, PCAP_TSTAMP_PRECISION_NANO));
  if (!dead_) {
    error = path + ": cannot create: libpcap could not allocate a handle for link type " + std::to_string(linktype);
    return false;
  }
  dumper_.reset(pcap_dump_open(dead_.get(), path.c_str()));
  if (!dumper_) {
    error = path + ": cannot create: " + pcap_geterr(dead_.get());
    return false;
  }
  return true;
}

bool PcapWriter::write(std::span<const std::uint8_t> frame, std::uint64_t timestamp_ns) {
  if (!dumper_) return false;
  pcap_pkthdr header{};
  header.ts.tv_sec = static_cast<time_t>(timestamp_ns / 1'000'000'000u);
  header.ts.tv_usec = static_cast<suseconds_t>(timestamp_ns % 1'000'000'000u);  // nanoseconds: see open
  header.caplen = static_cast<bpf_u_int32>(frame.size());
  header.len = static_cast<bpf_u_int32>(frame.size());
  pcap_dump(reinterpret_cast<u_char*>(dumper_.get()), &header, frame.data());
  // pcap_dump reports nothing; the stream's error flag does.
  return std::ferror(pcap_dump_file(dumper_.get())) == 0;
}

bool PcapWriter::close() {
  if (!dumper_) return true;
  const bool ok = pcap_dump_flush(dumper_.get()) == 0 && std::ferror(pcap_dump_file(dumper_.get())) == 0;
  dumper_.reset();
  dead_.reset();
  return ok;
}

}  // namespace metaroce::apps
