#!/usr/bin/env python3
"""Call set-up time over a slow, lossy link: `make bench-setup`.

Two network namespaces, joined by bench/delay_link.py (a userspace forwarder between two TUN
devices, since netem is not in this kernel). The caller lives in namespace A; the server and
the callee in B, so the caller's signaling and all media cross the link.

For each link setting (added RTT, loss) and each stack it makes N calls and reports the median
and p95 of "dial → ICE connected" and "dial → first audio":

- dialtone        CLI softphones (GStreamer webrtcbin), trickle ICE, pre-connect on (the default;
                  with an auto-answering callee the accept usually beats the leg)
- dialtone-no-preconnect  the same with --no-preconnect: today's flow
- dialtone-gather CLI softphones with --no-trickle (gather, then send: the seeds' slow baseline)
- aiortc          aiortc ↔ aiortc (Tests/e2e/aiortc_peer.py, which never trickles) through the server

Then, per link setting, "answer → first audio": the callee rings for `--ring-ms` (a person
reaching for the phone) before it answers, and the table gives the time from that Answer to the
first audio at the callee and at the caller, for

- dialtone             today's flow (--no-preconnect): nothing is negotiated before Answer
- dialtone-preconnect  --preconnect on both sides (protocol.md 11): the leg connects while it rings
- chromium             headless Chromium ↔ headless Chromium (bench/chromium_page.py), the server's
                       softphone page at `/` (today's trickle flow, an oscillator for a microphone),
                       caller in A, callee in B, the Answer given by calling the page's `answer()`

For the CLIs "first audio" is their `first-audio` event line, stamped with the host's wall clock
as it is read. For Chromium it is the first time the page's inbound-rtp audio stats show decoded,
not concealed, samples (`totalSamplesReceived - concealedSamples > 0`): the page polls
`call.pc.getStats()` every 5 ms (one request at a time) and keeps `performance.timeOrigin +
performance.now()` (epoch ms on the host's clock) from when the first such report resolved, an
upper bound. Chromium caches a peer connection's stats report for 50 ms, so those figures change
only every ~50 ms and this is up to ~50 ms late (the poll itself is at most ~5 ms behind a fresh
report). An extra table gives, for comparison, the first poll at which the page's audio receiver
lists a source in getSynchronizationSources() (not cached), by that entry's own timestamp (epoch
ms): when the first audio frame from an RTP packet was delivered to the track. Both are compared
with the bench's `time.time()` taken just before it sends the Answer (a newline on the callee's
stdin; a DevTools Runtime.evaluate of `answer()`). Chromium's logs stay in
/tmp/dialtone-bench-setup-chromium-*.

Needs root (namespaces, TUN). Usage:
    python3 bench/setup_bench.py [--bin .build/release] [--calls 10] [--rtts 0,50,150] [--losses 0,0.02]
"""
import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time

import chromium_page
import netns_pair
from chromium_page import BenchError, Browser, Folder

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
NS_A, NS_B = "dtbench-a", "dtbench-b"
ADDR_A, ADDR_B = "10.77.0.1", "10.77.0.2"
SECRET = "bench-setup-secret-0123456789abcdef"
PORT = 18900
SERVER = f"http://{ADDR_B}:{PORT}"
# IPv6 left on, as every figure of this bench was taken (bench/netns_pair.py turns it off for the
# media benches).
PAIR = netns_pair.NamespacePair(NS_A, ADDR_A, NS_B, ADDR_B, PORT, ipv6=True)


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


def link_arguments(rtt, loss):
    """bench/delay_link.py's condition for one cell of the table."""
    return ["--rtt-ms", str(rtt), "--loss", str(loss)]


def token(binary, user):
    return netns_pair.token(binary, user, "bench", SECRET)


async def one_call(stack, binary, log):
    server = SERVER
    alice, bob = token(binary, "alice"), token(binary, "bob")
    if stack == "aiortc":
        peer = [sys.executable, os.path.join(ROOT, "Tests", "e2e", "aiortc_peer.py"), "--server", server]
        callee_args = peer + ["--token", bob, "--answer", "--tone", "330"]
        caller_args = peer + ["--token", alice, "--call", "bob", "--tone", "523", "--duration", "1.5"]
    else:
        cli = [os.path.join(binary, "dialtone")]
        extra = {"dialtone-gather": ["--no-trickle"], "dialtone-no-preconnect": ["--no-preconnect"]}.get(stack, [])
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
    server = SERVER
    alice, bob = token(binary, "alice"), token(binary, "bob")
    cli = [os.path.join(binary, "dialtone")]
    # Pre-connect is the CLI's default: `dialtone` asks for today's flow explicitly. No TURN
    # server here: the callee's leg gathers every candidate (a private, relay-only leg needs one).
    extra = ["--preconnect", "--no-private-preconnect"] if stack == "dialtone-preconnect" else ["--no-preconnect"]
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


