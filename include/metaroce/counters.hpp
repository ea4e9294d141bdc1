// Counters as name/value pairs, grouped as the engine's telemetry groups
// them. Every drop, refusal and retransmission the library makes has a
// counter of its own; doc/ENGINE.md and doc/DESIGN.md say what each means.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace metaroce {

struct Counter {
  std::string name;
  std::uint64_t value = 0;
};

struct CounterGroup {
  std::string name;  // "connection", "host", "cm"
  std::vector<Counter> counters;

  // The value of counter `counter`, or 0 when there is none of that name.
  [[nodiscard]] std::uint64_t get(std::string_view counter) const noexcept {
    for (const Counter& c : counters)
      if (c.name == counter) return c.value;
    return 0;
  }
  // Adds `other`'s counters to these, by name (names not here yet are
  // appended in other's order).
  void add(const CounterGroup& other) {
    for (const Counter& o : other.counters) {
      bool found = false;
      for (Counter& c : counters)
        if (c.name == o.name) {
          c.value += o.value;
          found = true;
          break;
        }
      if (!found) counters.push_back(o);
    }
  }
};

}  // namespace metaroce
