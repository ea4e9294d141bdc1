// Drivers-config presets: every key, every error path with its exact message,
// and the EAL command line a preset and a machine give.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "engine/eal.hpp"
#include "engine/preset.hpp"

namespace metaroce::engine {
namespace {

std::string parse_error(const std::string& text) {
  std::istringstream in(text);
  DriverPreset preset;
  std::string error;
  EXPECT_FALSE(parse_preset(in, "test.ini", preset, error)) << text;
  return error;
}

DriverPreset parse_ok(const std::string& text) {
  std::istringstream in(text);
  DriverPreset preset;
  std::string error;
  EXPECT_TRUE(parse_preset(in, "test.ini", preset, error)) << error;
  return preset;
}

TEST(Preset, EveryKeyParses) {
  const DriverPreset p = parse_ok(
      "[port]\ndriver=net_pcap\nvdev_args=rx_pcap=in.pcap,tx_pcap=out.pcap\nqueues=2\nrx_desc=512\n"
      "tx_desc=2048\nmbufs=4096\nmbuf_data_room=4096\nmtu=4200\nicrc_offload=true\nmulti_segment_tx=no\n"
      "zero_copy_threshold=1024\n[eal]\nlcores=2-3\nmemory_mb=256\nhugepages=no\nlog_level=debug\n");
  EXPECT_EQ(p.port.driver, Driver::net_pcap);
  EXPECT_EQ(p.port.vdev_args, "rx_pcap=in.pcap,tx_pcap=out.pcap");
  EXPECT_EQ(p.port.queues, 2);
  EXPECT_EQ(p.port.rx_desc, 512);
  EXPECT_EQ(p.port.tx_desc, 2048);
  EXPECT_EQ(p.port.mbufs, 4096u);
  EXPECT_EQ(p.port.mbuf_data_room, 4096);
  EXPECT_EQ(p.port.mtu, 4200u);
  EXPECT_TRUE(p.port.icrc_offload);
  EXPECT_EQ(p.port.multi_segment_tx, MultiSegmentTx::no);
  EXPECT_EQ(p.port.zero_copy_threshold, 1024u);
  EXPECT_EQ(p.eal.lcores, "2-3");
  EXPECT_EQ(p.eal.memory_mb, 256u);
  EXPECT_EQ(p.eal.hugepages, HugepagePolicy::no);
  EXPECT_EQ(p.eal.log_level, "debug");
  EXPECT_EQ(vdev_string(p), "net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap");
  const EalOptions eal = eal_options(p);
  ASSERT_EQ(eal.vdevs.size(), 1u);
  EXPECT_EQ(eal.vdevs[0], "net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap");
  EXPECT_TRUE(eal.pci_allow.empty());
}

TEST(Preset, DefaultsAndComments) {
  const DriverPreset p = parse_ok("# a comment\n[port]\ndriver=net_ring\n");
  EXPECT_EQ(p.port.queues, 1);
  EXPECT_EQ(p.port.mtu, 9000u);
  EXPECT_FALSE(p.port.icrc_offload);
  EXPECT_EQ(p.eal.hugepages, HugepagePolicy::auto_detect);
  EXPECT_TRUE(eal_options(p).vdevs.empty()) << "net_ring pairs are made in process";
}

TEST(Preset, UnknownKey) {
  EXPECT_EQ(parse_error("[port]\ndriver=net_ring\nspeed=100\n"),
            "test.ini: unknown key 'port.speed'; accepted keys: port.driver, port.vdev_args, port.pci, "
            "port.queues, port.rx_desc, port.tx_desc, port.mbufs, port.mbuf_data_room, port.mtu, "
            "port.icrc_offload, port.multi_segment_tx, port.zero_copy_threshold, eal.lcores, eal.memory_mb, "
            "eal.hugepages, eal.log_level");
}

TEST(Preset, UnknownSectionIsAnUnknownKey) {
  EXPECT_EQ(parse_error("[nic]\ndriver=ice\n").substr(0, 38), "test.ini: unknown key 'nic.driver'; ac");
}

TEST(Preset, BadValues) {
  EXPECT_EQ(parse_error("[port]\ndriver=e1000\n"),
            "test.ini: bad value 'e1000' for 'port.driver'; accepted: net_ring, net_pcap, net_af_packet, net_af_xdp, net_tap, "
            "mlx5, ice, i40e");
  EXPECT_EQ(parse_error("[port]\nqueues=0\n"), "test.ini: bad value '0' for 'port.queues'; accepted: an integer 1..64");
  EXPECT_EQ(parse_error("[port]\nqueues=two\n"),
            "test.ini: bad value 'two' for 'port.queues'; accepted: an integer 1..64");
  EXPECT_EQ(parse_error("[port]\nrx_desc=32\n"),
            "test.ini: bad value '32' for 'port.rx_desc'; accepted: an integer 64..16384");
  EXPECT_EQ(parse_error("[port]\ntx_desc=99999\n"),
            "test.ini: bad value '99999' for 'port.tx_desc'; accepted: an integer 64..16384");
  EXPECT_EQ(parse_error("[port]\nmbufs=10\n"),
            "test.ini: bad value '10' for 'port.mbufs'; accepted: an integer 1024..1048576");
  EXPECT_EQ(parse_error("[port]\nmbuf_data_room=100\n"),
            "test.ini: bad value '100' for 'port.mbuf_data_room'; accepted: 0 (sized from mtu) or an integer "
            "512..65000");
  EXPECT_EQ(parse_error("[port]\nmtu=100000\n"),
            "test.ini: bad value '100000' for 'port.mtu'; accepted: an integer 576..9600");
  EXPECT_EQ(parse_error("[port]\nicrc_offload=maybe\n"),
            "test.ini: bad value 'maybe' for 'port.icrc_offload'; accepted: true or false");
  EXPECT_EQ(parse_error("[port]\nmulti_segment_tx=sometimes\n"),
            "test.ini: bad value 'sometimes' for 'port.multi_segment_tx'; accepted: auto, yes or no");
  EXPECT_EQ(parse_error("[port]\nzero_copy_threshold=70000\n"),
            "test.ini: bad value '70000' for 'port.zero_copy_threshold'; accepted: 0 (engine default) or payload "
            "bytes 1..65535 (65535: always copy)");
  EXPECT_EQ(parse_error("[port]\npci=\n"),
            "test.ini: bad value '' for 'port.pci'; accepted: a PCI address such as 0000:3b:00.0");
  EXPECT_EQ(parse_error("[eal]\nlcores=all\n"),
            "test.ini: bad value 'all' for 'eal.lcores'; accepted: an EAL lcore list such as 0-1 or 2,4");
  EXPECT_EQ(parse_error("[eal]\nmemory_mb=1\n"),
            "test.ini: bad value '1' for 'eal.memory_mb'; accepted: an integer 64..1048576");
  EXPECT_EQ(parse_error("[eal]\nhugepages=maybe\n"),
            "test.ini: bad value 'maybe' for 'eal.hugepages'; accepted: auto, yes or no");
  EXPECT_EQ(parse_error("[eal]\nlog_level=loud\n"),
            "test.ini: bad value 'loud' for 'eal.log_level'; accepted: emergency, alert, critical, error, "
            "warning, notice, info or debug");
}

TEST(Preset, PortAndHostSettings) {
  DriverPreset p = parse_ok("[port]\nqueues=2\nrx_desc=512\nmbufs=2048\nmtu=4200\nicrc_offload=true\n"
                            "multi_segment_tx=auto\nzero_copy_threshold=0\n");
  const PortSetup s = port_setup(p);
  EXPECT_EQ(s.queues, 2);
  EXPECT_EQ(s.rx_desc, 512);
  EXPECT_EQ(s.mbufs, 2048u);
  EXPECT_EQ(s.mtu, 4200u);
  EngineHostConfig h = host_config(p, true);
  EXPECT_TRUE(h.icrc_offload);
  EXPECT_TRUE(h.multi_segment_tx);
  EXPECT_EQ(h.zero_copy_threshold, default_zero_copy_threshold);
  EXPECT_EQ(h.tx_data_room, data_room_for_mtu(4200));
  EXPECT_FALSE(host_config(p, false).multi_segment_tx) << "auto follows the port";
  p.port.multi_segment_tx = MultiSegmentTx::no;
  EXPECT_FALSE(host_config(p, true).multi_segment_tx);
  p.port.zero_copy_threshold = 65535;
  EXPECT_EQ(host_config(p, true).zero_copy_threshold, zero_copy_never);
  p.port.zero_copy_threshold = 1024;
  EXPECT_EQ(host_config(p, true).zero_copy_threshold, 1024u);
}

TEST(Preset, KeySetTwice) {
  EXPECT_EQ(parse_error("[port]\nqueues=1\nqueues=2\n"), "test.ini: key 'port.queues' is set twice; keep one");
}

TEST(Preset, DriverRequirements) {
  EXPECT_EQ(parse_error("[port]\ndriver=ice\n"),
            "test.ini: driver 'ice' is a PCI NIC: set 'pci' under [port] to its address (lspci -D)");
  EXPECT_EQ(parse_error("[port]\ndriver=net_pcap\n"),
            "test.ini: driver 'net_pcap' needs 'vdev_args' under [port], e.g. rx_pcap=in.pcap,tx_pcap=out.pcap");
  EXPECT_EQ(parse_error("[port]\ndriver=net_af_packet\n"),
            "test.ini: driver 'net_af_packet' needs 'vdev_args' with iface=<interface> under [port], e.g. "
            "iface=veth0");
  EXPECT_EQ(parse_error("[port]\ndriver=net_af_xdp\nvdev_args=start_queue=0\n"),
            "test.ini: driver 'net_af_xdp' needs 'vdev_args' with iface=<interface> under [port], e.g. "
            "iface=veth0");
  const DriverPreset nic = parse_ok("[port]\ndriver=mlx5\npci=0000:3b:00.0\n");
  EXPECT_EQ(eal_options(nic).pci_allow, std::vector<std::string>{"0000:3b:00.0"});
}

TEST(Preset, SyntaxError) {
  EXPECT_EQ(parse_error("[port\ndriver=net_ring\n").substr(0, 10), "test.ini: ");
}

TEST(Preset, MissingFile) {
  DriverPreset p;
  std::string error;
  EXPECT_FALSE(load_preset("/nonexistent/x.ini", p, error));
  EXPECT_EQ(error, "/nonexistent/x.ini: cannot open the preset file: check the path (presets live in drivers-config/)");
}

TEST(Preset, ShippedPresetsParse) {
  for (const char* name : {"net_ring", "net_pcap", "net_af_packet", "net_af_xdp", "net_tap", "mlx5", "ice", "i40e"}) {
    DriverPreset p;
    std::string error;
    EXPECT_TRUE(load_preset(std::string(DRIVERS_CONFIG_DIR) + "/" + name + ".ini", p, error)) << error;
    EXPECT_EQ(to_string(p.port.driver), name);
  }
}

TEST(EalArguments, NoHugepagesDefaults) {
  EalOptions o;
  o.lcores = "0-1";
  std::string error;
  const auto args = eal_arguments(o, HugepageStatus{}, error);
  EXPECT_EQ(args, (std::vector<std::string>{"metaroce", "-l", "0-1", "--no-huge", "-m", "512", "--no-shconf",
                                            "--no-pci", "--log-level=warning"}));
}

TEST(EalArguments, HugepagesWhenPresent) {
  EalOptions o;
  o.vdevs = {"net_pcap0,rx_pcap=a.pcap"};
  std::string error;
  const auto args = eal_arguments(o, HugepageStatus{512, 2048, true}, error);
  EXPECT_EQ(args, (std::vector<std::string>{"metaroce", "-l", "0", "--in-memory", "-m", "512", "--no-pci", "--vdev",
                                            "net_pcap0,rx_pcap=a.pcap", "--log-level=warning"}));
}

TEST(EalArguments, HugepagesRequiredButMissing) {
  EalOptions o;
  o.hugepages = HugepagePolicy::yes;
  std::string error;
  EXPECT_TRUE(eal_arguments(o, HugepageStatus{0, 2048, true}, error).empty());
  EXPECT_EQ(error,
            "hugepages requested (hugepages=yes) but none are free: run `echo 512 > "
            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages && mount -t hugetlbfs none /dev/hugepages` "
            "as root, or set hugepages=no");
  EXPECT_TRUE(eal_arguments(o, HugepageStatus{10, 2048, false}, error).empty());
  EXPECT_NE(error.find("hugetlbfs is not mounted"), std::string::npos);
}

TEST(EalArguments, PciAllowList) {
  EalOptions o;
  o.pci_allow = {"0000:3b:00.0"};
  o.hugepages = HugepagePolicy::no;
  std::string error;
  const auto args = eal_arguments(o, HugepageStatus{}, error);
  EXPECT_EQ(std::count(args.begin(), args.end(), "--no-pci"), 0);
  EXPECT_NE(std::find(args.begin(), args.end(), "0000:3b:00.0"), args.end());
}

TEST(EalArguments, VdevDeviceName) {
  EXPECT_EQ(vdev_device_name("net_pcap0,rx_pcap=a"), "net_pcap0");
  EXPECT_EQ(vdev_device_name("net_ring0"), "net_ring0");
}

}  // namespace
}  // namespace metaroce::engine
