#!/bin/bash
# metaroce-gen -> metaroce-sink with --lcores 2 on net_af_packet ports of 2
# queue pairs over a veth between two network namespaces. The kernel's
# fanout spreads frames over an af_packet port's queues by flow hash, not by
# QPN, so the lanes hand frames on to their owners (an rte_ring each): data
# by destination QP, the connection manager's by the QPN each message
# concerns, ARP to every lane (lane 0 answers requests). The gen is given
# no MAC: each of its lanes asks for the sink's by ARP.
# 4 connections x 4 paths, 200 messages each of 32 B..64 KiB. Exactly: both
# exit 0 and report ok; every message verified; 2 connections and 400
# messages per lane at both ends; frames handed on at both ends (some
# paths hash to the other lane's queue), none misdirected, no hand-off
# ring full; every ARP request the gen's lanes sent was answered
# once by the sink's lane 0 and left alone by its lane 1, and both gen
# lanes learned the answer. Then 2 more runs with 3 connections per lane
# (closed and opened again). Not root: says so and skips. Prints TAP.
# The ports are drivers-config's net_af_packet preset with 2 queue pairs
# (its frame size fits 9000-byte frames; the PMD's default of 2048 bytes
# would drop every larger frame it is given).
# Then metaroce-perf --server/--client --lcores 2 the same way (-q 4 of
# 64 KiB WRITEs, -n 400, every byte verified): its lanes wait for each
# other between sizes while still reading their queues.
# Usage: lcores_af_packet_test.sh GEN SINK PERF DRIVERS-CONFIG-DIR
GEN="$1" SINK="$2" PERF="$3" PRESETS="$4"
if [ "$(id -u)" -ne 0 ]; then
  echo "1..0 # SKIP not root: network namespaces and veths need root (run tools/test as root)"
  exit 0
fi
for tool in ip jq; do
  if ! command -v "$tool" >/dev/null; then
    echo "1..0 # SKIP '$tool' is missing: run tools/setup (it installs iproute2 and jq)"
    exit 0
  fi
