#!/usr/bin/python3
"""Build golden RoCEv2 RC frames with scapy, plus the decoder output they imply.

usage: make_golden.py OUTDIR

Writes
  OUTDIR/golden.pcap            classic pcap, linktype Ethernet
  OUTDIR/golden-expected.jsonl  per frame, the fields metaroce-decode must print
  OUTDIR/golden-layout.jsonl    per frame, byte ranges of each header (used by
                                check_decode.py to aim its bit flips)

The expectations are derived from the parameters handed to scapy, never from
a decoder, so the file is an oracle independent of the C++ code. IPv4 ICRCs
are computed by scapy's contrib.roce and cross-checked against our own
implementation (oracle_lib.icrc_of_frame); scapy has no IPv6 ICRC, so there
ours is the only one (and check_tshark.py's tshark run looks at the same
frames).
"""

import ipaddress
import json
import os
import random
import struct
import sys

sys.dont_write_bytecode = True   # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_lib  # noqa: E402

oracle_lib.require_scapy()

import logging  # noqa: E402
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)

from scapy.all import Ether, Dot1Q, IP, IPv6, UDP, Raw, Packet, raw  # noqa: E402
from scapy.fields import XLongField, XIntField, IntField  # noqa: E402
from scapy.contrib.roce import BTH, AETH, CNPPadding, _bth_opcodes  # noqa: E402


# Extension headers scapy lacks, laid out from the IBTA spec (big-endian).
class RETH(Packet):
    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dma_len", 0)]


class ImmDt(Packet):
    name = "ImmDt"
    fields_desc = [XIntField("imm", 0)]


class AtomicETH(Packet):
    name = "AtomicETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), XLongField("swap_add", 0),
                   XLongField("compare", 0)]


class AtomicAckETH(Packet):
    name = "AtomicAckETH"
    fields_desc = [XLongField("orig", 0)]


# Atomics: (opcode, has AtomicETH, has AETH + AtomicAckETH)
ATOMIC_OPCODES = [
    (0x13, True, False),   # COMPARE SWAP
    (0x14, True, False),   # FETCH ADD
    (0x12, False, True),   # ATOMIC ACKNOWLEDGE
]


# (opcode, has RETH, has AETH, has ImmDt, payload kind)
#   "mtu": FIRST/MIDDLE packets carry a full PMTU (multiple of 4, pad 0)
#   "odd": LAST/ONLY packets carry 1..PMTU bytes, any pad
#   "none": header-only packets
OPCODES = [
    (0x06, True, False, False, "mtu"),   # RDMA WRITE FIRST
    (0x07, False, False, False, "mtu"),  # RDMA WRITE MIDDLE
    (0x08, False, False, False, "odd"),  # RDMA WRITE LAST
    (0x09, False, False, True, "odd"),   # RDMA WRITE LAST with immediate
    (0x0A, True, False, False, "odd"),   # RDMA WRITE ONLY
    (0x0B, True, False, True, "odd"),    # RDMA WRITE ONLY with immediate
    (0x00, False, False, False, "mtu"),  # SEND FIRST
    (0x01, False, False, False, "mtu"),  # SEND MIDDLE
    (0x02, False, False, False, "odd"),  # SEND LAST
    (0x03, False, False, True, "odd"),   # SEND LAST with immediate
    (0x04, False, False, False, "odd"),  # SEND ONLY
    (0x05, False, False, True, "odd"),   # SEND ONLY with immediate
    (0x0C, True, False, False, "none"),  # RDMA READ request
    (0x0D, False, True, False, "mtu"),   # RDMA READ response FIRST
    (0x0E, False, False, False, "mtu"),  # RDMA READ response MIDDLE
    (0x0F, False, True, False, "odd"),   # RDMA READ response LAST
    (0x10, False, True, False, "odd"),   # RDMA READ response ONLY
]
# ACKNOWLEDGE syndromes: ACK with credit counts (0x1f = "no credit info"),
# RNR NAKs with timer values, and every defined NAK code.
ACK_SYNDROMES = [0x00, 0x05, 0x1F, 0x2E, 0x21, 0x60, 0x61, 0x62, 0x63, 0x64]

