# Sourced by the shell tests: their TAP lines. A test that has something to
# show after a failed check (the tail of its processes' output, as `# `
# lines) defines tap_on_failure; `failed` is 1 once a check failed, for a
# test that ends with `exit $failed`.
#   ok WHAT             prints "ok N - WHAT"
#   not_ok WHAT         prints "not ok N - WHAT", then runs tap_on_failure
#   check WHAT COND     evaluates COND (a string), then ok or not_ok
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1)); failed=1; echo "not ok $n - $1"
  if command -v tap_on_failure >/dev/null 2>&1; then tap_on_failure; fi
}
check() { if eval "$2"; then ok "$1"; else not_ok "$1"; fi; }
