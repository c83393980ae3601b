#!/usr/bin/env python3
"""Where a one-node cluster's CPU per relayed message goes, against the single server's.

For each row (`single`: one dialtone-server with its embedded defaults; `1`: one cluster node on a
scratch PostgreSQL and Redis, with --node-args), the bench's signaling load (`dialtone-bench
signaling --target ...`, as bench/cluster_bench.py drives it) runs against the server, and over a
window of steady load this reads, per relayed message (the server's own count of invite, accept,
candidate and hangup, from /metrics):

- live (default): each server thread's user and system CPU and its voluntary and involuntary
  context switches (/proc/PID/task/*/stat and status), Redis's and PostgreSQL's CPU (all their
  processes), and Redis's `INFO commandstats` calls and usec over the same window;
- `--callgrind`: the server under `valgrind --tool=callgrind` (threads kept apart), its counts
  zeroed at the window's start and dumped at its end: instructions per relayed message in all
  and the dump's path, for `callgrind_annotate --inclusive=yes <dump>`. Callgrind runs the
  server's threads one at a time, about fifty times slower: keep --rate low (300).

Usage:
    python3 bench/cluster_cost_split.py --bin DIR [--bench DIR/dialtone-bench] [--rows single,1]
        [--rate 2000] [--idle 2000] [--window 8] [--settle 3] [--callgrind] [--node-args "..."]
"""
import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_bench  # noqa: E402  (its INFO commandstats reader)

TICKS = os.sysconf("SC_CLK_TCK")
NO_LIMITS = ["--max-connections-per-ip", "0", "--messages-per-second", "0", "--invites-per-minute", "0",
             "--http-requests-per-second", "0", "--max-live-calls-per-user", "64", "--log-level", "error"]


