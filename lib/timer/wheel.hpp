// Hierarchical timing wheel: intrusive timers, one wheel per lcore.
//
// Threading contract: a Wheel and every Timer armed on it belong to one
// thread (the lcore that polls it). No member takes a lock or uses an atomic;
// calling any member from another thread is a data race. Hand work to the
// owning lcore through a ring instead.
//
// Time: `Tick` is an unsigned 64-bit count chosen by the caller (nanoseconds,
// TSC cycles, TSC >> k, ...). The wheel never reads a clock: the owner passes
// the current time to advance(now), so tests drive it in virtual time. Ticks
// and deadlines must stay below 2^63 (292 years of nanoseconds).
//
// Layout: kLevels levels of 64 slots. Level L has slots 8^L ticks wide; a timer is put in the finest level whose 64 slots reach its
// deadline, and its deadline is rounded UP to that level's slot boundary (its
// "expiry"). Timers never move between levels on the way down (no cascading),
// so arm and cancel touch one slot (each slot is kLanes short lists, see
// below; a per-level bitmap says which slots hold timers). Granularity table (g = slot width,
// range = how far ahead of now a level reaches; with 1 tick = 1 ns):
//
//   level  slot width g        range (~64 g)       g at 1 ns    range at 1 ns
//     0    1                   64                     1 ns          64 ns
//     1    8                   512                    8 ns         512 ns
//     2    64                  4 Ki                  64 ns         4.1 us
//     3    512                 32 Ki                512 ns          33 us
//     4    4 Ki                256 Ki               4.1 us         262 us
//     5    32 Ki               2 Mi                  33 us         2.1 ms
//     6    256 Ki              16 Mi                262 us          17 ms
//     7    2 Mi                128 Mi               2.1 ms         134 ms
//     8    16 Mi               1 Gi                  17 ms         1.07 s
//     9    128 Mi              8 Gi                 134 ms         8.6 s
//
// A level takes a deadline when its rounded-up slot is at most 64 slots past
// now's slot: always for delays up to 63 g, never beyond 64 g.
//
// Total range: 2^33 ticks. A deadline beyond it is parked in the top level's
// farthest slot (expiry < deadline); when that slot comes due the timer is
// put back at the level that now fits. It never fires early; it fires within
// the granularity of the level that finally holds it.
//
// Accuracy contract (exact):
//  * never early: a timer fires only in an advance(now) with now >= deadline;
//  * bounded lateness: a timer held at level L fires in the first advance(now)
//    with now >= expiry = deadline rounded up to a multiple of g = 8^L, i.e.
//    no later than deadline + g - 1. The level is the finest one that fits,
//    so g < 8 * (deadline - now_at_arm) / 62 whenever L > 0 and the
//    deadline is within range: lateness is below 13% of the delay asked for;
//  * order: timers that fire in the same advance fire in expiry order (so a
//    timer A fires before B only if deadline(A) < deadline(B) + g(B)); timers
//    sharing a slot fire in unspecified order, and due-list timers (below)
//    fire first, in unspecified order;
//  * a timer armed with deadline <= the wheel's horizon (the `now` of the
//    advance that is running, or of the last one) is already due: it goes to
//    a due list and fires at the start of the next advance(), never inside
//    the running one (so a callback that re-arms itself for "now" cannot loop).
//
// Callbacks run inside advance() and may arm, re-arm or cancel any timer,
// including themselves and timers due in the same advance: a timer cancelled
// or re-armed before its callback ran does not fire in that advance (it
// fires at its new deadline, by the rules above). They must not call
// advance() and must not destroy an armed timer.
#pragma once

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>

namespace metaroce::timer {

using Tick = std::uint64_t;

inline constexpr Tick kNever = ~Tick{0};

class Wheel;

// Embed one in the object that owns the timeout (a path's RTO, a probe...).
// Arming links it into the wheel: no allocation ever. It must be cancelled
// (or have fired) before it is destroyed; it cannot be copied or moved while
// the wheel holds pointers to it.
class Timer {
  public:
    using Callback = void (*)(Timer& timer, Wheel& wheel, Tick now);

    explicit Timer(Callback callback, void* owner = nullptr) noexcept
        : callback_(callback), owner_(owner) {}
    ~Timer() { assert(!armed() && "cancel a timer before destroying it"); }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

    bool armed() const noexcept { return link_prev_ != nullptr; }
    // The deadline asked for by the last arm (valid in the callback too).
    Tick deadline() const noexcept { return deadline_; }
    void* owner() const noexcept { return owner_; }
    void set_callback(Callback callback, void* owner) noexcept {
        callback_ = callback;
        owner_ = owner;
    }
    // Slot width of the level that holds the timer (or held it when it
    // fired); 0 while it is on the due list. Tests check the bound with it.
    Tick granularity() const noexcept;

