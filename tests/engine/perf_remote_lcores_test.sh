#!/bin/sh
# metaroce-perf --server and --client with --lcores 2 as two processes over
# one net_memif link of 2 queues, on this machine's 2 CPUs with idle sleep.
# Each lcore drives queue k of the port with its own host and connection
# manager, and carries its share of -q and -n. Runs: -q 8 of 64 KiB WRITEs,
# -n 4000, then -q 5 of 4 KiB, -n 1001 (uneven shares). Exactly: both ends
# exit 0, every byte verified; each side has 2 lcores with the connections
# and messages of their share; per-lcore data packets and frames received
# add up to the totals; nothing misdirected. Then a client of one lane
# against the server's two: refused with the fix (REJ wrong_queue). Then
# the option errors: one line, exit 2. Prints TAP. Usage: perf_remote_lcores_test.sh PATH/metaroce-perf
perf="$1"
if ! command -v jq >/dev/null; then
  echo "1..0 # SKIP 'jq' is missing: run tools/setup (it installs jq)"
  exit 0
fi
work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  for f in client server; do [ -f "$work/$f.out" ] && tail -8 "$work/$f.out" | sed "s|^|# $f: |"; done
}
q() { jq -r "$2" "$work/$1.json" 2>/dev/null; }

echo "1..11"

