#include "fabric/spec.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

namespace metaroce::fabric {

namespace {

struct Unit {
  std::string_view suffix;
  double scale;
};

// Longest suffixes first so that "ms" is not read as "m" + "s".
constexpr Unit time_units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
constexpr Unit rate_units[] = {{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}};
constexpr Unit size_units[] = {{"kib", 1024}, {"mib", 1024.0 * 1024}, {"kb", 1e3}, {"mb", 1e6},
                               {"k", 1e3}, {"m", 1e6}, {"b", 1}, {"", 1}};

std::optional<double> parse_number(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value) || value < 0)
    return std::nullopt;
  return value;
}

// "<number><unit>" with one of `units`; the result rounded to an integer.
template <std::size_t N>
std::optional<std::uint64_t> parse_with_unit(std::string_view token, const Unit (&units)[N]) {
  for (const Unit& unit : units) {
    if (token.size() <= unit.suffix.size() || !token.ends_with(unit.suffix)) continue;
    const std::string_view digits = token.substr(0, token.size() - unit.suffix.size());
    if (digits.empty() || !(std::isdigit(static_cast<unsigned char>(digits.back())) || digits.back() == '.'))
      continue;
    const std::optional<double> value = parse_number(digits);
    if (!value) return std::nullopt;
    const double scaled = std::round(*value * unit.scale);
    if (scaled >= 1.8e19) return std::nullopt;
    return static_cast<std::uint64_t>(scaled);
  }
  return std::nullopt;
}

std::optional<double> parse_percent(std::string_view token) {
  if (token.size() < 2 || token.back() != '%') return std::nullopt;
  const std::optional<double> value = parse_number(token.substr(0, token.size() - 1));
  if (!value || *value > 100) return std::nullopt;
  return *value / 100.0;
}

std::optional<std::uint64_t> parse_integer(std::string_view token) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc{} || end != token.data() + token.size()) return std::nullopt;
  return value;
}

class SpecParser {
 public:
  explicit SpecParser(std::string_view spec) {
    std::size_t i = 0;
    while (i < spec.size()) {
      while (i < spec.size() && std::isspace(static_cast<unsigned char>(spec[i]))) ++i;
      const std::size_t start = i;
      while (i < spec.size() && !std::isspace(static_cast<unsigned char>(spec[i]))) ++i;
      if (i > start) tokens_.push_back(spec.substr(start, i - start));
    }
  }

  FabricSpecResult run() {
    FabricSpecResult result;
    try {
      while (at_ < tokens_.size()) item(result.config);
    } catch (const std::invalid_argument& e) {
      result.error = e.what();
      return result;
    }
    if (std::string problem = validate(result.config); !problem.empty())
      result.error = "fabric spec: " + problem;
    return result;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    std::string message = "fabric spec: ";
    if (at_ < tokens_.size()) {
      message += "bad token '" + std::string(tokens_[at_]) + "' (token " + std::to_string(at_ + 1) + ")";
    } else {
      message += "spec ends too early";
    }
    if (!keyword_.empty()) message += " after '" + std::string(keyword_) + "'";
    message += ": expected ";
    message += what;
    throw std::invalid_argument(message);
  }

  bool peek_is(std::string_view word) const { return at_ < tokens_.size() && tokens_[at_] == word; }
  bool more() const { return at_ < tokens_.size(); }

  std::string_view current(std::string_view what) const {
    if (at_ >= tokens_.size()) fail(what);
    return tokens_[at_];
  }

  double percent() {
    constexpr std::string_view what = "a percentage between 0% and 100%, such as 1% or 0.05%";
    const std::optional<double> value = parse_percent(current(what));
    if (!value) fail(what);
    ++at_;
    return *value;
  }
  std::optional<double> optional_percent() {
    if (!more()) return std::nullopt;
    std::optional<double> value = parse_percent(tokens_[at_]);
    if (value) ++at_;
    return value;
  }
  std::uint64_t time() {
    constexpr std::string_view what = "a time with a unit: ns, us, ms or s (such as 10us or 1.5ms)";
    const std::optional<std::uint64_t> value = parse_with_unit(current(what), time_units);
    if (!value) fail(what);
    ++at_;
    return *value;
  }
  std::uint64_t rate() {
    constexpr std::string_view what = "a rate with a unit: bit, kbit, mbit, gbit or tbit (such as 25gbit)";
    const std::optional<std::uint64_t> value = parse_with_unit(current(what), rate_units);
    if (!value) fail(what);
    ++at_;
    return *value;
  }
  std::uint64_t bytes() {
    constexpr std::string_view what = "a size in bytes, optionally with b, k/kb, kib, m/mb or mib (such as 1000000 or 64kib)";
    const std::optional<std::uint64_t> value = parse_with_unit(current(what), size_units);
    if (!value) fail(what);
    ++at_;
    return *value;
  }
  std::uint64_t integer(std::string_view what) {
    const std::optional<std::uint64_t> value = parse_integer(current(what));
    if (!value) fail(what);
    ++at_;
    return *value;
  }

