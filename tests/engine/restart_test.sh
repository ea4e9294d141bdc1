#!/bin/bash
# A client process killed mid-transfer and started again: the server (on a
# net_af_packet port in another network namespace) keeps serving, the new
# client's connection manager draws a new nonce, QPN and PSN, and the new
# transfer completes with every byte verified by the server, untouched by
# the dead incarnation. Root only (skips else); always cleans up. TAP.
# Usage: restart_test.sh PATH/metaroce-perf DRIVERS-CONFIG-DIR
perf="$1"
presets="$2"
if [ "$(id -u)" -ne 0 ]; then
  echo "1..0 # SKIP not root: network namespaces and veths need root (run tools/test as root)"
  exit 0
fi
tag=$$
ns_c="mr-rc-$tag" ns_s="mr-rs-$tag"
work=$(mktemp -d)
cleanup() {
  for pid in $server_pid $client_pid; do kill -9 "$pid" 2>/dev/null; done
  for ns in "$ns_c" "$ns_s"; do ip netns del "$ns" 2>/dev/null; done
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
mac_s0=$(cat /sys/class/net/s0/address 2>/dev/null || ip -n "$ns_s" -o link show s0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
set +e
common=(--preset "$presets/net_af_packet.ini" --idle-sleep-us 5)
client=(--client 10.78.0.2 --peer-mac "$mac_s0" --iface c0 --local-ip 10.78.0.1 -s 65536 --op write-imm --verify)

echo "1..5"
ip netns exec "$ns_s" "$perf" --server --iface s0 --local-ip 10.78.0.2 "${common[@]}" >"$work/server.out" 2>&1 &
server_pid=$!
sleep 1
ip netns exec "$ns_c" "$perf" "${client[@]}" "${common[@]}" -D 30 >"$work/first.out" 2>&1 &
client_pid=$!
for _ in $(seq 50); do grep -q '^\[' "$work/first.out" 2>/dev/null && break; sleep 0.2; done
check "the first client is transferring (a progress line)" "grep -q '^\\[' '$work/first.out'"
kill -9 "$client_pid"
wait "$client_pid" 2>/dev/null
client_pid=
timeout 120 ip netns exec "$ns_c" "$perf" "${client[@]}" "${common[@]}" -n 3000 --json "$work/second.json" >"$work/second.out" 2>&1
status=$?
check "the restarted client completes 3000 messages, exit 0" \
  "[ $status -eq 0 ] && jq -e '.ok == true and .results[0].iterations == 3000' '$work/second.json' >/dev/null"
timeout 10 tail --pid="$server_pid" -f /dev/null
kill -9 "$server_pid" 2>/dev/null
wait "$server_pid"
server_status=$?
server_pid=
check "the server exits 0 after the new client's last disconnect" "[ $server_status -eq 0 ]"
check "the server saw two incarnations (two connections, distinct QPNs)" \
  "[ \$(grep -c 'from QP' '$work/server.out') -eq 2 ] && [ \$(grep -o 'from QP 0x[0-9a-f]*' '$work/server.out' | sort -u | wc -l) -eq 2 ]"
check "the new connection's 3000 messages were all checked and right" \
  "grep -q 'closed: 3000 messages checked, 0 wrong' '$work/server.out'"
exit 0
