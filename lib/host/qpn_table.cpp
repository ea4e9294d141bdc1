#include "host/qpn_table.hpp"

#include <utility>

namespace metaroce::host {

void QpnTable::insert(std::uint32_t qpn, transport::Connection* c) {
  if (2 * (size_ + 1) > slots_.size()) grow();
  for (std::size_t i = home(qpn);; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.connection == nullptr) {
      s = Slot{qpn, c};
      ++size_;
      return;
    }
    if (s.qpn == qpn) {
      s.connection = c;
      return;
    }
  }
}

bool QpnTable::erase(std::uint32_t qpn) noexcept {
  if (size_ == 0) return false;
  std::size_t i = home(qpn);
  for (;; i = (i + 1) & mask_) {
    if (slots_[i].connection == nullptr) return false;
    if (slots_[i].qpn == qpn) break;
  }
  // Backward shift: the entries after the hole that may move into it do,
  // so that every entry stays reachable from its home without tombstones.
  for (std::size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
    Slot& next = slots_[j];
    if (next.connection == nullptr) break;
    const std::size_t h = home(next.qpn);
    // next may fill the hole at i unless its home lies cyclically in (i, j].
    const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
    if (stays) continue;
    slots_[i] = next;
    i = j;
  }
  slots_[i] = Slot{};
  --size_;
  return true;
}

void QpnTable::clear() noexcept {
  for (Slot& s : slots_) s = Slot{};
  size_ = 0;
}

void QpnTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  const std::size_t capacity = old.empty() ? 16 : 2 * old.size();
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  shift_ = 64;
  for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
  size_ = 0;
  for (const Slot& s : old)
    if (s.connection != nullptr) insert(s.qpn, s.connection);
}

}  // namespace metaroce::host
