// tools/bench secure: what security costs metaroce-perf --loopback, in one
// run (about 30 s): for security off, auth-only and encrypted,
//   1. 1 MiB WRITEs for 3 s: goodput;
//   2. 64 B WRITEs for 3 s: message rate;
// and the library's own AES-256-GCM on one core over 1 MiB (encrypt in
// place, lib/secure's Gcm through intel-ipsec-mb, the key schedule made
// once). Human-readable lines, then one JSON object as the last line; a
// figure that could not be measured is null.
//
// What the library's GCM allows: each side's lcore does the work of the
// plain run and one GCM pass over every byte (the sender seals, the
// receiver opens), so at best a byte costs 1/off + 1/gcm and the encrypted
// goodput can be at most 1 / (1/off + 1/gcm) (`encrypt_ceiling_gbps`).
// The targets are floors on two ratios: encrypted goodput / that ceiling
// >= 0.80, auth-only 64 B message rate / off >= 0.70.
#include <sys/stat.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../common/program_runner.hpp"
#include "secure/gcm.hpp"

#ifndef METAROCE_PERF_PATH
#error "METAROCE_PERF_PATH: the metaroce-perf executable, set by meson"
#endif

namespace {

using metaroce::bench::Figure;
using metaroce::bench::json_number;
using metaroce::bench::json_value;
using metaroce::bench::read_file;
using metaroce::bench::run;
using metaroce::bench::show;

Figure perf(const std::string& args, const std::string& json_path, const char* key) {
  const std::string command = fmt::format("{} --json {} {}", METAROCE_PERF_PATH, json_path, args);
  std::printf("  $ %s\n", command.c_str());
  if (run(command) != 0) {
    std::printf("  metaroce-perf failed (exit status above); its figure is null\n");
    return std::nullopt;
  }
  return json_number(read_file(json_path), key);
}

// AES-256-GCM encrypting 1 MiB in place, best of several passes, Gb/s.
Figure library_gcm_gbps(double seconds) {
  using namespace metaroce::secure;
  Gcm gcm;
  std::array<std::uint8_t, 32> key{};
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(i * 3 + 1);
  if (!gcm.set_key(Algorithm::aes256_gcm, key)) return std::nullopt;
  std::vector<std::uint8_t> data(std::size_t{1} << 20, 0x5a);
  std::array<std::uint8_t, 40> aad{};
  Nonce nonce{};
  Tag tag{};
  double best = 0;
  const auto stop = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::uint64_t n = 0;
  do {
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < 64; ++k) {
      nonce[11] = static_cast<std::uint8_t>(++n);
      if (!gcm.seal(nonce, aad, data, tag)) return std::nullopt;
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 64.0 * double(data.size()) * 8.0 / ns);
  } while (std::chrono::steady_clock::now() < stop);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  const auto scratch = metaroce::bench::start_benchmark("secure", argc, argv, exit_code);
  if (!scratch) return exit_code;
  const std::string work = *scratch;

  // The key file: 32 bytes, owner only.
  const std::string key = work + "/psk";
  if (run(fmt::format("head -c 32 /dev/urandom > '{}' && chmod 600 '{}'", key, key)) != 0) {
    std::printf("could not write the key file %s\n", key.c_str());
    return 1;
  }

  struct Row {
    const char* mode;
    std::string flags;
    Figure goodput_gbps;
    Figure msg_rate_mps;
  };
  std::vector<Row> rows = {{"off", "", {}, {}},
                           {"auth", fmt::format("--secure=auth-only --key-file '{}'", key), {}, {}},
                           {"encrypt", fmt::format("--secure --key-file '{}'", key), {}, {}}};
  int step = 1;
  for (Row& r : rows) {
    std::printf("%d. security %s: 1 MiB WRITEs for 3 s, then 64 B WRITEs for 3 s\n", step++, r.mode);
    r.goodput_gbps = perf(fmt::format("--loopback -s 1048576 -D 3 --report-gbits {}", r.flags),
                          work + "/bw-" + r.mode + ".json", "bw_average_gbps");
    r.msg_rate_mps =
        perf(fmt::format("--loopback -s 64 -D 3 {}", r.flags), work + "/rate-" + r.mode + ".json", "msg_rate_mpps");
  }
  std::printf("%d. the library's AES-256-GCM (intel-ipsec-mb), one core, 1 MiB in place\n", step);
  const Figure gcm = library_gcm_gbps(1.0);

  std::printf("\nsummary\n");
  for (const Row& r : rows)
    std::printf("  %-8s goodput 1 MiB %s, 64 B message rate %s\n", r.mode, show(r.goodput_gbps, "Gb/s").c_str(),
                show(r.msg_rate_mps, "M msg/s", 3).c_str());
  std::printf("  the library's AES-256-GCM, one core: %s\n", show(gcm, "Gb/s").c_str());
  Figure ceiling;
  if (gcm && rows[0].goodput_gbps && *gcm > 0 && *rows[0].goodput_gbps > 0)
    ceiling = 1.0 / (1.0 / *rows[0].goodput_gbps + 1.0 / *gcm);
  const auto ratio = [](const Figure& a, const Figure& b) -> Figure {
    if (a && b && *b > 0) return *a / *b;
    return std::nullopt;
  };
  const Figure encrypt_share = ratio(rows[2].goodput_gbps, ceiling);
  const Figure auth_rate_share = ratio(rows[1].msg_rate_mps, rows[0].msg_rate_mps);
  const auto percent = [](const Figure& f) { return f ? fmt::format("{:.0f}%", *f * 100) : std::string("?"); };
  std::printf("  what the GCM allows the encrypted goodput, 1 / (1/off + 1/gcm): %s\n", show(ceiling, "Gb/s").c_str());
  std::printf("  encrypted goodput / that ceiling: %s (target >= 80%%); auth-only 64 B rate / off: %s (target >= 70%%)\n",
              percent(encrypt_share).c_str(), percent(auth_rate_share).c_str());

  if (std::system(fmt::format("rm -rf '{}'", work).c_str()) != 0) std::printf("  (could not remove %s)\n", work.c_str());
  std::string json = "{\"bench\":\"secure\",\"rows\":[";
  for (std::size_t i = 0; i < rows.size(); ++i)
    json += fmt::format("{}{{\"mode\":\"{}\",\"goodput_gbps\":{},\"msg_rate_64b_mps\":{}}}", i == 0 ? "" : ",",
                        rows[i].mode, json_value(rows[i].goodput_gbps, 3), json_value(rows[i].msg_rate_mps, 4));
  json += fmt::format(
      "],\"library_gcm_gbps\":{},\"encrypt_ceiling_gbps\":{},\"encrypt_share_of_ceiling\":{},"
      "\"auth_rate_share_of_off\":{}}}",
      json_value(gcm, 3), json_value(ceiling, 3), json_value(encrypt_share, 3), json_value(auth_rate_share, 3));
  std::printf("%s\n", json.c_str());
  for (const Row& r : rows)
    if (!r.goodput_gbps || !r.msg_rate_mps) return 1;
  return gcm ? 0 : 1;
}
