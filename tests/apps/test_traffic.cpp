// What metaroce-gen and metaroce-sink agree on, in process: the message
// bytes, the handshake's private data, the sizes, the latency histogram, and
// the planner and verifier driven against each other through a model of a
// reliable connection (streams complete in order), with faults injected
// where a broken transport would put them.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>
#include <vector>

#include "common/latency_histogram.hpp"
#include "common/traffic_handshake.hpp"
#include "common/traffic_message.hpp"
#include "fabric/random.hpp"
#include "metaroce-gen/message_planner.hpp"
#include "metaroce-gen/size_distribution.hpp"
#include "metaroce-sink/connection_verifier.hpp"

namespace metaroce::apps::traffic {
namespace {

std::vector<std::uint8_t> message(std::uint32_t connection, std::uint64_t sequence, std::uint32_t length,
                                  Op op = Op::send) {
  std::vector<std::uint8_t> bytes(length);
  MessageHeader h;
  h.op = op;
  h.connection = connection;
  h.sequence = sequence;
  h.length = length;
  h.write_index = 7;
  h.post_ns = 123;
  fill_message(bytes.data(), h);
  return bytes;
}

TEST(TrafficMessage, HeaderRoundTripsAndPatternChecksClean) {
  for (const std::uint32_t length : {32u, 33u, 39u, 40u, 4096u, 65535u}) {
    const std::vector<std::uint8_t> m = message(3, 99, length, Op::write_imm);
    ASSERT_TRUE(header_valid(m.data()));
    const MessageHeader h = decode_header(m.data());
    EXPECT_EQ(h.op, Op::write_imm);
    EXPECT_EQ(h.connection, 3u);
    EXPECT_EQ(h.sequence, 99u);
    EXPECT_EQ(h.length, length);
    EXPECT_EQ(h.write_index, 7u);
    EXPECT_EQ(h.post_ns, 123u);
    const PatternCheck c = check_pattern(m.data(), 3, 99, length);
    EXPECT_EQ(c.wrong_bytes, 0u) << length;
    EXPECT_EQ(c.first_bad_offset, no_offset) << length;
  }
}

TEST(TrafficMessage, EveryFlippedByteIsFoundAtItsOffset) {
  std::vector<std::uint8_t> m = message(1, 5, 1001);
  for (std::uint64_t at = header_size; at < m.size(); ++at) {
    m[at] ^= 0x10;
    const PatternCheck c = check_pattern(m.data(), 1, 5, m.size());
    ASSERT_EQ(c.wrong_bytes, 1u) << at;
    ASSERT_EQ(c.first_bad_offset, at);
    m[at] ^= 0x10;
  }
}

TEST(TrafficMessage, BytesOfAnotherMessageConnectionOrOffsetAreWrong) {
  const std::vector<std::uint8_t> m = message(1, 5, 4096);
  // Every word differs in another message, another connection, or shifted by 8.
  EXPECT_EQ(check_pattern(m.data(), 1, 6, 4096).first_bad_offset, header_size);
  EXPECT_EQ(check_pattern(m.data(), 2, 5, 4096).first_bad_offset, header_size);
  std::vector<std::uint8_t> shifted(4096);
  std::memcpy(shifted.data() + 8, m.data(), 4088);
  EXPECT_EQ(check_pattern(shifted.data(), 1, 5, 4096).first_bad_offset, header_size);
  // A stretch of message 6 placed at offset 2000 of message 5: found there.
  std::vector<std::uint8_t> mixed = m;
  const std::vector<std::uint8_t> other = message(1, 6, 4096);
  std::memcpy(mixed.data() + 2000, other.data() + 2000, 64);
  const PatternCheck c = check_pattern(mixed.data(), 1, 5, 4096);
  std::uint64_t differ = 0;  // a byte may agree by chance
  for (std::size_t k = 2000; k < 2064; ++k) differ += m[k] != other[k] ? 1 : 0;
  EXPECT_GT(differ, 56u);
  EXPECT_EQ(c.wrong_bytes, differ);
  EXPECT_EQ(c.first_bad_offset, m[2000] != other[2000] ? 2000u : 2001u);
}

TEST(TrafficMessage, HeaderCheckNamesTheFirstWrongField) {
  const std::vector<std::uint8_t> m = message(1, 5, 64, Op::send);
  MessageHeader want = decode_header(m.data());
  EXPECT_EQ(check_header(m.data(), want).wrong_bytes, 0u);
  want.sequence = 6;  // field at offset 8, last byte differs
  PatternCheck c = check_header(m.data(), want);
  EXPECT_EQ(c.first_bad_offset, 15u);
  EXPECT_EQ(c.wrong_bytes, 1u);
  want.sequence = 5;
  want.post_ns = 999;  // not compared
  EXPECT_EQ(check_header(m.data(), want).wrong_bytes, 0u);
}

TEST(TrafficHandshake, PrivateDataRoundTripsAndFitsTheCm) {
  Offer o{0x1122334455667788ull, 3, 64, 20, 10, 65536};
  std::vector<std::uint8_t> b = encode(o);
  EXPECT_LE(b.size(), 64u);
  Offer back;
  ASSERT_TRUE(decode(b, back));
  EXPECT_EQ(back.run, o.run);
  EXPECT_EQ(back.connection, 3u);
  EXPECT_EQ(back.connections, 64u);
  EXPECT_EQ(back.write_slots, 20u);
  EXPECT_EQ(back.receives, 10u);
  EXPECT_EQ(back.slot_bytes, 65536u);
  b.pop_back();
  EXPECT_FALSE(decode(b, back));  // short
  o.connection = 64;
  EXPECT_FALSE(decode(encode(o), back));  // index beyond the run
  EXPECT_FALSE(decode(std::vector<std::uint8_t>(30, 0), back));  // not an offer

  SinkReport s;
  s.verified = 1;
  s.verified_bytes = 2;
  s.wrong = 3;
  s.wrong_bytes = 4;
  s.missing = 5;
  s.duplicates = 6;
  s.first_bad_sequence = 7;
  s.first_bad_offset = 8;
  const std::vector<std::uint8_t> sb = encode(s);
  EXPECT_EQ(sb.size(), 64u);
  SinkReport sback;
  ASSERT_TRUE(decode(sb, sback));
  EXPECT_EQ(sback.verified, 1u);
  EXPECT_EQ(sback.duplicates, 6u);
  EXPECT_EQ(sback.first_bad_offset, 8u);
  GenReport g{10, 9, 8, 1};
  GenReport gback;
  ASSERT_TRUE(decode(encode(g), gback));
  EXPECT_EQ(gback.posted, 10u);
  EXPECT_EQ(gback.failed, 1u);
}

TEST(SizeDistribution, FixedRangeListWeightsAndCsv) {
  SizeDistribution d;
  std::string error;
  fabric::Random random(1);
  ASSERT_TRUE(SizeDistribution::parse("4096", d, error)) << error;
  EXPECT_EQ(d.draw(random), 4096u);
  EXPECT_EQ(d.max(), 4096u);

  ASSERT_TRUE(SizeDistribution::parse("64-128", d, error)) << error;
  std::map<std::uint64_t, int> seen;
  for (int i = 0; i < 20000; ++i) ++seen[d.draw(random)];
  EXPECT_EQ(seen.size(), 65u);  // every size of the range, no other
  EXPECT_EQ(seen.begin()->first, 64u);
  EXPECT_EQ(seen.rbegin()->first, 128u);

  ASSERT_TRUE(SizeDistribution::parse("64:3,1000:0,65536:1", d, error)) << error;
  EXPECT_EQ(d.max(), 65536u);  // a zero weight is never drawn, nor counted in max
  EXPECT_DOUBLE_EQ(d.mean(), (64.0 * 3 + 65536.0) / 4);
  seen.clear();
  for (int i = 0; i < 40000; ++i) ++seen[d.draw(random)];
  EXPECT_EQ(seen.count(1000), 0u);
  EXPECT_NEAR(seen[64] / 40000.0, 0.75, 0.01);

  ASSERT_TRUE(SizeDistribution::parse_csv("size,weight\n# comment\n\n100,1\n200\n 300 , 2\n", "t.csv", d, error))
      << error;
  EXPECT_EQ(d.min(), 100u);
  EXPECT_EQ(d.max(), 300u);
  EXPECT_DOUBLE_EQ(d.mean(), (100.0 + 200.0 + 600.0) / 4);
}

TEST(SizeDistribution, AcceptsPerftestSuffixes) {
  SizeDistribution d;
  std::string error;
  ASSERT_TRUE(SizeDistribution::parse("64k", d, error)) << error;
  EXPECT_EQ(d.min(), 65536u);
  EXPECT_EQ(d.max(), 65536u);
  ASSERT_TRUE(SizeDistribution::parse("64-1M", d, error)) << error;
  EXPECT_EQ(d.min(), 64u);
  EXPECT_EQ(d.max(), 1048576u);
  ASSERT_TRUE(SizeDistribution::parse("4K:3,1G:1", d, error)) << error;
  EXPECT_EQ(d.min(), 4096u);
  EXPECT_EQ(d.max(), 1073741824u);
  EXPECT_FALSE(SizeDistribution::parse("2G", d, error));
  EXPECT_EQ(error, "--size '2G': size 2147483648 is out of range: give 32..1073741824 bytes (every message starts "
                   "with its 32-byte header)");
}

TEST(SizeDistribution, ErrorsNameTheFix) {
  SizeDistribution d;
  std::string error;
  EXPECT_FALSE(SizeDistribution::parse("16", d, error));
  EXPECT_EQ(error, "--size '16': size 16 is out of range: give 32..1073741824 bytes (every message starts with its "
                   "32-byte header)");
  EXPECT_FALSE(SizeDistribution::parse("200-100", d, error));
  EXPECT_EQ(error, "--size '200-100': the range is empty: give MIN-MAX with MIN <= MAX");
  EXPECT_FALSE(SizeDistribution::parse("64x", d, error));
  EXPECT_EQ(error, "--size '64x' is not a size: give BYTES (65536, 64k, 1M), MIN-MAX, A,B,C or A:WEIGHT,B:WEIGHT");
  EXPECT_FALSE(SizeDistribution::parse("64-1q", d, error));
  EXPECT_EQ(error, "--size '64-1q' is not a range: give MIN-MAX in bytes, e.g. 64-65536 or 64-64k");
  EXPECT_FALSE(SizeDistribution::parse("64:x", d, error));
  EXPECT_EQ(error, "--size '64:x': '64:x' is not SIZE or SIZE:WEIGHT (weights are numbers >= 0)");
  EXPECT_FALSE(SizeDistribution::parse("64:0", d, error));
  EXPECT_EQ(error, "--size '64:0': no size with a positive weight: give at least one");
  EXPECT_FALSE(SizeDistribution::parse_csv("100\nabc\n", "s.csv", d, error));
  EXPECT_EQ(error, "s.csv line 2: 'abc' is not SIZE or SIZE,WEIGHT (bytes, then a number >= 0)");
  EXPECT_FALSE(SizeDistribution::load_csv("/nonexistent/sizes.csv", d, error));
  EXPECT_EQ(error, "--size-file: cannot read '/nonexistent/sizes.csv': check the path");
}

TEST(LatencyHistogram, ExactBelow64AndWithinOneSixtyFourthAbove) {
  LatencyHistogram h;
  for (std::uint64_t v = 1; v <= 50; ++v) h.add(v);
  EXPECT_EQ(h.percentile(0.5), 25u);
  EXPECT_EQ(h.percentile(1.0), 50u);
  EXPECT_EQ(h.min(), 1u);
  LatencyHistogram big;
  for (std::uint64_t v = 1; v <= 100000; ++v) big.add(v * 1000);
  for (const double q : {0.5, 0.99, 0.999}) {
    const double want = q * 100000 * 1000;
    EXPECT_NEAR(double(big.percentile(q)), want, want / 64) << q;
  }
  EXPECT_EQ(big.max(), 100'000'000u);
  EXPECT_EQ(big.percentile(1.0), 100'000'000u);  // clamped to the exact max
  for (std::uint64_t v : {63ull, 64ull, 65ull, 1ull << 40, ~0ull}) {
    const std::size_t i = LatencyHistogram::index(v);
    EXPECT_LE(LatencyHistogram::lower(i), v);
    EXPECT_GT(LatencyHistogram::lower(i) + LatencyHistogram::width(i) - 1, v - 1);
  }
}

// A generator connection and a sink connection joined by a model of the
// transport: each stream delivers its messages in order (bytes placed, then
// the completion), streams interleave at random; the generator sees its
// completion after the sink handled the message, as with a real ACK.
class Link {
 public:
  Link(std::uint16_t streams, std::uint32_t tx_depth, std::uint32_t slot_bytes, std::uint64_t seed,
       std::uint32_t min_size = header_size)
      : random_(seed), sizes_random_(seed, 1), tx_depth_(tx_depth), min_size_(min_size) {
    const std::uint32_t per_stream = (tx_depth + streams - 1) / streams;
    layout_.streams = streams;
    layout_.write_slots = 2 * per_stream + 4;
    layout_.receives = per_stream + 2;
    layout_.slot_bytes = slot_bytes;
    vlayout_.connection = 9;
    vlayout_.streams = streams;
    vlayout_.write_slots = layout_.write_slots;
    vlayout_.receives = layout_.receives;
    vlayout_.slot_bytes = slot_bytes;
    writes_.assign(ConnectionVerifier::write_region_bytes(vlayout_), 0);
    receives_.assign(ConnectionVerifier::receive_region_bytes(vlayout_), 0);
    planner_ = std::make_unique<MessagePlanner>(layout_);
    verifier_ = std::make_unique<ConnectionVerifier>(vlayout_, writes_.data(), receives_.data());
    queues_.resize(streams);
    posted_receives_.resize(streams);
    for (std::uint16_t s = 0; s < streams; ++s)
      for (std::uint32_t j = 0; j < layout_.receives; ++j) posted_receives_[s].push_back(s * layout_.receives + j);
  }

