#!/bin/bash
# tools/bench incast-dpdk: incast in real time. GENS metaroce-gen processes
# of CONNS connections each send 64 KiB WRITEs for SECONDS to one
# metaroce-sink through metaroce-fabric --ports GENS+1, whose port to the
# sink is the bottleneck (RATE, a 400 kB queue marking ECN above 40 kB);
# every output port adds DELAY. Once per congestion control: metaroce
# (4 paths; the sink's receive share sized at 97% of RATE, as the
# simulator's incast bench sizes it), dcqcn (rocev2, 1 path) and fixed.
#
# Measured window: the switch's stats every 100 ms; the intervals in which
# every gen's port received frames, less the first and the last (start-up:
# the first RTTs, and the end). Per connection: its gen's frames in the
# window (its switch port's) split by the connection's share of the gen's
# bytes (a gen's connections run for the same time). Jain's index over the
# GENS x CONNS connections; aggregate share: port 0's Gb/s in the window
# over RATE; queue drops: port 0's tail drops in the window; queue p99: the
# bytes frames found in port 0's queue, over the whole run.
# Usage: incast_dpdk_bench.sh GEN SINK FABRIC [--gens G] [--conns C]
#        [--seconds S] [--rate GBIT] [--delay US]
MR_GEN="$1" MR_SINK="$2" MR_FABRIC="$3"
shift 3
GENS=4 CONNS=4 SECONDS_=3 RATE_GBIT=2 DELAY_US=20
while [ $# -gt 0 ]; do
  case "$1" in
    --gens) GENS="$2"; shift 2 ;;
    --conns) CONNS="$2"; shift 2 ;;
    --seconds) SECONDS_="$2"; shift 2 ;;
    --rate) RATE_GBIT="$2"; shift 2 ;;
    --delay) DELAY_US="$2"; shift 2 ;;
    --benchmark_*) shift ;;
    *) echo "incast-dpdk: unknown option '$1': give --gens, --conns, --seconds, --rate (Gb/s) or --delay (us)" >&2
       exit 2 ;;
  esac
done
for tool in jq python3; do
  command -v $tool >/dev/null || { echo "incast-dpdk: '$tool' is missing: run tools/setup" >&2; exit 1; }
