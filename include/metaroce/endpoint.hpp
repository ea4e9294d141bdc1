// An endpoint: one DPDK port driven by the calling thread, with the
// transport's connections on it, an in-band connection manager (connection
// requests and replies are RoCEv2 datagrams to QP 1) and telemetry. This is
// the API a program uses to move bytes; doc/API.md walks through it with
// the programs in examples/.
//
// Threading: an Endpoint and its connections belong to the thread that
// opened it. Nothing here takes a lock; call everything from that thread.
// DPDK's EAL starts with the first Endpoint of a process (once per process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "metaroce/counters.hpp"
#include "metaroce/types.hpp"

namespace metaroce {

class Connection;

struct EndpointConfig {
  // The port, one of:
  std::string preset;  // a drivers-config file (share/metaroce/drivers-config/*.ini)
  std::string iface;   // with `preset`: replaces its iface= (net_af_packet, net_tap)
  std::string port;    // a device the EAL arguments create, e.g. "net_memif0"
  // With `port`: EAL arguments, e.g. {"--vdev", "net_memif0,role=server,socket=/tmp/m.sock"}.
  // What they leave out gets defaults: -l 0, --no-pci, --no-huge -m 512
  // --no-shconf (or --in-memory -m 512 when hugepages are free).
  std::vector<std::string> eal_args;

