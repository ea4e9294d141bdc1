#!/bin/bash
# rocev2 mode as a standard RoCEv2 peer sees it: two metaroce-perf
# processes in two network namespaces on net_af_packet ports over a veth
# pair, both ends captured with dumpcap and decoded by tshark (an
# independent decoder). Checks: every RoCEv2 frame either way carries the
# default partition's P_Key 0xffff (65535) unless both ends are given
# --pkey; both ends print their GID the way perftest does (IPv4-mapped).
# Then a connection set up by hand (--peer-qpn/--peer-psn, the server's
# printed VAddr and RKey given to the client as --remote-addr/--rkey): no
# connection manager frame on the wire, the QPNs and first PSN as given.
# Then perftest's out-of-band TCP exchange (--oob-port / --oob) over a
# second veth pair with kernel addresses, captured: two 108-byte messages
# in the documented format (doc/WIRE.md), client's first, carrying what
# each end printed. Then --cm ibta: rdma_cm's IBTA CM messages (class
# 0x07 REQ/REP/RTU/DREQ/DREP) on QP 1, as tshark decodes them. Last, metaroce-gen -> metaroce-sink in rocev2 with
# --pkey and --qp-timeout at both ends: every message verified, the P_Key
# on every data frame.
# Root only (skips else); always cleans up. TAP.
# Usage: interop_test.sh PATH/metaroce-perf DRIVERS-CONFIG-DIR PATH/metaroce-gen PATH/metaroce-sink
perf="$1"
presets="$2"
gen="$3"
sink="$4"
if [ "$(id -u)" -ne 0 ]; then
  echo "1..0 # SKIP not root: network namespaces and veths need root (run tools/test as root)"
  exit 0
fi
for tool in ip tshark dumpcap; do
  if ! command -v "$tool" >/dev/null; then
    echo "1..0 # SKIP '$tool' is missing: run tools/setup (it installs iproute2 and tshark)"
    exit 0
  fi