PMTU = 256                     # smallest IB MTU; enough to exercise lengths
ODD_LENGTHS = [13, 6, 255, 1, 2, 3, 7, 4, 250, 17]   # pad 3,2,1,3,2,1,1,0,2,3

# Encapsulations: each packet type is emitted in all four.
ENCAPS = [("v4", None), ("v4", (100, 3)), ("v6", None), ("v6", (4094, 7))]

V4_ADDRS = [("10.0.0.1", "10.0.0.2"), ("192.168.1.200", "172.16.255.254"),
            ("1.2.3.4", "255.255.255.254")]
V6_ADDRS = [("fd00::1", "fd00::2"),
            ("2001:db8:0:0:1:0:0:1", "fe80::a:b:c:d"),
            ("2001:db8:85a3:8d3:1319:8a2e:370:7348", "fd12:3456:789a:1::ffff")]
MACS = [("02:00:00:00:00:01", "02:00:00:00:00:02"),
        ("a4:bf:01:2c:3d:4e", "b8:ce:f6:aa:bb:cc"),
        ("0c:42:a1:ff:ee:dd", "ff:ff:ff:ff:ff:fe")]


def bswap32(v):
    return struct.unpack("<I", struct.pack(">I", v))[0]


def aeth_expectation(syn, msn):
    """AETH-derived keys: the syndrome's top 3 bits say what it is.

    The decoder prints aeth_kind and credit / rnr_timer / nak_code inside
    the "aeth" object (the contract's "aeth {syndrome, msn} plus ..."), so
    that is where they are expected.
    """
    a = {"syndrome": syn, "msn": msn}
    kind = syn >> 5
    if kind == 0b000:
        a.update(aeth_kind="ack", credit=syn & 0x1F)
    elif kind == 0b001:
        a.update(aeth_kind="rnr_nak", rnr_timer=syn & 0x1F)
    elif kind == 0b011:
        a.update(aeth_kind="nak", nak_code=syn & 0x1F)
    return {"aeth": a}


