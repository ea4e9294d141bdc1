#!/usr/bin/env python3
"""Runs every shell block of README.md and doc/APPS.md as a reader would.

Each ```sh block is one TAP case: it runs with bash -e -o pipefail from a
fresh directory that looks like the top of the repository (build/,
drivers-config/ and examples/ link to the real ones; results/ is its own),
within its time limit. It passes when it exits 0 (or the status it states),
its output holds every outcome it states, and it leaves nothing behind: no
process still running, no new network interface or namespace, no file
outside results/. What it left is removed either way.

A block states what it needs in an HTML comment on the line before it:
  <!-- doc-test: root; timeout 30; expect "REGEX"; status 1 -->
  <!-- doc-test: skip REASON -->            (reported as a TAP skip)
Blocks marked root are skipped, visibly, when not run as root.

  doc_blocks_test.py SOURCE_ROOT BUILD_DIR [FILE...]
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^```sh\s*$")
MARK = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->\s*$")


def blocks(path):
    """(line number, text, directives) of every ```sh block in `path`."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            start = i
            mark = MARK.match(lines[i - 1]) if i > 0 else None
            j = i + 1
            while j < len(lines) and lines[j].rstrip() != "```":
                j += 1
            out.append((start + 1, "\n".join(lines[i + 1:j]) + "\n", mark.group(1) if mark else ""))
            i = j
        i += 1
    return out


def directives(text):
    """{"root": bool, "skip": reason or None, "timeout": s, "expect": [...], "status": n}."""
    d = {"root": False, "skip": None, "timeout": 60.0, "expect": [], "status": 0}
    if text.startswith("skip"):  # the rest is the reason, whatever it holds
        d["skip"] = text[4:].strip() or "marked skip"
        return d
    for part in [p.strip() for p in re.split(r';(?=(?:[^"]*"[^"]*")*[^"]*$)', text) if p.strip()]:
        if part == "root":
            d["root"] = True
        elif part.startswith("timeout "):
            d["timeout"] = float(part.split()[1])
        elif part.startswith("status "):
            d["status"] = int(part.split()[1])
        elif part.startswith("expect "):
            d["expect"].append(part[len("expect "):].strip().strip('"'))
        else:
            raise SystemExit(f"unknown doc-test directive '{part}'")
    return d


def links():
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {re.split(r"[:@]", line.split(": ", 1)[1])[0] for line in out.splitlines() if ": " in line}


def namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def files_outside_results(scratch, seeded):
    found = set()
    for root, dirs, names in os.walk(scratch):
        rel = os.path.relpath(root, scratch)
        if rel == "results" or rel.startswith("results" + os.sep):
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for n in names + dirs:
            p = os.path.normpath(os.path.join(rel, n))
            if p not in seeded and p != "results":
                found.add(p)
    return found


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def run_block(source_root, build_dir, text, d):
    """(passed, lines of diagnosis)."""
    scratch = tempfile.mkdtemp(prefix="metaroce-doc-")
    for name, target in (("build", build_dir), ("drivers-config", os.path.join(source_root, "drivers-config")),
                         ("examples", os.path.join(source_root, "examples"))):
        os.symlink(os.path.abspath(target), os.path.join(scratch, name))
    seeded = {"build", "drivers-config", "examples"}
    links_before, ns_before = links(), namespaces()
    log_path = os.path.join(tempfile.gettempdir(), f"metaroce-doc-{os.getpid()}.log")
    problems = []
    with open(log_path, "w+b") as log:
        started = time.monotonic()
        proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", text], cwd=scratch, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            status = proc.wait(timeout=d["timeout"])
        except subprocess.TimeoutExpired:
            status = None
            problems.append(f"did not finish within {d['timeout']:.0f} s")
        seconds = time.monotonic() - started
        time.sleep(0.2)
        if group_alive(proc.pid):
            problems.append("left a process running (killed)")
            os.killpg(proc.pid, signal.SIGKILL)
            for _ in range(50):
                if not group_alive(proc.pid):
                    break
                time.sleep(0.1)
        if status is not None and status != d["status"]:
            problems.append(f"exit status {status}, expected {d['status']}")
        log.seek(0)
        output = log.read().decode("utf-8", "replace")
    os.unlink(log_path)
    for pattern in d["expect"]:
        if not re.search(pattern, output, re.MULTILINE):
            problems.append(f"output lacks /{pattern}/")
    for name in sorted(namespaces() - ns_before):
        problems.append(f"left network namespace {name} (removed)")
        subprocess.run(["ip", "netns", "del", name])
    for name in sorted(links() - links_before):
        problems.append(f"left interface {name} (removed)")
        subprocess.run(["ip", "link", "del", name], stderr=subprocess.DEVNULL)
    for p in sorted(files_outside_results(scratch, seeded)):
        problems.append(f"left {p} outside results/")
    shutil.rmtree(scratch, ignore_errors=True)
    diagnosis = [f"ran in {seconds:.1f} s"] + problems
    if problems:
        diagnosis += ["output (last 30 lines):"] + output.splitlines()[-30:]
    return not problems, diagnosis


def main():
    source_root, build_dir = sys.argv[1], sys.argv[2]
    files = sys.argv[3:] or ["README.md", "doc/APPS.md"]
    cases = []
    for f in files:
        for line, text, mark in blocks(os.path.join(source_root, f)):
            cases.append((f, line, text, directives(mark)))
    print(f"1..{len(cases)}")
    failed = 0
    root = os.geteuid() == 0
    for n, (f, line, text, d) in enumerate(cases, 1):
        first = text.strip().splitlines()[0] if text.strip() else "(empty)"
        name = f"{f}:{line} {first[:70]}"
        if d["skip"]:
            print(f"ok {n} - {name} # SKIP {d['skip']}")
            continue
        if d["root"] and not root:
            print(f"ok {n} - {name} # SKIP needs root")
            continue
        passed, diagnosis = run_block(source_root, build_dir, text, d)
        print(f"{'ok' if passed else 'not ok'} {n} - {name}")
        for line_text in diagnosis:
            print(f"# {line_text}")
        sys.stdout.flush()
        failed += not passed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
