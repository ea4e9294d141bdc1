#!/usr/bin/env bash
# Seed corpora for the fuzz targets, from the golden captures:
#   samples.pcap  every opcode of both modes (metaroce-write-samples)
#   golden.pcap   the scapy-built oracle frames (tests/oracles/make_golden.py;
#                 skipped, with a note, when scapy is not installed)
# Writes into OUTDIR (not committed):
#   OUTDIR/fuzz-wire-parse/     one frame per file
#   OUTDIR/fuzz-connection-rx/  one frame per file, wrapped as a raw record for
#                               each mode, plus a few interpreted sequences
#   OUTDIR/fuzz-decode-pcap/    the whole captures, a truncated one, and small
#                               captures of one frame each, as classic pcap and
#                               as pcapng (the decoder's two readers): short
#                               inputs keep executions fast
#   every target               also the inputs in tests/fuzz/regressions/<target>/,
#                               each one that once broke the target
#   OUTDIR/fuzz-neighbours/     an ARP request for the target's address, a
#                               neighbour solicitation for it and an
#                               advertisement, whole (mode byte 0)
# Debian's /usr/bin/python3 (with python3-scapy), as tools/test uses.
# usage: tests/fuzz/make_seeds.sh OUTDIR WRITE_SAMPLES_EXE
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 OUTDIR WRITE_SAMPLES_EXE (e.g. build-fuzz/tests/wire/metaroce-write-samples)" >&2
  exit 2
fi
out=$1
write_samples=$2
here=$(cd "$(dirname "$0")" && pwd)
captures=$(mktemp -d)
trap 'rm -rf "$captures"' EXIT

"$write_samples" "$captures/samples.pcap" >/dev/null
if /usr/bin/python3 -c 'import scapy' 2>/dev/null; then
  /usr/bin/python3 "$here/../oracles/make_golden.py" "$captures" >/dev/null
else
  echo "make_seeds: python3-scapy not installed: golden.pcap seeds skipped" >&2
fi

mkdir -p "$out/fuzz-wire-parse" "$out/fuzz-connection-rx" "$out/fuzz-decode-pcap" "$out/fuzz-cm" "$out/fuzz-neighbours" "$out/fuzz-secure-open"