  struct Sent {
    PlannedMessage m;
    std::vector<std::uint8_t> bytes;
  };

  // Posts while the planner lets it (or `count` is reached).
  void post(std::uint64_t count, const std::array<double, 3>& mix) {
    while (in_flight_ < tx_depth_ && planner_->posted() < count) {
      if (!pending_) {
        const double u = random_.uniform() * (mix[0] + mix[1] + mix[2]);
        pending_op_ = u < mix[0] ? Op::write : u < mix[0] + mix[1] ? Op::write_imm : Op::send;
        pending_size_ = min_size_ + sizes_random_.below(layout_.slot_bytes - min_size_ + 1);
        pending_ = true;
      }
      PlannedMessage m;
      if (!planner_->plan(pending_op_, m)) return;
      Sent s{m, std::vector<std::uint8_t>(pending_size_)};
      MessageHeader h{m.op, vlayout_.connection, m.sequence, static_cast<std::uint32_t>(pending_size_), m.write_index, 0};
      fill_message(s.bytes.data(), h);
      planner_->commit(m);
      ops_[static_cast<std::size_t>(m.op)]++;
      queues_[m.stream].push_back(std::move(s));
      ++in_flight_;
      pending_ = false;
    }
  }

  // Delivers the head message of a random non-empty stream. Hooks let a test
  // damage it before the sink sees it.
  bool deliver_one() {
    std::vector<std::uint16_t> ready;
    for (std::uint16_t s = 0; s < queues_.size(); ++s)
      if (!queues_[s].empty()) ready.push_back(s);
    if (ready.empty()) return false;
    const std::uint16_t s = ready[random_.below(ready.size())];
    Sent sent = std::move(queues_[s].front());
    queues_[s].pop_front();
    const PlannedMessage& m = sent.m;
    const bool drop = drop_sequence_ == m.sequence;
    if (m.op == Op::send) {
      const std::uint64_t buffer = posted_receives_[s].front();
      if (!drop) {
        posted_receives_[s].pop_front();
        std::memcpy(receives_.data() + verifier_->receive_offset(buffer), sent.bytes.data(), sent.bytes.size());
        if (corrupt_sequence_ == m.sequence) receives_[verifier_->receive_offset(buffer) + corrupt_offset_] ^= 1;
        verifier_->on_send(s, buffer, sent.bytes.size(), 0);
        if (duplicate_sequence_ == m.sequence) verifier_->on_send(s, buffer, sent.bytes.size(), 0);
        posted_receives_[s].push_back(buffer);
      }
    } else {
      const std::uint64_t at = verifier_->write_offset(s, m.write_index);
      if (!drop) {
        std::memcpy(writes_.data() + at, sent.bytes.data(), sent.bytes.size());
        if (corrupt_sequence_ == m.sequence) writes_[at + corrupt_offset_] ^= 1;
      }
      if (m.op == Op::write_imm && !drop) {
        verifier_->on_write_imm(s, m.write_index, sent.bytes.size(), 0);
        if (duplicate_sequence_ == m.sequence) verifier_->on_write_imm(s, m.write_index, sent.bytes.size(), 0);
      }
    }
    planner_->complete(m);
    --in_flight_;
    return true;
  }

