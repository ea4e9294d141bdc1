// Builds one JSON object on one line, for tools that print a line per record
// and for the summary line benchmarks end with. Keys are trusted literals;
// string values are escaped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace metaroce::apps {

class JsonLine {
 public:
  // Room for a decoder line up front: growing by doubling from empty cost
  // six allocations and copies per line.
  JsonLine() {
    text_.reserve(1024);
    text_.push_back('{');
  }

  JsonLine& add(std::string_view key, std::uint64_t value);
  JsonLine& add(std::string_view key, std::int64_t value);
  JsonLine& add(std::string_view key, unsigned value) { return add(key, std::uint64_t{value}); }
  JsonLine& add(std::string_view key, int value) { return add(key, std::int64_t{value}); }
  JsonLine& add(std::string_view key, double value);
  JsonLine& add(std::string_view key, bool value);
  JsonLine& add(std::string_view key, std::string_view value);
  JsonLine& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  // Inserts already-formatted JSON (an object or array) as the value.
  JsonLine& add_raw(std::string_view key, std::string_view json);

  JsonLine& begin_object(std::string_view key);
  JsonLine& end_object();
  JsonLine& begin_array(std::string_view key);
  JsonLine& begin_array_object();  // an object as the next array element
  JsonLine& end_array();

  // The finished object; call once.
  std::string finish() &&;

 private:
  void key(std::string_view k);
  void comma();
  std::string text_;
  bool first_ = true;
};

// JSON string literal of `s`, quotes included.
std::string json_quote(std::string_view s);
// The same, appended to `out`.
void append_json_quoted(std::string& out, std::string_view s);

}  // namespace metaroce::apps
