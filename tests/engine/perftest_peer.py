#!/usr/bin/python3
"""One end of perftest's out-of-band TCP exchange, written apart from
metaroce's C++ (plain blocking sockets, Python's struct), to hold a
metaroce-perf end to the conversation ib_write_bw and ib_send_bw speak
(doc/WIRE.md, "Out-of-band exchange"): every step is one write and one read
of a fixed size, the client's first.

  server  plays ib_write_bw's (or ib_send_bw's) server: announces the keys
          it is given (a metaroce-perf server set up by hand receives the
          data), checks every byte the client sends.
  client  plays the client: sends its keys, runs COMMAND (a metaroce-perf
          client set up by hand, given the server's keys) between the
          barrier and the end of the test, then reports and closes.
  check-pcap  reads `tshark -T fields -e ip.src -e tcp.payload` lines and
          checks a whole conversation's bytes and order.

Each step's check prints a line; the exit status is 0 only if all held.
"""
import argparse
import ipaddress
import re
import socket
import struct
import subprocess
import sys
import time

KEYS = re.compile(rb"^[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{6}:[0-9a-f]{6}:[0-9a-f]{8}:[0-9a-f]{16}:"
                  rb"(?:[0-9a-f]{2}:){16}[0-9a-f]{8}:\x00$")
VERSION = b"6.21"  # what this peer announces: a perftest of 5.33 or later
failures = 0


def check(what, held, shown=b""):
    global failures
    if not held:
        failures += 1
    print(f"{'ok' if held else 'FAIL'}: {what}" + (f" ({shown!r})" if shown else ""), flush=True)


def keys_message(qpn, psn, rkey, vaddr, address):
    gid = ipaddress.IPv6Address("::ffff:" + address) if "." in address else ipaddress.IPv6Address(address)
    text = "%04x:%04x:%06x:%06x:%08x:%016x:" % (0, 16, qpn, psn, rkey, vaddr)
    text += "".join("%02x:" % b for b in gid.packed) + "%08x:" % 0
    return text.encode() + b"\x00"


def parse_keys(m):
    fields = m[:-1].decode().split(":")
    return {"qpn": int(fields[2], 16), "psn": int(fields[3], 16), "rkey": int(fields[4], 16),
            "vaddr": int(fields[5], 16), "gid": bytes(int(x, 16) for x in fields[6:22])}


class End:
    def __init__(self, sock, is_client):
        self.sock = sock
        self.is_client = is_client

    def read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError(f"peer closed after {len(data)} of {n} bytes")
            data += chunk
        return data

    def step(self, mine, n):
        """One exchange: the client writes then reads; the server reads then writes."""
        if self.is_client:
            self.sock.sendall(mine)
            return self.read(n)
        theirs = self.read(n)
        self.sock.sendall(mine)
        return theirs


def check_opening(end, our_mtu_code):
    v = end.step(VERSION + b"\x00" * 12, 16)
    text = v.split(b"\x00")[0]
    check("version: 16 bytes, a perftest version of 5.33 or later, NUL-padded",
          len(v) == 16 and re.fullmatch(rb"\d+\.\d+", text) is not None and float(text) >= 5.33
          and v[len(text):] == b"\x00" * (16 - len(text)), v)
    page = struct.unpack(">i", end.step(struct.pack(">i", 4096), 4))[0]
    check("page size: 4 bytes big-endian, a power of two", page >= 4096 and page & (page - 1) == 0, str(page).encode())
    line = struct.unpack(">i", end.step(struct.pack(">i", 64), 4))[0]
    check("cache line size: 4 bytes big-endian, 64", line == 64, str(line).encode())
    mtu = end.step(b"%d\x00" % our_mtu_code, 2)
    check("MTU: an IB MTU code 1..5 as text and a NUL", re.fullmatch(rb"[1-5]\x00", mtu) is not None, mtu)
    return int(mtu[:1]) if mtu[:1].isdigit() else 0


def check_keys(what, m, expect=None):
    check(f"{what}: 108 bytes in perftest's format", KEYS.match(m) is not None, m)
    if expect is not None:
        check(f"{what}: the same keys as before", m == expect, m)


