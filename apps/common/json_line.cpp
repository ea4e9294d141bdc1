#include "common/json_line.hpp"

#include <charconv>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace metaroce::apps {

void append_json_quoted(std::string& out, std::string_view s) {
  out.push_back('"');
  std::size_t plain = 0;  // the start of the run of bytes that need no escape
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default: fmt::format_to(std::back_inserter(out), "\\u{:04x}", unsigned{c});
    }
  }
  out.append(s.data() + plain, s.size() - plain);
  out.push_back('"');
}

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_json_quoted(out, s);
  return out;
}

namespace {

template <class Integer>
void append_integer(std::string& out, Integer value) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, static_cast<std::size_t>(end - digits));
}

}  // namespace

void JsonLine::comma() {
  if (!first_) text_.push_back(',');
  first_ = false;
}

void JsonLine::key(std::string_view k) {
  text_.append(first_ ? "\"" : ",\"", first_ ? 1 : 2);
  first_ = false;
  text_.append(k);
  text_.append("\":", 2);
}

JsonLine& JsonLine::add(std::string_view k, std::uint64_t value) {
  key(k);
  append_integer(text_, value);
  return *this;
}

JsonLine& JsonLine::add(std::string_view k, std::int64_t value) {
  key(k);
  append_integer(text_, value);
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
  append_json_quoted(text_, value);
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