def build_frame(idx, rng, encap, opcode, has_reth, has_aeth, has_imm, kind,
                syndrome=None, payload_len=None, overrides=None, atomic_eth=False,
                atomic_ack=False):
    """Build one frame; return (bytes, expectation dict, layout dict)."""
    ipver, vlan = encap
    ov = overrides or {}
    mac_src, mac_dst = MACS[idx % len(MACS)]
    ecn = ov.get("ecn", idx % 4)
    dscp = ov.get("dscp", [26, 0, 46, 63, 24][idx % 5])
    ttl = ov.get("ttl", [64, 1, 255, 128][idx % 4])
    sport = ov.get("sport", rng.choice([0xC000, 0xFFFF, rng.randrange(0xC000, 0x10000)]))
    psn = ov.get("psn", [0, 0xFFFFFF, 1, rng.randrange(1 << 24)][idx % 4])
    dqpn = ov.get("dqpn", [0xFFFFFF, 0x000011, rng.randrange(1 << 24)][idx % 3])
    pkey = ov.get("pkey", [0xFFFF, 0x8001, 0x7FFF, 0x1234, 0xFFFF][idx % 5])
    is_data = kind != "none" or opcode in (0x0C, 0x13, 0x14)
    ackreq = ov.get("ackreq", int(is_data and idx % 2 == 0))
    fecn = ov.get("fecn", int(idx % 3 == 0))
    becn = ov.get("becn", int(idx % 5 == 1))
    # Solicited event only makes sense on the last packet of a SEND.
    solicited = ov.get("solicited", int(opcode in (0x02, 0x03, 0x04, 0x05) and idx % 2 == 1))
    migreq = ov.get("migreq", int(idx % 7 == 3))

    if payload_len is None:
        if kind == "mtu":
            payload_len = PMTU
        elif kind == "odd":
            payload_len = ODD_LENGTHS[idx % len(ODD_LENGTHS)]
        else:
            payload_len = 0
    pad = (4 - payload_len % 4) % 4
    payload = rng.randbytes(payload_len)

    bth = BTH(opcode=opcode, solicited=solicited, migreq=migreq, padcount=pad,
              version=0, pkey=pkey, fecn=fecn, becn=becn, dqpn=dqpn,
              ackreq=ackreq, psn=psn, icrc=None if ipver == "v4" else 0)
    exp = {}
    ext = []  # (name, packet) in wire order: RETH, AtomicETH, AETH, AtomicAckETH, ImmDt
    if has_reth:
        va = rng.choice([0xFFFFFFFFFFFFFFFF, 0x00007F0012345000, rng.randrange(1 << 64)])
        rkey = rng.randrange(1 << 32)
        if opcode == 0x0A or opcode == 0x0B:
            dma_len = payload_len               # ONLY: whole message here
        elif opcode == 0x06:
            dma_len = 3 * PMTU + 13             # FIRST: whole message length
        else:
            dma_len = rng.choice([4096, 0x7FFFFFFF, 1 << 20])
        ext.append(("reth", RETH(va=va, rkey=rkey, dma_len=dma_len)))
        exp["reth"] = {"va": va, "rkey": rkey, "dma_len": dma_len}
    if atomic_eth:
        va = rng.choice([0xFFFFFFFFFFFFFFF8, 0x00007F0012345008, rng.randrange(1 << 61) * 8])
        rkey = rng.randrange(1 << 32)
        swap_add = rng.choice([1, 0xFFFFFFFFFFFFFFFF, rng.randrange(1 << 64)])
        compare = rng.choice([0, rng.randrange(1 << 64)])
        ext.append(("atomic_eth", AtomicETH(va=va, rkey=rkey, swap_add=swap_add, compare=compare)))
        exp["atomic_eth"] = {"va": va, "rkey": rkey, "swap_add": swap_add, "compare": compare}
    if has_aeth:
        syn = syndrome if syndrome is not None else rng.choice([0x00, 0x1F, 0x0A])
        msn = rng.choice([0xFFFFFF, 0, rng.randrange(1 << 24)])
        ext.append(("aeth", AETH(syndrome=syn, msn=msn)))
        exp.update(aeth_expectation(syn, msn))
    if atomic_ack:
        orig = rng.choice([0, 0xFFFFFFFFFFFFFFFF, rng.randrange(1 << 64)])
        ext.append(("atomic_ack", AtomicAckETH(orig=orig)))
        exp["atomic_ack"] = {"orig": orig}
    if has_imm:
        imm = rng.choice([0xDEADBEEF, 0, 0xFFFFFFFF, rng.randrange(1 << 32)])
        ext.append(("imm", ImmDt(imm=imm)))
        exp["imm"] = imm

    l2 = Ether(src=mac_src, dst=mac_dst)
    if vlan:
        l2 = l2 / Dot1Q(vlan=vlan[0], prio=vlan[1])
    if ipver == "v4":
        src, dst = V4_ADDRS[idx % len(V4_ADDRS)]
        l3 = IP(src=src, dst=dst, tos=(dscp << 2) | ecn, ttl=ttl, flags="DF",
                id=rng.randrange(1 << 16))
        udp = UDP(sport=sport, dport=oracle_lib.ROCE_PORT, chksum=0)  # RoCEv2 practice
        ip_hlen = 20
    else:
        src, dst = V6_ADDRS[idx % len(V6_ADDRS)]
        l3 = IPv6(src=src, dst=dst, tc=(dscp << 2) | ecn, fl=rng.randrange(1 << 20), hlim=ttl)
        udp = UDP(sport=sport, dport=oracle_lib.ROCE_PORT)  # scapy fills the checksum
        ip_hlen = 40
    pkt = l2 / l3 / udp / bth
    for _, h in ext:
        pkt = pkt / h
    pkt = pkt / Raw(payload + b"\0" * pad)

    frame = raw(pkt)
    if ipver == "v6":
        # scapy cannot do the IPv6 ICRC: compute it ourselves. The UDP
        # checksum is masked out of the ICRC, but the ICRC is inside the UDP
        # checksum, so set the ICRC first and let scapy recompute the checksum.
        crc, _ = oracle_lib.icrc_of_frame(frame)
        pkt[BTH].icrc = bswap32(crc)   # scapy's field is big-endian; wire is LSB first
        frame = raw(pkt)
    crc, stored = oracle_lib.icrc_of_frame(frame)
    if crc != stored:
        sys.exit("make_golden: scapy's ICRC 0x%08x != ours 0x%08x on frame %d: "
                 "one of the two ICRC implementations is wrong" % (stored, crc, idx + 1))

    eth_len = 14 + (4 if vlan else 0)
    ext_len = sum(len(raw(h)) for _, h in ext)
    layout = {
        "ip": [eth_len, eth_len + ip_hlen],
        "udp": [eth_len + ip_hlen, eth_len + ip_hlen + 8],
        "bth": [eth_len + ip_hlen + 8, eth_len + ip_hlen + 20],
    }
    o = layout["bth"][1]
    for name, h in ext:
        n = len(raw(h))
        layout[name] = [o, o + n]
        o += n
    layout["payload"] = [o, o + payload_len]
    layout["pad"] = [o + payload_len, o + payload_len + pad]
    layout["icrc"] = [len(frame) - 4, len(frame)]
    layout["ipver"] = 4 if ipver == "v4" else 6
    assert layout["pad"][1] == len(frame) - 4 and o == eth_len + ip_hlen + 20 + ext_len

    expect = {
        "frame": idx + 1,
        "frame_len": len(frame),
        "eth_src": mac_src,
        "eth_dst": mac_dst,
    }
    if vlan:
        expect.update(vlan=vlan[0], pcp=vlan[1])
    expect.update({
        "ip_version": layout["ipver"],
        "src": str(ipaddress.ip_address(src)),
        "dst": str(ipaddress.ip_address(dst)),
        "dscp": dscp,
        "ecn": ecn,
        "ttl": ttl,
        "sport": sport,
        "dport": oracle_lib.ROCE_PORT,
        "opcode": opcode,
        "opcode_name": _bth_opcodes[opcode],
        "solicited": bool(solicited),
        "mig_req": bool(migreq),
        "pad": pad,
        "tver": 0,
        "pkey": pkey,
        "fecn": bool(fecn),
        "becn": bool(becn),
        "dest_qp": dqpn,
        "ack_req": bool(ackreq),
        "psn": psn,
        "payload_len": payload_len,
        "icrc": stored,
        "icrc_ok": True,
    })
    expect.update(exp)
    return frame, expect, layout


