# Sourced by tests/apps/gen_sink_test.sh and tools/soak: metaroce-gen ->
# metaroce-fabric -> metaroce-sink as three processes on one host, joined by
# net_memif (shared memory rings over a unix socket: no root, no NIC, no
# hugepages). memif's transmit waits for room rather than dropping, so every
# frame the fabric does not drop arrives and the three JSON summaries can be
# compared exactly.
#
#   gen [memif client a.sock] <-> [server a.sock] fabric A | B [server b.sock] <-> [client b.sock] sink
#
# The fabric is a bump in the wire: frames pass unchanged at L2, so the gen's
# next hop is the sink's MAC. Each process may run on either core
# (--lcores 0@(0-1)) and sleeps when a turn finds nothing (--idle-sleep-us),
# so the three share two cores. The memif buffers hold a whole frame
# (bsize=10240): chained buffers delivered frames more than once in DPDK
# 22.11's memif.
#
# Set MR_WORK (a directory of its own), MR_GEN, MR_SINK, MR_FABRIC (binaries)
# and MR_TIMEOUT (seconds a process may take) before calling (MR_FABRIC_LCORES:
# the fabric's EAL lcores, if not one on either core); summaries land
# in $MR_WORK/{gen,sink,fabric}.json, output in $MR_WORK/*.out. MR_GEN_IP and
# MR_SINK_IP change the addresses (IPv4 by default); MR_GEN_PEER_MAC set
# empty makes the gen ask for the sink's MAC (ARP or neighbour discovery,
# which the fabric forwards as any frame) instead of being given it.

MR_PREFIX="mr-gfs-$$"
MR_SINK_MAC=02:00:00:00:00:02
MR_GEN_MAC=02:00:00:00:00:01
MR_FABRIC_PID= MR_SINK_PID=
MR_GEN_IP=10.99.0.1 MR_SINK_IP=10.99.0.2
MR_GEN_PEER_MAC=$MR_SINK_MAC

# EAL arguments of process NAME (its EAL lcores LCORES, by default one on
# either core); its runtime directory is removed by mr_cleanup.
mr_eal() {  # NAME [LCORES]
  echo "--lcores ${2:-0@(0-1)} --no-huge -m 512 --no-shconf --no-pci --log-level=error --file-prefix=$MR_PREFIX-$1"
}
mr_memif() {  # NAME ROLE SOCKET [MAC]
  echo "--vdev $1,role=$2,socket=$MR_WORK/$3,socket-abstract=no,bsize=10240${4:+,mac=$4}"
}