done
tag=$$
ns_g="mr-lg-$tag" ns_s="mr-ls-$tag"
WORK=$(mktemp -d)
SINK_PID=
cleanup() {
  [ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null
  wait 2>/dev/null
  for ns in "$ns_g" "$ns_s"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$WORK"
  # EAL leaves its runtime directory (prefix metaroce-gen-<pid>, ...) behind
  # under --no-shconf: remove those whose process is gone.
  for d in /var/run/dpdk/metaroce-gen-* /var/run/dpdk/metaroce-sink-*; do
    if [ -d "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null; then rm -rf "$d"; fi
  done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  for f in gen sink; do [ -f "$WORK/$f.out" ] && tail -8 "$WORK/$f.out" | sed "s|^|# $f: |"; done
}
q() { jq -r "$2" "$WORK/$1.json" 2>/dev/null; }

# [ns_g: g0] <-> [s0: ns_s]: the DPDK ends' interfaces carry no address and
# no IPv6, so their kernels stay out of the way.
ip netns add "$ns_g" && ip netns add "$ns_s" &&
  ip link add g0 netns "$ns_g" type veth peer name s0 netns "$ns_s" || {
  echo "Bail out! cannot create the namespaces and the veth"
  exit 1
}
for pair in "$ns_g g0" "$ns_s s0"; do
  set -- $pair
  ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
  ip -n "$1" link set "$2" mtu 9000 up
done

sed 's/qpairs=1/qpairs=2/; s/^queues=1$/queues=2/' "$PRESETS/net_af_packet.ini" >"$WORK/af_packet2.ini"

echo "1..15"
run_case() {  # NAME CONNECTIONS RUNS PER_LANE [GEN-ARGS...]
  local name="$1" conns="$2" runs="$3" per_lane="$4"
  shift 4
  rm -f "$WORK"/*.json "$WORK"/*.out
  ip netns exec "$ns_s" timeout 120 "$SINK" --preset "$WORK/af_packet2.ini" --iface s0 --local-ip 10.96.0.2 \
    --lcores 2 --idle-sleep-us 20 --runs "$runs" --json "$WORK/sink.json" >"$WORK/sink.out" 2>&1 &
  SINK_PID=$!
  sleep 0.5  # the sink answers ARP once its port is up
  local gen_status=0 r
  for r in $(seq "$runs"); do
    ip netns exec "$ns_g" timeout 120 "$GEN" --preset "$WORK/af_packet2.ini" --iface g0 --local-ip 10.96.0.1 \
      --sink 10.96.0.2 --lcores 2 -c "$conns" --paths 4 --size 32-65536 --seed "$r" --idle-sleep-us 20 \
      --json "$WORK/gen.json" "$@" >"$WORK/gen$r.out" 2>&1 || { gen_status=$?; cp "$WORK/gen$r.out" "$WORK/gen.out"; }
    [ "$gen_status" = 0 ] && cp "$WORK/gen$r.out" "$WORK/gen.out"
  done
  wait "$SINK_PID"
  local sink_status=$?
  SINK_PID=
  echo "# $name: gen $(jq -c '.engine | {rx_frames, rx_handed_off, rx_shared, arp_requests_sent, arp_replies_learned}' "$WORK/gen.json")"
  echo "# $name: sink $(jq -c '.engine | {rx_frames, rx_handed_off, rx_shared, arp_requests_answered, requests_answered_elsewhere}' "$WORK/sink.json")"
  check "$name: gen and sink exit 0 and report ok (gen $gen_status, sink $sink_status)" \
    "[ $gen_status = 0 ] && [ $sink_status = 0 ] && [ \"\$(q gen .ok)\" = true ] && [ \"\$(q sink .ok)\" = true ]"
  check "$name: the sink verified $((conns * runs)) connections, every message of every run, once" \
    "[ \"\$(q sink .connections_closed)\" = $((conns * runs)) ] && [ \"\$(q sink .wrong)\" = 0 ] \
     && [ \"\$(q sink .missing)\" = 0 ] && [ \"\$(q sink .duplicates)\" = 0 ] \
     && [ \"\$(q sink '.messages == .gen_posted')\" = true ] && [ \"\$(q sink .runs_completed)\" = $runs ]"
  check "$name: $per_lane connections on each lane of the sink, each carrying data" \
    "[ \"\$(q sink '[.lcores[] | select(.connections == $per_lane and .data_packets > 0)] | length')\" = 2 ] \
     && [ \"\$(q gen '[.lcores[] | select(.data_packets > 0)] | length')\" = 2 ]"
  check "$name: frames handed on to their lanes at both ends; none misdirected, no hand-off ring full" \
    "[ \"\$(q gen .engine.rx_handed_off)\" -gt 0 ] && [ \"\$(q sink .engine.rx_handed_off)\" -gt 0 ] \
     && [ \"\$(q gen '.engine.rx_misdirected + .engine.rx_handoff_ring_full')\" = 0 ] \
     && [ \"\$(q sink '.engine.rx_misdirected + .engine.rx_handoff_ring_full')\" = 0 ]"
}

run_case "4 connections" 4 1 2 -n 200
check "4 connections: 800 messages posted, 400 on each lane at both ends" \
  "[ \"\$(q gen .posted)\" = 800 ] && [ \"\$(q gen '[.lcores[].messages] == [400, 400]')\" = true ] \
   && [ \"\$(q sink '[.lcores[].messages] == [400, 400]')\" = true ]"
check "4 connections: each ARP request of the gen's lanes answered once by the sink's lane 0, left by its lane 1" \
  "[ \"\$(q gen .engine.arp_requests_sent)\" -ge 2 ] \
   && [ \"\$(q gen .engine.arp_requests_sent)\" = \"\$(q sink .engine.arp_requests_answered)\" ] \
   && [ \"\$(q gen .engine.arp_requests_sent)\" = \"\$(q sink .engine.requests_answered_elsewhere)\" ] \
   && [ \"\$(q gen .engine.resolutions_failed)\" = 0 ]"
check "4 connections: both ends say their lanes hand frames on, net_af_packet having taken no flow rule" \
  "grep -q '^ lanes: software hand-off (net_af_packet took no flow rule: .\\+)\$' '$WORK/gen.out' \
   && grep -q '^ lanes: software hand-off (net_af_packet took no flow rule: .\\+)\$' '$WORK/sink.out'"
check "4 connections: both gen lanes learned the sink's MAC from the answers" \
  "[ \"\$(q gen .engine.arp_replies_learned)\" -ge 2 ] && [ \"\$(q gen .engine.rx_shared)\" -gt 0 ]"

run_case "2 runs" 6 2 6 -n 50
check "2 runs: the sink verified 300 messages on each lane" \
  "[ \"\$(q sink '[.lcores[].messages] == [300, 300]')\" = true ]"

# metaroce-perf's lanes on the same ports.
ip netns exec "$ns_s" timeout 120 "$PERF" --server --preset "$WORK/af_packet2.ini" --iface s0 --local-ip 10.96.0.2 \
  --lcores 2 --idle-sleep-us 20 --json "$WORK/server.json" >"$WORK/sink.out" 2>&1 &
SINK_PID=$!
sleep 0.5
ip netns exec "$ns_g" timeout 120 "$PERF" --client 10.96.0.2 --preset "$WORK/af_packet2.ini" --iface g0 \
  --local-ip 10.96.0.1 --lcores 2 -q 4 -s 65536 -n 400 --verify --idle-sleep-us 20 --json "$WORK/client.json" \
  >"$WORK/gen.out" 2>&1
client_status=$?
wait "$SINK_PID"
server_status=$?
SINK_PID=
echo "# perf: client $(jq -c '[.lcores[] | [.connections, .messages, .data_packets]]' "$WORK/client.json" 2>/dev/null)"
check "perf: both ends exit 0 (client $client_status, server $server_status), every byte of 400 messages verified" \
  "[ $client_status = 0 ] && [ $server_status = 0 ] \
   && [ \"\$(q client '.ok and .results[0].iterations == 400 and .results[0].missing_messages == 0
                     and .results[0].wrong_messages == 0')\" = true ]"
check "perf: 2 connections and 200 messages per client lane, 2 connections per server lane; frames handed on, none misdirected" \
  "[ \"\$(q client '[.lcores[] | [.connections, .messages]] == [[2, 200], [2, 200]]')\" = true ] \
   && [ \"\$(q server '[.lcores[].connections] == [2, 2]')\" = true ] \
   && [ \"\$(q server .host_b.rx_handed_off)\" -gt 0 ] \
   && [ \"\$(q client '.host_a.rx_misdirected + .host_a.rx_handoff_ring_full')\" = 0 ] \
   && [ \"\$(q server '.host_b.rx_misdirected + .host_b.rx_handoff_ring_full')\" = 0 ]"
