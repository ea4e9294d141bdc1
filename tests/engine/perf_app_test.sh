#!/bin/sh
# metaroce-perf as a user runs it: loopback runs exit 0 and print the table,
# --verify holds under an inline lossy fabric, a capture decodes cleanly with
# metaroce-decode, and bad options exit 2 with a hint. Prints TAP.
# Usage: perf_app_test.sh PATH/metaroce-perf PATH/metaroce-decode
perf="$1"
decode="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  sed 's/^/# /' "$work/out" | tail -20
}

echo "1..45"
"$perf" --loopback -s 65536 -n 2000 --verify >"$work/out" 2>&1
status=$?
check "loopback 64 KiB x 2000 --verify exits 0" "[ $status -eq 0 ]"
check "prints the perftest table with 2000 iterations" \
  "grep -q '#bytes     #iterations    BW peak' '$work/out' && grep -Eq '^ 65536 +2000 ' '$work/out'"
check "verify says every byte was checked" "grep -q 'verify: every byte of every message checked, all correct' '$work/out'"

"$perf" --loopback -s 65536 -n 2000 --verify --fabric "loss 1%" --zero-copy-threshold 2048 --json "$work/loss.json" >"$work/out" 2>&1
status=$?
check "--fabric 'loss 1%' --verify, payloads attached in place, exits 0" "[ $status -eq 0 ]"
check "the fabric dropped frames, payloads went zero-copy, every message arrived" \
  "grep -Eq '^ 65536 +2000 ' '$work/out' && grep -q '\"ok\":true' '$work/loss.json' && ! grep -q '\"dropped_random_loss\":0,' '$work/loss.json' \
   && ! grep -q '\"host_a\":{[^}]*\"tx_zero_copy\":0,' '$work/loss.json'"

# READs through loss, each slot rewritten with its next message's pattern
# as soon as its READ completed: rocev2 answers READs again that their
# requester re-issued from a gap, possibly after it has them all and the
# memory changed. Every answer's ICRC must still match its bytes (none is
# counted as bad_icrc), in both modes, payloads attached or copied.
for mode in metaroce rocev2; do
  for threshold in 2048 65535; do
    "$perf" --loopback --mode $mode --op read -s 65536 -n 2000 --verify --fabric "loss 1%" \
      --zero-copy-threshold $threshold --json "$work/read.json" >"$work/out" 2>&1
    status=$?
    check "$mode --op read --fabric 'loss 1%' --verify, zero-copy threshold $threshold: exit 0, no bad ICRC at either end" \
      "[ $status -eq 0 ] && jq -e '.ok and .results[0].iterations == 2000 and .results[0].wrong_messages == 0
         and .host_a.\"rx_parse_error.bad_icrc\" == 0 and .host_b.\"rx_parse_error.bad_icrc\" == 0
         and .fabric_forward.dropped_random_loss > 0 and .fabric_backward.dropped_random_loss > 0' '$work/read.json' >/dev/null"
  done
done

"$perf" -s 8192 -n 300 --op send --fabric "loss 1%" --capture "$work/run.pcap" >"$work/out" 2>&1
status=$?
check "--capture run exits 0" "[ $status -eq 0 ] && [ -s '$work/run.pcap' ]"
"$decode" "$work/run.pcap" >"$work/decoded.jsonl" 2>"$work/out"
status=$?
check "metaroce-decode decodes every captured frame (exit 0, no error)" \
  "[ $status -eq 0 ] && [ \$(wc -l <'$work/decoded.jsonl') -gt 600 ] && ! grep -q '\"error\"' '$work/decoded.jsonl'"

"$perf" -q 3 --streams 2 --op write-imm -s 4096 -n 3000 --verify --cc metaroce --json "$work/q.json" >"$work/out" 2>&1
status=$?
check "-q 3 --streams 2 write-imm with --cc metaroce: every message verified, in order per connection and stream" \
  "[ $status -eq 0 ] && grep -Eq '^ 4096 +3000 ' '$work/out' && grep -q 'verify: every byte of every message checked, all correct' '$work/out'"
check "the connections' counters add up to 3000 data packets sent and 3000 receive completions" \
  "grep -q '\"connection_a\":{[^}]*\"data_packets_sent\":3000,' '$work/q.json' && grep -q '\"connection_b\":{[^}]*\"receive_completions\":3000,' '$work/q.json'"
"$perf" --mode rocev2 --cc dcqcn --op send -s 100000 -n 200 --verify --fabric "loss 0.5%" >"$work/out" 2>&1
status=$?
check "rocev2 with dcqcn, SEND through 0.5% loss: every byte verified" \
  "[ $status -eq 0 ] && grep -q 'verify: every byte of every message checked, all correct' '$work/out'"
