#!/usr/bin/python3
"""metaroce-perf's telemetry as an operator reads it: start a loopback run
with a telemetry socket of its own (--file-prefix), query every /metaroce
command with dpdk-telemetry.py (DPDK's client; a minimal client speaking the
same protocol when it is not installed) and check keys and plausible values.
Prints TAP.

Usage: telemetry_test.py PATH/metaroce-perf

EAL notes (checked on DPDK 22.11): telemetry works with --no-shconf; the
socket is <runtime dir>/dpdk_telemetry.v2, the runtime dir being
/var/run/dpdk/<file-prefix> for root ($XDG_RUNTIME_DIR/dpdk/<file-prefix>
otherwise). EAL leaves the directory behind under --no-shconf, so the test
removes its own (a prefix with the pid in it). The socket client is
telemetry_client.py, shared with remote_telemetry_test.py."""

import json
import os
import shutil
import subprocess
import sys
import time

from telemetry_client import client_name, query as query_prefix, runtime_dir, socket_path
import tap
from tap import check

PERF = sys.argv[1]
PREFIX = f"metaroce-telemetry-test-{os.getpid()}"
SOCKET = socket_path(PREFIX)


def query(commands):
    return query_prefix(PREFIX, commands)


print("1..10")
print(f"# client: {client_name()}; socket: {SOCKET}")
perf = subprocess.Popen([PERF, "--loopback", "-s", "65536", "-D", "4", "--", "-l", "0-1", "--no-huge", "-m", "512",
                         "--no-shconf", "--no-pci", "--log-level=error", "--file-prefix", PREFIX],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
try:
    # Wait for the socket, then for both hosts to register and send a while.
    deadline = time.monotonic() + 10
    conns = {}
    while time.monotonic() < deadline and perf.poll() is None:
        if os.path.exists(SOCKET):
            try:
                conns = query(["/metaroce/conns"])[0]["/metaroce/conns"] or {}
            except (OSError, RuntimeError, ValueError):
                conns = {}
            if len(conns) == 2:
                break
        time.sleep(0.2)
    time.sleep(1.0)
    check("the telemetry socket appears and /metaroce/conns lists both ends", len(conns) == 2, json.dumps(conns))

    replies = query(["/", "/metaroce/stats", "/metaroce/conns", "/metaroce/conn,257", "/metaroce/conn,0x202",
                     "/metaroce/lcores", "/metaroce/conn,12345"])
    commands = replies[0]["/"]
    stats = replies[1]["/metaroce/stats"]
    conns = replies[2]["/metaroce/conns"]
    sender = replies[3]["/metaroce/conn"]
    receiver = replies[4]["/metaroce/conn"]
    lcores = replies[5]["/metaroce/lcores"]
    unknown = replies[6]["/metaroce/conn"]

    check("the four /metaroce commands are registered",
          all(c in commands for c in ["/metaroce/stats", "/metaroce/conns", "/metaroce/conn", "/metaroce/lcores"]),
          commands)

    hosts = sorted(stats)
    drop_names = ["rx_unknown_qpn", "rx_mempool_empty", "tx_mempool_empty", "tx_frame_too_large",
                  "rx_parse_error/truncated", "rx_parse_error/bad_icrc", "rx_parse_error/unknown_opcode"]
    check("/metaroce/stats: two hosts, every drop reason by name, frames both ways",
          len(hosts) == 2 and all(all(d in stats[h] for d in drop_names) for h in hosts)
          and all(stats[h]["tx_frames"] > 0 and stats[h]["rx_frames"] > 0 for h in hosts)
          and all(stats[h]["dropped"] == 0 for h in hosts),
          json.dumps(stats))

    a, b = f"{hosts[0]}/257", f"{hosts[1]}/514"
    check("/metaroce/conns: qpn, peer qpn, mode, state, paths, outstanding of each end",
          a in conns and b in conns and conns[a]["peer_qpn"] == 514 and conns[b]["peer_qpn"] == 257
          and all(conns[k]["mode"] == "metaroce" and conns[k]["state"] == "READY" and conns[k]["paths"] == 4
                  and "packets_outstanding" in conns[k] for k in (a, b)),
          json.dumps(conns))

    counter_names = ["data_packets_sent", "retransmitted_packets", "packets_declared_lost", "acks_received",
                     "rto_timeouts", "data_packets_received", "duplicate_packets", "send_completions"]
    check("/metaroce/conn,257 (sender): every counter by name, data_packets_sent > 0, acks_received > 0",
          sender.get("qpn") == 257 and all(c in sender["counters"] for c in counter_names)
          and len(sender["counters"]) >= 37
          and sender["counters"]["data_packets_sent"] > 0 and sender["counters"]["acks_received"] > 0,
          json.dumps(sender))

    path_keys = ["src_port", "state", "in_flight", "srtt_ns", "rto_ns", "sent", "retransmitted", "declared_lost",
                 "timeouts", "ecn_marks", "entropy_changes"]
    paths = [sender.get(f"path_{i}", {}) for i in range(4)]
    check("/metaroce/conn,257: four paths with every field, packets sent on each, an RTT measured",
          all(all(k in p for k in path_keys) for p in paths) and all(p["sent"] > 0 and p["srtt_ns"] > 0 for p in paths)
          and all(p["state"] in ("active", "failed") and 0 < p["src_port"] < 65536 for p in paths),
          json.dumps(paths))

    check("/metaroce/conn,0x202 (receiver, hex QPN): data_packets_received > 0, acks_sent > 0",
          receiver.get("qpn") == 514 and receiver["counters"]["data_packets_received"] > 0
          and receiver["counters"]["acks_sent"] > 0,
          json.dumps(receiver))

    check("/metaroce/lcores: each host on its own lcore, polling, a max poll gap",
          sorted(lcores[h]["lcore"] for h in hosts) == [0, 1]
          and all(lcores[h]["polls"] > lcores[h]["idle_polls"] > 0 and lcores[h]["max_poll_gap_ns"] > 0
                  and lcores[h]["publications"] > 1 for h in hosts),
          json.dumps(lcores))

    check("/metaroce/conn with an unknown QPN answers an error that names /metaroce/conns",
          "/metaroce/conns" in unknown.get("error", ""), json.dumps(unknown))

    output, _ = perf.communicate(timeout=30)
    check("metaroce-perf, queried while it ran, exits 0 with its table", perf.returncode == 0
          and "#bytes     #iterations" in output, output)
finally:
    if perf.poll() is None:
        perf.kill()
        perf.wait()
    shutil.rmtree(runtime_dir(PREFIX), ignore_errors=True)
sys.exit(1 if tap.failed else 0)
