"""Helpers shared by the wire-format oracles (and only by them).

Everything here is deliberately written from the RoCEv2 / IBTA text and the
pcap file format, using the Python standard library only, so that it shares no
code (and ideally no misunderstanding) with the C++ wire layer it checks.
"""

import json
import os
import shutil
import struct
import subprocess
import sys

ROCE_PORT = 4791

# --------------------------------------------------------------------------
# CRC-32 (IEEE 802.3, reflected, poly 0xEDB88320, init/final xor 0xFFFFFFFF).
# Own table implementation instead of zlib.crc32 because scapy uses zlib: two
# implementations agreeing is a stronger statement than one used twice.


def _make_crc_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _make_crc_table()


def crc32(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# The standard check value; if this fails nothing below can be trusted.
assert crc32(b"123456789") == 0xCBF43926


# --------------------------------------------------------------------------
# Minimal frame parsing for the ICRC: just enough to find where the IP
# packet starts and ends. Returns None when the frame is not IP/UDP.


class FrameError(Exception):
    pass


def locate_ip(frame):
    """Return (ip_offset, ethertype) after skipping any 802.1Q/802.1ad tags."""
    if len(frame) < 14:
        raise FrameError("frame shorter than an Ethernet header")
    off = 12
    etype = struct.unpack_from("!H", frame, off)[0]
    while etype in (0x8100, 0x88A8):
        off += 4
        if len(frame) < off + 2:
            raise FrameError("truncated VLAN tag")
        etype = struct.unpack_from("!H", frame, off)[0]
    return off + 2, etype


def icrc_of_frame(frame):
    """Compute the RoCEv2 ICRC of an Ethernet frame independently.

    Returns (computed, stored), both as the 32-bit CRC value; `stored` is read
    least-significant byte first from the last 4 bytes of the IP packet (the
    IP length, not the frame length, says where the packet ends, so Ethernet
    padding cannot confuse us).

    Masking, per RoCEv2 (IBTA Annex A17): 8 bytes of 0xFF stand in for the
    LRH; in the IP header the fields routers may change are set to all ones
    (IPv4: TOS, TTL, header checksum; IPv6: traffic class, flow label, hop
    limit); the UDP checksum is set to ones; in the BTH, byte 4 (FECN, BECN,
    6 reserved bits) is set to ones. Everything else up to the ICRC is
    covered unchanged.
    """
    ip, etype = locate_ip(frame)
    if etype == 0x0800:
        if len(frame) < ip + 20:
            raise FrameError("truncated IPv4 header")
        ihl = (frame[ip] & 0x0F) * 4
        total = struct.unpack_from("!H", frame, ip + 2)[0]
        hdr = bytearray(frame[ip:ip + ihl])
        hdr[1] = 0xFF                  # TOS (DSCP + ECN)
        hdr[8] = 0xFF                  # TTL
        hdr[10:12] = b"\xff\xff"       # header checksum
        if frame[ip + 9] != 17:
            raise FrameError("not UDP")
        end = ip + total
        l4 = ip + ihl
    elif etype == 0x86DD:
        if len(frame) < ip + 40:
            raise FrameError("truncated IPv6 header")
        hdr = bytearray(frame[ip:ip + 40])
        hdr[0] |= 0x0F                 # low nibble of byte 0: top of traffic class
        hdr[1:4] = b"\xff\xff\xff"     # rest of traffic class + flow label
        hdr[7] = 0xFF                  # hop limit
        if frame[ip + 6] != 17:
            raise FrameError("not UDP (or has extension headers)")
        plen = struct.unpack_from("!H", frame, ip + 4)[0]
        end = ip + 40 + plen
        l4 = ip + 40
    else:
        raise FrameError("not IP (ethertype 0x%04x)" % etype)
    if end > len(frame) or end < l4 + 8 + 12 + 4:
        raise FrameError("IP length inconsistent with frame")
    udp = bytearray(frame[l4:l4 + 8])
    udp[6:8] = b"\xff\xff"             # UDP checksum
    bth = bytearray(frame[l4 + 8:l4 + 20])
    bth[4] = 0xFF                      # FECN, BECN, resv6
    rest = frame[l4 + 20:end - 4]
    computed = crc32(b"\xff" * 8 + bytes(hdr) + bytes(udp) + bytes(bth) + rest)
    stored = int.from_bytes(frame[end - 4:end], "little")
    return computed, stored


# A CNP captured from a Mellanox ConnectX-4 Lx (published in scapy's
# test/contrib/roce.uts): real hardware vouches for the masking rules above.
_HW_CNP = bytes.fromhex(
    "e41d2dab2bc27cfe90643b32080045c2"
    "003c718c4000401191610a0011010a00"
    "1201000012b7002800008100ffff4000"
    "01180000000000000000000000000000"
    "00000000000082fd002a")
assert icrc_of_frame(_HW_CNP)[0] == icrc_of_frame(_HW_CNP)[1], "ICRC self-test failed"


# --------------------------------------------------------------------------
# Classic pcap I/O (stdlib). The decoder under test is fed files we write
# ourselves, and we read the lead's sample file ourselves, so no pcap library
# is shared with anything.

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),      # little-endian, microseconds
    b"\xa1\xb2\xc3\xd4": (">", 1000),      # big-endian, microseconds
    b"\x4d\x3c\xb2\xa1": ("<", 1),         # little-endian, nanoseconds
    b"\xa1\xb2\x3c\x4d": (">", 1),         # big-endian, nanoseconds
}


