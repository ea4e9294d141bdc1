// lib/stack: the composition an application uses. An endpoint is one end
// of a run on a real DPDK port: the port (a drivers-config preset, with its
// interface replaced if asked, or a device EAL was told to create), its
// engine host, an in-band connection manager (lib/cm) and the host's
// telemetry, all driven by the calling lcore; plus the small helpers every
// user needs (congestion control by name, counter sums, timers that
// tolerate a shared VM). metaroce-perf --server/--client, metaroce-gen,
// metaroce-sink and the public API (include/metaroce) are built on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct rte_flow;
struct rte_ring;

#include "cc/fair_share.hpp"
#include "cc/port_share_board.hpp"
#include "cm/manager.hpp"
#include "engine/eal.hpp"
#include "engine/engine_host.hpp"
#include "engine/port.hpp"
#include "engine/telemetry.hpp"
#include "transport/connection.hpp"
#include "stack/address.hpp"
#include "transport/counters.hpp"
#include "wire/headers.hpp"
#include "wire/ip_address.hpp"

namespace metaroce::stack {

struct EndpointConfig {
  std::string program = "metaroce";  // EAL program name; the file prefix is <program>-<pid>
  std::string preset_path;           // --preset FILE (drivers-config)
  std::string iface;                 // --iface NAME: replaces the preset's iface=
  std::string port_name;             // --port NAME: a device created by the EAL arguments
  std::vector<std::string> eal_args;  // after `--` (with --port)
  std::string local_ip;              // this end's address: IPv4 (A.B.C.D) or IPv6
  // Ports of planes 1.. (the port above is plane 0's): each a preset (its
  // iface= replaced by `iface` when given) or, with port_name, a device
  // the EAL arguments create; its address (empty: local_ip, which the
  // peer learns per plane through the connection manager).
  struct PlanePort {
    std::string preset_path, iface, port_name, local_ip;
  };
  std::vector<PlanePort> more_planes;
  std::string host_name = "host";    // the engine host's name (telemetry)
  std::uint32_t mtu = 4096;          // --port: the port and mbufs are sized for this payload per packet
  std::uint32_t mbufs = 16384;       // --port: receive and transmit mbufs each (DPDK zeroes them when freed:
                                     // large pools make exiting slow)
  std::uint32_t idle_sleep_us = 0;   // sleep this long after a turn that did nothing
  // --port: payload bytes from which transmit attaches the payload instead of
  // copying it (0: the engine's default; 65535: never).
  std::uint32_t zero_copy_threshold = 0;
  double cm_timeout_s = 3.0;         // connection requests are repeated for this long
  // Connections the host (and, serving, its connection manager) keeps at
  // once; more are refused.
  std::uint32_t max_connections = 1024;
  // The port answers ARP (IPv4) or neighbour solicitations (IPv6) for
  // local_ip, and resolve_next_hop asks for a next hop's MAC this many
  // times, this far apart, before it gives up.
  std::uint32_t neighbour_tries = 3;
  double neighbour_retry_s = 1.0;
  // What this port may receive (--receive-capacity), the receive share's
  // capacity; 0: the port's link rate (cc::port_receive_capacity).
  std::uint64_t receive_capacity_bps = 0;
  std::string key_file;  // security (metaroce::EndpointConfig::key_file); empty: none
  bool auth_only = false;
  // The P_Key of rocev2 connections (cm::ManagerConfig::pkey): the
  // partition, the same at both ends.
  std::uint16_t pkey = 0xffff;
  // Lanes of one port (metaroce::Endpoint::open_lanes): this endpoint drives queue `queue` of
  // the port's `queues` with a host and a connection manager of its own
  // (client QPNs drawn on its queue); `shared_port` is the port another
  // lane opened (nullptr: this one opens it, with `queues` queues).
  std::uint16_t queues = 1;
  std::uint16_t queue = 0;
  std::shared_ptr<engine::Port> shared_port;
  bool ibta_cm = false;  // cm::ManagerConfig::ibta_cm
};

// Starts EAL from the preset (its lcores, memory, hugepages and vdev, with
// --iface applied) or from the EAL arguments (port_eal_arguments); a file
// prefix of its own per process (<program>-<pid>, unless the EAL arguments
// give --file-prefix), so several run on one host.
bool start_eal(const EndpointConfig& options, std::string& error);

// The EAL command line for --port: the user's arguments after the defaults a
// preset gets for what they leave out: `-l 0` without -l/-c/--lcores;
// without -m/--socket-mem/--no-huge/--in-memory/--huge-dir, `--in-memory -m
// 512` when `hugepages` are usable, else `--no-huge -m 512 --no-shconf`;
// `--no-pci` without -a/--allow/-b/--block/--no-pci; the file prefix above.
[[nodiscard]] std::vector<std::string> port_eal_arguments(const std::string& program,
                                                          const std::vector<std::string>& user,
                                                          const engine::HugepageStatus& hugepages, int pid);

// The hand-off rings of a port's lanes (metaroce::Endpoint::open_lanes on a
// driver that does not pair queues): ring k holds frames another lane took
// from the port for lane k. Shared by the lanes; the last one frees the
// frames still waiting, then the rings (before the port's pools go).
struct LaneRings {
  std::vector<rte_ring*> rings;
  // Flow rules on the BTH destination QP (engine::install_bth_queue_rules)
  // where the port's PMD took them: data then lands on its lane's queue,
  // and only the rest (QP 1, ARP, ND) is handed on. Destroyed first.
  std::uint16_t port_id = 0;
  std::vector<rte_flow*> rules;
  LaneRings() = default;
  LaneRings(const LaneRings&) = delete;
  LaneRings& operator=(const LaneRings&) = delete;
  ~LaneRings();
};

// Makes `lanes` hand-off rings for the port `port_name`; nullptr and
// `error` when EAL has no memory left for them.
std::shared_ptr<LaneRings> make_lane_rings(const std::string& port_name, std::uint16_t lanes, std::string& error);

// A port, its engine host, a connection manager and the host's telemetry
// (/metaroce/stats, /metaroce/conns, /metaroce/conn,<qpn>, /metaroce/lcores
// on the process's telemetry socket, EAL file prefix <program>-<pid>), all
// on this lcore.
struct Endpoint {
  std::shared_ptr<engine::Port> port;  // shared by the lanes of one port (the last one stops it)
  std::shared_ptr<LaneRings> lane_rings;  // the lanes' hand-off rings, if they hand off (after `port`: freed first)
  // Lanes: one receive share per port. Each lane's receive_share is a
  // front of this board (cc::PortShareBoard): every turn a lane publishes
  // its demand and takes its part, and lane 0 divides the port's capacity
  // among the lanes by the senders each sees. nullptr for one lane.
  std::shared_ptr<cc::PortShareBoard> share_board;
  // Lanes: how frames reach their lane ("queue pairs", "flow rules ...",
  // "software hand-off ..."); empty for one lane.
  std::string steering;
  std::uint16_t queue = 0;             // the port's queue this endpoint drives
  std::vector<std::unique_ptr<engine::Port>> more_ports;  // planes 1.. (EndpointConfig::more_planes)
  std::unique_ptr<engine::EngineHost> host;
  std::unique_ptr<cm::Manager> cm;
  std::unique_ptr<engine::TelemetryPublisher> telemetry;  // the host and its open connections (add_connection)
  // The port's receive share: every connection with `metaroce` congestion
  // control that receives here is attached to it (Host::set_receive_share).
  std::unique_ptr<cc::FairShare> receive_share;
  std::vector<cm::Event> events;
  std::vector<std::vector<std::uint8_t>> cm_frames;
  std::uint32_t idle_sleep_us = 0;
  wire::IpAddress local_address{};  // local_ip, parsed

