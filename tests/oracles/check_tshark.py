#!/usr/bin/python3
"""Cross-check metaroce-decode and the sample writer against Wireshark.

usage: check_tshark.py SAMPLE_WRITER DECODER OUTDIR
       check_tshark.py --captures METAROCE_PERF DECODER OUTDIR

1. SAMPLE_WRITER OUTDIR/samples.pcap writes frames of every opcode in both
   modes (rocev2, metaroce), IPv4/IPv6, with/without VLAN; DECODER prints
   its JSON for them.
2. For every sample frame:
   (a) tshark's dissection must agree with the decoder's JSON: Ethernet,
       VLAN, IP, UDP and BTH fields for every frame; RETH, AETH, ImmDt,
       AtomicETH, AtomicAckETH, payload length and ICRC as well for standard
       RC opcodes (tshark does
       not know metaroce's manufacturer-specific opcodes 0xC0.., nor CNP
       0x81, so there only the BTH is comparable);
   (b) tshark's verdict on the IPv4 header checksum and the UDP checksum
       (0 allowed over IPv4, mandatory over IPv6);
   (c) our own ICRC (oracle_lib, CRC-32 over the RoCEv2-masked headers) must
       equal the frame's trailing 4 bytes, and the decoder must say
       "icrc_ok": true.
3. The same tshark comparison runs on make_golden.py's scapy frames against
   golden-expected.jsonl, so tshark and scapy vouch for each other, and the
   independent ICRC runs on those frames too (cross-checking scapy's IPv4
   ICRC).

tshark 4.0 notes: UDP port 4791 is dissected as InfiniBand (RRoCE) by
default; what has to be switched off are the heuristic dissectors that try
to parse IB payload (RPC-over-RDMA, SMB Direct, iSER, ...), otherwise a
random payload may throw "Malformed" and lose the fields after it. There is
no infiniband.dissect_eoib preference any more, and no separate FECN/BECN
fields: those are read from the raw BTH bytes (infiniband.bth).

With --captures: metaroce-perf --loopback --mode rocev2 --verify --capture
runs READ (16 KiB: FIRST, MIDDLE, LAST responses; 1 KiB: ONLY) and
FETCH_ADD; tshark must agree with the decoder on every frame (RETH, AETH,
AtomicETH, AtomicAckETH and ICRC included) and see each request and
response opcode on as many distinct PSNs as messages.
"""

import ipaddress
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True   # keep the source tree free of __pycache__
sys.path.insert(0, HERE)
import oracle_lib  # noqa: E402
from oracle_lib import Tap  # noqa: E402

# Standard RC opcodes tshark dissects beyond the BTH.
STANDARD_RC = set(range(0x00, 0x15))     # SEND .. READ, ACK, atomics

# Heuristic payload dissectors under infiniband.payload (tshark -G
# heuristic-decodes); disabled so they cannot misparse test payloads.
# "ethertype" is deliberately not in the list: disabling it breaks Ethernet.
PAYLOAD_HEURISTICS = ["smc", "smb_direct", "rpcordma", "nvme-rdma", "lnet", "iser",
                      "infiniband.eoib", "infiniband_sdp", "fcoib", "drbd"]

FIELDS = [
    "frame.number", "frame.len", "frame.protocols",
    "eth.src", "eth.dst", "vlan.id", "vlan.priority",
    "ip.src", "ip.dst", "ip.dsfield.dscp", "ip.dsfield.ecn", "ip.ttl",
    "ipv6.src", "ipv6.dst", "ipv6.tclass.dscp", "ipv6.tclass.ecn", "ipv6.hlim",
    "ip.checksum.status", "udp.srcport", "udp.dstport", "udp.checksum.status",
    "infiniband.bth", "infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m",
    "infiniband.bth.padcnt", "infiniband.bth.tver", "infiniband.bth.p_key",
    "infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.psn",
    "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.aeth.syndrome.opcode",
    "infiniband.aeth.syndrome.credit_count", "infiniband.aeth.syndrome.timer",
    "infiniband.aeth.syndrome.error_code",
    "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
    "infiniband.atomicacketh.origremdt",
    "infiniband.immdt", "infiniband.invariant.crc", "data.len",
]


