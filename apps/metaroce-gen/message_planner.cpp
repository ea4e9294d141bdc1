#include "metaroce-gen/message_planner.hpp"

#include <algorithm>

namespace metaroce::apps::traffic {

MessagePlanner::MessagePlanner(const PlannerLayout& layout) : layout_(layout), streams_(layout.streams) {}

bool MessagePlanner::plan(Op drawn, PlannedMessage& out) const {
  const auto stream = static_cast<std::uint16_t>(posted_ % layout_.streams);
  const Stream& st = streams_[stream];
  PlannedMessage m;
  m.sequence = posted_;
  m.stream = stream;
  m.op = drawn;
  if (m.op == Op::write && st.unfenced >= std::max<std::uint32_t>(1, layout_.write_slots / 2)) {
    m.op = Op::write_imm;
    m.forced_fence = true;
  }
  if (m.op != Op::send && st.writes - st.covered >= layout_.write_slots) return false;
  if (m.op != Op::write && st.receives_in_use >= layout_.receives) return false;
  m.write_index = static_cast<std::uint32_t>(st.writes);
  m.remote_offset = (std::uint64_t{stream} * layout_.write_slots + st.writes % layout_.write_slots) * layout_.slot_bytes;
  out = m;
  return true;
}

void MessagePlanner::commit(const PlannedMessage& m) {
  Stream& st = streams_[m.stream];
  ++posted_;
  if (m.op != Op::send) ++st.writes;
  if (m.op == Op::write) {
    ++st.unfenced;
  } else {
    st.unfenced = 0;
    ++st.receives_in_use;
  }
  if (m.forced_fence) ++forced_fences_;
}

void MessagePlanner::complete(const PlannedMessage& m) {
  Stream& st = streams_[m.stream];
  if (m.op == Op::write) return;
  --st.receives_in_use;
  const std::uint64_t covers = m.op == Op::write_imm ? std::uint64_t{m.write_index} + 1 : m.write_index;
  st.covered = std::max(st.covered, covers);
}

}  // namespace metaroce::apps::traffic