def serve(a):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", a.port))
    listener.listen(1)
    listener.settimeout(60)
    sock, _ = listener.accept()
    sock.settimeout(120)
    end = End(sock, False)
    qpn, psn, rkey, vaddr = (int(x, 16) for x in a.keys.split(":"))
    mine = keys_message(qpn, psn, rkey, vaddr, a.address)
    peer_mtu = check_opening(end, a.mtu_code)
    check(f"MTU: the client offers its {a.client_mtu_code}", peer_mtu == a.client_mtu_code, str(peer_mtu).encode())
    first = end.step(mine, 108)
    check_keys("keys", first)
    if KEYS.match(first):
        k = parse_keys(first)
        check("keys: the client's QPN and first PSN as given", (k["qpn"], k["psn"]) == (a.client_qpn, a.client_psn))
        check("keys: its GID is its IPv4-mapped address", k["gid"] == ipaddress.IPv6Address("::ffff:" + a.client_address).packed)
    check_keys("barrier", end.step(mine, 108), first)
    if a.verb == "send":
        check_keys("receives posted", end.step(mine, 108), first)
    else:
        check_keys("end of the test", end.step(mine, 108), first)
        size, iters = (struct.unpack(">Q", end.step(b"\x00" * 8, 8))[0] for _ in range(2))
        peak, avg, rate = (struct.unpack(">d", end.step(b"\x00" * 8, 8))[0] for _ in range(3))
        print(f"# report: {size} B x {iters}, peak {peak:.2f} MB/s, average {avg:.2f} MB/s, {rate:.6f} Mpps")
        check(f"report: size {a.size} and {a.iterations} messages", (size, iters) == (a.size, a.iterations))
        check("report: bandwidths and message rate positive, peak >= average", avg > 0 and peak >= avg and rate > 0)
        check("report: the rate agrees with the bandwidth", abs(rate * 1e6 * size / 2**20 - avg) <= 0.01 * avg)
    check_keys("close", end.step(mine, 108), first)
    sock.sendall(b"done\x00")
    check("done: 5 bytes", end.read(5) == b"done\x00")
    check("then the client closes", sock.recv(1) == b"")
    sock.close()


