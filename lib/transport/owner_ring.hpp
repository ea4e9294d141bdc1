// Owners of objects in FIFO order, in a ring of power-of-two size: index i
// from the front costs an add and a mask (std::deque's operator[] and
// size() cost a walk through its block map, on the send path of every
// packet). Grows by doubling; never shrinks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace metaroce::transport {

template <class T>
class OwnerRing {
 public:
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  // Precondition for these three: i < size() (not empty()).
  [[nodiscard]] std::unique_ptr<T>& operator[](std::size_t i) noexcept {
    return slots_[(head_ + i) & (slots_.size() - 1)];
  }
  [[nodiscard]] std::unique_ptr<T>& front() noexcept { return slots_[head_]; }
  void pop_front() noexcept {
    slots_[head_].reset();
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
  }

  void push_back(std::unique_ptr<T> owner) {
    if (count_ == slots_.size()) grow();
    slots_[(head_ + count_) & (slots_.size() - 1)] = std::move(owner);
    ++count_;
  }
  void clear() noexcept {
    for (auto& s : slots_) s.reset();
    head_ = 0;
    count_ = 0;
  }

 private:
  void grow() {
    std::vector<std::unique_ptr<T>> bigger(std::max<std::size_t>(16, 2 * slots_.size()));
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = std::move((*this)[i]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<std::unique_ptr<T>> slots_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

}  // namespace metaroce::transport
