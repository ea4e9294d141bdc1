#!/bin/sh
# Many connections, as users run them: metaroce-perf --loopback -q 1024 with
# every byte verified and exact counters; -q out of range exits 2 naming the
# range; and 300 connections set up and torn down through the connection
# manager between two processes over net_memif (no root, no NIC, no
# hugepages), counted exactly at both ends. Prints TAP.
# Usage: scale_test.sh PATH/metaroce-perf
perf="$1"
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
  sed 's/^/# /' "$work/out" | tail -20
}

echo "1..7"

# 1024 connections x 20 messages each, write-imm so that both ends complete
# each message; a small PSN window keeps 2048 connection ends in memory.
"$perf" --loopback -q 1024 --op write-imm -s 256 -n 20480 --psn-window 1024 --verify --json "$work/q.json" \
  >"$work/out" 2>&1
status=$?
check "loopback -q 1024 write-imm x 20480 --verify exits 0 with every byte checked" \
  "[ $status -eq 0 ] && grep -Eq '^ 256 +20480 ' '$work/out' \
   && grep -q 'verify: every byte of every message checked, all correct' '$work/out'"
check "exact counters: 20480 data packets sent, 20480 send and 20480 receive completions, none missing or wrong" \
  "jq -e '.ok and .qps == 1024 and .results[0].connections == 1024 and .results[0].iterations == 20480
          and .results[0].missing_messages == 0 and .results[0].wrong_messages == 0
          and .connection_a.data_packets_sent == 20480 and .connection_a.send_completions == 20480
          and .connection_b.receive_completions == 20480 and .retransmitted == 0' '$work/q.json' >/dev/null"

"$perf" --loopback -q 0 >"$work/out" 2>&1
status=$?
check "-q 0 exits 2 naming the range" "[ $status -eq 2 ] && grep -q -- '--qps 0 is out of range: give 1..16384' '$work/out'"
"$perf" --loopback -q 16385 >"$work/out" 2>&1
status=$?
check "-q 16385 exits 2 naming the range" \
  "[ $status -eq 2 ] && grep -q -- '--qps 16385 is out of range: give 1..16384' '$work/out'"

# Two processes over memif: the server is the memif server and starts
# first; one 64 B message per connection, verified, 300 connections.
eal="--lcores 0@(0-1) --no-huge -m 512 --no-shconf --no-pci --log-level=error"
memif="socket=$work/cm.sock,socket-abstract=no,bsize=10240"
# shellcheck disable=SC2086
timeout 60 "$perf" --server --port net_memif0 --local-ip 10.98.0.2 --max-connections 512 --psn-window 1024 \
  --idle-sleep-us 20 --json "$work/server.json" \
  -- $eal --file-prefix "mr-scale-$$-s" --vdev "net_memif0,role=server,$memif,mac=02:00:00:00:00:12" \
  >"$work/server.out" 2>&1 &
server_pid=$!
i=0
while [ ! -S "$work/cm.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
# shellcheck disable=SC2086
timeout 60 "$perf" --client 10.98.0.2 --peer-mac 02:00:00:00:00:12 --port net_memif0 --local-ip 10.98.0.1 \
  -q 300 -s 64 -n 300 --verify --psn-window 1024 --idle-sleep-us 20 --json "$work/client.json" \
  -- $eal --file-prefix "mr-scale-$$-c" --vdev "net_memif0,role=client,$memif,mac=02:00:00:00:00:11" \
  >"$work/out" 2>&1
status=$?
wait "$server_pid"
server_status=$?
server_pid=
check "client -q 300 over memif exits 0, every message verified by the server" \
  "[ $status -eq 0 ] && grep -q 'verify: every byte of every message checked, all correct' '$work/out' \
   && grep -Eq 'connection manager: 300 connections set up in [0-9.]+ s \\([0-9]+ connections/s\\), 300 torn down' '$work/out'"
check "client: exactly 300 connections set up and 300 torn down (cm counters, cm_setup_per_s > 0)" \
  "jq -e '.ok and .cm_connections_set_up == 300 and .cm_connections_torn_down == 300 and .cm_setup_per_s > 0
          and .results[0].cm_setup_per_s > 0 and .cm.established == 300 and .cm.disconnected == 300
          and .cm.timed_out == 0 and .cm.rejects_received == 0' '$work/client.json' >/dev/null"
cp "$work/server.out" "$work/out"
check "server exits 0 after exactly 300 connections established, disconnected and closed, one message each" \
  "[ $server_status -eq 0 ] && jq -e '.ok and .cm.established == 300 and .cm.disconnected == 300
          and .cm.rejects_sent == 0 and (.results | length) == 300 and ([.results[].iterations] | add) == 300
          and ([.results[].missing_messages] | add) == 0 and ([.results[].wrong_messages] | add) == 0' \
          '$work/server.json' >/dev/null"

exit $failed
