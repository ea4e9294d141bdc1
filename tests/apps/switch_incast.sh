# Sourced by tests/apps/switch_incast_test.sh and tools/bench incast-dpdk:
# G metaroce-gen processes -> metaroce-fabric --ports G+1 -> one
# metaroce-sink, every process on one host joined by net_memif (as
# gen_fabric_sink.sh, whose EAL and memif helpers it uses).
#
#   gen 1 [memif s1.sock] --+
#   ...                      +-> [port i] switch [port 0: rate, limit, ECN] -> [s0.sock] sink
#   gen G [memif sG.sock] --+
#
# Gen i has address 10.98.0.(10+i), the sink 10.98.0.2; the switch routes
# each to its port, and the gens learn the sink's MAC by ARP through it.
# Set MR_WORK, MR_GEN, MR_SINK, MR_FABRIC, MR_TIMEOUT; summaries land in
# $MR_WORK/{sink,fabric,gen1..genG}.json.

# shellcheck source=gen_fabric_sink.sh
. "$(dirname "${BASH_SOURCE[0]}")/gen_fabric_sink.sh"
MR_PREFIX="mr-inc-$$"
MR_INCAST_SINK_IP=10.98.0.2
MR_GEN_PIDS=()

mr_incast_gen_ip() { echo "10.98.0.$((10 + $1))"; }

# mr_incast_start G OUT0_SPEC [FABRIC-ARGS...]: the switch, waiting for its sockets.
mr_incast_start() {
  local gens="$1" out0="$2" i args=() vdevs=()
  shift 2
  rm -f "$MR_WORK"/s*.sock "$MR_WORK"/*.json "$MR_WORK"/*.out
  args+=(--route "$MR_INCAST_SINK_IP=0")
  for i in $(seq 0 "$gens"); do
    args+=(--port "net_memif$i")
    # shellcheck disable=SC2207
    vdevs+=($(mr_memif "net_memif$i" server "s$i.sock"))
    [ "$i" -gt 0 ] && args+=(--route "$(mr_incast_gen_ip "$i")=$i")
  done
  # shellcheck disable=SC2046
  "$MR_FABRIC" --ports $((gens + 1)) "${args[@]}" --out-port "0=$out0" --idle-sleep-us 10 --mbufs 4096 \
    --json "$MR_WORK/fabric.json" "$@" -- $(mr_eal fabric) "${vdevs[@]}" >"$MR_WORK/fabric.out" 2>&1 &
  MR_FABRIC_PID=$!
  for _ in $(seq 300); do
    local all=1
    for i in $(seq 0 "$gens"); do [ -S "$MR_WORK/s$i.sock" ] || all=0; done
    if [ $all = 1 ]; then  # the sockets exist once EAL probed the ports; the queues come after
      sleep 0.5
      kill -0 "$MR_FABRIC_PID" 2>/dev/null && return 0
      break
    fi
    kill -0 "$MR_FABRIC_PID" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}

# mr_incast_sink [SINK-ARGS...]: in the background, on switch port 0.
mr_incast_sink() {
  # shellcheck disable=SC2046
  timeout "$MR_TIMEOUT" "$MR_SINK" --port net_memif0 --local-ip "$MR_INCAST_SINK_IP" --idle-sleep-us 10 \
    --mbufs 8192 --json "$MR_WORK/sink.json" "$@" -- $(mr_eal sink) $(mr_memif net_memif0 client s0.sock "$MR_SINK_MAC") \
    >"$MR_WORK/sink.out" 2>&1 &
  MR_SINK_PID=$!
}

# mr_incast_gen I [GEN-ARGS...]: gen I in the background (pid in MR_GEN_PIDS).
mr_incast_gen() {
  local i="$1"
  shift
  # shellcheck disable=SC2046
  timeout -k 5 "$MR_TIMEOUT" "$MR_GEN" --port net_memif0 --local-ip "$(mr_incast_gen_ip "$i")" --sink "$MR_INCAST_SINK_IP" \
    --idle-sleep-us 10 --mbufs 8192 --json "$MR_WORK/gen$i.json" --quiet "$@" \
    -- $(mr_eal "gen$i") $(mr_memif net_memif0 client "s$i.sock" "02:00:00:00:01:$(printf %02x "$i")") \
    >"$MR_WORK/gen$i.out" 2>&1 &
  MR_GEN_PIDS+=($!)
}

# Waits for every gen (statuses in MR_GEN_STATUSES), then as mr_finish.
mr_incast_finish() {
  local p
  MR_GEN_STATUSES=()
  for p in "${MR_GEN_PIDS[@]}"; do
    wait "$p"
    MR_GEN_STATUSES+=($?)
  done
  MR_GEN_PIDS=()
  mr_finish
}