def read_pcap(path):
    """Return the list of captured frames (bytes) of a classic Ethernet pcap."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24 or data[:4] not in PCAP_MAGICS:
        raise FrameError("%s: not a classic pcap file" % path)
    endian, _ = PCAP_MAGICS[data[:4]]
    linktype = struct.unpack_from(endian + "I", data, 20)[0]
    if linktype != 1:
        raise FrameError("%s: linktype %d, expected 1 (Ethernet)" % (path, linktype))
    frames = []
    off = 24
    while off < len(data):
        if off + 16 > len(data):
            raise FrameError("%s: truncated record header" % path)
        _, _, incl, _ = struct.unpack_from(endian + "IIII", data, off)
        off += 16
        if off + incl > len(data):
            raise FrameError("%s: truncated record" % path)
        frames.append(data[off:off + incl])
        off += incl
    return frames


def write_pcap(path, frames, t0=1_700_000_000):
    """Write frames as a little-endian microsecond classic pcap, linktype 1."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", t0 + i // 1000, (i % 1000) * 1000,
                                len(fr), len(fr)))
            f.write(fr)


# --------------------------------------------------------------------------
# Running the decoder.


def run_decoder(decoder, pcap, timeout=120):
    """Run DECODER PCAP; return (exit code, list of parsed lines, stderr).

    A line that is not a JSON object is kept as {"__unparsable__": line} so
    the caller can report it against the right frame.
    """
    p = subprocess.run([decoder, pcap], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    out = []
    for line in p.stdout.decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError
        except ValueError:
            obj = {"__unparsable__": line}
        out.append(obj)
    return p.returncode, out, p.stderr.decode("utf-8", "replace")


def by_frame(lines):
    """Index decoder output by its `frame` key (falling back to line order)."""
    res = {}
    for i, obj in enumerate(lines, 1):
        n = obj.get("frame", i)
        res[n if isinstance(n, int) else i] = obj
    return res


def same(a, b):
    """Strict JSON equality: True must not equal 1, dicts compared as subsets.

    Python's True == 1 would otherwise hide a decoder printing 1 for a bool.
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and all(k in b and same(v, b[k]) for k, v in a.items())
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return type(a) is type(b) and a == b


def diff_fields(expected, got, prefix=""):
    """List of (field, expected, got) where `got` disagrees with `expected`."""
    bad = []
    for k, v in expected.items():
        if k not in got:
            bad.append((prefix + k, v, "<missing>"))
        elif isinstance(v, dict) and isinstance(got[k], dict):
            bad += diff_fields(v, got[k], prefix + k + ".")
        elif not same(v, got[k]):
            bad.append((prefix + k, v, got[k]))
    return bad


# --------------------------------------------------------------------------
# TAP output.


class Tap:
    """Collects test points and prints TAP; the plan goes first (meson wants
    "1..N" before or after, either works, but first is easier to read)."""

    def __init__(self):
        self.points = []

    def ok(self, cond, desc, reasons=()):
        self.points.append((bool(cond), desc, list(reasons)))
        return cond

    def finish(self):
        print("1..%d" % len(self.points))
        failed = 0
        for i, (ok, desc, reasons) in enumerate(self.points, 1):
            print("%s %d - %s" % ("ok" if ok else "not ok", i, desc))
            if not ok:
                failed += 1
                for r in reasons[:20]:
                    print("# " + str(r))
                if len(reasons) > 20:
                    print("# ... %d more" % (len(reasons) - 20))
        if failed:
            print("# %d of %d failed" % (failed, len(self.points)))
        sys.stdout.flush()
        return 1 if failed else 0


def bail(msg):
    """TAP 'Bail out!' for problems that make the whole run meaningless."""
    print("Bail out! " + msg)
    sys.stdout.flush()
    sys.exit(2)


def run_main(main):
    """Runs a check script's main(argv) and exits with its status; a broken
    frame or a tool that hangs bails out the whole TAP run instead of a
    traceback."""
    try:
        sys.exit(main(sys.argv))
    except FrameError as e:
        bail(str(e))
    except subprocess.TimeoutExpired as e:
        bail("timed out: %s" % e)


def require_executable(path, what):
    if os.sep not in path:
        found = shutil.which(path)
        if not found:
            bail("%s '%s' not found in PATH" % (what, path))
        return found
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        bail("%s '%s' does not exist or is not executable (build it first)" % (what, path))
    return path


def require_scapy():
    try:
        import scapy  # noqa: F401
        from scapy.contrib import roce  # noqa: F401
    except ImportError as e:
        bail("scapy with scapy.contrib.roce is needed (Debian: apt install python3-scapy; "
             "run with /usr/bin/python3): %s" % e)
