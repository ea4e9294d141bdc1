#!/usr/bin/python3
# An on-path attacker for secure_attack_test.sh, run in the router namespace:
# sniffs one real MR_WRITE frame forwarded towards the server on IFACE,
# then injects, towards the server, copies that keep every header but:
#   - a changed payload byte under a fresh counter each (the ICRC made
#     right): must be secure_bad_tag (with the seen counter it would be a
#     replay, refused before its tag is checked);
#   - a changed WRITE address byte, fresh counters: secure_bad_tag;
#   - the exact frame again: secure_replayed;
#   - another SPI (the ICRC made right): secure_bad_spi;
#   - the trailer and its bytes cut off (lengths and ICRC right): a frame
#     whose last 28 payload bytes read as a trailer, another SPI.
#   - "ahead": the frame with a changed payload byte, as a packet of a
#     later message: its PSN and message sequence moved by D messages (D
#     spread over the PSN window), so that it arrives before the real one;
#     under a fresh counter each: secure_bad_tag.
# With MODE plain (a transfer without --secure; no trailer) only the
# "ahead" copies are sent: the receiver places each one that arrives
# before its real packet, and then drops the real one as a duplicate, so
# the message holds bytes the sender never wrote.
# Prints "ready" once it listens, one line per kind with the number sent,
# then "done".
# Usage: secure_attack.py IFACE SERVER-MAC COUNT [secure|plain] [MESSAGE-SIZE]
import struct
import sys
import zlib

from scapy.all import Ether, conf, sendp, sniff  # noqa: E402

conf.verb = 0
iface, server_mac, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
mode = sys.argv[4] if len(sys.argv) > 4 else "secure"
message_size = int(sys.argv[5]) if len(sys.argv) > 5 else 1 << 20
TRAILER = 28 if mode == "secure" else 0
PSN_WINDOW = 16384  # the receiver's (transport::Config::psn_window)


def icrc(frame: bytes, l3: int) -> bytes:
    ip = bytearray(frame[l3:l3 + 20])
    ip[1] = 0xFF
    ip[8] = 0xFF
    ip[10:12] = b"\xff\xff"
    udp = bytearray(frame[l3 + 20:l3 + 28])
    udp[6:8] = b"\xff\xff"
    bth = bytearray(frame[l3 + 28:l3 + 40])
    bth[4] = 0xFF
    rest = frame[l3 + 40:-4]
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth) + rest) & 0xFFFFFFFF
    return struct.pack("<I", crc)


def fixed(frame: bytearray) -> bytes:
    frame[-4:] = icrc(bytes(frame), 14)
    return bytes(frame)


def is_data(p) -> bool:
    raw = bytes(p)
    return (len(raw) > 600 and raw[12:14] == b"\x08\x00" and raw[23] == 17
            and struct.unpack(">H", raw[36:38])[0] == 4791 and raw[42] == 0xC0
            and raw[42 + 12 + 1] & 1 == 0)  # MR_WRITE, not a message's last packet


print("ready", flush=True)  # scapy is loaded: the transfer may start
got = sniff(iface=iface, lfilter=is_data, count=1, timeout=60)
if not got:
    print("no data frame seen")
    sys.exit(1)
real = bytearray(bytes(got[0]))
real[0:6] = bytes.fromhex(server_mac.replace(":", ""))  # the router's next hop: the server
bth = 14 + 20 + 8
payload = bth + 12 + 16 + 20
trailer = len(real) - 4 - TRAILER
frames = {}
if mode == "secure":
    f = bytearray(real)
    f[payload + 100] ^= 0x40
    frames["payload"] = fixed(f)
    f = bytearray(real)
    f[bth + 12 + 16 + 7] ^= 0x01  # the WRITE's address, last byte
    frames["header"] = fixed(f)
    frames["replay"] = bytes(real)
    f = bytearray(real)
    f[trailer + 3] ^= 0x55
    frames["spi"] = fixed(f)
    f = bytearray(real[:trailer]) + bytearray(4)
    struct.pack_into(">H", f, 14 + 2, struct.unpack(">H", f[16:18])[0] - TRAILER)
    struct.pack_into(">H", f, 14 + 10, 0)
    s = sum(struct.unpack(">10H", bytes(f[14:34])))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    struct.pack_into(">H", f, 14 + 10, ~s & 0xFFFF)
    struct.pack_into(">H", f, 14 + 20 + 4, struct.unpack(">H", f[38:40])[0] - TRAILER)
    frames["stripped"] = fixed(f)


def fresh(frame: bytes, k: int) -> bytes:
    """The frame under counter 2^40 + k: above any the sender used."""
    f = bytearray(frame)
    struct.pack_into(">Q", f, trailer + 4, (1 << 40) + k)
    return fixed(f)


def ahead(k: int) -> bytes:
    """Forgery k of the "ahead" kind: the real frame with a payload byte
    changed, moved D messages on (its PSN by D packets per message, its
    message sequence by D), D spread from 2 messages to the PSN window."""
    f = bytearray(real)
    f[payload + 100] ^= 0x40
    payload_len = trailer - payload - ((f[bth + 1] >> 4) & 3)
    per_message = -(-message_size // payload_len)
    top = max(3, PSN_WINDOW // per_message - 2)
    d = 2 + k * (top - 2) // max(1, count - 1)
    psn = (struct.unpack(">I", f[bth + 8:bth + 12])[0] + d * per_message) & 0xFFFFFF
    f[bth + 9:bth + 12] = psn.to_bytes(3, "big")
    seq = struct.unpack(">I", f[bth + 12 + 8:bth + 12 + 12])[0]
    struct.pack_into(">I", f, bth + 12 + 8, (seq + d) & 0xFFFFFFFF)
    return fixed(f) if mode == "plain" else fresh(bytes(f), 2 * count + k)


for name, frame in frames.items():
    if name in ("payload", "header"):
        batch = [Ether(fresh(frame, k + (count if name == "header" else 0))) for k in range(count)]
    else:
        batch = [Ether(frame)] * count
    sendp(batch, iface=iface)
    print(f"{name} {count}")
sendp([Ether(ahead(k)) for k in range(count)], iface=iface)
print(f"ahead {count}")
print("done", flush=True)
