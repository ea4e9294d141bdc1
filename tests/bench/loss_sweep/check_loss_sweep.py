#!/usr/bin/python3
"""Runs metaroce-bench-loss-sweep --quick (metaroce over DPDK net_ring with
the inline fabric on its default emulated link: a row without the rate limit,
then lossless, 1 % and 10 % random loss on both directions, 1.5 s each,
every byte verified) and checks, one TAP point each: every message arrived
intact, the link (not the CPU) was the bottleneck, and the loss targets,
loosened for a shared 2-vCPU VM: metaroce keeps >= 90 % of its lossless
goodput at 1 % loss (target 95 %) and >= 75 % at 10 % (target 80 %).

Two busy-polling lcores on two vCPUs cannot measure anything while another
process holds a core: the sweep reports, per row, the share of the machine's
CPU other processes took. A run with a row above 10 % is repeated (3 runs at
most); if every run was disturbed, the figure checks are skipped with the
reason (the delivery checks never are). A run that was not disturbed and
still misses a threshold fails.

A sanitizer build (--sanitized, from meson's b_sanitize) runs several times
slower: the delivery checks hold, the figure checks are skipped with that
reason.

usage: check_loss_sweep.py BENCH [--sanitized]"""
import json
import subprocess
import sys

bench = sys.argv[1]
sanitized = "--sanitized" in sys.argv[2:]
disturbed_share = 0.10
attempts_max = 3


def run_sweep():
    # About 10 s; 55 s at most, so 3 runs fit meson's timeout.
    try:
        run = subprocess.run([bench, "--quick"], capture_output=True, text=True, timeout=55)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        run = subprocess.CompletedProcess(e.cmd, -1, out, "timed out after 55 s")
    lines = run.stdout.strip().splitlines()
    result = None
    if lines:
        try:
            result = json.loads(lines[-1])
        except json.JSONDecodeError:
            result = None
    return run, lines, result


def rows_by_loss(result):
    return {r["loss"]: r for r in result.get("rows", [])
            if r["mode"] == "metaroce" and r["row"] == "random" and r.get("op") == "write"}


def figures_pass(result):
    rows = rows_by_loss(result)
    return (result.get("link_bound") and rows.get(1, {}).get("pct_of_lossless", 0) >= 90
            and rows.get(10, {}).get("pct_of_lossless", 0) >= 75)


attempts = 0
while True:
    if sanitized:
        run, lines, result = run_sweep()
        attempts = 1
        disturbed = False
        break
    run, lines, result = run_sweep()
    attempts += 1
    disturbed = result is not None and result.get("others_cpu_share", 1) >= disturbed_share
    if run.returncode != 0 or result is None or attempts >= attempts_max:
        break
    if not disturbed and figures_pass(result):
        break
    if not disturbed:
        # Undisturbed and short of a threshold: once more, for a hiccup the
        # /proc/stat sampling missed; a second miss fails.
        run, lines, result = run_sweep()
        attempts += 1
        disturbed = result is not None and result.get("others_cpu_share", 1) >= disturbed_share
        break

checks = []


def check(cond, desc, got, figure=True):
    skip = figure and (disturbed or sanitized)
    reason = "" if not skip else ("sanitizer build: figures are not measured under ASan/UBSan" if sanitized else
                                  f"other processes took {result.get('others_cpu_share', 0):.0%} of the CPU "
                                  f"during a row in each of {attempts} runs")
    checks.append((bool(cond) or skip, desc, f"got {got}", f" # SKIP {reason}" if skip else ""))


check(run.returncode == 0 and result is not None, "loss-sweep --quick exits 0 and ends with its JSON line",
      f"exit {run.returncode}: {run.stderr[-300:]} {lines[-1][:200] if lines else ''}", figure=False)
if result is not None:
    rows = rows_by_loss(result)
    check(result.get("bench") == "loss-sweep" and result.get("link_gbps", 0) > 0,
          "the JSON line names the bench and the link rate", {k: result.get(k) for k in ("bench", "link_gbps")},
          figure=False)
    check(sorted(rows) == [0, 1, 10] and all(r["ok"] for r in rows.values()) and result.get("ok"),
          "rows lossless, 1 % and 10 %: every message arrived and every byte verified",
          [(r["loss"], r["ok"]) for r in rows.values()], figure=False)
    check(rows.get(1, {}).get("retransmits", 0) > 0 and rows.get(10, {}).get("retransmits", 0) >
          rows.get(1, {}).get("retransmits", 0), "the sender retransmitted, more at 10 % loss than at 1 %",
          [rows.get(x, {}).get("retransmits") for x in (1, 10)], figure=False)
    lossless = rows.get(0, {})
    check(result.get("cpu_gbps", 0) >= 2 * result.get("link_gbps", 1),
          "the CPU alone carries at least twice the link rate", (result.get("cpu_gbps"), result.get("link_gbps")))
    check(lossless.get("link_share", 0) >= 0.9, "lossless metaroce fills >= 90 % of the link's payload rate",
          lossless)
    check(0 < lossless.get("cpu_busy_share", 1) < 0.8,
          "lossless, the sender lcore is busy less than 80 % of its cycles (the link limits it, not the CPU)",
          lossless.get("cpu_busy_share"))
    one = rows.get(1, {})
    check(one.get("pct_of_lossless", 0) >= 90, "metaroce at 1 % loss keeps >= 90 % of lossless (target 95 %)", one)
    ten = rows.get(10, {})
    check(ten.get("pct_of_lossless", 0) >= 75, "metaroce at 10 % loss keeps >= 75 % of lossless (target 80 %)", ten)

print(f"1..{len(checks)}")
print(f"# {attempts} run(s); the last:")
for line in lines[:-1]:
    print(f"# {line}")
failed = 0
for i, (ok, desc, why, directive) in enumerate(checks, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {desc}{directive}")
    if not ok:
        failed += 1
        print(f"# {why}")
sys.exit(1 if failed else 0)