  private:
    friend class Wheel;

    // Hlist links: link_prev_ points at whatever points at us (a list head
    // or the previous timer's link_next_), so unlinking needs no slot lookup.
    Timer* link_next_ = nullptr;
    Timer** link_prev_ = nullptr;
    Tick deadline_ = 0;
    Callback callback_;
    void* owner_;
    std::uint32_t list_ = 0;  // slot * Wheel::kLanes + lane
};
// Small: with a 64-byte aligned owner, a timer and 16 bytes of it share a line.
static_assert(sizeof(Timer) == 48, "Timer layout changed: check it stays small");

class Wheel {
  public:
    static constexpr unsigned kSlotBits = 6;
    static constexpr unsigned kSlotsPerLevel = 1u << kSlotBits;
    static constexpr unsigned kLevelShift = 3;  // each level 8x coarser
    static constexpr unsigned kLevels = 10;
    // Each slot is kLanes lists filled in turn. Firing walks them
    // interleaved, so kLanes cache misses are in flight instead of one: a
    // single list is a chain of dependent loads, and firing a large slot
    // would run at memory latency per timer.
    static constexpr unsigned kLanes = 4;
    // Slot width of level L.
    static constexpr Tick level_granularity(unsigned level) noexcept {
        return Tick{1} << (kLevelShift * level);
    }
    // How far past now the top level reaches; farther deadlines are parked.
    static constexpr Tick kRange = Tick{kSlotsPerLevel} << (kLevelShift * (kLevels - 1));

    explicit Wheel(Tick now = 0) noexcept : now_(now), horizon_(now) {}
    // Unlinks every timer still armed (they read as not armed afterwards).
    ~Wheel();
    Wheel(const Wheel&) = delete;
    Wheel& operator=(const Wheel&) = delete;

    // Precondition: !timer.armed(). O(1).
    void arm(Timer& timer, Tick deadline) noexcept {
        assert(!timer.armed());
        assert(deadline < (Tick{1} << 63));
        timer.deadline_ = deadline;
        ++pending_;
        if (deadline <= horizon_) {
            link(timer, kDueSlot);
            return;
        }
        place(timer);
    }

    // Moves an armed timer to a new deadline, or arms an idle one. O(1).
    void rearm(Timer& timer, Tick deadline) noexcept {
        cancel(timer);
        arm(timer, deadline);
    }

    // Returns whether the timer was armed. O(1); a no-op on an idle timer.
    bool cancel(Timer& timer) noexcept {
        if (!timer.armed()) return false;
        unlink(timer);
        --pending_;
        return true;
    }

    // Moves time to `now` (earlier values are taken as the current time) and
    // fires every due timer; returns how many fired. Cost is O(slots that
    // hold due timers + timers fired), however far time jumps: empty slots
    // are skipped through the occupancy bitmaps. Not from a callback.
    std::size_t advance(Tick now);

    // Earliest time at which advance() has work: <= every pending timer's
    // expiry, the current time if timers are due, kNever if none is pending.
    // A parked (beyond-range) timer reports its parking slot, earlier than
    // its deadline: advance() then re-files it without firing it.
    Tick next_deadline() const noexcept;

    std::size_t pending() const noexcept { return pending_; }
    // Wheel time: every timer whose expiry is <= now() has fired. Inside a
    // callback it is the expiry of the slot being fired (<= the advance's now).
    Tick now() const noexcept { return now_; }

  private:
    friend class Timer;

    static constexpr std::uint32_t kWheelSlots = kLevels * kSlotsPerLevel;
    // Two extra lists share the slot machinery so cancel needs no branch:
    // the due list (armed at or before the horizon) and the parking list
    // (beyond-range timers met during an advance that will not reach them).
    static constexpr std::uint32_t kDueSlot = kWheelSlots;
    static constexpr std::uint32_t kParkedSlot = kWheelSlots + 1;
    static constexpr std::uint32_t kSlotCount = kWheelSlots + 2;

    bool slot_empty(std::uint32_t slot) const noexcept {
        const Timer* const* lanes = &lists_[slot * kLanes];
        bool empty = true;
        for (unsigned lane = 0; lane < kLanes; ++lane) empty &= lanes[lane] == nullptr;
        return empty;
    }