eal="--lcores 0@(0-1) --no-huge -m 512 --no-shconf --no-pci --log-level=error"
run=0
# run QPS SIZE N: one server and one client, --lcores 2 each.
run() {
  qps=$1 size=$2 count=$3
  run=$((run + 1))
  rm -f "$work"/*.json
  memif="socket=$work/m$run.sock,socket-abstract=no,bsize=10240"
  # shellcheck disable=SC2086
  timeout 60 "$perf" --server --port net_memif0 --local-ip 10.97.0.2 --lcores 2 --idle-sleep-us 20 \
    --json "$work/server.json" -- $eal --file-prefix "mr-plc-$$-s$run" \
    --vdev "net_memif0,role=server,$memif,mac=02:00:00:00:00:22" >"$work/server.out" 2>&1 &
  server_pid=$!
  i=0
  while [ ! -S "$work/m$run.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  # shellcheck disable=SC2086
  timeout 60 "$perf" --client 10.97.0.2 --peer-mac 02:00:00:00:00:22 --port net_memif0 --local-ip 10.97.0.1 \
    --lcores 2 -q "$qps" -s "$size" -n "$count" --verify --idle-sleep-us 20 --json "$work/client.json" \
    -- $eal --file-prefix "mr-plc-$$-c$run" --vdev "net_memif0,role=client,$memif,mac=02:00:00:00:00:21" \
    >"$work/client.out" 2>&1
  client_status=$?
  wait "$server_pid"
  server_status=$?
  server_pid=
  echo "# -q $qps -s $size: client $(jq -c '[.lcores[] | [.connections, .messages, .data_packets]]' "$work/client.json")"
  echo "# -q $qps -s $size: server $(jq -c '[.lcores[] | [.connections, .messages, .data_packets]]' "$work/server.json")"
}

# Each side's lcores: the per-lcore data packets and frames received add up
# to the totals, and nothing was misdirected.
sums() {  # NAME
  check "$1: per-lcore data packets and frames received add up to the totals, at both ends; none misdirected" \
    "[ \"\$(q client '([.lcores[].data_packets] | add)
                     == .connection_a.data_packets_sent + .connection_a.retransmitted_packets')\" = true ] \
     && [ \"\$(q client '([.lcores[].rx_frames] | add) == .host_a.rx_frames')\" = true ] \
     && [ \"\$(q server '([.lcores[].data_packets] | add) == .connection_b.data_packets_received')\" = true ] \
     && [ \"\$(q server '([.lcores[].rx_frames] | add) == .host_b.rx_frames')\" = true ] \
     && [ \"\$(q client '.host_a.rx_misdirected + ([.lcores[].rx_misdirected] | add)')\" = 0 ] \
     && [ \"\$(q server '.host_b.rx_misdirected + ([.lcores[].rx_misdirected] | add)')\" = 0 ]"
}

run 8 65536 4000
check "-q 8: both ends exit 0 (client $client_status, server $server_status), every byte of 4000 messages verified" \
  "[ $client_status = 0 ] && [ $server_status = 0 ] && grep -q 'verify: every byte of every message checked' \
   '$work/client.out' && [ \"\$(q client '.ok and .results[0].iterations == 4000 and .results[0].missing_messages == 0
                                          and .results[0].wrong_messages == 0')\" = true ] \
   && [ \"\$(q server '.ok')\" = true ]"
check "-q 8: the client's 2 lcores carry 4 connections and 2000 messages each, every one sending data" \
  "[ \"\$(q client '[.lcores[] | [.side, .lcore, .connections, .messages]] == [[\"sender\", 0, 4, 2000], [\"sender\", 1, 4, 2000]]
                   and ([.lcores[] | select(.data_packets > 0)] | length) == 2')\" = true ]"
check "-q 8: the server's 2 lcores took 4 connections each, every one placing data" \
  "[ \"\$(q server '[.lcores[] | [.side, .lcore, .connections]] == [[\"receiver\", 0, 4], [\"receiver\", 1, 4]]
                   and ([.lcores[] | select(.data_packets > 0)] | length) == 2 and (.results | length) == 8')\" = true ]"
sums "-q 8"

run 5 4096 1001
check "-q 5: both ends exit 0 (client $client_status, server $server_status), every byte of 1001 messages verified" \
  "[ $client_status = 0 ] && [ $server_status = 0 ] && [ \"\$(q client '.ok and .results[0].iterations == 1001')\" = true ]"
check "-q 5 -n 1001: lcore 0 carries 3 connections and 501 messages, lcore 1 2 and 500" \
  "[ \"\$(q client '[.lcores[] | [.connections, .messages]] == [[3, 501], [2, 500]]')\" = true ] \
   && [ \"\$(q server '[.lcores[].connections] == [3, 2]')\" = true ]"
sums "-q 5"

# A client of one lane against a server of two: its requests for QPNs of
# queue 1 reach the server's lane 0 (memif pairs queue 0 with queue 0),
# which refuses them (REJ wrong_queue) with the fix. The server, which may
# have served none of the client's connections before it gave up, is
# stopped by SIGTERM. -q 32: one of them is of queue 1 unless all 32 random
# QPNs are even.
memif="socket=$work/mm.sock,socket-abstract=no,bsize=10240"
# shellcheck disable=SC2086
timeout 60 "$perf" --server --port net_memif0 --local-ip 10.97.0.2 --lcores 2 --idle-sleep-us 20 \
  --json "$work/server.json" -- $eal --file-prefix "mr-plc-$$-sm" \
  --vdev "net_memif0,role=server,$memif,mac=02:00:00:00:00:22" >"$work/server.out" 2>&1 &
server_pid=$!
i=0
while [ ! -S "$work/mm.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
# shellcheck disable=SC2086
timeout 60 "$perf" --client 10.97.0.2 --peer-mac 02:00:00:00:00:22 --port net_memif0 --local-ip 10.97.0.1 \
  -q 32 -s 4096 -n 100 --idle-sleep-us 20 -- $eal --file-prefix "mr-plc-$$-cm" \
  --vdev "net_memif0,role=client,$memif,mac=02:00:00:00:00:21" >"$work/client.out" 2>&1
client_status=$?
i=0
while kill -0 "$server_pid" 2>/dev/null && [ $i -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
kill -TERM "$server_pid" 2>/dev/null
wait "$server_pid"
server_pid=
check "1 lane against 2: the client exits 1 naming the fix, the server refused with wrong_queue" \
  "[ $client_status = 1 ] \
   && grep -q 'its QPN does not steer to: give both ends the same --lcores' '$work/client.out' \
   && [ \"\$(q server '.cm.wrong_queue_refusals')\" -ge 1 ]"

option_error() {  # NAME PATTERN ARGS...
  name="$1" pattern="$2"
  shift 2
  out=$("$perf" "$@" 2>&1)
  status=$?
  check "$name: exit 2, one line saying so ($(echo "$out" | head -1))" \
    "[ $status = 2 ] && echo \"\$out\" | head -1 | grep -q -- \"$pattern\""
}
option_error "--lcores 2 --test lat" "drop --test lat (one connection's round trips), or --lcores" \
  --client 10.97.0.2 --port net_memif0 --local-ip 10.97.0.1 --lcores 2 -q 2 --test lat
option_error "--lcores 3 -q 2" "every lcore needs a connection: give -q 3 or more" \
  --client 10.97.0.2 --port net_memif0 --local-ip 10.97.0.1 --lcores 3 -q 2
option_error "--lcores 17" "out of range" \
  --server --port net_memif0 --local-ip 10.97.0.2 --lcores 17
