#!/bin/bash
# Installs the build into a temporary destination (meson install --destdir)
# and checks what lands where; then builds examples/ outside the tree with
# examples/Makefile, which knows nothing but `pkg-config --cflags --libs
# metaroce`, and runs them: the WRITE client/server pair and the SEND/RECV
# ping-pong as two processes over net_memif, and the simulation. Prints TAP.
# Usage: install_test.sh BUILD_DIR EXAMPLES_DIR
build="$1"
examples="$2"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
  for d in /var/run/dpdk/write_* /var/run/dpdk/ping_*; do
    if [ -d "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null; then rm -rf "$d"; fi
  done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# shellcheck source=../tap.sh
. "$(dirname "$0")/../tap.sh"
tap_on_failure() {
  for f in "$work"/*.out "$work"/*.log; do [ -f "$f" ] && tail -8 "$f" | sed "s|^|# $(basename "$f"): |"; done
}

dest="$work/dest"
if meson install -C "$build" --no-rebuild --destdir "$dest" >"$work/install.log" 2>&1; then
  ok "meson install --destdir puts the build in a temporary destination"
else
  not_ok "meson install --destdir puts the build in a temporary destination"
  echo "1..$n"
  exit 1
fi

pc=$(find "$dest" -name metaroce.pc | head -n 1)
check "metaroce.pc is installed under a pkgconfig directory" '[ -n "$pc" ] && [ "$(basename "$(dirname "$pc")")" = pkgconfig ]'
libdir=$(dirname "$(dirname "$pc")")
prefix=$(cd "$libdir" && while [ "$(basename "$PWD")" != lib ] && [ "$PWD" != / ]; do cd ..; done; dirname "$PWD")
check "the static and the shared library are installed" '[ -f "$libdir/libmetaroce.a" ] && [ -L "$libdir/libmetaroce.so" ]'
check "every public header is installed under include/metaroce" \
  'for h in counters endpoint metaroce sans_io simulation types version; do [ -f "$prefix/include/metaroce/$h.hpp" ] || exit 1; done'
check "no internal header is installed" '[ -z "$(find "$prefix/include" -type f ! -path "*/include/metaroce/*.hpp")" ] && [ ! -d "$prefix/include/metaroce/transport" ]'
check "the apps are installed" \
  'for a in perf gen sink fabric decode; do [ -x "$prefix/bin/metaroce-$a" ] || exit 1; done'
check "the drivers-config presets and the docs are installed" \
  '[ -f "$prefix/share/metaroce/drivers-config/net_ring.ini" ] && [ -f "$prefix/share/doc/metaroce/API.md" ]'

export PKG_CONFIG_PATH="$(dirname "$pc")"
first_include=$(pkg-config --cflags metaroce | tr ' ' '\n' | grep -m 1 '^-I' | cut -c3-)
check "pkg-config finds metaroce where it was installed (metaroce.pc is relocatable)" \
  '[ "$(realpath "$first_include")" = "$(realpath "$prefix/include")" ]'

# The examples, copied out of the tree: nothing but the installed files and
# pkg-config can reach them.
mkdir -p "$work/src"
cp "$examples"/*.cpp "$examples"/Makefile "$work/src/"
if make -C "$work/src" >"$work/make.log" 2>&1; then
  ok "the examples build outside the tree from pkg-config --cflags --libs metaroce alone"
else
  not_ok "the examples build outside the tree from pkg-config --cflags --libs metaroce alone"
  echo "1..$n"
  exit 1
fi
check "no example was compiled against the source tree" '! grep -q "$(realpath "$examples/..")" "$work/make.log"'
export LD_LIBRARY_PATH="$libdir"

sim_out=$("$work/src/simulation" 0.01 2>&1)
echo "$sim_out" >"$work/simulation.out"
check "simulation: two connections through 1% loss, every byte intact, only some packets resent" \
  'echo "$sim_out" | grep -Eq "^simulation: loss 0.010, 128 MiB in .* Gb/s goodput, [1-9][0-9]* of 32768 data packets resent, bytes intact$"'

# The WRITE pair: two processes joined by net_memif (server and client roles).
sock="$work/write.sock"
# Over IPv6, the client given no MAC: it learns the server's by neighbour
# discovery, which the server's endpoint answers.
"$work/src/write_server" net_memif0 fd00:91::2 --vdev "net_memif0,role=server,socket=$sock,mac=02:00:00:00:91:02" \
  >"$work/write_server.out" 2>&1 &
pids+=($!)
server=$!
for _ in $(seq 50); do grep -q "listening" "$work/write_server.out" && break; sleep 0.1; done
timeout 60 "$work/src/write_client" net_memif0 fd00:91::1 fd00:91::2 - \
  --vdev "net_memif0,role=client,socket=$sock,mac=02:00:00:00:91:01" >"$work/write_client.out" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
check "write_client over IPv6, the server's MAC learned by neighbour discovery: 1 MiB in 16 WRITEs, completed, exit 0" \
  '[ $client_rc -eq 0 ] && grep -Eq "^write_client: wrote 1048576 bytes in 16 WRITEs, 256 data packets, 0 resent$" "$work/write_client.out"'
check "write_server: every byte verified, the immediate received, exit 0" \
  '[ $server_rc -eq 0 ] && grep -q "^write_server: immediate 0x600d, 1048576 bytes, 0 wrong$" "$work/write_server.out" && grep -q "^write_server: verified$" "$work/write_server.out"'
check "the client closed cleanly: the server answered its disconnect request" '! grep -q "close:" "$work/write_client.out"'

sock="$work/ping.sock"
"$work/src/ping_pong" server net_memif0 10.91.1.2 --vdev "net_memif0,role=server,socket=$sock,mac=02:00:00:00:91:12" \
  >"$work/ping_server.out" 2>&1 &
pids+=($!)
server=$!
sleep 0.5
timeout 120 "$work/src/ping_pong" client net_memif0 10.91.1.1 10.91.1.2 02:00:00:00:91:12 \
  --vdev "net_memif0,role=client,socket=$sock,mac=02:00:00:00:91:11" >"$work/ping_client.out" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
echo "# ping_pong exit codes: client $client_rc, server $server_rc"
check "ping_pong: 1000 SEND/RECV round trips, each echo checked, both ends exit 0" \
  '[ $client_rc -eq 0 ] && [ $server_rc -eq 0 ] && grep -q "^ping_pong: 1000 of 1000 round trips" "$work/ping_client.out" && grep -q "^ping_pong: echoed 1000 messages$" "$work/ping_server.out"'

echo "1..$n"
exit $failed
