// Owners of objects in FIFO order, in a ring of power-of-two size: index i
// from the front costs an add and a mask (std::deque's operator[] and
// size() cost a walk through its block map, on the send path of every
// packet). Grows by doubling; release() gives the room back when empty.
// Deleter: how an owned object is disposed of (a pool's, for objects taken
// from one).
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace metaroce::transport {

template <class T, class Deleter = std::default_delete<T>>
class OwnerRing {
 public:
  using Owner = std::unique_ptr<T, Deleter>;
  explicit OwnerRing(Deleter deleter = Deleter()) : deleter_(deleter) {}

  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  // Precondition for these three: i < size() (not empty()).
  [[nodiscard]] Owner& operator[](std::size_t i) noexcept {
    return slots_[(head_ + i) & (slots_.size() - 1)];
  }
  [[nodiscard]] Owner& front() noexcept { return slots_[head_]; }
  void pop_front() noexcept {
    slots_[head_].reset();
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
  }

  void push_back(Owner owner) {
    if (count_ == slots_.size()) grow();
    slots_[(head_ + count_) & (slots_.size() - 1)] = std::move(owner);
    ++count_;
  }
  void clear() noexcept {
    for (auto& s : slots_) s.reset();
    head_ = 0;
    count_ = 0;
  }
  // Gives the slots' room back (only when empty).
  void release() noexcept {
    if (count_ == 0) {
      std::vector<Owner>().swap(slots_);
      head_ = 0;
    }
  }
  [[nodiscard]] std::size_t capacity() const noexcept { return slots_.size(); }

 private:
  void grow() {
    const std::size_t n = std::max<std::size_t>(16, 2 * slots_.size());
    std::vector<Owner> bigger;
    bigger.reserve(n);
    for (std::size_t i = 0; i < n; ++i) bigger.emplace_back(nullptr, deleter_);
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = std::move((*this)[i]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  Deleter deleter_;
  std::vector<Owner> slots_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

}  // namespace metaroce::transport
