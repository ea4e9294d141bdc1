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
# second veth pair with kernel addresses, captured: ib_write_bw's whole
# conversation in the documented format (doc/WIRE.md), step by step, the
# client's part of each first, the keys carrying what each end printed;
# -q 4 over the exchange (a keys step per connection) with write-imm and
# send, every message verified; then each end against a perftest end written apart in Python
# (perftest_peer.py), which checks every byte it is sent: our client
# against an ib_write_bw server, our server against ib_write_bw's and
# ib_send_bw's clients, an MTU of 1024 agreed each time. Then --cm ibta: rdma_cm's IBTA CM messages (class
# 0x07 REQ/REP/RTU/DREQ/DREP) on QP 1, as tshark decodes them. Last, metaroce-gen -> metaroce-sink in rocev2 with
# --pkey and --qp-timeout at both ends: every message verified, the P_Key
# on every data frame.
# Root only (skips else); always cleans up (KEEP_WORK=1 keeps the work
# directory, its captures and outputs, and names it). TAP.
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
  for pid in $server_pid $client_pid $peer_pid $capture_pids; do kill -9 "$pid" 2>/dev/null; done
  for ns in "$ns_c" "$ns_s"; do ip netns del "$ns" 2>/dev/null; done
  for pid in $started; do rm -rf "/var/run/dpdk/metaroce-perf-$pid"; done
  [ -n "$KEEP_WORK" ] && echo "# kept $work" || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  for f in "$work"/*.out; do [ -f "$f" ] && tail -12 "$f" | sed "s|^|# $(basename "$f"): |"; done
}
# await_server: the server's exit status into $server_status, once it has
# exited (killed if it has not 10 s on).
await_server() {
  timeout 10 tail --pid="$server_pid" -f /dev/null
  kill -9 "$server_pid" 2>/dev/null
  wait "$server_pid"
  server_status=$?
  server_pid=
}

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
  await_server
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
await_server
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

# perftest's out-of-band exchange, all of ib_write_bw's conversation on the
# TCP connection: the server learns the client's QPN, PSN and GID (its
# address), and answers with its own and its buffer.
# oob_capture PORT NAME / oob_capture_stop: the TCP conversation on the
# management veth into NAME.pcap.
oob_capture() {
  ip netns exec "$ns_s" dumpcap -q -i m1 -f "tcp port $1" -w "$work/$2.pcap" >/dev/null 2>&1 &
  capture_pids="$!"
  for _ in $(seq 50); do [ -s "$work/$2.pcap" ] && break; sleep 0.1; done
}
# payloads NAME: the capture's TCP payloads in order, "SOURCE HEX" a line.
payloads() { tshark -r "$work/$1.pcap" -Y 'tcp.len > 0' -T fields -e ip.src -e tcp.payload 2>/dev/null; }
peer=(/usr/bin/python3 "$(dirname "$0")/perftest_peer.py")
oob_capture 18515 oob
ip netns exec "$ns_s" "$perf" --server --iface s0 --local-ip 10.79.0.2 "${common[@]}" --oob-port 18515 \
  -s 65536 -n 200 --op write-imm --verify >"$work/oob-server.out" 2>&1 &
server_pid=$!
started="$started $server_pid"
sleep 1
timeout 60 ip netns exec "$ns_c" "$perf" --client 10.79.0.2 --peer-mac "$mac_s0" --iface c0 --local-ip 10.79.0.1 \
  "${common[@]}" --oob 10.80.0.2:18515 -s 65536 -n 200 --op write-imm --verify >"$work/oob-client.out" 2>&1
client_status=$?
await_server
capture_stop
check "out-of-band exchange: 200 messages verified by the server, both ends exit 0" \
  "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] \
   && grep -q 'closed: 200 messages checked, 0 wrong' '$work/oob-server.out' \
   && grep -q '^ out-of-band peer: perftest 6.24; MTU 4096 agreed (ours 4096)$' '$work/oob-server.out' \
   && grep -q '^ out-of-band peer: perftest 6.24; MTU 4096 agreed (ours 4096)$' '$work/oob-client.out'"
payloads oob >"$work/oob.txt"
"${peer[@]}" check-pcap --client 10.80.0.1 --verb write <"$work/oob.txt" >"$work/oob-pcap.out" 2>&1
check "the captured conversation is ib_write_bw's, step by step in the documented format, the client first" \
  "[ $? -eq 0 ] && [ \$(grep -c '^ok: ' '$work/oob-pcap.out') -eq 15 ]"
# The first keys message each way (108 bytes: 216 hex digits, 323 with colons).
keys_of() { awk -v side="$1" '$1 == side && (length($2) == 216 || length($2) == 323) { print $2; exit }' \
  "$work/oob.txt" | tr -d ':' \
  | xxd -r -p | tr '\0' '@'; }
client_msg=$(keys_of 10.80.0.1) server_msg=$(keys_of 10.80.0.2)
echo "# out-of-band: $(wc -l <"$work/oob.txt") payloads; client's keys '$client_msg'; server's '$server_msg'"
# What each printed must be what it sent: QPN, PSN (and the server's RKey and VAddr), GID.
printed() {  # FILE -> "qpn:psn:rkey:vaddr" as the message spells them
  sed -n 's/^ local address: LID 0000 QPN 0x\([0-9a-f]*\) PSN 0x\([0-9a-f]*\) RKey 0x\([0-9a-f]*\) VAddr 0x\([0-9a-f]*\)$/\1:\2:\3:\4/p' "$1"
}
check "the client's keys carry its printed QPN and PSN and its GID ::ffff:10.79.0.1" \
  "[ '$(echo "$client_msg" | cut -d: -f3,4)' = '$(printed "$work/oob-client.out" | cut -d: -f1,2)' ] \
   && [ '$(echo "$client_msg" | cut -d: -f7-22)' = '00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4f:00:01' ] \
   && [ -n '$(printed "$work/oob-client.out")' ]"
check "the server's keys carry its printed QPN, PSN, RKey and VAddr and its GID ::ffff:10.79.0.2" \
  "[ '$(echo "$server_msg" | cut -d: -f3-6)' = '$(printed "$work/oob-server.out")' ] \
   && [ '$(echo "$server_msg" | cut -d: -f7-22)' = '00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4f:00:02' ] \
   && [ -n '$(printed "$work/oob-server.out")' ]"

# perftest's -q over the exchange: a keys step per connection, -n per
# connection as perftest counts, then the barrier and the close once.
for verb in write-imm send; do
  oob_capture 18518 "oob-q-$verb"
  ip netns exec "$ns_s" "$perf" --server --iface s0 --local-ip 10.79.0.2 "${common[@]}" --oob-port 18518 \
    -q 4 -s 4096 -n 100 --op "$verb" --verify >"$work/oob-q-$verb-server.out" 2>&1 &
  server_pid=$!
  started="$started $server_pid"
  timeout 60 ip netns exec "$ns_c" "$perf" --client 10.79.0.2 --peer-mac "$mac_s0" --iface c0 \
    --local-ip 10.79.0.1 "${common[@]}" --oob 10.80.0.2:18518 -q 4 -s 4096 -n 100 --op "$verb" --verify \
    >"$work/oob-q-$verb-client.out" 2>&1
  client_status=$?
  await_server
  capture_stop
  keys_steps=$(payloads "oob-q-$verb" | awk '$1 == "10.80.0.1" && (length($2) == 216 || length($2) == 323)' | wc -l)
  # 4 keys steps, the barrier, then write-imm: the end of the test and the
  # close; send: its receives posted and the close.
  want_keys=7
  check "-q 4 over the exchange, $verb: 4 connections of 100 messages each verified by the server, $want_keys keys steps" \
    "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] \
     && [ \$(grep -c 'closed: 100 messages checked, 0 wrong' '$work/oob-q-$verb-server.out') -eq 4 ] \
     && grep -Eq '^ 4096 +400 ' '$work/oob-q-$verb-client.out' && [ $keys_steps -eq $want_keys ]"
done

# Our client against a perftest server written apart (perftest_peer.py, as
# ib_write_bw's server; its port carries 1024), the data to a metaroce
# server set up by hand with the keys the peer announces (it counts the
# WRITE_WITH_IMMEDIATEs and checks their order; their bytes go where
# perftest puts them, which only an --oob-port server checks).
ip netns exec "$ns_s" "$perf" --server --iface s0 --local-ip 10.79.0.2 "${common[@]}" --peer-ip 10.79.0.1 \
  --peer-mac "$mac_c0" --qpn 0x333 --psn 0x456789 --peer-qpn 0x222 --peer-psn 0x123456 --mtu 1024 \
  -s 65536 -n 200 --op write-imm >"$work/peer-data-server.out" 2>&1 &
server_pid=$!
started="$started $server_pid"
for _ in $(seq 100); do grep -q '^ local address:' "$work/peer-data-server.out" 2>/dev/null && break; sleep 0.1; done
keys=$(sed -n 's/^ local address: LID 0000 QPN 0x\([0-9a-f]*\) PSN 0x\([0-9a-f]*\) RKey 0x\([0-9a-f]*\) VAddr 0x\([0-9a-f]*\)$/\1:\2:\3:\4/p' \
  "$work/peer-data-server.out")
oob_capture 18516 peer-server
ip netns exec "$ns_s" timeout 90 "${peer[@]}" server --port 18516 --keys "$keys" --address 10.79.0.2 \
  --client-address 10.79.0.1 --client-qpn 0x222 --client-psn 0x123456 --mtu-code 3 --client-mtu-code 5 \
  --verb write --size 65536 --iterations 200 >"$work/peer-server.out" 2>&1 &
peer_pid=$!
timeout 60 ip netns exec "$ns_c" "$perf" --client 10.79.0.2 --peer-mac "$mac_s0" --iface c0 --local-ip 10.79.0.1 \
  "${common[@]}" --oob 10.80.0.2:18516 --qpn 0x222 --psn 0x123456 -s 65536 -n 200 --op write-imm \
  >"$work/peer-client.out" 2>&1
client_status=$?
wait "$peer_pid"
peer_status=$?
await_server
capture_stop
check "our client against a perftest-style server: every step it sent held, MTU 1024 agreed, 200 messages in order" \
  "[ $client_status -eq 0 ] && [ $peer_status -eq 0 ] && [ $server_status -eq 0 ] \
   && ! grep -q '^FAIL' '$work/peer-server.out' && [ \$(grep -c '^ok: ' '$work/peer-server.out') -eq 19 ] \
   && grep -q '^ out-of-band peer: perftest 6.21; MTU 1024 agreed (ours 4096)$' '$work/peer-client.out' \
   && grep -q 'closed: 200 messages received (not verified: the client did not ask), 0 wrong$' \
        '$work/peer-data-server.out'"
payloads peer-server | "${peer[@]}" check-pcap --client 10.80.0.1 --verb write >"$work/peer-pcap.out" 2>&1
check "the pcap of our client's conversation matches the documented format, step by step" \
  "[ $? -eq 0 ] && [ \$(grep -c '^ok: ' '$work/peer-pcap.out') -eq 15 ]"

# Our server against a perftest-style client (as ib_write_bw's: plain
# WRITEs, which only the client's report counts; then as ib_send_bw's),
# the data from a metaroce client set up by hand with the server's keys.
for verb in write send; do
  oob_capture 18517 "peer-client-$verb"
  extra=()
  [ "$verb" = send ] && extra=(-n 200 --verify)
  ip netns exec "$ns_s" "$perf" --server --iface s0 --local-ip 10.79.0.2 "${common[@]}" --oob-port 18517 --peer-mac "$mac_c0" \
    -s 65536 --op "$verb" "${extra[@]}" >"$work/peer-$verb-server.out" 2>&1 &
  server_pid=$!
  started="$started $server_pid"
  data_client="$perf --client 10.79.0.2 --peer-mac $mac_s0 --iface c0 --local-ip 10.79.0.1 ${common[*]} \
--qpn 0x222 --psn 0x123456 --peer-qpn {qpn} --peer-psn {psn} --mtu 1024 -s 65536 -n 200 --op $verb"
  # perftest's buffer holds one 64 KiB message (its layout: every WRITE to
  # the start): -t 1 keeps the stand-in ib_write_bw client's WRITEs there.
  if [ "$verb" = write ]; then
    data_client="$data_client --remote-addr {vaddr} --rkey {rkey} -t 1"
  else
    data_client="$data_client --verify"
  fi
  timeout 90 ip netns exec "$ns_c" "${peer[@]}" client --server 10.80.0.2 --port 18517 --server-address 10.79.0.2 \
    --address 10.79.0.1 --qpn 0x222 --psn 0x123456 --mtu-code 3 --server-mtu-code 5 --verb "$verb" \
    --size 65536 --iterations 200 --command "$data_client >'$work/peer-$verb-data.out' 2>&1" \
    >"$work/peer-$verb-client.out" 2>&1
  peer_status=$?
  await_server
  capture_stop
  if [ "$verb" = write ]; then
    closed='the client.s report: 200 messages of 65536 B, .*closed: 200 messages received'
  else
    closed='closed: 200 messages checked, 0 wrong'
  fi
  check "our server against a perftest-style $verb client: every step it sent held, MTU 1024 agreed, 200 messages" \
    "[ $peer_status -eq 0 ] && [ $server_status -eq 0 ] && ! grep -q '^FAIL' '$work/peer-$verb-client.out' \
     && grep -q '^ out-of-band peer: perftest 6.21; MTU 1024 agreed (ours 4096)$' '$work/peer-$verb-server.out' \
     && tr '\n' ' ' <'$work/peer-$verb-server.out' | grep -q '$closed'"
  payloads "peer-client-$verb" | "${peer[@]}" check-pcap --client 10.80.0.1 --verb "$verb" \
    >"$work/peer-$verb-pcap.out" 2>&1
  check "the pcap of our server's $verb conversation matches ib_${verb}_bw's, step by step" \
    "[ $? -eq 0 ] && ! grep -q '^FAIL' '$work/peer-$verb-pcap.out'"
done

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
await_server
capture_stop
echo "# gen -> sink: data-QP P_Keys $(pkeys gen 'infiniband.bth.destqp != 1'), $(frames gen 'infiniband.bth.destqp != 1') frames"
check "metaroce-gen -> metaroce-sink, rocev2 --pkey 0x8123 --qp-timeout 12: both exit 0, every message verified" \
  "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] && jq -e '.ok == true' '$work/gen.json' >/dev/null \
   && jq -e '.ok == true' '$work/sink.json' >/dev/null \
   && grep -q '^ rocev2: P_Key 0x8123, local ACK timeout 12 (16.8 ms, backing off)' '$work/gen.out' \
   && grep -q '^ rocev2 connections: P_Key 0x8123, local ACK timeout 12' '$work/sink.out'"
check "every gen/sink frame to a data QP carries P_Key 0x8123" \
  "[ \$(frames gen 'infiniband.bth.destqp != 1') -ge 100 ] && [ '$(pkeys gen 'infiniband.bth.destqp != 1')' = '33059 ' ]"
echo "1..$n"  # the plan last: the count of checks run
exit $failed
