// The options a standard RoCEv2 peer needs to match, shared by
// metaroce-perf, metaroce-gen and metaroce-sink: the partition (--pkey) and
// the IBTA timers (--qp-timeout, --retry-count, --rnr-retry, as perftest's
// -u and ibv_modify_qp's timeout, retry_cnt and rnr_retry). They apply to
// --mode rocev2 connections; metaroce connections keep their own P_Key per
// connection and timers that follow the measured RTT.
#pragma once

#include <cstdint>
#include <string>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "transport/config.hpp"

namespace metaroce::apps {

struct Rocev2Options {
  std::uint16_t pkey = 0xffff;  // the default partition
  // NIC-like defaults (perftest's and rdma_cm's): 67 ms, 7 retries, RNR
  // retries without limit.
  std::uint8_t qp_timeout = 14;
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry = 7;
  bool timers_given = false;  // one of the three was on the command line
  bool ibta_cm = false;       // --cm ibta
};

inline void add_rocev2_options(boost::program_options::options_description& d) {
  namespace po = boost::program_options;
  d.add_options()
      ("pkey", po::value<std::string>(), "--mode rocev2: the P_Key (partition) of every frame, both ends the "
                                         "same, 0x0001..0xffff with the low 15 bits not 0 (default 0xffff, the "
                                         "default partition)")
      ("qp-timeout", po::value<unsigned>(), "--mode rocev2: the IBTA local ACK timeout exponent, 1..31: "
                                            "retransmit after 4.096 us x 2^N, backing off (default 14: 67 ms; "
                                            "perftest's -u)")
      ("retry-count", po::value<unsigned>(), "--mode rocev2: timeouts in a row without progress before the "
                                             "connection fails, 0..7 (default 7)")
      ("rnr-retry", po::value<unsigned>(), "--mode rocev2: RNR NAKs of one message before it fails, 0..7 "
                                           "(default 7: no limit)")
      ("cm", po::value<std::string>(), "the connection manager's messages: metaroce (its own, the default) or "
                                       "ibta (--mode rocev2: the IBTA CM's REQ/REP/RTU/DREQ/DREP, as rdma_cm "
                                       "sends them; both ends the same)");
}

// Reads them; false with one line naming the fix. Given with a mode other
// than rocev2 (`rocev2` false): an error, as they would change nothing.
inline bool read_rocev2_options(const boost::program_options::variables_map& vm, bool rocev2, Rocev2Options& out,
                                std::string& message) {
  for (const char* key : {"pkey", "qp-timeout", "retry-count", "rnr-retry"}) {
    if (vm.count(key) && !rocev2) {
      message = fmt::format("--{} is for --mode rocev2: metaroce connections carry a P_Key of their own and "
                            "timers that follow the measured RTT",
                            key);
      return false;
    }
  }
  if (vm.count("cm")) {
    const std::string cm = vm["cm"].as<std::string>();
    if (cm != "metaroce" && cm != "ibta") {
      message = fmt::format("--cm '{}' is not a connection manager: give metaroce (the default) or ibta", cm);
      return false;
    }
    out.ibta_cm = cm == "ibta";
    if (out.ibta_cm && !rocev2) {
      message = "--cm ibta is for --mode rocev2: the IBTA CM sets up standard RC connections only";
      return false;
    }
    if (out.ibta_cm && vm.count("secure")) {
      message = "--cm ibta carries no security extension: drop --secure, or use --cm metaroce";
      return false;
    }
  }
  if (vm.count("pkey")) {
    const std::string text = vm["pkey"].as<std::string>();
    std::size_t used = 0;
    unsigned long v = 0;
    try {
      v = std::stoul(text, &used, 0);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != text.size() || v > 0xffff || (v & 0x7fff) == 0) {
      message = fmt::format("--pkey '{}' is not a usable P_Key: give 0x0001..0xffff with the low 15 bits not 0 "
                            "(0xffff, the default partition, unless the peer is in another)",
                            text);
      return false;
    }
    out.pkey = static_cast<std::uint16_t>(v);
  }
  const struct {
    const char* key;
    unsigned min, max;
    std::uint8_t* value;
  } timers[] = {{"qp-timeout", 1, 31, &out.qp_timeout},
                {"retry-count", 0, 7, &out.retry_count},
                {"rnr-retry", 0, 7, &out.rnr_retry}};
  for (const auto& t : timers) {
    if (!vm.count(t.key)) continue;
    const unsigned v = vm[t.key].as<unsigned>();
    if (v < t.min || v > t.max) {
      message = fmt::format("--{} {} is out of range: give {}..{}", t.key, v, t.min, t.max);
      return false;
    }
    *t.value = static_cast<std::uint8_t>(v);
    out.timers_given = true;
  }
  return true;
}

// The timers into metaroce::ConnectOptions or ListenOptions.
template <class Options>
void set_rocev2_timers(const Rocev2Options& r, Options& out) {
  out.local_ack_timeout = r.qp_timeout;
  out.retry_count = r.retry_count;
  out.rnr_retry = r.rnr_retry;
}

// One line of what a standard peer must match, for the start of a run:
// "P_Key 0xffff, local ACK timeout 14 (67.1 ms), retry count 7, RNR retry 7 (no limit)".
inline std::string rocev2_summary(const Rocev2Options& r) {
  return fmt::format("P_Key {:#06x}, local ACK timeout {} ({:.1f} ms, backing off), retry count {}, RNR retry {}{}",
                     r.pkey, r.qp_timeout, 4.096e-3 * double(std::uint64_t{1} << r.qp_timeout), r.retry_count,
                     r.rnr_retry, r.rnr_retry == 7 ? " (no limit)" : "");
}

// The MTU check of rocev2: an IB path MTU.
inline bool check_rocev2_mtu(bool rocev2, std::uint32_t mtu, std::string& message) {
  if (!rocev2 || transport::is_ib_mtu(mtu)) return true;
  message = fmt::format("--mtu {} is not an IB MTU: --mode rocev2 takes {}", mtu, transport::ib_mtu_names);
  return false;
}

}  // namespace metaroce::apps
