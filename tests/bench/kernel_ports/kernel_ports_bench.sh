#!/bin/bash
# tools/bench kernel-ports: what a port on a Linux interface carries, beside
# the kernel's own TCP over the same kind of link, in one run (about 40 s).
# Two network namespaces joined by a veth pair:
#   1. iperf3, one TCP stream, 5 s, MTU 9000: the kernel's figure;
#   2. metaroce-perf --server / --client through net_af_packet (MTU 9000),
#      1 MiB WRITEs for 5 s with --verify and --cc metaroce;
#   3. the same through net_af_xdp (MTU 3000, the preset's).
# The two ends run on different CPUs (the server's preset on lcore 0, the
# client's on 1). Root only: without it every figure is null and a line
# says why. Human-readable lines, then one JSON object as the last line.
perf="${METAROCE_PERF:-@METAROCE_PERF@}"
presets="${METAROCE_PRESETS:-@PRESETS@}"
seconds=${KERNEL_PORTS_SECONDS:-5}
# The kernel moves a veth's frames in softirq on these same CPUs: a
# lcore that never sleeps starves it. Both ends sleep this long when idle.
idle=${KERNEL_PORTS_IDLE_US:-5}
client_lcore=${KERNEL_PORTS_CLIENT_LCORE:-1}

json() {
  echo "{\"bench\":\"kernel-ports\",\"af_packet_gbps\":$1,\"af_xdp_gbps\":$2,\"tcp_veth_gbps\":$3,\"af_packet_of_tcp\":$4,\"af_xdp_of_tcp\":$5,\"seconds\":$seconds}"
}
if [ "$(id -u)" -ne 0 ]; then
  echo "not root: network namespaces, veths and XDP programs need root; every figure null"
  json null null null null null
  exit 0
fi

a="mr-kpa-$$"
b="mr-kpb-$$"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ip netns add "$a" && ip netns add "$b" || exit 1
ip link add kp0 netns "$a" type veth peer name kp1 netns "$b" || exit 1
link() {  # MTU, both ends; addresses for the kernel's TCP
  ip -n "$a" link set kp0 mtu "$1" up && ip -n "$b" link set kp1 mtu "$1" up
}
ip -n "$a" addr add 10.81.0.1/24 dev kp0
ip -n "$b" addr add 10.81.0.2/24 dev kp1
for ns in "$a" "$b"; do ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
link 9000 || exit 1

echo "1. iperf3 TCP between the namespaces over the veth pair, one stream, ${seconds} s, MTU 9000"
tcp=null
if command -v iperf3 >/dev/null; then
  ip netns exec "$b" timeout $((seconds + 15)) iperf3 -s -1 -p 5299 >/dev/null 2>&1 &
  pids+=($!)
  sleep 0.5
  if ip netns exec "$a" iperf3 -c 10.81.0.2 -p 5299 -t "$seconds" -J >"$work/iperf3.json" 2>&1; then
    tcp=$(jq '.end.sum_received.bits_per_second / 1e7 | round / 100' "$work/iperf3.json")
  else
    echo "  iperf3 failed: $(head -c 300 "$work/iperf3.json")"
  fi
else
  echo "  iperf3 is not installed (tools/setup installs it)"
fi
echo "  TCP received: $tcp Gb/s"
# Our ports answer ARP themselves: the kernel's addresses go.
ip -n "$a" addr flush dev kp0
ip -n "$b" addr flush dev kp1

# metaroce-perf over PRESET at MTU: the client's goodput (Gb/s) or null.
metaroce() {
  local preset=$1 label=$2
  sed 's/^lcores=.*/lcores=0/' "$presets/$preset" >"$work/server.ini"
  sed "s/^lcores=.*/lcores=$client_lcore/" "$presets/$preset" >"$work/client.ini"
  ip netns exec "$b" "$perf" --server --preset "$work/server.ini" --iface kp1 --local-ip 10.81.0.2 --idle-sleep-us "$idle" \
    >"$work/$label-server.out" 2>&1 &
  local server=$!
  pids+=($server)
  sleep 1
  timeout $((seconds + 30)) ip netns exec "$a" "$perf" --client 10.81.0.2 --preset "$work/client.ini" --iface kp0 \
    --local-ip 10.81.0.1 --idle-sleep-us "$idle" -s 1048576 -D "$seconds" --verify --cc metaroce --json "$work/$label.json" \
    >"$work/$label-client.out" 2>&1
  local status=$?
  timeout 10 tail --pid="$server" -f /dev/null
  kill -9 "$server" 2>/dev/null
  local g=null
  if [ $status -eq 0 ] && jq -e '.ok == true' "$work/$label.json" >/dev/null 2>&1; then
    g=$(jq '.results[0].bw_average_gbps * 100 | round / 100' "$work/$label.json")
    local cycles
    cycles=$(jq '.results[0].sender_cycles_per_packet // 0 | round' "$work/$label.json")
    echo "  $label: $g Gb/s, every byte verified; sender lcore $cycles TSC cycles per data packet"
  else
    echo "  $label failed (exit $status):"
    grep -v libxdp "$work/$label-client.out" | tail -5 | sed 's/^/    /'
  fi
  result=$g
}

echo "2. metaroce-perf 1 MiB WRITEs over net_af_packet, ${seconds} s, MTU 9000"
metaroce net_af_packet.ini af_packet
packet=$result
echo "3. metaroce-perf 1 MiB WRITEs over net_af_xdp, ${seconds} s, MTU 3000"
link 3000
metaroce net_af_xdp.ini af_xdp
xdp=$result

ratio() { if [ "$1" = null ] || [ "$2" = null ]; then echo null; else jq -n "$1 / $2 * 1000 | round / 1000"; fi; }
echo "af_packet: $(ratio "$packet" "$tcp") of TCP over the veth; af_xdp: $(ratio "$xdp" "$tcp")"
json "$packet" "$xdp" "$tcp" "$(ratio "$packet" "$tcp")" "$(ratio "$xdp" "$tcp")"