  // This end's address, IPv4 (A.B.C.D) or IPv6 (fd00::2): the port answers
  // ARP requests or neighbour solicitations for it.
  std::string local_ip;
  // Ports of further planes (the port above is plane 0's), each its own
  // fabric: a connection spreads over as many planes as both ends have (at
  // most its paths), and a plane whose link goes down or whose paths all
  // fail is left until a probe gets through again.
  struct PlanePort {
    std::string preset;    // with `preset` above: this plane's drivers-config file
    std::string iface;     // with it: replaces its iface=
    std::string port;      // with `port` above: a device the EAL arguments create
    std::string local_ip;  // this end's address on the plane, of local_ip's family (empty: local_ip)
  };
  std::vector<PlanePort> more_planes;
  std::string program = "metaroce";   // EAL's program name; its file prefix is <program>-<pid>
  std::string name = "host";          // the host's name in telemetry
  std::uint32_t mtu = 4096;           // payload bytes per packet the port is sized for (with `port`)
  std::uint32_t mbufs = 16384;        // with `port`: receive and transmit mbufs each (a preset has its own)
  std::uint32_t max_connections = 1024;
  std::uint32_t idle_sleep_us = 0;    // sleep this long after a turn with nothing to do (0: busy poll)
  // With `port`: payload bytes from which a packet's payload is attached to
  // the mbuf instead of copied (0: the engine's default; 65535: never).
  std::uint32_t zero_copy_threshold = 0;
  double connect_timeout_s = 3.0;     // connection requests are repeated for this long
  // Bits per second this port may receive: the receive share divides it
  // among the connections with `metaroce` congestion control that send
  // here (their rate hint). 0: the port's link rate less 3% (100 Gb/s when
  // the driver reports none).
  std::uint64_t receive_capacity_bps = 0;
  // Security: a pre-shared key file both ends hold (at least 32 random
  // bytes, readable by its owner only). Every connection manager message
  // is authenticated with it, each connection gets keys of its own (X25519
  // + HKDF), and every packet carries an AES-256-GCM tag; its payload is
  // encrypted unless `auth_only`. Empty: no security. A peer must use the
  // same file and the same `auth_only`, or the connect fails saying so.
  std::string key_file;
  bool auth_only = false;
  // The P_Key of "rocev2" connections: the partition, the same at both
  // ends; standard peers use the default partition 0xffff. Its low 15 bits
  // must not be 0. ("metaroce" connections carry one of their own.)
  std::uint16_t pkey = 0xffff;
  // Set connections up with the IBTA CM (class 0x07 REQ/REP/RTU/DREQ/DREP
  // on QP 1, as rdma_cm does) instead of metaroce's own messages: rocev2
  // connections only, at most 56 bytes of private data, no key file. Both
  // ends the same.
  bool ibta_cm = false;
};

struct ConnectOptions {
  // The next hop towards the peer: `gateway` (a router, when the peer is
  // not on this link) or the peer itself. Its MAC is `peer_mac`
  // (xx:xx:xx:xx:xx:xx) when given, else asked for by ARP or neighbour
  // solicitation (three tries a second apart, then the connect fails
  // saying so) and cached.
  std::string gateway;
  std::string peer_mac;
  std::string mode = "metaroce";       // or "rocev2": go-back-N over one path, the baseline
  std::string congestion = "metaroce"; // a lib/cc algorithm: metaroce, dcqcn, fixed, or none
  std::uint16_t paths = 4;             // UDP source ports the connection sprays over
  std::uint16_t streams = 1;           // ordered streams (completions are in order per stream)
  std::uint32_t mtu = 4096;            // payload bytes per packet (the server may lower it);
                                       // "rocev2": 256, 512, 1024, 2048 or 4096
  std::uint32_t path_window = 0;       // packets in flight per path (0: the transport's default)
  std::uint32_t psn_window = 0;        // packets in flight per connection (0: the default)
  std::uint16_t first_src_port = 0;    // the first path's UDP source port (0: the default)
  std::vector<std::uint8_t> private_data;  // at most 64 bytes, for the server's accept function
  // "rocev2": IBTA timers, as ibv_modify_qp's timeout, retry_cnt and
  // rnr_retry: a retransmission timeout of 4.096 us x 2^local_ack_timeout
  // (1..31; 14 is 67 ms) that backs off, retry_count timeouts in a row
  // (0..7), rnr_retry RNR NAKs per message (0..7, 7: no limit). 0: the
  // endpoint's own timers for shared machines (5 ms RTO, 2 ms minimum, 50
  // retries each).
  std::uint8_t local_ack_timeout = 0;
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry = 7;
};

// A connection request as the server's accept function sees it.
struct IncomingRequest {
  std::string peer_ip;
  std::uint32_t peer_qpn = 0;
  std::string mode;        // "metaroce" or "rocev2"
  std::string congestion;  // what the client asked for ("" for none)
  std::uint16_t paths = 0;
  std::uint16_t streams = 0;
  std::uint32_t mtu = 0;
  std::vector<std::uint8_t> private_data;  // the client's ConnectOptions::private_data
};

// A connection set up by hand, without the connection manager, as
// ibv_modify_qp takes it (and scripts or perftest's exchange give it): each
// end's QPN and first PSN, the peer's address. For a standard peer: mode
// "rocev2", the same MTU at both ends, this endpoint's pkey.
struct StaticConnectOptions {
  ConnectOptions connection;        // mode, MTU, timers, next hop (gateway, peer_mac), congestion
  std::uint32_t local_qpn = 0;      // this end's QPN, 2..0xffffff; 0: drawn from getrandom(2)
  bool local_psn_given = false;     // else this end's first PSN is drawn from getrandom(2)
  std::uint32_t local_psn = 0;      // 24 bits
  std::uint32_t peer_qpn = 0;       // the peer's QPN, 2..0xffffff
  std::uint32_t peer_psn = 0;       // the peer's first PSN, 24 bits
};

// What the accept function answers.
enum class Verdict : std::uint8_t {
  accept,
  refuse,             // the application says no
  refuse_bad_request, // the request does not suit (private data, mode, ...)
  refuse_no_room,     // no room for another connection now
  refuse_too_much_memory,  // the request would commit more memory than the server allows
};

// Called for each request with its connection already made (accept:
// register memory, post receives in it now, before the client's first
// packet can arrive; refuse: it is destroyed). reply_private_data (at most
// 64 bytes) goes back to the client.
using AcceptFunction =
    std::function<Verdict(const IncomingRequest& request, Connection& connection, std::vector<std::uint8_t>& reply_private_data)>;

// One request of Endpoint::connect_each: the connection, or why none.
struct ConnectResult {
  Connection* connection = nullptr;
  std::string error;
};

struct ListenOptions {
  // Accepted connections also wait for accept(); a server that takes them
  // in its accept function says false.
  bool queue_for_accept = true;
  // The server's own windows for its connections (0: as the client asked,
  // or the transport's default).
  std::uint32_t path_window = 0;
  std::uint32_t psn_window = 0;
  // The server's own IBTA timers for "rocev2" connections, as
  // ConnectOptions' (local_ack_timeout 0: the endpoint's own).
  std::uint8_t local_ack_timeout = 0;
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry = 7;
};

// Where a client's packets go first (Endpoint::next_hop).
struct NextHop {
  std::string address;  // the peer, or the gateway towards it
  std::string mac;      // xx:xx:xx:xx:xx:xx
  std::string learned;  // "given" (ConnectOptions::peer_mac), "ARP" or "neighbour discovery"
};

// How one close went (Endpoint::close_all).
struct CloseResult {
  bool answered = false;                // the server answered the disconnect request
  std::string error;                    // why not, when it did not
  std::vector<std::uint8_t> reply_data;  // the server's Connection::set_close_reply
  CounterGroup counters;                 // the connection's, as it went
};

class Endpoint {
 public:
  // Starts EAL (the first time in a process), opens and starts the port,
  // waits for its link. nullptr with a one-line `error` that names the fix.
  static std::unique_ptr<Endpoint> open(const EndpointConfig& config, std::string& error);
  // Several lcores on one port: `lanes` endpoints on a port of as many
  // queues, endpoint k driving queue k with its own host, connection manager
  // and telemetry, each turned by one thread of its own (never two). Lane k
  // meets the peer's lane k (a peer of as many lanes): only drivers whose
  // transmit queue k is the peer's receive queue k (net_memif, net_ring),
  // one port (no more_planes). Destroy them after their threads stopped.
  // Empty with a one-line `error` that names the fix.
  static std::vector<std::unique_ptr<Endpoint>> open_lanes(const EndpointConfig& config, std::uint16_t lanes,
                                                           std::string& error);
  // Turns once more, so that answers due (a disconnect reply) leave.
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Bytes the network may touch: posts name them by key, the peer writes
  // into them by key. Invalid (key 0) with `error` when they cannot be.
  MemoryRegion register_memory(void* addr, std::size_t length, std::uint32_t access, std::string& error);
  // False when `region` is not registered here.
  bool deregister_memory(const MemoryRegion& region);

