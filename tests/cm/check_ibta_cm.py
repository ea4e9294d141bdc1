#!/usr/bin/python3
"""IBTA CM messages (class 0x07) against two independent views.

usage: check_ibta_cm.py TOOL OUTDIR

1. REQ, REP, RTU, REJ, DREQ and DREP are built here byte by byte from the
   InfiniBand Architecture Specification Vol. 1, 12.6 (and rdma_cm's
   private data header for the REQ), carried in RoCEv2 UD SEND ONLY
   frames to QP 1 built with scapy; `TOOL decode` must read back every
   field.
2. `TOOL write` emits one frame of each attribute and prints what it put
   in them; tshark's InfiniBand CM dissector (infiniband.cm.*) must read
   the same values.

Prints TAP.
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
from scapy.all import Ether, IP, UDP, Raw, raw  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

GSI_QKEY = 0x80010000
ATTR = {"REQ": 0x10, "REJ": 0x12, "REP": 0x13, "RTU": 0x14, "DREQ": 0x15, "DREP": 0x16}


def mad_header(attr, tid):
    # IBTA 13.4.2: BaseVersion 1, MgmtClass 0x07 (CM), ClassVersion 2,
    # Method 0x03 (Send), Status, ClassSpecific, TransactionID,
    # AttributeID, Reserved, AttributeModifier.
    return struct.pack(">BBBBHHQHHI", 1, 0x07, 2, 0x03, 0, 0, tid, ATTR[attr], 0, 0)


def be24(v):
    return struct.pack(">I", v)[1:]


def ipv4_gid(a):
    return b"\0" * 10 + b"\xff\xff" + bytes(int(x) for x in a.split("."))


def ip_int(a):
    return struct.unpack(">I", bytes(int(x) for x in a.split(".")))[0]


def build_req(f):
    """IBTA 12.6.5 REQ, 232 bytes."""
    d = struct.pack(">I", f["local_comm_id"]) + b"\0" + be24(f["vendor_id"])
    d += struct.pack(">QQ", f["service_id"], f["local_ca_guid"]) + b"\0" * 4
    d += struct.pack(">I", f["local_qkey"])
    d += be24(f["local_qpn"]) + bytes([f["responder_resources"]])
    d += be24(0) + bytes([f["initiator_depth"]])        # local EECN, initiator depth
    d += be24(0) + bytes([(f["remote_cm_timeout"] << 3) | (f["transport"] << 1) | int(f["flow_control"])])
    d += be24(f["starting_psn"]) + bytes([(f["local_cm_timeout"] << 3) | f["retry_count"]])
    d += struct.pack(">H", f["pkey"])
    d += bytes([(f["path_mtu"] << 4) | f["rnr_retry_count"], (f["max_cm_retries"] << 4) | (int(f["srq"]) << 3)])
    # primary path, 44 bytes (12.6.5: LIDs, GIDs, flow label/rate, TC, hop
    # limit, SL/subnet local, local ACK timeout)
    d += struct.pack(">HH", f["local_lid"], f["remote_lid"])
    d += bytes.fromhex(f["local_gid"]) + bytes.fromhex(f["remote_gid"])
    d += struct.pack(">I", (f["flow_label"] << 12) | f["packet_rate"])
    d += bytes([f["traffic_class"], f["hop_limit"], (f["sl"] << 4) | (int(f["subnet_local"]) << 3),
                f["local_ack_timeout"] << 3])
    d += b"\0" * 44                                        # alternate path
    assert len(d) == 140, len(d)
    d += bytes.fromhex(f["private_data"]).ljust(92, b"\0")
    return d


def build_rep(f):
    """IBTA 12.6.8 REP."""
    d = struct.pack(">III", f["local_comm_id"], f["remote_comm_id"], f["local_qkey"])
    d += be24(f["local_qpn"]) + b"\0" + be24(0) + b"\0" + be24(f["starting_psn"]) + b"\0"
    d += bytes([f["responder_resources"], f["initiator_depth"],
                (f["target_ack_delay"] << 3) | (f["failover_accepted"] << 1) | int(f["flow_control"]),
                (f["rnr_retry_count"] << 5) | (int(f["srq"]) << 4)])
    d += struct.pack(">Q", f["local_ca_guid"])
    assert len(d) == 36
    return d + bytes.fromhex(f["private_data"]).ljust(196, b"\0")


def build_other(attr, f):
    d = struct.pack(">II", f["local_comm_id"], f["remote_comm_id"])
    if attr == "REJ":   # 12.6.7
        d += bytes([f["message_rejected"] << 6, 0]) + struct.pack(">H", f["reason"]) + b"\0" * 72
        return d + bytes.fromhex(f["private_data"]).ljust(148, b"\0")
    if attr == "DREQ":  # 12.6.10
        d += be24(f["remote_qpn"]) + b"\0"
        return d + bytes.fromhex(f["private_data"]).ljust(220, b"\0")
    return d + bytes.fromhex(f["private_data"]).ljust(224, b"\0")  # RTU 12.6.9, DREP 12.6.11


def ud_frame(mad):
    """RoCEv2 UD SEND ONLY (opcode 0x64) to QP 1 with a DETH (Q_Key, source
    QP 1); scapy computes the ICRC (its BTH knows UD), checked here."""
    deth = struct.pack(">I", GSI_QKEY) + b"\0" + be24(1)
    pkt = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") /
           IP(src="10.79.0.1", dst="10.79.0.2", flags="DF") /
           UDP(sport=49151, dport=4791, chksum=0) /
           BTH(opcode=0x64, pkey=0xFFFF, dqpn=1, psn=0, icrc=None) / Raw(deth + mad))
    b = raw(pkt)
    crc, stored = oracle_lib.icrc_of_frame(b)
    if crc != stored:
        oracle_lib.bail("scapy's ICRC 0x%08x differs from ours 0x%08x" % (stored, crc))
    return b


def spec_samples():
    user = b"rdma_cm private"
    rdma_cm = bytes([0x00, 0x40]) + struct.pack(">H", 40123) + b"\0" * 12 + bytes([10, 79, 0, 1]) + \
        b"\0" * 12 + bytes([10, 79, 0, 2]) + user
    req = {"attribute": "REQ", "tid": 0x0000000A00000001, "local_comm_id": 0x0badcafe, "remote_comm_id": 0,
           "vendor_id": 0x0002c9, "service_id": 0x0000000001060000 | 7471, "local_ca_guid": 0x0002c90300fedcba,
           "local_qkey": 0, "local_qpn": 0x00beef, "responder_resources": 4, "initiator_depth": 2,
           "remote_cm_timeout": 20, "transport": 0, "flow_control": True, "starting_psn": 0xabcdef,
           "local_cm_timeout": 18, "retry_count": 6, "pkey": 0xffff, "path_mtu": 3, "rnr_retry_count": 5,
           "max_cm_retries": 15, "srq": False, "local_lid": 0, "remote_lid": 0,
           "local_gid": ipv4_gid("10.79.0.1").hex(), "remote_gid": ipv4_gid("10.79.0.2").hex(),
           "flow_label": 0xabcde, "packet_rate": 2, "traffic_class": 0, "hop_limit": 64, "sl": 0,
           "subnet_local": False, "local_ack_timeout": 16,
           "private_data": rdma_cm.ljust(92, b"\0").hex(),
           "rdma_cm": {"src_port": 40123, "src_ipv4": ip_int("10.79.0.1"), "dst_ipv4": ip_int("10.79.0.2")}}
    rep = {"attribute": "REP", "tid": 0x0000000A00000001, "local_comm_id": 0x11223344,
           "remote_comm_id": 0x0badcafe, "local_qkey": 0, "local_qpn": 0x00f00d, "starting_psn": 0x000001,
           "responder_resources": 2, "initiator_depth": 4, "target_ack_delay": 15, "failover_accepted": 0,
           "flow_control": True, "rnr_retry_count": 7, "srq": False, "local_ca_guid": 0x0002c90300abcdef,
           "private_data": (b"rep!").ljust(196, b"\0").hex()}
    rtu = {"attribute": "RTU", "tid": 0x0000000A00000001, "local_comm_id": 0x0badcafe,
           "remote_comm_id": 0x11223344, "private_data": (b"\0" * 224).hex()}
    rej = {"attribute": "REJ", "tid": 0x0000000A00000002, "local_comm_id": 0x55, "remote_comm_id": 0x66,
           "message_rejected": 0, "reason": 28, "private_data": (b"no").ljust(148, b"\0").hex()}
    dreq = {"attribute": "DREQ", "tid": 0x0000000A00000003, "local_comm_id": 0x0badcafe,
            "remote_comm_id": 0x11223344, "remote_qpn": 0x00f00d, "private_data": (b"bye").ljust(220, b"\0").hex()}
    drep = {"attribute": "DREP", "tid": 0x0000000A00000003, "local_comm_id": 0x11223344,
            "remote_comm_id": 0x0badcafe, "private_data": (b"\0" * 224).hex()}
    out = []
    for f in (req, rep, rtu, rej, dreq, drep):
        a = f["attribute"]
        body = build_req(f) if a == "REQ" else build_rep(f) if a == "REP" else build_other(a, f)
        mad = mad_header(a, f["tid"]) + body
        assert len(mad) == 256, (a, len(mad))
        out.append((f, ud_frame(mad)))
    return out


# tshark field -> (attribute, our JSON key, how to read tshark's text)
def as_int(s):
    return int(s, 0)


def as_gid(s):
    # tshark prints a GID as an IPv6 address
    import ipaddress
    return ipaddress.IPv6Address(s).packed.hex()


def as_mapped(s):
    # an IPv4-mapped GID, which tshark prints as the IPv4 address
    return ipv4_gid(s).hex()


TSHARK = [
    ("infiniband.mad.mgmtclass", None, "mgmtclass", as_int),
    ("infiniband.mad.classversion", None, "classversion", as_int),
    ("infiniband.mad.method", None, "method", as_int),
    ("infiniband.mad.transactionid", None, "tid", as_int),
    ("infiniband.mad.attributeid", None, "attributeid", as_int),
    ("infiniband.cm.req.serviceid", "REQ", "service_id", as_int),
    ("infiniband.cm.req.localcaguid", "REQ", "local_ca_guid", as_int),
    ("infiniband.cm.req.localqkey", "REQ", "local_qkey", as_int),
    ("infiniband.cm.req.localqpn", "REQ", "local_qpn", as_int),
    ("infiniband.cm.req.responderres", "REQ", "responder_resources", as_int),
    ("infiniband.cm.req.initdepth", "REQ", "initiator_depth", as_int),
    ("infiniband.cm.req.remoteresptout", "REQ", "remote_cm_timeout", as_int),
    ("infiniband.cm.req.transpsvctype", "REQ", "transport", as_int),
    ("infiniband.cm.req.startpsn", "REQ", "starting_psn", as_int),
    ("infiniband.cm.req.localresptout", "REQ", "local_cm_timeout", as_int),
    ("infiniband.cm.req.retrcount", "REQ", "retry_count", as_int),
    ("infiniband.cm.req.pkey", "REQ", "pkey", as_int),
    ("infiniband.cm.req.pppmtu", "REQ", "path_mtu", as_int),
    ("infiniband.cm.req.rnrretrcount", "REQ", "rnr_retry_count", as_int),
    ("infiniband.cm.req.maxcmretr", "REQ", "max_cm_retries", as_int),
    ("infiniband.cm.req.prim_locallid", "REQ", "local_lid", as_int),
    ("infiniband.cm.req.prim_remotelid", "REQ", "remote_lid", as_int),
    ("infiniband.cm.req.prim_localgid", "REQ", "local_gid", as_gid),
    ("infiniband.cm.req.prim_remotegid", "REQ", "remote_gid", as_gid),
    ("infiniband.cm.req.prim_localgid_ipv4", "REQ", "local_gid", as_mapped),
    ("infiniband.cm.req.prim_remotegid_ipv4", "REQ", "remote_gid", as_mapped),
    # tshark 4.0 reads the flow label from the first 3 bytes of its 32-bit
    # word (mask 0xfffff000 on 24 bits) and the packet rate from its first
    # byte, not as 12.6.5 lays them out (20 bits, 6 reserved, 6 bits; the
    # spec-built frames above check our layout): what it prints is
    # compared with what that reading of our bytes gives.
    ("infiniband.cm.req.prim_flowlabel", "REQ", "tshark_flow_label", as_int),
    ("infiniband.cm.req.prim_pktrate", "REQ", "tshark_packet_rate", as_int),
    ("infiniband.cm.req.prim_tfcclass", "REQ", "traffic_class", as_int),
    ("infiniband.cm.req.prim_hoplim", "REQ", "hop_limit", as_int),
    ("infiniband.cm.req.prim_sl", "REQ", "sl", as_int),
    ("infiniband.cm.req.prim_localacktout", "REQ", "local_ack_timeout", as_int),
    ("infiniband.cm.req.ip_cm.sport", "REQ", "rdma_cm.src_port", as_int),
    ("infiniband.cm.rep.remotecommid", "REP", "remote_comm_id", as_int),
    ("infiniband.cm.rep.localqkey", "REP", "local_qkey", as_int),
    ("infiniband.cm.rep.localqpn", "REP", "local_qpn", as_int),
    ("infiniband.cm.rep.startpsn", "REP", "starting_psn", as_int),
    ("infiniband.cm.rep.respres", "REP", "responder_resources", as_int),
    ("infiniband.cm.rep.initdepth", "REP", "initiator_depth", as_int),
    ("infiniband.cm.rep.tgtackdelay", "REP", "target_ack_delay", as_int),
    ("infiniband.cm.rep.rnrretrcount", "REP", "rnr_retry_count", as_int),
    ("infiniband.cm.rep.localcaguid", "REP", "local_ca_guid", as_int),
    ("infiniband.cm.rtu.localcommid", "RTU", "local_comm_id", as_int),
    ("infiniband.cm.rtu.remotecommid", "RTU", "remote_comm_id", as_int),
    ("infiniband.cm.rej.localcommid", "REJ", "local_comm_id", as_int),
    ("infiniband.cm.rej.remotecommid", "REJ", "remote_comm_id", as_int),
    ("infiniband.cm.rej.reason", "REJ", "reason", as_int),
    ("infiniband.cm.dreq.localcommid", "DREQ", "local_comm_id", as_int),
    ("infiniband.cm.dreq.remotecommid", "DREQ", "remote_comm_id", as_int),
    ("infiniband.cm.req.remoteqpneecn", "DREQ", "remote_qpn", as_int),
    ("infiniband.cm.drsp.localcommid", "DREP", "local_comm_id", as_int),
    ("infiniband.cm.drsp.remotecommid", "DREP", "remote_comm_id", as_int),
]


def lookup(d, key):
    for k in key.split("."):
        d = d[k]
    return d


def main(argv):
    if len(argv) != 3:
        oracle_lib.bail("usage: check_ibta_cm.py TOOL OUTDIR")
    tool = oracle_lib.require_executable(argv[1], "ibta-cm-tool")
    outdir = argv[2]
    os.makedirs(outdir, exist_ok=True)
    tap = Tap()

    # 1. spec-built frames -> our decoder
    samples = spec_samples()
    spec_pcap = os.path.join(outdir, "spec-built.pcap")
    oracle_lib.write_pcap(spec_pcap, [fr for _, fr in samples])
    p = subprocess.run([tool, "decode", spec_pcap], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    got = [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]
    tap.ok(p.returncode == 0 and len(got) == len(samples), "decoder read %d spec-built frames" % len(samples),
           [p.stderr.decode()[:300], len(got)])
    for (want, _), g in zip(samples, got):
        bad = oracle_lib.diff_fields({k: v for k, v in want.items() if k != "vendor_id"}, g)
        tap.ok(not bad, "12.6 %s built from the spec: every field decoded" % want["attribute"], bad)

    # 2. our frames -> tshark
    ours_pcap = os.path.join(outdir, "ours.pcap")
    p = subprocess.run([tool, "write", ours_pcap], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    ours = [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]
    tap.ok(p.returncode == 0 and len(ours) == 6, "tool wrote 6 frames", [p.stderr.decode()[:300]])
    tshark = shutil.which("tshark")
    if not tshark:
        oracle_lib.bail("tshark not found in PATH (Debian: apt install tshark)")
    cmd = [tshark, "-n", "-r", ours_pcap, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f",
           "-e", "frame.protocols", "-e", "infiniband.invariant.crc"]
    for f, _, _, _ in TSHARK:
        cmd += ["-e", f]
    t = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if t.returncode != 0:
        oracle_lib.bail("tshark failed: %s" % t.stderr.decode()[:300])
    rows = t.stdout.decode().splitlines()
    tap.ok(len(rows) == len(ours), "tshark read %d frames" % len(ours), [len(rows)])
    for m, line in zip(ours, rows):
        vals = line.split("\t")
        vals += [""] * (len(TSHARK) + 2 - len(vals))
        reasons = []
        if "infiniband" not in vals[0]:
            reasons.append("not dissected as InfiniBand: %s" % vals[0])
        expect = dict(m)
        expect.update(mgmtclass=0x07, classversion=2, method=0x03, attributeid=ATTR[m["attribute"]])
        if m["attribute"] == "REQ":
            word = (m["flow_label"] << 12) | m["packet_rate"]
            expect.update(tshark_flow_label=word >> 20, tshark_packet_rate=(word >> 24) & 0x3F)
        for (field, attr, key, conv), v in zip(TSHARK, vals[2:]):
            if attr not in (None, m["attribute"]):
                continue
            try:
                want = lookup(expect, key)
            except KeyError:
                continue
            if v == "" and key.endswith("_gid"):
                continue  # printed in the _ipv4 field when the GID is IPv4-mapped
            if v == "":
                reasons.append("%s: tshark has no value (expected %r)" % (field, want))
                continue
            try:
                have = conv(v)
            except ValueError:
                reasons.append("%s: tshark printed %r" % (field, v))
                continue
            if isinstance(want, bool):
                want = int(want)
            if have != want:
                reasons.append("%s: tshark %r, ours %r" % (field, have, want))
        tap.ok(not reasons, "tshark decodes our %s: infiniband.cm.* fields agree" % m["attribute"], reasons)
    return tap.finish()


if __name__ == "__main__":
    oracle_lib.run_main(main)