# Every operation in both modes with one and with eight streams, through 1%
# loss: metaroce completes each stream in order; rocev2 has one ordered
# receive queue per connection and refuses --streams above 1 in one line.
for mode in metaroce rocev2; do
  for op in write write-imm send; do
    for streams in 1 8; do
      "$perf" --mode $mode --op $op --streams $streams -s 1000 -n 400 --verify --fabric "loss 1%" >"$work/out" 2>&1
      status=$?
      if [ $mode = rocev2 ] && [ $streams -gt 1 ]; then
        check "rocev2 $op --streams $streams: exit 2, one line saying to give -q N instead" \
          "[ $status -eq 2 ] && head -n 1 '$work/out' | grep -q 'one ordered receive queue per connection: drop --streams or give --streams 1 (for N queues, give -q N)'"
      else
        check "$mode $op --streams $streams through 1% loss: every message verified" \
          "[ $status -eq 0 ] && grep -Eq '^ 1000 +400 ' '$work/out' && grep -q 'verify: every byte of every message checked, all correct' '$work/out'"
      fi
    done
  done
done
# Faults on the wire: 1% of the frames corrupted, 5% duplicated, both ways.
for mode in metaroce rocev2; do
  "$perf" --mode $mode -s 65536 -n 2000 --verify --fabric "corrupt 1% duplicate 5%" --json "$work/fault.json" >"$work/out" 2>&1
  status=$?
  check "$mode through 1% corruption and 5% duplication: every byte verified, corrupt frames dropped as bad_icrc, duplicates dropped" \
    "[ $status -eq 0 ] && grep -q 'verify: every byte of every message checked, all correct' '$work/out' \
     && jq -e '(.host_a.\"rx_parse_error.bad_icrc\" + .host_b.\"rx_parse_error.bad_icrc\") > 0 and
               (.host_a.\"rx_parse_error.bad_icrc\" + .host_b.\"rx_parse_error.bad_icrc\") <= (.fabric_forward.corrupted + .fabric_backward.corrupted)
               and .connection_b.duplicate_packets > 0' '$work/fault.json' >/dev/null"
done
# --port with EAL arguments that name no memory options gets the presets'
# defaults (-l 0, --no-pci, and --no-huge -m 512 --no-shconf on a machine
# without free hugepages, where EAL would fail without them): the client
# starts on a net_null port and, with nobody to answer, gives up after its
# --cm-timeout.
prefix="metaroce-perf-test-$$"
"$perf" --client 10.99.9.2 --peer-mac 02:00:00:00:00:02 --port net_null0 --local-ip 10.99.9.1 --cm-timeout 0.3 \
  -n 1 -s 64 -- --vdev net_null0,no-rx=1 --file-prefix "$prefix" --log-level=error >"$work/out" 2>&1
status=$?
rm -rf "/var/run/dpdk/$prefix" "${XDG_RUNTIME_DIR:-/tmp}/dpdk/$prefix"
check "--port with EAL arguments without memory options: EAL starts without hugepages, the client asks and times out" \
  "[ $status -eq 1 ] && grep -q '^metaroce-perf: no answer from 10.99.9.2 after 3 connection requests' '$work/out' \
   && ! grep -qi 'hugepage\|EAL initialisation failed' '$work/out'"

# Without --peer-mac the client asks for the server's MAC by ARP: on a port
# where nothing answers, it gives up after 3 tries a second apart with one
# line that says what to check.
prefix="metaroce-perf-test-arp-$$"
timeout 30 "$perf" --client 10.99.9.2 --port net_null0 --local-ip 10.99.9.1 -n 1 -s 64 \
  -- --vdev net_null0,no-rx=1 --file-prefix "$prefix" --log-level=error >"$work/out" 2>&1
status=$?
rm -rf "/var/run/dpdk/$prefix" "${XDG_RUNTIME_DIR:-/tmp}/dpdk/$prefix"
check "--client without --peer-mac and nobody to answer ARP: exit 1 after 3 tries, one line naming what to do" \
  "[ $status -eq 1 ] && grep -qx 'metaroce-perf: no ARP reply from 10.99.9.2 after 3 tries over 3.0 s on port net_null0: check the address (a peer on another subnet needs --gateway) and the link, or give --peer-mac' '$work/out'"

"$perf" --loopback --raw -s 64 -n 200000 --verify --json "$work/raw.json" >"$work/out" 2>&1
status=$?
check "--raw 64 B x 200000 --verify: exits 0, every frame in order with every byte right" \
  "[ $status -eq 0 ] && grep -q '^ 64 *200000 ' '$work/out' \
   && grep -q 'verify: every byte of every message checked, all correct' '$work/out'"
check "--raw reports both lcores' cycles and its frames in the JSON (158-byte frames, none missing)" \
  "grep -q 'size 64: frames of 158 bytes (a metaroce WRITE packet of that payload)' '$work/out' \
   && grep -q 'size 64: sender lcore busy' '$work/out' && grep -q 'size 64: receiver lcore busy' '$work/out' \
   && grep -q '\"raw\":true' '$work/raw.json' && grep -q '\"iterations\":200000' '$work/raw.json' \
   && grep -q '\"missing_messages\":0' '$work/raw.json'"
"$perf" --loopback --raw --fabric "loss 1%" >"$work/out" 2>&1
status=$?
check "--raw with --fabric exits 2 saying what to drop" \
  "[ $status -eq 2 ] && grep -q -- '--raw sends bare frames between the loopback.s two lcores, with no transport: drop --fabric' '$work/out'"
"$perf" --loopback --raw -s 8192 >"$work/out" 2>&1
status=$?
check "--raw with a size above the MTU exits 1 naming the limit" \
  "[ $status -eq 1 ] && grep -q -- 'every size must be at most the MTU (4096 B); give -s 4096 or less' '$work/out'"
"$perf" --loopback -s 64 -n 20000 -- -l 0 --no-huge -m 512 --no-shconf --no-pci >"$work/out" 2>&1
status=$?
check "both ends on one lcore: the sender's own cycles (the receiver's turns left out) and the receiver's" \
  "[ $status -eq 0 ] && grep -q 'size 64: sender (receiver on the same lcore, its turns left out) busy' '$work/out' \
   && grep -q \"size 64: receiver (on the sender's lcore) busy\" '$work/out'"

# Planes: a net_ring pair per plane, each connection over all of them.
for planes in 2 4; do
  "$perf" --loopback --planes $planes --paths 8 -s 65536 -n 2000 --verify --json "$work/planes.json" >"$work/out" 2>&1
  status=$?
  check "--planes $planes --verify: exit 0, every plane carries data, its port took its frames, nothing misrouted" \
    "[ $status -eq 0 ] && jq -e '.ok and .results[0].iterations == 2000 and .results[0].wrong_messages == 0
       and (.planes | length) == $planes and all(.planes[]; .data_packets > 0 and .sender_port_frames >= .data_packets)
       and ([.planes[].sender_port_frames] | add) == .host_a.tx_frames
       and .host_a.tx_no_such_port == 0 and .host_a.tx_dropped_link_down == 0' '$work/planes.json' >/dev/null"
done
"$perf" --loopback --planes 2 --lcores 2 -q 2 >"$work/out" 2>&1
status=$?
check "--planes 2 with --lcores exits 2 and says what to drop" \
  "[ $status -eq 2 ] && grep -q -- '--planes 2 is for --loopback over a net_ring pair per plane: drop --lcores, or --planes' '$work/out'"
"$perf" --loopback --planes 8 --paths 4 >"$work/out" 2>&1
status=$?
check "--planes 8 with --paths 4 exits 2 and asks for more paths" \
  "[ $status -eq 2 ] && grep -q -- '--planes 8 with --paths 4: every plane needs a path: give --paths 8 or more' '$work/out'"

"$perf" --cc nosuch >"$work/out" 2>&1
status=$?
check "an unknown --cc exits 2 and names the choices" \
  "[ $status -eq 2 ] && grep -q -- \"--cc 'nosuch' is not a congestion control: give metaroce, dcqcn, fixed or none\" '$work/out'"

"$perf" --size 0 >"$work/out" 2>&1
status=$?
check "a bad value exits 2 with one line and the hint" \
  "[ $status -eq 2 ] && grep -q -- '--size 0 is out of range' '$work/out' && grep -q \"Try 'metaroce-perf --help'\" '$work/out'"
"$perf" --no-such-flag >"$work/out" 2>&1
status=$?
check "an unknown option exits 2" "[ $status -eq 2 ] && grep -q \"Try 'metaroce-perf --help'\" '$work/out'"
# Addresses of both families, not mixed; --peer-mac is optional and checked when given.
"$perf" --client fd00::2 --port net_null0 --local-ip 10.99.9.1 >"$work/out" 2>&1
status=$?
check "--client IPv6 with --local-ip IPv4 exits 2 and says to give one family" \
  "[ $status -eq 2 ] && grep -q -- '--client fd00::2 is IPv6 but --local-ip 10.99.9.1 is IPv4: give both of one family' '$work/out'"
"$perf" --client fd00::2 --gateway fd00::1:1 --port net_null0 --local-ip fd00::1 --peer-mac 02:00:00:00:00 >"$work/out" 2>&1
status=$?
check "a bad --peer-mac exits 2 and names the form" \
  "[ $status -eq 2 ] && grep -q -- \"--peer-mac '02:00:00:00:00' is not a MAC address: give xx:xx:xx:xx:xx:xx\" '$work/out'"
"$perf" --server --port net_null0 --local-ip fd00::1 --gateway fd00::9 >"$work/out" 2>&1
status=$?
check "--gateway on the server exits 2: it answers each client at the MAC its frames came from" \
  "[ $status -eq 2 ] && grep -q -- '--peer-mac and --gateway are for --client' '$work/out'"
exit $failed
