#include "metaroce-sink/sink_run.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "common/gid_text.hpp"
#include "common/json_line.hpp"
#include "common/run_control.hpp"

namespace metaroce::apps::sink {

namespace {

constexpr std::uint64_t second_ns = 1'000'000'000;
// After the last run closed: answer repeated DREQs (a DREP was lost) this long.
constexpr std::uint64_t linger_ns = 300'000'000;

struct Session {
  metaroce::Connection* connection = nullptr;
  traffic::Offer offer;
  std::vector<std::uint8_t> write_region;
  std::vector<std::uint8_t> receive_region;
  std::vector<std::uint8_t> read_region;  // the generator's READs read it; nothing writes it after accept
  metaroce::MemoryRegion write_memory, receive_memory, read_memory;
  std::unique_ptr<traffic::ConnectionVerifier> verifier;
  std::uint64_t established_ns = 0;
  std::uint64_t last_message_ns = 0;
  SessionResult result;

  [[nodiscard]] std::uint64_t memory() const noexcept {
    return write_region.size() + receive_region.size() + read_region.size();
  }
  bool post_receive(std::uint64_t buffer) {
    metaroce::ReceiveWork r;
    r.wr_id = buffer;
    r.stream = static_cast<std::uint16_t>(buffer / offer.receives);
    r.addr = receive_region.data() + verifier->receive_offset(buffer);
    r.length = offer.slot_bytes;
    r.lkey = receive_memory.key;
    return connection->post_receive(r) == metaroce::PostResult::ok;
  }
};

// The generator runs the sink has seen closed, shared by its lanes
// (--lcores): a run's connections spread over them.
struct Runs {
  std::mutex mutex;
  std::map<std::uint64_t, std::uint32_t> closed;  // connections closed, by run
  std::uint32_t completed = 0;
  std::atomic<std::uint64_t> finish_at{~std::uint64_t{0}};
};

class Sink {
 public:
  // Lane `lane` of `lanes` on endpoint `e` (nullptr: run() opens one),
  // counting runs in `runs` (nullptr: its own).
  Sink(const SinkOptions& o, std::FILE* progress, std::uint16_t lane = 0, std::uint16_t lanes = 1,
       Runs* runs = nullptr, std::unique_ptr<metaroce::Endpoint> e = nullptr)
      : o_(o), progress_(progress), e_(std::move(e)), lane_(lane), lanes_(lanes),
        runs_(runs != nullptr ? runs : &own_runs_) {}
  SinkResult run();
  // Several lanes: run() leaves its endpoint open; the caller destroys the
  // lanes' one after another once every lane stopped.
  std::unique_ptr<metaroce::Endpoint> take_endpoint() { return std::move(e_); }

 private:
  metaroce::Verdict accept(const metaroce::IncomingRequest& request, metaroce::Connection& connection,
                           std::vector<std::uint8_t>& reply);
  // One completion of session s, checked as it is delivered (before the
  // next turn receives anything).
  void check(Session& s, const metaroce::Completion& c);
  void on_peer_close(metaroce::Connection& connection, bool superseded);
  void close(Session& s, bool closed_by_generator);
  void forget(Session& s);
  void print_progress(std::uint64_t now);

