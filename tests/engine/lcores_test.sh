#!/bin/sh
# Nodes of several lcores, as a user runs them: metaroce-perf --loopback
# --lcores 2 puts 2 lcores on each side (4 lcore threads on whatever CPUs
# there are, sleeping when idle), spreads -q 8 over them, and every lcore
# must carry traffic, every byte must be verified, nothing misdirected, and
# the per-lcore counters must add up to the totals. Prints TAP.
# Usage: lcores_test.sh PATH/metaroce-perf
perf="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  sed 's/^/# /' "$work/out" | tail -20
}

echo "1..12"
"$perf" --loopback --lcores 2 -q 8 -s 65536 -n 4000 --verify --idle-sleep-us 20 --json "$work/l.json" >"$work/out" 2>&1
status=$?
check "--loopback --lcores 2 -q 8 -s 65536 -n 4000 --verify --idle-sleep-us 20 exits 0, every byte verified" \
  "[ $status -eq 0 ] && grep -Eq '^ 65536 +4000 ' '$work/out' \
   && grep -q 'verify: every byte of every message checked, all correct' '$work/out'"
check "four lcores (two per side, four lcore ids), four connections each, every one with data packets" \
  "jq -e '.lcores_per_side == 2 and (.results[0].lcores | length) == 4
          and ([.results[0].lcores[].lcore] | unique | length) == 4
          and ([.results[0].lcores[] | select(.side == \"sender\")] | length) == 2
          and all(.results[0].lcores[]; .connections == 4 and .data_packets > 0)' '$work/l.json' >/dev/null"
check "the senders' data packets add up to the packets sent, the receivers' to the packets placed" \
  "jq -e '([.results[0].lcores[] | select(.side == \"sender\") | .data_packets] | add) == .results[0].packets_sent
          and ([.results[0].lcores[] | select(.side == \"receiver\") | .data_packets] | add) == .connection_b.data_packets_received
          and .results[0].packets_sent == .connection_a.data_packets_sent + .connection_a.retransmitted_packets' \
     '$work/l.json' >/dev/null"
check "the steering check passed (a probe per queue each way, each on its owner's queue, dropped there as a probe); nothing misdirected, nothing for an unknown QPN, on either side" \
  "grep -q \"steering: a probe per queue each way, each on its owner's queue\" '$work/out' \
   && jq -e '.host_a.rx_steering_probes == 2 and .host_b.rx_steering_probes == 2
          and .host_a.rx_misdirected == 0 and .host_b.rx_misdirected == 0
          and .host_a.rx_unknown_qpn == 0 and .host_b.rx_unknown_qpn == 0' '$work/l.json' >/dev/null"
check "the table has a line per lcore" "[ \$(grep -Ec '^ size 65536:  (sender|receiver) ' '$work/out') -eq 4 ]"

# The same with SEND (receive completions on every receiver lcore) and two
# streams, unevenly split messages (-n 3001 over 2 lcores).
"$perf" --loopback --lcores 2 -q 4 --streams 2 --op send -s 8192 -n 3001 --verify --idle-sleep-us 20 \
  --json "$work/s.json" >"$work/out" 2>&1
status=$?
check "--op send --streams 2 -n 3001 over 2 lcores: exits 0, 3001 receive completions in all" \
  "[ $status -eq 0 ] && jq -e '.connection_b.receive_completions == 3001 and .results[0].iterations == 3001
     and all(.results[0].lcores[]; .data_packets > 0)' '$work/s.json' >/dev/null"

# Over a pair that delivers every frame to queue 0 (a PMD that cannot
# steer): lcore 0 of each side hands lcore 1's frames to it.
"$perf" --loopback --lcores 2 --software-handoff -q 8 -s 65536 -n 4000 --verify --idle-sleep-us 20 \
  --json "$work/h.json" >"$work/out" 2>&1
status=$?
check "--software-handoff --lcores 2: exits 0, every byte verified, every lcore with data packets, frames handed off on both sides, none misdirected or lost" \
  "[ $status -eq 0 ] && grep -q 'verify: every byte of every message checked, all correct' '$work/out' \
   && grep -q 'steering: a probe per queue each way, 2 of 4 handed off to their owner in software' '$work/out' \
   && jq -e 'all(.results[0].lcores[]; .connections == 4 and .data_packets > 0)
             and .host_a.rx_handed_off > 0 and .host_b.rx_handed_off > 0
             and .host_a.rx_misdirected == 0 and .host_b.rx_misdirected == 0
             and .host_a.rx_handoff_ring_full == 0 and .host_b.rx_handoff_ring_full == 0
             and .host_a.rx_unknown_qpn == 0 and .host_b.rx_unknown_qpn == 0' '$work/h.json' >/dev/null"
# One receive share per port over its lcores: each lcore's host is a front
# of it, and the parts the fronts are given add up to the port's capacity.
"$perf" --loopback --lcores 2 -q 3 --cc metaroce --receive-capacity 2gbit -s 65536 -n 2000 --verify \
  --idle-sleep-us 20 --json "$work/c.json" >"$work/out" 2>&1
status=$?
check "--cc metaroce --receive-capacity 2gbit over 2 lcores: exits 0, verified, each side's lcores' parts of the port's receive share add up to 2 Gb/s" \
  "[ $status -eq 0 ] && grep -q 'verify: every byte of every message checked, all correct' '$work/out' \
   && jq -e '([.results[0].lcores[] | select(.side == \"receiver\") | .receive_part_bps] | add) == 2000000000
             and ([.results[0].lcores[] | select(.side == \"sender\") | .receive_part_bps] | add) == 2000000000' \
        '$work/c.json' >/dev/null"
"$perf" --loopback --software-handoff -n 10 >"$work/out" 2>&1
status=$?
check "--software-handoff with one lcore exits 2" "[ $status -eq 2 ] && grep -q 'software-handoff is for --loopback --lcores 2' '$work/out'"

"$perf" --loopback --lcores 2 -q 1 -n 10 >"$work/out" 2>&1
status=$?
check "--lcores 2 with -q 1 exits 2 naming the fix" "[ $status -eq 2 ] && grep -q 'give -q 2 or more' '$work/out'"
"$perf" --loopback --lcores 2 -q 2 --fabric 'loss 1%' -n 10 >"$work/out" 2>&1
status=$?
check "--lcores 2 with --fabric exits 2" "[ $status -eq 2 ] && grep -q 'drop --fabric' '$work/out'"
"$perf" --loopback --lcores 17 -n 10 >"$work/out" 2>&1
status=$?
check "--lcores 17 is out of range (exit 2)" "[ $status -eq 2 ] && grep -q 'give 1..16' '$work/out'"
exit $failed