    void link(Timer& timer, std::uint32_t slot) noexcept {
        const std::uint32_t list = slot * kLanes + (next_lane_++ & (kLanes - 1));
        Timer* const head = lists_[list];
        timer.link_next_ = head;
        if (head != nullptr) head->link_prev_ = &timer.link_next_;
        lists_[list] = &timer;
        timer.link_prev_ = &lists_[list];
        timer.list_ = list;
        occupancy_[slot >> kSlotBits] |= std::uint64_t{1} << (slot & (kSlotsPerLevel - 1));
        occupied_levels_ |= 1u << (slot >> kSlotBits);
    }

    void unlink(Timer& timer) noexcept {
        Timer* const next = timer.link_next_;
        *timer.link_prev_ = next;
        if (next != nullptr) next->link_prev_ = timer.link_prev_;
        timer.link_prev_ = nullptr;
        // A timer may sit on a firing list while list_ still names the slot
        // it came from; that slot was emptied when it was detached, so
        // clearing its bit when it reads empty is right in both cases.
        const std::uint32_t list = timer.list_;
        if (lists_[list] != nullptr) return;
        const std::uint32_t slot = list / kLanes;
        if (slot_empty(slot)) {
            const unsigned level = slot >> kSlotBits;
            occupancy_[level] &= ~(std::uint64_t{1} << (slot & (kSlotsPerLevel - 1)));
            if (occupancy_[level] == 0) occupied_levels_ &= ~(1u << level);
        }
    }

    // Files a timer whose deadline is past now_ into the finest level that
    // reaches it. A level L fits when the deadline's slot number, rounded up,
    // is at most 64 slots past now_'s slot: the 64 slots of a level then hold
    // exactly the slot numbers (now_ >> s, (now_ >> s) + 64], so an index
    // never aliases two laps of the wheel.
    void place(Timer& timer) noexcept {
        const Tick deadline = timer.deadline_;
        assert(deadline > now_);
        // Levels below (bit_width(delta) - 5) / 3 cannot fit (delta > 64 g);
        // the estimate or the next level up always does, so this loop runs
        // at most twice before the top level.
        const unsigned width = static_cast<unsigned>(std::bit_width(deadline - now_));
        unsigned level = width > 5 ? (width - 5) / kLevelShift : 0;
        for (; level < kLevels; ++level) {
            const unsigned shift = level * kLevelShift;
            const Tick slot_number =
                (deadline >> shift) + ((deadline & (level_granularity(level) - 1)) != 0);
            if (slot_number - (now_ >> shift) <= kSlotsPerLevel) {
                file(timer, level, slot_number);
                return;
            }
        }
        // Beyond the range: park in the top level's farthest slot.
        constexpr unsigned top = kLevels - 1;
        file(timer, top, (now_ >> (top * kLevelShift)) + kSlotsPerLevel);
    }

    void file(Timer& timer, unsigned level, Tick slot_number) noexcept {
        const Tick expiry = slot_number << (level * kLevelShift);
        if (expiry < next_expiry_) next_expiry_ = expiry;
        link(timer, level * kSlotsPerLevel +
                        static_cast<std::uint32_t>(slot_number & (kSlotsPerLevel - 1)));
    }

    // Earliest expiry of the filed timers, or kNever. Several levels can
    // share it; the bits of `levels` name them and slots[level] their slot.
    Tick find_earliest(std::uint32_t& levels, std::uint32_t* slots) const noexcept;
    // Moves a slot's lanes onto firing_[group] so callbacks can still
    // cancel them.
    void detach(std::uint32_t slot, unsigned group) noexcept;
    std::size_t fire_group(unsigned group, Tick now);
    void refile_parked();

    Timer* lists_[kSlotCount * kLanes] = {};
    std::uint64_t occupancy_[kLevels + 1] = {};
    std::uint32_t occupied_levels_ = 0;  // bit L: occupancy_[L] != 0
    std::uint32_t next_lane_ = 0;
    Tick now_;
    // Deadlines at or before this are due; equals now_ outside advance() and
    // the advance's `now` inside it.
    Tick horizon_;
    // A lower bound of every filed expiry (exact after advance()), so an
    // advance with nothing due is O(1).
    Tick next_expiry_ = kNever;
    bool advancing_ = false;  // catches advance() called from a callback
    // Timers detached for firing: a group of kLanes lists per level plus
    // one for the due list (group kLevels); callbacks may cancel them.
    Timer* firing_[(kLevels + 1) * kLanes] = {};
    std::size_t pending_ = 0;
};

inline Tick Timer::granularity() const noexcept {
    const std::uint32_t slot = list_ / Wheel::kLanes;
    if (slot >= Wheel::kWheelSlots) return 0;
    return Wheel::level_granularity(slot >> Wheel::kSlotBits);
}

}  // namespace metaroce::timer
