#!/bin/bash
# Incast through metaroce-fabric's switch form, as users run it: 3
# metaroce-gen processes (2 connections each) -> metaroce-fabric --ports 4
# -> one metaroce-sink, over net_memif (switch_incast.sh). The sink's port
# is the bottleneck: 2 Gb/s, a 400 kB queue marking ECN from 40 kB, 20 us
# of delay on every output port. Two runs:
#   metaroce  --cc metaroce, --receive-capacity 2gbit at the sink;
#   fixed     --cc fixed: no receive share takes part.
# Each: every process exits 0; per switch port, what came in is what was
# routed, and what was routed to a port is what it forwarded or dropped
# (nothing in flight at the end); each end received exactly what its port
# forwarded and sent exactly what its port received; the sink verified
# every byte of every message, once. The receive share: sized as given,
# one hint per ACK the sink sent with metaroce, none with fixed. Then the
# switch's telemetry (a key per port, its own spec) and its option
# errors: one line, exit 2.
# Prints TAP. Usage: switch_incast_test.sh GEN SINK FABRIC
MR_GEN="$1" MR_SINK="$2" MR_FABRIC="$3"
if ! command -v jq >/dev/null; then
  echo "1..0 # SKIP 'jq' is missing: run tools/setup (it installs jq)"
  exit 0
fi
MR_WORK=$(mktemp -d)
MR_TIMEOUT=120
# shellcheck source=switch_incast.sh
. "$(dirname "$0")/switch_incast.sh"
cleanup() {
  local p
  for p in "${MR_GEN_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  mr_cleanup
  rm -rf "$MR_WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  for f in "$MR_WORK"/*.out; do [ -f "$f" ] && tail -5 "$f" | sed "s|^|# $(basename "$f" .out): |"; done
}
q() { mr_q "$@"; }

GENS=3
OUT0="delay 20us rate 2gbit limit 400kb ecn 40kb"
echo "1..23"
run_case() {  # NAME CC [SINK-ARGS...]
  local name="$1" cc="$2" i
  shift 2
  if ! mr_incast_start $GENS "$OUT0" --out "delay 20us" --stats-interval 0; then
    not_ok "$name: metaroce-fabric --ports $((GENS + 1)) started and listens on every memif socket"
    return 1
  fi
  mr_incast_sink --runs $GENS "$@"
  for i in $(seq 1 $GENS); do mr_incast_gen "$i" -c 2 --paths 4 --cc "$cc" -n 60 --size 65536 --seed "$i"; done
  mr_incast_finish
  check "$name: the gens, sink and switch exit 0 (gens ${MR_GEN_STATUSES[*]}, sink $MR_SINK_STATUS, switch $MR_FABRIC_STATUS)" \
    "[ '${MR_GEN_STATUSES[*]}' = '0 0 0' ] && [ $MR_SINK_STATUS = 0 ] && [ $MR_FABRIC_STATUS = 0 ]"
  local bad
  bad=$(q fabric '[.port[] | select(.out.received + .out.duplicated != .out.forwarded + .out.dropped.total
    + .out.in_flight or .out.in_flight != 0 or .in.rx_missed != 0) | .index] | tostring')
  check "$name: every port forwarded or dropped what was routed to it, none in flight or missed (bad: $bad)" \
    "[ '$bad' = '[]' ]"
  check "$name: every frame received was routed (in == out summed over ports, no route for none)" \
    "[ \"\$(q fabric '[.port[].in.received] | add')\" = \"\$(q fabric '[.port[].out.received] | add')\" ] \
     && [ \"\$(q fabric '[.port[].in.dropped_no_route] | add')\" = 0 ]"
  check "$name: the sink received what port 0 forwarded and sent what it received" \
    "[ \"\$(q sink .engine.rx_frames)\" = \"\$(q fabric '.port[0].out.forwarded')\" ] \
     && [ \"\$(q sink .engine.tx_frames)\" = \"\$(q fabric '.port[0].in.received')\" ]"
  local ends_ok=1
  for i in $(seq 1 $GENS); do
    [ "$(q "gen$i" .engine.tx_frames)" = "$(q fabric ".port[$i].in.received")" ] || ends_ok=0
    [ "$(q "gen$i" .engine.rx_frames)" = "$(q fabric ".port[$i].out.forwarded")" ] || ends_ok=0
  done
  check "$name: each gen sent what its port received and received what its port forwarded" "[ $ends_ok = 1 ]"
  local posted=0 bytes=0
  for i in $(seq 1 $GENS); do
    posted=$((posted + $(q "gen$i" .posted))) bytes=$((bytes + $(q "gen$i" .bytes)))
  done
  check "$name: the sink verified all $posted messages ($bytes bytes) of the $GENS gens, every byte, once" \
    "[ $posted = $((GENS * 2 * 60)) ] && [ \"\$(q sink .messages)\" = $posted ] && [ \"\$(q sink .bytes)\" = $bytes ] \
     && [ \"\$(q sink .wrong_bytes)\" = 0 ] && [ \"\$(q sink .missing)\" = 0 ] && [ \"\$(q sink .duplicates)\" = 0 ] \
     && [ \"\$(q sink .connections_closed)\" = $((GENS * 2)) ]"
  check "$name: port 0's queue saw every frame routed to it (p99 $(q fabric '.port[0].queue_bytes.p99') B, max $(q fabric '.port[0].queue_bytes.max') B)" \
    "[ \"\$(q fabric '.port[0].queue_bytes.samples')\" = \"\$(q fabric '.port[0].out.received')\" ] \
     && [ \"\$(q fabric '.port[0].queue_bytes.max')\" -le 400000 ]"
  echo "# $name: port 0 dropped $(q fabric '.port[0].out.dropped.queue_full') (queue full), marked $(q fabric '.port[0].out.ecn_marked');" \
       "receive share $(q sink '.receive_share | tostring')"
}

