#!/bin/sh
# metaroce-perf --loopback --planes with an inline fabric per plane, as a
# user runs it: one plane blackholed for a second mid-transfer (the run
# still exits 0 with every byte verified, the plane failed and came back,
# only its fabric dropped frames), a lossy fabric on every plane, a capture
# of both planes, and the option errors. Prints TAP.
# Usage: perf_planes_test.sh PATH/metaroce-perf PATH/metaroce-decode
perf="$1"
decode="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  sed 's/^/# /' "$work/out" | tail -25
}

echo "1..13"
# The acceptance run: plane 1 drops everything, both ways, from 500 ms for 1 s.
"$perf" --loopback --planes 2 --fabric-plane 1 "blackhole at 500ms for 1s" -s 262144 -D 3 --verify \
  --json "$work/hole.json" >"$work/out" 2>&1
status=$?
check "--planes 2 --fabric-plane 1 'blackhole at 500ms for 1s' -s 262144 -D 3 --verify exits 0" \
  "[ $status -eq 0 ] && grep -q 'verify: every byte of every message checked, all correct' '$work/out'"
check "the JSON shows both planes with data packets, nothing wrong or missing" \
  "jq -e '.ok and (.planes | length) == 2 and all(.planes[]; .data_packets > 0)
     and .results[0].wrong_messages == 0 and .results[0].missing_messages == 0
     and .results[0].iterations > 0' '$work/hole.json' >/dev/null"
# (A scheduling stall of both lcores on this shared machine can time out
# every path at once and fail a plane for a few ms, either plane: counted,
# recovered, so the counts are checked against each other, not against 1.)
check "plane 1 failed and both planes are in use at the end: every failure recovered, packets moved" \
  "jq -e '.planes[1].failures >= 1 and .planes[1].state == \"active\" and .planes[0].state == \"active\"
     and .connection_a.planes_failed == .planes[0].failures + .planes[1].failures
     and .connection_a.planes_recovered == .connection_a.planes_failed
     and .connection_a.packets_moved_to_other_planes > 0' '$work/hole.json' >/dev/null"
check "only plane 1's fabric dropped frames, all in its blackhole" \
  "jq -e '.planes[0].fabric_dropped == 0 and .planes[1].fabric_dropped > 0
     and .planes[1].fabric_dropped == .fabric_forward.dropped_blackhole + .fabric_backward.dropped_blackhole
     and .fabric_forward.dropped_random_loss == 0 and .planes[0].fabric == \"\"
     and .planes[1].fabric == \"blackhole at 500ms for 1s\"' '$work/hole.json' >/dev/null"
check "the table has the plane lines with their fabric drops and state" \
  "grep -q 'Fabric plane 1: blackhole at 500ms for 1s' '$work/out' \
   && grep -Eq '^  1 +[0-9]+ +[0-9]+ +[1-9][0-9]* +[0-9]+ +[1-9][0-9]* +active$' '$work/out'"

# --fabric on every plane: both planes lose frames and retransmit.
"$perf" --loopback --planes 2 --paths 8 --fabric "loss 1%" -s 65536 -n 2000 --verify --json "$work/loss.json" \
  >"$work/out" 2>&1
status=$?
check "--planes 2 --fabric 'loss 1%' --verify: exit 0, both planes' fabrics dropped and both retransmitted" \
  "[ $status -eq 0 ] && jq -e '.ok and .results[0].iterations == 2000
     and all(.planes[]; .fabric_dropped > 0 and .retransmits > 0 and .fabric == \"loss 1%\")
     and ([.planes[].fabric_dropped] | add) == .fabric_forward.dropped_random_loss + .fabric_backward.dropped_random_loss' \
     '$work/loss.json' >/dev/null"

# A capture sees both planes (plane 1's addresses are 10.0.1.x).
"$perf" --loopback --planes 2 -s 8192 -n 300 --capture "$work/run.pcap" >"$work/out" 2>&1
status=$?
"$decode" "$work/run.pcap" >"$work/decoded.jsonl" 2>>"$work/out"
check "--planes 2 --capture: frames of both planes captured and decoded" \
  "[ $status -eq 0 ] && grep -q '\"src\":\"10.0.0.1\"' '$work/decoded.jsonl' \
   && grep -q '\"src\":\"10.0.1.1\"' '$work/decoded.jsonl' && ! grep -q '\"error\"' '$work/decoded.jsonl'"

"$perf" --loopback --planes 2 --fabric-plane 2 "loss 1%" >"$work/out" 2>&1
status=$?
check "--fabric-plane 2 with --planes 2 exits 2 naming the planes" \
  "[ $status -eq 2 ] && grep -q -- '--fabric-plane 2: the planes are 0..1 (--planes 2): give a plane below --planes, or more --planes' '$work/out'"
"$perf" --loopback --planes 2 --fabric-plane 1 >"$work/out" 2>&1
status=$?
check "--fabric-plane without its spec exits 2 showing the form" \
  "[ $status -eq 2 ] && grep -q -- '--fabric-plane takes a plane and a spec: give --fabric-plane K SPEC' '$work/out'"
"$perf" --loopback --planes 2 --fabric-plane x "loss 1%" >"$work/out" 2>&1
status=$?
check "--fabric-plane with a plane that is not a number exits 2" \
  "[ $status -eq 2 ] && grep -q -- \"--fabric-plane 'x' is not a plane: give K SPEC with K 0..7\" '$work/out'"
"$perf" --loopback --planes 2 --fabric-plane 1 "loss 1" >"$work/out" 2>&1
status=$?
check "--fabric-plane with a bad spec exits 2 naming the plane and the token" \
  "[ $status -eq 2 ] && grep -q -- \"--fabric-plane 1: fabric spec: bad token '1' (token 2) after 'loss'\" '$work/out'"
"$perf" --server --port net_null0 --local-ip 10.9.9.1 --fabric-plane 0 "loss 1%" >"$work/out" 2>&1
status=$?
check "--fabric-plane on --server exits 2: it is for --loopback" \
  "[ $status -eq 2 ] && grep -q -- '--fabric-plane is for --loopback only' '$work/out'"
"$perf" --loopback --planes 2 --raw --fabric-plane 1 "loss 1%" >"$work/out" 2>&1
status=$?
check "--planes with --raw still exits 2" "[ $status -eq 2 ] && grep -q -- 'drop --raw' '$work/out'"
exit $failed
