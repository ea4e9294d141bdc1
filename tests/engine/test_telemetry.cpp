// TelemetryPublisher::set_connections: a host whose connections come and go
// (the remote apps) hands the publisher each new list on its lcore; the
// snapshot the telemetry thread reads follows within 64 maybe_publish calls
// and never reaches into a connection destroyed after its removal (under
// ASan a stale pointer would be a use after free). The test's thread owns
// the hosts (no lcore is launched).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/loopback.hpp"
#include "engine/telemetry.hpp"

namespace metaroce::engine {
namespace {

std::vector<std::uint32_t> published_qpns(const TelemetryPublisher& p) {
  std::vector<std::uint32_t> qpns;
  for (const ConnectionSnapshot& c : p.snapshot().connections) qpns.push_back(c.local_qpn);
  std::sort(qpns.begin(), qpns.end());
  return qpns;
}

// maybe_publish reads the clock every 64th call.
void turns(TelemetryPublisher& p, int n = 64) {
  for (int i = 0; i < n; ++i) p.maybe_publish();
}

TEST(Telemetry, SnapshotFollowsTheConnectionList) {
  LoopbackConfig config;
  config.ports.mbufs = 1024;
  config.hosts.tx_mbufs = 1024;
  config.qps = 2;
  std::string error;
  auto lb = Loopback::create(config, error);
  ASSERT_TRUE(lb) << error;
  EngineHost& host = lb->host_a();

  // An hour: every publication after the first comes from a list change.
  TelemetryPublisher publisher(host, {&lb->connection_a(0)}, 3'600'000'000'000);
  EXPECT_EQ(published_qpns(publisher), (std::vector<std::uint32_t>{0x101})) << "published on construction";

  // A third connection on host A, as the remote apps add one per size.
  transport::ConnectionConfig extra = lb->connection_a(0).config();
  extra.local_qpn = 0x1ff;
  transport::Connection* added = host.add_connection(extra, nullptr, error);
  ASSERT_NE(added, nullptr) << error;
  publisher.set_connections({&lb->connection_a(0), &lb->connection_a(1), added});
  EXPECT_EQ(published_qpns(publisher), (std::vector<std::uint32_t>{0x101})) << "not yet: at the next clock check";
  turns(publisher);
  EXPECT_EQ(published_qpns(publisher), (std::vector<std::uint32_t>{0x101, 0x102, 0x1ff}));
  EXPECT_EQ(publisher.connections().size(), 3u);

  // Off the list first, then destroyed; later publications never touch it.
  publisher.set_connections({&lb->connection_a(1)});
  ASSERT_TRUE(host.remove_connection(0x1ff));
  turns(publisher);
  EXPECT_EQ(published_qpns(publisher), (std::vector<std::uint32_t>{0x102}));
  const std::uint64_t publications = publisher.snapshot().publications;
  turns(publisher, 64 * 3);
  EXPECT_EQ(publisher.snapshot().publications, publications) << "nothing changed since";

  publisher.set_connections({});
  turns(publisher);
  EXPECT_TRUE(published_qpns(publisher).empty());
  EXPECT_EQ(publisher.snapshot().publications, publications + 1);
}

}  // namespace
}  // namespace metaroce::engine