def tshark_base_cmd():
    """tshark plus options; only disables protocols this tshark knows."""
    tshark = shutil.which("tshark")
    if not tshark:
        oracle_lib.bail("tshark not found in PATH (Debian: apt install tshark)")
    p = subprocess.run([tshark, "-G", "protocols"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, timeout=60)
    known = {l.split("\t")[2] for l in p.stdout.decode().splitlines() if l.count("\t") >= 2}
    # Checksum validation on, so tshark also vouches for the IPv4 header
    # checksum and the UDP checksum (mandatory for IPv6, 0 allowed for IPv4).
    cmd = [tshark, "-n", "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"]
    for proto in PAYLOAD_HEURISTICS:
        if proto in known:
            cmd += ["--disable-protocol", proto]
    return cmd


def run_tshark(base, pcap):
    """Return {frame number: {field: string}} for the pcap."""
    cmd = base + ["-r", pcap, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if p.returncode != 0:
        oracle_lib.bail("tshark failed (exit %d): %s" % (p.returncode,
                                                         p.stderr.decode().strip()[:500]))
    rows = {}
    for line in p.stdout.decode("utf-8", "replace").splitlines():
        vals = line.split("\t")
        vals += [""] * (len(FIELDS) - len(vals))
        row = dict(zip(FIELDS, vals))
        rows[int(row["frame.number"])] = row
    return rows


def to_int(s):
    return int(s, 0)


def to_bool(s):
    # tshark 4.0 prints booleans as 1/0 in -T fields; newer ones as True/False.
    if s in ("1", "True", "true"):
        return True
    if s in ("0", "False", "false"):
        return False
    raise ValueError("not a boolean: %r" % s)


def tshark_view(row):
    """Translate tshark's fields into the decoder's JSON vocabulary.

    Returns (values, full): values is a dict keyed like the decoder output;
    full says whether tshark dissected beyond the BTH (standard RC opcode).
    """
    v = {}
    v["frame_len"] = to_int(row["frame.len"])
    v["eth_src"] = row["eth.src"].lower()
    v["eth_dst"] = row["eth.dst"].lower()
    if row["vlan.id"]:
        v["vlan"] = to_int(row["vlan.id"])
        v["pcp"] = to_int(row["vlan.priority"])
    if row["ip.src"]:
        v.update(ip_version=4, src=str(ipaddress.ip_address(row["ip.src"])),
                 dst=str(ipaddress.ip_address(row["ip.dst"])),
                 dscp=to_int(row["ip.dsfield.dscp"]), ecn=to_int(row["ip.dsfield.ecn"]),
                 ttl=to_int(row["ip.ttl"]))
    elif row["ipv6.src"]:
        # ipaddress normalises tshark's text; the textual form itself is
        # checked against Python's in check_decode.py.
        v.update(ip_version=6, src=str(ipaddress.ip_address(row["ipv6.src"])),
                 dst=str(ipaddress.ip_address(row["ipv6.dst"])),
                 dscp=to_int(row["ipv6.tclass.dscp"]), ecn=to_int(row["ipv6.tclass.ecn"]),
                 ttl=to_int(row["ipv6.hlim"]))
    v["sport"] = to_int(row["udp.srcport"])
    v["dport"] = to_int(row["udp.dstport"])
    if not row["infiniband.bth.opcode"]:
        return v, False
    opcode = to_int(row["infiniband.bth.opcode"])
    bth = bytes.fromhex(row["infiniband.bth"].replace(":", ""))
    v.update({
        "opcode": opcode,
        "solicited": to_bool(row["infiniband.bth.se"]),
        "mig_req": to_bool(row["infiniband.bth.m"]),
        "pad": to_int(row["infiniband.bth.padcnt"]),
        "tver": to_int(row["infiniband.bth.tver"]),
        "pkey": to_int(row["infiniband.bth.p_key"]),
        "fecn": bool(bth[4] & 0x80),
        "becn": bool(bth[4] & 0x40),
        "dest_qp": to_int(row["infiniband.bth.destqp"]),
        "ack_req": to_bool(row["infiniband.bth.a"]),
        "psn": to_int(row["infiniband.bth.psn"]),
    })
    full = opcode in STANDARD_RC
    if not full:
        return v, False
    if row["infiniband.atomiceth.swapdt"]:
        # tshark 4.0 reuses the RETH va / r_key fields inside AtomicETH.
        v["atomic_eth"] = {"va": to_int(row["infiniband.reth.va"]),
                           "rkey": to_int(row["infiniband.reth.r_key"]),
                           "swap_add": to_int(row["infiniband.atomiceth.swapdt"]),
                           "compare": to_int(row["infiniband.atomiceth.cmpdt"])}
    elif row["infiniband.reth.va"]:
        v["reth"] = {"va": to_int(row["infiniband.reth.va"]),
                     "rkey": to_int(row["infiniband.reth.r_key"]),
                     "dma_len": to_int(row["infiniband.reth.dmalen"])}
    if row["infiniband.atomicacketh.origremdt"]:
        v["atomic_ack"] = {"orig": to_int(row["infiniband.atomicacketh.origremdt"])}
    if row["infiniband.aeth.syndrome"]:
        syn = to_int(row["infiniband.aeth.syndrome"])
        v["aeth"] = {"syndrome": syn, "msn": to_int(row["infiniband.aeth.msn"])}
        kind = to_int(row["infiniband.aeth.syndrome.opcode"])
        if kind == 0:
            v["aeth"].update(aeth_kind="ack", credit=to_int(row["infiniband.aeth.syndrome.credit_count"]))
        elif kind == 1:
            v["aeth"].update(aeth_kind="rnr_nak", rnr_timer=to_int(row["infiniband.aeth.syndrome.timer"]))
        elif kind == 3:
            v["aeth"].update(aeth_kind="nak", nak_code=to_int(row["infiniband.aeth.syndrome.error_code"]))
    if row["infiniband.immdt"]:
        v["imm"] = int(row["infiniband.immdt"].replace(":", ""), 16)
    if row["infiniband.invariant.crc"]:
        # tshark shows the 4 trailing bytes as a big-endian number; the
        # ICRC is transmitted least-significant byte first.
        be = to_int(row["infiniband.invariant.crc"])
        v["icrc"] = int.from_bytes(be.to_bytes(4, "big"), "little")
    # tshark's Data includes the pad bytes.
    v["payload_plus_pad"] = to_int(row["data.len"]) if row["data.len"] else 0
    return v, True


def compare(tv, full, subject):
    """Differences between tshark's view and `subject` (decoder or scapy)."""
    bad = []
    for k, e in tv.items():
        if k == "payload_plus_pad":
            if "payload_len" in subject and "pad" in subject:
                got = subject["payload_len"] + subject["pad"]
                if got != e:
                    bad.append(("payload_len+pad", e, got))
            continue
        if k not in subject:
            bad.append((k, e, "<missing>"))
        elif isinstance(e, dict):
            bad += [(k + "." + kk, ee, gg) for kk, ee, gg in oracle_lib.diff_fields(e, subject[k])]
        elif not oracle_lib.same(e, subject[k]):
            bad.append((k, e, subject[k]))
    if full:
        # Headers the decoder reports but tshark did not see are errors too.
        for k in ("reth", "aeth", "imm", "atomic_eth", "atomic_ack"):
            if k in subject and k not in tv:
                bad.append((k, "<absent in tshark>", subject[k]))
        if "icrc" not in tv:
            bad.append(("icrc", "<absent in tshark>", subject.get("icrc")))
    return bad


def describe(d):
    ip = "IPv%s" % d.get("ip_version", "?")
    return "%s (%s), %s%s" % (d.get("opcode_name", "?"), hex(d["opcode"]) if "opcode" in d else "?",
                              ip, ", VLAN" if "vlan" in d else "")


def check_tshark_against(tap, label, rows, subjects, nframes):
    for n in range(1, nframes + 1):
        s = subjects.get(n)
        row = rows.get(n)
        desc = "%s frame %d: tshark agrees" % (label, n)
        if s is None or row is None:
            tap.ok(False, desc, ["missing %s" % ("decoder/expected line" if s is None
                                                 else "tshark row")])
            continue
        desc = "%s frame %d %s: tshark agrees" % (label, n, describe(s))
        if "infiniband" not in row["frame.protocols"].split(":"):
            tap.ok(False, desc, ["tshark did not dissect it as InfiniBand: %s"
                                 % row["frame.protocols"]])
            continue
        try:
            tv, full = tshark_view(row)
        except (ValueError, KeyError) as e:
            tap.ok(False, desc, ["cannot parse tshark's fields: %s" % e])
            continue
        bad = compare(tv, full, s)
        tap.ok(not bad, desc, ["frame %d field %s: tshark says %s, %s says %s"
                               % (n, k, json.dumps(e), "decoder" if label == "samples"
                                  else "scapy", json.dumps(g)) for k, e, g in bad])


# Wireshark's checksum verdicts (proto_checksum_enum_e).
CHECKSUM_STATUS = {"0": "bad", "1": "good", "2": "unverified", "3": "not present",
                   "4": "illegal (zero)"}


def check_checksums(tap, label, rows, nframes):
    """tshark's verdict on the IPv4 header and UDP checksums.

    IPv4: header checksum good; UDP checksum 0 (RoCEv2 practice) or good.
    IPv6: UDP checksum good, or zero: RoCEv2 senders (and metaroce, see
    doc/WIRE.md) leave it zero because the ICRC covers the whole packet, the
    zero-checksum exception of RFC 6935/6936. tshark calls a zero one
    "illegal" (status 4); a non-zero wrong one ("bad") is still a failure.
    """
    for n in range(1, nframes + 1):
        row = rows.get(n)
        if row is None:
            continue        # already reported by check_tshark_against
        ip_st, udp_st = row["ip.checksum.status"], row["udp.checksum.status"]
        reasons = []
        if row["ip.src"]:
            if ip_st != "1":
                reasons.append("IPv4 header checksum: %s" % CHECKSUM_STATUS.get(ip_st, ip_st))
            if udp_st not in ("1", "3"):
                reasons.append("UDP checksum over IPv4: %s (want good or none)"
                               % CHECKSUM_STATUS.get(udp_st, udp_st))
            ver = "IPv4"
        else:
            if udp_st not in ("1", "4"):
                reasons.append("UDP checksum over IPv6: %s (want good, or zero as RoCEv2 "
                               "senders write it)" % CHECKSUM_STATUS.get(udp_st, udp_st))
            ver = "IPv6"
        tap.ok(not reasons, "%s frame %d (%s): IP/UDP checksums valid per tshark"
               % (label, n, ver), ["frame %d %s" % (n, r) for r in reasons])


def check_icrc(tap, label, frames, subjects):
    for n, fr in enumerate(frames, 1):
        s = subjects.get(n, {})
        desc = "%s frame %d %s: independent ICRC matches" % (label, n, describe(s) if s else "")
        try:
            computed, stored = oracle_lib.icrc_of_frame(fr)
        except oracle_lib.FrameError as e:
            tap.ok(False, desc, ["cannot locate the ICRC: %s" % e])
            continue
        reasons = []
        if computed != stored:
            reasons.append("computed 0x%08x, frame carries 0x%08x" % (computed, stored))
        if s.get("icrc_ok") is not True:
            reasons.append("decoder says icrc_ok=%s error=%s" % (s.get("icrc_ok"), s.get("error")))
        if "icrc" in s and s["icrc"] != stored:
            reasons.append("decoder's icrc %s != trailing bytes 0x%08x" % (s["icrc"], stored))
        tap.ok(not reasons, desc, reasons)


# What each metaroce-perf --loopback --mode rocev2 run with --capture must
# show: its arguments, and the opcodes (READ REQUEST 0x0c; READ RESPONSE
# FIRST 0x0d, MIDDLE 0x0e, LAST 0x0f, ONLY 0x10; FETCH_ADD 0x14 and ATOMIC
# ACKNOWLEDGE 0x12) whose frames carry distinct PSNs, as many as messages.
CAPTURE_RUNS = [
    ("read-16k", ["--op", "read", "-s", "16384", "-n", "30"], {0x0c: 30, 0x0d: 30, 0x0f: 30}, {0x0e}),
    ("read-1k", ["--op", "read", "-s", "1024", "-n", "30"], {0x0c: 30, 0x10: 30}, set()),
    ("fetch-add", ["--op", "fetch-add", "-n", "30"], {0x14: 30, 0x12: 30}, set()),
]


def check_captures(tap, perf, decoder, base, outdir):
    """metaroce-perf's own rocev2 READ and atomic frames, as tshark reads them."""
    for label, args, counts, present in CAPTURE_RUNS:
        pcap = os.path.join(outdir, "capture-%s.pcap" % label)
        if os.path.exists(pcap):
            os.unlink(pcap)
        cmd = [perf, "--loopback", "--mode", "rocev2", "--verify", "--capture", pcap] + args
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        tap.ok(p.returncode == 0 and os.path.exists(pcap), "%s: metaroce-perf %s exits 0" % (label, " ".join(args)),
               p.stdout.decode("utf-8", "replace").splitlines()[-10:])
        if p.returncode != 0 or not os.path.exists(pcap):
            continue
        frames = oracle_lib.read_pcap(pcap)
        rc, lines, err = oracle_lib.run_decoder(decoder, pcap)
        tap.ok(rc == 0, "%s: decoder exits 0" % label, ["exit %d, stderr %r" % (rc, err[:300])])
        dec = oracle_lib.by_frame(lines)
        rows = run_tshark(base, pcap)
        # Every frame: tshark's BTH, RETH, AETH, AtomicETH, AtomicAckETH and
        # ICRC equal the decoder's.
        check_tshark_against(tap, label, rows, dec, len(frames))
        check_icrc(tap, label, frames, dec)
        psns = {}
        for row in rows.values():
            if row["infiniband.bth.opcode"]:
                psns.setdefault(to_int(row["infiniband.bth.opcode"]), set()).add(to_int(row["infiniband.bth.psn"]))
        wrong = ["opcode %#04x: %d distinct PSNs, want %d" % (o, len(psns.get(o, ())), want)
                 for o, want in counts.items() if len(psns.get(o, ())) != want]
        wrong += ["opcode %#04x: absent" % o for o in present if o not in psns]
        tap.ok(not wrong, "%s: tshark sees opcodes %s" % (label, ", ".join(
            "%#04x" % o for o in sorted(set(counts) | present))),
               wrong + ["seen: %s" % sorted("%#04x" % o for o in psns)])


def main(argv):
    if len(argv) == 5 and argv[1] == "--captures":
        perf = oracle_lib.require_executable(argv[2], "metaroce-perf")
        decoder = oracle_lib.require_executable(argv[3], "decoder")
        os.makedirs(argv[4], exist_ok=True)
        tap = Tap()
        check_captures(tap, perf, decoder, tshark_base_cmd(), argv[4])
        return tap.finish()
    if len(argv) != 4:
        print("usage: check_tshark.py SAMPLE_WRITER DECODER OUTDIR\n"
              "       check_tshark.py --captures METAROCE_PERF DECODER OUTDIR", file=sys.stderr)
        return 2
    writer = oracle_lib.require_executable(argv[1], "sample writer")
    decoder = oracle_lib.require_executable(argv[2], "decoder")
    outdir = argv[3]
    os.makedirs(outdir, exist_ok=True)
    base = tshark_base_cmd()
    tap = Tap()

    # --- samples from the lead's writer ---------------------------------------
    samples = os.path.join(outdir, "samples.pcap")
    if os.path.exists(samples):
        os.unlink(samples)
    p = subprocess.run([writer, samples], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    if p.returncode != 0 or not os.path.exists(samples):
        oracle_lib.bail("sample writer failed (exit %d): %s"
                        % (p.returncode, p.stderr.decode().strip()[:500]))
    frames = oracle_lib.read_pcap(samples)
    tap.ok(frames, "samples.pcap has frames", ["%d frames" % len(frames)])
    rc, lines, err = oracle_lib.run_decoder(decoder, samples)
    tap.ok(rc == 0, "samples.pcap: decoder exits 0", ["exit %d, stderr %r" % (rc, err[:300])])
    dec = oracle_lib.by_frame(lines)
    rows = run_tshark(base, samples)
    check_tshark_against(tap, "samples", rows, dec, len(frames))
    check_checksums(tap, "samples", rows, len(frames))
    check_icrc(tap, "samples", frames, dec)

    # Coverage, so a writer that silently lost a mode does not pass.
    seen = {(d.get("ip_version"), "vlan" in d) for d in dec.values()}
    ops = {d.get("opcode") for d in dec.values()}
    missing = [c for c in [(4, False), (4, True), (6, False), (6, True)] if c not in seen]
    tap.ok(not missing, "samples cover IPv4/IPv6 with and without VLAN",
           ["missing (ip_version, vlan): %s" % missing])
    tap.ok(any(o is not None and o >= 0xC0 for o in ops) and any(o in STANDARD_RC for o in ops),
           "samples cover both rocev2 and metaroce opcodes",
           ["opcodes seen: %s" % sorted(hex(o) for o in ops if o is not None)])

    # --- scapy golden frames ---------------------------------------------------
    gdir = os.path.join(outdir, "golden")
    mg = subprocess.run([sys.executable, os.path.join(HERE, "make_golden.py"), gdir],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if mg.returncode != 0:
        oracle_lib.bail("make_golden.py failed: " + mg.stderr.decode().strip())
    golden = os.path.join(gdir, "golden.pcap")
    gframes = oracle_lib.read_pcap(golden)
    with open(os.path.join(gdir, "golden-expected.jsonl")) as f:
        expected = {e["frame"]: e for e in map(json.loads, f)}
    grows = run_tshark(base, golden)
    check_tshark_against(tap, "golden", grows, expected, len(gframes))
    check_checksums(tap, "golden", grows, len(gframes))
    check_icrc(tap, "golden", gframes, expected)
    return tap.finish()


if __name__ == "__main__":
    oracle_lib.run_main(main)
