// The port options metaroce-gen and metaroce-sink share (Boost.Program_options):
// --preset FILE [--iface NAME] or --port NAME (a device created by the EAL
// arguments after `--`), --local-ip, --idle-sleep-us.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "common/command_line.hpp"
#include "common/receive_capacity.hpp"
#include "common/secure_options.hpp"
#include <metaroce/endpoint.hpp>

#include "secure/keys.hpp"
#include "stack/address.hpp"
#include "wire/ip_address.hpp"

namespace metaroce::apps {

void add_port_options(boost::program_options::options_description& d);

// Fills `out` from the parsed options and the EAL arguments; false with one
// line that names the fix when no port or no address was given.
bool read_port_options(const boost::program_options::variables_map& vm, std::vector<std::string> eal_args,
                       metaroce::EndpointConfig& out, std::string& message);

// --lcores into `lcores` when given (1..max_port_lcores); false with one
// line naming the fix.
inline constexpr std::uint16_t max_port_lcores = 16;
bool read_lcores(const boost::program_options::variables_map& vm, std::uint16_t& lcores, std::string& message);

// `text` (the value of `option`) is an IP address of local_ip's family;
// false with one line naming the fix otherwise.
bool check_address_family(const char* option, const std::string& text, const std::string& local_ip,
                          std::string& message);

// Reads option `key` into `out` when it was given; false with "--KEY V is
// out of range: give MIN..MAX" when it is outside [min, max].
template <class T>
bool read_in_range(const boost::program_options::variables_map& vm, const char* key, T min, T max, T& out,
                   std::string& message) {
  const auto given = vm.find(key);
  if (given == vm.end()) return true;
  const T value = given->second.as<T>();
  if (value < min || max < value) {
    message = fmt::format("--{} {} is out of range: give {}..{}", key, value, min, max);
    return false;
  }
  out = value;
  return true;
}

}  // namespace metaroce::apps
