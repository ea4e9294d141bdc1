#!/usr/bin/python3
"""Telemetry of metaroce-perf --server and --client as an operator reads it:
the two ends in two network namespaces over a veth pair (net_af_packet
preset), each process with its own telemetry socket (the remote roles choose
--file-prefix=metaroce-perf-<pid>), queried during the transfer.

1. One connection, 65536 B WRITE_WITH_IMMEDIATE for 3 s: through
   dpdk-telemetry.py, each process lists its host and its one connection,
   the client's QPN is the server's peer QPN and the reverse, every key is
   the documented one, and the counters grow between two reads.
2. Connections that come and go: -q 2 over every size (-a), 0.1 s each;
   both sockets read every few milliseconds until the client exits. No
   reply lists more than the two open connections, a connection never
   comes back once gone, and many sets were seen (one per size).

Root only (namespaces, veths): skips otherwise. Always removes what it
created. Prints TAP.

Usage: remote_telemetry_test.py PATH/metaroce-perf DRIVERS-CONFIG-DIR"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from telemetry_client import Connection, client_name, query, runtime_dir, socket_path
import tap
from tap import check

PERF = sys.argv[1]
PRESET = os.path.join(sys.argv[2], "net_af_packet.ini")

if os.getuid() != 0:
    print("1..0 # SKIP not root: network namespaces and veths need root (run tools/test as root)")
    sys.exit(0)

TAG = os.getpid()
NS_C, NS_S = f"mr-tc-{TAG}", f"mr-ts-{TAG}"
SERVER_IP, CLIENT_IP = "10.79.0.2", "10.79.0.1"
CONN_KEYS = {"host", "qpn", "peer_qpn", "mode", "state", "paths", "packets_outstanding", "lcore", "snapshot_age_ns"}
PATH_KEYS = {"src_port", "state", "in_flight", "next_seq", "srtt_ns", "rto_ns", "sent", "retransmitted",
             "declared_lost", "timeouts", "ecn_marks", "entropy_changes"}
LCORE_KEYS = {"lcore", "queue", "connections", "polls", "idle_polls", "idle_sleeps", "max_poll_gap_ns", "publications", "snapshot_age_ns"}
DROP_NAMES = ["rx_unknown_qpn", "rx_mempool_empty", "tx_mempool_empty", "tx_frame_too_large",
              "rx_parse_error/truncated", "rx_parse_error/bad_icrc", "rx_parse_error/unknown_opcode"]

processes = []
prefixes = []


def sh(*args):
    subprocess.run(args, check=True, capture_output=True)


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)  # runs the finally below (meson's timeout sends SIGTERM)


def start(ns, args, out):
    """metaroce-perf in a namespace; `ip netns exec` execs it, so its pid is the process's own (the prefix's)."""
    p = subprocess.Popen(["ip", "netns", "exec", ns, PERF, *args, "--preset", PRESET, "--idle-sleep-us", "5"],
                         stdout=out, stderr=subprocess.STDOUT, text=True)
    processes.append(p)
    prefix = f"metaroce-perf-{p.pid}"
    prefixes.append(prefix)
    return p, prefix


def wait_for_socket(prefix, process, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        if os.path.exists(socket_path(prefix)):
            return True
        time.sleep(0.1)
    return False


def conns_of(prefix):
    with Connection(prefix) as c:
        return c.query("/metaroce/conns")["/metaroce/conns"] or {}


def wait_for_conns(prefix, count, seconds=15):
    deadline = time.monotonic() + seconds
    conns = {}
    while time.monotonic() < deadline:
        try:
            conns = conns_of(prefix)
        except (OSError, ValueError):
            conns = {}
        if len(conns) == count:
            return conns
        time.sleep(0.1)
    return conns


def wait_for_traffic(prefix, qpn, seconds=5):
    """Until the connection's published snapshot shows data sent and acknowledged on all four paths, RTTs
    measured (a snapshot taken in the transfer's first milliseconds, on a slow build, shows none yet); the
    checks then read it as they will."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            detail = read(prefix, [f"/metaroce/conn,{qpn}"], client=False)[f"/metaroce/conn,{qpn}"]
            paths = [detail.get(f"path_{i}", {}) for i in range(4)]
            if (detail.get("counters", {}).get("data_packets_sent", 0) > 0
                    and detail["counters"].get("acks_received", 0) > 0
                    and all(p.get("sent", 0) > 0 and p.get("srtt_ns", 0) > 0 for p in paths)):
                return
        except (OSError, ValueError, KeyError, AttributeError, TypeError):
            pass
        time.sleep(0.05)


def finish(process, seconds):
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return process.returncode


def output(path):
    with open(path) as f:
        return f.read()


def read(prefix, commands, client):
    """{command: reply}; through dpdk-telemetry.py (client=True), else on a socket of our own (a fast read)."""
    if client:
        replies = query(prefix, commands)
    else:
        with Connection(prefix) as c:
            replies = [c.query(command) for command in commands]
    # A reply is keyed by the command without its parameters.
    return {command: reply[command.split(",")[0]] for command, reply in zip(commands, replies)}


def one_connection_run(work, mac_s0):
    server_out = open(os.path.join(work, "server1.out"), "w")
    client_out = open(os.path.join(work, "client1.out"), "w")
    server, sp = start(NS_S, ["--server", "--iface", "s0", "--local-ip", SERVER_IP], server_out)
    check("run 1: the server's telemetry socket appears (prefix metaroce-perf-<pid>)", wait_for_socket(sp, server),
          output(server_out.name))
    client, cp = start(NS_C, ["--client", SERVER_IP, "--peer-mac", mac_s0, "--iface", "c0", "--local-ip", CLIENT_IP,
                              "-s", "65536", "-D", "6", "--op", "write-imm", "--verify"], client_out)
    wait_for_socket(cp, client)
    client_conns = wait_for_conns(cp, 1)
    server_conns = wait_for_conns(sp, 1)
    check("run 1: each process's /metaroce/conns lists one connection, keyed <host>/<qpn>",
          len(client_conns) == 1 and len(server_conns) == 1 and list(client_conns)[0].startswith("client/")
          and list(server_conns)[0].startswith("server/"), json.dumps([client_conns, server_conns]))
    cq = next(iter(client_conns.values()), {}).get("qpn", 0)
    sq = next(iter(server_conns.values()), {}).get("qpn", 0)
    wait_for_traffic(cp, cq)
    # The operator's way first (dpdk-telemetry.py), then the same again half a second later.
    common = ["/metaroce/stats", "/metaroce/conns", "/metaroce/lcores"]
    first_c = read(cp, common + [f"/metaroce/conn,{cq}", f"/metaroce/conn,{sq}"], client=True)
    first_s = read(sp, common + [f"/metaroce/conn,{hex(sq)}"], client=True)
    time.sleep(0.5)
    second_c = read(cp, common + [f"/metaroce/conn,{cq}"], client=False)
    second_s = read(sp, common + [f"/metaroce/conn,{hex(sq)}"], client=False)

    cc, sc = first_c["/metaroce/conns"], first_s["/metaroce/conns"]
    c = next(iter(cc.values()), {})
    s = next(iter(sc.values()), {})
    check("run 1: /metaroce/conns: exactly the documented keys; the client's QPN is the server's peer QPN and the "
          "reverse; metaroce, READY, 4 paths, lcore 0",
          len(cc) == 1 and len(sc) == 1 and set(c) == CONN_KEYS and set(s) == CONN_KEYS
          and c["qpn"] == s["peer_qpn"] == cq and s["qpn"] == c["peer_qpn"] == sq and cq != 0 and sq != 0
          and cc == {f"client/{cq}": c} and sc == {f"server/{sq}": s}
          and all(x["host"] == h and x["mode"] == "metaroce" and x["state"] == "READY" and x["paths"] == 4
                  and x["lcore"] == 0 for x, h in ((c, "client"), (s, "server"))),
          json.dumps([cc, sc]))

    stats_c, stats_s = first_c["/metaroce/stats"], first_s["/metaroce/stats"]
    check("run 1: /metaroce/stats: one host each (client, server), every drop reason by name, frames both ways, "
          "nothing dropped",
          list(stats_c) == ["client"] and list(stats_s) == ["server"]
          and all(all(d in st[h] for d in DROP_NAMES) and st[h]["tx_frames"] > 0 and st[h]["rx_frames"] > 0
                  and st[h]["dropped"] == 0 for st, h in ((stats_c, "client"), (stats_s, "server"))),
          json.dumps([stats_c, stats_s]))

    detail_c, unknown = first_c[f"/metaroce/conn,{cq}"], first_c[f"/metaroce/conn,{sq}"]
    detail_s = first_s[f"/metaroce/conn,{hex(sq)}"]
    paths = [detail_c.get(f"path_{i}", {}) for i in range(4)]
    check("run 1: /metaroce/conn,<qpn> on the client: data sent and acknowledged, four paths with every field, each "
          "carrying data with an RTT measured",
          detail_c.get("qpn") == cq and detail_c.get("peer_qpn") == sq
          and detail_c["counters"]["data_packets_sent"] > 0 and detail_c["counters"]["acks_received"] > 0
          and all(set(p) == PATH_KEYS for p in paths) and all(p["sent"] > 0 and p["srtt_ns"] > 0 for p in paths),
          json.dumps(detail_c))
    check("run 1: /metaroce/conn,<hex qpn> on the server: data received, ACKs sent, completions; the client's "
          "process answers an error for the server's QPN",
          detail_s.get("qpn") == sq and detail_s.get("peer_qpn") == cq
          and detail_s["counters"]["data_packets_received"] > 0 and detail_s["counters"]["acks_sent"] > 0
          and detail_s["counters"]["receive_completions"] > 0 and "/metaroce/conns" in unknown.get("error", ""),
          json.dumps([detail_s, unknown]))

    later_c, later_s = second_c[f"/metaroce/conn,{cq}"], second_s[f"/metaroce/conn,{hex(sq)}"]
    grew = [
        second_c["/metaroce/stats"]["client"]["tx_frames"] > stats_c["client"]["tx_frames"],
        second_s["/metaroce/stats"]["server"]["rx_frames"] > stats_s["server"]["rx_frames"],
        later_c["counters"]["data_packets_sent"] > detail_c["counters"]["data_packets_sent"],
        later_s["counters"]["data_packets_received"] > detail_s["counters"]["data_packets_received"],
        second_c["/metaroce/lcores"]["client"]["polls"] > first_c["/metaroce/lcores"]["client"]["polls"],
        second_s["/metaroce/lcores"]["server"]["publications"] > first_s["/metaroce/lcores"]["server"]["publications"],
    ]
    check("run 1: counters grow between two reads (client tx_frames, server rx_frames, data packets sent and "
          "received, polls, publications)", all(grew),
          json.dumps([grew, first_c, second_c, first_s, second_s]))

    lc, ls = first_c["/metaroce/lcores"], first_s["/metaroce/lcores"]
    check("run 1: /metaroce/lcores: exactly the documented keys, lcore 0, polling, publishing",
          list(lc) == ["client"] and list(ls) == ["server"]
          and all(set(l[h]) == LCORE_KEYS and l[h]["lcore"] == 0 and l[h]["polls"] > 0 and l[h]["publications"] > 1
                  for l, h in ((lc, "client"), (ls, "server"))), json.dumps([lc, ls]))

    client_status = finish(client, 60)
    server_status = finish(server, 20)
    check("run 1: both exit 0, every message verified by the server",
          client_status == 0 and server_status == 0
          and "verify: every byte of every message checked, all correct" in output(client_out.name),
          output(client_out.name) + output(server_out.name))


def poll_sets(prefix, process, replies):
    """Reads /metaroce/conns on one socket until `process` exits; each reply's {key: (qpn, peer, state)}."""
    try:
        with Connection(prefix) as c:
            while process.poll() is None:
                conns = c.query("/metaroce/conns")["/metaroce/conns"] or {}
                replies.append({k: (v["qpn"], v["peer_qpn"], v["state"]) for k, v in conns.items()})
                time.sleep(0.003)
    except (OSError, ValueError):
        pass  # the process went away between two reads


def came_back(replies):
    """QPNs listed again after a reply that did not list them."""
    gone, back, previous = set(), set(), set()
    for r in replies:
        now = {q for q, _, _ in r.values()}
        back |= now & gone
        gone |= previous - now
        previous = now
    return back


def coming_and_going_run(work, mac_s0):
    server_out = open(os.path.join(work, "server2.out"), "w")
    client_out = open(os.path.join(work, "client2.out"), "w")
    server, sp = start(NS_S, ["--server", "--iface", "s0", "--local-ip", SERVER_IP], server_out)
    wait_for_socket(sp, server)
    client, cp = start(NS_C, ["--client", SERVER_IP, "--peer-mac", mac_s0, "--iface", "c0", "--local-ip", CLIENT_IP,
                              "-q", "2", "-a", "-D", "0.1", "-t", "2", "--op", "write-imm", "--verify",
                              "--json", os.path.join(work, "client2.json")], client_out)
    wait_for_socket(cp, client)
    # Both sockets at once, from the client's start to its exit.
    client_replies, server_replies = [], []
    readers = [threading.Thread(target=poll_sets, args=(cp, client, client_replies)),
               threading.Thread(target=poll_sets, args=(sp, client, server_replies))]
    for t in readers:
        t.start()
    client_status = finish(client, 90)
    server_status = finish(server, 20)
    for t in readers:
        t.join()
    client_sets = {frozenset(q for q, _, _ in r.values()) for r in client_replies if r}
    server_sets = {frozenset(q for q, _, _ in r.values()) for r in server_replies if r}
    client_qpns = {q for s in client_sets for q in s}
    server_peers = {p for r in server_replies for _, p, _ in r.values()}
    summary = f"{len(client_replies)} client replies, {len(client_sets)} sets; {len(server_replies)} server " \
              f"replies, {len(server_sets)} sets"
    print(f"# run 2: {summary}")
    check("run 2: -q 2 over 23 sizes: both exit 0, 23 sizes verified",
          client_status == 0 and server_status == 0
          and json.load(open(os.path.join(work, "client2.json")))["ok"] is True
          and len(json.load(open(os.path.join(work, "client2.json")))["results"]) == 23,
          output(client_out.name) + output(server_out.name))
    check("run 2: no reply lists more than the two open connections, each READY and keyed by its own host",
          all(len(r) <= 2 and all(k == f"client/{q}" and st == "READY" for k, (q, _, st) in r.items())
              for r in client_replies)
          and all(len(r) <= 2 and all(k == f"server/{q}" and st == "READY" for k, (q, _, st) in r.items())
                  for r in server_replies),
          f"{summary}; " + json.dumps([r for r in client_replies + server_replies
                                       if len(r) > 2 or any(st != "READY" for _, _, st in r.values())][:10]))
    # The client's sampler can miss a size whose two connections lived
    # between two of its reads (a loaded host): their peers are then unseen.
    # A telemetry that named wrong peers would miss nearly all 46.
    unseen = server_peers - client_qpns
    check("run 2: the sets follow the sizes: at least 8 distinct sets on each side, a closed connection never "
          "listed again, every server peer a client QPN (but for at most 3 sizes the client's reads missed)",
          len(client_sets) >= 8 and len(server_sets) >= 8 and not came_back(client_replies)
          and not came_back(server_replies) and len(unseen) <= 6,
          f"{summary}; came back: {came_back(client_replies)} {came_back(server_replies)}; "
          f"server peers not client QPNs: {unseen}")


signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
print("1..12")
print(f"# client: {client_name()}; namespaces {NS_C}, {NS_S}")
work = None
try:
    work = tempfile.mkdtemp()
    sh("ip", "netns", "add", NS_C)
    sh("ip", "netns", "add", NS_S)
    sh("ip", "link", "add", "c0", "netns", NS_C, "type", "veth", "peer", "name", "s0", "netns", NS_S)
    for ns, dev in ((NS_C, "c0"), (NS_S, "s0")):
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1")
        sh("ip", "-n", ns, "link", "set", dev, "mtu", "9000", "up")
    mac_s0 = json.loads(subprocess.run(["ip", "-n", NS_S, "-j", "link", "show", "s0"], check=True,
                                       capture_output=True, text=True).stdout)[0]["address"]
    one_connection_run(work, mac_s0)
    coming_and_going_run(work, mac_s0)
finally:
    for p in processes:
        if p.poll() is None:
            p.kill()
            p.wait()
    for ns in (NS_C, NS_S):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    for prefix in prefixes:
        shutil.rmtree(runtime_dir(prefix), ignore_errors=True)
    if work:
        shutil.rmtree(work, ignore_errors=True)
sys.exit(1 if tap.failed else 0)
