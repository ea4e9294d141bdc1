#include "metaroce-gen/gen_run.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "common/gid_text.hpp"
#include "common/json_line.hpp"
#include "common/run_control.hpp"
#include "fabric/random.hpp"
#include "metaroce-gen/message_planner.hpp"

namespace metaroce::apps::gen {

namespace {

constexpr std::uint64_t second_ns = 1'000'000'000;
// Closed loop with a rate limit: a turn that comes late may catch up this much.
constexpr std::uint64_t pacing_burst_ns = 50'000;

metaroce::Op send_op(traffic::Op op) {
  return op == traffic::Op::write       ? metaroce::Op::write
         : op == traffic::Op::write_imm ? metaroce::Op::write_imm
         : op == traffic::Op::send      ? metaroce::Op::send
                                        : metaroce::Op::read;
}

// One generator connection while it runs.
struct Live {
  struct InFlight {
    traffic::PlannedMessage message;
    std::uint64_t length = 0;
    std::uint64_t post_ns = 0;
  };

  bool broken = false;  // a completion failed: nothing more is posted
  metaroce::Connection* connection = nullptr;
  std::unique_ptr<traffic::MessagePlanner> planner;
  std::uint64_t remote_base = 0;
  std::uint32_t rkey = 0;
  std::uint64_t read_base = 0;  // the sink's read region
  std::uint32_t read_rkey = 0;
  std::uint32_t read_slots = 0;
  std::vector<std::uint8_t> local;  // tx_depth buffers of slot_bytes
  metaroce::MemoryRegion memory;
  std::vector<std::uint32_t> free_buffers;
  std::vector<InFlight> in_flight;  // by buffer (= wr_id)
  fabric::Random random{1};
  bool has_pending = false;  // drawn, not yet posted
  std::uint64_t pending_size = 0;
  traffic::Op pending_op = traffic::Op::write;
  std::uint64_t pending_arrival_ns = 0;
  std::deque<std::uint64_t> backlog;  // open loop: arrival times waiting
  ConnectionResult result;

  [[nodiscard]] std::uint64_t outstanding() const noexcept { return in_flight.size() - free_buffers.size(); }
  // What -n counts: the messages the sink checks, and the READs.
  [[nodiscard]] std::uint64_t posted() const noexcept {
    return planner->posted() + result.ops[static_cast<std::size_t>(traffic::Op::read)];
  }
};

class Generator {
 public:
  // Lane `lane` of `lanes` (--lcores) on endpoint `e` (nullptr: run() opens
  // one): connections lane, lane + lanes, .. of run `run` (0: a new one),
  // pacing at its share of the rate.
  Generator(const GenOptions& o, std::FILE* progress, std::uint16_t lane = 0, std::uint16_t lanes = 1,
            std::uint64_t run = 0, std::unique_ptr<metaroce::Endpoint> e = nullptr)
      : o_(o), progress_(progress), e_(std::move(e)), lane_(lane), lanes_(lanes), run_id_(run),
        arrivals_random_(o.seed, ~0ull - lane) {
    const std::uint32_t per_stream = (o.tx_depth + o.streams - 1) / o.streams;
    layout_.streams = o.streams;
    layout_.write_slots = 2 * per_stream + 4;
    layout_.receives = per_stream + 2;
    layout_.slot_bytes = static_cast<std::uint32_t>(o.sizes.max());
    mix_total_ = o.mix[0] + o.mix[1] + o.mix[2] + o.mix[3];
    const double interval_msgs = o.msg_rate > 0 ? 1e9 / o.msg_rate : 0.0;
    const double interval_bytes = o.gbps > 0 ? o.sizes.mean() * 8.0 / o.gbps : 0.0;
    mean_arrival_ns_ = std::max(interval_msgs, interval_bytes) * lanes;
  }

  GenResult run();
  // Several lanes: run() leaves its endpoint open; the caller destroys the
  // lanes' one after another once every lane stopped (the last stops the
  // port they share).
  std::unique_ptr<metaroce::Endpoint> take_endpoint() { return std::move(e_); }

 private:
  bool connect_all();
  bool on_established(Live& l);
  // One completion of connection l, as the endpoint delivers it.
  void complete(Live& l, const metaroce::Completion& c);
  // A READ's bytes, every one, once it completed.
  void check_read(Live& l, const Live::InFlight& f, const std::uint8_t* bytes);
  // Posts the pending READ; false when post_send refused it.
  bool post_read(Live& l, std::uint32_t buffer, std::uint64_t now);
  // What every post does after: the pending arrival is used, pacing moves on.
  void after_post(Live& l, std::uint64_t now);
  std::size_t post(Live& l, std::uint64_t now);
  void arrivals(std::uint64_t now);
  void close_all();
  void print_progress(std::uint64_t now);
  [[nodiscard]] bool posting_done(std::uint64_t now) const;
  traffic::Op draw_op(fabric::Random& random) const {
    const double u = random.uniform() * mix_total_;
    return u < o_.mix[0]                           ? traffic::Op::write
           : u < o_.mix[0] + o_.mix[1]             ? traffic::Op::write_imm
           : u < o_.mix[0] + o_.mix[1] + o_.mix[2] ? traffic::Op::send
                                                   : traffic::Op::read;
  }