# The page's first decoded audio: see the docstring. `at` is when the first report with decoded
# samples resolved, `stats` that report's own timestamp and `stats_before` the previous report's
# (Chromium caches a peer connection's report for 50 ms: the figures change at most that often).
# Diagnostics only: `sources_at`, the first poll at which the audio receiver's
# getSynchronizationSources() (not cached) lists a source, and `sources`, that entry's timestamp.
FIRST_AUDIO_JS = r"""
(() => {
  if (window.__firstAudio) return "already";
  const fa = window.__firstAudio = { at: null, before: null, stats: null, stats_before: null, polls: 0,
                                     first_poll: null, sources_at: null, sources: null, error: null };
  const clock = () => performance.timeOrigin + performance.now();
  let busy = false, last = null, lastStats = null;
  const timer = setInterval(async () => {
    const c = typeof call !== "undefined" ? call : null;   // the page's top-level `let call`
    if (!c || !c.pc || !(c.answered || c.accepted)) return;   // not while it rings (no audio can come)
    if (fa.sources_at === null) {
      for (const r of c.pc.getReceivers()) {
        const source = r.track && r.track.kind === "audio" && r.getSynchronizationSources()[0];
        if (source) Object.assign(fa, { sources_at: clock(), sources: source.timestamp });
      }
    }
    if (busy || fa.at !== null) return;
    busy = true;
    try {
      const report = await c.pc.getStats();
      const now = clock();
      fa.polls++;
      if (fa.first_poll === null) fa.first_poll = now;
      report.forEach((s) => {
        if (s.type !== "inbound-rtp" || s.kind !== "audio") return;
        if ((s.totalSamplesReceived || 0) - (s.concealedSamples || 0) > 0) {
          Object.assign(fa, { at: now, before: last, stats: s.timestamp, stats_before: lastStats,
                              samples: s.totalSamplesReceived, concealed: s.concealedSamples,
                              packets: s.packetsReceived });
        } else if (s.timestamp !== lastStats) {
          lastStats = s.timestamp;
        }
      });
      last = now;
    } catch (e) { fa.error = String(e); }
    busy = false;
    if (fa.at !== null && fa.sources_at !== null) clearInterval(timer);
  }, 5);
  return "ok";
})()
"""


