#!/bin/bash
# An on-path attacker against a secured transfer. Namespaces client, router
# and server as in netns_test.sh (net_af_packet ports on veths, the router a
# plain Linux router); metaroce-perf --server and --client, both --secure
# with one key file, move 256 x 1 MiB WRITE_WITH_IMMEDIATE, every byte
# checked by the server. In the router, secure_attack.py (scapy) sniffs a
# real data frame on its way to the server and injects 20 copies of each
# forgery: a payload byte changed, a header byte changed, another SPI, the
# trailer cut off (each with a correct ICRC), the frame itself again, and
# a changed payload moved to a later message's PSN, to arrive before the
# real packet. The transfer must complete verified, and the server's
# connection must have counted every forgery under its name and placed
# none of them.
# First, the reason for all this: the same attacker against the same
# transfer without --secure (64 x 1 MiB) sends only the last kind, and the
# server places those that arrive first and drops the real packets as
# duplicates: its --verify must find wrong messages.
# Then a client without --secure and one with another key file are refused
# at connection set-up, each saying why.
# Always removes what it created. Not root or no scapy: says so and skips.
# Prints TAP. Usage: secure_attack_test.sh PATH/metaroce-perf DRIVERS-CONFIG-DIR ATTACK.py
perf="$1"
presets="$2"
attack="$3"
if [ "$(id -u)" -ne 0 ]; then
  echo "1..0 # SKIP not root: network namespaces and veths need root (run tools/test as root)"
  exit 0
fi
for tool in ip jq; do
  if ! command -v "$tool" >/dev/null; then
    echo "1..0 # SKIP '$tool' is missing: run tools/setup (it installs iproute2 and jq)"
    exit 0
  fi
done
if ! /usr/bin/python3 -c 'import scapy.all' 2>/dev/null; then
  echo "1..0 # SKIP scapy is missing for /usr/bin/python3: run tools/setup (python3-scapy)"
  exit 0
fi

tag=$$
ns_c="ms-c-$tag" ns_r="ms-r-$tag" ns_s="ms-s-$tag"
work=$(mktemp -d)
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  [ -n "$attack_pid" ] && kill "$attack_pid" 2>/dev/null
  for ns in "$ns_c" "$ns_r" "$ns_s"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$work"
  for d in /var/run/dpdk/metaroce-perf-*; do
    if [ -d "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null; then rm -rf "$d"; fi
  done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  for f in "$work"/client.out "$work"/server.out "$work"/attack.out; do
    [ -f "$f" ] && tail -15 "$f" | sed "s|^|# $(basename "$f"): |"
  done
}

set -e
for ns in "$ns_c" "$ns_r" "$ns_s"; do ip netns add "$ns"; done
ip link add c0 netns "$ns_c" type veth peer name r0 netns "$ns_r"
ip link add s0 netns "$ns_s" type veth peer name r1 netns "$ns_r"
for pair in "$ns_c c0" "$ns_s s0"; do
  set -- $pair
  ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
  ip -n "$1" link set "$2" mtu 9000 up
done
for i in r0 r1; do ip -n "$ns_r" link set "$i" mtu 9000 up; done
ip -n "$ns_r" addr add 10.78.1.1/24 dev r0
ip -n "$ns_r" addr add 10.78.2.1/24 dev r1
ip netns exec "$ns_r" sysctl -qw net.ipv4.ip_forward=1
mac_s0=$(ip -n "$ns_s" -j link show s0 | jq -r '.[0].address')
head -c 32 /dev/urandom >"$work/psk"
head -c 32 /dev/urandom >"$work/other"
chmod 600 "$work/psk" "$work/other"
set +e