  void run(std::uint64_t count, const std::array<double, 3>& mix) {
    for (;;) {
      post(count, mix);
      // Deliver a random number before posting again, so streams interleave.
      const std::uint64_t n = 1 + random_.below(4);
      bool any = false;
      for (std::uint64_t k = 0; k < n; ++k) any = deliver_one() || any;
      if (!any && planner_->posted() >= count) break;
      ASSERT_TRUE(any || planner_->posted() < count) << "stalled";
      if (!any) {
        ASSERT_GT(in_flight_, 0u) << "the planner refused with nothing in flight: a deadlock";
      }
    }
    verifier_->finish(planner_->posted());
  }

  fabric::Random random_, sizes_random_;
  std::uint32_t tx_depth_;
  std::uint32_t min_size_;
  PlannerLayout layout_;
  VerifierLayout vlayout_;
  std::vector<std::uint8_t> writes_, receives_;
  std::unique_ptr<MessagePlanner> planner_;
  std::unique_ptr<ConnectionVerifier> verifier_;
  std::vector<std::deque<Sent>> queues_;
  std::vector<std::deque<std::uint64_t>> posted_receives_;
  std::array<std::uint64_t, 3> ops_{};
  std::uint32_t in_flight_ = 0;
  bool pending_ = false;
  Op pending_op_ = Op::write;
  std::uint64_t pending_size_ = 0;
  std::uint64_t drop_sequence_ = ~0ull, corrupt_sequence_ = ~0ull, duplicate_sequence_ = ~0ull;
  std::uint64_t corrupt_offset_ = 0;
};

constexpr std::array<double, 3> even_mix = {1, 1, 1};

TEST(PlannerAndVerifier, EveryMessageOfEveryMixIsVerifiedOnce) {
  for (const std::uint16_t streams : {1, 3, 8}) {
    for (const auto& mix : {even_mix, std::array<double, 3>{1, 0, 0}, std::array<double, 3>{8, 1, 0},
                            std::array<double, 3>{0, 0, 1}, std::array<double, 3>{1, 0, 1}}) {
      Link link(streams, 16, 300, streams * 7 + static_cast<std::uint64_t>(mix[0]));
      link.run(3000, mix);
      const VerifierTotals& t = link.verifier_->totals();
      SCOPED_TRACE(::testing::Message() << streams << " streams, mix " << mix[0] << "/" << mix[1] << "/" << mix[2]);
      EXPECT_EQ(t.verified, 3000u);
      EXPECT_EQ(t.wrong, 0u);
      EXPECT_EQ(t.missing, 0u);
      EXPECT_EQ(t.duplicates, 0u);
      EXPECT_TRUE(link.verifier_->clean());
      // Every plain write was checked in its slot, at a later completion or at the end.
      EXPECT_EQ(t.writes_checked, link.ops_[0]);
      EXPECT_EQ(link.ops_[0] + link.ops_[1] + link.ops_[2], 3000u);
      if (mix[1] == 0 && mix[2] == 0) {  // all writes: forced fences drain the ring
        EXPECT_GT(link.planner_->forced_fences(), 0u);
        EXPECT_EQ(link.planner_->forced_fences(), link.ops_[1]);
      }
    }
  }
}

TEST(PlannerAndVerifier, ACorruptedByteOfAPlainWriteIsNamedByMessageAndOffset) {
  Link link(2, 8, 200, 5, 100);
  link.corrupt_sequence_ = 0;
  // Message 0 of an all-write run: a plain write (the first forced fence comes later).
  link.corrupt_offset_ = 77;
  link.run(500, std::array<double, 3>{1, 0, 0});
  const VerifierTotals& t = link.verifier_->totals();
  EXPECT_EQ(t.wrong, 1u);
  EXPECT_EQ(t.wrong_bytes, 1u);
  EXPECT_EQ(t.first_bad_sequence, 0u);
  EXPECT_EQ(t.first_bad_offset, 77u);
  EXPECT_EQ(t.verified, 499u);
  EXPECT_EQ(t.missing, 0u);
  const std::string& problem = link.verifier_->first_problem();
  EXPECT_EQ(problem.rfind("message 0: write of ", 0), 0u) << problem;
  EXPECT_NE(problem.find(" bytes on stream 0: 1 wrong bytes, the first at offset 77"), std::string::npos) << problem;
}

TEST(PlannerAndVerifier, ACorruptedSendIsWrongNotMissing) {
  Link link(1, 8, 200, 6, 100);
  link.corrupt_sequence_ = 10;
  link.corrupt_offset_ = 40;
  link.run(200, std::array<double, 3>{0, 0, 1});
  EXPECT_EQ(link.verifier_->totals().wrong, 1u);
  EXPECT_EQ(link.verifier_->totals().first_bad_sequence, 10u);
  EXPECT_EQ(link.verifier_->totals().first_bad_offset, 40u);
  EXPECT_EQ(link.verifier_->totals().verified, 199u);
}

TEST(PlannerAndVerifier, APlainWriteThatNeverLandedIsMissing) {
  // One stream, all writes, 20 slots: writes 0..9 plain, 10 forced to a
  // write-imm, 11..20 plain, 21 forced, ... Write 25 goes to slot 5, which
  // still holds write 5 when the next fence (32) checks it.
  Link link(1, 8, 200, 7);
  link.drop_sequence_ = 25;
  link.run(100, std::array<double, 3>{1, 0, 0});
  const VerifierTotals& t = link.verifier_->totals();
  EXPECT_EQ(t.missing, 1u);
  EXPECT_EQ(t.first_bad_sequence, 25u);
  EXPECT_EQ(link.verifier_->first_problem(),
            "message 25 missing: its write never landed (the slot holds an older message)");
  EXPECT_EQ(t.verified, 99u);
  EXPECT_EQ(t.wrong, 0u);
}

TEST(PlannerAndVerifier, ASendThatNeverCameIsMissingWhenTheStreamGoesOn) {
  Link link(2, 8, 200, 8);
  link.drop_sequence_ = 6;  // stream 0
  link.run(100, std::array<double, 3>{0, 0, 1});
  const VerifierTotals& t = link.verifier_->totals();
  EXPECT_EQ(t.missing, 1u);
  EXPECT_EQ(t.first_bad_sequence, 6u);
  EXPECT_EQ(t.verified, 99u);
  EXPECT_EQ(link.verifier_->first_problem(), "message 6 missing: the stream went on without it");
}

TEST(PlannerAndVerifier, MessagesCompletingTwiceAreDuplicates) {
  {
    Link link(1, 8, 200, 9);
    link.duplicate_sequence_ = 3;
    link.run(50, std::array<double, 3>{0, 0, 1});
    EXPECT_EQ(link.verifier_->totals().duplicates, 1u);
    EXPECT_EQ(link.verifier_->totals().verified, 50u);
    EXPECT_EQ(link.verifier_->first_problem(), "message 3 (send) completed a second time");
  }
  {
    Link link(1, 8, 200, 10);
    link.duplicate_sequence_ = 3;
    link.run(50, std::array<double, 3>{0, 1, 0});
    EXPECT_EQ(link.verifier_->totals().duplicates, 1u);
    EXPECT_EQ(link.verifier_->totals().verified, 50u);
    EXPECT_EQ(link.verifier_->first_problem(), "write 3 of stream 0 (write-imm) completed a second time");
  }
}

TEST(PlannerAndVerifier, FinishCountsWhatNeverCame) {
  VerifierLayout l;
  l.connection = 1;
  l.streams = 2;
  l.write_slots = 4;
  l.receives = 2;
  l.slot_bytes = 64;
  std::vector<std::uint8_t> w(ConnectionVerifier::write_region_bytes(l)), r(ConnectionVerifier::receive_region_bytes(l));
  ConnectionVerifier v(l, w.data(), r.data());
  // Message 0 (stream 0) arrives as a send; messages 1..4 never do.
  const std::vector<std::uint8_t> m0 = message(1, 0, 64, Op::send);
  MessageHeader h = decode_header(m0.data());
  h.write_index = 0;
  std::vector<std::uint8_t> bytes(64);
  fill_message(bytes.data(), h);
  std::memcpy(r.data(), bytes.data(), 64);
  v.on_send(0, 0, 64, 0);
  v.finish(5);
  EXPECT_EQ(v.totals().verified, 1u);
  EXPECT_EQ(v.totals().missing, 4u);  // 2, 4 on stream 0; 1, 3 on stream 1
  EXPECT_FALSE(v.clean());
}

TEST(MessagePlanner, WaitsForItsSlotsAndReceives) {
  PlannerLayout l;
  l.streams = 1;
  l.write_slots = 4;
  l.receives = 1;
  l.slot_bytes = 64;
  MessagePlanner p(l);
  PlannedMessage m;
  // One receive: a second send waits for the first's completion.
  ASSERT_TRUE(p.plan(Op::send, m));
  p.commit(m);
  EXPECT_FALSE(p.plan(Op::send, m));
  // Plain writes: two (write_slots / 2) before one is forced to fence, which
  // needs the receive too.
  ASSERT_TRUE(p.plan(Op::write, m));
  EXPECT_EQ(m.remote_offset, 0u);
  p.commit(m);
  ASSERT_TRUE(p.plan(Op::write, m));
  EXPECT_EQ(m.remote_offset, 64u);
  p.commit(m);
  EXPECT_FALSE(p.plan(Op::write, m));  // would be a forced write-imm: no receive free
}

}  // namespace
}  // namespace metaroce::apps::traffic
