#!/usr/bin/python3
"""metaroce-fabric as a user runs it, between two net_pcap ports: RoCEv2
frames built with scapy (valid ICRCs) go in from a pcap file, the output
pcaps and the JSON summary are checked exactly against the input. Prints TAP.

Usage: fabric_app_test.py PATH/metaroce-fabric PATH/metaroce-decode

Each run: port A reads in_a.pcap (and writes out_a.pcap), port B reads
in_b.pcap if given (and writes out_b.pcap), --exit-when-idle ends the run
once the input is consumed and nothing is in flight. Every run gets its own
EAL --file-prefix, whose runtime directory (EAL leaves it behind under
--no-shconf) is removed afterwards.

What is checked, per run:
  mixed      loss 10% + duplicate 5% + corrupt 1%, seeds fixed: the JSON
             invariant, out frame count == forwarded, every output frame is
             an input frame (or one bit away: corrupted), in input order, each
             at most twice (duplicated), the missing ones == dropped;
             metaroce-decode rejects exactly `corrupted` frames; a second run
             gives the same counters and the same bytes; the clean direction
             forwards its input unchanged.
  paths      paths 4 spread 50us: each path's frames leave in input order
             (per-path FIFO), `reordered` equals the reorderings in the
             output, and there are some.
  blackhole  path 2 blackholed over the whole run drops exactly the input
             frames of path 2; a window that starts after the run drops none.
  rate       rate 40mbit: the frames leave spaced by their serialisation
             time (first to last, and none before its slot).
  ecn        rate + limit + ecn: CE on exactly `ecn_marked` output frames,
             which still decode (IPv4 checksum updated, ICRC unaffected);
             forwarded + queue_full == received.
  delay      delay 4s: telemetry (/metaroce/fabric) and the stats lines
             show every frame in flight, none forwarded; they leave >= 4 s
             after the process started.
  errors     a bad spec, a missing port, an unknown port: one line, exit 2 / 1.
"""

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True

import tap  # noqa: E402 (after the bytecode switch: no __pycache__ in the source tree)
from tap import check  # noqa: E402

FABRIC = sys.argv[1]
DECODE = sys.argv[2]
CLIENT = shutil.which("dpdk-telemetry.py") or "/usr/bin/dpdk-telemetry.py"

try:
    import logging
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    from scapy.all import Ether, IP, UDP, Raw, raw
    from scapy.contrib.roce import BTH
except ImportError as e:
    print("Bail out! scapy with scapy.contrib.roce is needed (apt install python3-scapy; run with "
          "/usr/bin/python3): %s" % e)
    sys.exit(2)


# ---------------------------------------------------------------- frames

def roce_frame(i, sport, payload_len=64, tos=2):
    """An RC SEND ONLY (IPv4, ECT(0) by default) with PSN i and a valid ICRC."""
    payload = bytes((i + k) & 0xFF for k in range(payload_len))
    return raw(Ether(src="02:00:00:00:00:0a", dst="02:00:00:00:00:0b") /
               IP(src="10.0.0.1", dst="10.0.0.2", tos=tos, id=i & 0xFFFF, flags="DF") /
               UDP(sport=sport, dport=4791, chksum=0) /
               BTH(opcode=4, dqpn=0x202, psn=i) / Raw(payload))


def path_of_port(sport, paths):
    """fabric::path_of_port, written from doc/FABRIC.md."""
    h = (sport * 0x9E3779B1) & 0xFFFFFFFF
    return ((h >> 16) * paths) >> 16


def sport_of(frame):
    return struct.unpack_from("!H", frame, 34)[0]


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", 1_700_000_000 + i // 1000, (i % 1000) * 1000, len(fr), len(fr)))
            f.write(fr)


def read_pcap(path):
    """[(timestamp in ns, bytes)] of a classic pcap, micro- or nanosecond."""
    with open(path, "rb") as f:
        data = f.read()
    magic = data[:4]
    scale = {b"\xd4\xc3\xb2\xa1": 1000, b"\x4d\x3c\xb2\xa1": 1}.get(magic)
    if scale is None:
        raise RuntimeError(f"{path}: not a little-endian classic pcap")
    out, off = [], 24
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack_from("<IIII", data, off)
        off += 16
        out.append((sec * 1_000_000_000 + frac * scale, data[off:off + incl]))
        off += incl
    return out