  const GenOptions& o_;
  std::FILE* progress_;
  std::unique_ptr<metaroce::Endpoint> e_;
  std::uint16_t lane_ = 0, lanes_ = 1;
  std::uint64_t run_id_ = 0;
  GenResult r_;
  traffic::PlannerLayout layout_;
  std::vector<Live> lives_;
  std::uint64_t turn_ns_ = 0;  // when this turn began: the time completions are taken at
  double mix_total_ = 0.0;
  double mean_arrival_ns_ = 0.0;
  fabric::Random arrivals_random_;
  std::uint64_t arrivals_made_ = 0;
  std::uint64_t next_arrival_ns_ = 0;
  std::uint64_t next_post_ns_ = 0;
  std::uint64_t start_ns_ = 0, end_ns_ = ~std::uint64_t{0};
  std::uint64_t first_post_ns_ = 0, last_completion_ns_ = 0;
  std::uint64_t last_progress_ns_ = 0, progress_completed_ = 0, progress_bytes_ = 0;
};

bool Generator::on_established(Live& l) {
  traffic::Target target;
  if (!traffic::decode(l.connection->peer_private_data(), target)) {
    r_.error = fmt::format("the reply to connection {} carried no buffer address: is a metaroce-sink listening at {}?",
                           l.result.index, o_.sink_address);
    return false;
  }
  l.result.qpn = l.connection->qpn();
  l.remote_base = target.address;
  l.rkey = target.rkey;
  l.read_base = target.read_address;
  l.read_rkey = target.read_rkey;
  l.read_slots = target.read_slots;
  if (o_.mix[static_cast<std::size_t>(traffic::Op::read)] > 0 && l.read_slots == 0) {
    r_.error = fmt::format("connection {}: the sink offers no region to read: drop read from --mix",
                           l.result.index);
    return false;
  }
  l.local.assign(std::uint64_t{o_.tx_depth} * layout_.slot_bytes, 0);
  std::string error;
  l.memory = e_->register_memory(l.local.data(), l.local.size(), metaroce::access_local_write, error);
  if (!l.memory.valid()) {
    r_.error = fmt::format("connection {}: {}", l.result.index, error);
    return false;
  }
  l.in_flight.resize(o_.tx_depth);
  for (std::uint32_t b = o_.tx_depth; b-- > 0;) l.free_buffers.push_back(b);
  l.planner = std::make_unique<traffic::MessagePlanner>(layout_);
  l.connection->set_completion_handler([this, &l](const metaroce::Completion& c) { complete(l, c); });
  return true;
}

bool Generator::connect_all() {
  std::random_device device;
  r_.run = run_id_ != 0 ? run_id_ : (std::uint64_t{device()} << 32 | device()) | 1;
  metaroce::ConnectOptions request;
  request.mode = o_.mode;
  request.mtu = o_.port.mtu;
  request.paths = o_.paths;
  request.streams = o_.streams;
  request.path_window = o_.path_window;
  request.gateway = o_.gateway;
  request.peer_mac = o_.peer_mac;
  request.congestion = o_.cc.empty() ? "none" : o_.cc;
  if (o_.mode == "rocev2") set_rocev2_timers(o_.rocev2, request);
  // This lane's: connections lane_, lane_ + lanes_, ..
  const std::uint32_t mine = (o_.connections - lane_ + lanes_ - 1) / lanes_;
  lives_.resize(mine);
  std::vector<metaroce::ConnectOptions> requests(mine, request);
  for (std::uint32_t j = 0; j < mine; ++j) {
    const std::uint32_t i = lane_ + j * lanes_;
    Live& l = lives_[j];
    l.random = fabric::Random(o_.seed, i);
    l.result.index = i;
    // Each connection its own UDP source ports, so that connections spread
    // over a fabric's ECMP paths as they would over a network.
    requests[j].first_src_port = static_cast<std::uint16_t>(49152 + (std::uint64_t{i} * o_.paths) % (16384 - 64));
    traffic::Offer offer;
    offer.run = r_.run;
    offer.connection = i;
    offer.connections = o_.connections;
    offer.write_slots = layout_.write_slots;
    offer.receives = layout_.receives;
    offer.slot_bytes = layout_.slot_bytes;
    requests[j].private_data = traffic::encode(offer);
  }
  const std::vector<metaroce::Connection*> made = e_->connect_all(o_.sink_address, requests, r_.error);
  if (made.empty()) {
    if (stop_requested()) r_.error = "interrupted while connecting";
    return false;
  }
  for (std::uint32_t j = 0; j < mine; ++j) {
    lives_[j].connection = made[j];
    if (!on_established(lives_[j])) return false;
  }
  return true;
}

void Generator::complete(Live& l, const metaroce::Completion& c) {
  const std::uint64_t now = turn_ns_;
  const auto buffer = static_cast<std::uint32_t>(c.wr_id);
  const Live::InFlight& f = l.in_flight[buffer];
  l.free_buffers.push_back(buffer);
  if (c.status == metaroce::Status::success && f.message.op == traffic::Op::read) {
    ++l.result.reads_completed;
    l.result.latency.add(now > f.post_ns ? now - f.post_ns : 0);
    last_completion_ns_ = now;
    check_read(l, f, l.local.data() + std::uint64_t{buffer} * layout_.slot_bytes);
  } else if (c.status == metaroce::Status::success) {
    l.planner->complete(f.message);
    ++l.result.completed;
    l.result.completed_bytes += f.length;
    l.result.latency.add(now > f.post_ns ? now - f.post_ns : 0);
    last_completion_ns_ = now;
  } else {
    ++l.result.failed;
    l.broken = true;
    if (l.result.problem.empty())
      l.result.problem = fmt::format("message {} ({}) completed with {}", f.message.sequence,
                                     traffic::to_string(f.message.op), metaroce::to_string(c.status));
  }
}

void Generator::check_read(Live& l, const Live::InFlight& f, const std::uint8_t* bytes) {
  const traffic::PatternCheck r =
      traffic::check_read(bytes, l.result.index, f.message.write_index, layout_.slot_bytes, f.length);
  if (r.wrong_bytes == 0) {
    ++l.result.reads_verified;
    l.result.read_bytes_verified += f.length;
    return;
  }
  ++l.result.reads_wrong;
  l.result.read_wrong_bytes += r.wrong_bytes;
  if (l.result.problem.empty())
    l.result.problem = fmt::format("read {} ({} B from read slot {}) returned {} wrong bytes, the first at offset {}",
                                   f.message.sequence, f.length, f.message.write_index, r.wrong_bytes,
                                   r.first_bad_offset);
}

bool Generator::post_read(Live& l, std::uint32_t buffer, std::uint64_t now) {
  auto& reads = l.result.ops[static_cast<std::size_t>(traffic::Op::read)];
  traffic::PlannedMessage m;
  m.op = traffic::Op::read;
  m.sequence = reads;  // the READs' own numbering: the sink's sequences are its messages'
  m.stream = static_cast<std::uint16_t>(reads % layout_.streams);
  m.write_index = static_cast<std::uint32_t>(reads % l.read_slots);  // the read slot
  std::uint8_t* bytes = l.local.data() + std::uint64_t{buffer} * layout_.slot_bytes;
  std::memset(bytes, 0, l.pending_size);  // so that a byte not placed is found
  metaroce::SendWork request;
  request.wr_id = buffer;
  request.op = metaroce::Op::read;
  request.stream = m.stream;
  request.local = bytes;
  request.length = l.pending_size;
  request.lkey = l.memory.key;
  request.remote_addr = l.read_base + std::uint64_t{m.write_index} * layout_.slot_bytes;
  request.rkey = l.read_rkey;
  const metaroce::PostResult result = l.connection->post_send(request);
  if (result != metaroce::PostResult::ok) {
    l.broken = true;
    if (l.result.problem.empty())
      l.result.problem = fmt::format("post_send refused read {}: {}", m.sequence, metaroce::to_string(result));
    return false;
  }
  const std::uint64_t post_ns = o_.open_loop ? l.pending_arrival_ns : now;
  l.free_buffers.pop_back();
  l.in_flight[buffer] = Live::InFlight{m, l.pending_size, post_ns};
  ++reads;
  l.result.read_bytes_posted += l.pending_size;
  return true;
}

void Generator::arrivals(std::uint64_t now) {
  const std::uint64_t cap = o_.duration_s > 0 ? ~std::uint64_t{0} : o_.iterations * lives_.size();
  while (now >= next_arrival_ns_ && arrivals_made_ < cap) {
    Live& l = lives_[arrivals_made_ % lives_.size()];
    l.backlog.push_back(next_arrival_ns_);
    r_.max_backlog = std::max<std::uint64_t>(r_.max_backlog, l.backlog.size());
    ++arrivals_made_;
    // Poisson arrivals: exponential gaps of the mean.
    const double gap = -std::log1p(-arrivals_random_.uniform()) * mean_arrival_ns_;
    next_arrival_ns_ += std::max<std::uint64_t>(1, static_cast<std::uint64_t>(gap));
  }
}

std::size_t Generator::post(Live& l, std::uint64_t now) {
  std::size_t posted = 0;
  const bool paced = !o_.open_loop && (o_.gbps > 0 || o_.msg_rate > 0);
  while (!l.broken && !l.free_buffers.empty()) {
    if (!l.has_pending) {
      if (o_.open_loop) {
        if (l.backlog.empty()) break;
        l.pending_arrival_ns = l.backlog.front();
        l.backlog.pop_front();
      } else if (o_.duration_s == 0 && l.posted() >= o_.iterations) {
        break;
      }
      l.pending_size = o_.sizes.draw(l.random);
      l.pending_op = draw_op(l.random);
      l.has_pending = true;
    }
    if (paced && now < next_post_ns_) break;
    const std::uint32_t buffer = l.free_buffers.back();
    if (l.pending_op == traffic::Op::read) {
      if (!post_read(l, buffer, now)) break;
      after_post(l, now);
      ++posted;
      continue;
    }
    traffic::PlannedMessage m;
    if (!l.planner->plan(l.pending_op, m)) break;
    std::uint8_t* bytes = l.local.data() + std::uint64_t{buffer} * layout_.slot_bytes;
    traffic::MessageHeader h;
    h.op = m.op;
    h.connection = l.result.index;
    h.sequence = m.sequence;
    h.length = static_cast<std::uint32_t>(l.pending_size);
    h.write_index = m.write_index;
    h.post_ns = o_.open_loop ? l.pending_arrival_ns : now;
    traffic::fill_message(bytes, h);
    metaroce::SendWork request;
    request.wr_id = buffer;
    request.op = send_op(m.op);
    request.stream = m.stream;
    request.local = bytes;
    request.length = l.pending_size;
    request.lkey = l.memory.key;
    request.remote_addr = l.remote_base + m.remote_offset;
    request.rkey = l.rkey;
    request.imm = m.write_index;
    const metaroce::PostResult result = l.connection->post_send(request);
    if (result != metaroce::PostResult::ok) {
      l.broken = true;
      if (l.result.problem.empty())
        l.result.problem = fmt::format("post_send refused message {}: {}", m.sequence, metaroce::to_string(result));
      break;
    }
    l.planner->commit(m);
    l.free_buffers.pop_back();
    l.in_flight[buffer] = Live::InFlight{m, l.pending_size, h.post_ns};
    ++l.result.ops[static_cast<std::size_t>(m.op)];
    after_post(l, now);
    ++posted;
  }
  return posted;
}

void Generator::after_post(Live& l, std::uint64_t now) {
  l.has_pending = false;
  if (first_post_ns_ == 0) first_post_ns_ = now;
  if (!o_.open_loop && (o_.gbps > 0 || o_.msg_rate > 0)) {
    // This lane's share of the rate.
    const double bytes_ns = o_.gbps > 0 ? double(l.pending_size) * 8.0 * lanes_ / o_.gbps : 0.0;
    const double msgs_ns = o_.msg_rate > 0 ? 1e9 * lanes_ / o_.msg_rate : 0.0;
    next_post_ns_ = std::max(next_post_ns_, now - std::min(now, pacing_burst_ns)) +
                    static_cast<std::uint64_t>(std::max(bytes_ns, msgs_ns));
  }
}

bool Generator::posting_done(std::uint64_t now) const {
  if (stop_requested()) return true;
  if (o_.duration_s > 0) return now >= end_ns_;
  for (const Live& l : lives_) {
    if (l.broken) continue;
    if (o_.open_loop ? (arrivals_made_ < o_.iterations * lives_.size() || !l.backlog.empty() || l.has_pending)
                     : l.posted() < o_.iterations)
      return false;
  }
  return true;
}

void Generator::print_progress(std::uint64_t now) {
  // Several lanes: no lane sees all the connections; the summary counts them.
  if (progress_ == nullptr || o_.quiet || lanes_ > 1 || now - last_progress_ns_ < second_ns) return;
  std::uint64_t posted = 0, completed = 0, bytes = 0, outstanding = 0, retransmitted = 0, backlog = 0;
  for (const Live& l : lives_) {
    posted += l.posted();
    completed += l.result.completed + l.result.reads_completed;
    bytes += l.result.completed_bytes;
    outstanding += l.outstanding();
    retransmitted += l.connection->counters().get("retransmitted_packets");
    backlog += l.backlog.size();
  }
  const double interval = double(now - last_progress_ns_);
  std::fprintf(progress_,
               "[%6.1f s] %.2f Gb/s %.0f msg/s | posted %llu completed %llu in flight %llu | retransmitted %llu%s\n",
               double(now - start_ns_) / 1e9, double(bytes - progress_bytes_) * 8.0 / interval,
               double(completed - progress_completed_) * 1e9 / interval, static_cast<unsigned long long>(posted),
               static_cast<unsigned long long>(completed), static_cast<unsigned long long>(outstanding),
               static_cast<unsigned long long>(retransmitted),
               o_.open_loop ? fmt::format(" | backlog {}", backlog).c_str() : "");
  std::fflush(progress_);
  last_progress_ns_ = now;
  progress_completed_ = completed;
  progress_bytes_ = bytes;
}

void Generator::close_all() {
  std::vector<metaroce::Connection*> connections;
  std::vector<std::vector<std::uint8_t>> reports;
  for (Live& l : lives_) {
    traffic::GenReport report;
    report.posted = l.planner->posted();
    report.completed = l.result.completed;
    report.completed_bytes = l.result.completed_bytes;
    report.failed = l.result.failed;
    connections.push_back(l.connection);
    reports.push_back(traffic::encode(report));
  }
  const std::vector<metaroce::CloseResult> closed = e_->close_all(connections, reports);
  for (std::size_t i = 0; i < lives_.size(); ++i) {
    Live& l = lives_[i];
    l.connection = nullptr;
    l.result.counters = closed[i].counters;  // every frame it sent, the close's included
    l.result.retransmitted = l.result.counters.get("retransmitted_packets");
    r_.counters.add(l.result.counters);
    if (!closed[i].error.empty()) {
      if (l.result.problem.empty()) l.result.problem = closed[i].error;
    } else if (traffic::decode(closed[i].reply_data, l.result.sink)) {
      l.result.sink_reported = true;
    } else if (l.result.problem.empty()) {
      l.result.problem = "the sink's disconnect reply carried no report: is it a metaroce-sink?";
    }
  }
}

GenResult Generator::run() {
  if (!e_) e_ = metaroce::Endpoint::open(o_.port, r_.error);
  if (!e_) return r_;
  r_.counters = e_->counters()[2];  // every connection counter by name, all 0
  catch_stop_signals();
  // The sink's MAC, or its gateway's: given, or asked for now (connect_all
  // finds it cached).
  metaroce::ConnectOptions next_hop;
  next_hop.gateway = o_.gateway;
  next_hop.peer_mac = o_.peer_mac;
  const std::string next_hop_mac = e_->next_hop_mac(o_.sink_address, next_hop, r_.error);
  if (next_hop_mac.empty()) return r_;
  if (progress_ != nullptr) {
    std::fprintf(progress_,
                 " metaroce-gen: %u connections x %u paths, %u streams, %s, sizes %s, mix %s, %s loop%s to %s "
                 "(next hop %s) from %s on %s\n",
                 o_.connections, o_.paths, o_.streams, o_.mode.c_str(),
                 o_.sizes.description().c_str(), o_.mix_text.c_str(), o_.open_loop ? "open" : "closed",
                 o_.gbps > 0 || o_.msg_rate > 0
                     ? fmt::format(" at {}{}{}", o_.gbps > 0 ? fmt::format("{} Gb/s", o_.gbps) : "",
                                   o_.gbps > 0 && o_.msg_rate > 0 ? " and " : "",
                                   o_.msg_rate > 0 ? fmt::format("{} msg/s", o_.msg_rate) : "")
                           .c_str()
                     : "",
                 o_.sink_address.c_str(),
                 fmt::format("{}{}{}", next_hop_mac,
                             o_.gateway.empty() ? "" : fmt::format(", gateway {}", o_.gateway),
                             o_.peer_mac.empty() ? "" : ", given")
                     .c_str(),
                 o_.port.local_ip.c_str(), e_->port_name().c_str());
    std::fprintf(progress_, " GID: %s\n", gid_text(o_.port.local_ip).c_str());
    if (lanes_ > 1) std::fprintf(progress_, " lanes: %s\n", e_->steering().c_str());
    if (o_.mode == "rocev2") std::fprintf(progress_, " rocev2: %s\n", rocev2_summary(o_.rocev2).c_str());
    std::fflush(progress_);
  }
  const std::uint64_t connecting_ns = monotonic_ns();
  if (!connect_all()) return r_;
  if (progress_ != nullptr && !o_.quiet) {
    std::fprintf(progress_, " %zu connections established in %.2f s%s\n", lives_.size(),
                 double(monotonic_ns() - connecting_ns) / 1e9,
                 lanes_ > 1 ? fmt::format(" on lcore {}", lane_).c_str() : "");
    std::fflush(progress_);
  }

  start_ns_ = monotonic_ns();
  if (o_.duration_s > 0) end_ns_ = start_ns_ + static_cast<std::uint64_t>(o_.duration_s * 1e9);
  next_arrival_ns_ = next_post_ns_ = last_progress_ns_ = last_completion_ns_ = start_ns_;
  bool posting = true;
  std::size_t next_first = 0;
  for (;;) {
    turn_ns_ = monotonic_ns();
    std::size_t work = e_->poll();  // completions go to complete(), each connection's in order
    const std::uint64_t now = monotonic_ns();
    if (posting && posting_done(now)) posting = false;
    if (posting) {
      if (o_.open_loop) arrivals(now);
      // A different connection first each turn, so a rate limit is shared fairly.
      for (std::size_t k = 0; k < lives_.size(); ++k) work += post(lives_[(next_first + k) % lives_.size()], now);
      next_first = (next_first + 1) % lives_.size();
    }
    print_progress(now);
    std::uint64_t outstanding = 0;
    for (const Live& l : lives_) outstanding += l.outstanding();
    if (!posting && outstanding == 0) break;
    if (!posting && now - last_completion_ns_ > static_cast<std::uint64_t>(o_.drain_timeout_s * 1e9)) {
      for (Live& l : lives_)
        if (l.outstanding() != 0 && l.result.problem.empty())
          l.result.problem = fmt::format("{} messages never completed ({} s without a completion)", l.outstanding(),
                                         o_.drain_timeout_s);
      break;
    }
    e_->idle(work);
  }
  r_.interrupted = stop_requested();
  r_.seconds = last_completion_ns_ > first_post_ns_ && first_post_ns_ != 0
                   ? double(last_completion_ns_ - first_post_ns_) / 1e9
                   : 0.0;
  for (const Live& l : lives_) r_.arrivals_unsent += l.backlog.size() + (o_.open_loop && l.has_pending ? 1 : 0);

  const std::uint64_t closing_ns = monotonic_ns();
  close_all();
  if (progress_ != nullptr && !o_.quiet) {
    std::fprintf(progress_, " %zu connections closed in %.2f s%s\n", lives_.size(),
                 double(monotonic_ns() - closing_ns) / 1e9,
                 lanes_ > 1 ? fmt::format(" on lcore {}", lane_).c_str() : "");
    std::fflush(progress_);
  }
  for (Live& l : lives_) {
    l.result.posted = l.planner->posted();
    l.result.forced_fences = l.planner->forced_fences();
    e_->deregister_memory(l.memory);
    r_.connections.push_back(std::move(l.result));
  }
  // Let the last answers out before the port stops.
  for (int i = 0; i < 100; ++i) e_->poll();
  r_.endpoint = e_->counters();
  if (lanes_ == 1) e_.reset();
  LaneResult lane;
  lane.lcore = lane_;
  lane.connections = lives_.size();
  for (const ConnectionResult& c : r_.connections) lane.messages += c.posted;
  lane.data_packets = r_.counters.get("data_packets_sent");
  lane.rx_frames = r_.endpoint.empty() ? 0 : r_.endpoint[0].get("rx_frames");
  lane.tx_frames = r_.endpoint.empty() ? 0 : r_.endpoint[0].get("tx_frames");
  lane.rx_misdirected = r_.endpoint.empty() ? 0 : r_.endpoint[0].get("rx_misdirected");
  r_.lanes.push_back(lane);
  return r_;
}

// The run's totals as one ConnectionResult (index and qpn unused).
struct Totals {
  ConnectionResult all;
  std::uint64_t sink_reports = 0;
};

Totals totals_of(const GenResult& r) {
  Totals t;
  ConnectionResult& a = t.all;
  for (const ConnectionResult& c : r.connections) {
    a.posted += c.posted;
    a.completed += c.completed;
    a.failed += c.failed;
    a.completed_bytes += c.completed_bytes;
    a.forced_fences += c.forced_fences;
    a.read_bytes_posted += c.read_bytes_posted;
    a.reads_completed += c.reads_completed;
    a.reads_verified += c.reads_verified;
    a.read_bytes_verified += c.read_bytes_verified;
    a.reads_wrong += c.reads_wrong;
    a.read_wrong_bytes += c.read_wrong_bytes;
    a.retransmitted += c.retransmitted;
    for (std::size_t k = 0; k < a.ops.size(); ++k) a.ops[k] += c.ops[k];
    a.latency.merge(c.latency);
    if (!c.sink_reported) continue;
    ++t.sink_reports;
    a.sink.verified += c.sink.verified;
    a.sink.verified_bytes += c.sink.verified_bytes;
    a.sink.wrong += c.sink.wrong;
    a.sink.wrong_bytes += c.sink.wrong_bytes;
    a.sink.missing += c.sink.missing;
    a.sink.duplicates += c.sink.duplicates;
  }
  return t;
}

// The figures of one connection, or of all: the same keys at both levels.
void add_figures(JsonLine& j, const ConnectionResult& c) {
  j.add("posted", c.posted);
  j.add("completed", c.completed);
  j.add("failed", c.failed);
  j.add("bytes", c.completed_bytes);
  j.begin_object("ops");
  for (std::size_t k = 0; k < c.ops.size(); ++k) j.add(traffic::to_string(static_cast<traffic::Op>(k)), c.ops[k]);
  j.end_object();
  j.add("forced_fences", c.forced_fences);
  j.begin_object("reads");  // checked here, every byte; the sink does not see them
  j.add("posted", c.ops[static_cast<std::size_t>(traffic::Op::read)]);
  j.add("posted_bytes", c.read_bytes_posted);
  j.add("completed", c.reads_completed);
  j.add("verified", c.reads_verified);
  j.add("verified_bytes", c.read_bytes_verified);
  j.add("wrong", c.reads_wrong);
  j.add("wrong_bytes", c.read_wrong_bytes);
  j.end_object();
  j.add("retransmitted_packets", c.retransmitted);
  add_latency_json(j, "latency_us", c.latency);
  j.begin_object("sink");
  j.add("verified", c.sink.verified);
  j.add("verified_bytes", c.sink.verified_bytes);
  j.add("wrong", c.sink.wrong);
  j.add("wrong_bytes", c.sink.wrong_bytes);
  j.add("missing", c.sink.missing);
  j.add("duplicates", c.sink.duplicates);
  if (c.sink.first_bad_sequence != ~std::uint64_t{0}) j.add("first_bad_sequence", c.sink.first_bad_sequence);
  if (c.sink.first_bad_offset != traffic::no_offset) j.add("first_bad_offset", c.sink.first_bad_offset);
  j.end_object();
}

// The first problem of the run in words, or empty.
std::string first_problem(const GenResult& r) {
  if (!r.error.empty()) return r.error;
  for (const ConnectionResult& c : r.connections) {
    if (!c.problem.empty()) return fmt::format("connection {}: {}", c.index, c.problem);
    if (!c.sink_reported) return fmt::format("connection {}: no report from the sink", c.index);
    if (c.sink.wrong != 0)
      return fmt::format("connection {}: the sink found {} wrong bytes in {} messages, the first in message {} at "
                         "offset {}",
                         c.index, c.sink.wrong_bytes, c.sink.wrong, c.sink.first_bad_sequence,
                         c.sink.first_bad_offset);
    if (c.sink.missing != 0)
      return fmt::format("connection {}: {} messages never reached the sink (the first: message {})", c.index,
                         c.sink.missing, c.sink.first_bad_sequence);
    if (c.sink.duplicates != 0)
      return fmt::format("connection {}: the sink saw {} messages complete twice", c.index, c.sink.duplicates);
    if (c.reads_verified != c.ops[static_cast<std::size_t>(traffic::Op::read)])
      return fmt::format("connection {}: posted {} reads, verified {}", c.index,
                         c.ops[static_cast<std::size_t>(traffic::Op::read)], c.reads_verified);
    if (c.sink.verified != c.posted)
      return fmt::format("connection {}: posted {} messages, the sink verified {}", c.index, c.posted,
                         c.sink.verified);
  }
  return {};
}

}  // namespace

bool GenResult::ok() const noexcept {
  if (!error.empty() || connections.empty()) return false;
  for (const ConnectionResult& c : connections)
    if (!c.problem.empty() || c.failed != 0 || c.completed != c.posted || !c.sink_reported ||
        c.sink.verified != c.posted || c.sink.wrong != 0 || c.sink.missing != 0 || c.sink.duplicates != 0 ||
        c.reads_wrong != 0 || c.reads_verified != c.ops[static_cast<std::size_t>(traffic::Op::read)])
      return false;
  return true;
}

GenResult run_gen(const GenOptions& options, std::FILE* progress) {
  if (options.lcores <= 1) {
    Generator g(options, progress);
    return g.run();
  }
  GenResult all;
  std::vector<std::unique_ptr<metaroce::Endpoint>> lanes =
      metaroce::Endpoint::open_lanes(options.port, options.lcores, all.error);
  if (lanes.empty()) return all;
  std::random_device device;
  all.run = (std::uint64_t{device()} << 32 | device()) | 1;  // one run, its connections over every lane
  std::vector<GenResult> results(lanes.size());
  std::vector<std::thread> threads;
  std::atomic<unsigned> done{0};
  for (std::uint16_t k = 0; k < lanes.size(); ++k)
    threads.emplace_back([&, k] {
      Generator g(options, k == 0 ? progress : nullptr, k, options.lcores, all.run, std::move(lanes[k]));
      results[k] = g.run();
      lanes[k] = g.take_endpoint();
      apps::turn_until_lanes_done(lanes[k].get(), done, options.lcores);
    });
  for (auto& t : threads) t.join();
  for (auto& lane : lanes) lane.reset();  // one after another
  for (GenResult& r : results) {
    if (all.error.empty() && !r.error.empty()) all.error = r.error;
    for (ConnectionResult& c : r.connections) all.connections.push_back(std::move(c));
    all.seconds = std::max(all.seconds, r.seconds);
    all.interrupted = all.interrupted || r.interrupted;
    all.arrivals_unsent += r.arrivals_unsent;
    all.max_backlog += r.max_backlog;
    if (all.endpoint.empty()) {
      all.endpoint = r.endpoint;
    } else {
      for (std::size_t g = 0; g < std::min(all.endpoint.size(), r.endpoint.size()); ++g) all.endpoint[g].add(r.endpoint[g]);
    }
    if (all.counters.counters.empty()) all.counters = r.counters; else all.counters.add(r.counters);
    for (const LaneResult& l : r.lanes) all.lanes.push_back(l);
  }
  std::sort(all.connections.begin(), all.connections.end(),
            [](const ConnectionResult& a, const ConnectionResult& b) { return a.index < b.index; });
  return all;
}

std::string gen_json(const GenOptions& o, const GenResult& r) {
  const Totals t = totals_of(r);
  JsonLine j;
  j.add("app", "metaroce-gen");
  j.add("ok", r.ok());
  j.add("first_problem", first_problem(r));
  j.add("run", fmt::format("{:016x}", r.run));
  j.add("connections", o.connections);
  j.add("paths", unsigned{o.paths});
  j.add("streams", unsigned{o.streams});
  j.add("mode", o.mode);
  j.add("cc", o.cc.empty() ? "none" : o.cc);
  j.add("sizes", o.sizes.description());
  j.add("mix", o.mix_text);
  j.add("loop", o.open_loop ? "open" : "closed");
  j.add("gbps_limit", o.gbps);
  j.add("msg_rate_limit", o.msg_rate);
  j.add("interrupted", r.interrupted);
  j.add("seconds", r.seconds);
  add_figures(j, t.all);
  j.add("sink_reports", t.sink_reports);
  j.add("goodput_gbps", r.seconds > 0 ? double(t.all.completed_bytes) * 8.0 / r.seconds / 1e9 : 0.0);
  j.add("message_rate", r.seconds > 0 ? double(t.all.completed) / r.seconds : 0.0);
  j.add("arrivals_unsent", r.arrivals_unsent);
  j.add("max_backlog", r.max_backlog);
  j.begin_array("per_connection");
  for (const ConnectionResult& c : r.connections) {
    j.begin_array_object();
    j.add("connection", c.index);
    j.add("qpn", c.qpn);
    add_figures(j, c);
    j.add("sink_reported", c.sink_reported);
    j.add("problem", c.problem);
    j.end_object();
  }
  j.end_array();
  add_lanes_json(j, "sender", r.lanes);
  add_counters_json(j, r.counters, r.endpoint);
  return std::move(j).finish();
}

void print_gen_summary(std::FILE* out, const GenOptions& o, const GenResult& r) {
  const Totals totals = totals_of(r);
  const ConnectionResult& t = totals.all;
  std::fprintf(out,
               " posted %llu messages (write %llu, write-imm %llu, send %llu; %llu forced fences), completed %llu, "
               "failed %llu\n",
               static_cast<unsigned long long>(t.posted), static_cast<unsigned long long>(t.ops[0]),
               static_cast<unsigned long long>(t.ops[1]), static_cast<unsigned long long>(t.ops[2]),
               static_cast<unsigned long long>(t.forced_fences), static_cast<unsigned long long>(t.completed),
               static_cast<unsigned long long>(t.failed));
  std::fprintf(out, " %.3f GB in %.2f s: %.2f Gb/s, %.0f msg/s; latency (post to completion) p50 %.1f us, p99 %.1f us, "
                    "max %.1f us; %llu packets retransmitted\n",
               double(t.completed_bytes) / 1e9, r.seconds, r.seconds > 0 ? double(t.completed_bytes) * 8.0 / r.seconds / 1e9 : 0.0,
               r.seconds > 0 ? double(t.completed) / r.seconds : 0.0, double(t.latency.percentile(0.5)) / 1e3,
               double(t.latency.percentile(0.99)) / 1e3, double(t.latency.max()) / 1e3,
               static_cast<unsigned long long>(t.retransmitted));
  if (o.open_loop)
    std::fprintf(out, " open loop: at most %llu arrivals waited for a connection; %llu never posted\n",
                 static_cast<unsigned long long>(r.max_backlog), static_cast<unsigned long long>(r.arrivals_unsent));
  if (t.ops[static_cast<std::size_t>(traffic::Op::read)] != 0)
    std::fprintf(out, " reads (checked here): posted %llu, completed %llu, verified %llu (%llu bytes), wrong %llu "
                      "(%llu bytes)\n",
                 static_cast<unsigned long long>(t.ops[static_cast<std::size_t>(traffic::Op::read)]),
                 static_cast<unsigned long long>(t.reads_completed), static_cast<unsigned long long>(t.reads_verified),
                 static_cast<unsigned long long>(t.read_bytes_verified), static_cast<unsigned long long>(t.reads_wrong),
                 static_cast<unsigned long long>(t.read_wrong_bytes));
  std::fprintf(out, " sink (%llu of %zu connections reported): verified %llu messages, %llu bytes; wrong %llu (%llu "
                    "bytes), missing %llu, duplicates %llu\n",
               static_cast<unsigned long long>(totals.sink_reports), r.connections.size(),
               static_cast<unsigned long long>(t.sink.verified), static_cast<unsigned long long>(t.sink.verified_bytes),
               static_cast<unsigned long long>(t.sink.wrong), static_cast<unsigned long long>(t.sink.wrong_bytes),
               static_cast<unsigned long long>(t.sink.missing), static_cast<unsigned long long>(t.sink.duplicates));
  const std::string problem = first_problem(r);
  std::fprintf(out, " %s%s\n", r.ok() ? "ok: every message verified by the sink" : "FAILED: ", problem.c_str());
}

}  // namespace metaroce::apps::gen
