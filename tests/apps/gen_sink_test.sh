#!/bin/bash
# metaroce-gen -> metaroce-fabric -> metaroce-sink as users run them: three
# processes joined by net_memif (gen_fabric_sink.sh), sharing two cores.
# Three runs, 4 connections x 4 paths of 32 B..64 KiB messages (write,
# write-imm and send alike):
#   loss       1% loss, 4 fabric paths 20 us apart, 0.1% corruption, both ways;
#   blackhole  the same, and fabric path 1 of a->b dropping everything from
#              the start (4 of the 16 data paths hash there; the CM's port
#              does not);
#   reads      the loss run with READs of the sink's read region in the mix
#              (write:1,write-imm:1,send:1,read:3): reads issued, completed
#              and verified by the gen are the same count, every byte read
#              right, and the sink served each request once.
# Each: every process exits 0; the three JSON summaries agree exactly
# (mr_accounting); the impairments happened; the retransmissions the sink
# did not find spurious are the data frames the fabric dropped or corrupted:
# at most all it dropped and corrupted, at least that less the gen's
# non-data frames (probes, CM). Then option errors: one line, exit 2.
# Prints TAP. Usage: gen_sink_test.sh GEN SINK FABRIC
MR_GEN="$1" MR_SINK="$2" MR_FABRIC="$3"
MR_TIMEOUT=120
# shellcheck source=gen_fabric_sink.sh
. "$(dirname "$0")/gen_fabric_sink.sh"
mr_tap_test

echo "1..52"
run_case() {  # NAME A_TO_B B_TO_A [GEN-ARGS...]
  local name="$1" a_to_b="$2" b_to_a="$3"
  shift 3
  if ! mr_start_fabric "$a_to_b" "$b_to_a" --stats-interval 0; then
    not_ok "$name: metaroce-fabric started and listens on both memif sockets"
    mr_cleanup
    return 1
  fi
  mr_start_sink
  mr_run_gen -c 4 --paths 4 --path-window 16 -n 400 --size 32-65536 --seed 7 "$@"
  mr_finish
  check "$name: gen, sink and fabric exit 0 (gen $MR_GEN_STATUS, sink $MR_SINK_STATUS, fabric $MR_FABRIC_STATUS)" \
    "[ $MR_GEN_STATUS = 0 ] && [ $MR_SINK_STATUS = 0 ] && [ $MR_FABRIC_STATUS = 0 ]"
  check "$name: gen and sink report ok, 1600 messages of 4 connections, all closed" \
    "[ \"\$(q gen .ok)\" = true ] && [ \"\$(q sink .ok)\" = true ] && [ \"\$(q gen '.posted + .reads.posted')\" = 1600 ] \
     && [ \"\$(q sink .connections_closed)\" = 4 ] && [ \"\$(q gen .sink_reports)\" = 4 ]"
  local line
  while IFS= read -r line; do
    case "$line" in
      "ok - "*) ok "$name: ${line#ok - }" ;;
      *) not_ok "$name: ${line#not ok - }" ;;
    esac
  done < <(mr_accounting)
  local re spurious dropped corrupted nondata
  re=$(q gen .connection_counters.retransmitted_packets) spurious=$(q sink .connection_counters.spurious_retransmissions)
  dropped=$(q fabric .a_to_b.dropped.total) corrupted=$(q fabric .a_to_b.corrupted)
  nondata=$(q gen '.connection_counters.probes_sent + .connection_counters.acks_sent + .cm.requests_sent
                   + .cm.ready_sent + .cm.disconnects_sent')
  echo "# $name: a->b dropped $dropped (random $(q fabric .a_to_b.dropped.random_loss), blackhole" \
       "$(q fabric .a_to_b.dropped.blackhole)), corrupted $corrupted; gen retransmitted $re, sink spurious $spurious," \
       "gen non-data frames $nondata, paths failed $(q gen .connection_counters.paths_failed)"
  check "$name: retransmitted - spurious is between the a->b losses less the non-data frames and all of them" \
    "[ -n '$re' ] && [ $((re - spurious)) -le $((dropped + corrupted)) ] && [ $((re - spurious)) -ge $((dropped + corrupted - nondata)) ]"
}

run_case loss "loss 1% paths 4 spread 20us corrupt 0.1%" "loss 1% paths 4 spread 20us corrupt 0.1%"
check "loss: the fabric lost and corrupted frames both ways, blackholed none" \
  "[ \"\$(q fabric .a_to_b.dropped.random_loss)\" -gt 0 ] && [ \"\$(q fabric .a_to_b.corrupted)\" -gt 0 ] \
   && [ \"\$(q fabric .b_to_a.dropped.random_loss)\" -gt 0 ] && [ \"\$(q fabric .a_to_b.dropped.blackhole)\" = 0 ]"

run_case blackhole "loss 1% paths 4 spread 20us corrupt 0.1% blackhole 1 at 0ms" \
  "loss 1% paths 4 spread 20us corrupt 0.1%"
check "blackhole: path 1 swallowed frames, the gen failed paths over and still delivered everything" \
  "[ \"\$(q fabric .a_to_b.dropped.blackhole)\" -gt 0 ] && [ \"\$(q gen .connection_counters.paths_failed)\" -gt 0 ] \
   && [ \"\$(q gen .ok)\" = true ]"

run_case reads "loss 1% paths 4 spread 20us corrupt 0.1%" "loss 1% paths 4 spread 20us corrupt 0.1%" \
  --mix write:1,write-imm:1,send:1,read:3