def bit_distance(a, b):
    if len(a) != len(b):
        return 1 << 30
    return bin(int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).count("1")


def decode_errors(pcap):
    p = subprocess.run([DECODE, pcap], capture_output=True, text=True, timeout=60)
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    return sum(1 for line in lines if "error" in line), len(lines)


# ---------------------------------------------------------------- runs

WORK = tempfile.mkdtemp(prefix="metaroce-fabric-test-")
run_count = 0


def runtime_dir(prefix):
    base = os.environ.get("RUNTIME_DIRECTORY")
    if not base:
        base = "/var/run" if os.getuid() == 0 else os.environ.get("XDG_RUNTIME_DIR", "/tmp")
    return os.path.join(base, "dpdk", prefix)


class Run:
    """One metaroce-fabric process between two net_pcap ports."""

    def __init__(self, name, in_a, in_b=None, args=(), idle=0.5, background=False):
        global run_count
        run_count += 1
        self.dir = os.path.join(WORK, f"{run_count}-{name}")
        os.makedirs(self.dir)
        self.prefix = f"metaroce-fabric-test-{os.getpid()}-{run_count}"
        self.json_path = os.path.join(self.dir, "summary.json")
        self.out_a = os.path.join(self.dir, "out_a.pcap")
        self.out_b = os.path.join(self.dir, "out_b.pcap")
        in_a_path = os.path.join(self.dir, "in_a.pcap")
        write_pcap(in_a_path, in_a)
        vdev_b = f"net_pcap1,tx_pcap={self.out_b}"
        if in_b is not None:
            in_b_path = os.path.join(self.dir, "in_b.pcap")
            write_pcap(in_b_path, in_b)
            vdev_b = f"net_pcap1,rx_pcap={in_b_path},tx_pcap={self.out_b}"
        self.command = [FABRIC, "--port-a", "net_pcap0", "--port-b", "net_pcap1", "--json", self.json_path,
                        "--exit-when-idle", str(idle), "--duration", "60", *args, "--",
                        "--file-prefix", self.prefix,
                        "--vdev", f"net_pcap0,rx_pcap={in_a_path},tx_pcap={self.out_a}", "--vdev", vdev_b]
        self.started = time.time()
        self.process = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if not background:
            self.wait()

    def wait(self):
        try:
            self.stdout, self.stderr = self.process.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.stdout, self.stderr = self.process.communicate()
        shutil.rmtree(runtime_dir(self.prefix), ignore_errors=True)
        self.status = self.process.returncode
        try:
            with open(self.json_path) as f:
                self.summary = json.load(f)
        except (OSError, ValueError):
            self.summary = None
        self.output_a = read_pcap(self.out_a) if os.path.exists(self.out_a) else []
        self.output_b = read_pcap(self.out_b) if os.path.exists(self.out_b) else []
        return self

    def detail(self):
        return f"command: {' '.join(self.command)}\nstatus {self.status}\n{self.stderr}\n{self.stdout}"

    def direction(self, name):
        return self.summary[name] if self.summary else {}


def invariant_holds(d):
    return (d.get("received", -1) + d.get("duplicated", 0) ==
            d.get("forwarded", 0) + d.get("dropped", {}).get("total", 0) + d.get("in_flight", 0))


def match_in_order(inputs, outputs):
    """Maps each output frame to the input it came from: the next input (or
    the same one again, a duplicate) at bit distance 0 or 1. Returns
    (indices, distances) or None when some output matches nothing in order."""
    indices, distances = [], []
    for out in outputs:
        found = None
        for j in range(indices[-1] if indices else 0, len(inputs)):
            d = bit_distance(inputs[j], out)
            if d <= 1:
                found = (j, d)
                break
        if found is None:
            return None
        indices.append(found[0])
        distances.append(found[1])
    return indices, distances


# ---------------------------------------------------------------- mixed

inputs = [roce_frame(i, 49152 + i % 64) for i in range(2000)]
clean_b = [roce_frame(10_000 + i, 50000 + i % 8, payload_len=128) for i in range(300)]
mixed_spec = ["--a-to-b", "loss 10% duplicate 5% corrupt 1% seed 7"]
mixed = Run("mixed", inputs, clean_b, mixed_spec)
ab = mixed.direction("a_to_b")
check("mixed: exits 0 when idle and writes the JSON summary",
      mixed.status == 0 and mixed.summary is not None and mixed.summary.get("stopped_by") == "idle", mixed.detail())