# mr_start_fabric A_TO_B B_TO_A [FABRIC-ARGS...]: starts it and waits for its sockets.
mr_start_fabric() {
  local a_to_b="$1" b_to_a="$2"
  shift 2
  rm -f "$MR_WORK"/a.sock "$MR_WORK"/b.sock "$MR_WORK"/*.json "$MR_WORK"/*.out
  # shellcheck disable=SC2046
  "$MR_FABRIC" --port-a net_memif0 --port-b net_memif1 --a-to-b "$a_to_b" --b-to-a "$b_to_a" \
    --idle-sleep-us 20 --mbufs 4096 --json "$MR_WORK/fabric.json" "$@" \
    -- $(mr_eal fabric "$MR_FABRIC_LCORES") $(mr_memif net_memif0 server a.sock) $(mr_memif net_memif1 server b.sock) \
    >"$MR_WORK/fabric.out" 2>&1 &
  MR_FABRIC_PID=$!
  local i
  for i in $(seq 300); do
    [ -S "$MR_WORK/a.sock" ] && [ -S "$MR_WORK/b.sock" ] && return 0
    kill -0 "$MR_FABRIC_PID" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}

# mr_start_sink [SINK-ARGS...]: in the background.
mr_start_sink() {
  # shellcheck disable=SC2046
  timeout "$MR_TIMEOUT" "$MR_SINK" --port net_memif0 --local-ip "$MR_SINK_IP" --idle-sleep-us 20 --mbufs 4096 \
    --json "$MR_WORK/sink.json" "$@" -- $(mr_eal sink) $(mr_memif net_memif0 client b.sock $MR_SINK_MAC) \
    >"$MR_WORK/sink.out" 2>&1 &
  MR_SINK_PID=$!
}

# mr_run_gen [GEN-ARGS...]: its status in MR_GEN_STATUS and as the return value.
mr_run_gen() {
  # shellcheck disable=SC2046
  timeout "$MR_TIMEOUT" "$MR_GEN" --port net_memif0 --local-ip "$MR_GEN_IP" --sink "$MR_SINK_IP" \
    ${MR_GEN_PEER_MAC:+--peer-mac $MR_GEN_PEER_MAC} --idle-sleep-us 20 --mbufs 4096 --json "$MR_WORK/gen.json" "$@" \
    -- $(mr_eal gen) $(mr_memif net_memif0 client a.sock $MR_GEN_MAC) >"$MR_WORK/gen.out" 2>&1
  MR_GEN_STATUS=$?
  return $MR_GEN_STATUS
}

# Waits for the sink, then stops the fabric (after both ends, so nothing is
# left in flight); statuses in MR_SINK_STATUS and MR_FABRIC_STATUS.
mr_finish() {
  wait "$MR_SINK_PID"
  MR_SINK_STATUS=$?
  MR_SINK_PID=
  # memif handles a peer's going on its interrupt thread, which races with
  # the port being closed (a crash in DPDK 22.11's memif when both coincide):
  # let the fabric see the sink go first.
  sleep 0.5
  kill -TERM "$MR_FABRIC_PID" 2>/dev/null
  wait "$MR_FABRIC_PID"
  MR_FABRIC_STATUS=$?
  MR_FABRIC_PID=
  mr_remove_runtime_dirs
}

mr_remove_runtime_dirs() {
  rm -rf /var/run/dpdk/"$MR_PREFIX"-* "${XDG_RUNTIME_DIR:-/tmp}"/dpdk/"$MR_PREFIX"-* /tmp/dpdk/"$MR_PREFIX"-* 2>/dev/null
}

mr_cleanup() {
  [ -n "$MR_SINK_PID" ] && kill "$MR_SINK_PID" 2>/dev/null
  [ -n "$MR_FABRIC_PID" ] && kill "$MR_FABRIC_PID" 2>/dev/null
  wait 2>/dev/null
  mr_remove_runtime_dirs
}

# jq on one summary: mr_q FILE FILTER.
mr_q() { jq -r "$2" "$MR_WORK/$1.json" 2>/dev/null; }
mr_parse_errors() {  # FILE: frames its engine dropped as unparseable
  mr_q "$1" '[.engine | to_entries[] | select(.key | startswith("rx_parse_error.")) | .value] | add'
}

# The accounting that must hold exactly whatever the impairments: one line
# per check on stdout ("ok - what" / "not ok - what: the figures"). Each
# direction: what one end sent is what the fabric received, which it
# forwarded, dropped or still holds (nothing, at the end); what it forwarded
# is what the other end received, which rejected exactly the frames the
# fabric corrupted. The gen's frames are its data, retransmissions, probes
# and CM messages (and ACKs of READ answers); the sink's its ACKs and CM
# answers (and READ answers: data, retransmissions, probes); either's
# neighbour requests and answers (ARP, ND) besides. Every PSN either end
# sent was placed once at the other; every message the gen posted was
# verified by the sink, every READ by the gen.
mr_accounting() {
  local g_tx g_rx g_perr s_tx s_rx s_perr ab_r ab_f ab_d ab_dup ab_c ab_i ab_m ba_r ba_f ba_d ba_dup ba_c ba_i ba_m
  g_tx=$(mr_q gen .engine.tx_frames) g_rx=$(mr_q gen .engine.rx_frames) g_perr=$(mr_parse_errors gen)
  s_tx=$(mr_q sink .engine.tx_frames) s_rx=$(mr_q sink .engine.rx_frames) s_perr=$(mr_parse_errors sink)
  read -r ab_r ab_f ab_d ab_dup ab_c ab_i ab_m < <(mr_q fabric \
    '.a_to_b | "\(.received) \(.forwarded) \(.dropped.total) \(.duplicated) \(.corrupted) \(.in_flight) \(.rx_missed)"')
  read -r ba_r ba_f ba_d ba_dup ba_c ba_i ba_m < <(mr_q fabric \
    '.b_to_a | "\(.received) \(.forwarded) \(.dropped.total) \(.duplicated) \(.corrupted) \(.in_flight) \(.rx_missed)"')
  mr_line() { if eval "$2"; then echo "ok - $1"; else echo "not ok - $1: $3"; fi; }
  mr_line "gen sent == fabric a->b received == forwarded + dropped - duplicated, none in flight or missed" \
    "[ '$g_tx' = '$ab_r' ] && [ $((ab_f + ab_d)) = $((ab_r + ab_dup)) ] && [ '$ab_i' = 0 ] && [ '$ab_m' = 0 ]" \
    "gen tx $g_tx; a->b received $ab_r forwarded $ab_f dropped $ab_d duplicated $ab_dup in flight $ab_i missed $ab_m"
  mr_line "sink received == fabric a->b forwarded; its parse errors == frames the fabric corrupted" \
    "[ '$s_rx' = '$ab_f' ] && [ '$s_perr' = '$ab_c' ]" \
    "sink rx $s_rx vs forwarded $ab_f; parse errors $s_perr vs corrupted $ab_c"
  mr_line "sink sent == fabric b->a received == forwarded + dropped - duplicated, none in flight or missed" \
    "[ '$s_tx' = '$ba_r' ] && [ $((ba_f + ba_d)) = $((ba_r + ba_dup)) ] && [ '$ba_i' = 0 ] && [ '$ba_m' = 0 ]" \
    "sink tx $s_tx; b->a received $ba_r forwarded $ba_f dropped $ba_d duplicated $ba_dup in flight $ba_i missed $ba_m"
  mr_line "gen received == fabric b->a forwarded; its parse errors == frames the fabric corrupted" \
    "[ '$g_rx' = '$ba_f' ] && [ '$g_perr' = '$ba_c' ]" \
    "gen rx $g_rx vs forwarded $ba_f; parse errors $g_perr vs corrupted $ba_c"
  local g_frames s_frames
  local neighbours='.engine as $e | $e.arp_requests_sent + $e.nd_solicitations_sent + $e.arp_requests_answered
    + $e.nd_solicitations_answered'
  g_frames=$(mr_q gen "(.connection_counters as \$c | .cm as \$m | \$c.data_packets_sent + \$c.retransmitted_packets
    + \$c.probes_sent + \$c.acks_sent + \$m.requests_sent + \$m.ready_sent + \$m.disconnects_sent) + ($neighbours)")
  s_frames=$(mr_q sink "(.connection_counters as \$c | .cm as \$m | \$c.acks_sent + \$c.rnr_naks_sent + \$c.cnps_sent
    + \$c.data_packets_sent + \$c.retransmitted_packets + \$c.probes_sent
    + \$m.replies_sent + \$m.rejects_sent + \$m.disconnect_replies_sent) + ($neighbours)")
  mr_line "every frame the ends sent is a data packet, retransmission, probe, ACK or CM message of theirs" \
    "[ '$g_frames' = '$g_tx' ] && [ '$s_frames' = '$s_tx' ]" "gen $g_frames of $g_tx, sink $s_frames of $s_tx"
  local sent placed answered answers_placed
  sent=$(mr_q gen .connection_counters.data_packets_sent) placed=$(mr_q sink .connection_counters.data_packets_received)
  answered=$(mr_q sink .connection_counters.data_packets_sent)
  answers_placed=$(mr_q gen .connection_counters.data_packets_received)
  mr_line "every data PSN the gen sent was placed once at the sink, every one the sink sent (READ answers) at the gen" \
    "[ -n '$sent' ] && [ '$sent' = '$placed' ] && [ -n '$answered' ] && [ '$answered' = '$answers_placed' ]" \
    "gen sent $sent, sink placed $placed; sink sent $answered, gen placed $answers_placed"
  local posted completed verified bytes_gen bytes_sink wrong missing dups
  posted=$(mr_q gen .posted) completed=$(mr_q gen .completed) verified=$(mr_q sink .messages)
  bytes_gen=$(mr_q gen .bytes) bytes_sink=$(mr_q sink .bytes)
  wrong=$(mr_q sink .wrong_bytes) missing=$(mr_q sink .missing) dups=$(mr_q sink .duplicates)
  mr_line "the sink verified every message the gen posted and completed, every byte, once" \
    "[ -n '$posted' ] && [ '$posted' -gt 0 ] && [ '$posted' = '$completed' ] && [ '$posted' = '$verified' ] \
     && [ '$bytes_gen' = '$bytes_sink' ] && [ '$wrong' = 0 ] && [ '$missing' = 0 ] && [ '$dups' = 0 ]" \
    "posted $posted completed $completed verified $verified; bytes $bytes_gen vs $bytes_sink; wrong bytes $wrong missing $missing duplicates $dups"
  local per_gen per_sink
  per_gen=$(mr_q gen '[.per_connection[] | [.connection, .posted, .bytes]] | sort | tostring')
  per_sink=$(mr_q sink '[.per_connection[] | [.connection, .messages, .bytes]] | sort | tostring')
  mr_line "per connection, the sink's messages and bytes are the gen's" \
    "[ -n '$per_gen' ] && [ '$per_gen' = '$per_sink' ]" "gen $per_gen, sink $per_sink"
}

# What a TAP test of the three processes starts with: without jq it skips
# (exit 0); it makes MR_WORK, removes everything at exit, gives the TAP
# lines (tests/tap.sh) with the processes' last output lines after a failed
# check, and q FILE FILTER (mr_q).
mr_tap_test() {
  if ! command -v jq >/dev/null; then
    echo "1..0 # SKIP 'jq' is missing: run tools/setup (it installs jq)"
    exit 0
  fi
  MR_WORK=$(mktemp -d)
  trap 'mr_cleanup; rm -rf "$MR_WORK"' EXIT
  trap 'exit 1' INT TERM
  # shellcheck source=../tap.sh
  . "$(dirname "${BASH_SOURCE[0]}")/../tap.sh"
  tap_on_failure() {
    for f in gen sink fabric; do [ -f "$MR_WORK/$f.out" ] && tail -8 "$MR_WORK/$f.out" | sed "s|^|# $f: |"; done
  }
  q() { mr_q "$@"; }
}
