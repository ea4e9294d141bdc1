// Byte counts as perftest users type them: 64, 64k, 1M, 1G (binary
// multiples: k = 1024).
#pragma once

#include <charconv>
#include <cstdint>
#include <string_view>

namespace metaroce::apps {

// The forms parse_byte_size accepts, for error messages.
inline constexpr const char* byte_size_forms = "bytes as 65536, 64k, 1M or 1G (k = 1024)";

// `text` is digits with an optional k/K, m/M or g/G suffix; false on
// anything else or on overflow.
inline bool parse_byte_size(std::string_view text, std::uint64_t& out) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return false;
  const std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  unsigned shift = 0;
  if (suffix.empty()) shift = 0;
  else if (suffix == "k" || suffix == "K") shift = 10;
  else if (suffix == "m" || suffix == "M") shift = 20;
  else if (suffix == "g" || suffix == "G") shift = 30;
  else return false;
  if (shift != 0 && value > (~std::uint64_t{0} >> shift)) return false;
  out = value << shift;
  return true;
}

}  // namespace metaroce::apps
