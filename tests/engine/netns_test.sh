#!/bin/bash
# Two metaroce-perf processes in two network namespaces, each on a
# net_af_packet port on a veth, joined through a third namespace that is a
# plain Linux router (IP forwarding, no static neighbours: its kernel learns
# the DPDK ends' MACs from their answers to its ARP requests and neighbour
# solicitations, and the client learns the router's by asking for its
# --gateway, with no --peer-mac): nftables drops 1% of the RoCE packets it
# forwards at random (numgen) and tc tbf limits its egress towards the
# server. Over IPv4, for each mode a 256 MiB transfer (256 x 1 MiB
# WRITE_WITH_IMMEDIATE, every byte checked by the server); over IPv6, 64 MiB
# per mode. Each must complete, and the router's counters must agree with
# the client's retransmissions:
#   metaroce: retransmitted data packets == data packets the router dropped
#             (a SACK gap is the only loss signal: exactly the lost ones);
#   rocev2:   retransmitted >= dropped (go-back-N resends what followed too).
# Always removes what it created. Not root: says so and skips. Prints TAP.
# Usage: netns_test.sh PATH/metaroce-perf DRIVERS-CONFIG-DIR
perf="$1"
presets="$2"
if [ "$(id -u)" -ne 0 ]; then
  echo "1..0 # SKIP not root: network namespaces, veths and nftables need root (run tools/test as root)"
  exit 0
fi
for tool in ip nft tc jq; do
  if ! command -v "$tool" >/dev/null; then
    echo "1..0 # SKIP '$tool' is missing: run tools/setup (it installs iproute2, nftables and jq)"
    exit 0
  fi
done

tag=$$
ns_c="mr-c-$tag" ns_r="mr-r-$tag" ns_s="mr-s-$tag"
work=$(mktemp -d)
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  for ns in "$ns_c" "$ns_r" "$ns_s"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$work"
  # EAL leaves its runtime directory (prefix metaroce-perf-<pid>) behind under
  # --no-shconf: remove those whose process is gone (ours, and stale ones).
  for d in /var/run/dpdk/metaroce-perf-*; do
    if [ -d "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null; then rm -rf "$d"; fi
  done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  for f in "$work"/client.out "$work"/server.out; do [ -f "$f" ] && tail -15 "$f" | sed "s|^|# $(basename "$f"): |"; done
}

# Topology: [ns_c: c0] <-> [r0 ns_r r1] <-> [s0: ns_s]
#             10.77.1.2    10.77.1.1  10.77.2.1    10.77.2.2
#          fd00:77:1::2 fd00:77:1::1  fd00:77:2::1 fd00:77:2::2
# The DPDK ends' interfaces (c0, s0) carry no address and no IPv6, so their
# kernels stay out of the way; the router's have both (IPv6 without
# duplicate address detection, which would delay the addresses by seconds).
set -e
for ns in "$ns_c" "$ns_r" "$ns_s"; do ip netns add "$ns"; done
ip link add c0 netns "$ns_c" type veth peer name r0 netns "$ns_r"
ip link add s0 netns "$ns_s" type veth peer name r1 netns "$ns_r"
for pair in "$ns_c c0" "$ns_s s0"; do
  set -- $pair
  ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
  ip -n "$1" link set "$2" mtu 9000 up
done
for i in r0 r1; do
  ip netns exec "$ns_r" sysctl -qw "net.ipv6.conf.$i.disable_ipv6=0" "net.ipv6.conf.$i.accept_dad=0"
  ip -n "$ns_r" link set "$i" mtu 9000 up