  void gemodel(FabricConfig& c) {
    c.gemodel = GilbertElliott{};
    c.gemodel.p = percent();
    c.gemodel.r = 1.0 - c.gemodel.p;  // tc-netem: r defaults to 1 - p
    if (auto r = optional_percent()) {
      c.gemodel.r = *r;
      if (auto bad = optional_percent()) {
        c.gemodel.loss_in_bad = *bad;
        if (auto good = optional_percent()) c.gemodel.loss_in_good = *good;
      }
    }
  }

  void item(FabricConfig& c) {
    const std::string_view word = tokens_[at_];
    ++at_;
    keyword_ = word;
    if (word == "loss") {
      if (peek_is("random")) ++at_;
      if (peek_is("gemodel")) {
        ++at_;
        keyword_ = "loss gemodel";
        gemodel(c);
      } else {
        c.loss = percent();
      }
    } else if (word == "gemodel") {
      gemodel(c);
    } else if (word == "delay") {
      c.delay_ns = time();
      c.path_delays_ns.clear();
      if (more() && parse_with_unit(tokens_[at_], time_units)) c.jitter_ns = time();  // netem: delay D J
    } else if (word == "jitter") {
      c.jitter_ns = time();
    } else if (word == "spread") {
      c.spread_ns = time();
      c.path_delays_ns.clear();
    } else if (word == "delays") {
      c.path_delays_ns.clear();
      const std::string_view list = current("a comma-separated list of times, one per path (such as 10us,12us,15us)");
      std::size_t start = 0;
      for (;;) {
        const std::size_t comma = list.find(',', start);
        const std::string_view one = list.substr(start, comma == std::string_view::npos ? comma : comma - start);
        const std::optional<std::uint64_t> value = parse_with_unit(one, time_units);
        if (!value) fail("a comma-separated list of times with units, one per path (such as 10us,12us,15us)");
        c.path_delays_ns.push_back(*value);
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
      ++at_;
    } else if (word == "paths") {
      const std::uint64_t n = integer("a path count between 1 and 256");
      if (n < 1 || n > max_fabric_paths) {
        --at_;
        fail("a path count between 1 and 256");
      }
      c.paths = static_cast<std::uint32_t>(n);
    } else if (word == "rate") {
      c.rate_bps = rate();
    } else if (word == "overhead") {
      const std::uint64_t n = bytes();
      if (n > 1'000'000) {
        --at_;
        fail("a per-frame overhead of at most 1000000 bytes (24 models preamble, IFG and FCS)");
      }
      c.overhead_bytes = static_cast<std::uint32_t>(n);
    } else if (word == "limit") {
      c.limit_bytes = bytes();
    } else if (word == "queue") {
      constexpr std::string_view what = "'shared' or 'per-path'";
      const std::string_view mode = current(what);
      if (mode == "shared") {
        c.queue_mode = QueueMode::shared;
      } else if (mode == "per-path") {
        c.queue_mode = QueueMode::per_path;
      } else {
        fail(what);
      }
      ++at_;
    } else if (word == "ecn") {
      c.ecn = EcnMarking{true, 0, 0, 1.0};
      c.ecn.min_bytes = c.ecn.max_bytes = bytes();
    } else if (word == "ecn-red") {
      c.ecn = EcnMarking{true, 0, 0, 1.0};
      c.ecn.min_bytes = bytes();
      c.ecn.max_bytes = bytes();
      c.ecn.max_probability = percent();
      if (c.ecn.max_bytes <= c.ecn.min_bytes) {
        at_ -= 2;
        fail("a max above min for RED-like marking (use 'ecn K' for a step)");
      }
    } else if (word == "duplicate") {
      c.duplicate = percent();
    } else if (word == "corrupt") {
      c.corrupt = percent();
    } else if (word == "reorder") {
      c.reorder = percent();
      if (peek_is("gap")) {
        ++at_;
        c.reorder_gap_ns = time();
      }
    } else if (word == "blackhole") {
      Blackhole hole;
      // blackhole K at T for D, also spelled blackhole path K ...; without
      // K (blackhole at T for D) every path.
      if (peek_is("at")) {
        hole.path = Blackhole::every_path;
      } else {
        if (peek_is("path")) ++at_;
        hole.path = static_cast<std::uint32_t>(integer("a path index (0-based), then 'at TIME [for TIME]'"));
      }
      if (!peek_is("at")) fail("'at TIME' (such as: blackhole 3 at 5ms for 2ms)");
      ++at_;
      hole.start_ns = time();
      if (peek_is("for")) {
        ++at_;
        hole.duration_ns = time();
      }
      c.blackholes.push_back(hole);
    } else if (word == "seed") {
      c.seed = integer("an unsigned integer seed");
    } else {
      --at_;
      keyword_ = {};
      fail("a keyword: loss, gemodel, delay, jitter, spread, delays, paths, rate, overhead, limit, "
           "queue, ecn, ecn-red, duplicate, corrupt, reorder, blackhole or seed");
    }
  }

  std::vector<std::string_view> tokens_;
  std::size_t at_ = 0;
  std::string_view keyword_;  // the item being parsed, for error messages
};

std::string format_percent(double p) {
  // The shortest text that parses back to exactly p.
  char buffer[64];
  for (int precision = 1; precision <= 17; ++precision) {
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, p * 100.0,
                                         std::chars_format::fixed, precision);
    if (ec != std::errc{}) continue;
    std::string text(buffer, end);
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
    if (parse_percent(text + "%") == p) return text + "%";
  }
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, p * 100.0);
  (void)ec;
  return std::string(buffer, end) + "%";
}

