#!/usr/bin/env python3
"""Group calls through Janus against a full mesh of 1:1 calls: `make bench-group`.

For each size N it holds, in the same run and on the same machine:

- janus  one group call of N CLI softphones through dialtone-server and Janus (the creator
         rings N-1 auto-answering members), each device receiving every other participant on
         a connection of its own (`--no-multistream`, protocol.md 20.3);
- multistream  the same, each device receiving everyone on one subscriber connection
         (`--multistream`, the CLI's default, protocol.md 20.9);
- mesh   the same N people as a full mesh: N(N-1)/2 concurrent 1:1 calls between CLI
         softphones through dialtone-server (each person is N-1 processes, one per call).

and reports
- accept -> first remote audio (each answering device: from its accept to the first audio it
  hears), median and p95 over every answer of every round;
- CPU per participant while everyone hears everyone (a steady window of --window seconds):
  the server plus Janus (the infrastructure), and the softphones (all "devices", summed).

Everything runs inside one network namespace (libnice needs a non-loopback address; no packet
leaves it). All peers share this machine's cores, so the softphone figures are the sum of
what N devices would each spend. `--infra-nice -15` runs the server and Janus (every mode's
infrastructure) at that nice value: on a shared 2-core machine they otherwise wait for the CPU
behind the softphones, which in production run on other machines (a diagnostic, not the
default). Needs root. Usage:
    python3 bench/group_bench.py [--bin .build/release] [--sizes 3,5,8] [--rounds 3] [--window 5]
                                 [--infra-nice N] [--modes janus,multistream,mesh]
"""
import argparse
import asyncio
import os
import platform
import statistics
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of one process, in seconds (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


def since(peer, start, end):
    """ms from `start` to `end` in one softphone's timeline (its events carry ms since its start)."""
    marks = {e.get("event"): e.get("ms") for e in peer.events if "ms" in e}
    if start in marks and end in marks:
        return marks[end] - marks[start]
    return None


INFRA_NICE = None


def prioritise(pid):
    """Every thread of `pid` at INFRA_NICE (threads it makes later inherit it), if one was asked for."""
    if INFRA_NICE is None:
        return
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), INFRA_NICE)
        except OSError:
            pass  # a thread that ended meanwhile


async def steady_cpu(infrastructure, devices, window):
    """CPU seconds per second over `window`, for the infrastructure and for the devices."""
    before = ([cpu_seconds(p) for p in infrastructure], [cpu_seconds(p) for p in devices])
    started = time.monotonic()
    await asyncio.sleep(window)
    elapsed = time.monotonic() - started
    after = ([cpu_seconds(p) for p in infrastructure], [cpu_seconds(p) for p in devices])
    infra = sum(a - b for a, b in zip(after[0], before[0])) / elapsed
    dev = sum(a - b for a, b in zip(after[1], before[1])) / elapsed
    return infra, dev


async def janus_round(h, s, n, window, flags=("--no-multistream",)):
    ns = await h.MediaNamespace().start()
    janus = await h.Janus(s, ns).start()
    server = await h.Server(s, netns=ns.NS, extra=janus.server_args()).start()
    prioritise(janus.process.proc.pid)
    prioritise(server.process.proc.pid)
    names = [f"u{i}" for i in range(n)]
    peers = []
    try:
        for i, name in enumerate(names[1:], start=1):
            peer = h.Softphone(s, name, ["answer", "--server", server.url, "--token", server.token(name), "--auto",
                                         "--tone-frequency", str(300 + 50 * i), *flags], netns=ns.NS)
            await peer.start()
            peers.append(peer)
        for peer in peers:
            await peer.wait_for("note", text="waiting for a call", timeout=30)
        creator = h.Softphone(s, names[0], ["group", "call", "--server", server.url, "--token",
                                            server.token(names[0]), "--to", ",".join(names[1:]),
                                            "--duration", "120", "--tone-frequency", "300", *flags], netns=ns.NS)
        await creator.start()
        everyone = [creator, *peers]
        for peer in everyone:
            for other in names:
                if other != peer.name:
                    await peer.wait_for(f"first-audio {other}", timeout=60)
        infra, dev = await steady_cpu([server.process.proc.pid, janus.process.proc.pid],
                                      [p.proc.pid for p in everyone], window)
        answers = [since(p, "answering", "first-audio") for p in peers]
        return [a for a in answers if a is not None], infra / n, dev / n
    finally:
        for peer in peers + ([creator] if "creator" in locals() else []):
            await peer.stop()
        await server.stop()
        await janus.stop()
        await ns.stop()


