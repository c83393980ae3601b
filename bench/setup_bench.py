#!/usr/bin/env python3
"""Call set-up time over a slow, lossy link: `make bench-setup`.

Two network namespaces, joined by bench/delay_link.py (a userspace forwarder between two TUN
devices, since netem is not in this kernel). The caller lives in namespace A; the server and
the callee in B, so the caller's signaling and all media cross the link.

For each link setting (added RTT, loss) and each stack it makes N calls and reports the median
and p95 of "dial → ICE connected" and "dial → first audio":

- dialtone        CLI softphones (GStreamer webrtcbin), trickle ICE
- dialtone-gather CLI softphones with --no-trickle (gather, then send: the seeds' slow baseline)
- aiortc          aiortc ↔ aiortc (Tests/e2e/aiortc_peer.py, which never trickles) through the server

Then, per link setting, "answer → first audio": the callee rings for `--ring-ms` (a person
reaching for the phone) before it answers, and the table gives the time from that Answer to the
first audio at the callee and at the caller, for

- dialtone             today's flow: nothing is negotiated before Answer
- dialtone-preconnect  --preconnect on both sides (protocol.md 9b): the leg connects while it rings

Needs root (namespaces, TUN). Usage:
    python3 bench/setup_bench.py [--bin .build/release] [--calls 10] [--rtts 0,50,150] [--losses 0,0.02]
"""
import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
NS_A, NS_B = "dtbench-a", "dtbench-b"
ADDR_A, ADDR_B = "10.77.0.1", "10.77.0.2"
SECRET = "bench-setup-secret-0123456789abcdef"
PORT = 18900


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def make_namespaces():
    remove_namespaces()
    for ns, addr in ((NS_A, ADDR_A), (NS_B, ADDR_B)):
        sh("ip", "netns", "add", ns)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        sh("ip", "netns", "exec", ns, "ip", "tuntap", "add", "dev", "dt0", "mode", "tun")
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{addr}/24", "dev", "dt0")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "dt0", "up")


def remove_namespaces():
    for ns in (NS_A, NS_B):
        sh("ip", "netns", "del", ns, check=False)


async def start(ns, args, log, stdin=asyncio.subprocess.DEVNULL):
    return await asyncio.create_subprocess_exec(
        "ip", "netns", "exec", ns, *args, stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=log)


async def read_events(proc, until, timeout):
    """JSON event lines of `proc` until one satisfies `until` (or the process ends)."""
    return [event for _, event in await stamped_events(proc, until, timeout)]


async def stamped_events(proc, until, timeout):
    """JSON event lines of `proc`, each with the wall time it was read, until one satisfies
    `until` (or the process ends)."""
    stamped = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), remaining)
        except asyncio.TimeoutError:
            break
        if not line:
            break
        try:
            event = json.loads(line)
        except ValueError:
            continue
        stamped.append((time.time(), event))
        if until(event):
            break
    return stamped


async def kill(proc):
    if proc and proc.returncode is None:
        proc.kill()
        await proc.wait()


class Link:
    def __init__(self, rtt, loss, log):
        self.rtt, self.loss, self.log, self.proc = rtt, loss, log, None

    async def __aenter__(self):
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, os.path.join(ROOT, "bench", "delay_link.py"), "--ns-a", NS_A, "--ns-b", NS_B,
            "--rtt-ms", str(self.rtt), "--loss", str(self.loss), stdout=asyncio.subprocess.PIPE, stderr=self.log)
        line = await asyncio.wait_for(self.proc.stdout.readline(), 10)
        if line.strip() != b"READY":
            raise RuntimeError("delay link did not start")
        return self

    async def __aexit__(self, *exc):
        await kill(self.proc)


def token(binary, user):
    return sh(os.path.join(binary, "dialtone"), "token", "--user", user, "--device", "bench",
              "--secret", SECRET).stdout.strip()