done
mac() { ip -n "$1" -j link show "$2" | jq -r '.[0].address'; }
mac_c0=$(mac "$ns_c" c0) mac_r0=$(mac "$ns_r" r0) mac_s0=$(mac "$ns_s" s0)
ip -n "$ns_r" addr add 10.77.1.1/24 dev r0
ip -n "$ns_r" addr add 10.77.2.1/24 dev r1
ip -n "$ns_r" addr add fd00:77:1::1/64 dev r0 nodad
ip -n "$ns_r" addr add fd00:77:2::1/64 dev r1 nodad
ip netns exec "$ns_r" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
# 1% of the RoCE packets forwarded either way, at random; data packets
# (metaroce 0xc0-0xc3, RC SEND/WRITE 0x00-0x0b) counted apart from the rest
# (ACKs, probes, CNPs, connection management). @th,64,8 is the BTH opcode.
ip netns exec "$ns_r" nft -f - <<NFT
table inet metaroce_test {
  chain forward {
    type filter hook forward priority 0; policy accept;
    udp dport 4791 numgen random mod 1000 < 10 meta mark set 0x1
    meta mark 0x1 iifname "r0" @th,64,8 { 0x00-0x0b, 0xc0-0xc3 } counter name data_c2s drop
    meta mark 0x1 iifname "r1" @th,64,8 { 0x00-0x0b, 0xc0-0xc3 } counter name data_s2c drop
    meta mark 0x1 counter name other drop
    iifname "r0" udp dport 4791 counter name forwarded_c2s
  }
  counter data_c2s {}
  counter data_s2c {}
  counter other {}
  counter forwarded_c2s {}
}
NFT
# The bottleneck: 1 Gb/s towards the server, a 4 MB queue.
ip netns exec "$ns_r" tc qdisc add dev r1 root tbf rate 1gbit burst 64kb limit 4mb
set +e

nft_count() { ip netns exec "$ns_r" nft -j list counter inet metaroce_test "$1" | jq '.nftables[1].counter.packets'; }
tbf_drops() { ip netns exec "$ns_r" tc -j -s qdisc show dev r1 | jq '.[0].drops'; }
reset_counters() {
  ip netns exec "$ns_r" nft reset counters table inet metaroce_test >/dev/null
  # Deleted and added again: some kernels keep a replaced qdisc's drop count.
  ip netns exec "$ns_r" tc qdisc del dev r1 root 2>/dev/null
  ip netns exec "$ns_r" tc qdisc add dev r1 root tbf rate 1gbit burst 64kb limit 4mb
}
# The router's kernel forgets what it learned, so each run's ends are asked again.
flush_neighbours() { ip -n "$ns_r" neigh flush dev r0; ip -n "$ns_r" neigh flush dev r1; }
# The router's neighbour entry for ADDR on DEV: "MAC STATE" (empty: none).
router_neighbour() {
  ip -n "$ns_r" -j neigh show "$2" dev "$1" | jq -r '.[0] | select(.lladdr != null) | "\(.lladdr) \(.state[0])"'
}
# One engine counter of a run's JSON (host_a: the client's, host_b: the server's).
counter() { jq -r ".$2.$3" "$work/$1.json" 2>/dev/null; }