template <std::size_t N>
std::string format_with_unit(std::uint64_t value, const Unit (&units)[N]) {
  // The largest unit that divides the value exactly.
  for (const Unit& unit : units) {
    const auto scale = static_cast<std::uint64_t>(unit.scale);
    if (unit.suffix.empty()) continue;
    if (value != 0 && value % scale == 0) return std::to_string(value / scale) + std::string(unit.suffix);
  }
  return std::to_string(value) + std::string(units[N - 1].suffix);
}

std::string format_time(std::uint64_t ns) {
  constexpr Unit largest_first[] = {{"s", 1e9}, {"ms", 1e6}, {"us", 1e3}, {"ns", 1}};
  return format_with_unit(ns, largest_first);
}

}  // namespace

std::optional<std::uint64_t> parse_rate(std::string_view text) { return parse_with_unit(text, rate_units); }

FabricSpecResult parse_fabric_spec(std::string_view spec) { return SpecParser(spec).run(); }

FabricConfig parse_fabric_spec_or_throw(std::string_view spec) {
  FabricSpecResult result = parse_fabric_spec(spec);
  if (!result.ok()) throw std::invalid_argument(result.error);
  return std::move(result.config);
}

std::string to_spec(const FabricConfig& c) {
  const FabricConfig defaults;
  std::string out;
  auto add = [&](const std::string& item) {
    if (!out.empty()) out += ' ';
    out += item;
  };
  add("paths " + std::to_string(c.paths));
  if (!c.path_delays_ns.empty()) {
    std::string list;
    for (std::uint64_t d : c.path_delays_ns) {
      if (!list.empty()) list += ',';
      list += format_time(d);
    }
    // delay/spread are kept too: they matter again if the list is cleared.
    add("delay " + format_time(c.delay_ns) + " spread " + format_time(c.spread_ns) + " delays " + list);
  } else {
    add("delay " + format_time(c.delay_ns));
    if (c.spread_ns != 0) add("spread " + format_time(c.spread_ns));
  }
  if (c.jitter_ns != 0) add("jitter " + format_time(c.jitter_ns));
  if (c.rate_bps != 0) {
    constexpr Unit largest_first[] = {{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}};
    add("rate " + format_with_unit(c.rate_bps, largest_first));
  }
  if (c.overhead_bytes != 0) add("overhead " + std::to_string(c.overhead_bytes));
  if (c.queue_mode == QueueMode::per_path) add("queue per-path");
  if (c.limit_bytes != 0) add("limit " + std::to_string(c.limit_bytes));
  if (c.ecn.enabled) {
    if (c.ecn.min_bytes == c.ecn.max_bytes && c.ecn.max_probability == 1.0) {
      add("ecn " + std::to_string(c.ecn.min_bytes));
    } else {
      add("ecn-red " + std::to_string(c.ecn.min_bytes) + " " + std::to_string(c.ecn.max_bytes) + " " +
          format_percent(c.ecn.max_probability));
    }
  }
  if (c.loss != 0) add("loss " + format_percent(c.loss));
  if (!(c.gemodel == defaults.gemodel)) {
    add("gemodel " + format_percent(c.gemodel.p) + " " + format_percent(c.gemodel.r) + " " +
        format_percent(c.gemodel.loss_in_bad) + " " + format_percent(c.gemodel.loss_in_good));
  }
  if (c.duplicate != 0) add("duplicate " + format_percent(c.duplicate));
  if (c.corrupt != 0) add("corrupt " + format_percent(c.corrupt));
  if (c.reorder != 0 || c.reorder_gap_ns != defaults.reorder_gap_ns)
    add("reorder " + format_percent(c.reorder) + " gap " + format_time(c.reorder_gap_ns));
  for (const Blackhole& b : c.blackholes) {
    std::string item = (b.path == Blackhole::every_path ? std::string("blackhole") : "blackhole " + std::to_string(b.path)) +
                       " at " + format_time(b.start_ns);
    if (b.duration_ns != forever) item += " for " + format_time(b.duration_ns);
    add(item);
  }
  if (c.seed != defaults.seed) add("seed " + std::to_string(c.seed));
  return out;
}

}  // namespace metaroce::fabric