async def one_call(stack, binary, log):
    server = f"http://{ADDR_B}:{PORT}"
    alice, bob = token(binary, "alice"), token(binary, "bob")
    if stack == "aiortc":
        peer = [sys.executable, os.path.join(ROOT, "Tests", "e2e", "aiortc_peer.py"), "--server", server]
        callee_args = peer + ["--token", bob, "--answer", "--tone", "330"]
        caller_args = peer + ["--token", alice, "--call", "bob", "--tone", "523", "--duration", "1.5"]
    else:
        cli = [os.path.join(binary, "dialtone")]
        extra = ["--no-trickle"] if stack == "dialtone-gather" else []
        callee_args = cli + ["answer", "--server", server, "--token", bob, "--auto", "--json", *extra]
        # 1.5 s connected: long enough for the first audio to arrive through loss.
        caller_args = cli + ["call", "--server", server, "--token", alice, "--to", "bob", "--duration", "1.5",
                             "--json", *extra]
    callee = await start(NS_B, callee_args, log)
    caller = None
    try:
        ready = await read_events(callee, lambda e: e.get("text") == "waiting for a call", 30)
        if not ready or ready[-1].get("text") != "waiting for a call":
            return None
        caller = await start(NS_A, caller_args, log)
        events = await read_events(caller, lambda e: e.get("event") == "ended", 40)
        timings = {e["event"]: e["ms"] for e in events if "ms" in e}
        ended = next((e for e in events if e.get("event") == "ended"), {})
        for key, value in (ended.get("timings") or {}).items():
            timings.setdefault(key, value)
        if "ice-connected" not in timings or "first-audio" not in timings:
            log.write(f"{stack}: incomplete call: {json.dumps(events)[-800:]}\n".encode())
            log.flush()
            return None
        return timings
    finally:
        await kill(caller)
        await kill(callee)


async def answered_call(stack, binary, log, ring):
    """One call answered after `ring` seconds of ringing: (callee, caller) ms from the Answer
    to each side's first audio, or None."""
    server = f"http://{ADDR_B}:{PORT}"
    alice, bob = token(binary, "alice"), token(binary, "bob")
    cli = [os.path.join(binary, "dialtone")]
    extra = ["--preconnect"] if stack == "dialtone-preconnect" else []
    callee = await start(NS_B, cli + ["answer", "--server", server, "--token", bob, "--json", *extra], log,
                         stdin=asyncio.subprocess.PIPE)
    caller = None
    try:
        ready = await read_events(callee, lambda e: e.get("text") == "waiting for a call", 30)
        if not ready or ready[-1].get("text") != "waiting for a call":
            return None
        caller = await start(NS_A, cli + ["call", "--server", server, "--token", alice, "--to", "bob",
                                          "--duration", "1.5", "--json", *extra], log)
        heard_by_caller = asyncio.create_task(stamped_events(caller, lambda e: e.get("event") == "ended", 60))
        rang = await read_events(callee, lambda e: "press Enter" in (e.get("text") or ""), 30)
        if not rang or "press Enter" not in (rang[-1].get("text") or ""):
            return None
        await asyncio.sleep(ring)
        answered = time.time()
        callee.stdin.write(b"\n")
        await callee.stdin.drain()
        at_callee = await stamped_events(callee, lambda e: e.get("event") in ("first-audio", "ended"), 30)
        at_caller = await heard_by_caller
        first = [next((t for t, e in events if e.get("event") == "first-audio"), None)
                 for events in (at_callee, at_caller)]
        if None in first or min(first) < answered:
            log.write(f"{stack}: no first audio after the answer: {json.dumps([e for _, e in at_caller])[-800:]}\n"
                      .encode())
            log.flush()
            return None
        return tuple((t - answered) * 1000 for t in first)
    finally:
        await kill(caller)
        await kill(callee)


