#!/bin/sh
# metaroce-perf --server / --client with READ and the atomics, two processes
# over net_memif (no root, no NIC, no hugepages), in both modes: the server
# offers its region through the connection's private data, the client's
# --verify checks every byte read and every value returned, and the server
# checks at the end that its atomics' 8-byte slots hold exactly what the
# client's completed messages made of them (each executed once). Exact
# counts at both ends. Prints TAP.
# Usage: perf_remote_ops_test.sh PATH/metaroce-perf
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

echo "1..12"

eal="--lcores 0@(0-1) --no-huge -m 512 --no-shconf --no-pci --log-level=error"
run=0
# run MODE OP N SIZE QPS COUNTER: one server, one client; two checks.
run() {
  mode=$1 op=$2 count=$3 size=$4 qps=$5 counter=$6
  run=$((run + 1))
  memif="socket=$work/cm$run.sock,socket-abstract=no,bsize=10240"
  # shellcheck disable=SC2086
  timeout 60 "$perf" --server --port net_memif0 --local-ip 10.97.0.2 --idle-sleep-us 20 --json "$work/server.json" \
    -- $eal --file-prefix "mr-ops-$$-s$run" --vdev "net_memif0,role=server,$memif,mac=02:00:00:00:00:22" \
    >"$work/server.out" 2>&1 &
  server_pid=$!
  i=0
  while [ ! -S "$work/cm$run.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  # shellcheck disable=SC2086
  timeout 60 "$perf" --client 10.97.0.2 --peer-mac 02:00:00:00:00:22 --port net_memif0 --local-ip 10.97.0.1 \
    --mode "$mode" --op "$op" -s "$size" -n "$count" -q "$qps" --verify --idle-sleep-us 20 --json "$work/client.json" \
    -- $eal --file-prefix "mr-ops-$$-c$run" --vdev "net_memif0,role=client,$memif,mac=02:00:00:00:00:21" \
    >"$work/out" 2>&1
  status=$?
  wait "$server_pid"
  server_status=$?
  server_pid=
  check "$mode $op -s $size -n $count -q $qps: the client exits 0, every one of its $count answers checked and right" \
    "[ $status -eq 0 ] && grep -q 'verify: every .* checked, all correct' '$work/out' \
     && jq -e '.ok and .results[0].iterations == $count and .results[0].missing_messages == 0
               and .results[0].wrong_messages == 0 and .connection_a.read_response_unexpected == 0
               and .connection_a.read_response_mismatch == 0' '$work/client.json' >/dev/null"
  cp "$work/server.out" "$work/out"
  check "$mode $op: the server exits 0 with $counter == $count exactly, its memory as expected, no refusal" \
    "[ $server_status -eq 0 ] && jq -e '.ok and .connection_b.$counter == $count
               and ([.results[].iterations] | add) == $count and ([.results[].wrong_messages] | add) == 0
               and .connection_b.read_access_errors == 0 and .connection_b.atomic_access_errors == 0
               and .connection_b.read_requests_over_limit == 0' '$work/server.json' >/dev/null"
}

for mode in metaroce rocev2; do
  run "$mode" read 600 65536 1 read_requests_served
  run "$mode" fetch-add 3000 8 2 atomics_executed
  run "$mode" cmp-swap 3000 8 1 atomics_executed
done
exit $failed
