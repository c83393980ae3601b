#!/usr/bin/env python3
"""The media gaps of mid-call video changes: the CLI (webrtcbin) against Chromium.

For each stack, one audio call per round between two peers in one network namespace (or over
`--rtt-ms` with `bench/delay_link.py`'s link), then:

- upgrade: the caller starts its camera (`video on` / the page's Video on). Measured: the time
  to the callee's first decoded frame. webrtcbin 1.22 cannot change a negotiated direction, so
  the CLI makes the change on fresh connections (an ICE restart, protocol.md 10); Chromium
  renegotiates in place.
- camera on: after the camera was off for a second (`camera off` / Camera off, no
  renegotiation), the time from turning it on to the callee's next decoded frame.
- downgrade: the caller stops its video (`video off`): the time until the callee is told
  (`remote-video` off; the page's `remoteVideo` false).

Times are taken on this script's clock, from the command to the callee's frame counter
moving (polled every 20 ms, so each value is late by up to ~20 ms plus one poll's cost).
"""
import argparse
import asyncio
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "e2e"))

import harness  # noqa: E402
from harness import (Chromium, MediaNamespace, NamespaceLink, Scratch, Server, Softphone, check,  # noqa: E402
                     run_stacked)


async def until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return time.monotonic()
        check(time.monotonic() < deadline, f"no {what} within {timeout} s")
        await asyncio.sleep(0.02)


async def cli_frames(peer):
    before = peer.count("video-count")
    peer.send("video count")
    deadline = time.monotonic() + 5
    while peer.count("video-count") == before:
        check(time.monotonic() < deadline and peer.proc.returncode is None, f"{peer.name} stopped counting")
        await asyncio.sleep(0.005)
    return [e for e in peer.events if e.get("event") == "video-count"][-1]["frames"]


async def cli_round(scratch, stack, place):
    server, ns_a, ns_b = place
    bob = stack(await Softphone(scratch, "bob", ["answer", "--server", server.url, "--token", server.token("bob"),
                                                 "--auto", "--camera", "blue"], netns=ns_b).start())
    await bob.wait_for("note", text="waiting for a call")
    alice = stack(await Softphone(scratch, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                                     "--to", "bob", "--camera", "red"], netns=ns_a).start())
    await bob.wait_for("first-audio", timeout=30)
    await asyncio.sleep(1)
    started = time.monotonic()
    alice.send("video on")
    upgrade = await until(lambda: frames_above(bob, 0), 30, "frame after the upgrade") - started
    await asyncio.sleep(2)
    alice.send("camera off")
    await bob.wait_for("remote-camera", on=False)
    await asyncio.sleep(1)
    base = await cli_frames(bob)
    started = time.monotonic()
    alice.send("camera on")
    camera = await until(lambda: frames_above(bob, base), 15, "frame after the camera came on") - started
    await asyncio.sleep(1)
    started = time.monotonic()
    told = bob.count("remote-video", on=False)
    alice.send("video off")

    async def downgraded():
        return bob.count("remote-video", on=False) > told

    downgrade = await until(downgraded, 30, "remote-video off") - started
    alice.interrupt()
    await alice.exit_status(timeout=30)
    await bob.exit_status(timeout=30)
    return upgrade, camera, downgrade


async def frames_above(peer, count):
    return await cli_frames(peer) > count


