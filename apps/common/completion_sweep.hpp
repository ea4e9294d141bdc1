// Which of an app's connections a turn polls for completions, so that a turn
// costs O(1) in connections rather than one poll_completions per connection:
// with thousands of connections, polling every one each turn costs more than
// the turn's messages.
//
// A turn polls a window of connections from a front (the connection
// expected to complete next: the sender's oldest message in flight, or where
// completions were found last turn), then `rotation` more from a cursor that
// walks all of them, so every connection is polled at least once every
// connections / rotation turns whatever the front does (a connection that
// completes out of turn, after a loss, waits at most that long). Completions
// come in waves that follow the hosts' order of connections, so the front
// finds nearly all of them. Each poll of a connection with nothing is a
// cache miss or two, so the window adapts: it doubles (up to max_window)
// while its last connection still had completions, and halves (down to
// min_window) while fewer than a quarter of it had any. With
// poll_all_below connections or fewer, every turn polls them all.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace metaroce::apps {

class CompletionSweep {
 public:
  static constexpr std::uint32_t poll_all_below = 16;
  static constexpr std::uint32_t min_window = 4;
  static constexpr std::uint32_t max_window = 64;
  static constexpr std::uint32_t rotation = 4;
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
    std::uint32_t hits = 0;
    bool last_hit = false;
    const auto visit = [&](std::uint32_t k) {
      const std::size_t n = poll(k);
      taken += n;
      last_hit = n != 0;
      if (n == 0) return;
      ++hits;
      if (first == none) first = k;
    };
    if (connections <= poll_all_below) {
      for (std::uint32_t k = 0; k < connections; ++k) visit(k);
      return first;
    }
    const std::uint32_t window = std::min(window_, connections);
    std::uint32_t k = front % connections;
    for (std::uint32_t i = 0; i < window; ++i) {
      visit(k);
      if (++k == connections) k = 0;
    }
    if (last_hit)
      window_ = std::min(2 * window_, max_window);
    else if (4 * hits < window)
      window_ = std::max(window_ / 2, min_window);
    if (cursor_ >= connections) cursor_ = 0;
    for (std::uint32_t i = 0; i < rotation; ++i) {
      visit(cursor_);
      if (++cursor_ == connections) cursor_ = 0;
    }
    return first;
  }

 private:
  std::uint32_t window_ = 16;
  std::uint32_t cursor_ = 0;
};

}  // namespace metaroce::apps
