#include "common/port_options.hpp"

#include "common/plane_ports.hpp"
#include "common/preset_iface.hpp"

#include <fmt/format.h>

namespace po = boost::program_options;

namespace metaroce::apps {

void add_port_options(po::options_description& d) {
  using many = std::vector<std::string>;
  d.add_options()
      ("preset", po::value<many>()->composing(), "drivers-config FILE for the port and EAL (drivers-config/*.ini); "
                                                 "repeated: one per plane, plane 0's first")
      ("iface", po::value<many>()->composing(), "the Linux interface of a net_af_packet or net_tap preset (its "
                                                "iface=); one per --preset when repeated")
      ("port", po::value<many>()->composing(), "instead of --preset: the EAL device NAME to use, created by the EAL "
                                               "arguments after `--` (e.g. --port net_memif0 -- --vdev "
                                               "net_memif0,role=client,socket=/tmp/a.sock); what they leave out gets "
                                               "a preset's defaults: -l 0, --no-pci, --no-huge -m 512 --no-shconf "
                                               "(--in-memory -m 512 when hugepages are free); repeated: one per "
                                               "plane, plane 0's first")
      ("local-ip", po::value<many>()->composing(), "this end's address, IPv4 (A.B.C.D) or IPv6 (fd00::2): the port "
                                                   "answers ARP or neighbour solicitations for it; with several "
                                                   "planes once (all of them) or once per plane")
      ("mbufs", po::value<std::uint32_t>(), "--port: receive and transmit mbufs each, 1024..1048576 (default "
                                            "16384; a preset has its own mbufs=)")
      ("idle-sleep-us", po::value<std::uint32_t>(), "sleep this long when a turn found nothing to do, so processes "
                                                    "share cores (default 0: busy poll)")
      ("lcores", po::value<std::uint16_t>(), "lcores on the port, 1..16 (default 1): a thread each, driving queue "
                                             "k of a port of as many queues with its own host and connection "
                                             "manager; connections spread evenly; give both ends the same; on "
                                             "drivers other than net_memif and net_ring lanes hand frames on to "
                                             "their owners; one plane")
      ("receive-capacity", po::value<std::string>(), receive_capacity_help);
  add_secure_options(d);
}

bool read_port_options(const po::variables_map& vm, std::vector<std::string> eal_args, metaroce::EndpointConfig& out,
                       std::string& message) {
  std::vector<PlanePortOptions> more;
  if (!read_plane_ports(vm, out.preset, out.iface, out.port, out.local_ip, more, message)) return false;
  for (PlanePortOptions& m : more) out.more_planes.push_back({m.preset, m.iface, m.port, m.local_ip});
  if (!read_in_range<std::uint32_t>(vm, "idle-sleep-us", 0, 1'000'000, out.idle_sleep_us, message) ||
      !read_in_range<std::uint32_t>(vm, "mbufs", 1024, 1u << 20, out.mbufs, message))
    return false;
  if (!read_receive_capacity(vm, out.receive_capacity_bps, message)) return false;
  if (!read_secure_options(vm, out.key_file, out.auth_only, message)) return false;
  out.eal_args = std::move(eal_args);
  if (out.preset.empty() == out.port.empty()) {
    message = "give a port: --preset FILE (drivers-config/*.ini) or --port NAME with its EAL device after `--`";
    return false;
  }
  if (!out.preset.empty() && !out.eal_args.empty()) {
    message = "--preset sets the EAL arguments itself: drop those after `--`, or use --port NAME with them";
    return false;
  }
  if (vm.count("mbufs") && !out.preset.empty()) {
    message = "--mbufs is for --port: a preset sets its own mbufs=";
    return false;
  }
  if (!out.iface.empty() && out.preset.empty()) {
    message = "--iface goes with --preset (its iface=); with --port give iface= in the --vdev after `--`";
    return false;
  }
  if (!out.preset.empty() && !check_preset_iface(out.preset, out.iface, message)) return false;
  if (out.local_ip.empty()) {
    message = "give this end's address: --local-ip ADDR (A.B.C.D, or IPv6)";
    return false;
  }
  wire::IpAddress ip;
  if (!wire::parse_ip(out.local_ip, ip)) {
    message = fmt::format("--local-ip '{}' is not an IP address: give A.B.C.D, or an IPv6 address such as fd00::1",
                          out.local_ip);
    return false;
  }
  return true;
}

bool read_lcores(const po::variables_map& vm, std::uint16_t& lcores, std::string& message) {
  return read_in_range<std::uint16_t>(vm, "lcores", 1, max_port_lcores, lcores, message);
}

bool check_address_family(const char* option, const std::string& text, const std::string& local_ip,
                          std::string& message) {
  wire::IpAddress address;
  if (!wire::parse_ip(text, address)) {
    message = fmt::format("{} '{}' is not an IP address: give A.B.C.D, or an IPv6 address such as fd00::1", option,
                          text);
    return false;
  }
  wire::IpAddress local;
  if (wire::parse_ip(local_ip, local) && local.version != address.version) {
    message = fmt::format("{} {} is IPv{} but --local-ip {} is IPv{}: give both of one family", option, text,
                          address.version, local_ip, local.version);
    return false;
  }
  return true;
}

}  // namespace metaroce::apps
