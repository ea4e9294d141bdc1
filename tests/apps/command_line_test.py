#!/usr/bin/env python3
"""Command-line mistakes, as users make them: each is caught before EAL
starts, exits 2 and says how to fix it in its first line (checked exactly).
Then the one run here: a loopback through a fabric that corrupts frames, whose
table names what the engine dropped. Prints TAP.

  command_line_test.py PERF GEN SINK FABRIC PRESETS_DIR
"""
import os
import re
import subprocess
import sys

perf, gen, sink, fabric, presets = sys.argv[1:6]
af_packet = os.path.join(presets, "net_af_packet.ini")
EAL_HINT = "(EAL arguments go after `--`)"

# (program, arguments, the exact first line on stderr)
MISTAKES = [
    (perf, ["-s", "64", "4"], f"metaroce-perf: unexpected argument '4': every option is --NAME VALUE {EAL_HINT}"),
    (perf, ["--verify", "4"], f"metaroce-perf: unexpected argument '4': --verify takes no value {EAL_HINT}"),
    (perf, ["--vdev", "net_ring0"], "metaroce-perf: --vdev is an EAL option: put it after `--` (OPTIONS -- EAL-ARGS)"),
    (perf, ["-c", "4"], "metaroce-perf: -c is not an option here (connections are -q N); as EAL's core mask it goes "
                        "after `--`"),
    (perf, ["-l", "0-1"], "metaroce-perf: -l is an EAL option: put it after `--` (OPTIONS -- EAL-ARGS)"),
    (perf, ["--", "--no-huge", "--verify"],
     "metaroce-perf: --verify is an option of this app, not of EAL: put it before `--` (OPTIONS -- EAL-ARGS)"),
    (perf, ["-s", "1X"], "metaroce-perf: --size '1X' is not a size: give bytes as 65536, 64k, 1M or 1G (k = 1024)"),
    (perf, ["-s", "2G"], "metaroce-perf: --size 2G is out of range: give 1..1073741824 bytes (1G)"),
    (perf, ["--server", "--preset", af_packet, "--iface", "mr-none0", "--local-ip", "10.0.0.2"],
     "metaroce-perf: --iface mr-none0: no such interface here: give one that `ip link` lists (e.g. one end of a "
     "veth pair)"),
    (perf, ["--client", "10.0.0.2", "--preset", af_packet, "--iface", "lo", "--local-ip", "10.0.0.1", "--peer-mac",
            "02:00"], "metaroce-perf: --peer-mac '02:00' is not a MAC address: give xx:xx:xx:xx:xx:xx"),
    (perf, ["--client", "10.0.0.2", "--preset", af_packet, "--iface", "lo", "--local-ip", "10.0.0.300"],
     "metaroce-perf: --local-ip '10.0.0.300' is not an IP address: give A.B.C.D, or an IPv6 address such as fd00::1"),
    (perf, ["--mode", "rocev2", "--mtu", "1500"],
     "metaroce-perf: --mtu 1500 is not an IB MTU: --mode rocev2 takes 256, 512, 1024, 2048 or 4096"),
    (perf, ["--mode", "rocev2", "--pkey", "0x8000"],
     "metaroce-perf: --pkey '0x8000' is not a usable P_Key: give 0x0001..0xffff with the low 15 bits not 0 "
     "(0xffff, the default partition, unless the peer is in another)"),
    (perf, ["--pkey", "0xffff"],
     "metaroce-perf: --pkey is for --mode rocev2: metaroce connections carry a P_Key of their own and timers "
     "that follow the measured RTT"),
    (perf, ["--mode", "rocev2", "--qp-timeout", "0"], "metaroce-perf: --qp-timeout 0 is out of range: give 1..31"),
    (perf, ["--loopback", "--max-connection-memory", "1048576"],
     "metaroce-perf: --max-connection-memory is for --server: it bounds the memory one connection request may "
     "commit"),
    (perf, ["--server", "--port", "net_memif0", "--local-ip", "10.0.0.2", "--max-connection-memory", "4096"],
     "metaroce-perf: --max-connection-memory 4096 is out of range: give 65536..1099511627776"),
    (perf, ["--mode", "rocev2", "--retry-count", "8"], "metaroce-perf: --retry-count 8 is out of range: give 0..7"),
    (perf, ["--mode", "rocev2", "--cm", "rdma"],
     "metaroce-perf: --cm 'rdma' is not a connection manager: give metaroce (the default) or ibta"),
    (perf, ["--cm", "ibta"],
     "metaroce-perf: --cm ibta is for --mode rocev2: the IBTA CM sets up standard RC connections only"),
    (perf, ["--mode", "rocev2", "--cm", "ibta", "--secure", "--key-file", "k"],
     "metaroce-perf: --cm ibta carries no security extension: drop --secure, or use --cm metaroce"),
    (perf, ["--client", "10.0.0.2", "--port", "net_memif0", "--local-ip", "10.0.0.1", "--mode", "rocev2",
            "--peer-qpn", "0x111"],
     "metaroce-perf: a connection set up by hand needs the peer's --peer-qpn and --peer-psn (it prints its own at "
     "start)"),
    (perf, ["--client", "10.0.0.2", "--port", "net_memif0", "--local-ip", "10.0.0.1", "--mode", "rocev2",
            "--peer-qpn", "0x111", "--peer-psn", "0"],
     "metaroce-perf: --op write set up by hand needs the server's buffer: give --remote-addr and --rkey (the VAddr "
     "and RKey it printed)"),
    (perf, ["--server", "--port", "net_memif0", "--local-ip", "10.0.0.2", "--mode", "rocev2", "--oob-port", "18515",
            "--peer-qpn", "5"],
     "metaroce-perf: --peer-qpn comes from the out-of-band exchange: drop it, or --oob/--oob-port"),
    (perf, ["--server", "--port", "net_memif0", "--local-ip", "10.0.0.2", "--mode", "rocev2", "--oob-port", "18515",
            "--op", "write", "--verify"],
     "metaroce-perf: --verify at an --oob-port server needs messages that complete there: give --op write-imm or "
     "send, or drop --verify (a plain WRITE is counted by the client's report)"),
    (perf, ["--server", "--port", "net_memif0", "--local-ip", "10.0.0.2", "--mode", "rocev2", "--oob-port", "18515",
            "--op", "read"],
     "metaroce-perf: --oob-port speaks ib_write_bw's or ib_send_bw's exchange: give --op write, write-imm or send "
     "(as the client)"),
    (perf, ["--mode", "rocev2", "--peer-qpn", "0x111", "--peer-psn", "0"],
     "metaroce-perf: --peer-qpn, --oob and the other set-up options are for --server/--client --mode rocev2"),
    (perf, ["--client", "10.0.0.2", "--port", "net_memif0", "--local-ip", "10.0.0.1", "--mode", "rocev2",
            "--peer-qpn", "0x1000000", "--peer-psn", "0"],
     "metaroce-perf: --peer-qpn '0x1000000' is not a number up to 0xffffff: give it in decimal or as 0x hex"),
    (gen, ["--port", "net_memif0", "--local-ip", "10.0.0.1", "--sink", "10.0.0.2", "--mode", "rocev2", "--mtu",
           "9000"], "metaroce-gen: --mtu 9000 is not an IB MTU: --mode rocev2 takes 256, 512, 1024, 2048 or 4096"),
    (sink, ["--port", "net_memif0", "--local-ip", "10.0.0.2", "--rnr-retry", "9"],
     "metaroce-sink: --rnr-retry 9 is out of range: give 0..7"),
    (perf, ["--loopback", "--secure"],
     "metaroce-perf: --secure needs --key-file FILE: a pre-shared key both ends hold (at least 32 random bytes, "
     "readable by its owner only)"),
    (perf, ["--loopback", "--secure=sign", "--key-file", "k"],
     "metaroce-perf: --secure=sign: give --secure (encrypt, the default) or --secure=auth-only"),
    (perf, ["--loopback", "--key-file", "k"],
     "metaroce-perf: --key-file goes with --secure: add --secure (or --secure=auth-only)"),
    (sink, ["--port", "net_memif0", "--local-ip", "10.0.0.2", "--secure", "--key-file", "/nonexistent/k"],
     "metaroce-sink: --key-file: key file /nonexistent/k: No such file or directory (make one with: head -c 32 "
     "/dev/urandom > FILE; chmod 600 FILE, and copy it to the peer)"),
    (gen, ["--quiet", "4"], f"metaroce-gen: unexpected argument '4': --quiet takes no value {EAL_HINT}"),
    (gen, ["--port", "net_memif0", "--local-ip", "10.0.0.1", "--sink", "10.0.0.2", "-q", "4", "-c", "4"],
     "metaroce-gen: --connections and --qps are the same option: give one"),
    (gen, ["--port", "net_memif0", "--local-ip", "10.0.0.1", "--sink", "10.0.0.2", "-q", "5000"],
     "metaroce-gen: --qps 5000 is out of range: give 1..4096"),
    (gen, ["--port", "net_memif0", "--local-ip", "10.0.0.1", "--sink", "10.0.0.2", "-s", "1X"],
     "metaroce-gen: --size '1X' is not a size: give BYTES (65536, 64k, 1M), MIN-MAX, A,B,C or A:WEIGHT,B:WEIGHT"),
    (gen, ["--port", "net_memif0", "--local-ip", "10.0.0.1", "--sink", "10.0.0.2", "--peer-mac", "zz"],
     "metaroce-gen: --peer-mac 'zz' is not a MAC address: give xx:xx:xx:xx:xx:xx"),
    (gen, ["--preset", af_packet, "--iface", "mr-none0", "--local-ip", "10.0.0.1", "--sink", "10.0.0.2"],
     "metaroce-gen: --iface mr-none0: no such interface here: give one that `ip link` lists (e.g. one end of a "
     "veth pair)"),
    (sink, ["extra"], f"metaroce-sink: unexpected argument 'extra': every option is --NAME VALUE {EAL_HINT}"),
    (sink, ["--port", "net_memif0", "--local-ip", "1.2.3"],
     "metaroce-sink: --local-ip '1.2.3' is not an IP address: give A.B.C.D, or an IPv6 address such as fd00::1"),
    (sink, ["--file-prefix", "x"], "metaroce-sink: --file-prefix is an EAL option: put it after `--` (OPTIONS -- "
                                   "EAL-ARGS)"),
    (fabric, ["--port-a", "a", "--port-b", "b", "stray"],
     f"metaroce-fabric: unexpected argument 'stray': every option is --NAME VALUE {EAL_HINT}"),
    (fabric, ["--vdev", "net_pcap0,rx_pcap=in.pcap"],
     "metaroce-fabric: --vdev is an EAL option: put it after `--` (OPTIONS -- EAL-ARGS)"),
    (fabric, ["--port-a", "a", "--port-b", "b", "--", "--both", "loss 1%"],
     "metaroce-fabric: --both is an option of this app, not of EAL: put it before `--` (OPTIONS -- EAL-ARGS)"),
]

