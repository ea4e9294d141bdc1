#!/bin/bash
# rocev2 mode as a standard RoCEv2 peer sees it: two metaroce-perf
# processes in two network namespaces on net_af_packet ports over a veth
# pair, the server's side captured with dumpcap and decoded by tshark (an
# independent decoder). Checks: every RoCEv2 frame either way carries the
# default partition's P_Key 0xffff (65535) unless both ends are given
# --pkey; both ends print their GID the way perftest does (IPv4-mapped).
# Root only (skips else); always cleans up. TAP.
# Usage: interop_test.sh PATH/metaroce-perf DRIVERS-CONFIG-DIR
perf="$1"
presets="$2"
if [ "$(id -u)" -ne 0 ]; then
  echo "1..0 # SKIP not root: network namespaces and veths need root (run tools/test as root)"
  exit 0
fi
for tool in ip tshark dumpcap; do
  if ! command -v "$tool" >/dev/null; then
    echo "1..0 # SKIP '$tool' is missing: run tools/setup (it installs iproute2 and tshark)"
    exit 0
  fi
done
tag=$$
ns_c="mr-ic-$tag" ns_s="mr-is-$tag"
work=$(mktemp -d)
chmod 755 "$work"  # dumpcap may drop to another user
started=""
cleanup() {
  for pid in $server_pid $client_pid $capture_pid; do kill -9 "$pid" 2>/dev/null; done
  for ns in "$ns_c" "$ns_s"; do ip netns del "$ns" 2>/dev/null; done
  for pid in $started; do rm -rf "/var/run/dpdk/metaroce-perf-$pid"; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1)); failed=1; echo "not ok $n - $1"
  for f in "$work"/*.out; do [ -f "$f" ] && tail -12 "$f" | sed "s|^|# $(basename "$f"): |"; done
}
check() { if eval "$2"; then ok "$1"; else not_ok "$1"; fi; }

set -e
ip netns add "$ns_c"
ip netns add "$ns_s"
ip link add c0 netns "$ns_c" type veth peer name s0 netns "$ns_s"
for pair in "$ns_c c0" "$ns_s s0"; do
  set -- $pair
  ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
  ip -n "$1" link set "$2" mtu 9000 up
done
mac_s0=$(ip -n "$ns_s" -o link show s0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
set +e
common=(--preset "$presets/net_af_packet.ini" --idle-sleep-us 5 --mode rocev2)

# capture_start NAME: dumpcap on s0 (the server's side) into NAME.pcap.
capture_start() {
  ip netns exec "$ns_s" dumpcap -q -i s0 -w "$work/$1.pcap" >"$work/$1-dumpcap.log" 2>&1 &
  capture_pid=$!
  for _ in $(seq 50); do [ -s "$work/$1.pcap" ] && break; sleep 0.1; done
}
capture_stop() {
  sleep 0.5
  kill -INT "$capture_pid" 2>/dev/null
  wait "$capture_pid" 2>/dev/null
  capture_pid=
}
# run_pair NAME EXTRA-ARGS...: a server and a client, -n 200 64 KiB WRITE_IMM
# verified; statuses in $server_status, $client_status.
run_pair() {
  local name="$1"; shift
  ip netns exec "$ns_s" "$perf" --server --iface s0 --local-ip 10.79.0.2 "${common[@]}" "$@" \
    >"$work/$name-server.out" 2>&1 &
  server_pid=$!
  started="$started $server_pid"
  sleep 1
  timeout 60 ip netns exec "$ns_c" "$perf" --client 10.79.0.2 --peer-mac "$mac_s0" --iface c0 \
    --local-ip 10.79.0.1 "${common[@]}" "$@" -s 65536 -n 200 --op write-imm --verify \
    >"$work/$name-client.out" 2>&1 &
  client_pid=$!
  started="$started $client_pid"
  wait "$client_pid"
  client_status=$?
  client_pid=
  timeout 10 tail --pid="$server_pid" -f /dev/null
  kill -9 "$server_pid" 2>/dev/null
  wait "$server_pid"
  server_status=$?
  server_pid=
}
# pkeys NAME [FILTER]: the distinct BTH P_Keys of the capture's RoCEv2 frames.
pkeys() {
  tshark -r "$work/$1.pcap" -Y "infiniband${2:+ && $2}" -T fields -e infiniband.bth.p_key 2>/dev/null | sort -u | tr '\n' ' '
}
frames() { tshark -r "$work/$1.pcap" -Y "infiniband${2:+ && $2}" 2>/dev/null | wc -l; }

echo "1..6"
capture_start default
run_pair default
capture_stop
check "rocev2 with the defaults: 200 messages verified, both ends exit 0" \
  "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] \
   && grep -q 'closed: 200 messages checked, 0 wrong' '$work/default-server.out'"
echo "# default: $(frames default) RoCEv2 frames captured, $(frames default 'infiniband.bth.destqp != 1') to data QPs;" \
     "P_Keys: $(pkeys default)"
check "every RoCEv2 frame both ways (data, ACKs, connection manager) carries P_Key 0xffff" \
  "[ \$(frames default 'infiniband.bth.destqp != 1') -ge 1000 ] && [ '$(pkeys default)' = '65535 ' ]"
check "both ends print their GID as perftest does (IPv4-mapped, decimal bytes)" \
  "grep -q '^ GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:79:00:02$' '$work/default-server.out' \
   && grep -q '^ GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:79:00:01$' '$work/default-client.out'"
check "both ends print the IBTA timers a standard peer should match" \
  "grep -q 'P_Key 0xffff, local ACK timeout 14 (67.1 ms, backing off), retry count 7, RNR retry 7 (no limit)' \
     '$work/default-server.out' && grep -q '^ rocev2: P_Key 0xffff, local ACK timeout 14' '$work/default-client.out'"

capture_start chosen
run_pair chosen --pkey 0x8123 --qp-timeout 12 --retry-count 5
capture_stop
check "rocev2 --pkey 0x8123 at both ends: 200 messages verified" \
  "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] \
   && grep -q 'closed: 200 messages checked, 0 wrong' '$work/chosen-server.out'"
echo "# chosen: data-QP P_Keys: $(pkeys chosen 'infiniband.bth.destqp != 1')"
check "every frame to a data QP carries P_Key 0x8123 (33059)" \
  "[ \$(frames chosen 'infiniband.bth.destqp != 1') -ge 1000 ] \
   && [ '$(pkeys chosen 'infiniband.bth.destqp != 1')' = '33059 ' ]"
exit $failed