def golden_frames():
    rng = random.Random(0x4D52)      # fixed seed: golden files are reproducible
    out = []

    def add(builder):
        out.append(builder(len(out)))

    for encap in ENCAPS:
        for (op, reth, aeth, imm, kind) in OPCODES:
            add(lambda i: build_frame(i, rng, encap, op, reth, aeth, imm, kind))
        for (op, eth, ack) in ATOMIC_OPCODES:
            add(lambda i: build_frame(i, rng, encap, op, False, ack, False, "none",
                                      atomic_eth=eth, atomic_ack=ack,
                                      overrides=None if eth else {"ackreq": 0, "solicited": 0}))
        for syn in ACK_SYNDROMES:
            add(lambda i: build_frame(i, rng, encap, 0x11, False, True, False, "none",
                                      syndrome=syn, overrides={"ackreq": 0, "solicited": 0}))
        add(lambda i: build_cnp_frame(i, rng, encap))
    # A few corner cases, once each.
    add(lambda i: build_frame(i, rng, ENCAPS[0], 0x04, False, False, False, "odd",
                              payload_len=0))                       # zero-length SEND ONLY
    add(lambda i: build_frame(i, rng, ENCAPS[2], 0x0A, True, False, False, "odd",
                              payload_len=0))                       # zero-length WRITE ONLY
    add(lambda i: build_frame(i, rng, ("v4", (0, 3)), 0x0A, True, False, False, "odd",
                              overrides={"ecn": 3, "dscp": 26}))    # priority tag, CE
    add(lambda i: build_frame(i, rng, ("v6", (1, 0)), 0x03, False, False, True, "odd",
                              payload_len=1021,
                              overrides={"psn": 0xFFFFFF, "dqpn": 0xFFFFFF, "fecn": 1,
                                         "becn": 1, "ackreq": 1, "solicited": 1,
                                         "migreq": 1, "pkey": 0x8000}))
    add(lambda i: build_frame(i, rng, ENCAPS[1], 0x0C, True, False, False, "none",
                              overrides={"psn": 0xFFFFFF, "dqpn": 0xFFFFFF, "ackreq": 1}))
    return out