done
tag=$$
ns_c="mr-ic-$tag" ns_s="mr-is-$tag"
work=$(mktemp -d)
chmod 755 "$work"  # dumpcap may drop to another user
started=""
cleanup() {
  for pid in $server_pid $client_pid $capture_pids; do kill -9 "$pid" 2>/dev/null; done
  for ns in "$ns_c" "$ns_s"; do ip netns del "$ns" 2>/dev/null; done
  for pid in $started; do rm -rf "/var/run/dpdk/metaroce-perf-$pid"; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1)); failed=1; echo "not ok $n - $1"
  for f in "$work"/*.out; do [ -f "$f" ] && tail -12 "$f" | sed "s|^|# $(basename "$f"): |"; done
}
check() { if eval "$2"; then ok "$1"; else not_ok "$1"; fi; }

set -e
ip netns add "$ns_c"
ip netns add "$ns_s"
ip link add c0 netns "$ns_c" type veth peer name s0 netns "$ns_s"
for pair in "$ns_c c0" "$ns_s s0"; do
  set -- $pair
  ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
  ip -n "$1" link set "$2" mtu 9000 up
done
# The out-of-band network: a second veth pair, the kernel's own addresses.
ip link add m0 netns "$ns_c" type veth peer name m1 netns "$ns_s"
ip -n "$ns_c" addr add 10.80.0.1/24 dev m0
ip -n "$ns_s" addr add 10.80.0.2/24 dev m1
ip -n "$ns_c" link set m0 up
ip -n "$ns_s" link set m1 up
mac_of() { ip -n "$1" -o link show "$2" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p'; }
mac_s0=$(mac_of "$ns_s" s0) mac_c0=$(mac_of "$ns_c" c0)
set +e
common=(--preset "$presets/net_af_packet.ini" --idle-sleep-us 5 --mode rocev2)

# CAPTURE=NAME capture_start: dumpcap on both veth ends into NAME-s.pcap and
# NAME-c.pcap. Each end's capture holds what arrives there (net_af_packet
# transmits past the kernel's taps): together, both directions.
capture_start() {
  capture_pids=
  local side
  for side in "$ns_s s0 s" "$ns_c c0 c"; do
    set -- $side
    ip netns exec "$1" dumpcap -q -i "$2" -w "$work/$CAPTURE-$3.pcap" >/dev/null 2>&1 &
    capture_pids="$capture_pids $!"
  done
  for _ in $(seq 50); do [ -s "$work/$CAPTURE-s.pcap" ] && [ -s "$work/$CAPTURE-c.pcap" ] && break; sleep 0.1; done
}
capture_stop() {
  sleep 0.5
  local pid
  for pid in $capture_pids; do kill -INT "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  capture_pids=
}
# run_pair NAME EXTRA-ARGS...: a server and a client, -n 200 64 KiB WRITE_IMM
# verified; statuses in $server_status, $client_status.
run_pair() {
  local name="$1"; shift
  ip netns exec "$ns_s" "$perf" --server --iface s0 --local-ip 10.79.0.2 "${common[@]}" "$@" \
    >"$work/$name-server.out" 2>&1 &
  server_pid=$!
  started="$started $server_pid"
  sleep 1
  timeout 60 ip netns exec "$ns_c" "$perf" --client 10.79.0.2 --peer-mac "$mac_s0" --iface c0 \
    --local-ip 10.79.0.1 "${common[@]}" "$@" -s 65536 -n 200 --op write-imm --verify \
    >"$work/$name-client.out" 2>&1 &
  client_pid=$!
  started="$started $client_pid"
  wait "$client_pid"
  client_status=$?
  client_pid=
  timeout 10 tail --pid="$server_pid" -f /dev/null
  kill -9 "$server_pid" 2>/dev/null
  wait "$server_pid"
  server_status=$?
  server_pid=
}
# fields NAME FILTER FIELD: FIELD of the RoCEv2 frames of both captures that match FILTER.
fields() {
  local side
  for side in s c; do
    tshark -r "$work/$1-$side.pcap" -Y "infiniband${2:+ && $2}" -T fields -e "$3" 2>/dev/null
  done
}
# pkeys NAME [FILTER]: their distinct BTH P_Keys; frames NAME [FILTER]: how many.
pkeys() { fields "$1" "$2" infiniband.bth.p_key | sort -u | tr '\n' ' '; }
frames() { fields "$1" "$2" infiniband.bth.opcode | wc -l; }

echo "1..19"
CAPTURE=default capture_start
run_pair default
capture_stop
check "rocev2 with the defaults: 200 messages verified, both ends exit 0" \
  "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] \
   && grep -q 'closed: 200 messages checked, 0 wrong' '$work/default-server.out'"
echo "# default: $(frames default) RoCEv2 frames captured, $(frames default 'infiniband.bth.destqp != 1') to data QPs;" \
     "P_Keys: $(pkeys default)"
check "every RoCEv2 frame both ways (data, ACKs, connection manager) carries P_Key 0xffff" \
  "[ \$(frames default 'infiniband.bth.opcode == 0x11') -ge 10 ] && [ \$(frames default 'infiniband.bth.destqp == 1') -ge 4 ] \
   && [ \$(frames default 'infiniband.bth.destqp != 1') -ge 1000 ] && [ '$(pkeys default)' = '65535 ' ]"
check "both ends print their GID as perftest does (IPv4-mapped, decimal bytes)" \
  "grep -q '^ GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:79:00:02$' '$work/default-server.out' \
   && grep -q '^ GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:79:00:01$' '$work/default-client.out'"
check "both ends print the IBTA timers a standard peer should match" \
  "grep -q 'P_Key 0xffff, local ACK timeout 14 (67.1 ms, backing off), retry count 7, RNR retry 7 (no limit)' \
     '$work/default-server.out' && grep -q '^ rocev2: P_Key 0xffff, local ACK timeout 14' '$work/default-client.out'"

CAPTURE=chosen capture_start
run_pair chosen --pkey 0x8123 --qp-timeout 12 --retry-count 5
capture_stop
check "rocev2 --pkey 0x8123 at both ends: 200 messages verified" \
  "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] \
   && grep -q 'closed: 200 messages checked, 0 wrong' '$work/chosen-server.out'"
echo "# chosen: data-QP P_Keys: $(pkeys chosen 'infiniband.bth.destqp != 1')"
check "every frame to a data QP carries P_Key 0x8123 (33059)" \
  "[ \$(frames chosen 'infiniband.bth.destqp != 1') -ge 1000 ] \
   && [ '$(pkeys chosen 'infiniband.bth.destqp != 1')' = '33059 ' ]"

# The IBTA CM (--cm ibta at both ends): rdma_cm's REQ/REP/RTU, DREQ/DREP
# (class 0x07) on QP 1, decoded by tshark's CM dissector.
CAPTURE=ibta capture_start
run_pair ibta --cm ibta
capture_stop
check "--cm ibta at both ends: 200 messages verified, both ends exit 0" \
  "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] \
   && grep -q 'closed: 200 messages checked, 0 wrong' '$work/ibta-server.out'"
cm_classes=$(fields ibta 'infiniband.bth.destqp == 1' infiniband.mad.mgmtclass | sort -u | tr '\n' ' ')
cm_attributes=$(fields ibta 'infiniband.bth.destqp == 1' infiniband.mad.attributeid | sort -u | tr '\n' ' ')
rep_qpn=$(fields ibta 'infiniband.mad.attributeid == 0x0013' infiniband.cm.rep.localqpn | head -1)
req_qpn=$(fields ibta 'infiniband.mad.attributeid == 0x0010' infiniband.cm.req.localqpn | head -1)
req_mtu=$(fields ibta 'infiniband.mad.attributeid == 0x0010' infiniband.cm.req.pppmtu | head -1)
echo "# ibta: QP 1 classes: $cm_classes; attributes: $cm_attributes; REQ QPN $req_qpn, REP QPN $rep_qpn, path MTU $req_mtu"
check "every frame to QP 1 is an IBTA CM MAD (class 0x07): REQ, REP, RTU, DREQ, DREP" \
  "[ '$cm_classes' = '0x07 ' ] && [ '$cm_attributes' = '0x0010 0x0013 0x0014 0x0015 0x0016 ' ]"
check "the data goes to the QPN of the REP, the answers to the QPN of the REQ, at the REQ's path MTU (4096: 5)" \
  "[ -n '$rep_qpn' ] && [ \$(frames ibta 'infiniband.bth.destqp == $rep_qpn') -ge 1000 ] \
   && [ \$(frames ibta 'infiniband.bth.destqp == $req_qpn') -ge 1 ] && [ '$req_mtu' = 0x05 ]"

# Set up by hand: the server first (it prints its buffer), then the client.
CAPTURE=by-hand capture_start
ip netns exec "$ns_s" "$perf" --server --iface s0 --local-ip 10.79.0.2 "${common[@]}" --peer-ip 10.79.0.1 \
  --peer-mac "$mac_c0" --qpn 0x111 --psn 0x654321 --peer-qpn 0x222 --peer-psn 0x123456 \
  -s 65536 -n 200 --op write-imm --verify >"$work/by-hand-server.out" 2>&1 &
server_pid=$!
started="$started $server_pid"
for _ in $(seq 100); do grep -q '^ local address:' "$work/by-hand-server.out" 2>/dev/null && break; sleep 0.1; done
rkey=$(sed -n 's/^ local address: .* RKey \(0x[0-9a-f]*\) .*/\1/p' "$work/by-hand-server.out")
vaddr=$(sed -n 's/^ local address: .* VAddr \(0x[0-9a-f]*\).*/\1/p' "$work/by-hand-server.out")
echo "# by hand: the server printed RKey $rkey VAddr $vaddr"
check "the server set up by hand prints its QPN, PSN, RKey and VAddr as perftest does" \
  "grep -q '^ local address: LID 0000 QPN 0x000111 PSN 0x654321 RKey 0x[0-9a-f]\{8\} VAddr 0x[0-9a-f]\{16\}$' \
     '$work/by-hand-server.out'"