# The preset's own iface= (veth0) when --iface is left out: only meaningful
# where no veth0 exists.
if not os.path.exists("/sys/class/net/veth0"):
    for program, name in ((perf, "metaroce-perf"), (sink, "metaroce-sink")):
        args = ["--server"] if program == perf else []
        MISTAKES.append((program, args + ["--preset", af_packet, "--local-ip", "10.0.0.2"],
                         f"{name}: --preset {af_packet} opens interface veth0 (its iface=), which does not exist "
                         "here: give the interface with --iface NAME"))

print(f"1..{len(MISTAKES) + 1}")
failed = 0
for n, (program, args, want) in enumerate(MISTAKES, 1):
    r = subprocess.run([program] + args, capture_output=True, text=True, timeout=30)
    first = r.stderr.splitlines()[0] if r.stderr else ""
    name = f"{os.path.basename(program)} {' '.join(args)}: exit 2, '{want}'"
    # EAL never started: none of its log lines ("EAL: ...") or its usage.
    eal_ran = re.search(r"^EAL: ", r.stderr, re.MULTILINE) or "EAL common options" in r.stdout + r.stderr
    if r.returncode == 2 and first == want and not eal_ran:
        print(f"ok {n} - {name}")
    else:
        failed += 1
        print(f"not ok {n} - {name}")
        print(f"# exit {r.returncode}; stderr:")
        for line in r.stderr.splitlines()[:10]:
            print(f"#   {line}")