async def multistream_round(h, s, n, window):
    return await janus_round(h, s, n, window, flags=("--multistream",))


async def mesh_round(h, s, n, window):
    ns = await h.MediaNamespace().start()
    server = await h.Server(s, netns=ns.NS).start()
    prioritise(server.process.proc.pid)
    callees, callers = [], []
    try:
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
        for i, j in pairs:
            callee = h.Softphone(s, f"p{j}x{i}", ["answer", "--server", server.url, "--token",
                                                  server.token(f"p{j}x{i}"), "--auto",
                                                  "--tone-frequency", str(300 + 50 * j)], netns=ns.NS)
            await callee.start()
            callees.append(callee)
        for callee in callees:
            await callee.wait_for("note", text="waiting for a call", timeout=60)
        for i, j in pairs:
            caller = h.Softphone(s, f"p{i}x{j}", ["call", "--server", server.url, "--token",
                                                  server.token(f"p{i}x{j}"), "--to", f"p{j}x{i}",
                                                  "--duration", "120", "--tone-frequency", str(300 + 50 * i)],
                                 netns=ns.NS)
            await caller.start()
            callers.append(caller)
        everyone = callers + callees
        for peer in everyone:
            await peer.wait_for("first-audio", timeout=90)
        infra, dev = await steady_cpu([server.process.proc.pid], [p.proc.pid for p in everyone], window)
        answers = [since(p, "answering", "first-audio") for p in callees]
        return [a for a in answers if a is not None], infra / n, dev / n
    finally:
        for peer in callers + callees:
            await peer.stop()
        await server.stop()
        await ns.stop()


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"))
    parser.add_argument("--sizes", default="3,5,8")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=5)
    parser.add_argument("--infra-nice", type=int, default=None)
    parser.add_argument("--modes", default="janus,multistream,mesh", help="which modes to run, in this order")
    args = parser.parse_args()
    global INFRA_NICE
    INFRA_NICE = args.infra_nice
    os.environ["DIALTONE_BIN"] = os.path.abspath(args.bin)
    import harness as h  # noqa: E402  (reads DIALTONE_BIN)
    if os.geteuid() != 0:
        sys.exit("bench-group needs root (network namespaces)")
    print(f"# bench-group on {platform.node()}: {os.cpu_count()} cores, {platform.platform()}")
    print(f"# {args.rounds} rounds per size and mode, a {args.window:.0f} s steady window; binaries {args.bin}"
          + ("" if INFRA_NICE is None else f"; server and Janus at nice {INFRA_NICE}"))
    print("| N | mode | answers | accept → first audio p50 | p95 | server + Janus CPU / participant | "
          "softphones CPU / participant |")
    print("|---|---|---|---|---|---|---|")
    for n in [int(x) for x in args.sizes.split(",")]:
        rounds = {"janus": janus_round, "multistream": multistream_round, "mesh": mesh_round}
        for mode, run in ((m, rounds[m]) for m in args.modes.split(",")):
            samples, infra, dev = [], [], []
            for _ in range(args.rounds):
                s = h.Scratch()
                try:
                    answers, i, d = await asyncio.wait_for(run(h, s, n, args.window), 240)
                    samples += answers
                    infra.append(i)
                    dev.append(d)
                    s.remove()
                except (h.Failure, asyncio.TimeoutError) as error:
                    print(f"# {mode} N={n}: a round failed ({error or 'timed out'}); logs in {s.path}", flush=True)
            if not samples:
                print(f"| {n} | {mode} | 0 | – | – | – | – |", flush=True)
                continue
            print(f"| {n} | {mode} | {len(samples)} | {statistics.median(samples):.0f} ms | "
                  f"{percentile(samples, 95):.0f} ms | {statistics.median(infra) * 100:.1f} % | "
                  f"{statistics.median(dev) * 100:.1f} % |", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