  // Client: asks the peer for a connection and turns until it answers.
  // nullptr with `error` (rejected, no answer within connect_timeout_s, a
  // bad address). The connection lives until close().
  Connection* connect(const std::string& peer_ip, const ConnectOptions& options, std::string& error);
  // Client: the MAC (xx:xx:xx:xx:xx:xx) connect() will send to for
  // `peer_ip` with `options` (its gateway and peer_mac): peer_mac when
  // given, else asked for now by ARP or neighbour solicitation, turning the
  // endpoint until the answer (later connects find it cached). Empty and
  // `error` when nobody answers or an address is bad.
  std::string next_hop_mac(const std::string& peer_ip, const ConnectOptions& options, std::string& error);
  // The same, with where the MAC belongs and how it was learned.
  bool next_hop(const std::string& peer_ip, const ConnectOptions& options, NextHop& out, std::string& error);
  // Client: one request per entry of `options`, all in flight at once (as
  // thousands of connections are set up); the connections in the same
  // order. All or none: when one fails, `error` names it and those that
  // were made are closed.
  std::vector<Connection*> connect_all(const std::string& peer_ip, const std::vector<ConnectOptions>& options,
                                       std::string& error);
  // The same, each on its own: for entry k, its connection or why there is
  // none. Nothing is closed here: close_all those made, if it is to be all
  // or none.
  std::vector<ConnectResult> connect_each(const std::string& peer_ip, const std::vector<ConnectOptions>& options);
  // A connection to `peer_ip` set up by hand (StaticConnectOptions): ready
  // at once, nothing sent until the first post; its first PSN is
  // Connection::initial_psn(). close() tears it down here only (there is
  // no manager to tell). nullptr and `error` when the options do not suit.
  Connection* connect_static(const std::string& peer_ip, const StaticConnectOptions& options, std::string& error);

  // Server: from now on, requests are answered by `accept` (none: accept
  // every request with no reply data).
  void listen(AcceptFunction accept = {}, const ListenOptions& options = {});
  // Server: turns until a connection was accepted, up to timeout_s; nullptr
  // and `error` when none came.
  Connection* accept(double timeout_s, std::string& error);

  // Client: sends the disconnect request and turns until the server answers
  // (or timeout); then, either side, the connection is destroyed (its
  // unfinished work completes as flushed first). False and `error` when the
  // server did not answer; the connection is gone all the same.
  bool close(Connection* connection, std::string& error);
  // Closes several at once, the disconnect requests in flight together,
  // each carrying its entry of `request_data` (empty, or one per
  // connection; at most 64 bytes each; the server reads it as
  // peer_close_data). Every connection is gone afterwards.
  std::vector<CloseResult> close_all(const std::vector<Connection*>& connections,
                                     const std::vector<std::vector<std::uint8_t>>& request_data = {});

  // Server: called from poll() when a client closed one of its connections
  // (its disconnect request came: peer_close_data() has what it carried),
  // or started over with a new incarnation (superseded). The handler may
  // set_close_reply (the answer goes at the next turn) and close() it.
  // Completions delivered in the same turn come before it.
  void set_peer_close_handler(std::function<void(Connection& connection, bool superseded)> handler);

