// fuzz-decode-pcap: what metaroce-decode does with an arbitrary capture file.
//
// The input is the whole file. PcapReader only opens paths, so the bytes go
// into an anonymous memory file (memfd) opened through /proc/self/fd: no
// disk, nothing left behind. PcapReader hands the file to libpcap, which is
// not built with coverage or ASan here (Debian's), so what is fuzzed is our
// use of it (open, errors, every record handed back, the handle freed:
// LeakSanitizer sees it) and the decoder. Every record is decoded by
// frame_to_json, as apps/metaroce-decode/main.cpp does, from an exact-size
// heap copy so that AddressSanitizer sees any read past the captured bytes
// (libpcap's buffer is as large as the file's snapshot length). The JSON
// line must be non-empty and start and end like an object.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "common/pcap_file.hpp"
#include "metaroce-decode/frame_json.hpp"

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz-decode-pcap: invariant violated: %s\n", what);
  std::abort();
}

// Owns the memfd for one input.
class MemoryFile {
 public:
  MemoryFile(const std::uint8_t* data, std::size_t size) : fd_(memfd_create("fuzz-pcap", MFD_CLOEXEC)) {
    if (fd_ < 0) violated("memfd_create failed");
    std::size_t written = 0;
    while (written < size) {
      const ssize_t n = write(fd_, data + written, size - written);
      if (n <= 0) violated("write to the memfd failed");
      written += static_cast<std::size_t>(n);
    }
  }
  ~MemoryFile() { close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  [[nodiscard]] std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

// The decoder stops after this many records: a 1 MiB input of empty records
// is ~65,000 of them, and each JSON line costs more than its bytes.
constexpr std::uint64_t max_records = 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const MemoryFile file(data, size);
  metaroce::apps::PcapReader reader;
  std::string error;
  if (!reader.open(file.path(), error)) {
    if (error.empty()) violated("open failed without a message");
    return 0;
  }
  metaroce::apps::PcapRecord record;
  std::uint64_t frame = 0;
  while (frame < max_records && reader.next(record)) {
    ++frame;
    const std::size_t n = record.data.size();
    const std::unique_ptr<std::uint8_t[]> exact(new std::uint8_t[n == 0 ? 1 : n]);
    if (n != 0) std::memcpy(exact.get(), record.data.data(), n);
    for (const bool verify_icrc : {true, false}) {
      const auto line = metaroce::apps::frame_to_json(frame, std::span<const std::uint8_t>(exact.get(), n),
                                                      record.linktype, verify_icrc);
      if (line.json.size() < 2 || line.json.front() != '{' || line.json.back() != '}')
        violated("frame_to_json did not return one JSON object");
      if (line.ok == (line.json.find("\"error\"") != std::string::npos))
        violated("ok disagrees with the presence of \"error\"");
    }
  }
  return 0;
}
