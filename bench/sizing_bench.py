#!/usr/bin/env python3
"""The unit costs docs/deploy.md's "Sizing" is computed from (issue 41, item 5).

Phases, each on processes of its own (a scratch PostgreSQL and Redis, cluster-mode nodes of the
release build), everything on this host's loopback:

- idle     one node; IDLE idle authenticated sockets held (`dialtone-bench signaling --target …
           --calls 1 --rate 10`): the node's RSS and Redis's `used_memory` and key
           count per connected device (before the load against while it holds its sockets), and
           what the held sockets cost at rest: Redis commands a second and the node's and Redis's
           CPU over a window.
- calls    one node, no idle sockets; CALLS concurrent calls paced to RATE relayed messages a
           second, for each --candidates value: node CPU and Redis CPU per relayed message and per
           call set-up (invite, accept, 2×candidates, hangup), Redis commands per call.
- shards   with --redis-cluster: three nodes on a three-shard Redis Cluster (a replica per shard),
           the calls load at SHARD_RATE with --shard-candidates (20): each Redis process's CPU per relayed
           message, primaries and replicas apart.

Usage:
    python3 bench/sizing_bench.py [--bin .build/release] [--idle 20000] [--rate 1000]
        [--candidates 20 5] [--redis-cluster --shard-rate 500 --shard-candidates 20] [--skip-idle]
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

from cluster_bench import rss_bytes  # noqa: E402 (bench/ is on the path: the script's own folder)

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def redis_info(port, section):
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO", section], capture_output=True, text=True).stdout
    info = {}
    for line in out.splitlines():
        if ":" in line and not line.startswith("#"):
            key, value = line.split(":", 1)
            info[key] = value.strip()
    return info


def redis_snapshot(port):
    memory, stats = redis_info(port, "memory"), redis_info(port, "stats")
    keys = subprocess.run(["redis-cli", "-p", str(port), "DBSIZE"], capture_output=True, text=True).stdout.strip()
    return {"used": int(memory["used_memory"]), "commands": int(stats["total_commands_processed"]),
            "keys": int(keys or 0)}


def evalsha_calls(port):
    line = redis_info(port, "commandstats").get("cmdstat_evalsha", "calls=0")
    return int(line.split("calls=")[1].split(",")[0])


async def bench(args, nodes, label, idle, calls, rate, seconds, candidates, measured, breakdown):
    command = [os.path.join(args.bin, "dialtone-bench"), "signaling", "--calls", str(calls), "--idle", str(idle),
               "--rate", str(rate), "--seconds", str(seconds),
               "--secret", SECRET, "--label", label, "--json"]
    if candidates != 20:  # the default (a build before --candidates has only that)
        command += ["--candidates", str(candidates)]
    for node in nodes:
        command += ["--target", f"ws://127.0.0.1:{node.port}/v1/ws"]
    for pid in measured:
        command += ["--measure-pid", str(pid)]
    for pid in breakdown:
        command += ["--breakdown-pid", str(pid)]
    return await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)


async def finish(process, label):
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"{label}: dialtone-bench exited {process.returncode}")
    return json.loads(out.decode().strip().splitlines()[-1])


async def window(pids, ports, seconds):
    """CPU seconds of each process and Redis commands (all, EVALSHA) over `seconds`."""
    cpu0 = {pid: cpu_seconds(pid) for pid in pids}
    cmd0 = {port: (redis_snapshot(port)["commands"], evalsha_calls(port)) for port in ports}
    start = time.monotonic()
    await asyncio.sleep(seconds)
    elapsed = time.monotonic() - start
    cpu = {pid: (cpu_seconds(pid) - cpu0[pid]) / elapsed for pid in pids}
    commands = {port: ((redis_snapshot(port)["commands"] - cmd0[port][0]) / elapsed,
                       (evalsha_calls(port) - cmd0[port][1]) / elapsed) for port in ports}
    return cpu, commands, elapsed


async def with_cluster(scratch, count, sharded, run):
    from cluster_scenarios import ScratchPostgres, ScratchRedis, ScratchRedisCluster
    import harness
    postgres = await ScratchPostgres(scratch, None).start()
    redis = await (ScratchRedisCluster if sharded else ScratchRedis)(scratch, None).start()
    nodes = []
    try:
        for index in range(count):
            node = harness.Server(scratch, extra=["--database-url", postgres.url, "--redis-url", redis.url,
                                                  "--node-name", f"s{count}-{index + 1}", *NO_LIMITS])
            nodes.append(await node.start())
        await asyncio.sleep(1)
        return await run(nodes, redis)
    finally:
        for node in nodes:
            await node.stop()
        await redis.stop()
        await postgres.stop()


async def idle_phase(args, scratch):
    async def run(nodes, redis):
        node_pid, redis_pid = nodes[0].process.proc.pid, redis.process.proc.pid
        before = {"rss": rss_bytes(node_pid), "redis": redis_snapshot(redis.port)}
        seconds = 40
        process = await bench(args, nodes, "idle", args.idle, 1, 10, seconds, 20, [node_pid], [redis_pid])
        # The idle sockets connect in batches of 500; then the 40 s of the one call's load, at
        # 10 messages a second, during which the sockets are held.
        # Every socket is connected once the sessions' keys stop growing (two in Redis each: the
        # session's meta and the user's presence).
        keys = -1
        while process.returncode is None:
            await asyncio.sleep(3)
            now = redis_snapshot(redis.port)["keys"]
            if now >= args.idle and now == keys:
                break
            keys = now
        await asyncio.sleep(2)
        during = {"rss": rss_bytes(node_pid), "redis": redis_snapshot(redis.port)}
        cpu, commands, elapsed = await window([node_pid, redis_pid], [redis.port], 20)
        report = await finish(process, "idle")
        sockets = args.idle + 2
        return {
            "sockets": sockets,
            "nodeRSSBefore": before["rss"], "nodeRSSDuring": during["rss"],
            "nodeBytesPerSocket": (during["rss"] - before["rss"]) / sockets,
            "redisUsedBefore": before["redis"]["used"], "redisUsedDuring": during["redis"]["used"],
            "redisBytesPerSocket": (during["redis"]["used"] - before["redis"]["used"]) / sockets,
            "redisKeysPerSocket": (during["redis"]["keys"] - before["redis"]["keys"]) / sockets,
            "windowSeconds": elapsed,
            "nodeCPUPercent": cpu[node_pid] * 100, "redisCPUPercent": cpu[redis_pid] * 100,
            "redisCommandsPerSecond": commands[redis.port][0], "redisEvalshaPerSecond": commands[redis.port][1],
            "load": report,
        }
    return await with_cluster(scratch, 1, False, run)


async def calls_phase(args, scratch, candidates):
    async def run(nodes, redis):
        node_pid, redis_pid = nodes[0].process.proc.pid, redis.process.proc.pid
        # What the node and Redis spend with no load (heartbeats, housekeeping): subtracted, so
        # that the figures per message and per call are what the load adds.
        base_cpu, base_commands, _ = await window([node_pid, redis_pid], [redis.port], 8)
        process = await bench(args, nodes, f"calls/{candidates}", 0, args.calls, args.rate, args.seconds, candidates,
                              [node_pid], [redis_pid])
        # The measured window starts once the call sockets are ready (a second or two here).
        await asyncio.sleep(4)
        cpu, commands, _ = await window([node_pid, redis_pid], [redis.port], args.seconds - 6)
        report = await finish(process, f"calls/{candidates}")
        rate, calls = report["relayedPerSecond"], max(report["callsPerSecond"], 1e-9)
        node_us = (cpu[node_pid] - base_cpu[node_pid]) * 1e6 / rate
        redis_us = (cpu[redis_pid] - base_cpu[redis_pid]) * 1e6 / rate
        return {
            "candidates": candidates, "relayedPerCall": rate / calls,
            "relayedPerSecond": rate, "callsPerSecond": report["callsPerSecond"],
            "p50Ms": report["p50Ms"], "p99Ms": report["p99Ms"],
            "grossMicrosPerMessage": report["cpuMicrosPerMessage"],
            "grossRedisMicrosPerMessage": report["breakdownMicrosPerMessage"],
            "baseNodeCPUPercent": base_cpu[node_pid] * 100, "baseRedisCPUPercent": base_cpu[redis_pid] * 100,
            "nodeMicrosPerMessage": node_us, "redisMicrosPerMessage": redis_us,
            "nodeMicrosPerCall": node_us * rate / calls, "redisMicrosPerCall": redis_us * rate / calls,
            "redisCommandsPerCall": (commands[redis.port][0] - base_commands[redis.port][0]) / calls,
            "redisEvalshaPerCall": (commands[redis.port][1] - base_commands[redis.port][1]) / calls,
        }
    return await with_cluster(scratch, 1, False, run)


async def shards_phase(args, scratch):
    async def run(nodes, cluster):
        node_pids = [n.process.proc.pid for n in nodes]
        redis_pids = {port: p.proc.pid for port, p in cluster.processes.items()}
        primaries = set(cluster.primaries())
        # The cluster bus, replication and the nodes' housekeeping with no load: subtracted.
        base_cpu, base_commands, _ = await window(node_pids + list(redis_pids.values()), list(redis_pids), 8)
        process = await bench(args, nodes, "shards", 0, args.calls, args.shard_rate, args.seconds, args.shard_candidates,
                              node_pids + list(redis_pids.values()), list(redis_pids.values()))
        await asyncio.sleep(4)
        cpu, commands, _ = await window(node_pids + list(redis_pids.values()), list(redis_pids), args.seconds - 6)
        report = await finish(process, "shards")
        rate = max(report["relayedPerSecond"], 1e-9)
        return {
            "candidates": args.shard_candidates, "relayedPerCall": rate / max(report["callsPerSecond"], 1e-9),
            "nodesMicrosPerMessage": sum(cpu[pid] - base_cpu[pid] for pid in node_pids) * 1e6 / rate,
            "relayedPerSecond": rate, "callsPerSecond": report["callsPerSecond"],
            "p50Ms": report["p50Ms"], "p99Ms": report["p99Ms"],
            "grossMicrosPerMessage": report["cpuMicrosPerMessage"],
            "grossRedisMicrosPerMessage": report["breakdownMicrosPerMessage"],
            "byProcess": [{"port": port, "role": "primary" if port in primaries else "replica",
                           "baseCPUPercent": base_cpu[pid] * 100,
                           "microsPerMessage": (cpu[pid] - base_cpu[pid]) * 1e6 / rate,
                           "commandsPerMessage": (commands[port][0] - base_commands[port][0]) / rate}
                          for port, pid in sorted(redis_pids.items())],
        }
    return await with_cluster(scratch, 3, True, run)


async def main():
    import harness
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"))
    parser.add_argument("--idle", type=int, default=20000)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--candidates", type=int, nargs="*", default=[20, 5])
    parser.add_argument("--redis-cluster", action="store_true")
    parser.add_argument("--shard-rate", type=int, default=500)
    parser.add_argument("--shard-candidates", type=int, default=20)
    parser.add_argument("--skip-idle", action="store_true")
    args = parser.parse_args()
    args.bin = os.path.abspath(args.bin)
    harness.BIN = args.bin
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:  # the load and the node each hold every socket: more than a default hard limit of 20,000
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(hard, 4 * args.idle), max(hard, 4 * args.idle)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    global SECRET
    SECRET = harness.SECRET
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "load": os.getloadavg()}
    scratch = harness.Scratch()
    try:
        if not args.skip_idle:
            result["idle"] = await idle_phase(args, scratch)
            print(json.dumps({"idle": result["idle"]}), flush=True)
        result["calls"] = []
        for candidates in args.candidates:
            result["calls"].append(await calls_phase(args, scratch, candidates))
            print(json.dumps({"calls": result["calls"][-1]}), flush=True)
        if args.redis_cluster:
            result["shards"] = await shards_phase(args, scratch)
            print(json.dumps({"shards": result["shards"]}), flush=True)
    finally:
        scratch.remove()
    result["loadAfter"] = os.getloadavg()
    print(json.dumps(result))


SECRET = ""
NO_LIMITS = ["--max-connections-per-ip", "0", "--messages-per-second", "0", "--invites-per-minute", "0",
             "--http-requests-per-second", "0", "--max-live-calls-per-user", "64", "--log-level", "error"]

if __name__ == "__main__":
    asyncio.run(main())
