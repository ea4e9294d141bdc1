#!/usr/bin/python3
"""IBTA RC conformance of the rocev2 connection, frame by frame.

usage: check_conformance.py DRIVER OUTDIR

For each rule: scapy builds the frames a standard RC peer (QPN 0x11,
10.0.0.1) sends to our connection (QPN 0x22, 10.0.0.2), written to a pcap
with the virtual time each arrives at; DRIVER (roce_conformance_driver.cpp)
hands them to a RoceConnection and writes every frame it emits to another
pcap. tshark, the independent decoder, reads the answers back and every
field the rule fixes (opcode, destination QP, P_Key, PSN, AETH syndrome and
its NAK code or RNR timer, MSN, payload bytes) is compared with what the
rule says; the ICRC of every answer is recomputed here (oracle_lib). The
sections cited are those of the InfiniBand Architecture Specification
Vol. 1 (Release 1.4), chapter 9.7 (reliable service), and Annex A17
(RoCEv2) for the encapsulation.

Prints TAP, one case per rule and aspect.
"""

import json
import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(HERE, "..", "oracles"))
import oracle_lib  # noqa: E402
from oracle_lib import Tap  # noqa: E402

oracle_lib.require_scapy()
import logging  # noqa: E402
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.all import Ether, IP, UDP, Raw, Packet, raw  # noqa: E402
from scapy.fields import XLongField, XIntField, IntField  # noqa: E402
from scapy.contrib.roce import BTH, AETH  # noqa: E402


class RETH(Packet):  # IBTA 9.3.3.2 (scapy has none)
    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dma_len", 0)]


class ImmDt(Packet):  # IBTA 9.3.4
    name = "ImmDt"
    fields_desc = [XIntField("imm", 0)]


# Opcodes, IBTA 9.2 table 38 (RC).
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0x00, 0x01, 0x02, 0x04
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = 0x06, 0x07, 0x08, 0x0A
READ_REQUEST = 0x0C
READ_FIRST, READ_MIDDLE, READ_LAST, READ_ONLY = 0x0D, 0x0E, 0x0F, 0x10
ACKNOWLEDGE = 0x11
# AETH syndromes, IBTA 9.3.5 table 43/44.
ACK_NO_CREDIT = 0x1F          # ACK, credit count 31: "no flow control"
NAK_PSN_SEQ = 0x60            # NAK code 0
NAK_INVALID_REQ = 0x61        # NAK code 1
RNR = 0x20                    # | timer code

MTU = 256
OUR_QPN, PEER_QPN = 0x22, 0x11
OUR_FIRST_PSN = 0x200         # the driver's own first PSN (its requests)

FIELDS = ["frame.number", "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.p_key",
          "infiniband.bth.psn", "infiniband.bth.a", "infiniband.aeth.syndrome", "infiniband.aeth.msn",
          "infiniband.aeth.syndrome.opcode", "infiniband.aeth.syndrome.timer",
          "infiniband.aeth.syndrome.error_code", "infiniband.reth.va", "infiniband.reth.dmalen",
          "udp.dstport", "ip.src", "ip.dst", "data.data"]
PAYLOAD_HEURISTICS = ["smc", "smb_direct", "rpcordma", "nvme-rdma", "lnet", "iser",
                      "infiniband.eoib", "infiniband_sdp", "fcoib", "drbd"]


def region_byte(i):
    """What the driver's region holds at offset i (and what a READ returns)."""
    return (i * 7 + 3) & 0xFF


def requester_byte(i):
    """What the driver's own source buffer holds at offset i."""
    return (i * 13 + 1) & 0xFF