reads=$(q gen '.reads | [.posted, .completed, .verified, .posted_bytes, .verified_bytes, .wrong, .wrong_bytes] | @tsv')
served=$(q sink .connection_counters.read_requests_served)
echo "# reads: gen posted, completed, verified, bytes asked, bytes verified, wrong, wrong bytes: $reads; sink served $served"
check "reads: issued == completed == verified (> 300) == served by the sink, bytes read == bytes asked, 0 wrong" \
  "set -- $reads && [ \$1 -gt 300 ] && [ \$1 = \$2 ] && [ \$1 = \$3 ] && [ \$4 = \$5 ] && [ \$4 -gt 0 ] \
   && [ \$6 = 0 ] && [ \$7 = 0 ] && [ '$served' = \$1 ] && [ \"\$(q sink .connection_counters.read_access_errors)\" = 0 ] \
   && [ \"\$(q gen .connection_counters.read_response_mismatch)\" = 0 ]"
check "reads: the fabric lost frames both ways and the sink resent READ answers" \
  "[ \"\$(q fabric .b_to_a.dropped.random_loss)\" -gt 0 ] && [ \"\$(q sink .connection_counters.retransmitted_packets)\" -gt 0 ]"

# IPv6, and no --peer-mac: the gen asks for the sink's MAC by neighbour
# solicitation, through the fabric (a light delay: nothing lost, so exactly
# one request and one answer), and the accounting above still holds.
MR_GEN_IP=fd00:99::1 MR_SINK_IP=fd00:99::2 MR_GEN_PEER_MAC=
if mr_start_fabric "delay 10us" "delay 10us" --stats-interval 0; then
  mr_start_sink
  mr_run_gen -c 2 --paths 4 -n 200 --size 32-65536 --seed 9
  mr_finish
  check "ipv6, no --peer-mac: gen, sink and fabric exit 0, 400 messages (gen $MR_GEN_STATUS, sink $MR_SINK_STATUS, fabric $MR_FABRIC_STATUS)" \
    "[ $MR_GEN_STATUS = 0 ] && [ $MR_SINK_STATUS = 0 ] && [ $MR_FABRIC_STATUS = 0 ] && [ \"\$(q gen .ok)\" = true ] \
     && [ \"\$(q sink .ok)\" = true ] && [ \"\$(q gen .posted)\" = 400 ]"
  while IFS= read -r line; do
    case "$line" in
      "ok - "*) ok "ipv6, no --peer-mac: ${line#ok - }" ;;
      *) not_ok "ipv6, no --peer-mac: ${line#not ok - }" ;;
    esac
  done < <(mr_accounting)
  check "ipv6, no --peer-mac: the gen asked once and learned the sink's MAC, the sink answered once" \
    "[ \"\$(q gen .engine.nd_solicitations_sent)\" = 1 ] && [ \"\$(q gen .engine.nd_advertisements_learned)\" = 1 ] \
     && [ \"\$(q gen .engine.resolutions_failed)\" = 0 ] && [ \"\$(q sink .engine.nd_solicitations_answered)\" = 1 ] \
     && grep -q '(next hop 02:00:00:00:00:02)' '$MR_WORK/gen.out'"
else
  for i in $(seq 10); do not_ok "ipv6, no --peer-mac: metaroce-fabric started and listens on both memif sockets"; done
  mr_cleanup
fi
MR_GEN_IP=10.99.0.1 MR_SINK_IP=10.99.0.2 MR_GEN_PEER_MAC=$MR_SINK_MAC

# Option errors: one line that names the fix, exit 2, before EAL starts.
out=$("$MR_GEN" --port p --local-ip 10.0.0.1 --sink 10.0.0.2 --peer-mac 02:00:00:00:00:02 --size 16 2>&1)
check "gen --size 16: exit 2, says the range" \
  "[ $? = 2 ] && [ \"\$(echo \"\$out\" | head -1)\" = \"metaroce-gen: --size '16': size 16 is out of range: give 32..1073741824 bytes (every message starts with its 32-byte header)\" ]"
out=$("$MR_GEN" --port p --local-ip 10.0.0.1 --sink 10.0.0.2 --peer-mac 02:00:00:00:00:02 --open-loop 2>&1)
check "gen --open-loop without a rate: exit 2, names --gbps / --msg-rate" \
  "[ $? = 2 ] && [ \"\$(echo \"\$out\" | head -1)\" = 'metaroce-gen: --open-loop needs an arrival rate: give --gbps G or --msg-rate M' ]"
out=$("$MR_SINK" --port p 2>&1)
check "sink without --local-ip: exit 2, names it" \
  "[ $? = 2 ] && [ \"\$(echo \"\$out\" | head -1)\" = 'metaroce-sink: give this end'\"'\"'s address: --local-ip ADDR (A.B.C.D, or IPv6)' ]"
out=$("$MR_GEN" --port p --local-ip fd00::1 --sink 10.0.0.2 2>&1)
check "gen --sink IPv4 from an IPv6 --local-ip: exit 2, says to give one family" \
  "[ $? = 2 ] && [ \"\$(echo \"\$out\" | head -1)\" = 'metaroce-gen: --sink 10.0.0.2 is IPv4 but --local-ip fd00::1 is IPv6: give both of one family' ]"
out=$("$MR_GEN" --port p --local-ip fd00::1 --sink fd00::2 --gateway fd00::zz 2>&1)
check "gen --gateway that is not an address: exit 2, names the forms" \
  "[ $? = 2 ] && [ \"\$(echo \"\$out\" | head -1)\" = \"metaroce-gen: --gateway 'fd00::zz' is not an IP address: give A.B.C.D, or an IPv6 address such as fd00::1\" ]"
exit 0
