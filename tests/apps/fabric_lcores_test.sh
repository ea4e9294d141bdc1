#!/bin/bash
# metaroce-fabric --lcores 2 between metaroce-gen --lcores 2 and
# metaroce-sink --lcores 2: three processes joined by net_memif links of 2
# queues (gen_fabric_sink.sh), the fabric's 4 lanes (2 per direction) each
# on an EAL lcore of its own, 8 lcore threads on 2 CPUs with idle sleep.
# 4 connections x 4 paths, 400 messages of 32 B..64 KiB each; a->b with 1%
# loss, 4 fabric paths 20 us apart, 0.1% corruption and a 4 Gb/s queue of
# 1 MB marking ECN above 200 kB; b->a with the loss, paths and corruption.
# Exactly: every process exits 0; the three summaries agree (mr_accounting,
# on the lanes' sums); 2 lanes per direction on 4 distinct lcores, each
# lane's counters keeping the invariant and adding up to its direction's;
# each lane's spec has half the rate, limit and ECN thresholds and a seed
# of its own; lane k of a->b received exactly the frames the gen's lane k
# sent and forwarded exactly those the sink's lane k received, and the same
# the other way (queue k stays queue k through the fabric: a connection, all
# its paths, crosses on one lane, in its paths' order); nothing misdirected.
# Telemetry (/metaroce/fabric) after the run: the sums and a dict per lane.
# Then option errors: one line, exit 2. Prints TAP.
# Usage: fabric_lcores_test.sh GEN SINK FABRIC
MR_GEN="$1" MR_SINK="$2" MR_FABRIC="$3"
MR_TIMEOUT=120
MR_FABRIC_LCORES="(0-3)@(0-1)"
# shellcheck source=gen_fabric_sink.sh
. "$(dirname "$0")/gen_fabric_sink.sh"
mr_tap_test

echo "1..22"
A_TO_B="loss 1% paths 4 spread 20us corrupt 0.1% rate 4gbit limit 1mb ecn 200kb"
B_TO_A="loss 1% paths 4 spread 20us corrupt 0.1%"
if ! mr_start_fabric "$A_TO_B" "$B_TO_A" --stats-interval 0 --lcores 2; then
  not_ok "metaroce-fabric --lcores 2 started and listens on both memif sockets"
  exit 1
fi
mr_start_sink --lcores 2
mr_run_gen --lcores 2 -c 4 --paths 4 --path-window 16 -n 400 --size 32-65536 --seed 7
# The fabric's telemetry once the gen is done: the directions' sums and a
# dict per lane.
sleep 0.3
/usr/bin/python3 -c "
import json, sys
sys.path.insert(0, sys.argv[1])
import telemetry_client
print(json.dumps(telemetry_client.query(sys.argv[2], ['/metaroce/fabric'])[0]['/metaroce/fabric']))" \
  "$(dirname "$0")/../engine" "$MR_PREFIX-fabric" >"$MR_WORK/tel.json" 2>&1
mr_finish
echo "# fabric: $(jq -c '[.a_to_b.lanes[], .b_to_a.lanes[] | {lane, lcore, received, forwarded, dropped: .dropped.total}]' \
  "$MR_WORK/fabric.json" 2>/dev/null)"
echo "# gen: $(jq -c .lcores "$MR_WORK/gen.json" 2>/dev/null)"
echo "# sink: $(jq -c .lcores "$MR_WORK/sink.json" 2>/dev/null)"
check "gen, sink and fabric exit 0 (gen $MR_GEN_STATUS, sink $MR_SINK_STATUS, fabric $MR_FABRIC_STATUS)" \
  "[ $MR_GEN_STATUS = 0 ] && [ $MR_SINK_STATUS = 0 ] && [ $MR_FABRIC_STATUS = 0 ]"
check "gen and sink report ok, 1600 messages of 4 connections, all closed" \
  "[ \"\$(q gen .ok)\" = true ] && [ \"\$(q sink .ok)\" = true ] && [ \"\$(q gen .posted)\" = 1600 ] \
   && [ \"\$(q sink .connections_closed)\" = 4 ]"
while IFS= read -r line; do
  case "$line" in
    "ok - "*) ok "${line#ok - }" ;;
    *) not_ok "${line#not ok - }" ;;
  esac
done < <(mr_accounting)

check "the fabric ran 2 lanes per direction on 4 lcores, each lane on its own" \
  "[ \"\$(q fabric .lanes)\" = 2 ] && [ \"\$(q fabric .lcores)\" = 4 ] \
   && [ \"\$(q fabric '[.a_to_b.lanes[].lane] == [0, 1] and [.b_to_a.lanes[].lane] == [0, 1]')\" = true ] \
   && [ \"\$(q fabric '[.a_to_b.lanes[].lcore, .b_to_a.lanes[].lcore] | unique | length')\" = 4 ]"
check "every lane received frames and dropped some (1% loss)" \
  "[ \"\$(q fabric '[.a_to_b.lanes[], .b_to_a.lanes[] | select(.received > 0 and .dropped.random_loss > 0)] | length')\" = 4 ]"
