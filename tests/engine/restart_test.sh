#!/bin/bash
# A client process killed mid-transfer and started again: the server (on a
# net_af_packet port in another network namespace) keeps serving, the new
# client's connection manager draws a new nonce, QPN and PSN, and the new
# transfer completes with every byte verified by the server, untouched by
# the dead incarnation. Then -q 4: four connections from one client to one
# server at once, in each mode, every message verified and counted exactly;
# and a server that allows fewer (--max-connections 2), which the client
# reports naming the fix; and one that allows a connection less memory
# than the client asks (--max-connection-memory), refused the same way. Root only (skips else); always cleans up. TAP.
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
started=""  # pids of the metaroce-perf processes (`ip netns exec` execs: $! is the program's pid)
cleanup() {
  for pid in $server_pid $client_pid; do kill -9 "$pid" 2>/dev/null; done
  for ns in "$ns_c" "$ns_s"; do ip netns del "$ns" 2>/dev/null; done
  # EAL leaves its runtime directory behind under --no-shconf (the preset's
  # default without hugepages); the remote apps' prefix is metaroce-perf-<pid>.
  for pid in $started; do rm -rf "/var/run/dpdk/metaroce-perf-$pid"; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  for f in "$work"/*.out; do [ -f "$f" ] && tail -12 "$f" | sed "s|^|# $(basename "$f"): |"; done
}
# SECONDS OUT COMMAND...: runs it, killed after SECONDS; its exit status in $status.
run_bounded() {
  local seconds="$1" out="$2"; shift 2
  "$@" >"$out" 2>&1 &
  client_pid=$!
  started="$started $client_pid"
  timeout "$seconds" tail --pid="$client_pid" -f /dev/null || kill -9 "$client_pid" 2>/dev/null
  wait "$client_pid"
  status=$?
  client_pid=
}

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

echo "1..13"
ip netns exec "$ns_s" "$perf" --server --iface s0 --local-ip 10.78.0.2 "${common[@]}" >"$work/server.out" 2>&1 &
server_pid=$!
started="$started $server_pid"
sleep 1
ip netns exec "$ns_c" "$perf" "${client[@]}" "${common[@]}" -D 30 >"$work/first.out" 2>&1 &
client_pid=$!
started="$started $client_pid"
for _ in $(seq 50); do grep -q '^\[' "$work/first.out" 2>/dev/null && break; sleep 0.2; done
check "the first client is transferring (a progress line)" "grep -q '^\\[' '$work/first.out'"
kill -9 "$client_pid"
wait "$client_pid" 2>/dev/null
client_pid=
run_bounded 120 "$work/second.out" ip netns exec "$ns_c" "$perf" "${client[@]}" "${common[@]}" -n 3000 \
  --json "$work/second.json"
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
check "the new connection's 3000 messages were all checked and right (the server's header says it checks as each client asks)" \
  "grep -q 'closed: 3000 messages checked, 0 wrong' '$work/server.out' && grep -q '^ Verify *: as each client asks' '$work/server.out'"

# -q 4: one server, one client with four connections; messages go round-robin
# (message m to connection m % 4, as its message m / 4), -n counts them all.
start_server() {  # NAME server-args...
  local name="$1"; shift
  ip netns exec "$ns_s" "$perf" --server --iface s0 --local-ip 10.78.0.2 "${common[@]}" "$@" \
    >"$work/$name-server.out" 2>&1 &
  server_pid=$!
  started="$started $server_pid"
  sleep 1
}
stop_server() {  # waits up to 10 s for the server to exit by itself; sets server_status
  timeout 10 tail --pid="$server_pid" -f /dev/null
  kill -9 "$server_pid" 2>/dev/null
  wait "$server_pid"
  server_status=$?
  server_pid=
}
client_q=(--client 10.78.0.2 --peer-mac "$mac_s0" --iface c0 --local-ip 10.78.0.1 --cm-timeout 10 -q 4 -s 65536
          --op write-imm --verify)
for mode in metaroce rocev2; do
  start_server "q4-$mode" --json "$work/q4-$mode-server.json"
  run_bounded 120 "$work/q4-$mode-client.out" ip netns exec "$ns_c" "$perf" "${client_q[@]}" "${common[@]}" \
    --mode "$mode" -n 2000 --json "$work/q4-$mode.json"
  stop_server
  check "$mode -q 4 --verify: client exits 0; its --json counts exactly 2000 messages, 2000 x 65536 bytes, 2000 completions" \
    "[ $status -eq 0 ] && jq -e '.ok == true and .results[0].iterations == 2000 and .results[0].missing_messages == 0
       and .connection_a.send_completions == 2000 and .connection_a.data_bytes_sent == 2000 * 65536' \
       '$work/q4-$mode.json' >/dev/null"
  check "$mode -q 4: the server saw 4 connections (distinct QPNs), checked 500 messages on each, exits 0" \
    "[ $server_status -eq 0 ] && [ \$(grep -c 'from QP 0x[0-9a-f]* (connection [1-4] of 4)' '$work/q4-$mode-server.out') -eq 4 ] \
     && [ \$(grep -o 'from QP 0x[0-9a-f]*' '$work/q4-$mode-server.out' | sort -u | wc -l) -eq 4 ] \
     && [ \$(grep -c 'of 4) closed: 500 messages checked, 0 wrong' '$work/q4-$mode-server.out') -eq 4 ] \
     && jq -e '[.results[].iterations] == [500, 500, 500, 500] and .connection_b.receive_completions == 2000
       and .connection_b.data_bytes_placed == 2000 * 65536' '$work/q4-$mode-server.json' >/dev/null"
done

# More connections than the server allows: it accepts two, refuses the rest;
# the client fails naming the fix and closes the two (its last DREQ lets the
# server exit).
start_server limit --max-connections 2
run_bounded 60 "$work/limit-client.out" ip netns exec "$ns_c" "$perf" "${client_q[@]}" "${common[@]}" -n 100
stop_server
check "-q 4 against --max-connections 2: the client exits 1 with one line naming the connection, the reason and the fix" \
  "[ $status -eq 1 ] && grep -q \"^metaroce-perf: connection [34] of 4 (-q 4) for 65536 B messages: 10.78.0.2 refused the connection: the server takes no more connections: lower -q 4, or raise the server's --max-connections\$\" '$work/limit-client.out'"
check "... the server refused two with a line naming --max-connections, closed the two it took, exits 0" \
  "[ $server_status -eq 0 ] && [ \$(grep -c 'the most --max-connections allows (2): raise it, or lower the client' '$work/limit-server.out') -eq 2 ] \
   && [ \$(grep -c 'closed: 0 messages checked, 0 wrong' '$work/limit-server.out') -eq 2 ]"
# A request for more memory than the server allows one connection: refused
# before anything is allocated, counted, and the client says which option.
start_server memory --max-connection-memory 65536 --json "$work/memory-server.json"
run_bounded 60 "$work/memory-client.out" ip netns exec "$ns_c" "$perf" --client 10.78.0.2 --peer-mac "$mac_s0" \
  --iface c0 --local-ip 10.78.0.1 --cm-timeout 10 -s 1048576 --op write-imm -n 10 "${common[@]}"
kill "$server_pid" 2>/dev/null
stop_server
check "1 MiB messages against --max-connection-memory 65536: the client exits 1 naming the option" \
  "[ $status -eq 1 ] && grep -q 'refused the connection: the connection would need more memory than the server allows (its --max-connection-memory)' '$work/memory-client.out'"
check "... the server says why, counts it (memory_refusals 1) and accepted nothing" \
  "grep -q 'more than --max-connection-memory (65536) allows' '$work/memory-server.out' \
   && grep -q '\"memory_refusals\":1' '$work/memory-server.json' && ! grep -q 'closed:' '$work/memory-server.out'"
exit $failed