def connect(a):
    sock = None
    for _ in range(300):
        try:
            sock = socket.create_connection((a.server, a.port), timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    if sock is None:
        check("connect to the server", False)
        return
    sock.settimeout(120)
    end = End(sock, True)
    mine = keys_message(a.qpn, a.psn, 0, 0, a.address)
    peer_mtu = check_opening(end, a.mtu_code)
    check(f"MTU: the server offers its {a.server_mtu_code}", peer_mtu == a.server_mtu_code, str(peer_mtu).encode())
    first = end.step(mine, 108)
    check_keys("keys", first)
    k = parse_keys(first)
    check("keys: the server's GID is its IPv4-mapped address",
          k["gid"] == ipaddress.IPv6Address("::ffff:" + a.server_address).packed)
    if a.verb == "write":
        check("keys: a buffer to write (R_Key and address)", k["rkey"] != 0 and k["vaddr"] != 0)
    check_keys("barrier", end.step(mine, 108), first)
    if a.verb == "send":
        check_keys("receives posted", end.step(mine, 108), first)
    command = a.command.format(qpn="%#x" % k["qpn"], psn="%#x" % k["psn"], rkey="%#x" % k["rkey"],
                               vaddr="%#x" % k["vaddr"])
    print(f"# running: {command}", flush=True)
    status = subprocess.call(command, shell=True)
    check("the data-path client exits 0", status == 0, str(status).encode())
    if a.verb != "send":
        check_keys("end of the test", end.step(mine, 108), first)
        mib = a.size * a.iterations / 2**20
        values = [struct.pack(">Q", a.size), struct.pack(">Q", a.iterations), struct.pack(">d", mib),
                  struct.pack(">d", mib), struct.pack(">d", a.iterations / 1e6)]
        theirs = [end.step(v, 8) for v in values]
        check("report: 5 fields of 8 bytes from the server", all(len(t) == 8 for t in theirs))
    check_keys("close", end.step(mine, 108), first)
    sock.sendall(b"done\x00")
    check("done: 5 bytes", end.read(5) == b"done\x00")
    sock.close()


def check_pcap(a):
    """The conversation in a capture: each direction reassembled, walked step
    by step; each step's client bytes all sent before the server's first."""
    streams = {"c": b"", "s": b""}
    arrival = {"c": [], "s": []}  # per byte: the index of the segment that carried it
    for i, line in enumerate(sys.stdin):
        parts = line.split()
        if len(parts) != 2:
            continue
        side = "c" if parts[0] == a.client else "s"
        data = bytes.fromhex(parts[1].replace(":", ""))
        streams[side] += data
        arrival[side] += [i] * len(data)
    steps = [("version", 16), ("page size", 4), ("cache line size", 4), ("MTU", 2), ("keys", 108), ("barrier", 108)]
    steps += [("receives posted", 108)] if a.verb == "send" else [("end of the test", 108)] + [("report", 8)] * 5
    steps += [("close", 108), ("done", 5)]
    at = 0
    for name, size in steps:
        c, s = streams["c"][at:at + size], streams["s"][at:at + size]
        if len(c) != size or len(s) != size:
            check(f"{name}: {size} bytes each way", False, c + b" | " + s)
            return
        if name in ("keys", "barrier", "receives posted", "end of the test", "close"):
            held = KEYS.match(c) is not None and KEYS.match(s) is not None
        elif name == "version":
            held = all(re.fullmatch(rb"\d+\.\d+\x00+", m) is not None for m in (c, s))
        elif name == "MTU":
            held = all(re.fullmatch(rb"[1-5]\x00", m) is not None for m in (c, s))
        elif name == "done":
            held = c == s == b"done\x00"
        else:
            held = True
        first_server = arrival["s"][at]
        last_client = arrival["c"][at + size - 1]
        ordered = name == "done" or last_client < first_server
        check(f"{name}: {size} bytes each way, in format, the client's first", held and ordered, c + b" | " + s)
        at += size
    check("nothing after the close", len(streams["c"]) == at and len(streams["s"]) == at,
          str((len(streams["c"]), len(streams["s"]), at)).encode())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="role", required=True)
    def common(parser, peer):
        parser.add_argument("--port", type=int, default=18515)
        parser.add_argument("--mtu-code", type=int, default=5, help="the IB MTU code this end offers")
        parser.add_argument(f"--{peer}-mtu-code", type=int, default=5, help="the code the other end must offer")
        parser.add_argument("--verb", choices=["write", "send"], default="write")
        parser.add_argument("--size", type=int, default=65536)
        parser.add_argument("--iterations", type=int, default=5000)
    s = sub.add_parser("server")
    common(s, "client")
    s.add_argument("--keys", required=True, help="QPN:PSN:RKEY:VADDR (hex) of the data-path server")
    s.add_argument("--address", required=True, help="the data-path server's RoCE address (its GID)")
    s.add_argument("--client-address", required=True)
    s.add_argument("--client-qpn", type=lambda x: int(x, 0), required=True)
    s.add_argument("--client-psn", type=lambda x: int(x, 0), required=True)
    c = sub.add_parser("client")
    common(c, "server")
    c.add_argument("--server", required=True)
    c.add_argument("--server-address", required=True, help="the server's RoCE address (its GID)")
    c.add_argument("--address", required=True, help="the data-path client's RoCE address")
    c.add_argument("--qpn", type=lambda x: int(x, 0), required=True)
    c.add_argument("--psn", type=lambda x: int(x, 0), required=True)
    c.add_argument("--command", required=True, help="run after the barrier; {qpn} {psn} {rkey} {vaddr} filled in")
    k = sub.add_parser("check-pcap")
    k.add_argument("--client", required=True, help="the client's IP address")
    k.add_argument("--verb", choices=["write", "send"], default="write")
    a = p.parse_args()
    try:
        {"server": serve, "client": connect, "check-pcap": check_pcap}[a.role](a)
    except (OSError, EOFError, ValueError) as e:
        check(f"the conversation went on ({e})", False)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