def summary(values):
    if not values:
        return "n/a"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"{statistics.median(ordered):7.0f} / {p95:7.0f}"


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"))
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--rtts", default="0,50,150")
    parser.add_argument("--losses", default="0,0.02")
    parser.add_argument("--stacks", default="dialtone,dialtone-gather,aiortc")
    parser.add_argument("--answer-stacks", default="dialtone,dialtone-preconnect",
                        help="stacks of the answer → first audio table ('' for none)")
    parser.add_argument("--ring-ms", type=float, default=2000, help="how long a call rings before it is answered")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-setup needs root (network namespaces and TUN devices)")

    log = open(os.path.join("/tmp", "dialtone-bench-setup.log"), "wb")
    make_namespaces()
    server = await start(NS_B, [os.path.join(args.bin, "dialtone-server"), "--host", ADDR_B, "--port", str(PORT),
                                "--data-dir", tempfile.mkdtemp(prefix="dialtone-bench-setup-"), "--auth-secret", SECRET,
                                "--log-level", "error"], log)
    rows = []
    answer_rows = []
    try:
        await asyncio.sleep(1)
        print(f"machine: {platform.node()} {os.cpu_count()} cores, {platform.platform()}")
        print(f"{args.calls} calls per cell; milliseconds from dial, median / p95\n")
        print(f"{'RTT':>5} {'loss':>5}  {'stack':<16} {'ICE connected':>17} {'first audio':>17}  ok")
        for rtt in [float(x) for x in args.rtts.split(",")]:
            for loss in [float(x) for x in args.losses.split(",")]:
                async with Link(rtt, loss, log):
                    await asyncio.sleep(0.3)
                    for stack in args.stacks.split(","):
                        ice, audio, failures = [], [], 0
                        for _ in range(args.calls):
                            result = await one_call(stack, args.bin, log)
                            if result is None:
                                failures += 1
                                continue
                            ice.append(result["ice-connected"])
                            audio.append(result["first-audio"])
                        row = (rtt, loss, stack, summary(ice), summary(audio), f"{len(ice)}/{args.calls}")
                        rows.append((row, ice, audio))
                        print(f"{rtt:5.0f} {loss * 100:4.0f}%  {stack:<16} {row[3]:>17} {row[4]:>17}  {row[5]}", flush=True)
                    for stack in [x for x in args.answer_stacks.split(",") if x]:
                        callee, caller = [], []
                        for _ in range(args.calls):
                            result = await answered_call(stack, args.bin, log, args.ring_ms / 1000)
                            if result is None:
                                continue
                            callee.append(result[0])
                            caller.append(result[1])
                        answer_rows.append((rtt, loss, stack, callee, caller))
                        print(f"{rtt:5.0f} {loss * 100:4.0f}%  {stack:<20} answer → first audio, callee "
                              f"{summary(callee)}, caller {summary(caller)}  {len(callee)}/{args.calls}", flush=True)
    finally:
        await kill(server)
        remove_namespaces()
    if answer_rows:
        print(f"\nanswer → first audio, ms after Answer (rung {args.ring_ms:.0f} ms first), median / p95")
        print(f"{'RTT':>5} {'loss':>5}  {'stack':<20} {'at the callee':>17} {'at the caller':>17}  ok")
        for rtt, loss, stack, callee, caller in answer_rows:
            print(f"{rtt:5.0f} {loss * 100:4.0f}%  {stack:<20} {summary(callee):>17} {summary(caller):>17}  "
                  f"{len(callee)}/{args.calls}")
        print("aim: ≤ 1 RTT + 50 ms at every RTT")
    aim_rows = [(r, a) for (r, _, a) in rows if r[2] == "dialtone" and r[1] == 0 and a]
    if aim_rows:
        print("\naim (trickle, no loss): p50 first audio ≤ 3 × RTT + 150 ms")
        for r, audio in aim_rows:
            limit = 3 * r[0] + 150
            print(f"  RTT {r[0]:.0f} ms: p50 {statistics.median(audio):.0f} ms, limit {limit:.0f} ms: "
                  f"{'met' if statistics.median(audio) <= limit else 'NOT met'}")


if __name__ == "__main__":
    asyncio.run(main())
