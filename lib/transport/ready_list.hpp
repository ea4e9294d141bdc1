// The connections of one host that have something to do: a FIFO, linked
// through the connections themselves (no allocation), each connection in it
// at most once. Of the `work` kind, a connection joins when it turns
// wants_poll() true (a post, a frame that needs an answer, a timer, a
// window that opened); the host takes them in order, so a turn costs
// O(work), not O(connections), and a connection that keeps having work goes
// to the back behind the others. Of the `completions` kind, it joins when
// its first completion is waiting and leaves when they are polled, so an
// application finds the connections with completions without visiting the
// others.
// Threading: the owner's thread only, like the connections.
#pragma once

#include <cstddef>
#include <cstdint>

namespace metaroce::transport {

class Connection;

class ReadyList {
 public:
  enum Kind : std::uint8_t { work = 0, completions = 1 };
  explicit ReadyList(Kind kind = work) : kind_(kind) {}
  ReadyList(const ReadyList&) = delete;
  ReadyList& operator=(const ReadyList&) = delete;

  // Appends `c` unless it is listed already (defined in connection.hpp).
  void push(Connection& c) noexcept;
  // Takes the oldest; nullptr when empty.
  [[nodiscard]] Connection* pop() noexcept;
  // Takes `c` out wherever it is (a connection being destroyed).
  void remove(Connection& c) noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

 private:
  Connection* head_ = nullptr;
  Connection* tail_ = nullptr;
  std::size_t size_ = 0;
  Kind kind_;
};

}  // namespace metaroce::transport