run_case metaroce metaroce --receive-capacity 2gbit
check "metaroce: the sink's receive share has the capacity given" "[ \"\$(q sink .receive_share.capacity_mbps)\" = 2000 ]"
check "metaroce: one hint per ACK the sink sent, from several senders at once" \
  "[ \"\$(q sink .receive_share.hints)\" = \"\$(q sink .connection_counters.acks_sent)\" ] \
   && [ \"\$(q sink .receive_share.hints)\" -gt 0 ] && [ \"\$(q sink .receive_share.max_active_senders)\" -ge 2 ]"

run_case fixed fixed
check "fixed: no connection follows the hint, so the share gave none" \
  "[ \"\$(q sink .receive_share.hints)\" = 0 ] && [ \"\$(q sink .receive_share.arrivals)\" = 0 ]"

# Telemetry of the switch form: a port per key, with its output spec.
# shellcheck disable=SC2046
"$MR_FABRIC" --ports 3 --port net_memif0 --port net_memif1 --port net_memif2 --route 10.0.0.1=0 \
  --out-port "1=rate 1gbit" --duration 3 --stats-interval 0 --idle-sleep-us 100 -- $(mr_eal tel) \
  $(mr_memif net_memif0 server t0.sock) $(mr_memif net_memif1 server t1.sock) $(mr_memif net_memif2 server t2.sock) \
  >"$MR_WORK/tel.out" 2>&1 &
MR_FABRIC_PID=$!
sleep 1.5
python3 -c "
import json, sys
sys.path.insert(0, sys.argv[1])
import telemetry_client
print(json.dumps(telemetry_client.query(sys.argv[2], ['/metaroce/fabric'])[0]['/metaroce/fabric']))" \
  "$(dirname "$0")/../engine" "$MR_PREFIX-tel" >"$MR_WORK/tel.json" 2>&1
wait "$MR_FABRIC_PID"
MR_FABRIC_PID=
mr_remove_runtime_dirs
tel=$(q tel '[.ports, .port0.name, .port1.spec, .port2.in_received] | map(tostring) | join(" ")')
check "switch telemetry: /metaroce/fabric has 3 ports, port 1 with its own rate ($tel)" \
  "[ '$tel' = '3 net_memif0 paths 1 delay 0ns rate 1gbit 0' ]"

# Option errors of the switch form: one line, exit 2, before EAL.
err() {  # WHAT EXPECTED-SUBSTRING ARGS...
  local what="$1" expected="$2" out status
  shift 2
  out=$("$MR_FABRIC" "$@" 2>&1)
  status=$?
  check "switch options: $what (exit 2, '$expected')" "[ $status = 2 ] && grep -qF -- \"$expected\" <<<\"\$out\""
}
err "--ports 1" "--ports 1 is out of range: give 2..64" --ports 1 --port a --route 10.0.0.1=0
err "fewer --port than --ports" "--ports 3 needs 3 --port NAME" --ports 3 --port a --port b --route 10.0.0.1=0
err "a route to a port the switch lacks" "port '2' is not one of this switch's: give 0..1" \
  --ports 2 --port a --port b --route 10.0.0.1=2
err "no route" "no routes" --ports 2 --port a --port b
err "--port-a with --ports" "--port-a is for the two-port form" --ports 2 --port a --port b --route 10.0.0.1=0 --port-a x