def frame(op, psn, payload=b"", reth=None, imm=None, aeth=None, ackreq=0):
    """One frame of the peer, IPv4, scapy computing the ICRC."""
    pad = (4 - len(payload) % 4) % 4
    pkt = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") /
           IP(src="10.0.0.1", dst="10.0.0.2", tos=(26 << 2) | 2, ttl=64, flags="DF") /
           UDP(sport=49152, dport=oracle_lib.ROCE_PORT, chksum=0) /
           BTH(opcode=op, padcount=pad, pkey=0xFFFF, dqpn=OUR_QPN, ackreq=ackreq,
               psn=psn & 0xFFFFFF, icrc=None))
    if reth is not None:
        pkt = pkt / RETH(va=reth[0], rkey=reth[1], dma_len=reth[2])
    if aeth is not None:
        pkt = pkt / AETH(syndrome=aeth[0], msn=aeth[1])
    if imm is not None:
        pkt = pkt / ImmDt(imm=imm)
    pkt = pkt / Raw(payload + b"\0" * pad)
    b = raw(pkt)
    crc, stored = oracle_lib.icrc_of_frame(b)
    if crc != stored:
        oracle_lib.bail("scapy's ICRC 0x%08x differs from ours 0x%08x" % (stored, crc))
    return b


def write_pcap_ns(path, timed):
    """Classic pcap, nanosecond timestamps (virtual time from 0)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for t, fr in timed:
            f.write(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000, len(fr), len(fr)))
            f.write(fr)


def read_pcap_ns(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = data[:4]
    if magic not in (b"\x4d\x3c\xb2\xa1", b"\xd4\xc3\xb2\xa1"):
        oracle_lib.bail("%s: not a little-endian classic pcap" % path)
    scale = 1 if magic == b"\x4d\x3c\xb2\xa1" else 1000
    out, off = [], 24
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack_from("<IIII", data, off)
        off += 16
        out.append((sec * 1_000_000_000 + frac * scale, data[off:off + incl]))
        off += incl
    return out


class Runner:
    def __init__(self, driver, outdir):
        self.driver = driver
        self.outdir = outdir
        os.makedirs(outdir, exist_ok=True)
        info = subprocess.run([driver, "--info"], stdout=subprocess.PIPE, timeout=60, check=True)
        self.info = json.loads(info.stdout)
        tshark = shutil.which("tshark")
        if not tshark:
            oracle_lib.bail("tshark not found in PATH (Debian: apt install tshark)")
        p = subprocess.run([tshark, "-G", "protocols"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=60)
        known = {l.split("\t")[2] for l in p.stdout.decode().splitlines() if l.count("\t") >= 2}
        self.tshark = [tshark, "-n"]
        for proto in PAYLOAD_HEURISTICS:
            if proto in known:
                self.tshark += ["--disable-protocol", proto]

    def run(self, name, timed, args=()):
        """Returns (answers, driver lines): answers are dicts of tshark's
        fields plus "t" (virtual ns) and "icrc_ok"."""
        inp = os.path.join(self.outdir, name + "-in.pcap")
        outp = os.path.join(self.outdir, name + "-out.pcap")
        write_pcap_ns(inp, timed)
        p = subprocess.run([self.driver, inp, outp] + [str(a) for a in args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        if p.returncode != 0:
            oracle_lib.bail("%s: driver failed: %s" % (name, p.stderr.decode()[:300]))
        lines = [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]
        raw_frames = read_pcap_ns(outp)
        cmd = self.tshark + ["-r", outp, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"]
        for f in FIELDS:
            cmd += ["-e", f]
        t = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        if t.returncode != 0:
            oracle_lib.bail("tshark failed on %s: %s" % (outp, t.stderr.decode()[:300]))
        answers = []
        for line, (ts, fr) in zip(t.stdout.decode().splitlines(), raw_frames):
            vals = line.split("\t")
            vals += [""] * (len(FIELDS) - len(vals))
            row = dict(zip(FIELDS, vals))
            crc, stored = oracle_lib.icrc_of_frame(fr)
            a = {"t": ts, "icrc_ok": crc == stored}
            for k in ("opcode", "destqp", "p_key", "psn", "a"):
                v = row["infiniband.bth." + k]
                a[k] = int(v, 0) if v else None
            for k in ("syndrome", "msn"):
                v = row["infiniband.aeth." + k]
                a[k] = int(v, 0) if v else None
            for k in ("timer", "error_code", "opcode"):
                v = row["infiniband.aeth.syndrome." + k]
                a["aeth_" + k] = int(v, 0) if v else None
            a["data"] = bytes.fromhex(row["data.data"].replace(":", "")) if row["data.data"] else b""
            a["ip"] = (row["ip.src"], row["ip.dst"])
            answers.append(a)
        if len(answers) != len(raw_frames):
            oracle_lib.bail("%s: tshark read %d frames of %d" % (name, len(answers), len(raw_frames)))
        return answers, lines


def summary(lines):
    for l in lines:
        if "frames_in" in l:
            return l
    return {}


def counters(lines):
    for l in lines:
        if "counters" in l:
            return l["counters"]
    return {}


def completions(lines):
    return [l for l in lines if "completion" in l]


def check_answers(tap, rule, answers, expected):
    """expected: list of dicts of fields; every answer must match its entry
    and there must be exactly as many answers as entries."""
    reasons = []
    if len(answers) != len(expected):
        reasons.append("%d answers, expected %d: %s" % (
            len(answers), len(expected),
            [(hex(a["opcode"] or 0), hex(a["psn"] or 0), a["syndrome"], a["msn"]) for a in answers]))
    for i, (a, e) in enumerate(zip(answers, expected)):
        full = {"destqp": PEER_QPN, "p_key": 0xFFFF, "icrc_ok": True, "ip": ("10.0.0.2", "10.0.0.1")}
        full.update(e)
        for k, v in full.items():
            if a.get(k) != v:
                reasons.append("answer %d: %s is %r, expected %r" % (i + 1, k, a.get(k), v))
    tap.ok(not reasons, rule, reasons)


def ack(psn, msn, **kw):
    d = {"opcode": ACKNOWLEDGE, "psn": psn & 0xFFFFFF, "syndrome": ACK_NO_CREDIT, "msn": msn, "aeth_opcode": 0}
    d.update(kw)
    return d


def nak(psn, msn, code):
    return {"opcode": ACKNOWLEDGE, "psn": psn & 0xFFFFFF, "syndrome": 0x60 | code, "msn": msn,
            "aeth_opcode": 3, "aeth_error_code": code}


def main(argv):
    if len(argv) != 3:
        oracle_lib.bail("usage: check_conformance.py DRIVER OUTDIR")
    driver = oracle_lib.require_executable(argv[1], "driver")
    r = Runner(driver, argv[2])
    tap = Tap()
    va, rkey = r.info["va"], r.info["rkey"]
    us = 1000

    # ---- 9.7.1: PSNs are modulo 2^24; 9.7.5.1.1: an ACK acknowledges its
    # PSN and every earlier one. A 3-packet WRITE through the wrap.
    e = 0xFFFFFE
    data = bytes(region_byte(i + 1) for i in range(2 * MTU + 40))
    timed = [(10 * us, frame(WRITE_FIRST, e, data[:MTU], reth=(va + 4096, rkey, len(data)))),
             (11 * us, frame(WRITE_MIDDLE, e + 1, data[MTU:2 * MTU])),
             (12 * us, frame(WRITE_LAST, e + 2, data[2 * MTU:], ackreq=1)),
             # 9.7.5.1.2 (duplicate): PSN 0xffffff is behind the expected
             # PSN 1 across the wrap: re-ACKed with the latest PSN, not NAKed.
             (20 * us, frame(WRITE_MIDDLE, e + 1, data[MTU:2 * MTU]))]
    ans, lines = r.run("psn-wrap", timed, ["--expect-psn", e])
    check_answers(tap, "9.7.1 PSN wrap at 2^24: WRITE 0xfffffe..0x000000 ACKed at PSN 0, MSN 1; "
                  "a duplicate across the wrap re-ACKed, no NAK", ans, [ack(0, 1), ack(0, 1)])
    c = counters(lines)
    tap.ok(c.get("duplicate_packets") == 1 and c.get("out_of_sequence_drops") is None and
           c.get("data_bytes_placed") == len(data), "9.7.1 PSN wrap: counters (1 duplicate, no gap, all bytes)",
           [json.dumps(c)])

    # ---- 9.7.5.1.2 / C9-99: a duplicate WRITE is not executed again but
    # ACKed (the ACK of the original may have been lost).
    e = 0x1000
    timed = [(10 * us, frame(WRITE_ONLY, e, b"A" * 100, reth=(va, rkey, 100), ackreq=1)),
             (20 * us, frame(WRITE_ONLY, e + 1, b"B" * 64, reth=(va + 128, rkey, 64), ackreq=1)),
             (30 * us, frame(WRITE_ONLY, e, b"C" * 100, reth=(va, rkey, 100), ackreq=1))]
    ans, lines = r.run("dup-write", timed, ["--expect-psn", e])
    check_answers(tap, "9.7.5.1.2 duplicate WRITE re-ACKed with the latest PSN and MSN (2), not executed",
                  ans, [ack(e, 1), ack(e + 1, 2), ack(e + 1, 2)])
    c = counters(lines)
    tap.ok(c.get("duplicate_packets") == 1 and c.get("data_bytes_placed") == 164,
           "9.7.5.1.2 duplicate WRITE: not placed again (164 bytes placed, 1 duplicate)", [json.dumps(c)])

    # ---- 9.7.5.1.2 / 9.4.3: a duplicate READ is executed again: the same
    # responses (PSNs of the original, FIRST/MIDDLE/LAST, AETH on FIRST and
    # LAST only) with the memory's bytes.
    e = 0x2000
    rlen = 2 * MTU + 88
    want = bytes(region_byte(1024 + i) for i in range(rlen))
    timed = [(10 * us, frame(READ_REQUEST, e, reth=(va + 1024, rkey, rlen), ackreq=1)),
             (50 * us, frame(READ_REQUEST, e, reth=(va + 1024, rkey, rlen), ackreq=1))]
    ans, lines = r.run("dup-read", timed, ["--expect-psn", e])
    one = [{"opcode": READ_FIRST, "psn": e, "syndrome": ACK_NO_CREDIT, "msn": 1, "data": want[:MTU]},
           {"opcode": READ_MIDDLE, "psn": e + 1, "syndrome": None, "msn": None, "data": want[MTU:2 * MTU]},
           {"opcode": READ_LAST, "psn": e + 2, "syndrome": ACK_NO_CREDIT, "msn": 1, "data": want[2 * MTU:]}]
    check_answers(tap, "9.7.5.1.2 duplicate READ re-executed: FIRST/MIDDLE/LAST at PSNs 0x2000..0x2002 "
                  "twice, same bytes, MSN 1", ans, one + one)
    tap.ok(counters(lines).get("duplicate_reads_reexecuted") == 1,
           "9.7.5.1.2 duplicate READ: counted as re-executed", [json.dumps(counters(lines))])

    # ---- 9.7.5.2.1: PSN sequence error: one NAK (code 0) per error, PSN =
    # the expected PSN, MSN = messages completed; the packets after the gap
    # are dropped silently until the expected PSN comes.
    e = 0x3000
    w = lambda psn, n, ar=0: frame(WRITE_ONLY, psn, bytes([n]) * 32, reth=(va + 32 * n, rkey, 32), ackreq=ar)
    timed = [(10 * us, w(e, 0)), (11 * us, w(e + 2, 2)), (12 * us, w(e + 3, 3)), (13 * us, w(e + 4, 4, 1)),
             # the requester goes back to e + 1
             (40 * us, w(e + 1, 1)), (41 * us, w(e + 2, 2)), (42 * us, w(e + 3, 3)), (43 * us, w(e + 4, 4, 1)),
             # a second sequence error: a second NAK, at e + 5, MSN 5
             (60 * us, w(e + 7, 7)), (61 * us, w(e + 8, 8, 1))]
    ans, lines = r.run("psn-seq", timed, ["--expect-psn", e])
    check_answers(tap, "9.7.5.2.1 PSN sequence error: one NAK per error (PSN = expected, MSN = completed, "
                  "code 0), recovery ACKed", ans, [nak(e + 1, 1, 0), ack(e + 4, 5), nak(e + 5, 5, 0)])
    tap.ok([a["t"] for a in ans] == [11 * us, 43 * us, 60 * us],
           "9.7.5.2.1 PSN sequence error: NAK sent at the first packet past the gap, and the ACK it covers "
           "is not sent later", [[a["t"] for a in ans]])

    # ---- 9.7.5.2.8: RNR NAK: a SEND with no receive posted; the timer
    # field (table 45) encodes the responder's minimum RNR delay (20 us:
    # code 2, 0.02 ms); PSN = the SEND's PSN, MSN unchanged; later packets
    # of the round are dropped silently. After a receive is posted the
    # resent SEND is placed and ACKed.
    e = 0x4000
    timed = [(10 * us, frame(SEND_ONLY, e, b"s" * 40, ackreq=1)),
             (11 * us, frame(SEND_ONLY, e + 1, b"t" * 40, ackreq=1)),
             (100 * us, frame(SEND_ONLY, e, b"s" * 40, ackreq=1)),
             (101 * us, frame(SEND_ONLY, e + 1, b"t" * 40, ackreq=1))]
    ans, lines = r.run("rnr", timed, ["--expect-psn", e, "--receive-at", 50 * us, "--receive-at", 50 * us])
    check_answers(tap, "9.7.5.2.8 RNR NAK: syndrome 0x22 (timer 2 = 0.02 ms), PSN of the SEND, MSN 0; one per "
                  "round; resent SENDs ACKed", ans,
                  [{"opcode": ACKNOWLEDGE, "psn": e, "syndrome": RNR | 2, "msn": 0, "aeth_opcode": 1,
                    "aeth_timer": 2}, ack(e, 1), ack(e + 1, 2)])
    comp = completions(lines)
    tap.ok([(x["completion"], x["status"], x["byte_len"]) for x in comp] == [(1, "success", 40), (2, "success", 40)],
           "9.7.5.2.8 RNR: the resent SENDs land in the receives posted later", [json.dumps(comp)])

    # ---- 9.7.4.1.? (opcode sequence, C9-28..): MIDDLE or LAST without a
    # FIRST, a FIRST inside a message, a SEND packet inside a WRITE: NAK
    # invalid request (code 1) at the errant packet's PSN; the QP goes to
    # the error state and answers nothing more.
    e = 0x5000
    cases = [
        ("MIDDLE without FIRST", [frame(WRITE_MIDDLE, e, b"m" * MTU)], e, 0),
        ("LAST without FIRST", [frame(SEND_LAST, e, b"l" * 12)], e, 0),
        ("FIRST inside a message", [frame(WRITE_FIRST, e, b"f" * MTU, reth=(va, rkey, 2 * MTU)),
                                    frame(WRITE_FIRST, e + 1, b"g" * MTU, reth=(va, rkey, 2 * MTU))], e + 1, 0),
        ("SEND MIDDLE inside a WRITE", [frame(WRITE_FIRST, e, b"f" * MTU, reth=(va, rkey, 3 * MTU)),
                                        frame(SEND_MIDDLE, e + 1, b"g" * MTU)], e + 1, 0),
        ("ONLY inside a message", [frame(SEND_FIRST, e, b"f" * MTU),
                                   frame(WRITE_ONLY, e + 1, b"o" * 8, reth=(va, rkey, 8))], e + 1, 0),
    ]
    for i, (what, frames, psn, msn) in enumerate(cases):
        timed = [(10 * us + j * us, f) for j, f in enumerate(frames)]
        timed.append((50 * us, frame(WRITE_ONLY, psn + 1, b"x" * 8, reth=(va, rkey, 8), ackreq=1)))
        ans, lines = r.run("opseq-%d" % i, timed, ["--expect-psn", e, "--receives", 2])
        check_answers(tap, "9.7.4 opcode sequence: %s -> one NAK invalid request (0x61) at PSN 0x%x, "
                      "then nothing" % (what, psn), ans, [nak(psn, msn, 1)])
        tap.ok(summary(lines).get("state") == "ERROR" and counters(lines).get("inconsistent_message") == 1,
               "9.7.4 opcode sequence: %s -> QP in error, counted" % what, [json.dumps(lines[-2:])])

    # ---- 9.7.5.1.1 coalesced ACKs: the responder may ACK several requests
    # with one ACK, whose PSN is the latest and MSN the count of messages
    # completed; here every 4 packets (--ack-every 4) or 20 us after the
    # first unacknowledged one (--ack-delay), and at once on AckReq.
    e = 0x6000
    timed = [(10 * us + j * 100, w(e + j, j)) for j in range(6)]
    # a 3-packet WRITE and a WRITE ONLY with AckReq: one ACK covers both
    data = bytes(region_byte(i) for i in range(2 * MTU + 4))
    timed += [(100 * us, frame(WRITE_FIRST, e + 6, data[:MTU], reth=(va + 8192, rkey, len(data)))),
              (100 * us + 100, frame(WRITE_MIDDLE, e + 7, data[MTU:2 * MTU])),
              (100 * us + 200, frame(WRITE_LAST, e + 8, data[2 * MTU:])),
              (100 * us + 300, w(e + 9, 9, 1))]
    ans, lines = r.run("coalesce", timed, ["--expect-psn", e, "--ack-every", 4, "--ack-delay", 20 * us])
    check_answers(tap, "9.7.5.1.1 coalesced ACKs: ACK at PSN +3 (MSN 4) after 4 packets, +5 (MSN 6) at the "
                  "delay, +9 (MSN 8) on AckReq", ans, [ack(e + 3, 4), ack(e + 5, 6), ack(e + 9, 8)])
    times = [a["t"] for a in ans]
    # The delayed ACK fires within the timing wheel's granularity at 20 us
    # (512 ns) and the driver's 1 us steps.
    tap.ok(len(times) == 3 and times[0] == 10 * us + 300 and
           30 * us + 400 <= times[1] <= 30 * us + 400 + 1512 and times[2] == 100 * us + 300,
           "9.7.5.1.1 coalesced ACKs: sent at the 4th packet, 20 us after the 5th, at the AckReq", [times])

    # ---- 9.7.6.1.? requester: implicit ACK (C9-...): a READ response
    # acknowledges every request before the READ. We post WRITE (PSN 0x200)
    # then READ (0x201); the peer answers only the READ: both complete, in
    # order, and nothing is resent.
    p0 = OUR_FIRST_PSN
    rd = bytes(range(100))
    timed = [(10 * us, frame(READ_ONLY, p0 + 1, rd, aeth=(ACK_NO_CREDIT, 2)))]
    ans, lines = r.run("implicit-ack", timed, ["--post", "write:100", "--post", "read:100",
                                               "--until", 5_000 * us])
    check_answers(tap, "9.7.6 requester: our WRITE ONLY 0x200 and READ request 0x201, nothing resent after a "
                  "READ response implicitly ACKs the WRITE", ans,
                  [{"opcode": WRITE_ONLY, "psn": p0, "syndrome": None,
                    "data": bytes(requester_byte(i) for i in range(100))},
                   {"opcode": READ_REQUEST, "psn": p0 + 1, "syndrome": None}])
    comp = completions(lines)
    tap.ok([(x["completion"], x["status"], x["kind"]) for x in comp] == [(1001, "success", 1), (1002, "success", 4)],
           "9.7.6 requester: implicit ACK completes the WRITE, then the READ", [json.dumps(comp)])

    # ---- 9.7.5.2.1 requester side: a PSN sequence NAK at PSN n acks n - 1
    # and the requester resends from n (go-back-N).
    timed = [(10 * us, frame(ACKNOWLEDGE, p0 + 1, aeth=(NAK_PSN_SEQ, 1)))]
    ans, lines = r.run("go-back", timed, ["--post", "write:100", "--post", "write:100", "--post", "write:100",
                                          "--until", 30 * us])
    src = lambda off: bytes(requester_byte(off + i) for i in range(100))
    check_answers(tap, "9.7.5.2.1 requester: after NAK(PSN seq) at 0x201 it resends 0x201 and 0x202, not 0x200",
                  ans, [{"opcode": WRITE_ONLY, "psn": p0, "data": src(0)},
                        {"opcode": WRITE_ONLY, "psn": p0 + 1, "data": src(256)},
                        {"opcode": WRITE_ONLY, "psn": p0 + 2, "data": src(512)},
                        {"opcode": WRITE_ONLY, "psn": p0 + 1, "data": src(256)},
                        {"opcode": WRITE_ONLY, "psn": p0 + 2, "data": src(512)}])
    comp = completions(lines)
    tap.ok([(x["completion"], x["status"]) for x in comp] == [(1001, "success")],
           "9.7.5.2.1 requester: the NAK completes the WRITE before it", [json.dumps(comp)])
    return tap.finish()


if __name__ == "__main__":
    oracle_lib.run_main(main)
