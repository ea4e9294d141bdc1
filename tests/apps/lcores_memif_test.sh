#!/bin/bash
# metaroce-gen -> metaroce-sink with --lcores 2 as two processes over one
# net_memif link of 2 queues, on this machine's 2 CPUs with idle sleep.
# Runs: 4 connections x 4 paths, 200 messages each of 32 B..64 KiB, then 6
# connections of 3 runs one after the other (closed and opened again while
# the other lane still carries traffic). Each run, exactly: both exit 0 and
# report ok; every lcore carries 2 connections (3 in the second), its share
# of the messages and data packets; lane k's first transmissions at the gen
# are lane k's packets placed at the sink; per-lcore counters add up to the
# totals; nothing misdirected; the sink's lanes share one receive share
# (their parts of --receive-capacity 4gbit add up to it). Then the option errors: one line, exit 2
# (--lcores 0, more lcores than connections) or 1 (two planes).
# Prints TAP. Usage: lcores_memif_test.sh GEN SINK
GEN="$1" SINK="$2"
if ! command -v jq >/dev/null; then
  echo "1..0 # SKIP 'jq' is missing: run tools/setup (it installs jq)"
  exit 0
fi
WORK=$(mktemp -d)
PREFIX="mr-lcm-$$"
SINK_PID=
cleanup() {
  [ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null
  rm -rf "$WORK" /var/run/dpdk/"$PREFIX"-* "${XDG_RUNTIME_DIR:-/tmp}"/dpdk/"$PREFIX"-* 2>/dev/null
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  for f in gen sink; do [ -f "$WORK/$f.out" ] && tail -6 "$WORK/$f.out" | sed "s|^|# $f: |"; done
}
q() { jq -r "$2" "$WORK/$1.json" 2>/dev/null; }

eal() {  # NAME ROLE MAC
  echo "--lcores 0@(0-1) --no-huge -m 512 --no-shconf --no-pci --log-level=error --file-prefix=$PREFIX-$1" \
       "--vdev net_memif0,role=$2,socket=$WORK/m.sock,socket-abstract=no,bsize=10240,mac=$3"
}

echo "1..21"
run_case() {  # NAME CONNECTIONS RUNS PER_LANE [GEN-ARGS...]
  local name="$1" conns="$2" runs="$3" per_lane="$4"
  shift 4
  rm -f "$WORK"/m.sock "$WORK"/*.json "$WORK"/*.out
  # shellcheck disable=SC2046
  timeout 120 "$SINK" --port net_memif0 --local-ip 10.98.0.2 --lcores 2 --idle-sleep-us 20 --mbufs 4096 \
    --receive-capacity 4gbit --runs "$runs" --json "$WORK/sink.json" -- $(eal sink server 02:00:00:00:00:02) \
    >"$WORK/sink.out" 2>&1 &
  SINK_PID=$!
  local i
  for i in $(seq 100); do [ -S "$WORK/m.sock" ] && break; sleep 0.1; done
  local gen_status=0 r
  for r in $(seq "$runs"); do
    # shellcheck disable=SC2046
    timeout 120 "$GEN" --port net_memif0 --local-ip 10.98.0.1 --sink 10.98.0.2 --peer-mac 02:00:00:00:00:02 \
      --lcores 2 -c "$conns" --paths 4 --size 32-65536 --seed "$r" --idle-sleep-us 20 --mbufs 4096 \
      --json "$WORK/gen.json" "$@" -- $(eal "gen$r" client 02:00:00:00:00:01) >"$WORK/gen.out" 2>&1 || gen_status=$?
  done
  wait "$SINK_PID"
  local sink_status=$?
  SINK_PID=
  local messages=$(( $(q gen '.posted') ))
  echo "# $name: gen $(jq -c .lcores "$WORK/gen.json")"
  echo "# $name: sink $(jq -c .lcores "$WORK/sink.json")"
  check "$name: gen and sink exit 0 and report ok (gen $gen_status, sink $sink_status)" \
    "[ $gen_status = 0 ] && [ $sink_status = 0 ] && [ \"\$(q gen .ok)\" = true ] && [ \"\$(q sink .ok)\" = true ]"
  check "$name: the sink verified $((conns * runs)) connections, all closed, every message of every run" \
    "[ \"\$(q sink .connections_closed)\" = $((conns * runs)) ] && [ \"\$(q sink .wrong)\" = 0 ] \
     && [ \"\$(q sink .missing)\" = 0 ] && [ \"\$(q sink .duplicates)\" = 0 ] \
     && [ \"\$(q sink '.messages == .gen_posted')\" = true ] && [ \"\$(q sink .runs_completed)\" = $runs ]"
  check "$name: 2 lcores each side, $per_lane connections each, every one carrying data" \
    "[ \"\$(q gen '.lcores | length')\" = 2 ] && [ \"\$(q sink '.lcores | length')\" = 2 ] \
     && [ \"\$(q gen '[.lcores[] | select(.connections == ($per_lane / $runs) and .data_packets > 0 and .messages > 0)] | length')\" = 2 ] \
     && [ \"\$(q sink '[.lcores[] | select(.connections == $per_lane and .data_packets > 0 and .messages > 0)] | length')\" = 2 ]"
  check "$name: per-lcore messages and data packets add up to the totals ($messages messages in the last run)" \
    "[ \"\$(q gen '([.lcores[].messages] | add) == .posted')\" = true ] \
     && [ \"\$(q gen '([.lcores[].data_packets] | add) == .connection_counters.data_packets_sent')\" = true ] \
     && [ \"\$(q sink '([.lcores[].messages] | add) == .messages')\" = true ] \
     && [ \"\$(q sink '([.lcores[].data_packets] | add) == .connection_counters.data_packets_received')\" = true ]"
  check "$name: per-lcore frames received add up to the engine's, none misdirected" \
    "[ \"\$(q gen '([.lcores[].rx_frames] | add) == .engine.rx_frames')\" = true ] \
     && [ \"\$(q sink '([.lcores[].rx_frames] | add) == .engine.rx_frames')\" = true ] \
     && [ \"\$(q gen '.engine.rx_misdirected + ([.lcores[].rx_misdirected] | add)')\" = 0 ] \
     && [ \"\$(q sink '.engine.rx_misdirected + ([.lcores[].rx_misdirected] | add)')\" = 0 ]"
}

run_case "4 connections" 4 1 2 -n 200 --cc metaroce
check "4 connections: 800 messages posted, 400 per lcore" \
  "[ \"\$(q gen .posted)\" = 800 ] && [ \"\$(q gen '[.lcores[].messages] == [400, 400]')\" = true ] \
   && [ \"\$(q sink '[.lcores[].messages] == [400, 400]')\" = true ]"
check "4 connections: lane k's first transmissions are lane k's packets placed at the sink" \
  "[ \"\$(jq -s '[.[0].lcores[].data_packets] == [.[1].lcores[].data_packets]' "$WORK/gen.json" "$WORK/sink.json")\" = true ]"
check "4 connections: gen and sink say lane k's frames arrive on queue k" \
  "grep -q '^ lanes: queue pairs: lane k.s frames arrive on queue k\$' '$WORK/gen.out' \
   && grep -q '^ lanes: queue pairs: lane k.s frames arrive on queue k\$' '$WORK/sink.out'"
# One receive share for the port: the lanes' parts of --receive-capacity
# add up to it (each lane giving out the whole would make 8 Gb/s).
check "4 connections: the sink's lanes share one receive share, their parts adding up to 4 Gb/s" \
  "[ \"\$(q sink .receive_share.port_part_bps)\" = 4000000000 ] && [ \"\$(q sink .receive_share.hints)\" -gt 0 ]"
# Gen connection i runs on lane i % 2: its QPN is of that lane's queue.
check "4 connections: connection i's QPN steers to lane i % 2" \
  "[ \"\$(q gen '[.per_connection[] | select((.qpn % 2) == (.connection % 2))] | length')\" = 4 ]"

# Three runs of 6 connections one after the other (a run is 3 connections
# per lcore): each gen closes its connections and the next opens new ones
# on both lanes.
run_case "3 runs"  6 3 9 -n 100
check "3 runs: the last run posted 600 messages, 300 per lcore" \
  "[ \"\$(q gen .posted)\" = 600 ] && [ \"\$(q gen '[.lcores[].messages] == [300, 300]')\" = true ]"
check "3 runs: the sink verified 900 messages on each lcore" \
  "[ \"\$(q sink '[.lcores[].messages] == [900, 900]')\" = true ]"

option_error() {  # NAME STATUS PATTERN ARGS...
  local name="$1" want="$2" pattern="$3"
  shift 3
  local out status
  out=$("$@" 2>&1)
  status=$?
  check "$name: exit $want, one line saying so ($(echo "$out" | head -1))" \
    "[ $status = $want ] && [ \$(echo \"\$out\" | wc -l) -le 2 ] && echo \"\$out\" | grep -q -- \"$pattern\""
}
option_error "--lcores 0" 2 "out of range: give 1..16" \
  "$SINK" --port net_memif0 --local-ip 10.98.0.2 --lcores 0
option_error "--lcores 17" 2 "out of range: give 1..16" \
  "$GEN" --port net_memif0 --local-ip 10.98.0.1 --sink 10.98.0.2 --lcores 17 -c 32
option_error "--lcores 3 -c 2" 2 "lcore 2 would carry no connection; give --connections 3" \
  "$GEN" --port net_memif0 --local-ip 10.98.0.1 --sink 10.98.0.2 --lcores 3 -c 2
# shellcheck disable=SC2046
option_error "--lcores 2 with two planes" 1 "the lcores share one port" \
  "$SINK" --port net_memif0 --port net_memif1 --local-ip 10.98.0.2 --lcores 2 -- \
  --no-huge -m 256 --no-shconf --no-pci --log-level=error --file-prefix="$PREFIX-planes" \
  --vdev "net_memif0,role=server,socket=$WORK/p0.sock,socket-abstract=no" \
  --vdev "net_memif1,role=server,socket=$WORK/p1.sock,socket-abstract=no"
