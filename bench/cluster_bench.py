#!/usr/bin/env python3
"""The signaling load against one node and against a cluster of three: `make bench-cluster`.

Rows, in one run on one machine, each the same load (`dialtone-bench signaling --target ...`:
K concurrent calls paced to RATE relayed messages per second, IDLE idle authenticated sockets
held meanwhile):

- single    one dialtone-server with its embedded defaults (SQLite, one process): `make run`;
- 1 node    one node in cluster mode (PostgreSQL and Redis): what keeping sessions in Redis costs
            on its own;
- 3 nodes   three nodes on one PostgreSQL and one Redis, every call's caller and callee on
            different nodes (the idle sockets spread over the three), so every relayed message
            crosses nodes;
- 3 nodes/RC  with `--redis-cluster`: the same on a three-shard Redis Cluster with a replica per
            shard (Redis's share is all six servers', replication included).

For each: relay latency p50/p99 (sender's send to receiver's read), and CPU per relayed message
of the servers plus Redis (Redis's share on its own). While the idle sockets are held, each
node's RSS and Redis's memory are sampled against the same processes before the load: memory per
connection. Everything listens on this host's loopback. Usage:
    python3 bench/cluster_bench.py [--bin .build/release] [--calls 100] [--idle 15000] [--rate 2000]
"""
import argparse
import asyncio
import json
import os
import platform
import resource
import subprocess
import sys
import time



ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import batch_slowlog  # noqa: E402


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def redis_used_memory(port):
    if isinstance(port, list):
        return sum(redis_used_memory(p) for p in port)
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO", "memory"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
    return 0


async def sample_while(process, pids, redis_port, after):
    """Samples the processes' RSS (and Redis's memory) once the load holds its sockets."""
    await asyncio.sleep(after)
    if process.returncode is not None:
        return None
    return {"rss": {pid: rss_bytes(pid) for pid in pids}, "redis": redis_used_memory(redis_port) if redis_port else 0}


def shard_of(port):
    """The primary's port a Redis Cluster server belongs to (itself when it is one)."""
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO", "replication"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("master_port:"):
            return int(line.split(":")[1])
    return port


