#!/usr/bin/env python3
"""Every list the docs keep of the tree, checked against the tree, so none
goes stale: benchmark names (README, doc/BENCHMARKS.md), fuzz targets
(README, doc/FUZZING.md, tools/fuzz, tests/fuzz), what .ci/run runs, the
README's Layout (lib/ layers, top-level folders, tools, docs, presets), its
Dependencies (tools/setup's and tools/fuzz's packages) and its Commands
table (every tool). Prints TAP; each failure names what to add or drop.

  doc_lists_test.py SOURCE_ROOT
"""
import os
import re
import sys

root = sys.argv[1]


def read(path):
    return open(os.path.join(root, path), encoding="utf-8").read()


def section(text, heading):
    """The text under `## heading` up to the next `## `."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    if not m:
        raise SystemExit(f"no section '## {heading}'")
    return m.group(1)


def ticked(text):
    return re.findall(r"`([^`]+)`", text)


readme = read("README.md")
checks = []


def same(name, documented, actual):
    documented, actual = set(documented), set(actual)
    missing, extra = sorted(actual - documented), sorted(documented - actual)
    why = []
    if missing:
        why.append(f"add {', '.join(missing)}")
    if extra:
        why.append(f"drop {', '.join(extra)} (not in the tree)")
    checks.append((name, not why and bool(actual), "; ".join(why) or ("the tree has none" if not actual else "")))


# Benchmarks: build/tests/bench/**/metaroce-bench-NAME, from the meson files
# (an executable, or a script put there by configure_file).
benches = []
for dirpath, _, names in os.walk(os.path.join(root, "tests/bench")):
    if "meson.build" in names:
        benches += re.findall(r"(?:executable\(|output: )'metaroce-bench-([a-z0-9-]+)'",
                              open(os.path.join(dirpath, "meson.build")).read())
for doc in ("README.md", "doc/BENCHMARKS.md"):
    m = re.search(r"`tools/bench` alone lists the names: (.*?)(?:\.|\|)\s", read(doc), re.DOTALL)
    same(f"{doc}: the benchmark names are tests/bench's", ticked(m.group(1)) if m else [], benches)

# Fuzz targets: tools/fuzz runs them, tests/fuzz builds them, the docs name them.
fuzz_script = read("tools/fuzz")
targets = re.search(r"^targets=\((.*?)\)", fuzz_script, re.MULTILINE).group(1).split()
same("tests/fuzz/meson.build builds the targets tools/fuzz runs",
     re.findall(r"executable\('(fuzz-[a-z-]+)'", read("tests/fuzz/meson.build")), targets)
fuzz_row = next(line for line in readme.splitlines() if line.startswith("| `tools/fuzz"))
same("README's tools/fuzz row names tools/fuzz's targets", re.findall(r"`(fuzz-[a-z-]+)`", fuzz_row), targets)
same("doc/FUZZING.md has a section per target", re.findall(r"^### (fuzz-[a-z-]+)", read("doc/FUZZING.md"),
                                                           re.MULTILINE), targets)

# .ci/run: the tools it runs and the sanitizer build, in README's row.
ci = read(".ci/run")
ci_steps = sorted(set(re.findall(r"^\s*(?:[A-Z_]+=\S+ )*(tools/[a-z-]+(?: [0-9]+(?=\s))?)", ci, re.MULTILINE)))
if "b_sanitize=address,undefined" in ci:
    ci_steps.append("ASan+UBSan")
ci_row = next(line for line in readme.splitlines() if line.startswith("| `.ci/run`"))
ci_named = re.findall(r"`(tools/[a-z-]+(?: [0-9]+)?)`", ci_row) + (["ASan+UBSan"] if "ASan+UBSan" in ci_row else [])
same("README's .ci/run row names every step .ci/run runs", ci_named, ci_steps)

# Layout.
layout = section(readme, "Layout")
lib_dirs = [d for d in os.listdir(os.path.join(root, "lib")) if os.path.isdir(os.path.join(root, "lib", d))]
same("Layout lists every lib/ layer", re.findall(r"^lib/([a-z]+)/", layout, re.MULTILINE), lib_dirs)
# Build directories (build/, build-asan/, ...), what the tools write
# (results/, which .gitignore keeps out) and hidden ones but .ci/ are not
# part of the tree.
top_dirs = [d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and d not in ("lib", "results")
            and not d.startswith("build") and (d == ".ci" or not d.startswith("."))]
documented_top = [m.split("/")[0] for m in re.findall(r"^(\.?[a-z-]+)/", layout, re.MULTILINE) if m != "lib"]
same("Layout lists every top-level folder", documented_top, top_dirs)


def layout_line(prefix):
    m = re.search(rf"^{re.escape(prefix)}\s+(.*)$", layout, re.MULTILINE)
    return [w.strip() for w in m.group(1).split(",")] if m else []


tools = [f for f in os.listdir(os.path.join(root, "tools")) if os.access(os.path.join(root, "tools", f), os.X_OK)]
same("Layout's tools/ line lists every tool", layout_line("tools/"), tools)
docs = [f[:-3] for f in os.listdir(os.path.join(root, "doc")) if f.endswith(".md")]
same("Layout's doc/ line lists every doc", layout_line("doc/"), docs)
m = re.search(r"^drivers-config/\s+port presets \((.*?)\)", layout, re.MULTILINE)
presets = [f[:-4] for f in os.listdir(os.path.join(root, "drivers-config")) if f.endswith(".ini")]
same("Layout's drivers-config/ line lists every preset", [w.strip() for w in m.group(1).split(",")] if m else [],
     presets)

# Dependencies: what tools/setup and tools/fuzz install.
setup = read("tools/setup")
packages = []
for line in re.search(r"^packages=\((.*?)^\)", setup, re.MULTILINE | re.DOTALL).group(1).splitlines():
    packages += line.split("#")[0].split()
packages += re.search(r"^fuzz_packages=\((.*?)\)", fuzz_script, re.MULTILINE).group(1).split()
same("README's Dependencies name every package tools/setup and tools/fuzz install",
     [w for w in ticked(section(readme, "Dependencies")) if re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", w)
      and not w.startswith("tools/")], packages)

# Commands: a row per tool (count-test-cases is tools/test's helper).
rows = re.findall(r"^\| `(tools/[a-z-]+)", section(readme, "Commands"), re.MULTILINE)
same("README's Commands table has a row per tool", [r.split("/")[1] for r in rows],
     [t for t in tools if t != "count-test-cases"])

print(f"1..{len(checks)}")
for n, (name, passed, why) in enumerate(checks, 1):
    print(f"{'ok' if passed else 'not ok'} {n} - {name}")
    if why:
        print(f"# {why}")
sys.exit(0 if all(p for _, p, _ in checks) else 1)