check("mixed: a_to_b received every input frame, none left in flight",
      ab.get("received") == len(inputs) and ab.get("in_flight") == 0, ab)
check("mixed: received + duplicated == forwarded + dropped (+ in flight), drops are all random loss",
      invariant_holds(ab) and ab["dropped"]["total"] == ab["dropped"]["random_loss"], ab)
check("mixed: the output pcap holds exactly `forwarded` frames", len(mixed.output_b) == ab.get("forwarded"),
      f"{len(mixed.output_b)} frames, forwarded {ab.get('forwarded')}")
matched = match_in_order(inputs, [f for _, f in mixed.output_b])
check("mixed: every output frame is an input frame or one bit away, in input order", matched is not None)
if matched:
    indices, distances = matched
    twice = sum(1 for k in range(1, len(indices)) if indices[k] == indices[k - 1])
    missing = len(inputs) - len(set(indices))
    check("mixed: frames seen twice == duplicated, missing == random_loss, one-bit changes == corrupted",
          twice == ab["duplicated"] and missing == ab["dropped"]["random_loss"] and
          sum(distances) == ab["corrupted"],
          f"twice {twice} missing {missing} flipped {sum(distances)}; {ab}")
check("mixed: loss, duplication and corruption all happened at about their rates",
      150 <= ab.get("dropped", {}).get("random_loss", 0) <= 250 and 60 <= ab.get("duplicated", 0) <= 140 and
      5 <= ab.get("corrupted", 0) <= 45 and ab.get("clones") == ab.get("duplicated"), ab)
errors, decoded = decode_errors(mixed.out_b)
check("mixed: metaroce-decode rejects exactly the corrupted frames", decoded == len(mixed.output_b) and
      errors == ab.get("corrupted"), f"{errors} errors in {decoded} decoded; corrupted {ab.get('corrupted')}")
ba = mixed.direction("b_to_a")
check("mixed: b_to_a (no impairment) forwards its 300 frames unchanged and in order",
      ba.get("received") == 300 and ba.get("forwarded") == 300 and invariant_holds(ba) and
      [f for _, f in mixed.output_a] == clean_b, ba)
again = Run("mixed-again", inputs, clean_b, mixed_spec)
same_counters = all(again.direction("a_to_b").get(k) == ab.get(k) for k in
                    ("received", "forwarded", "dropped", "duplicated", "corrupted", "forwarded_bytes"))
check("mixed: the same seeds give the same counters and the same output bytes",
      again.status == 0 and same_counters and [f for _, f in again.output_b] == [f for _, f in mixed.output_b],
      f"{again.direction('a_to_b')}\n{ab}")

# Duplicates are clones sharing their bytes: corrupting one copy must copy it
# first, or both copies would carry the flipped bit (and the counts below
# would not add up).
dc_in = inputs[:400]
dup = Run("dup-corrupt", dc_in, None, ["--a-to-b", "duplicate 50% corrupt 50% seed 3"])
dab_ = dup.direction("a_to_b")
dm = match_in_order(dc_in, [f for _, f in dup.output_b])
dm_ok = dm is not None
if dm_ok:
    d_indices, d_distances = dm
    d_twice = sum(1 for k in range(1, len(d_indices)) if d_indices[k] == d_indices[k - 1])
    same_flip = sum(1 for k in range(1, len(d_indices)) if d_indices[k] == d_indices[k - 1] and
                    d_distances[k] == 1 and dup.output_b[k][1] == dup.output_b[k - 1][1])
    dm_ok = (d_twice == dab_.get("duplicated") and sum(d_distances) == dab_.get("corrupted") and same_flip == 0 and
             len(set(d_indices)) == len(dc_in))
check("dup-corrupt: each copy is corrupted on its own (a private copy is made first), counts add up",
      dup.status == 0 and dm_ok and dab_.get("private_copies", 0) > 0 and dab_.get("clones") == dab_.get("duplicated")
      and invariant_holds(dab_), dab_)

# ---------------------------------------------------------------- paths

paths = Run("paths", inputs, None, ["--a-to-b", "paths 4 spread 50us delay 10us"])
pab = paths.direction("a_to_b")
out_frames = [f for _, f in paths.output_b]
check("paths: exits 0, every frame forwarded", paths.status == 0 and pab.get("forwarded") == len(inputs) and
      len(out_frames) == len(inputs) and invariant_holds(pab), paths.detail())