done
MR_WORK=$(mktemp -d)
MR_TIMEOUT=$((SECONDS_ + 60))
# shellcheck source=../../apps/switch_incast.sh
. "$(dirname "$0")/../../apps/switch_incast.sh"
cleanup() {
  local p
  for p in "${MR_GEN_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  mr_cleanup
  if [ -n "${INCAST_DPDK_KEEP:-}" ]; then echo "# runs kept in $MR_WORK" >&2; else rm -rf "$MR_WORK"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

OUT0="delay ${DELAY_US}us rate ${RATE_GBIT}gbit limit 400kb ecn 40kb"
share_mbit=$(python3 -c "print(int($RATE_GBIT * 1000 * 0.97))")
echo "# incast-dpdk: $GENS gens x $CONNS connections -> 1 sink, bottleneck $OUT0, ${DELAY_US} us on every port," \
     "${SECONDS_} s of 64 KiB WRITEs per run; net_memif, every process sleeping when idle (10 us)"
rows=()
for cc in metaroce dcqcn fixed; do
  mode=metaroce paths=4 sink_args=()
  [ $cc = dcqcn ] && mode=rocev2 paths=1
  [ $cc = metaroce ] && sink_args=(--receive-capacity "${share_mbit}mbit")
  dir="$MR_WORK/$cc"
  mkdir -p "$dir"
  if ! mr_incast_start "$GENS" "$OUT0" --out "delay ${DELAY_US}us" --stats-interval 0.1; then
    echo "incast-dpdk: metaroce-fabric did not start: $(tail -3 "$MR_WORK/fabric.out")" >&2
    exit 1
  fi
  mr_incast_sink --runs "$GENS" "${sink_args[@]}"
  for i in $(seq 1 "$GENS"); do
    mr_incast_gen "$i" -c "$CONNS" --paths $paths --mode $mode --cc $cc -D "$SECONDS_" --size 65536 --seed "$i"
  done
  mr_incast_finish
  cp "$MR_WORK"/*.json "$MR_WORK"/*.out "$dir"/
  status="${MR_GEN_STATUSES[*]} $MR_SINK_STATUS $MR_FABRIC_STATUS"
  row=$(python3 - "$dir" "$GENS" "$RATE_GBIT" "$cc" "$status" <<'PY'
import json, re, sys
d, gens, rate, cc, status = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
fabric = json.load(open(f"{d}/fabric.json"))
# "[   0.3 s] p0 rx N no route N out N drop N mark N q99 N B X.XX Gb/s | p1 ..."
port_re = re.compile(r"p(\d+) rx (\d+) no route \d+ out (\d+) drop (\d+) mark \d+ q99 \d+ B ([0-9.]+) Gb/s")
samples = []
for line in open(f"{d}/fabric.out"):
    ports = {int(m[0]): (int(m[1]), int(m[2]), int(m[3]), float(m[4])) for m in port_re.findall(line)}
    if len(ports) == gens + 1:
        samples.append(ports)
deltas = [{p: tuple(b[p][k] - a[p][k] for k in range(3)) + (b[p][3],) for p in b} for a, b in zip(samples, samples[1:])]
busy = [i for i, x in enumerate(deltas) if all(x[p][0] > 0 for p in range(1, gens + 1))]
window = busy[1:-1] if len(busy) > 2 else busy
gen_frames = {p: sum(deltas[i][p][0] for i in window) for p in range(1, gens + 1)}
rates = []
for p in range(1, gens + 1):
    g = json.load(open(f"{d}/gen{p}.json"))
    total = sum(c["bytes"] for c in g["per_connection"]) or 1
    rates += [gen_frames[p] * c["bytes"] / total for c in g["per_connection"]]
jain = sum(rates) ** 2 / (len(rates) * sum(r * r for r in rates)) if rates and sum(rates) > 0 else 0.0
gbps = [deltas[i][0][3] for i in window]
aggregate = (sum(gbps) / len(gbps)) / rate if gbps else 0.0
drops_window = sum(deltas[i][0][2] for i in window)
p0 = fabric["port"][0]
sink = json.load(open(f"{d}/sink.json"))
print(json.dumps({"cc": cc, "jain": round(jain, 4), "aggregate_share": round(aggregate, 4),
                  "queue_drops": drops_window, "queue_p99_bytes": p0["queue_bytes"]["p99"],
                  "queue_max_bytes": p0["queue_bytes"]["max"], "drops_whole_run": p0["out"]["dropped"]["queue_full"],
                  "ecn_marked": p0["out"]["ecn_marked"], "window_s": round(len(window) * 0.1, 1),
                  "connections": len(rates), "sink_ok": sink.get("ok", False), "exit_statuses": status}))
PY
)
  rows+=("$row")
done
printf '%-9s %7s %10s %12s %14s %12s %12s %9s %8s\n' cc jain aggregate drops_window queue_p99_B queue_max_B \
  drops_total marked window
for row in "${rows[@]}"; do
  jq -r '[.cc, .jain, .aggregate_share, .queue_drops, .queue_p99_bytes, .queue_max_bytes, .drops_whole_run,
          .ecn_marked, "\(.window_s) s"] | @tsv' <<<"$row" |
    awk -F'\t' '{printf "%-9s %7s %10s %12s %14s %12s %12s %9s %8s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
done
echo "# exit statuses (gens, sink, switch) and the sink's verdict: $(for r in "${rows[@]}"; do jq -r '"\(.cc): \(.exit_statuses) ok \(.sink_ok)"' <<<"$r"; done | paste -sd';')"
printf '{"bench":"incast-dpdk","rows":[%s]}\n' "$(IFS=,; echo "${rows[*]}")"