def relayed(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    total = 0.0
    for line in text.splitlines():
        for kind in ("invite", "accept", "candidate", "hangup"):
            if line.startswith(f'dialtone_messages_received_total{{type="{kind}"}}'):
                total += float(line.rsplit(" ", 1)[1])
    return total


def threads(pid):
    """Per thread name: [user ticks, system ticks, voluntary switches, involuntary switches]."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        row = out.setdefault(name, [0, 0, 0, 0])
        row[0] += int(fields[11])
        row[1] += int(fields[12])
        row[2] += int(status["voluntary_ctxt_switches"])
        row[3] += int(status["nonvoluntary_ctxt_switches"])
    return out


def tree_cpu(pid):
    """User plus system ticks of a process and its children that ran (PostgreSQL's backends)."""
    total = 0
    pids = [pid]
    while pids:
        p = pids.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
            with open(f"/proc/{p}/task/{p}/children") as f:
                pids += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return total


def commandstats(port):
    """Per command: (calls, usec) from `INFO commandstats`."""
    calls, usec = cluster_bench.commandstats(port, "calls"), cluster_bench.commandstats(port, "usec")
    return {name: (calls[name], usec.get(name, 0)) for name in calls}


async def steady(port, proc):
    """Waits until the relayed count has grown twice in a row."""
    previous = 0.0
    for _ in range(600):
        if proc.returncode is not None:
            raise SystemExit("dialtone-bench ended before the load was steady")
        try:
            now = relayed(port)
        except OSError:
            now = 0.0
        if previous > 0 and now > previous:
            return
        previous = now
        await asyncio.sleep(1)
    raise SystemExit("the load never became steady")


async def row(args, name, scratch, wrapper_dir):
    import harness
    from cluster_scenarios import ScratchPostgres, ScratchRedis
    postgres = redis = None
    extra = list(NO_LIMITS)
    if name == "1":
        postgres = await ScratchPostgres(scratch, None).start()
        redis = await ScratchRedis(scratch, None).start()
        extra += ["--database-url", postgres.url, "--redis-url", redis.url, "--node-name", "split-1",
                  *args.node_args.split()]
    harness.BIN = wrapper_dir if args.callgrind else args.bin
    own = harness.Scratch()
    server = harness.Server(own, extra=extra)
    await server.start()
    pid = server.process.proc.pid
    seconds = args.window + (60 if args.callgrind else 20) + args.idle / 500
    command = [args.bench, "signaling", "--calls", str(args.calls), "--idle", str(args.idle), "--rate",
               str(args.rate), "--seconds", str(int(seconds)), "--secret", harness.SECRET, "--label", name,
               "--json", "--target", f"ws://127.0.0.1:{server.port}/v1/ws"]
    bench = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.DEVNULL)
    try:
        await steady(server.port, bench)
        await asyncio.sleep(args.settle)
        before_stats = commandstats(redis.port) if redis else {}
        before = {"relayed": relayed(server.port), "threads": threads(pid), "time": time.monotonic(),
                  "redis": tree_cpu(redis.process.proc.pid) if redis else 0,
                  "postgres": tree_cpu(postgres.process.proc.pid) if postgres else 0}
        if args.callgrind:
            subprocess.run(["callgrind_control", "-z", str(pid)], capture_output=True)
        await asyncio.sleep(args.window)
        if args.callgrind:
            subprocess.run(["callgrind_control", "-d", str(pid)], capture_output=True)
        after = {"relayed": relayed(server.port), "threads": threads(pid), "time": time.monotonic(),
                 "redis": tree_cpu(redis.process.proc.pid) if redis else 0,
                 "postgres": tree_cpu(postgres.process.proc.pid) if postgres else 0}
        after_stats = commandstats(redis.port) if redis else {}
        if bench.returncode is not None:
            raise SystemExit("dialtone-bench ended inside the window: lengthen it")
    finally:
        if bench.returncode is None:
            bench.terminate()
        await bench.wait()
        await server.stop()
        own.remove()
        if redis:
            await redis.stop()
        if postgres:
            await postgres.stop()
    messages = after["relayed"] - before["relayed"]
    per = 1e6 / TICKS / messages  # µs per relayed message for one tick
    report = {"row": name, "relayed": messages, "relayedPerSecond": messages / (after["time"] - before["time"])}
    by_thread = {}
    for thread, values in after["threads"].items():
        old = before["threads"].get(thread, [0, 0, 0, 0])
        delta = [a - b for a, b in zip(values, old)]
        if any(delta):
            by_thread[thread] = {"userUs": delta[0] * per, "systemUs": delta[1] * per,
                                 "voluntary": delta[2] / messages, "involuntary": delta[3] / messages}
    report["threads"] = by_thread
    report["serverUs"] = sum(t["userUs"] + t["systemUs"] for t in by_thread.values())
    report["redisUs"] = (after["redis"] - before["redis"]) * per
    report["postgresUs"] = (after["postgres"] - before["postgres"]) * per
    if redis:
        report["commandstats"] = {
            command: {"calls": (calls - before_stats.get(command, (0, 0))[0]) / messages,
                      "usec": (usec - before_stats.get(command, (0, 0))[1]) / messages}
            for command, (calls, usec) in after_stats.items()
            if calls != before_stats.get(command, (0, 0))[0]}
    if args.callgrind:
        dumps = sorted(f for f in os.listdir(wrapper_dir) if f.startswith(f"callgrind.out.{pid}"))
        instructions = 0
        for dump in dumps:
            with open(os.path.join(wrapper_dir, dump)) as f:
                for line in f:
                    if line.startswith(("summary:", "totals:")):
                        instructions += int(line.split()[1])
                        break
        report["instructionsPerMessage"] = instructions / messages
        report["dumps"] = [os.path.join(wrapper_dir, d) for d in dumps]
    return report


async def main():
    import harness
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True, help="the directory of the dialtone-server to measure")
    parser.add_argument("--bench", help="the dialtone-bench to drive the load (default: the one in --bin)")
    parser.add_argument("--rows", default="single,1")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--idle", type=int, default=2000)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--window", type=float, default=8)
    parser.add_argument("--settle", type=float, help="seconds between the load's first relayed messages and the "
                        "window (default 3, under callgrind 5)")
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--node-args", default="--cluster-sessions write-behind --batch-window-ms 10")
    args = parser.parse_args()
    if args.settle is None:
        args.settle = 5 if args.callgrind else 3
    args.bin = os.path.abspath(args.bin)
    args.bench = os.path.abspath(args.bench or os.path.join(args.bin, "dialtone-bench"))
    wrapper_dir = tempfile.mkdtemp(prefix="cluster-cost-split.")
    if args.callgrind:
        # Valgrind 3.19 and libdispatch's sigsuspend: bench/valgrind_sigsuspend.c.
        source = os.path.join(ROOT, "bench", "valgrind_sigsuspend.c")
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", os.path.join(wrapper_dir, "libsigsuspend.so"),
                        source], check=True)
        with open(os.path.join(wrapper_dir, "dialtone-server"), "w") as f:
            f.write(f"#!/bin/sh\nexport LD_PRELOAD={wrapper_dir}/libsigsuspend.so\n"
                    f"exec valgrind --tool=callgrind --separate-threads=yes "
                    f"--callgrind-out-file={wrapper_dir}/callgrind.out.%p "
                    f"{args.bin}/dialtone-server \"$@\" 2>>{wrapper_dir}/valgrind.log\n")
        os.chmod(os.path.join(wrapper_dir, "dialtone-server"), 0o755)
    scratch = harness.Scratch()
    reports = []
    try:
        for name in args.rows.split(","):
            reports.append(await row(args, name, scratch, wrapper_dir))
    finally:
        scratch.remove()
    print(json.dumps(reports))
    for report in reports:
        print(f"{report['row']:>6}: {report['relayedPerSecond']:.0f} relayed/s; server {report['serverUs']:.1f} µs/msg, "
              f"Redis {report['redisUs']:.1f}, PostgreSQL {report['postgresUs']:.1f}"
              + (f"; {report['instructionsPerMessage']:.0f} instructions/msg" if "instructionsPerMessage" in report
                 else ""))
        for thread, t in sorted(report["threads"].items(), key=lambda kv: -(kv[1]["userUs"] + kv[1]["systemUs"])):
            print(f"        {thread:18} user {t['userUs']:6.1f}  system {t['systemUs']:6.1f}  "
                  f"switches {t['voluntary']:.2f} + {t['involuntary']:.2f} involuntary")
        for command, c in sorted(report.get("commandstats", {}).items(), key=lambda kv: -kv[1]["usec"]):
            print(f"        {command:18} {c['calls']:.2f} calls, {c['usec']:.1f} µs")


if __name__ == "__main__":
    asyncio.run(main())