position = {f: i for i, f in enumerate(inputs)}
order = [position.get(f, -1) for f in out_frames]
fifo = all(o >= 0 for o in order)
last_on_path = {}
for o in order:
    p = path_of_port(sport_of(inputs[o]), 4) if o >= 0 else -1
    if o <= last_on_path.get(p, -1):
        fifo = False
    last_on_path[p] = o
check("paths: each path's frames leave in input order (per-path FIFO)", fifo and len(last_on_path) == 4,
      f"paths seen {sorted(last_on_path)}")
late, highest = 0, -1
for o in order:
    if o < highest:
        late += 1
    highest = max(highest, o)
check("paths: `reordered` == frames released after a later one, and the spread did reorder",
      pab.get("reordered") == late and late > 0, f"counted {late}, reported {pab.get('reordered')}")

# ---------------------------------------------------------------- blackhole

on_path_2 = [f for f in inputs if path_of_port(sport_of(f), 4) == 2]
others = [f for f in inputs if path_of_port(sport_of(f), 4) != 2]
hole = Run("blackhole", inputs, None, ["--a-to-b", "paths 4 blackhole path 2 at 0s for 60s"])
hab = hole.direction("a_to_b")
check("blackhole: drops exactly the frames of path 2 inside the window",
      hole.status == 0 and hab.get("dropped", {}).get("blackhole") == len(on_path_2) and
      hab["dropped"]["total"] == len(on_path_2) and invariant_holds(hab), f"{hab}\n{hole.detail()}")
check("blackhole: forwards every other frame unchanged, in order", [f for _, f in hole.output_b] == others,
      f"{len(hole.output_b)} out, {len(others)} expected")
later = Run("blackhole-later", inputs, None, ["--a-to-b", "paths 4 blackhole 2 at 60s"])
check("blackhole: a window that opens after the run drops nothing",
      later.status == 0 and later.direction("a_to_b").get("dropped", {}).get("total") == 0 and
      len(later.output_b) == len(inputs), later.detail())

# ---------------------------------------------------------------- rate

big = [roce_frame(i, 49152 + i % 16, payload_len=1000) for i in range(1000)]
rate_bps = 40_000_000
rated = Run("rate", big, None, ["--a-to-b", "rate 40mbit"])
times = [t for t, _ in rated.output_b]
serialisation_ns = len(big[0]) * 8 * 1e9 / rate_bps  # every frame has the same length
span_ns = (times[-1] - times[0]) if len(times) > 1 else 0
expected_ns = serialisation_ns * (len(big) - 1)
check("rate: every frame forwarded", rated.status == 0 and len(times) == len(big), rated.detail())
check("rate: first to last frame takes the serialisation time of the frames after the first (within 10%)",
      0.9 * expected_ns <= span_ns <= 1.25 * expected_ns + 250e6,
      f"span {span_ns / 1e6:.1f} ms, expected {expected_ns / 1e6:.1f} ms")
# A frame never leaves before its slot: frame i at least i serialisation
# times after the first (less 20 ms, for the first frame's own lateness on a
# busy machine). Lateness itself is not checked: a loaded host delays frames.
early = [i for i, t in enumerate(times) if t - times[0] < i * serialisation_ns - 20e6]
check("rate: no frame leaves before its serialisation slot", not early,
      f"{len(early)} early, first at {early[:1]}")

# ---------------------------------------------------------------- ecn

ecn_in = [roce_frame(i, 49152 + i % 16, payload_len=1000) for i in range(1000)]
marked = Run("ecn", ecn_in, None, ["--a-to-b", "rate 100mbit limit 50000 ecn 20000"])
eab = marked.direction("a_to_b")
ce = sum(1 for _, f in marked.output_b if f[15] & 3 == 3)
check("ecn: forwarded + queue_full == received, the queue did fill and mark",
      marked.status == 0 and eab.get("forwarded", 0) + eab.get("dropped", {}).get("queue_full", -1) == len(ecn_in)
      and eab["dropped"]["queue_full"] > 0 and eab.get("ecn_marked", 0) > 0 and invariant_holds(eab), eab)