timeout 60 ip netns exec "$ns_c" "$perf" --client 10.79.0.2 --peer-mac "$mac_s0" --iface c0 --local-ip 10.79.0.1 \
  "${common[@]}" --qpn 0x222 --psn 0x123456 --peer-qpn 0x111 --peer-psn 0x654321 --remote-addr "$vaddr" \
  --rkey "$rkey" -s 65536 -n 200 --op write-imm --verify >"$work/by-hand-client.out" 2>&1
client_status=$?
timeout 10 tail --pid="$server_pid" -f /dev/null
kill -9 "$server_pid" 2>/dev/null
wait "$server_pid"
server_status=$?
server_pid=
capture_stop
check "set up by hand: 200 messages verified by the server, both ends exit 0" \
  "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] \
   && grep -q 'closed: 200 messages checked, 0 wrong' '$work/by-hand-server.out'"
first_psn=$(tshark -r "$work/by-hand-s.pcap" -Y 'infiniband.bth.destqp == 0x111' -T fields -e infiniband.bth.psn \
  2>/dev/null | head -1)
echo "# by hand: $(frames by-hand) frames, $(frames by-hand 'infiniband.bth.destqp == 1') to QP 1," \
     "$(frames by-hand 'infiniband.bth.destqp == 0x111') to 0x111, $(frames by-hand 'infiniband.bth.destqp == 0x222')" \
     "to 0x222, first PSN to 0x111: $first_psn; P_Keys: $(pkeys by-hand)"
