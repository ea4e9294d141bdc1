// Firing side of the timing wheel: advance(), the slot scan, teardown.
#include "timer/wheel.hpp"

namespace metaroce::timer {

Wheel::~Wheel() {
    for (Timer* head : lists_) {
        for (Timer* timer = head; timer != nullptr; timer = timer->link_next_) {
            timer->link_prev_ = nullptr;
        }
    }
}

Tick Wheel::find_earliest(std::uint32_t& levels, std::uint32_t* slots) const noexcept {
    constexpr std::uint32_t wheel_levels = (1u << kLevels) - 1;
    std::uint32_t remaining = occupied_levels_ & wheel_levels;
    Tick best = kNever;
    levels = 0;
    while (remaining != 0) {
        const unsigned level = static_cast<unsigned>(std::countr_zero(remaining));
        remaining &= remaining - 1;
        const unsigned shift = level * kLevelShift;
        // Filed slot numbers of this level lie in [first, first + 63]:
        // rotate the bitmap so bit 0 is `first`; the lowest set bit is then
        // the earliest occupied slot.
        const Tick first = (now_ >> shift) + 1;
        const unsigned first_index = static_cast<unsigned>(first & (kSlotsPerLevel - 1));
        const unsigned offset = static_cast<unsigned>(
            std::countr_zero(std::rotr(occupancy_[level], static_cast<int>(first_index))));
        const Tick level_expiry = (first + offset) << shift;
        if (level_expiry > best) continue;
        if (level_expiry < best) {
            best = level_expiry;
            levels = 0;
        }
        levels |= 1u << level;
        slots[level] = level * kSlotsPerLevel + ((first_index + offset) & (kSlotsPerLevel - 1));
    }
    return best;
}

void Wheel::detach(std::uint32_t slot, unsigned group) noexcept {
    for (unsigned lane = 0; lane < kLanes; ++lane) {
        Timer* const head = lists_[slot * kLanes + lane];
        lists_[slot * kLanes + lane] = nullptr;
        firing_[group * kLanes + lane] = head;
        if (head != nullptr) head->link_prev_ = &firing_[group * kLanes + lane];
    }
    const unsigned level = slot >> kSlotBits;
    occupancy_[level] &= ~(std::uint64_t{1} << (slot & (kSlotsPerLevel - 1)));
    if (occupancy_[level] == 0) occupied_levels_ &= ~(1u << level);
}

std::size_t Wheel::fire_group(unsigned group, Tick now) {
    Timer** const heads = &firing_[group * kLanes];
    std::size_t fired = 0;
    unsigned lane = 0;
    unsigned idle_lanes = 0;  // consecutive empty lanes seen
    while (idle_lanes < kLanes) {
        Timer*& head = heads[lane];
        lane = (lane + 1) & (kLanes - 1);
        Timer* const timer = head;
        if (timer == nullptr) {
            ++idle_lanes;
            continue;
        }
        idle_lanes = 0;
        Timer* const next = timer->link_next_;
        head = next;
        // Callbacks may cancel the rest of the lane, so it stays linked;
        // this store also starts the next timer's cache miss, which the
        // other lanes' callbacks then hide.
        if (next != nullptr) next->link_prev_ = &head;
        timer->link_prev_ = nullptr;
        if (timer->deadline_ > now_) [[unlikely]] {
            // Parked beyond the range. Re-file it now if this advance reaches
            // it; otherwise once, after the advance, against the final time.
            if (timer->deadline_ <= now) {
                place(*timer);
            } else {
                link(*timer, kParkedSlot);
            }
            continue;
        }
        --pending_;
        ++fired;
        timer->callback_(*timer, *this, now);
    }
    return fired;
}

void Wheel::refile_parked() {
    for (unsigned lane = 0; lane < kLanes; ++lane) {
        while (Timer* timer = lists_[kParkedSlot * kLanes + lane]) {
            unlink(*timer);
            place(*timer);
        }
    }
}

std::size_t Wheel::advance(Tick now) {
    assert(!advancing_ && "advance() called from a timer callback");
    advancing_ = true;
    if (now < now_) now = now_;
    horizon_ = now;
    // Due-list timers were due before this call: they fire first; those that
    // callbacks put on the due list wait for the next advance.
    detach(kDueSlot, kLevels);
    std::size_t fired = fire_group(kLevels, now);

    if (now >= next_expiry_) {
        std::uint32_t slots[kLevels];
        for (;;) {
            std::uint32_t levels = 0;
            const Tick expiry = find_earliest(levels, slots);
            if (expiry > now) {
                next_expiry_ = expiry;
                break;
            }
            // Detach every slot with this expiry before moving now_ to it:
            // a slot left behind at now_ would read as 64 slots ahead, and
            // a timer filed by a callback could alias it.
            for (std::uint32_t rest = levels; rest != 0; rest &= rest - 1) {
                const unsigned level = static_cast<unsigned>(std::countr_zero(rest));
                detach(slots[level], level);
            }
            now_ = expiry;
            for (std::uint32_t rest = levels; rest != 0; rest &= rest - 1) {
                fired += fire_group(static_cast<unsigned>(std::countr_zero(rest)), now);
            }
        }
    }
    now_ = now;
    refile_parked();
    advancing_ = false;
    return fired;
}

Tick Wheel::next_deadline() const noexcept {
    if (!slot_empty(kDueSlot)) return now_;
    std::uint32_t levels = 0;
    std::uint32_t slots[kLevels];
    return find_earliest(levels, slots);
}

}  // namespace metaroce::timer