# Frames corrupted by the fabric fail their ICRC at the receiver: the table
# says how many the engine dropped and under which counter.
n = len(MISTAKES) + 1
r = subprocess.run([perf, "-s", "4k", "-n", "2000", "--fabric", "corrupt 2% seed 3", "--json", "/dev/null"],
                   capture_output=True, text=True, timeout=120)
m = re.search(r"engine dropped ([0-9]+) \(([^)]*)\)", r.stdout)
causes = dict((c.rsplit(" ", 1)[0], int(c.rsplit(" ", 1)[1])) for c in m.group(2).split(", ")) if m else {}
dropped = int(m.group(1)) if m else 0
# Corruption mostly breaks the ICRC, now and then an IP checksum or a
# length: at most three causes are named, largest first, and when fewer
# than three they add up to the total.
name = ("a loopback through 2% corruption: 'engine dropped N (rx_parse_error.bad_icrc K, ...)', K > 0, "
        "the causes largest first and adding up to N")
counts = list(causes.values())
if (r.returncode == 0 and causes.get("rx_parse_error.bad_icrc", 0) > 0 and len(counts) <= 3
        and counts == sorted(counts, reverse=True) and (sum(counts) == dropped if len(counts) < 3
                                                        else sum(counts) <= dropped)):
    print(f"ok {n} - {name}")
else:
    failed += 1
    print(f"not ok {n} - {name}")
    for line in (r.stdout + r.stderr).splitlines()[-12:]:
        print(f"#   {line}")
sys.exit(1 if failed else 0)