check "no connection manager frame on the wire; data to QP 0x111 from PSN 0x123456, answers to QP 0x222" \
  "[ \$(frames by-hand 'infiniband.bth.destqp == 1') -eq 0 ] && [ '$first_psn' = 1193046 ] \
   && [ \$(frames by-hand 'infiniband.bth.destqp == 0x111') -ge 1000 ] \
   && [ \$(frames by-hand 'infiniband.bth.destqp == 0x222') -ge 1 ] \
   && [ \$(frames by-hand 'infiniband.bth.destqp != 0x111 && infiniband.bth.destqp != 0x222') -eq 0 ] \
   && [ '$(pkeys by-hand)' = '65535 ' ]"
check "the client set up by hand prints its own values and the server's" \
  "grep -q '^ local address: LID 0000 QPN 0x000222 PSN 0x123456 RKey 0x00000000 VAddr 0x0000000000000000$' \
     '$work/by-hand-client.out' \
   && grep -q '^ remote address: QPN 0x000111 PSN 0x654321 RKey $rkey VAddr $vaddr$' '$work/by-hand-client.out'"

# perftest's out-of-band exchange: the server learns the client's QPN, PSN
# and GID (its address), and answers with its own and its buffer.
ip netns exec "$ns_s" dumpcap -q -i m1 -f 'tcp port 18515' -w "$work/oob.pcap" >/dev/null 2>&1 &
oob_capture=$!
capture_pids="$oob_capture"
for _ in $(seq 50); do [ -s "$work/oob.pcap" ] && break; sleep 0.1; done
ip netns exec "$ns_s" "$perf" --server --iface s0 --local-ip 10.79.0.2 "${common[@]}" --oob-port 18515 \
  -s 65536 -n 200 --op write-imm --verify >"$work/oob-server.out" 2>&1 &
server_pid=$!
started="$started $server_pid"
sleep 1
timeout 60 ip netns exec "$ns_c" "$perf" --client 10.79.0.2 --peer-mac "$mac_s0" --iface c0 --local-ip 10.79.0.1 \
  "${common[@]}" --oob 10.80.0.2:18515 -s 65536 -n 200 --op write-imm --verify >"$work/oob-client.out" 2>&1
client_status=$?
timeout 10 tail --pid="$server_pid" -f /dev/null
kill -9 "$server_pid" 2>/dev/null
wait "$server_pid"
server_status=$?
server_pid=
capture_stop
check "out-of-band exchange: 200 messages verified by the server, both ends exit 0" \
  "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] \
   && grep -q 'closed: 200 messages checked, 0 wrong' '$work/oob-server.out'"