def build_cnp_frame(idx, rng, encap):
    """CNP: BTH opcode 0x81 with BECN set, then 16 reserved (zero) bytes.

    Built through scapy's own cnp layout (BTH / CNPPadding). The decoder's
    payload_len for a CNP is not pinned by the contract, so it is not
    expected; everything else is.
    """
    ipver, vlan = encap
    mac_src, mac_dst = MACS[idx % len(MACS)]
    src, dst = (V4_ADDRS if ipver == "v4" else V6_ADDRS)[idx % 3]
    dqpn = [0xFFFFFF, 0x000011, 0xABCDEF][idx % 3]
    dscp, ecn, ttl = 48, 1, 64
    sport = 0xC000 | (idx & 0x3FFF)
    l2 = Ether(src=mac_src, dst=mac_dst)
    if vlan:
        l2 = l2 / Dot1Q(vlan=vlan[0], prio=vlan[1])
    if ipver == "v4":
        l3 = IP(src=src, dst=dst, tos=(dscp << 2) | ecn, ttl=ttl, flags="DF", id=idx)
        udp = UDP(sport=sport, dport=oracle_lib.ROCE_PORT, chksum=0)
    else:
        l3 = IPv6(src=src, dst=dst, tc=(dscp << 2) | ecn, fl=idx, hlim=ttl)
        udp = UDP(sport=sport, dport=oracle_lib.ROCE_PORT)
    bth = BTH(opcode=0x81, becn=1, dqpn=dqpn, psn=0, icrc=None if ipver == "v4" else 0)
    pkt = l2 / l3 / udp / bth / CNPPadding()
    frame = raw(pkt)
    if ipver == "v6":
        crc, _ = oracle_lib.icrc_of_frame(frame)
        pkt[BTH].icrc = bswap32(crc)
        frame = raw(pkt)
    crc, stored = oracle_lib.icrc_of_frame(frame)
    if crc != stored:
        sys.exit("make_golden: CNP ICRC mismatch on frame %d" % (idx + 1))
    eth_len = 14 + (4 if vlan else 0)
    ip_hlen = 20 if ipver == "v4" else 40
    b = eth_len + ip_hlen + 8
    layout = {"ip": [eth_len, eth_len + ip_hlen], "udp": [eth_len + ip_hlen, b],
              "bth": [b, b + 12], "cnp_reserved": [b + 12, b + 28],
              "payload": [b + 28, b + 28], "pad": [b + 28, b + 28],
              "icrc": [len(frame) - 4, len(frame)], "ipver": 4 if ipver == "v4" else 6}
    assert b + 32 == len(frame)
    expect = {"frame": idx + 1, "frame_len": len(frame), "eth_src": mac_src, "eth_dst": mac_dst}
    if vlan:
        expect.update(vlan=vlan[0], pcp=vlan[1])
    expect.update({
        "ip_version": layout["ipver"], "src": str(ipaddress.ip_address(src)),
        "dst": str(ipaddress.ip_address(dst)), "dscp": dscp, "ecn": ecn, "ttl": ttl,
        "sport": sport, "dport": oracle_lib.ROCE_PORT, "opcode": 0x81, "opcode_name": "CNP",
        "solicited": False, "mig_req": False, "pad": 0, "tver": 0, "pkey": 0xFFFF,
        "fecn": False, "becn": True, "dest_qp": dqpn, "ack_req": False, "psn": 0,
        "icrc": stored, "icrc_ok": True,
    })
    return frame, expect, layout


def main(argv):
    if len(argv) != 2:
        print("usage: make_golden.py OUTDIR", file=sys.stderr)
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    frames = golden_frames()
    oracle_lib.write_pcap(os.path.join(outdir, "golden.pcap"), [f for f, _, _ in frames])
    with open(os.path.join(outdir, "golden-expected.jsonl"), "w") as f:
        for _, e, _ in frames:
            f.write(json.dumps(e) + "\n")
    with open(os.path.join(outdir, "golden-layout.jsonl"), "w") as f:
        for _, _, lay in frames:
            f.write(json.dumps(lay) + "\n")
    print("make_golden: %d frames in %s" % (len(frames), outdir), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
