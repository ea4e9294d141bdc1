// Capture files: what we write reads back; pcapng and byte-swapped pcap read;
// corrupt files give an error, not a crash.
#include <cstdio>
#include <filesystem>
#include <fstream>
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

}  // namespace