async def chromium_round(scratch, stack, place):
    server, ns_a, ns_b = place
    callee_scratch = Scratch()
    callee = stack(await Chromium(callee_scratch, f"{server.url}/#token={server.token('bob', 'browser')}"
                                                  f"&answer=auto&tone=330", ns_b).start())
    await callee.wait_for("sign-in", lambda st: st["state"] == "idle")
    caller = stack(await Chromium(scratch, f"{server.url}/#token={server.token('alice', 'browser')}"
                                           f"&call=bob&tone=660", ns_a).start())
    await callee.wait_for("the connected state", lambda st: st["state"] == "connected")
    await asyncio.sleep(1)

    async def frames():
        return (await callee.page_state()).get("videoFrames", 0)

    started = time.monotonic()
    await caller.evaluate('document.getElementById("videoToggle").click()')
    upgrade = await until(lambda: above(frames, 0), 30, "frame after the upgrade") - started
    await asyncio.sleep(2)
    await caller.evaluate('document.getElementById("cameraToggle").click()')
    await asyncio.sleep(1)
    base = await frames()
    started = time.monotonic()
    await caller.evaluate('document.getElementById("cameraToggle").click()')
    camera = await until(lambda: above(frames, base + 1), 15, "frame after the camera came on") - started
    await asyncio.sleep(1)
    started = time.monotonic()
    await caller.evaluate('document.getElementById("videoToggle").click()')

    async def downgraded():
        return not (await callee.page_state()).get("remoteVideo")

    downgrade = await until(downgraded, 30, "remoteVideo false") - started
    await caller.evaluate('document.getElementById("hangup").click()')
    callee_scratch.remove()
    return upgrade, camera, downgrade


async def above(read, count):
    return await read() > count


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", ".build", "release"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rtt-ms", type=int, default=0, help="0: both peers in one namespace")
    parser.add_argument("--stacks", default="dialtone,chromium")
    args = parser.parse_args()
    harness.BIN = os.path.abspath(args.bin)
    print(f"# bench-video-change on {platform.node()}: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
          f"{args.rounds} rounds, {'RTT ' + str(args.rtt_ms) + ' ms' if args.rtt_ms else 'one namespace'}; "
          f"binaries {harness.BIN}", flush=True)
    results = {stack: [] for stack in args.stacks.split(",")}
    for round_ in range(args.rounds):
        for name in results:
            scratch = Scratch()

            async def one_round(stack, scratch=scratch, name=name):
                if args.rtt_ms:
                    link = stack(await NamespaceLink(scratch, rtt_ms=args.rtt_ms).start())
                    server = stack(await Server(scratch, netns=link.NS_B, host=link.ADDR_B).start())
                    place = (server, link.NS_A, link.NS_B)
                else:
                    ns = stack(await MediaNamespace().start())
                    server = stack(await Server(scratch, netns=ns.NS).start())
                    place = (server, ns.NS, ns.NS)
                run = cli_round if name == "dialtone" else chromium_round
                return await run(scratch, stack, place)

            try:
                # The round itself had 120 s; the set-up before it takes seconds.
                figures = await run_stacked(one_round, 150)
                results[name].append(figures)
                print(f"# {name} round {round_}: upgrade {figures[0] * 1000:.0f} ms, camera on "
                      f"{figures[1] * 1000:.0f} ms, downgrade {figures[2] * 1000:.0f} ms", flush=True)
                ok = True
            except (harness.Failure, asyncio.TimeoutError) as error:
                print(f"# {name} round {round_}: failed ({error or 'timed out'}); logs in {scratch.path}", flush=True)
                ok = False
            if ok:
                scratch.remove()
    print("| stack | rounds | upgrade → 1st frame | camera on → next frame | downgrade → told |")
    print("|---|---|---|---|---|")
    medians = {}
    for name, rows in results.items():
        if not rows:
            print(f"| {name} | 0 | – | – | – |")
            continue
        medians[name] = [statistics.median(column) for column in zip(*rows)]
        cells = " | ".join(
            f"{statistics.median(column) * 1000:.0f} ms ({min(column) * 1000:.0f}–{max(column) * 1000:.0f})"
            for column in zip(*rows))
        print(f"| {name} | {len(rows)} | {cells} |")
    if "dialtone" in medians and "chromium" in medians:
        ratios = " | ".join(f"{d / c:.2f}×" for d, c in zip(medians["dialtone"], medians["chromium"]))
        print(f"| dialtone ÷ chromium | | {ratios} |")


if __name__ == "__main__":
    asyncio.run(main())