  const SinkOptions& o_;
  std::FILE* progress_;
  std::unique_ptr<metaroce::Endpoint> e_;
  std::uint16_t lane_ = 0, lanes_ = 1;
  Runs own_runs_;
  Runs* runs_;
  SinkResult r_;
  std::map<std::uint32_t, std::unique_ptr<Session>> sessions_;  // by local QPN
  std::uint64_t memory_in_use_ = 0;
  std::uint64_t start_ns_ = 0, last_progress_ns_ = 0, progress_bytes_ = 0, progress_messages_ = 0;
  // Totals of the closed sessions, for progress lines.
  std::uint64_t closed_bytes_ = 0, closed_messages_ = 0;
};

metaroce::Verdict Sink::accept(const metaroce::IncomingRequest& request, metaroce::Connection& connection,
                               std::vector<std::uint8_t>& reply) {
  traffic::Offer offer;
  if (!traffic::decode(request.private_data, offer)) {
    ++r_.refused;
    if (progress_ != nullptr) std::fprintf(progress_, " refused QP %#x: its request is not a metaroce-gen offer\n",
                                           request.peer_qpn);
    return metaroce::Verdict::refuse_bad_request;
  }
  traffic::VerifierLayout layout;
  layout.connection = offer.connection;
  layout.streams = request.streams;
  layout.write_slots = offer.write_slots;
  layout.receives = offer.receives;
  layout.slot_bytes = offer.slot_bytes;
  const std::uint64_t read_bytes = std::uint64_t{traffic::read_slots} * offer.slot_bytes;
  const std::uint64_t bytes = traffic::ConnectionVerifier::write_region_bytes(layout) +
                              traffic::ConnectionVerifier::receive_region_bytes(layout) + read_bytes;
  if (bytes > o_.max_connection_memory) {
    ++r_.refused;
    if (progress_ != nullptr)
      std::fprintf(progress_, " refused connection %u of run %016llx: it needs %llu bytes, more than "
                              "--max-connection-memory (%llu) allows\n",
                   offer.connection, static_cast<unsigned long long>(offer.run), static_cast<unsigned long long>(bytes),
                   static_cast<unsigned long long>(o_.max_connection_memory));
    return metaroce::Verdict::refuse_too_much_memory;
  }
  if (memory_in_use_ + bytes > (o_.memory_mb << 20) / lanes_) {  // each lane its share
    ++r_.refused;
    if (progress_ != nullptr)
      std::fprintf(progress_, " refused connection %u of run %016llx: it needs %llu MiB, %llu of %llu MiB in use "
                              "(raise --memory-mb)\n",
                   offer.connection, static_cast<unsigned long long>(offer.run),
                   static_cast<unsigned long long>(bytes >> 20), static_cast<unsigned long long>(memory_in_use_ >> 20),
                   static_cast<unsigned long long>(o_.memory_mb));
    return metaroce::Verdict::refuse_no_room;
  }
  auto s = std::make_unique<Session>();
  s->offer = offer;
  s->connection = &connection;
  s->write_region.assign(traffic::ConnectionVerifier::write_region_bytes(layout), 0);
  s->receive_region.assign(traffic::ConnectionVerifier::receive_region_bytes(layout), 0);
  s->read_region.resize(read_bytes);
  for (std::uint32_t j = 0; j < traffic::read_slots; ++j)
    traffic::fill_read_slot(s->read_region.data() + std::uint64_t{j} * offer.slot_bytes, offer.connection, j,
                            offer.slot_bytes);
  std::string error;
  s->write_memory = e_->register_memory(s->write_region.data(), s->write_region.size(),
                                        metaroce::access_local_write | metaroce::access_remote_write, error);
  s->receive_memory = e_->register_memory(s->receive_region.data(), s->receive_region.size(),
                                          metaroce::access_local_write, error);
  s->read_memory = e_->register_memory(s->read_region.data(), s->read_region.size(), metaroce::access_remote_read,
                                       error);
  s->verifier = std::make_unique<traffic::ConnectionVerifier>(layout, s->write_region.data(), s->receive_region.data());
  bool posted = s->write_memory.valid() && s->receive_memory.valid() && s->read_memory.valid();
  for (std::uint64_t b = 0; posted && b < std::uint64_t{layout.streams} * layout.receives; ++b) posted = s->post_receive(b);
  if (!posted) {
    forget(*s);
    ++r_.refused;
    if (progress_ != nullptr) std::fprintf(progress_, " refused QP %#x: no room for its receives\n", request.peer_qpn);
    return metaroce::Verdict::refuse_no_room;
  }
  s->established_ns = monotonic_ns();
  s->result.qpn = connection.qpn();
  s->result.connection = offer.connection;
  s->result.run = offer.run;
  memory_in_use_ += s->memory();
  reply = traffic::encode(traffic::Target{reinterpret_cast<std::uint64_t>(s->write_region.data()), s->write_memory.key,
                                          reinterpret_cast<std::uint64_t>(s->read_region.data()), s->read_memory.key,
                                          traffic::read_slots});
  if (progress_ != nullptr && !o_.quiet)
    std::fprintf(progress_, " connection %u of %u (run %016llx): QP %#x from QP %#x, %s, %u paths, %u streams, "
                            "messages up to %u B\n",
                 offer.connection, offer.connections, static_cast<unsigned long long>(offer.run), connection.qpn(),
                 request.peer_qpn, request.mode.c_str(), request.paths, request.streams, offer.slot_bytes);
  if (progress_ != nullptr) std::fflush(progress_);
  Session* raw = s.get();
  connection.set_completion_handler([this, raw](const metaroce::Completion& c) { check(*raw, c); });
  sessions_[connection.qpn()] = std::move(s);
  return metaroce::Verdict::accept;
}

// Every completion is checked before the next turn receives anything: the
// generator reuses a slot only after an ACK that the sink sent in a turn
// whose completions it has already checked.
void Sink::check(Session& s, const metaroce::Completion& c) {
  const std::uint64_t now = monotonic_ns();
  if (c.status != metaroce::Status::success) {
    s.verifier->on_failed_completion();
    if (s.result.problem.empty()) s.result.problem = fmt::format("a receive completed with {}", metaroce::to_string(c.status));
    return;
  }
  if (c.kind == metaroce::CompletionKind::receive_write_imm)
    s.verifier->on_write_imm(c.stream, c.imm.value_or(0), c.byte_len, now);
  else
    s.verifier->on_send(c.stream, c.wr_id, c.byte_len, now);
  s.last_message_ns = now;
  if (!s.post_receive(c.wr_id) && s.result.problem.empty()) s.result.problem = "re-posting a receive was refused";
}

void Sink::on_peer_close(metaroce::Connection& connection, bool superseded) {
  const auto it = sessions_.find(connection.qpn());
  if (it == sessions_.end()) return;
  Session& s = *it->second;
  if (superseded) {
    s.result.problem = "its generator started it over (a new incarnation replaced it)";
    close(s, false);
    sessions_.erase(it);
    return;
  }
  s.result.gen_reported = traffic::decode(connection.peer_close_data(), s.result.gen);
  if (!s.result.gen_reported) s.result.problem = "the generator's disconnect carried no report";
  const std::uint64_t run = s.offer.run;
  const std::uint32_t of = s.offer.connections;
  close(s, true);
  sessions_.erase(it);
  const std::lock_guard<std::mutex> lock(runs_->mutex);
  if (++runs_->closed[run] == of) {
    ++runs_->completed;
    if (o_.runs != 0 && runs_->completed >= o_.runs) runs_->finish_at = monotonic_ns() + linger_ns;
  }
}

void Sink::close(Session& s, bool closed_by_generator) {
  const std::uint64_t now = monotonic_ns();
  SessionResult& r = s.result;
  r.closed = closed_by_generator;
  if (r.gen_reported) {
    s.verifier->finish(r.gen.posted);
    if (r.gen.failed != 0 && r.problem.empty())
      r.problem = fmt::format("{} messages failed at the generator", r.gen.failed);
  }
  r.totals = s.verifier->totals();
  r.latency = s.verifier->latency();
  r.failed_completions = s.verifier->failed_completions();
  if (r.problem.empty()) r.problem = s.verifier->first_problem();
  const std::uint64_t end = s.last_message_ns != 0 ? s.last_message_ns : now;
  r.seconds = double(end - s.established_ns) / 1e9;
  r.counters = s.connection->counters();
  r_.counters.add(r.counters);
  closed_bytes_ += r.totals.verified_bytes;
  closed_messages_ += r.totals.verified;
  if (closed_by_generator) {
    s.connection->set_close_reply(traffic::encode(static_cast<const traffic::SinkReport&>(r.totals)));
    if (progress_ != nullptr && !o_.quiet)
      std::fprintf(progress_, " connection %u closed: %llu of %llu messages verified (%llu bytes), %llu wrong, "
                              "%llu missing, %llu duplicates%s%s\n",
                   r.connection, static_cast<unsigned long long>(r.totals.verified),
                   static_cast<unsigned long long>(r.gen.posted),
                   static_cast<unsigned long long>(r.totals.verified_bytes),
                   static_cast<unsigned long long>(r.totals.wrong), static_cast<unsigned long long>(r.totals.missing),
                   static_cast<unsigned long long>(r.totals.duplicates), r.problem.empty() ? "" : ": ",
                   r.problem.c_str());
    std::fflush(progress_);
  }
  s.connection->set_completion_handler({});
  forget(s);
  memory_in_use_ -= s.memory();
  r_.sessions.push_back(std::move(r));
}

// The connection and the session's memory registrations go.
void Sink::forget(Session& s) {
  std::string error;
  e_->close(s.connection, error);
  s.connection = nullptr;
  if (s.write_memory.valid()) e_->deregister_memory(s.write_memory);
  if (s.receive_memory.valid()) e_->deregister_memory(s.receive_memory);
  if (s.read_memory.valid()) e_->deregister_memory(s.read_memory);
}

void Sink::print_progress(std::uint64_t now) {
  // Several lanes: no lane sees all the connections; the summary counts them.
  if (progress_ == nullptr || o_.quiet || lanes_ > 1 || now - last_progress_ns_ < second_ns) return;
  std::uint64_t bytes = closed_bytes_, messages = closed_messages_, wrong = 0, missing = 0, duplicates = 0;
  for (const auto& [qpn, s] : sessions_) {
    const traffic::VerifierTotals& t = s->verifier->totals();
    bytes += t.verified_bytes;
    messages += t.verified;
  }
  for (const SessionResult& r : r_.sessions) {
    wrong += r.totals.wrong;
    missing += r.totals.missing;
    duplicates += r.totals.duplicates;
  }
  for (const auto& [qpn, s] : sessions_) {
    wrong += s->verifier->totals().wrong;
    missing += s->verifier->totals().missing;
    duplicates += s->verifier->totals().duplicates;
  }
  const double interval = double(now - last_progress_ns_);
  std::fprintf(progress_,
               "[%6.1f s] %zu open: %.2f Gb/s %.0f msg/s verified | %llu messages, %llu bytes | wrong %llu missing "
               "%llu duplicates %llu\n",
               double(now - start_ns_) / 1e9, sessions_.size(), double(bytes - progress_bytes_) * 8.0 / interval,
               double(messages - progress_messages_) * 1e9 / interval, static_cast<unsigned long long>(messages),
               static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(wrong),
               static_cast<unsigned long long>(missing), static_cast<unsigned long long>(duplicates));
  std::fflush(progress_);
  last_progress_ns_ = now;
  progress_bytes_ = bytes;
  progress_messages_ = messages;
}

SinkResult Sink::run() {
  if (!e_) e_ = metaroce::Endpoint::open(o_.port, r_.error);
  if (!e_) return r_;
  r_.counters = e_->counters()[2];  // every connection counter by name, all 0
  catch_stop_signals();
  metaroce::ListenOptions listening{.queue_for_accept = false};
  set_rocev2_timers(o_.rocev2, listening);
  e_->listen([this](const metaroce::IncomingRequest& request, metaroce::Connection& connection,
                    std::vector<std::uint8_t>& reply) { return accept(request, connection, reply); },
             listening);
  e_->set_peer_close_handler([this](metaroce::Connection& c, bool superseded) { on_peer_close(c, superseded); });
  if (progress_ != nullptr) {
    std::fprintf(progress_, " metaroce-sink on %s (MAC %s, address %s%s): waiting for metaroce-gen; %s\n",
                 e_->port_name().c_str(), e_->mac().c_str(), o_.port.local_ip.c_str(),
                 lanes_ > 1 ? fmt::format(", {} lcores", lanes_).c_str() : "",
                 o_.runs == 0 ? "Ctrl-C stops" : fmt::format("exits after {} run(s)", o_.runs).c_str());
    std::fprintf(progress_, " GID: %s\n rocev2 connections: %s\n", gid_text(o_.port.local_ip).c_str(),
                 rocev2_summary(o_.rocev2).c_str());
    if (lanes_ > 1) std::fprintf(progress_, " lanes: %s\n", e_->steering().c_str());
    std::fflush(progress_);
  }
  start_ns_ = last_progress_ns_ = monotonic_ns();
  const std::uint64_t end_ns =
      o_.duration_s > 0 ? start_ns_ + static_cast<std::uint64_t>(o_.duration_s * 1e9) : ~std::uint64_t{0};
  while (!stop_requested()) {
    // Completions go to their sessions' handlers, then closes to on_peer_close.
    const std::size_t work = e_->poll();
    const std::uint64_t now = monotonic_ns();
    print_progress(now);
    if (now >= runs_->finish_at.load(std::memory_order_relaxed) || now >= end_ns) break;
    e_->idle(work);
  }
  r_.interrupted = stop_requested();
  while (!sessions_.empty()) {
    auto it = sessions_.begin();
    it->second->result.problem = "never closed by its generator: what it posted is unknown";
    close(*it->second, false);
    sessions_.erase(it);
  }
  r_.endpoint = e_->counters();
  if (lanes_ == 1) e_.reset();
  {
    const std::lock_guard<std::mutex> lock(runs_->mutex);
    r_.runs_completed = runs_->completed;
  }
  LaneResult lane;
  lane.lcore = lane_;
  lane.connections = r_.sessions.size();
  for (const SessionResult& s : r_.sessions) lane.messages += s.totals.verified;
  lane.data_packets = r_.counters.get("data_packets_received");
  lane.rx_frames = r_.endpoint.empty() ? 0 : r_.endpoint[0].get("rx_frames");
  lane.tx_frames = r_.endpoint.empty() ? 0 : r_.endpoint[0].get("tx_frames");
  lane.rx_misdirected = r_.endpoint.empty() ? 0 : r_.endpoint[0].get("rx_misdirected");
  r_.lanes.push_back(lane);
  return r_;
}

struct Totals {
  std::uint64_t verified = 0, verified_bytes = 0, wrong = 0, wrong_bytes = 0, missing = 0, duplicates = 0,
                failed_completions = 0, writes_checked = 0, gen_posted = 0, closed = 0;
  LatencyHistogram latency;
};

Totals totals_of(const SinkResult& r) {
  Totals t;
  for (const SessionResult& s : r.sessions) {
    t.verified += s.totals.verified;
    t.verified_bytes += s.totals.verified_bytes;
    t.wrong += s.totals.wrong;
    t.wrong_bytes += s.totals.wrong_bytes;
    t.missing += s.totals.missing;
    t.duplicates += s.totals.duplicates;
    t.failed_completions += s.failed_completions;
    t.writes_checked += s.totals.writes_checked;
    t.gen_posted += s.gen.posted;
    t.closed += s.closed ? 1 : 0;
    t.latency.merge(s.latency);
  }
  return t;
}

}  // namespace

bool SessionResult::ok() const noexcept {
  return closed && gen_reported && problem.empty() && totals.wrong == 0 && totals.missing == 0 &&
         totals.duplicates == 0 && failed_completions == 0 && totals.verified == gen.posted && gen.failed == 0;
}

bool SinkResult::ok() const noexcept {
  if (!error.empty() || sessions.empty()) return false;
  return std::all_of(sessions.begin(), sessions.end(), [](const SessionResult& s) { return s.ok(); });
}

SinkResult run_sink(const SinkOptions& options, std::FILE* progress) {
  if (options.lcores <= 1) {
    Sink s(options, progress);
    return s.run();
  }
  SinkResult all;
  std::vector<std::unique_ptr<metaroce::Endpoint>> lanes =
      metaroce::Endpoint::open_lanes(options.port, options.lcores, all.error);
  if (lanes.empty()) return all;
  Runs runs;
  std::vector<SinkResult> results(lanes.size());
  std::vector<std::thread> threads;
  std::atomic<unsigned> done{0};
  for (std::uint16_t k = 0; k < lanes.size(); ++k)
    threads.emplace_back([&, k] {
      Sink s(options, k == 0 ? progress : nullptr, k, options.lcores, &runs, std::move(lanes[k]));
      results[k] = s.run();
      lanes[k] = s.take_endpoint();
      apps::turn_until_lanes_done(lanes[k].get(), done, options.lcores);
    });
  for (auto& t : threads) t.join();
  for (auto& lane : lanes) lane.reset();  // one after another
  for (SinkResult& r : results) {
    if (all.error.empty() && !r.error.empty()) all.error = r.error;
    for (SessionResult& x : r.sessions) all.sessions.push_back(std::move(x));
    all.refused += r.refused;
    all.interrupted = all.interrupted || r.interrupted;
    all.runs_completed = std::max(all.runs_completed, r.runs_completed);
    if (all.endpoint.empty()) {
      all.endpoint = r.endpoint;
    } else {
      for (std::size_t g = 0; g < std::min(all.endpoint.size(), r.endpoint.size()); ++g) all.endpoint[g].add(r.endpoint[g]);
    }
    if (all.counters.counters.empty()) all.counters = r.counters; else all.counters.add(r.counters);
    for (const LaneResult& l : r.lanes) all.lanes.push_back(l);
  }
  std::sort(all.sessions.begin(), all.sessions.end(), [](const SessionResult& a, const SessionResult& b) {
    return a.run != b.run ? a.run < b.run : a.connection < b.connection;
  });
  return all;
}

std::string sink_json(const SinkOptions& o, const SinkResult& r) {
  const Totals t = totals_of(r);
  JsonLine j;
  j.add("app", "metaroce-sink");
  j.add("ok", r.ok());
  std::string first;
  if (!r.error.empty()) first = r.error;
  for (const SessionResult& s : r.sessions)
    if (first.empty() && !s.ok())
      first = fmt::format("connection {}: {}", s.connection,
                          s.problem.empty() ? fmt::format("verified {} of {} messages", s.totals.verified, s.gen.posted)
                                            : s.problem);
  if (first.empty() && r.sessions.empty()) first = "no connection came";
  j.add("first_problem", first);
  j.add("runs_completed", r.runs_completed);
  j.add("runs_expected", o.runs);
  j.add("interrupted", r.interrupted);
  j.add("connections", std::uint64_t{r.sessions.size()});
  j.add("connections_closed", t.closed);
  j.add("refused", r.refused);
  j.add("messages", t.verified);
  j.add("bytes", t.verified_bytes);
  j.add("gen_posted", t.gen_posted);
  j.add("wrong", t.wrong);
  j.add("wrong_bytes", t.wrong_bytes);
  j.add("missing", t.missing);
  j.add("duplicates", t.duplicates);
  j.add("failed_completions", t.failed_completions);
  j.add("writes_checked", t.writes_checked);
  add_latency_json(j, "latency_us", t.latency);
  j.begin_array("per_connection");
  for (const SessionResult& s : r.sessions) {
    j.begin_array_object();
    j.add("connection", s.connection);
    j.add("run", fmt::format("{:016x}", s.run));
    j.add("qpn", s.qpn);
    j.add("ok", s.ok());
    j.add("messages", s.totals.verified);
    j.add("bytes", s.totals.verified_bytes);
    j.add("seconds", s.seconds);
    j.add("goodput_gbps", s.seconds > 0 ? double(s.totals.verified_bytes) * 8.0 / s.seconds / 1e9 : 0.0);
    add_latency_json(j, "latency_us", s.latency);
    j.add("wrong", s.totals.wrong);
    j.add("wrong_bytes", s.totals.wrong_bytes);
    if (s.totals.first_bad_sequence != ~std::uint64_t{0}) j.add("first_bad_sequence", s.totals.first_bad_sequence);
    if (s.totals.first_bad_offset != traffic::no_offset) j.add("first_bad_offset", s.totals.first_bad_offset);
    j.add("missing", s.totals.missing);
    j.add("duplicates", s.totals.duplicates);
    j.add("failed_completions", s.failed_completions);
    j.add("writes_checked", s.totals.writes_checked);
    j.add("closed", s.closed);
    j.add("gen_posted", s.gen.posted);
    j.add("gen_completed", s.gen.completed);
    j.add("gen_failed", s.gen.failed);
    j.add("problem", s.problem);
    j.end_object();
  }
  j.end_array();
  add_lanes_json(j, "receiver", r.lanes);
  add_counters_json(j, r.counters, r.endpoint);
  return std::move(j).finish();
}

void print_sink_summary(std::FILE* out, const SinkResult& r) {
  const Totals t = totals_of(r);
  std::fprintf(out, " %zu connections (%llu closed by their generator): verified %llu of %llu messages, %llu bytes; "
                    "wrong %llu (%llu bytes), missing %llu, duplicates %llu\n",
               r.sessions.size(), static_cast<unsigned long long>(t.closed), static_cast<unsigned long long>(t.verified),
               static_cast<unsigned long long>(t.gen_posted), static_cast<unsigned long long>(t.verified_bytes),
               static_cast<unsigned long long>(t.wrong), static_cast<unsigned long long>(t.wrong_bytes),
               static_cast<unsigned long long>(t.missing), static_cast<unsigned long long>(t.duplicates));
  std::fprintf(out, " completion latency (generator post to completion here, write-imm and send): p50 %.1f us, "
                    "p99 %.1f us, p99.9 %.1f us, max %.1f us\n",
               double(t.latency.percentile(0.5)) / 1e3, double(t.latency.percentile(0.99)) / 1e3,
               double(t.latency.percentile(0.999)) / 1e3, double(t.latency.max()) / 1e3);
  for (const SessionResult& s : r.sessions)
    if (!s.ok())
      std::fprintf(out, " connection %u (QP %#x): %s\n", s.connection, s.qpn,
                   s.problem.empty() ? fmt::format("verified {} of {} messages", s.totals.verified, s.gen.posted).c_str()
                                     : s.problem.c_str());
  if (r.sessions.empty()) std::fprintf(out, " no connection came\n");
  std::fprintf(out, " %s\n", r.ok() ? "ok: every message arrived once, every byte right" : "FAILED");
}

}  // namespace metaroce::apps::sink