echo "1..28"
run_mode() {  # family mode messages extra-args...
  local family="$1" mode="$2" messages="$3"; shift 3
  local client_ip=10.77.1.2 server_ip=10.77.2.2 gateway=10.77.1.1
  if [ "$family" = ipv6 ]; then client_ip=fd00:77:1::2 server_ip=fd00:77:2::2 gateway=fd00:77:1::1; fi
  label="$mode over $family"
  reset_counters
  flush_neighbours
  rm -f "$work"/*.json "$work"/*.out
  ip netns exec "$ns_s" "$perf" --server --preset "$presets/net_af_packet.ini" --iface s0 --local-ip "$server_ip" \
    --idle-sleep-us 5 --json "$work/server.json" >"$work/server.out" 2>&1 &
  server_pid=$!
  sleep 1
  timeout 240 ip netns exec "$ns_c" "$perf" --client "$server_ip" --gateway "$gateway" \
    --preset "$presets/net_af_packet.ini" --iface c0 --local-ip "$client_ip" --mode "$mode" "$@" \
    -s 1048576 -n "$messages" --op write-imm --verify --idle-sleep-us 5 --json "$work/client.json" \
    >"$work/client.out" 2>&1
  client_status=$?
  # The server exits after the client's last disconnect; a client that died
  # never sends it: give the server 20 s, then stop it (and fail).
  timeout 20 tail --pid="$server_pid" -f /dev/null
  kill -9 "$server_pid" 2>/dev/null
  wait "$server_pid"
  server_status=$?
  server_pid=
  check "$label: $messages MiB through the router completes, every byte verified by the server" \
    "[ $client_status -eq 0 ] && [ $server_status -eq 0 ] \
     && grep -q 'connection .* closed: $messages messages checked, 0 wrong' '$work/server.out' \
     && jq -e '.ok == true and .results[0].iterations == $messages' '$work/client.json' >/dev/null"
  dropped=$(nft_count data_c2s)
  tbf=$(tbf_drops)
  retransmitted=$(jq '.retransmitted' "$work/client.json" 2>/dev/null)
  forwarded=$(nft_count forwarded_c2s)
  echo "# $label: router forwarded $forwarded RoCE packets to the server, dropped $dropped data packets on the way" \
       "(and $(nft_count data_s2c) data / $(nft_count other) other packets), tbf dropped $tbf; client retransmitted $retransmitted"
  # 1% of what crossed (binomial: 3 sigma of 65536 x 1% is about 240, of
  # 16384 x 1% about 38: the bounds, 0.6% and 1.4%, are wider than both).
  check "$label: the router dropped 1% of the data packets, give or take" \
    "[ -n '$dropped' ] && [ -n '$forwarded' ] && [ $((dropped * 1000)) -ge $(((forwarded + dropped) * 6)) ] \
     && [ $((dropped * 1000)) -le $(((forwarded + dropped) * 14)) ]"
  # Neighbours: no static entry anywhere. The client asked for the gateway
  # once (the router answered the first request) and the router's kernel
  # learned both DPDK ends' MACs from them.
  local asked=arp_requests_sent answered=arp_requests_answered how=ARP
  if [ "$family" = ipv6 ]; then asked=nd_solicitations_sent answered=nd_solicitations_answered how="neighbour discovery"; fi
  echo "# $label: client $asked $(counter client host_a $asked), resolutions_failed" \
       "$(counter client host_a resolutions_failed); server $answered $(counter server host_b $answered);" \
       "router: client $(router_neighbour r0 "$client_ip"), server $(router_neighbour r1 "$server_ip")"
  check "$label: the client resolved its gateway with one request, no --peer-mac" \
    "[ '$(counter client host_a "$asked")' = 1 ] && [ '$(counter client host_a resolutions_failed)' = 0 ] \
     && grep -qF ' next hop towards $server_ip: $gateway at $mac_r0 ($how)' '$work/client.out'"
  check "$label: the router's kernel learned both ends' MACs from their own frames" \
    "[ '$(router_neighbour r0 "$client_ip" | cut -d' ' -f1)' = '$mac_c0' ] \
     && [ '$(router_neighbour r1 "$server_ip" | cut -d' ' -f1)' = '$mac_s0' ] \
     && [ '$(counter server host_b "$answered")' -ge 1 ] 2>/dev/null"
}

run_mode ipv4 metaroce 256 --paths 4 --cc metaroce
check "metaroce over ipv4: retransmissions == data packets the router dropped (tbf dropped none)" \
  "[ '$tbf' = 0 ] && [ '$retransmitted' = '$dropped' ]"
check "metaroce over ipv4: the server counted no spurious retransmission" \
  "jq -e '.connection_b.spurious_retransmissions == 0' '$work/server.json' >/dev/null"
run_mode ipv4 rocev2 256
check "rocev2 over ipv4: retransmissions >= data packets the router dropped" \
  "[ -n '$retransmitted' ] && [ $retransmitted -ge $((dropped + tbf)) ]"
check "rocev2 over ipv4: the server NAKed sequence gaps" \
  "jq -e '.connection_b.out_of_sequence_drops > 0' '$work/server.json' >/dev/null"
run_mode ipv6 metaroce 64 --paths 4 --cc metaroce
check "metaroce over ipv6: retransmissions == data packets the router dropped (tbf dropped none)" \
  "[ '$tbf' = 0 ] && [ '$retransmitted' = '$dropped' ]"
check "metaroce over ipv6: the server counted no spurious retransmission" \
  "jq -e '.connection_b.spurious_retransmissions == 0' '$work/server.json' >/dev/null"
run_mode ipv6 rocev2 64
check "rocev2 over ipv6: retransmissions >= data packets the router dropped" \
  "[ -n '$retransmitted' ] && [ $retransmitted -ge $((dropped + tbf)) ]"

# A client with no server: a clear error, not a hang (the gateway answers,
# the server does not).
timeout 30 ip netns exec "$ns_c" "$perf" --client 10.77.2.2 --gateway 10.77.1.1 \
  --preset "$presets/net_af_packet.ini" --iface c0 --local-ip 10.77.1.2 --cm-timeout 0.5 -n 10 >"$work/client.out" 2>&1
status=$?
check "a client without a server fails with an error naming what to check" \
  "[ $status -eq 1 ] && grep -q 'no answer from 10.77.2.2 after 5 connection requests over 0.5 s: is the server running there' '$work/client.out'"
# A gateway that does not exist: the resolution's own error, after 3 tries.
timeout 30 ip netns exec "$ns_c" "$perf" --client 10.77.2.2 --gateway 10.77.1.9 \
  --preset "$presets/net_af_packet.ini" --iface c0 --local-ip 10.77.1.2 -n 10 >"$work/client.out" 2>&1
status=$?
check "a gateway that does not answer ARP: one line saying so and what to do" \
  "[ $status -eq 1 ] && grep -q 'no ARP reply from 10.77.1.9 after 3 tries over 3.0 s on port net_af_packet0: check the address and the link, or give --peer-mac' '$work/client.out'"
timeout 30 ip netns exec "$ns_c" "$perf" --client fd00:77:2::2 --gateway fd00:77:1::9 \
  --preset "$presets/net_af_packet.ini" --iface c0 --local-ip fd00:77:1::2 -n 10 >"$work/client.out" 2>&1
status=$?
check "a gateway that does not answer neighbour solicitations: the same, in ND's words" \
  "[ $status -eq 1 ] && grep -q 'no neighbour advertisement from fd00:77:1::9 after 3 tries over 3.0 s on port net_af_packet0: check the address and the link, or give --peer-mac' '$work/client.out'"
# --peer-mac still wins: the client asks nothing (its gateway is never asked for).
ip netns exec "$ns_s" "$perf" --server --preset "$presets/net_af_packet.ini" --iface s0 --local-ip 10.77.2.2 \
  --idle-sleep-us 5 >"$work/server.out" 2>&1 &
server_pid=$!
sleep 1
timeout 60 ip netns exec "$ns_c" "$perf" --client 10.77.2.2 --gateway 10.77.1.9 --peer-mac "$mac_r0" \
  --preset "$presets/net_af_packet.ini" --iface c0 --local-ip 10.77.1.2 -s 65536 -n 100 --idle-sleep-us 5 \
  --json "$work/client.json" >"$work/client.out" 2>&1
status=$?
timeout 20 tail --pid="$server_pid" -f /dev/null
kill -9 "$server_pid" 2>/dev/null
wait "$server_pid"
server_pid=
check "--peer-mac wins: no ARP request sent, the run completes" \
  "[ $status -eq 0 ] && [ '$(counter client host_a arp_requests_sent)' = 0 ] \
     && [ '$(counter client host_a answers_for_permanent)' = 0 ]"
check "the namespaces are set up as described (router forwarding on)" \
  "[ \"\$(ip netns exec $ns_r sysctl -n net.ipv4.ip_forward)\" = 1 ]"
exit 0