# The TCP payloads, in order: "SOURCE HEX".
tshark -r "$work/oob.pcap" -Y 'tcp.len > 0' -T fields -e ip.src -e tcp.payload 2>/dev/null >"$work/oob.txt"
message() { sed -n "${1}p" "$work/oob.txt" | cut -f2 | tr -d ':' | xxd -r -p | tr '\0' '@'; }
client_msg=$(message 1) server_msg=$(message 2)
echo "# out-of-band: $(wc -l <"$work/oob.txt") payloads; client sent '$client_msg'; server sent '$server_msg'"
format='^[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{6}:[0-9a-f]{6}:[0-9a-f]{8}:[0-9a-f]{16}:([0-9a-f]{2}:){16}[0-9a-f]{8}:@$'
check "the exchange is two 108-byte messages, the client's first, each in perftest's documented format" \
  "[ \$(wc -l <'$work/oob.txt') -eq 2 ] && [ \$(cut -f1 '$work/oob.txt' | head -1) = 10.80.0.1 ] \
   && [ \${#client_msg} -eq 108 ] && [ \${#server_msg} -eq 108 ] \
   && echo '$client_msg' | grep -Eq '$format' && echo '$server_msg' | grep -Eq '$format'"
# What each printed must be what it sent: QPN, PSN (and the server's RKey and VAddr), GID.
printed() {  # FILE -> "qpn:psn:rkey:vaddr" as the message spells them
  sed -n 's/^ local address: LID 0000 QPN 0x\([0-9a-f]*\) PSN 0x\([0-9a-f]*\) RKey 0x\([0-9a-f]*\) VAddr 0x\([0-9a-f]*\)$/\1:\2:\3:\4/p' "$1"
}
check "the client's message carries its printed QPN and PSN and its GID ::ffff:10.79.0.1" \
  "[ '$(echo "$client_msg" | cut -d: -f3,4)' = '$(printed "$work/oob-client.out" | cut -d: -f1,2)' ] \
   && [ '$(echo "$client_msg" | cut -d: -f7-22)' = '00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4f:00:01' ] \
   && [ -n '$(printed "$work/oob-client.out")' ]"
check "the server's message carries its printed QPN, PSN, RKey and VAddr and its GID ::ffff:10.79.0.2" \
  "[ '$(echo "$server_msg" | cut -d: -f3-6)' = '$(printed "$work/oob-server.out")' ] \
   && [ '$(echo "$server_msg" | cut -d: -f7-22)' = '00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4f:00:02' ] \
   && [ -n '$(printed "$work/oob-server.out")' ]"

# metaroce-gen and metaroce-sink, both given the partition and the timers.
CAPTURE=gen capture_start
ip netns exec "$ns_s" "$sink" --preset "$presets/net_af_packet.ini" --iface s0 --local-ip 10.79.0.2 \
  --idle-sleep-us 5 --pkey 0x8123 --qp-timeout 12 --quiet --json "$work/sink.json" >"$work/sink.out" 2>&1 &
server_pid=$!
started="$started $server_pid"
sleep 1
timeout 60 ip netns exec "$ns_c" "$gen" --preset "$presets/net_af_packet.ini" --iface c0 --local-ip 10.79.0.1 \
  --sink 10.79.0.2 --peer-mac "$mac_s0" --idle-sleep-us 5 --mode rocev2 --pkey 0x8123 --qp-timeout 12 \
  -c 2 -n 100 --size 4096-65536 --quiet --json "$work/gen.json" >"$work/gen.out" 2>&1
client_status=$?
timeout 10 tail --pid="$server_pid" -f /dev/null
kill -9 "$server_pid" 2>/dev/null
wait "$server_pid"
server_status=$?
server_pid=
capture_stop
echo "# gen -> sink: data-QP P_Keys $(pkeys gen 'infiniband.bth.destqp != 1'), $(frames gen 'infiniband.bth.destqp != 1') frames"
check "metaroce-gen -> metaroce-sink, rocev2 --pkey 0x8123 --qp-timeout 12: both exit 0, every message verified" \
  "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] && jq -e '.ok == true' '$work/gen.json' >/dev/null \
   && jq -e '.ok == true' '$work/sink.json' >/dev/null \
   && grep -q '^ rocev2: P_Key 0x8123, local ACK timeout 12 (16.8 ms, backing off)' '$work/gen.out' \
   && grep -q '^ rocev2 connections: P_Key 0x8123, local ACK timeout 12' '$work/sink.out'"
check "every gen/sink frame to a data QP carries P_Key 0x8123" \
  "[ \$(frames gen 'infiniband.bth.destqp != 1') -ge 100 ] && [ '$(pkeys gen 'infiniband.bth.destqp != 1')' = '33059 ' ]"
exit $failed
