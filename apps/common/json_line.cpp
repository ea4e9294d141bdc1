#include "common/json_line.hpp"

#include <cmath>

#include <fmt/format.h>

namespace metaroce::apps {

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

void JsonLine::comma() {
  if (!first_) text_.push_back(',');
  first_ = false;
}

void JsonLine::key(std::string_view k) {
  comma();
  text_.push_back('"');
  text_.append(k);
  text_ += "\":";
}

JsonLine& JsonLine::add(std::string_view k, std::uint64_t value) {
  key(k);
  fmt::format_to(std::back_inserter(text_), "{}", value);
  return *this;
}

JsonLine& JsonLine::add(std::string_view k, std::int64_t value) {
  key(k);
  fmt::format_to(std::back_inserter(text_), "{}", value);
  return *this;
}

JsonLine& JsonLine::add(std::string_view k, double value) {
  key(k);
  if (std::isfinite(value)) {
    fmt::format_to(std::back_inserter(text_), "{}", value);
  } else {
    text_ += "null";  // JSON has no NaN or infinity
  }
  return *this;
}

JsonLine& JsonLine::add(std::string_view k, bool value) {
  key(k);
  text_ += value ? "true" : "false";
  return *this;
}

JsonLine& JsonLine::add(std::string_view k, std::string_view value) {
  key(k);
  text_ += json_quote(value);
  return *this;
}

JsonLine& JsonLine::add_raw(std::string_view k, std::string_view json) {
  key(k);
  text_.append(json);
  return *this;
}

JsonLine& JsonLine::begin_object(std::string_view k) {
  key(k);
  text_.push_back('{');
  first_ = true;
  return *this;
}

JsonLine& JsonLine::end_object() {
  text_.push_back('}');
  first_ = false;
  return *this;
}

JsonLine& JsonLine::begin_array(std::string_view k) {
  key(k);
  text_.push_back('[');
  first_ = true;
  return *this;
}

JsonLine& JsonLine::begin_array_object() {
  comma();
  text_.push_back('{');
  first_ = true;
  return *this;
}

JsonLine& JsonLine::end_array() {
  text_.push_back(']');
  first_ = false;
  return *this;
}

std::string JsonLine::finish() && {
  text_.push_back('}');
  return std::move(text_);
}

}  // namespace metaroce::apps