  // Makes every wait (connect, accept, close, run_until, wait_completion)
  // return early, as on a timeout, from now on. Safe in a signal handler.
  void request_stop() noexcept;
  [[nodiscard]] bool stop_requested() const noexcept;

  // One turn: receive, timers, transmit, the connection manager,
  // telemetry; completions go to each connection's queue or handler.
  // Returns the work done (0: nothing happened).
  std::size_t poll();
  // After a turn that did `work`: sleeps EndpointConfig::idle_sleep_us when
  // it was 0 and a sleep is configured, so processes can share cores.
  void idle(std::size_t work) const;
  // Turns until `done()` is true or timeout_s passed; false on timeout.
  bool run_until(const std::function<bool()>& done, double timeout_s);

  // "host" (frames, drops by cause, the port's own drops), "cm" (the
  // connection manager), "connection" (the sum over open connections) and
  // "receive_share" (the port's: capacity_mbps, connections attached, and
  // what it counted: arrivals, hints, senders).
  [[nodiscard]] std::vector<CounterGroup> counters() const;
  [[nodiscard]] std::string mac() const;        // the port's, xx:xx:xx:xx:xx:xx
  [[nodiscard]] std::string port_name() const;  // e.g. net_memif0
  [[nodiscard]] std::string driver() const;     // the port's PMD, e.g. net_memif
  // Lanes (open_lanes): how frames reach the lane that owns them, e.g.
  // "queue pairs: ..." (net_memif, net_ring), "flow rules on the BTH
  // destination QP, ..." or "software hand-off (PMD took no flow rule:
  // why)"; empty for an endpoint of one lane.
  [[nodiscard]] std::string steering() const;
  [[nodiscard]] std::size_t connections() const noexcept;

  struct Impl;

 private:
  explicit Endpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// After the last Endpoint of the process is gone: releases what DPDK's EAL
// holds (memif sockets, hugepages, the telemetry socket). No Endpoint can
// be opened afterwards in this process. Nothing happens when EAL never
// started.
void release_eal();

// One connection of an endpoint: its posts and completions. Owned by the
// endpoint; valid until Endpoint::close or the endpoint's destruction.
class Connection {
 public:
  PostResult post_send(const SendWork& work);
  PostResult post_receive(const ReceiveWork& work);

  // Takes up to `max` completions already delivered by Endpoint::poll, in
  // order per stream. Returns how many.
  std::size_t poll_completions(Completion* out, std::size_t max);
  // Turns the endpoint until a completion is here (then takes it) or
  // timeout_s passed (false).
  bool wait_completion(Completion& out, double timeout_s);
  // From now on completions go to `handler`, called from Endpoint::poll,
  // instead of the queue poll_completions reads. An empty one undoes it.
  void set_completion_handler(std::function<void(const Completion&)> handler);

  // The server's reply data (client) or the client's request data (server).
  [[nodiscard]] const std::vector<std::uint8_t>& peer_private_data() const noexcept;
  [[nodiscard]] std::uint32_t qpn() const noexcept;
  [[nodiscard]] std::uint32_t peer_qpn() const noexcept;
  [[nodiscard]] std::uint32_t initial_psn() const noexcept;  // the first PSN this end sends
  // True once the connection failed (retry limit, the peer's error) or the
  // peer closed it: posts are refused, close() it.
  [[nodiscard]] bool failed() const noexcept;
  [[nodiscard]] bool closed_by_peer() const noexcept;
  // Server: what the client's disconnect request carried (once closed_by_peer).
  [[nodiscard]] const std::vector<std::uint8_t>& peer_close_data() const noexcept;
  // Server: what the answer to the client's disconnect request carries (at
  // most 64 bytes); set it before the request comes, or in the completion
  // handler that sees the last message.
  void set_close_reply(std::vector<std::uint8_t> data);

  // What each path has done so far (paths() of them).
  [[nodiscard]] std::vector<PathStats> paths() const;
  // What each plane has done so far (one per plane the connection has).
  [[nodiscard]] std::vector<PlaneStats> planes() const;
  [[nodiscard]] std::uint16_t streams() const noexcept;
  [[nodiscard]] std::uint32_t mtu() const noexcept;
  [[nodiscard]] std::string mode() const;
  // This connection's counters (packets, retransmissions, drops by cause).
  [[nodiscard]] CounterGroup counters() const;

  struct Impl;
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  // The library's own: a program gets its connections from Endpoint or Simulation.
  explicit Connection(std::unique_ptr<Impl> impl);
  [[nodiscard]] Impl& impl() noexcept { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace metaroce