  Endpoint() = default;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  ~Endpoint();

  // Connections go through these, not the host's own, so that telemetry
  // lists exactly the open ones: add_connection creates it on the host and
  // publishes it; remove_connection takes it off telemetry's list, then
  // destroys it (false if the host has none with that QPN).
  transport::Connection* add_connection(const transport::ConnectionConfig& config,
                                        std::unique_ptr<transport::CongestionControl> congestion,
                                        std::string& error);
  bool remove_connection(std::uint32_t local_qpn);

  // One turn: what the connection manager has to send (answers to last
  // turn's events included, e.g. a DREP with the summary the application
  // set), then the engine's turn and telemetry's (a snapshot every 10 ms);
  // new events land in `events`. Returns the work done (0: idle).
  std::size_t turn();
  // Sleeps idle_sleep_us when `work` is 0 and a sleep is configured.
  void idle(std::size_t work) const;
};

// Opens and starts the port (and those of more_planes: the host drives a
// queue on each, the manager offers that many planes), waits up to 2 s for its link (net_af_packet,
// net_tap: for its kernel interface to be up and have a carrier; not
// net_memif or net_vhost, whose link waits for a peer process), creates the
// host and the manager (its local address from options.local_ip and the
// port's MAC). False with a one-line error naming the fix.
bool open_endpoint(const EndpointConfig& options, Endpoint& endpoint, std::string& error);

// Where a client's frames go: the peer's address and the MAC of the next hop
// towards it (the peer itself, or the gateway between).
struct NextHop {
  wire::IpAddress peer{};
  wire::IpAddress via{};  // the peer, or the gateway
  wire::MacAddress mac{};
  bool given = false;     // the MAC came from the caller (peer_mac), not from ARP or ND
};

// The next hop towards `peer` (text, IPv4 or IPv6, the family of local_ip):
// `gateway` when it is not empty (the peer is not on this link), else the
// peer. Its MAC is `peer_mac` when that is not empty (entered in the
// neighbour cache as permanent, never asked), else asked for by ARP or
// neighbour solicitation, turning the endpoint until the answer (cached:
// a second call for the same next hop costs nothing), the last try or
// `interrupted`. False with one line naming what to do.
bool resolve_next_hop(Endpoint& endpoint, const std::string& peer, const std::string& gateway,
                      const std::string& peer_mac, NextHop& out, std::string& error,
                      const std::atomic<bool>& interrupted);
// Puts the peer's address (and IP version) and the next hop's MAC into a
// connection's endpoints.
void set_peer(transport::Endpoints& endpoints, const NextHop& hop) noexcept;

// Client, one or several attempts at once: turns until each id has its event
// `kind` or `failed` (out[i] for ids[i]; an id already answered keeps its
// first); events for other ids are dropped. False when one failed (out[i]
// says which) or `interrupted` became true (then the ids still waiting have
// out[i].error "interrupted").
bool wait_for_events(Endpoint& endpoint, const std::vector<std::uint64_t>& ids, cm::EventKind kind,
                     std::vector<cm::Event>& out, const std::atomic<bool>& interrupted);

// Timers for this kind of machine: a shared VM deschedules a polling thread
// for milliseconds (doc/ENGINE.md), which should cost timeouts, not the
// connection: 5 ms initial RTO, 2 ms minimum, 50 retries.
void tolerate_stalls(transport::ConnectionConfig& config) noexcept;

// The controller `name` sized for `connection` (its paths); nullptr for "" or
// "none"; nullptr and `error` for an unknown name.
std::unique_ptr<transport::CongestionControl> make_congestion_control(const std::string& name,
                                                                     const transport::ConnectionConfig& connection,
                                                                     std::string& error);

// a += b, every counter.
void add_counters(transport::ConnectionCounters& a, const transport::ConnectionCounters& b);
// Data packets resent, summed over the connection's paths.
std::uint64_t path_retransmissions(const transport::Connection& connection);

}  // namespace metaroce::stack