check("ecn: exactly `ecn_marked` output frames carry CE, the others keep ECT(0)",
      ce == eab.get("ecn_marked") and all(f[15] & 3 in (2, 3) for _, f in marked.output_b),
      f"{ce} CE frames, ecn_marked {eab.get('ecn_marked')}")
errors, decoded = decode_errors(marked.out_b)
check("ecn: marked frames still decode (IPv4 checksum updated, ICRC masks the ECN bits)",
      decoded == len(marked.output_b) and errors == 0, f"{errors} errors in {decoded}")

# ---------------------------------------------------------------- delay, stats, telemetry

def telemetry(prefix, command):
    path = os.path.join(runtime_dir(prefix), "dpdk_telemetry.v2")
    if os.path.exists(CLIENT):
        out = subprocess.run(["/usr/bin/python3", CLIENT, "-f", prefix], input=command + "\n",
                             capture_output=True, text=True, timeout=20)
        replies = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        return replies[0] if replies else {"client": out.stdout + out.stderr}
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.connect(path)
        greeting = json.loads(s.recv(1024).decode())
        s.send(command.encode())
        return json.loads(s.recv(greeting["max_output_len"]).decode())


slow_in = inputs[:100]
slow = Run("delay", slow_in, None, ["--a-to-b", "delay 4s", "--stats-interval", "0.5"], background=True)
reply = {}
for _ in range(30):  # until EAL is up and the command registered (slow on a loaded machine)
    time.sleep(0.2)
    try:
        reply = telemetry(slow.prefix, "/metaroce/fabric")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        continue
    if (reply.get("/metaroce/fabric") or {}).get("a_to_b", {}).get("received") == 100:
        break
slow.wait()
fabric_reply = reply.get("/metaroce/fabric") or {}
tab = fabric_reply.get("a_to_b", {})
check("delay: /metaroce/fabric shows all 100 frames received and in flight, none forwarded",
      tab.get("received") == 100 and tab.get("in_flight") == 100 and tab.get("forwarded") == 0 and
      fabric_reply.get("port_a") == "net_pcap0" and "delay" in tab.get("spec", ""), reply)
check("delay: a stats line showed them in flight",
      "a->b rx 100 fwd 0 drop 0 mark 0 in flight 100 " in slow.stdout, slow.stdout)
dab = slow.direction("a_to_b")
first_out = slow.output_b[0][0] / 1e9 if slow.output_b else 0
check("delay: all 100 leave, the first >= 4 s after the process started",
      slow.status == 0 and dab.get("forwarded") == 100 and len(slow.output_b) == 100 and
      slow.started + 4.0 <= first_out <= slow.started + 8.0,
      f"first out {first_out - slow.started:.3f} s after start; {slow.detail()}")

# ---------------------------------------------------------------- errors

bad = subprocess.run([FABRIC, "--port-a", "net_pcap0", "--port-b", "net_pcap1", "--a-to-b", "loss 1"],
                     capture_output=True, text=True, timeout=30)
check("errors: a bad spec exits 2 with one line naming the option and the token, and the hint",
      bad.returncode == 2 and "metaroce-fabric: --a-to-b: fabric spec: " in bad.stderr and "'1'" in bad.stderr and
      "Try 'metaroce-fabric --help'" in bad.stderr and len(bad.stderr.strip().splitlines()) == 2, bad.stderr)
missing = subprocess.run([FABRIC, "--port-a", "net_pcap0"], capture_output=True, text=True, timeout=30)
check("errors: a missing --port-b exits 2 and says how to name it",
      missing.returncode == 2 and "--port-b is required" in missing.stderr, missing.stderr)
prefix = f"metaroce-fabric-test-{os.getpid()}-unknown"
unknown = subprocess.run([FABRIC, "--port-a", "net_pcap0", "--port-b", "net_pcap7", "--", "--file-prefix", prefix,
                          "--vdev", f"net_pcap0,tx_pcap={os.path.join(WORK, 'x.pcap')}"],
                         capture_output=True, text=True, timeout=30)
shutil.rmtree(runtime_dir(prefix), ignore_errors=True)
check("errors: a port EAL does not know exits 1 and says to pass it with --vdev",
      unknown.returncode == 1 and "port 'net_pcap7' does not exist: pass it to EAL (--vdev net_pcap7" in
      unknown.stderr, unknown.stderr)

shutil.rmtree(WORK, ignore_errors=True)
print(f"1..{tap.count}")
sys.exit(1 if tap.failed else 0)
