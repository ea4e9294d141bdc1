// tools/bench secure: what security costs metaroce-perf --loopback, in one
// run (about a minute and a half): five rounds, each with, for security
// off, auth-only and encrypted,
//   1. 1 MiB WRITEs for 2 s: goodput;
//   2. 64 B WRITEs for 2 s: message rate;
// (each the three modes in turn, in reverse order every other round)
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

#include <algorithm>
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
    std::vector<double> goodput_gbps;  // one per round
    std::vector<double> msg_rate_mps;
    Figure goodput_median;
    Figure rate_median;
  };
  std::vector<Row> rows = {{"off", "", {}, {}, {}, {}},
                           {"auth", fmt::format("--secure=auth-only --key-file '{}'", key), {}, {}, {}, {}},
                           {"encrypt", fmt::format("--secure --key-file '{}'", key), {}, {}, {}, {}}};
  // The host is shared: a neighbour's burst can halve one run, and its
  // speed drifts over seconds. Each round measures every mode once, the
  // three goodput runs one after the other, then the three message-rate
  // runs, each three in the opposite order every other round (so a drift
  // favours neither end of the order); the ratios are taken within a round
  // (paired), then the median over the rounds.
  constexpr int rounds = 5;
  std::vector<double> gcm_gbps, encrypt_shares, auth_shares, ceilings;
  bool measured = true;
  for (int round = 1; round <= rounds; ++round) {
    std::printf("round %d of %d\n", round, rounds);
    for (std::size_t k = 0; k < rows.size(); ++k) {
      Row& r = rows[round % 2 == 1 ? k : rows.size() - 1 - k];
      std::printf("  security %s: 1 MiB WRITEs for 2 s\n", r.mode);
      const Figure g = perf(fmt::format("--loopback -s 1048576 -D 2 --report-gbits {}", r.flags),
                            work + "/bw-" + r.mode + ".json", "bw_average_gbps");
      if (!g) measured = false;
      if (g) r.goodput_gbps.push_back(*g);
    }
    for (std::size_t k = 0; k < rows.size(); ++k) {
      Row& r = rows[round % 2 == 1 ? k : rows.size() - 1 - k];
      std::printf("  security %s: 64 B WRITEs for 2 s\n", r.mode);
      const Figure m =
          perf(fmt::format("--loopback -s 64 -D 2 {}", r.flags), work + "/rate-" + r.mode + ".json", "msg_rate_mpps");
      if (!m) measured = false;
      if (m) r.msg_rate_mps.push_back(*m);
    }
    std::printf("  the library's AES-256-GCM (intel-ipsec-mb), one core, 1 MiB in place\n");
    const Figure gcm = library_gcm_gbps(0.5);
    if (!gcm || !measured) {
      measured = false;
      break;
    }
    gcm_gbps.push_back(*gcm);
    const double off = rows[0].goodput_gbps.back();
    const double ceiling = 1.0 / (1.0 / off + 1.0 / *gcm);
    ceilings.push_back(ceiling);
    encrypt_shares.push_back(rows[2].goodput_gbps.back() / ceiling);
    auth_shares.push_back(rows[1].msg_rate_mps.back() / rows[0].msg_rate_mps.back());
    std::printf("  round %d: off %.2f Gb/s %.3f M msg/s, auth %.2f Gb/s %.3f M msg/s, encrypt %.2f Gb/s "
                "%.3f M msg/s; GCM %.2f Gb/s; encrypted / ceiling %.0f%%, auth rate / off %.0f%%\n",
                round, off, rows[0].msg_rate_mps.back(), rows[1].goodput_gbps.back(), rows[1].msg_rate_mps.back(),
                rows[2].goodput_gbps.back(), rows[2].msg_rate_mps.back(), *gcm, encrypt_shares.back() * 100,
                auth_shares.back() * 100);
  }
  const auto median = [](std::vector<double> v) -> Figure {
    if (v.empty()) return std::nullopt;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (Row& r : rows) {
    r.goodput_median = median(r.goodput_gbps);
    r.rate_median = median(r.msg_rate_mps);
  }
  const Figure gcm = measured ? median(gcm_gbps) : std::nullopt;
  const Figure ceiling = measured ? median(ceilings) : std::nullopt;
  const Figure encrypt_share = measured ? median(encrypt_shares) : std::nullopt;
  const Figure auth_rate_share = measured ? median(auth_shares) : std::nullopt;

  std::printf("\nsummary (medians of %d rounds)\n", rounds);
  for (const Row& r : rows)
    std::printf("  %-8s goodput 1 MiB %s, 64 B message rate %s\n", r.mode, show(r.goodput_median, "Gb/s").c_str(),
                show(r.rate_median, "M msg/s", 3).c_str());
  std::printf("  the library's AES-256-GCM, one core: %s\n", show(gcm, "Gb/s").c_str());
  const auto percent = [](const Figure& f) { return f ? fmt::format("{:.0f}%", *f * 100) : std::string("?"); };
  std::printf("  what the GCM allows the encrypted goodput, 1 / (1/off + 1/gcm): %s\n", show(ceiling, "Gb/s").c_str());
  std::printf("  encrypted goodput / that ceiling: %s (target >= 80%%); auth-only 64 B rate / off: %s (target >= 70%%)\n",
              percent(encrypt_share).c_str(), percent(auth_rate_share).c_str());

  if (std::system(fmt::format("rm -rf '{}'", work).c_str()) != 0) std::printf("  (could not remove %s)\n", work.c_str());
  std::string json = "{\"bench\":\"secure\",\"rows\":[";
  for (std::size_t i = 0; i < rows.size(); ++i)
    json += fmt::format("{}{{\"mode\":\"{}\",\"goodput_gbps\":{},\"msg_rate_64b_mps\":{}}}", i == 0 ? "" : ",",
                        rows[i].mode, json_value(rows[i].goodput_median, 3), json_value(rows[i].rate_median, 4));
  json += fmt::format(
      "],\"library_gcm_gbps\":{},\"encrypt_ceiling_gbps\":{},\"encrypt_share_of_ceiling\":{},"
      "\"auth_rate_share_of_off\":{}}}",
      json_value(gcm, 3), json_value(ceiling, 3), json_value(encrypt_share, 3), json_value(auth_rate_share, 3));
  std::printf("%s\n", json.c_str());
  return measured ? 0 : 1;
}
