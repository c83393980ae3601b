#!/usr/bin/env python3
"""`make bench-gate`: short versions of bench-signaling, bench-ws and bench-push in one run,
each against its anchor where it has one (the Node `ws` relay, aioapns), compared with the
figures recorded in docs/benchmarks.md ("`make bench-gate`": the recorded value and the noise
measured over five runs). Exits 1 when a figure is worse than recorded by more than its noise.

    python3 bench/bench_gate.py --bin .build/release            # the gate
    python3 bench/bench_gate.py --bin .build/release --runs 5   # the noise: five runs, medians and spread

The figures are ratios to an anchor run on the same machine right after (signaling CPU, push
CPU), so that a busier or faster machine moves both sides; memory per idle socket has no anchor
(it does not depend on the machine's load) and is compared as it is.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

# figure key -> (what it is, which way is better)
FIGURES = {
    "signaling_cpu_ratio": ("CPU per relayed message / Node relay's", "lower"),
    "ws_kb_per_socket": ("RSS per idle authenticated socket, KB", "lower"),
    "push_cpu_ratio": ("aioapns CPU per push / Dialtone's", "higher"),
}
# Shown, not gated: too noisy in a short run on a shared machine.
SHOWN = {
    "signaling_p99_ratio": "relay p99 / Node relay's",
}

ROW = re.compile(r"^\|[^|]*\|\s*`(?P<key>[a-z0-9_]+)`\s*\|\s*(?P<recorded>[0-9.]+)\s*\|\s*(?P<noise>[0-9.]+)\s*\|")


def run(command, timeout):
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        sys.exit(f"bench-gate: {' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout


def signaling(binary, root):
    out = run(
        [binary + "/dialtone-bench", "signaling", "--calls", "100", "--idle", "2000", "--rate", "5000",
         "--seconds", "8", "--node-relay", os.path.join(root, "bench/node-relay.js")],
        timeout=300,
    )
    rows = {}
    for line in out.splitlines():
        for name in ("dialtone", "node ws relay"):
            if line.startswith(name + " ") and re.match(r"^[a-z ]+\s+[0-9]", line):
                numbers = line[len(name):].split()
                # relayed msg/s, calls/s, p50, p99, p99.9, RSS MB, CPU %, CPU µs/msg, sys µs/msg, client µs/msg
                rows[name] = {"p99": float(numbers[3]), "cpu": float(numbers[7])}
    if len(rows) != 2:
        sys.exit(f"bench-gate: cannot read bench-signaling's output:\n{out}")
    d, n = rows["dialtone"], rows["node ws relay"]
    return {
        "signaling_cpu_ratio": d["cpu"] / n["cpu"],
        "signaling_p99_ratio": d["p99"] / n["p99"],
        "signaling_dialtone_us": d["cpu"],
        "signaling_node_us": n["cpu"],
    }


def websockets(binary):
    out = run(
        [binary + "/dialtone-bench", "ws", "--connections", "5000", "--idle-seconds", "2", "--settle-seconds", "6",
         "--json"],
        timeout=300,
    )
    line = next((l for l in out.splitlines() if l.startswith("{")), None)
    if line is None:
        sys.exit(f"bench-gate: cannot read bench-ws's output:\n{out}")
    return {"ws_kb_per_socket": json.loads(line)["rss_per_connection_kb"]}


def push(binary, root):
    out = run([binary + "/dialtone-bench", "push", "--pushes", "3000", "--repo", root], timeout=300)
    dialtone = re.search(r"dialtone CPU: ([0-9.]+) µs per push", out)
    aioapns = re.search(r"aioapns CPU: ([0-9.]+) µs per push", out)
    if not dialtone or not aioapns:
        sys.exit(f"bench-gate: cannot read bench-push's output:\n{out}")
    d, a = float(dialtone.group(1)), float(aioapns.group(1))
    return {"push_cpu_ratio": a / d, "push_dialtone_us": d, "push_aioapns_us": a}


def recorded(docs):
    """The gate's rows of docs/benchmarks.md: key -> (recorded, noise)."""
    figures = {}
    with open(docs, encoding="utf-8") as f:
        for line in f:
            m = ROW.match(line.strip())
            if m and m.group("key") in FIGURES:
                figures[m.group("key")] = (float(m.group("recorded")), float(m.group("noise")))
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=".build/release")
    parser.add_argument("--runs", type=int, default=1, help="runs; with more than one, medians and spread")
    parser.add_argument("--docs", default="docs/benchmarks.md")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binary = os.path.abspath(args.bin)

    runs = []
    for index in range(args.runs):
        figures = {}
        figures.update(signaling(binary, root))
        figures.update(websockets(binary))
        figures.update(push(binary, root))
        runs.append(figures)
        print(f"run {index + 1}: " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()), flush=True)

    keys = list(FIGURES) + list(SHOWN)
    median = {k: statistics.median(r[k] for r in runs) for k in keys}
    if args.runs > 1:
        print("\nfigure                  median   min      max      noise (largest distance from the median)")
        for k in keys:
            values = [r[k] for r in runs]
            noise = max(abs(v - median[k]) for v in values)
            print(f"{k:22}  {median[k]:7.3f}  {min(values):7.3f}  {max(values):7.3f}  {noise:7.3f}")

    gate = recorded(os.path.join(root, args.docs))
    missing = [k for k in FIGURES if k not in gate]
    if missing:
        sys.exit(f"bench-gate: {args.docs} records no figure for {', '.join(missing)}")
    failed = []
    print("\nfigure                  now      recorded  noise   limit    verdict")
    for key, (what, better) in FIGURES.items():
        value, (was, noise) = median[key], gate[key]
        limit = was + noise if better == "lower" else was - noise
        worse = value > limit if better == "lower" else value < limit
        if worse:
            failed.append(key)
        print(f"{key:22}  {value:7.3f}  {was:8.3f}  {noise:6.3f}  {limit:7.3f}  {'WORSE' if worse else 'ok'}  ({what})")
    for key, what in SHOWN.items():
        print(f"{key:22}  {median[key]:7.3f}  (shown, not gated: {what})")
    if failed:
        print(f"\nbench-gate: FAILED: {', '.join(failed)} worse than recorded by more than the noise")
        return 1
    print("\nbench-gate: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