async def chromium_answered_call(binary, log, ring, scratch):
    """answered_call for two headless Chromiums on the server's page: (callee, caller) ms from the
    Answer to each page's first decoded audio by its stats, then the same two by
    getSynchronizationSources() (None where it listed nothing), or None."""
    alice, bob = token(binary, "alice"), token(binary, "bob")
    callee = Browser(Folder(os.path.join(scratch, "bob")), f"{SERVER}/#token={bob}&tone=330", NS_B)
    caller = Browser(Folder(os.path.join(scratch, "alice")), f"{SERVER}/#token={alice}&call=bob&tone=523", NS_A)
    try:
        await callee.start()
        # Signed in ("ended" if the server still rang it for a call whose caller the bench killed).
        await callee.wait_state({"idle", "ended"}, 30)
        await callee.value(FIRST_AUDIO_JS)
        await caller.start()
        await caller.wait_state({"idle", "calling", "ringing"}, 30)  # the page is loaded (and dials)
        await caller.value(FIRST_AUDIO_JS)
        await callee.wait_state({"ringing"}, 30, poll=0.01)
        if await callee.value("call.id") != await caller.value("call && call.id"):
            raise BenchError("the callee rings for another call")
        await asyncio.sleep(ring)
        answered = time.time()
        await callee.value("answer(), 'ok'")
        deadline = time.monotonic() + 30
        while True:
            first = [await page.evaluate_json("JSON.stringify(window.__firstAudio)") for page in (callee, caller)]
            if all(f and f["at"] is not None for f in first) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        # For the log: when each page logged its connection "connected", in ms after the Answer.
        connected = []
        for page in (callee, caller):
            origin, mark = await page.value("performance.timeOrigin"), (await page.timeline()).get(
                'connection "connected"')
            connected.append(None if mark is None else round(origin + mark - answered * 1000, 1))
        log.write(f"chromium {scratch}: answered at {answered * 1000:.1f}; callee, caller: connected {connected} ms "
                  f"after it; {json.dumps(first)}\n".encode())
        log.flush()
        if not all(f and f["at"] is not None for f in first) or min(f["at"] for f in first) < answered * 1000:
            log.write(f"chromium: no first audio after the answer (logs in {scratch})\n".encode())
            log.flush()
            return None
        return (*(f["at"] - answered * 1000 for f in first),
                *(None if f["sources"] is None else f["sources"] - answered * 1000 for f in first))
    except (BenchError, chromium_page.harness.Failure, asyncio.TimeoutError, OSError, ValueError) as error:
        log.write(f"chromium: failed ({error or 'timed out'}); logs in {scratch}\n".encode())
        log.flush()
        return None
    finally:
        # Hang up first, also after a failure: a call left ringing would ring the next call's callee.
        if [await page.try_value("hangUp(), 'ok'") for page in (caller, callee)] != [None, None]:
            await asyncio.sleep(0.2)
        for page in (caller, callee):
            await page.save_log()
            await page.close()  # keeps chromium.log and page.log


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
    parser.add_argument("--answer-stacks", default="dialtone,dialtone-preconnect,chromium",
                        help="stacks of the answer → first audio table ('' for none)")
    parser.add_argument("--ring-ms", type=float, default=2000, help="how long a call rings before it is answered")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-setup needs root (network namespaces and TUN devices)")
    answer_stacks = [x for x in args.answer_stacks.split(",") if x]
    if "chromium" in answer_stacks and not shutil.which("chromium"):
        sys.exit("chromium is not installed")
    # SIGTERM / SIGHUP: unwind like Ctrl-C, so that the finally blocks below stop what was started.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        asyncio.get_running_loop().add_signal_handler(sig, asyncio.current_task().cancel)
    scratch = tempfile.mkdtemp(prefix="dialtone-bench-setup-chromium-") if "chromium" in answer_stacks else None

    data_dir = tempfile.mkdtemp(prefix="dialtone-bench-setup-")  # a fresh server per run, removed after it
    log = open(os.path.join("/tmp", "dialtone-bench-setup.log"), "wb")
    PAIR.make()
    server = await PAIR.start_server(args.bin, data_dir, SECRET, log)
    rows = []
    answer_rows = []
    source_rows = []   # chromium: the same by getSynchronizationSources()
    try:
        await PAIR.wait_listening(server)
        print(f"machine: {platform.node()} {os.cpu_count()} cores, {platform.platform()}")
        print(f"{args.calls} calls per cell; milliseconds from dial, median / p95\n")
        print(f"{'RTT':>5} {'loss':>5}  {'stack':<16} {'ICE connected':>17} {'first audio':>17}  ok")
        for rtt in [float(x) for x in args.rtts.split(",")]:
            for loss in [float(x) for x in args.losses.split(",")]:
                async with PAIR.link(link_arguments(rtt, loss), log):
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
                    for stack in answer_stacks:
                        callee, caller, sources = [], [], []
                        for n in range(args.calls):
                            if stack == "chromium":
                                result = await chromium_answered_call(
                                    args.bin, log, args.ring_ms / 1000,
                                    os.path.join(scratch, f"{rtt:g}-{loss:g}-{n}"))
                            else:
                                result = await answered_call(stack, args.bin, log, args.ring_ms / 1000)
                            if result is None:
                                continue
                            callee.append(result[0])
                            caller.append(result[1])
                            if len(result) > 2:
                                sources.append(result[2:])
                        answer_rows.append((rtt, loss, stack, callee, caller))
                        if sources:
                            source_rows.append((rtt, loss, [x for x, _ in sources if x is not None],
                                                [y for _, y in sources if y is not None]))
                        print(f"{rtt:5.0f} {loss * 100:4.0f}%  {stack:<20} answer → first audio, callee "
                              f"{summary(callee)}, caller {summary(caller)}  {len(callee)}/{args.calls}", flush=True)
    finally:
        await kill(server)
        chromium_page.kill_all()
        PAIR.remove()
        shutil.rmtree(data_dir, ignore_errors=True)
    if answer_rows:
        print(f"\nanswer → first audio, ms after Answer (rung {args.ring_ms:.0f} ms first), median / p95")
        print(f"{'RTT':>5} {'loss':>5}  {'stack':<20} {'at the callee':>17} {'at the caller':>17}  ok")
        for rtt, loss, stack, callee, caller in answer_rows:
            print(f"{rtt:5.0f} {loss * 100:4.0f}%  {stack:<20} {summary(callee):>17} {summary(caller):>17}  "
                  f"{len(callee)}/{args.calls}")
        print("aim: ≤ 1 RTT + 50 ms at every RTT")
    if source_rows:
        print("\nchromium, the first audio frame delivered to the track by getSynchronizationSources() instead "
              "(not cached; the stats above refresh every 50 ms)")
        print(f"{'RTT':>5} {'loss':>5}  {'stack':<20} {'at the callee':>17} {'at the caller':>17}  ok")
        for rtt, loss, callee, caller in source_rows:
            print(f"{rtt:5.0f} {loss * 100:4.0f}%  {'chromium (sources)':<20} {summary(callee):>17} "
                  f"{summary(caller):>17}  {len(callee)}/{args.calls}")
    aim_rows = [(r, a) for (r, _, a) in rows if r[2] == "dialtone" and r[1] == 0 and a]
    if aim_rows:
        print("\naim (trickle, no loss): p50 first audio ≤ 3 × RTT + 150 ms")
        for r, audio in aim_rows:
            limit = 3 * r[0] + 150
            print(f"  RTT {r[0]:.0f} ms: p50 {statistics.median(audio):.0f} ms, limit {limit:.0f} ms: "
                  f"{'met' if statistics.median(audio) <= limit else 'NOT met'}")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, SIGTERM, SIGHUP: main's finally ran
        sys.exit("interrupted")
