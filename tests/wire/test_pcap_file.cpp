// Capture files (libpcap underneath): what we write reads back, byte for
// byte the classic nanosecond pcap; pcapng (timestamp resolutions, several
// sections) and byte-swapped pcap read; corrupt and truncated files give an
// error that says what is wrong, not a crash.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/pcap_file.hpp"

namespace {

using metaroce::apps::PcapReader;
using metaroce::apps::PcapRecord;
using metaroce::apps::PcapWriter;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("metaroce-test-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void put32le(std::vector<std::uint8_t>& v, std::uint32_t x) {
  for (int i = 0; i < 4; ++i) v.push_back(static_cast<std::uint8_t>(x >> (8 * i)));
}
void put32be(std::vector<std::uint8_t>& v, std::uint32_t x) {
  for (int i = 3; i >= 0; --i) v.push_back(static_cast<std::uint8_t>(x >> (8 * i)));
}
void put16le(std::vector<std::uint8_t>& v, std::uint16_t x) {
  v.push_back(static_cast<std::uint8_t>(x));
  v.push_back(static_cast<std::uint8_t>(x >> 8));
}

// A pcapng block: type, length, body padded to 4 bytes, length again.
void put_block(std::vector<std::uint8_t>& f, std::uint32_t type, std::vector<std::uint8_t> body) {
  while (body.size() % 4 != 0) body.push_back(0);
  const auto total = static_cast<std::uint32_t>(12 + body.size());
  put32le(f, type);
  put32le(f, total);
  f.insert(f.end(), body.begin(), body.end());
  put32le(f, total);
}

void put_section_header(std::vector<std::uint8_t>& f) {
  std::vector<std::uint8_t> body;
  put32le(body, 0x1a2b3c4d);
  put16le(body, 1);
  put16le(body, 0);
  put32le(body, 0xffffffff);  // section length unknown
  put32le(body, 0xffffffff);
  put_block(f, 0x0a0d0d0a, body);
}

// An interface description block; `tsresol` (if not 0) as its if_tsresol option.
void put_interface(std::vector<std::uint8_t>& f, std::uint16_t linktype, std::uint8_t tsresol = 0) {
  std::vector<std::uint8_t> body;
  put16le(body, linktype);
  put16le(body, 0);
  put32le(body, 0);  // snaplen: none
  if (tsresol != 0) {
    put16le(body, 9);  // if_tsresol
    put16le(body, 1);
    body.insert(body.end(), {tsresol, 0, 0, 0});
    put32le(body, 0);  // opt_endofopt
  }
  put_block(f, 1, body);
}

void put_enhanced_packet(std::vector<std::uint8_t>& f, std::uint32_t interface, std::uint64_t ts,
                         const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> body;
  put32le(body, interface);
  put32le(body, static_cast<std::uint32_t>(ts >> 32));
  put32le(body, static_cast<std::uint32_t>(ts));
  put32le(body, static_cast<std::uint32_t>(data.size()));
  put32le(body, static_cast<std::uint32_t>(data.size()));
  body.insert(body.end(), data.begin(), data.end());
  put_block(f, 6, body);
}

std::vector<std::vector<std::uint8_t>> read_all(const std::string& path, std::string& error,
                                                std::vector<std::uint64_t>* timestamps = nullptr) {
  PcapReader r;
  std::vector<std::vector<std::uint8_t>> records;
  if (!r.open(path, error)) return records;
  PcapRecord rec;
  while (r.next(rec)) {
    records.emplace_back(rec.data.begin(), rec.data.end());
    if (timestamps != nullptr) timestamps->push_back(rec.timestamp_ns);
  }
  error = r.error();
  return records;
}

TEST(PcapFile, WriteThenReadBack) {
  const std::string path = temp_path("rw.pcap");
  std::string error;
  PcapWriter w;
  ASSERT_TRUE(w.open(path, error)) << error;
  const std::vector<std::uint8_t> a = {1, 2, 3};
  const std::vector<std::uint8_t> b(1500, 0xab);
  ASSERT_TRUE(w.write(a, 1'000'000'123));
  ASSERT_TRUE(w.write(b, 2'500'000'000));
  ASSERT_TRUE(w.close());

  PcapReader r;
  ASSERT_TRUE(r.open(path, error)) << error;
  PcapRecord rec;
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(std::vector<std::uint8_t>(rec.data.begin(), rec.data.end()), a);
  EXPECT_EQ(rec.timestamp_ns, 1'000'000'123u);
  EXPECT_EQ(rec.linktype, 1u);
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.data.size(), 1500u);
  EXPECT_EQ(rec.timestamp_ns, 2'500'000'000u);
  EXPECT_FALSE(r.next(rec));
  EXPECT_TRUE(r.error().empty());
  std::remove(path.c_str());
}

TEST(PcapFile, ReadsBigEndianMicrosecondPcap) {
  std::vector<std::uint8_t> f;
  put32be(f, 0xa1b2c3d4);
  f.insert(f.end(), {0, 2, 0, 4});
  put32be(f, 0);
  put32be(f, 0);
  put32be(f, 65535);
  put32be(f, 1);
  put32be(f, 7);  // seconds
  put32be(f, 5);  // microseconds
  put32be(f, 2);
  put32be(f, 60);
  f.insert(f.end(), {0xaa, 0xbb});
  const std::string path = temp_path("be.pcap");
  write_bytes(path, f);
  PcapReader r;
  std::string error;
  ASSERT_TRUE(r.open(path, error)) << error;
  PcapRecord rec;
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.timestamp_ns, 7'000'005'000u);
  EXPECT_EQ(rec.original_length, 60u);
  ASSERT_EQ(rec.data.size(), 2u);
  EXPECT_EQ(rec.data[1], 0xbb);
  EXPECT_FALSE(r.next(rec));
  std::remove(path.c_str());
}

TEST(PcapFile, ReadsPcapng) {
  std::vector<std::uint8_t> f;
  // Section header block (28 bytes, no options).
  put32le(f, 0x0a0d0d0a);
  put32le(f, 28);
  put32le(f, 0x1a2b3c4d);
  put16le(f, 1);
  put16le(f, 0);
  put32le(f, 0xffffffff);
  put32le(f, 0xffffffff);
  put32le(f, 28);
  // Interface description block: Ethernet.
  put32le(f, 1);
  put32le(f, 20);
  put16le(f, 1);
  put16le(f, 0);
  put32le(f, 0);
  put32le(f, 20);
  // A custom block to be skipped.
  put32le(f, 0x00000bad);
  put32le(f, 16);
  put32le(f, 0x12345678);
  put32le(f, 16);
  // Enhanced packet block with 5 bytes (padded to 8).
  put32le(f, 6);
  put32le(f, 32 + 8);
  put32le(f, 0);
  put32le(f, 0);
  put32le(f, 3);  // 3 microseconds
  put32le(f, 5);
  put32le(f, 5);
  f.insert(f.end(), {1, 2, 3, 4, 5, 0, 0, 0});
  put32le(f, 32 + 8);
  // Simple packet block with 3 bytes.
  put32le(f, 3);
  put32le(f, 16 + 4);
  put32le(f, 3);
  f.insert(f.end(), {9, 8, 7, 0});
  put32le(f, 16 + 4);
  const std::string path = temp_path("ng.pcapng");
  write_bytes(path, f);

  PcapReader r;
  std::string error;
  ASSERT_TRUE(r.open(path, error)) << error;
  PcapRecord rec;
  ASSERT_TRUE(r.next(rec)) << r.error();
  EXPECT_EQ(std::vector<std::uint8_t>(rec.data.begin(), rec.data.end()), (std::vector<std::uint8_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(rec.timestamp_ns, 3000u);
  ASSERT_TRUE(r.next(rec)) << r.error();
  EXPECT_EQ(std::vector<std::uint8_t>(rec.data.begin(), rec.data.end()), (std::vector<std::uint8_t>{9, 8, 7}));
  EXPECT_FALSE(r.next(rec));
  EXPECT_TRUE(r.error().empty()) << r.error();
  std::remove(path.c_str());
}

TEST(PcapFile, BadFilesGiveErrors) {
  PcapReader r;
  std::string error;
  EXPECT_FALSE(r.open(temp_path("does-not-exist.pcap"), error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;

  const std::string text = temp_path("text.pcap");
  write_bytes(text, {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!', '!', '!', '!', '!', '!', '!',
                     '!', '!', '!', '!', '!', '!', '!'});
  PcapReader r2;
  EXPECT_FALSE(r2.open(text, error));
  EXPECT_NE(error.find("not a pcap"), std::string::npos) << error;

  // A record header that claims 1 GiB.
  std::vector<std::uint8_t> f;
  put32le(f, 0xa1b2c3d4);
  f.insert(f.end(), {2, 0, 4, 0});
  for (int i = 0; i < 3; ++i) put32le(f, 0);
  put32le(f, 1);
  put32le(f, 0);
  put32le(f, 0);
  put32le(f, 1u << 30);
  put32le(f, 1u << 30);
  const std::string huge = temp_path("huge.pcap");
  write_bytes(huge, f);
  PcapReader r3;
  ASSERT_TRUE(r3.open(huge, error));
  PcapRecord rec;
  EXPECT_FALSE(r3.next(rec));
  EXPECT_NE(r3.error().find("corrupt"), std::string::npos) << r3.error();
  std::remove(text.c_str());
  std::remove(huge.c_str());
}

TEST(PcapFile, WritesClassicNanosecondPcapByteForByte) {
  const std::string path = temp_path("bytes.pcap");
  std::string error;
  PcapWriter w;
  ASSERT_TRUE(w.open(path, error)) << error;
  ASSERT_TRUE(w.write(std::vector<std::uint8_t>{0xde, 0xad}, 3'000'000'007));
  ASSERT_TRUE(w.close());
  std::ifstream in(path, std::ios::binary);
  const std::vector<std::uint8_t> got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::uint8_t> want;
  put32le(want, 0xa1b23c4d);  // nanosecond magic, this machine's (little-endian) order
  put16le(want, 2);
  put16le(want, 4);
  put32le(want, 0);       // thiszone
  put32le(want, 0);       // sigfigs
  put32le(want, 262144);  // snaplen
  put32le(want, 1);       // Ethernet
  put32le(want, 3);       // seconds
  put32le(want, 7);       // nanoseconds
  put32le(want, 2);       // captured
  put32le(want, 2);       // on the wire
  want.insert(want.end(), {0xde, 0xad});
  EXPECT_EQ(got, want);
  std::remove(path.c_str());
}

TEST(PcapFile, PcapngTimestampResolutionIsHonoured) {
  // DPDK's rte_pcapng writes if_tsresol 9: nanosecond ticks.
  std::vector<std::uint8_t> f;
  put_section_header(f);
  put_interface(f, 1, 9);
  put_enhanced_packet(f, 0, 1'234'567'891, {1, 2, 3});
  put_interface(f, 1);  // the default, microseconds
  put_enhanced_packet(f, 1, 5, {4});
  const std::string path = temp_path("tsresol.pcapng");
  write_bytes(path, f);
  std::string error;
  std::vector<std::uint64_t> ts;
  const auto records = read_all(path, error, &ts);
  EXPECT_TRUE(error.empty()) << error;
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], (std::vector<std::uint8_t>{1, 2, 3}));
  EXPECT_EQ(ts[0], 1'234'567'891u);
  EXPECT_EQ(ts[1], 5'000u);
  std::remove(path.c_str());
}

TEST(PcapFile, PcapngOfTwoSectionsReadsBoth) {
  // What `cat a.pcapng b.pcapng` makes.
  std::vector<std::uint8_t> f;
  put_section_header(f);
  put_interface(f, 1);
  put_enhanced_packet(f, 0, 1, {0xaa});
  put_section_header(f);
  put_interface(f, 1);
  put_enhanced_packet(f, 0, 2, {0xbb, 0xcc});
  const std::string path = temp_path("sections.pcapng");
  write_bytes(path, f);
  std::string error;
  const auto records = read_all(path, error);
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(records, (std::vector<std::vector<std::uint8_t>>{{0xaa}, {0xbb, 0xcc}}));
  std::remove(path.c_str());
}

TEST(PcapFile, PcapngInterfacesOfTwoLinkTypesAreRefusedWithAWayOut) {
  // libpcap gives a file one link type; one that mixes them is refused, and
  // the message says how to keep one interface.
  std::vector<std::uint8_t> f;
  put_section_header(f);
  put_interface(f, 1);
  put_enhanced_packet(f, 0, 1, {0xaa});
  put_interface(f, 113);  // Linux cooked capture
  put_enhanced_packet(f, 1, 2, {0xbb});
  const std::string path = temp_path("linktypes.pcapng");
  write_bytes(path, f);
  std::string error;
  const auto records = read_all(path, error);
  EXPECT_EQ(records, (std::vector<std::vector<std::uint8_t>>{{0xaa}}));
  EXPECT_NE(error.find("different link types"), std::string::npos) << error;
  EXPECT_NE(error.find("frame.interface_id==0"), std::string::npos) << error;
  std::remove(path.c_str());
}

TEST(PcapFile, TruncatedFilesKeepTheRecordsBeforeTheCut) {
  const std::string classic = temp_path("cut.pcap");
  {
    PcapWriter w;
    std::string error;
    ASSERT_TRUE(w.open(classic, error)) << error;
    ASSERT_TRUE(w.write(std::vector<std::uint8_t>(100, 1), 1));
    ASSERT_TRUE(w.write(std::vector<std::uint8_t>(100, 2), 2));
    ASSERT_TRUE(w.close());
  }
  // Cut in the middle of the second record's bytes, then of its header.
  for (const std::uintmax_t size : {24u + 116u + 16u + 50u, 24u + 116u + 7u}) {
    std::filesystem::resize_file(classic, size);
    std::string error;
    const auto records = read_all(classic, error);
    ASSERT_EQ(records.size(), 1u) << size;
    EXPECT_EQ(records[0], std::vector<std::uint8_t>(100, 1));
    EXPECT_NE(error.find("truncated"), std::string::npos) << error;
    EXPECT_NE(error.find("the records before it were read"), std::string::npos) << error;
  }

  std::vector<std::uint8_t> f;
  put_section_header(f);
  put_interface(f, 1);
  put_enhanced_packet(f, 0, 1, {1, 2, 3, 4});
  put_enhanced_packet(f, 0, 2, {5, 6, 7, 8});
  f.resize(f.size() - 5);
  const std::string ng = temp_path("cut.pcapng");
  write_bytes(ng, f);
  std::string error;
  const auto records = read_all(ng, error);
  EXPECT_EQ(records, (std::vector<std::vector<std::uint8_t>>{{1, 2, 3, 4}}));
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
  std::remove(classic.c_str());
  std::remove(ng.c_str());
}

TEST(PcapFile, EmptyFileIsNotACapture) {
  const std::string path = temp_path("empty.pcap");
  write_bytes(path, {});
  PcapReader r;
  std::string error;
  EXPECT_FALSE(r.open(path, error));
  EXPECT_NE(error.find("not a pcap or pcapng file"), std::string::npos) << error;
  EXPECT_NE(error.find("tcpdump -w"), std::string::npos) << error;
  PcapRecord rec;
  EXPECT_FALSE(r.next(rec));
  std::remove(path.c_str());
}

}  // namespace