def commandstats(ports, field="calls"):
    """`INFO commandstats` calls (or `usec`, the microseconds) per command, summed over the servers."""
    calls = {}
    for port in ports if isinstance(ports, list) else [ports]:
        out = subprocess.run(["redis-cli", "-p", str(port), "INFO", "commandstats"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("cmdstat_"):
                name, fields = line[len("cmdstat_"):].split(":", 1)
                values = dict(field.split("=") for field in fields.split(","))
                calls[name] = calls.get(name, 0) + int(values[field])
    return calls


def cluster_counters(nodes):
    """The nodes' store failures and replica WAIT outcomes (`/metrics`), summed: whether the load
    ran with writes refused for want of a replica's confirmation; and the transactions that
    stored session steps, and the steps they carried (since the node started)."""
    import urllib.request
    wanted = ("dialtone_cluster_store_failures_total", "dialtone_cluster_redis_replica_waits_total",
              "dialtone_cluster_store_transactions_total", "dialtone_cluster_store_steps_total",
              "dialtone_cluster_write_behind_batch")
    totals = {}
    for node in nodes:
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{node.port}/metrics", timeout=5).read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith(wanted):
                name, _, value = line.rpartition(" ")
                totals[name] = totals.get(name, 0) + float(value)
    return totals


async def run_load(args, label, nodes, measured, breakdown=(), redis_port=None):
    bench = args.bench or os.path.join(args.bin, "dialtone-bench")
    command = [bench, "signaling", "--calls", str(args.calls), "--idle", str(args.idle), "--rate", str(args.rate),
               "--seconds", str(args.seconds), "--secret", SECRET, "--label", label, "--json"]
    for node in nodes:
        command += ["--target", f"ws://127.0.0.1:{node.port}/v1/ws"]
    for pid in measured:
        command += ["--measure-pid", str(pid)]
    for pid in breakdown:
        command += ["--breakdown-pid", str(pid)]
    node_pids = [n.process.proc.pid for n in nodes]
    before = {"rss": {pid: rss_bytes(pid) for pid in node_pids},
              "redis": redis_used_memory(redis_port) if redis_port else 0}
    if redis_port and args.slowlog and not isinstance(redis_port, list):
        batch_slowlog.start(redis_port)
    process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)
    # The idle sockets connect in batches of 500 (about 1 s per 1,000 here), then the load runs.
    sampler = asyncio.create_task(sample_while(process, node_pids, redis_port,
                                               after=min(args.seconds / 2 + args.idle / 1000, 60)))
    out, _ = await process.communicate()
    during = await sampler
    if redis_port and args.commandstats:
        # Everything since Redis started (the idle sockets' sessions included): relative counts.
        print(f"{label} commandstats: {json.dumps(commandstats(redis_port), sort_keys=True)}", file=sys.stderr)
        # A script's usec include the commands it called, which are counted on their own too.
        print(f"{label} commandstats usec: {json.dumps(commandstats(redis_port, 'usec'), sort_keys=True)}",
              file=sys.stderr)
    if process.returncode != 0:
        raise SystemExit(f"{label}: dialtone-bench exited {process.returncode}")
    report = json.loads(out.decode().strip().splitlines()[-1])
    if redis_port and args.slowlog and not isinstance(redis_port, list):
        # The write-behind batches' Redis cost by size (bench/batch_slowlog.py).
        batches = batch_slowlog.summary(redis_port)
        report["batchSlowlog"] = batches
        print(f"{label} batch slowlog: {json.dumps(batches, sort_keys=True)}", file=sys.stderr)
    counters = cluster_counters(nodes)
    if counters:
        report["clusterCounters"] = counters
        print(f"{label} cluster counters: {json.dumps(counters, sort_keys=True)}", file=sys.stderr)
    sockets = args.idle + 2 * args.calls
    if during:
        report["nodeKBPerSocket"] = sum(during["rss"][p] - before["rss"][p] for p in node_pids) / sockets / 1024
        report["redisBytesPerSocket"] = (during["redis"] - before["redis"]) / sockets if redis_port else None
        report["nodeRSSMB"] = [round(during["rss"][p] / 1048576, 1) for p in node_pids]
    return report


async def main():
    import harness
    from cluster_scenarios import ScratchPostgres, ScratchRedis, ScratchRedisCluster
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"))
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--idle", type=int, default=15000)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--bench", help="the dialtone-bench to drive the load with (default: the one in --bin), so "
                        "that two builds' servers are measured by the same load")
    parser.add_argument("--rows", default="single,1,3", help="which rows to run: single, 1, 3 (and rc with "
                        "--redis-cluster), comma-separated")
    parser.add_argument("--commandstats", action="store_true", help="print each Redis's INFO commandstats after its row")
    parser.add_argument("--slowlog", action="store_true", help="log every Redis command's time (SLOWLOG, threshold "
                        "0) during each row and print the write-behind batch script's cost per call, session and "
                        "frame (bench/batch_slowlog.py); it adds Redis work, so not for A/B figures")
    parser.add_argument("--baseline-bin", help="another build's binaries (say main's): each row runs on it first, "
                        "then on --bin, labelled 'base' and 'new', so that an A/B comparison shares one run")
    parser.add_argument("--redis-cluster", action="store_true",
                        help="add a row of three nodes on a three-shard Redis Cluster (a replica per shard)")
    parser.add_argument("--node-args", default="", help="extra server options for --bin's cluster nodes only "
                        "(not the baseline's, which may not know them), space-separated: say "
                        "'--cluster-sessions write-behind'")
    parser.add_argument("--baseline-node-args", default="", help="extra server options for --baseline-bin's cluster "
                        "nodes only, space-separated: say the same '--cluster-sessions write-behind' when the "
                        "baseline knows it, to compare one mode across builds")
    args = parser.parse_args()
    args.bin = os.path.abspath(args.bin)
    if args.bench is None and args.baseline_bin:
        args.bench = os.path.join(args.bin, "dialtone-bench")
    builds = [("base ", os.path.abspath(args.baseline_bin)), ("new ", args.bin)] if args.baseline_bin else [("", args.bin)]
    rows_asked = set(args.rows.split(","))
    if args.redis_cluster:
        rows_asked.add("rc")
    harness.BIN = args.bin
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the nodes inherit it
    global SECRET
    SECRET = harness.SECRET
    no_limits = ["--max-connections-per-ip", "0", "--messages-per-second", "0", "--invites-per-minute", "0",
                 "--http-requests-per-second", "0", "--max-live-calls-per-user", "64", "--log-level", "error"]
    rows = []
    scratch = harness.Scratch()
    try:
        for prefix, binary in builds if "single" in rows_asked else []:
            harness.BIN = binary
            # A database of its own: the calls the last row left live would make its users busy.
            own = harness.Scratch()
            single = await harness.Server(own, extra=no_limits).start()
            try:
                rows.append(await run_load(args, prefix + "single", [single], [single.process.proc.pid]))
            finally:
                await single.stop()
                own.remove()
        for (count, sharded), (prefix, binary) in [(row, build) for row in [(1, False), (3, False), (3, True)]
                                                   for build in builds]:
            if ("rc" if sharded else str(count)) not in rows_asked:
                continue
            harness.BIN = binary
            # A database and a Redis of the row's own: the calls the last row left live (its sockets
            # just closed) would otherwise be taken over, and their users be busy.
            postgres = await ScratchPostgres(scratch, None).start()
            redis = await (ScratchRedisCluster if sharded else ScratchRedis)(scratch, None).start()
            try:
                nodes = []
                for index in range(count):
                    node = harness.Server(scratch, extra=["--database-url", postgres.url, "--redis-url", redis.url,
                                                          "--node-name", f"b{count}-{index + 1}", *no_limits,
                                                          *(args.node_args.split() if binary == args.bin
                                                            else args.baseline_node_args.split())])
                    nodes.append(await node.start())
                await asyncio.sleep(1)
                try:
                    pids = [n.process.proc.pid for n in nodes]
                    if sharded:
                        # By shard: each primary, then its replica.
                        shards = {port: shard_of(port) for port in redis.ports}
                        ordered = sorted(redis.ports, key=lambda p: (shards[p], p != shards[p]))
                        redis_pids, redis_port = [redis.processes[p].proc.pid for p in ordered], ordered
                    else:
                        redis_pids, redis_port = [redis.process.proc.pid], redis.port
                    label = prefix + f"{count} node{'s' if count > 1 else ''}{'/RC' if sharded else ''}"
                    rows.append(await run_load(args, label, nodes, pids + redis_pids, redis_pids,
                                               redis_port=redis_port))
                finally:
                    for node in nodes:
                        await node.stop()
            finally:
                await redis.stop()
                await postgres.stop()
    finally:
        scratch.remove()

    print(json.dumps(rows))
    print(f"bench-cluster: {args.calls} concurrent calls paced to {args.rate} relayed msg/s for {args.seconds:.0f} s, "
          f"{args.idle} idle authenticated sockets held; {platform.machine()}, {os.cpu_count()} cores")
    print(f"{'':17}{'relayed/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'CPU µs/msg':>12}{'of it Redis':>13}"
          f"{'node KB/socket':>16}{'Redis B/socket':>16}")
    for row in rows:
        redis_share = row.get("breakdownMicrosPerMessage")
        redis_bytes = row.get("redisBytesPerSocket")
        if row["p50Ms"] is None:
            print(f"{row['label']:17}{row['relayedPerSecond']:10.0f}  (no message relayed)")
            continue
        print(f"{row['label']:17}{row['relayedPerSecond']:10.0f}{row['p50Ms']:9.3f}{row['p99Ms']:9.3f}"
              f"{row['cpuMicrosPerMessage']:12.1f}{(f'{redis_share:.1f}' if redis_share is not None else '-'):>13}"
              f"{row.get('nodeKBPerSocket', float('nan')):16.1f}"
              f"{(f'{redis_bytes:.0f}' if redis_bytes is not None else '-'):>16}")
    for row in rows:
        each = row.get("breakdownEachMicrosPerMessage") or []
        if len(each) > 1:
            shards = [f"{each[i]:.1f} + {each[i + 1]:.1f}" for i in range(0, len(each) - 1, 2)]
            print(f"{row['label']}: Redis CPU µs per relayed message by shard (primary + replica): {'; '.join(shards)}")
    for prefix, _ in builds:
        mine = [row for row in rows if row["label"].startswith(prefix)]
        if not mine or not mine[0]["label"].endswith("single"):
            continue
        base = mine[0]
        for row in mine[1:]:
            if base["p50Ms"] is None or row["p50Ms"] is None:
                continue
            print(f"{row['label']}: p50 {row['p50Ms'] / base['p50Ms']:.2f} × single, p99 {row['p99Ms'] / base['p99Ms']:.2f} × "
                  f"single, CPU per relayed message {row['cpuMicrosPerMessage'] / base['cpuMicrosPerMessage']:.2f} × single")


SECRET = ""

if __name__ == "__main__":
    asyncio.run(main())