check "each lane keeps received + duplicated == forwarded + dropped + in flight, none in flight" \
  "[ \"\$(q fabric '[.a_to_b.lanes[], .b_to_a.lanes[] | select(.received + .duplicated == .forwarded + .dropped.total + .in_flight and .in_flight == 0)] | length')\" = 4 ]"
# Every counter of a direction is the sum of its lanes' (rx_missed is the
# port's, on lane 0).
SUMS='def sums($d): [$d | to_entries[] | select(.value | type == "number") | .key] as $k
  | ($k | length) == 15 and all($k[]; . as $c | $d[$c] == ([$d.lanes[][$c]] | add))
  and ($d.dropped | keys | length) == 6
  and ($d.dropped | keys | all(. as $c | $d.dropped[$c] == ([$d.lanes[].dropped[$c]] | add)));
  sums(.a_to_b) and sums(.b_to_a)'
check "every counter of each direction is its lanes' sum" "[ \"\$(q fabric \"\$SUMS\")\" = true ]"
check "each lane's spec: half the rate, limit and ECN thresholds; lane 1 with a seed of its own" \
  "[ \"\$(q fabric '.a_to_b.lanes[0].spec')\" = 'paths 4 delay 0ns spread 20us rate 2gbit limit 500000 ecn 100000 loss 1% corrupt 0.1%' ] \
   && q fabric '.a_to_b.lanes[1].spec' | grep -q 'rate 2gbit limit 500000 ecn 100000 loss 1% corrupt 0.1% seed ' \
   && [ \"\$(q fabric '.a_to_b.spec')\" = 'paths 4 delay 0ns spread 20us rate 4gbit limit 1000000 ecn 200000 loss 1% corrupt 0.1%' ] \
   && [ \"\$(q fabric '.b_to_a.lanes[0].spec')\" = \"\$(q fabric '.b_to_a.spec')\" ]"
check "a->b lane k received what the gen's lane k sent, forwarded what the sink's lane k received" \
  "[ \"\$(jq -s '[.[0].a_to_b.lanes[].received] == [.[1].lcores[].tx_frames] and [.[0].a_to_b.lanes[].forwarded] == [.[2].lcores[].rx_frames]' \
     \"$MR_WORK/fabric.json\" \"$MR_WORK/gen.json\" \"$MR_WORK/sink.json\")\" = true ]"
check "b->a lane k received what the sink's lane k sent, forwarded what the gen's lane k received" \
  "[ \"\$(jq -s '[.[0].b_to_a.lanes[].received] == [.[2].lcores[].tx_frames] and [.[0].b_to_a.lanes[].forwarded] == [.[1].lcores[].rx_frames]' \
     \"$MR_WORK/fabric.json\" \"$MR_WORK/gen.json\" \"$MR_WORK/sink.json\")\" = true ]"
check "2 connections and 800 messages on each lane of gen and sink, nothing misdirected" \
  "[ \"\$(q gen '[.lcores[] | select(.connections == 2 and .messages == 800)] | length')\" = 2 ] \
   && [ \"\$(q sink '[.lcores[] | select(.connections == 2 and .messages == 800)] | length')\" = 2 ] \
   && [ \"\$(q gen '.engine.rx_misdirected')\" = 0 ] && [ \"\$(q sink '.engine.rx_misdirected')\" = 0 ]"
check "telemetry: 2 lanes, each direction's received as in the summary, a dict per lane with its lcore" \
  "[ \"\$(jq -s '.[0] as \$t | .[1] as \$f | \$t.lanes == 2
       and \$t.a_to_b.received == \$f.a_to_b.received and \$t.b_to_a.received == \$f.b_to_a.received
       and [\$t.a_to_b_lane0.received, \$t.a_to_b_lane1.received] == [\$f.a_to_b.lanes[].received]
       and [\$t.b_to_a_lane0.lcore, \$t.b_to_a_lane1.lcore] == [\$f.b_to_a.lanes[].lcore]
       and \$t.a_to_b_lane1.spec == \$f.a_to_b.lanes[1].spec' \"$MR_WORK/tel.json\" \"$MR_WORK/fabric.json\")\" = true ]"

option_error() {  # NAME PATTERN ARGS...
  local name="$1" pattern="$2"
  shift 2
  local out status
  out=$("$MR_FABRIC" "$@" 2>&1)
  status=$?
  check "$name: exit 2, one line saying so ($(echo "$out" | head -1))" \
    "[ $status = 2 ] && [ \$(echo \"\$out\" | wc -l) -le 2 ] && echo \"\$out\" | grep -q -- \"$pattern\""
}
option_error "--lcores 0" "--lcores 0 is out of range: give 1..16" --port-a x --port-b y --lcores 0
option_error "--lcores 17" "--lcores 17 is out of range: give 1..16" --port-a x --port-b y --lcores 17
option_error "--lcores 2 --ports 2" "--lcores is for the two-port form" \
  --ports 2 --port x --port y --route 10.0.0.1=0 --lcores 2
