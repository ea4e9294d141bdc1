#!/bin/bash
# metaroce-perf over net_af_xdp: a veth pair in a network namespace of its
# own (MTU 3000, the preset's), the server on one end and the client on the
# other, each through drivers-config/net_af_xdp.ini. The client asks for
# --mtu 4096; the ports carry 2,872 payload bytes a packet, so both ends
# agree on that and say so, and every byte of 1 MiB WRITEs is verified by
# the server, with no frame dropped as too large. Always removes what it
# created. Not root: says so and skips. Prints TAP.
# Usage: af_xdp_test.sh PATH/metaroce-perf DRIVERS-CONFIG-DIR
perf="$1"
presets="$2"
if [ "$(id -u)" -ne 0 ]; then
  echo "1..0 # SKIP not root: network namespaces, veths and XDP programs need root (run tools/test as root)"
  exit 0
fi

# Under the sanitizer build: libxdp's own leak is not ours (af_xdp_lsan.supp).
export LSAN_OPTIONS="suppressions=$(dirname "$0")/af_xdp_lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

ns="mr-xdp-$$"
work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  for f in "$work"/*.out; do echo "# $f:"; tail -12 "$f" | sed 's/^/#   /'; done
}

ip netns add "$ns" || exit 1
ip -n "$ns" link add xd0 type veth peer name xd1 || exit 1
for i in xd0 xd1; do
  ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1"
  ip -n "$ns" link set "$i" mtu 3000 up || exit 1
done

messages=64
echo "1..4"
ip netns exec "$ns" "$perf" --server --preset "$presets/net_af_xdp.ini" --iface xd0 --local-ip 10.79.0.2 \
  --idle-sleep-us 5 --json "$work/server.json" >"$work/server.out" 2>&1 &
server_pid=$!
sleep 1
timeout 60 ip netns exec "$ns" "$perf" --client 10.79.0.2 --preset "$presets/net_af_xdp.ini" --iface xd1 \
  --local-ip 10.79.0.1 --mtu 4096 -s 1048576 -n "$messages" --op write-imm --verify --idle-sleep-us 5 \
  --json "$work/client.json" >"$work/client.out" 2>&1
client_status=$?
timeout 20 tail --pid="$server_pid" -f /dev/null
kill -9 "$server_pid" 2>/dev/null
wait "$server_pid"
server_status=$?
server_pid=

check "$messages MiB of WRITEs over AF_XDP sockets complete, every byte verified by the server" \
  "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] \
   && grep -q 'connection .* closed: $messages messages checked, 0 wrong' '$work/server.out' \
   && jq -e '.ok == true and .results[0].iterations == $messages' '$work/client.json' >/dev/null"
check "the client says the MTU the ports carry: 2872, not the 4096 asked" \
  "grep -Fxq ' MTU 2872 agreed: --mtu 4096 is more than the ports carry' '$work/client.out'"
check "the server took the connection at MTU 2872" "grep -q 'MTU 2872,' '$work/server.out'"
check "no frame dropped as too large on either side" \
  "jq -e '[.. | .tx_frame_too_large? // empty] | length > 0 and all(. == 0)' '$work/client.json' >/dev/null \
   && jq -e '[.. | .tx_frame_too_large? // empty] | all(. == 0)' '$work/server.json' >/dev/null"
exit $failed
