#!/usr/bin/python3
"""Runs metaroce-bench-incast (deterministic, about 1 s) and checks the
congestion-control targets (doc/BENCHMARKS.md) on its JSON line, one TAP
point each.

usage: check_incast.py BENCH"""
import json
import subprocess
import sys

bench = sys.argv[1]
run = subprocess.run([bench], capture_output=True, text=True, timeout=600)
lines = run.stdout.strip().splitlines()
checks = []
if run.returncode != 0 or not lines:
    checks.append((False, "benchmark ran", f"exit {run.returncode}: {run.stderr[-300:]}"))
    r = {}
else:
    r = json.loads(lines[-1])
    checks.append((r.get("bench") == "incast", "last line is the incast JSON object", lines[-1][:200]))

def check(cond, desc, got):
    checks.append((bool(cond), desc, f"got {got}"))

if r:
    check(r["converge_rtts"] is not None and r["converge_rtts"] <= 2,
          "metaroce: every flow within 10% of its fair share within 2 base RTTs", r["converge_rtts"])
    check(r["aggregate_rtts"] is not None and r["aggregate_rtts"] <= 2,
          "metaroce: aggregate goodput within 10% of the link within 2 base RTTs", r["aggregate_rtts"])
    check(r["goodput_gbps"] >= 90, "metaroce: steady goodput within 10% of the 100 Gb/s link", r["goodput_gbps"])
    check(r["jain"] >= 0.99, "metaroce: Jain fairness >= 0.99 in steady state", r["jain"])
    check(r["steady_queue_kb"] < 100, "metaroce: steady-state queue below the ECN threshold", r["steady_queue_kb"])
    check(r["join_rtts"] <= 3 and r["leave_rtts"] <= 3, "metaroce: a flow joining or leaving settles within 3 RTTs",
          (r["join_rtts"], r["leave_rtts"]))
    check(r["ecmp_slow_link_share"] < 0.1, "metaroce: a half-rate ECMP link carries less than its equal share",
          r["ecmp_slow_link_share"])
    check(r["loss1_goodput_ratio"] >= 0.95, "metaroce: 1% random loss keeps >= 95% of lossless goodput",
          r["loss1_goodput_ratio"])

print(f"1..{len(checks)}")
failed = 0
for i, (ok, desc, why) in enumerate(checks, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {desc}")
    if not ok:
        failed += 1
        print(f"# {why}")
sys.exit(1 if failed else 0)