server() {  # extra args...
  ip netns exec "$ns_s" "$perf" --server --preset "$presets/net_af_packet.ini" --iface s0 --local-ip 10.78.2.2 \
    --idle-sleep-us 5 --json "$work/server.json" "$@" >"$work/server.out" 2>&1 &
  server_pid=$!
  sleep 1
}
client() {  # messages extra-args...
  local messages="$1"; shift
  timeout 240 ip netns exec "$ns_c" "$perf" --client 10.78.2.2 --gateway 10.78.1.1 \
    --preset "$presets/net_af_packet.ini" --iface c0 --local-ip 10.78.1.2 --paths 4 --cm-timeout 2 "$@" \
    -s 1048576 -n "$messages" --op write-imm --verify --idle-sleep-us 5 --json "$work/client.json" \
    >"$work/client.out" 2>&1
}
stop_server() {
  timeout 20 tail --pid="$server_pid" -f /dev/null
  kill -9 "$server_pid" 2>/dev/null
  wait "$server_pid"
  server_status=$?
  server_pid=
}
kill_server() { kill "$server_pid" 2>/dev/null; wait "$server_pid"; server_pid=; }
counter() { jq -r ".connection_b.$1" "$work/server.json" 2>/dev/null; }

echo "1..7"
count=20
server
ip netns exec "$ns_r" /usr/bin/python3 "$attack" r1 "$mac_s0" "$count" plain >"$work/attack.out" 2>&1 &
attack_pid=$!
for i in $(seq 200); do grep -q '^ready' "$work/attack.out" 2>/dev/null && break; sleep 0.1; done
client 64
plain_status=$?
wait "$attack_pid"
attack_status=$?
attack_pid=
stop_server
wrong=$(sed -n 's/.*connection .* closed: 64 messages checked, \([0-9]*\) wrong.*/\1/p' "$work/server.out")
echo "# without --secure: the server found ${wrong:-?} of 64 messages wrong," \
     "duplicate_packets $(counter duplicate_packets)"
check "without --secure, the attacker sniffed a data frame and injected $count forgeries" \
  "[ $attack_status -eq 0 ] && grep -q '^ahead $count' '$work/attack.out'"
check "without --secure, the forgeries were placed: the server's --verify finds 1..$count messages wrong, the client fails" \
  "[ -n '$wrong' ] && [ '$wrong' -ge 1 ] && [ '$wrong' -le $count ] && [ $plain_status -ne 0 ] \
     && [ '$(counter duplicate_packets)' -ge '${wrong:-1}' ] && grep -q 'the server found wrong bytes' '$work/client.out'"

server --secure --key-file "$work/psk"
ip netns exec "$ns_r" /usr/bin/python3 "$attack" r1 "$mac_s0" "$count" >"$work/attack.out" 2>&1 &
attack_pid=$!
for i in $(seq 200); do grep -q '^ready' "$work/attack.out" 2>/dev/null && break; sleep 0.1; done
client 256 --secure --key-file "$work/psk"
client_status=$?
wait "$attack_pid"
attack_status=$?
attack_pid=
stop_server
check "the attacker sniffed a data frame and injected every forgery" \
  "[ $attack_status -eq 0 ] && grep -q '^done' '$work/attack.out'"
check "256 MiB through the attacker's router complete, every byte verified by the server" \
  "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] \
     && grep -q 'connection .* closed: 256 messages checked, 0 wrong' '$work/server.out' \
     && jq -e '.ok == true and .results[0].iterations == 256' '$work/client.json' >/dev/null"
echo "# server: secure_bad_tag $(counter secure_bad_tag), secure_replayed $(counter secure_replayed)," \
     "secure_bad_spi $(counter secure_bad_spi), secure_no_trailer $(counter secure_no_trailer)," \
     "secure_frames_opened $(counter secure_frames_opened), duplicate_packets $(counter duplicate_packets)"
check "every forgery counted under its name: bad tag $((3 * count)), replayed $count, bad SPI $((2 * count))" \
  "[ '$(counter secure_bad_tag)' = $((3 * count)) ] && [ '$(counter secure_replayed)' = $count ] \
     && [ '$(counter secure_bad_spi)' = $((2 * count)) ] && [ '$(counter secure_no_trailer)' = 0 ]"

server --secure --key-file "$work/psk"
client 1
plain_status=$?
kill_server
check "a client without --secure is refused at set-up, saying why" \
  "[ $plain_status -ne 0 ] && grep -q 'the server runs --secure' '$work/client.out'"

server --secure --key-file "$work/psk"
client 1 --secure --key-file "$work/other"
other_status=$?
kill_server
check "a client with another key file is refused at set-up, saying why" \
  "[ $other_status -ne 0 ] && grep -q 'different key files' '$work/client.out'"
