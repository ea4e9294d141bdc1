#!/bin/bash
# Two planes between two processes: metaroce-perf --server and --client in
# network namespaces of their own, joined by two veth pairs (one per
# plane), each end a net_af_packet port per plane (--preset and --iface
# given twice). The connection manager agrees on two planes; WRITEs go
# over both. Mid-transfer the client's plane-1 veth is set down (`ip link
# set ... down`; net_af_packet reports its link up whatever the
# interface, so the engine reads IFF_RUNNING): both hosts see the link go
# down, the plane fails at both ends and its traffic moves to plane 0; set
# up again, the plane comes back. The transfer completes with every byte
# verified and nothing missing. Root only (skips else); always cleans up.
# Prints TAP.
# Then metaroce-gen -> metaroce-sink over the same two planes.
# Usage: planes_netns_test.sh PATH/metaroce-perf DRIVERS-CONFIG-DIR PATH/metaroce-gen PATH/metaroce-sink
perf="$1"
presets="$2"
gen="$3"
sink="$4"
if [ "$(id -u)" -ne 0 ]; then
  echo "1..0 # SKIP not root: network namespaces and veths need root (run tools/test as root)"
  exit 0
fi
tag=$$
ns_c="mr-pc-$tag" ns_s="mr-ps-$tag"
work=$(mktemp -d)
started=""
started_gs=""
server_pid= client_pid=
cleanup() {
  for pid in $server_pid $client_pid; do kill -9 "$pid" 2>/dev/null; done
  for ns in "$ns_c" "$ns_s"; do ip netns del "$ns" 2>/dev/null; done
  for pid in $started; do rm -rf "/var/run/dpdk/metaroce-perf-$pid"; done
  for pid in $started_gs; do rm -rf "/var/run/dpdk/metaroce-sink-$pid"; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  for f in "$work"/*.out; do [ -f "$f" ] && tail -25 "$f" | sed "s|^|# $(basename "$f"): |"; done
}

set -e
ip netns add "$ns_c"
ip netns add "$ns_s"
for k in 0 1; do
  ip link add "c$k" netns "$ns_c" type veth peer name "s$k" netns "$ns_s"
  for pair in "$ns_c c$k" "$ns_s s$k"; do
    set -- $pair
    ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
    ip -n "$1" link set "$2" mtu 9000 up
  done
done
mac_s0=$(ip -n "$ns_s" -o link show s0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
set +e
preset="$presets/net_af_packet.ini"

echo "1..11"
ip netns exec "$ns_s" "$perf" --server --preset "$preset" --iface s0 --preset "$preset" --iface s1 \
  --local-ip 10.79.0.2 --local-ip 10.79.1.2 --idle-sleep-us 5 --json "$work/server.json" >"$work/server.out" 2>&1 &
server_pid=$!
started="$started $server_pid"
sleep 1
ip netns exec "$ns_c" "$perf" --client 10.79.0.2 --peer-mac "$mac_s0" --preset "$preset" --iface c0 \
  --preset "$preset" --iface c1 --local-ip 10.79.0.1 --local-ip 10.79.1.1 --paths 8 -s 65536 -D 8 --verify \
  --idle-sleep-us 5 --json "$work/client.json" >"$work/client.out" 2>&1 &
client_pid=$!
started="$started $client_pid"
for _ in $(seq 50); do grep -q '^\[' "$work/client.out" 2>/dev/null && break; sleep 0.2; done
check "the client is transferring over two planes (a progress line)" "grep -q '^\\[' '$work/client.out'"
sleep 1.5
ip -n "$ns_c" link set c1 down
sleep 2
ip -n "$ns_c" link set c1 up
timeout 60 tail --pid="$client_pid" -f /dev/null || kill -9 "$client_pid" 2>/dev/null
wait "$client_pid"
status=$?
client_pid=
timeout 10 tail --pid="$server_pid" -f /dev/null
kill -9 "$server_pid" 2>/dev/null
wait "$server_pid"
server_status=$?
server_pid=
check "the client exits 0, every byte verified, nothing missing" \
  "[ $status -eq 0 ] && grep -q 'verify: every byte of every message checked, all correct' '$work/client.out' \
   && jq -e '.ok and .results[0].iterations > 0 and .results[0].wrong_messages == 0
     and .results[0].missing_messages == 0' '$work/client.json' >/dev/null"
check "the server exits 0 after the client's last disconnect, nothing wrong" \
  "[ $server_status -eq 0 ] && grep -q 'closed: [0-9]* messages checked, 0 wrong' '$work/server.out'"
check "both planes carried data" \
  "jq -e '(.planes | length) == 2 and all(.planes[]; .data_packets > 0)' '$work/client.json' >/dev/null"
check "the client's host saw plane 1's link go down and come back (exactly two changes), none on plane 0" \
  "jq -e '.host_a.link_changes == 2 and .planes[0].failures == 0' '$work/client.json' >/dev/null"
check "the client's connection failed plane 1 and every failure recovered" \
  "jq -e '.connection_a.planes_failed >= 1 and .connection_a.planes_recovered == .connection_a.planes_failed
     and .planes[1].failures == .connection_a.planes_failed and .planes[1].state == \"active\"' '$work/client.json' >/dev/null"
check "the server's host saw the carrier go and come back (two changes)" \
  "jq -e '.host_b.link_changes == 2' '$work/server.json' >/dev/null"
check "the server's connection failed plane 1 too and recovered it" \
  "jq -e '.connection_b.planes_failed >= 1 and .connection_b.planes_recovered == .connection_b.planes_failed' \
     '$work/server.json' >/dev/null"

# metaroce-gen -> metaroce-sink over the same two planes (a --preset and
# --iface per plane at each end): every message verified once, and the
# kernel's counters of plane 1's veth show it carried the data too.
tx_packets() { ip -n "$1" -s -j link show "$2" | jq '.[0].stats64.tx.packets'; }
c1_before=$(tx_packets "$ns_c" c1)
ip netns exec "$ns_s" "$sink" --preset "$preset" --iface s0 --preset "$preset" --iface s1 --local-ip 10.79.0.2 \
  --idle-sleep-us 5 --json "$work/sink.json" >"$work/sink.out" 2>&1 &
server_pid=$!
started_gs="$server_pid"
sleep 1
timeout 60 ip netns exec "$ns_c" "$gen" --preset "$preset" --iface c0 --preset "$preset" --iface c1 \
  --local-ip 10.79.0.1 --sink 10.79.0.2 --peer-mac "$mac_s0" --idle-sleep-us 5 -c 2 --paths 8 -n 2000 -s 64k \
  --json "$work/gen.json" >"$work/gen.out" 2>&1
gen_status=$?
timeout 10 tail --pid="$server_pid" -f /dev/null
kill -9 "$server_pid" 2>/dev/null
wait "$server_pid"
sink_status=$?
server_pid=
c1_after=$(tx_packets "$ns_c" c1)
check "metaroce-gen and metaroce-sink over two planes exit 0 (gen $gen_status, sink $sink_status)" \
  "[ $gen_status -eq 0 ] && [ $sink_status -eq 0 ]"
check "the sink verified all 4000 messages (2000 per connection) once, nothing wrong or missing" \
  "jq -e '.ok and .messages == 4000 and .wrong == 0 and .missing == 0 and .duplicates == 0' '$work/sink.json' >/dev/null"
check "plane 1 (veth c1) carried over a quarter of the 64000 data packets ($((c1_after - c1_before)) frames)" \
  "[ $((c1_after - c1_before)) -gt 16000 ]"
exit $failed
