#!/bin/bash
# A port whose link is down is a setup error the remote apps name: a veth
# pair in a network namespace of its own, metaroce-perf --server on one end
# through the net_af_packet preset (whose PMD reports its link up whatever the
# interface's state, so the engine reads the interface's flags). That end
# down: exit 1 with one line saying `ip link set dev ... up`; that end up and
# the other down (no carrier): exit 1 with one line saying to bring the other
# end up; both up: the server runs. Each failure comes after the 2 s the app
# waits for a link. Always removes what it created. Not root: says so and
# skips. Prints TAP.
# Usage: port_link_test.sh PATH/metaroce-perf DRIVERS-CONFIG-DIR
perf="$1"
presets="$2"
if [ "$(id -u)" -ne 0 ]; then
  echo "1..0 # SKIP not root: network namespaces and veths need root (run tools/test as root)"
  exit 0
fi

ns="mr-link-$$"
work=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  tail -15 "$work/out" | sed 's/^/# /'
}

ip netns add "$ns" || exit 1
ip -n "$ns" link add lk0 type veth peer name lk1 || exit 1
for i in lk0 lk1; do ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1"; done
ip -n "$ns" link set lk0 mtu 9000 && ip -n "$ns" link set lk1 mtu 9000 || exit 1

# The server on lk0; its exit status, after at most 20 s.
server() {
  ip netns exec "$ns" "$perf" --server --preset "$presets/net_af_packet.ini" --iface lk0 --local-ip 10.78.0.2 \
    --idle-sleep-us 100 >"$work/out" 2>&1 &
  pid=$!
  local waited=0
  while kill -0 "$pid" 2>/dev/null && [ $waited -lt 200 ]; do sleep 0.1; waited=$((waited + 1)); done
}
finish() {  # exit status of the server started last, its EAL directory removed
  if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; fi
  wait "$pid"
  status=$?
  rm -rf "/var/run/dpdk/metaroce-perf-$pid"
  pid=
}

echo "1..5"
server
finish
check "its interface down: exit 1" "[ $status -eq 1 ]"
check "... with one line that says to bring it up" \
  "grep -Fxq 'metaroce-perf: port '\''net_af_packet0'\'': its interface lk0 is down: run \`ip link set dev lk0 up\` (for a veth, bring up the other end too)' '$work/out' \
   && [ \$(grep -c '^metaroce-perf: ' '$work/out') -eq 1 ]"

ip -n "$ns" link set lk0 up
server
finish
check "its interface up, the veth's other end down (no carrier): exit 1 with one line that says to bring that up" \
  "[ $status -eq 1 ] && grep -Fxq 'metaroce-perf: port '\''net_af_packet0'\'': its interface lk0 is up but has no carrier 2 s after start: bring up the other end (for a veth, \`ip link set dev PEER up\` in the peer'\''s namespace) or check the cable' '$work/out' \
   && [ \$(grep -c '^metaroce-perf: ' '$work/out') -eq 1 ]"

# Both ends up: the server waits for clients until stopped.
ip -n "$ns" link set lk1 up
ip netns exec "$ns" "$perf" --server --preset "$presets/net_af_packet.ini" --iface lk0 --local-ip 10.78.0.2 \
  --idle-sleep-us 100 >"$work/out" 2>&1 &
pid=$!
sleep 4
check "both ends up: the server is still running after 4 s" "kill -0 $pid 2>/dev/null"
finish
check "... and says nothing about its link" "! grep -q 'interface lk0' '$work/out'"
exit $failed
