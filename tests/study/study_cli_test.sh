#!/bin/bash
# metaroce-study's command line: each mistake is one line on stderr naming
# the option and what it wants, with exit status 2 and no table; a good
# short run exits 0 with the JSON line last. Prints TAP.
# Usage: study_cli_test.sh METAROCE_STUDY
study="$1"
. "$(dirname "$0")/../tap.sh"
echo "1..9"

# refused ARGS... EXPECTED-MESSAGE: exit 2, exactly that one line on stderr, nothing on stdout.
refused() {
  local want="${*: -1}" out err rc errfile
  errfile=$(mktemp)
  out=$("$study" "${@:1:$#-1}" 2>"$errfile"); rc=$?
  err=$(cat "$errfile"); rm -f "$errfile"
  check "refused: ${*:1:$#-1}" '[ "$rc" = 2 ] && [ "$err" = "$want" ] && [ -z "$out" ]'
  [ "$rc" = 2 ] && [ "$err" = "$want" ] || echo "# rc=$rc stderr: $err"
}
refused alltoall-1024 --k 4.5 "metaroce-study: --k wants a whole number from 0 to 1024, got '4.5'"
refused alltoall-1024 --k 1e30 "metaroce-study: --k wants a whole number from 0 to 1024, got '1e30'"
refused alltoall-1024 --bytes -1 "metaroce-study: --bytes wants a whole number from 0 to 1073741824, got '-1'"
refused background-128 --load 2 "metaroce-study: --load wants a share of the link in (0, 1]"
refused background-128 --load x "metaroce-study: --load wants a number of at least 0, got 'x'"
refused background-128 --cdf hadoop "metaroce-study: study: no flow-size distribution named 'hadoop': use web-search, data-mining or the path of a CDF file"
refused background-128 --variant 7 "metaroce-study: --variant 7: this study has variants 0..2"
refused background-128 --json "metaroce-study: --json wants a value"

last=$("$study" background-128 --short --variant 0 --background-ms 0.2 | tail -n 1)
check "a good run ends with its JSON line" '[[ "$last" == "{\"study\":\"background-128\",\"rows\":[{\"mode\":\"metaroce\""* ]]'
exit $failed
