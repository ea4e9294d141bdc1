// Which of an app's connections a turn polls for completions, so that a turn
// costs O(1) in connections rather than one poll_completions per connection:
// with thousands of connections, polling every one each turn costs more than
// the turn's messages.
//
// A turn polls `window` connections from a front (the connection expected to
// complete next: the sender's oldest message in flight, or where completions
// were found last turn), then `rotation` more from a cursor that walks all of
// them, so every connection is polled at least once every
// connections / rotation turns whatever the front does (a connection that
// completes out of turn, after a loss, waits at most that long). Completions
// come in waves that follow the hosts' order of connections, so the front
// finds nearly all of them. With window + rotation connections or fewer,
// every turn polls them all.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace metaroce::apps {

class CompletionSweep {
 public:
  static constexpr std::uint32_t window = 32;
  static constexpr std::uint32_t rotation = 32;
  static constexpr std::uint32_t none = ~std::uint32_t{0};

  // `poll(k)` polls connection k (0 <= k < connections) and returns the
  // completions it took. Returns the first connection that had any (the
  // window's before the rotation's), or none; the sum of what poll returned
  // goes to `taken`.
  template <class Poll>
  std::uint32_t turn(std::uint32_t connections, std::uint32_t front, Poll&& poll, std::size_t& taken) {
    taken = 0;
    if (connections == 0) return none;
    std::uint32_t first = none;
    const auto visit = [&](std::uint32_t k) {
      const std::size_t n = poll(k);
      taken += n;
      if (n != 0 && first == none) first = k;
    };
    if (connections <= window + rotation) {
      for (std::uint32_t k = 0; k < connections; ++k) visit(k);
      return first;
    }
    std::uint32_t k = front % connections;
    for (std::uint32_t i = 0; i < window; ++i) {
      visit(k);
      if (++k == connections) k = 0;
    }
    if (cursor_ >= connections) cursor_ = 0;
    for (std::uint32_t i = 0; i < rotation; ++i) {
      visit(cursor_);
      if (++cursor_ == connections) cursor_ = 0;
    }
    return first;
  }

 private:
  std::uint32_t cursor_ = 0;
};

}  // namespace metaroce::apps