/usr/bin/python3 - "$out" "$captures"/*.pcap <<'EOF'
import os, struct, sys

out, captures = sys.argv[1], sys.argv[2:]

def frames(path):
    """Records of a classic pcap (either byte order, us or ns)."""
    data = open(path, 'rb').read()
    magic = data[:4]
    endian = '<' if magic in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1') else '>'
    at = 24
    while at + 16 <= len(data):
        caplen = struct.unpack(endian + 'I', data[at + 8:at + 12])[0]
        yield data[at + 16:at + 16 + caplen]
        at += 16 + caplen

def pcap_record(frame):
    return struct.pack('<IIII', 1, 2, len(frame), len(frame)) + frame

def block(kind, body):
    body += b'\0' * (-len(body) % 4)
    return struct.pack('<II', kind, len(body) + 12) + body + struct.pack('<I', len(body) + 12)

def pcapng_of(frame):
    """Section header, interface (Ethernet), one enhanced and one simple packet block."""
    section = block(0x0a0d0d0a, struct.pack('<IHHq', 0x1a2b3c4d, 1, 0, -1))
    interface = block(1, struct.pack('<HHI', 1, 0, 0))
    enhanced = block(6, struct.pack('<IIIII', 0, 0, 1000, len(frame), len(frame)) + frame)
    simple = block(3, struct.pack('<I', len(frame)) + frame)
    return section + interface + enhanced + simple

def record(kind, body):
    return bytes([kind]) + struct.pack('>H', len(body)) + body

count = 0
for path in captures:
    name = os.path.splitext(os.path.basename(path))[0]
    with open(path, 'rb') as f:
        whole = f.read()
    open(os.path.join(out, 'fuzz-decode-pcap', name + '.pcap'), 'wb').write(whole)
    open(os.path.join(out, 'fuzz-decode-pcap', name + '-truncated.pcap'), 'wb').write(whole[:len(whole) * 2 // 3])
    header = whole[:24]
    for i, frame in enumerate(frames(path)):
        open(os.path.join(out, 'fuzz-wire-parse', '%s-%03d' % (name, i)), 'wb').write(frame)
        if i % 8 == 0:
            small = os.path.join(out, 'fuzz-decode-pcap', '%s-%03d' % (name, i))
            open(small + '.pcap', 'wb').write(header + pcap_record(frame))
            open(small + '.pcapng', 'wb').write(pcapng_of(frame))
        # Variant byte: bit 0 picks rocev2; each frame goes to both modes.
        for variant in (0, 1):
            open(os.path.join(out, 'fuzz-connection-rx', '%s-%03d-%d' % (name, i, variant)), 'wb').write(
                bytes([variant]) + record(0, frame))
        count += 1

# Interpreted sequences (kind 1), one per mode, that complete messages,
# acknowledge what the connection sent and let timers fire (kind 2). The
# parameter bytes follow the readers in fuzz_connection_rx.cpp.
metaroce = b''.join([
    # WRITE, stream 0, message 0 of 600 bytes: packets 0..2 on paths 0..2.
    record(1, bytes([0x00, 0, 0, 0x02, 0x58, 0, 0x00, 0, 0])),
    record(1, bytes([0x00, 0, 0, 1, 0x00, 1, 0])),
    record(1, bytes([0x00, 0, 0, 2, 0x00, 2, 0])),
    # SEND, stream 1, message 0 of 100 bytes.
    record(1, bytes([0x02, 1, 0, 0, 0x64, 0, 0x00, 3, 0])),
    # ACK of everything sent: four path blocks.
    record(1, bytes([0x05, 0, 0, 6, 0, 0, 4, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0])),
    # A NAK (RNR) for a sent PSN, then 60 ms pass.
    record(1, bytes([0x07, 0, 1, 0])),
    record(2, bytes([0xea, 0x60, 0])),
    # A probe on path 1.
    record(1, bytes([0x04, 1, 0, 0, 0, 0, 0])),
])
rocev2 = b''.join([
    record(1, bytes([0x00, 0x0a, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x80])),  # WRITE_ONLY 128 bytes
    record(1, bytes([0x00, 0x04, 0x00, 0x00, 0x40])),  # SEND_ONLY 64 bytes
    record(1, bytes([0x05, 0x00, 0x00, 0x00, 0x00])),  # ACK
    record(2, bytes([0xea, 0x60, 0])),
    record(1, bytes([0x07])),  # CNP
])
open(os.path.join(out, 'fuzz-connection-rx', 'interpreted-metaroce'), 'wb').write(bytes([0]) + metaroce)
open(os.path.join(out, 'fuzz-connection-rx', 'interpreted-rocev2'), 'wb').write(bytes([1]) + rocev2)
# fuzz-cm (records of fuzz_cm.cpp): the genuine handshake relayed end to
# end (REQ, REP, RTU, then DREQ and DREP), and one MAD of each message type
# in the layout of doc/WIRE.md ("Connection manager").
def mad(kind, nonce=0x1234, qpn=0x42, psn=7, receiver=0, mtu=4096, paths=4, streams=1, private=b'', cc=b'metaroce'):
    header = struct.pack('>BBBBHHQHHI', 1, 0x09, 1, 3, 0, 0, (nonce << 32) | qpn, kind, 0, 0)
    data = struct.pack('>IBBBBIIIIIHHHH', 0x4d52434d, 1, 0, 0, len(private), nonce, qpn, psn, receiver, mtu,
                       paths, streams, 49152, 0)
    data += cc.ljust(16, b'\0') + private.ljust(64, b'\0')
    return (header + data).ljust(256, b'\0')
relay_server, relay_client = 0x80, 0x81
handshake = record(relay_server, b'') + record(relay_client, b'') + record(relay_server, b'')
closing = record(0x40, mad(1)) + record(relay_server, b'') + record(relay_client, b'')
open(os.path.join(out, 'fuzz-cm', 'handshake'), 'wb').write(handshake)
open(os.path.join(out, 'fuzz-cm', 'handshake-close'), 'wb').write(handshake + closing)
open(os.path.join(out, 'fuzz-cm', 'retries'), 'wb').write(record(2, b'') + record(2, b'') + record(relay_server, b'') + record(3, b'') + record(relay_client, b''))
for kind in range(1, 7):
    open(os.path.join(out, 'fuzz-cm', 'mad-%d' % kind), 'wb').write(
        record(0 if kind in (1, 3, 5) else 1, mad(kind, private=b'\1\2\3')))

# fuzz-neighbours (fuzz_neighbours.cpp): mode byte 0, then a whole frame
# (the layouts of doc/WIRE.md, "Neighbours"; ICMPv6 checksums included).
neighbour_frames = {
    'arp-request': 'ffffffffffff020000000009080600010800060400010200000000090a0000020000000000000a000001',
    'nd-solicitation': '3333ff00000102000000000986dd6000000000203afffe800000000000000000000000000009ff0200000000'
                       '000000000001ff00000187007c0900000000fd0000000000000000000000000000010101020000000009',
    'nd-advertisement': '02000000000102000000000986dd6000000000203afffe800000000000000000000000000009fd0000000000'
                        '0000000000000000000188009984e0000000fe8000000000000000000000000000090201020000000009',
}
for name, hex_text in neighbour_frames.items():
    open(os.path.join(out, 'fuzz-neighbours', name), 'wb').write(b'\0' + bytes.fromhex(hex_text))

# fuzz-secure-open (fuzz_secure_open.cpp): mode byte (bit 0 auth-only,
# bits 1..7 the clear header length), three bytes choosing the changed byte,
# then a frame: a 12-byte BTH with and without 64 bytes of payload, and
# 28 bytes shaped like a trailer alone.
bth = bytes.fromhex('f240ffff00000011000003e8')
for name, head, body in (('encrypt-64', 12 << 1, bth + bytes(range(64))),
                         ('auth-only-64', (12 << 1) | 1, bth + bytes(range(64))),
                         ('encrypt-header-only', 12 << 1, bth),
                         ('trailer-alone', 0, bytes.fromhex('11223344' + '0000000000000001') + bytes(16))):
    open(os.path.join(out, 'fuzz-secure-open', name), 'wb').write(bytes([head, 0, 7, 0x80]) + body)

print('make_seeds: %d frames from %s into %s' % (count, ', '.join(os.path.basename(c) for c in captures), out))
EOF

# Inputs that once broke a target, run first on every fuzzing run.
for dir in "$here"/regressions/*/; do
  target=$(basename "$dir")
  mkdir -p "$out/$target"
  for input in "$dir"*; do cp "$input" "$out/$target/regression-$(basename "$input")"; done
done
