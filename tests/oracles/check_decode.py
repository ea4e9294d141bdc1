#!/usr/bin/python3
"""Check metaroce-decode against scapy-built golden frames.

usage: check_decode.py DECODER OUTDIR

1. make_golden.py OUTDIR builds golden.pcap + golden-expected.jsonl;
   every key of every expected object must be present and equal in the
   decoder's line for that frame (one TAP point per frame).
2. For every golden frame, copies with a single flipped bit are made, at
   least one per ICRC-covered byte (IP, UDP, BTH, extension headers, payload,
   pad, the ICRC itself); the decoder must flag each with `error`, and flips
   in payload or ICRC bytes must be reported exactly as "bad_icrc" since
   nothing but the ICRC can notice them (one TAP point per golden frame).
3. Exit codes: 0 for the clean file, 1 for the flipped file, 2 plus a
   message on stderr for no argument, a missing file and a non-pcap file.

Output is TAP; the exit status is non-zero if any point failed.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True   # keep the source tree free of __pycache__
sys.path.insert(0, HERE)
import oracle_lib  # noqa: E402
from oracle_lib import Tap  # noqa: E402

# Bytes whose flips only the ICRC can detect: anything else than "bad_icrc"
# means the decoder judged the frame on something it should not have.
ICRC_ONLY = ("payload", "icrc")

# The contract's error reasons; anything else is a contract violation.
REASONS = {"truncated", "not_ip", "bad_ip_version", "bad_ip_header_length", "ipv4_options",
           "ip_fragment", "bad_ip_length", "bad_ip_checksum", "not_udp", "not_roce_port",
           "bad_udp_length", "unknown_opcode", "bad_header_field", "bad_pad",
           "length_mismatch", "bad_icrc"}

# Keys that are only printed when present in the frame: if the expectation
# does not have them, the decoder must not print them either.
OPTIONAL_KEYS = ("vlan", "pcp", "reth", "aeth", "imm", "atomic_eth", "atomic_ack", "error")


def covered_flips(layout, frame_no):
    """Yield (offset, bit, region) for one bit in each ICRC-covered byte.

    Bytes the ICRC masks out are skipped where nothing else protects them
    either, because a decoder cannot tell such a flip from a legitimately
    re-marked frame: IPv6 traffic class / flow label / hop limit, the UDP
    checksum (0 = none for IPv4; a checksum failure has no reason code in
    the contract), and BTH byte 4 (FECN/BECN/reserved). IPv4 TOS, TTL and
    header checksum stay in: the IPv4 header checksum must catch those.
    The bit index rotates with the byte offset and frame number so that all
    eight bit positions get exercised across the file.
    """
    ip0, ip1 = layout["ip"]
    for off in range(ip0, ip1):
        rel = off - ip0
        bit = (off + frame_no) % 8
        if layout["ipver"] == 6:
            if rel in (1, 2, 3, 7):
                continue
            if rel == 0:
                bit = 4 + bit % 4          # only the version nibble is covered
        yield off, bit, "ip"
    u0, u1 = layout["udp"]
    for off in range(u0, u1 - 2):          # ports and length, not the checksum
        yield off, (off + frame_no) % 8, "udp"
    b0, b1 = layout["bth"]
    for off in range(b0, b1):
        if off - b0 == 4:
            continue
        yield off, (off + frame_no) % 8, "bth"
    for region in ("reth", "atomic_eth", "aeth", "atomic_ack", "imm", "cnp_reserved", "payload", "pad",
                   "icrc"):
        if region in layout:
            r0, r1 = layout[region]
            for off in range(r0, r1):
                yield off, (off + frame_no) % 8, region


def check_exit_codes(tap, decoder, outdir):
    def run(args):
        p = subprocess.run([decoder] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        return p.returncode, p.stderr.decode("utf-8", "replace").strip()

    rc, err = run([])
    tap.ok(rc == 2 and err, "no argument: exit 2 with a usage message on stderr",
           ["exit %d, stderr %r" % (rc, err[:200])])
    missing = os.path.join(outdir, "does-not-exist.pcap")
    if os.path.exists(missing):
        os.unlink(missing)
    rc, err = run([missing])
    tap.ok(rc == 2 and err, "missing file: exit 2 with a message on stderr",
           ["exit %d, stderr %r" % (rc, err[:200])])
    notpcap = os.path.join(outdir, "not-a-pcap.txt")
    with open(notpcap, "w") as f:
        f.write("this is not a pcap file, just some text long enough to fill a header\n")
    rc, err = run([notpcap])
    tap.ok(rc == 2 and err, "non-pcap file: exit 2 with a message on stderr",
           ["exit %d, stderr %r" % (rc, err[:200])])


def main(argv):
    if len(argv) != 3:
        print("usage: check_decode.py DECODER OUTDIR", file=sys.stderr)
        return 2
    decoder = oracle_lib.require_executable(argv[1], "decoder")
    outdir = argv[2]
    os.makedirs(outdir, exist_ok=True)
    oracle_lib.require_scapy()

    mg = subprocess.run([sys.executable, os.path.join(HERE, "make_golden.py"), outdir],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if mg.returncode != 0:
        oracle_lib.bail("make_golden.py failed: " + mg.stderr.decode().strip())
    golden = os.path.join(outdir, "golden.pcap")
    frames = oracle_lib.read_pcap(golden)
    with open(os.path.join(outdir, "golden-expected.jsonl")) as f:
        expected = [json.loads(l) for l in f]
    with open(os.path.join(outdir, "golden-layout.jsonl")) as f:
        layouts = [json.loads(l) for l in f]
    assert len(frames) == len(expected) == len(layouts)

    tap = Tap()

    # --- 1. field-by-field comparison on the clean file ----------------------
    rc, lines, err = oracle_lib.run_decoder(decoder, golden)
    tap.ok(rc == 0, "golden.pcap: decoder exits 0", ["exit %d, stderr %r" % (rc, err[:300])])
    tap.ok(len(lines) == len(frames), "golden.pcap: one output line per frame",
           ["%d frames, %d lines" % (len(frames), len(lines))])
    got = oracle_lib.by_frame(lines)
    for exp in expected:
        n = exp["frame"]
        desc = "golden frame %d (%s, IPv%d%s): fields match scapy" % (
            n, exp["opcode_name"], exp["ip_version"], ", VLAN" if "vlan" in exp else "")
        g = got.get(n)
        if g is None:
            tap.ok(False, desc, ["no output line for this frame"])
            continue
        bad = oracle_lib.diff_fields(exp, g)
        bad += [(k, "<absent>", g[k]) for k in OPTIONAL_KEYS if k in g and k not in exp]
        tap.ok(not bad, desc, ["frame %d field %s: expected %s, got %s" %
                               (n, k, json.dumps(e), json.dumps(v) if v != "<missing>" else v)
                               for k, e, v in bad])

    # --- 2. single-bit flips --------------------------------------------------
    flipped, meta = [], []
    for fi, (frame, lay) in enumerate(zip(frames, layouts)):
        for off, bit, region in covered_flips(lay, fi + 1):
            b = bytearray(frame)
            b[off] ^= 1 << bit
            flipped.append(bytes(b))
            meta.append((fi, off, bit, region))
    flip_pcap = os.path.join(outdir, "golden-bitflips.pcap")
    oracle_lib.write_pcap(flip_pcap, flipped)
    rc, lines, err = oracle_lib.run_decoder(decoder, flip_pcap)
    tap.ok(rc == 1, "golden-bitflips.pcap (%d frames): decoder exits 1" % len(flipped),
           ["exit %d, stderr %r" % (rc, err[:300])])
    got = oracle_lib.by_frame(lines)
    problems = [[] for _ in frames]
    for k, (fi, off, bit, region) in enumerate(meta, 1):
        g = got.get(k)
        where = "flip frame %d = golden %d byte %d bit %d (%s)" % (k, fi + 1, off, bit, region)
        if g is None:
            problems[fi].append(where + ": no output line")
        elif "error" not in g:
            problems[fi].append(where + ": no error reported (icrc_ok=%s)" % g.get("icrc_ok"))
        elif g["error"] not in REASONS:
            problems[fi].append(where + ": error %r is not a contract reason" % g["error"])
        elif region in ICRC_ONLY and g["error"] != "bad_icrc":
            problems[fi].append(where + ": expected error bad_icrc, got %r" % g["error"])
    counts = [0] * len(frames)
    for fi, *_ in meta:
        counts[fi] += 1
    for fi, exp in enumerate(expected):
        tap.ok(not problems[fi], "golden frame %d (%s, IPv%d): all %d single-bit flips rejected"
               % (fi + 1, exp["opcode_name"], exp["ip_version"], counts[fi]), problems[fi])

    # --- 3. exit codes on bad input ------------------------------------------
    check_exit_codes(tap, decoder, outdir)
    return tap.finish()


if __name__ == "__main__":
    oracle_lib.run_main(main)
