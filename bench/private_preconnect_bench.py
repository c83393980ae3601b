#!/usr/bin/env python3
"""What a private pre-connect leg costs (protocol.md 11, docs/security.md): `make bench-private-preconnect`.

Alice (caller, with the server and coturn) in namespace A, Bob (callee) in namespace B, joined by
bench/delay_link.py with the given RTT. Bob's phone rings for `--ring-ms`, then he answers. For
each variant it makes N calls of `--talk` seconds and reports the median and p95 of "Answer →
first audio" at Bob and at Alice:

- private  Bob's leg gathers relay candidates only (the default): the call stays on coturn's
           relay for its life (webrtcbin cannot surface other candidates)
- open     --no-private-preconnect: Bob's leg gathers every candidate (the caller learns his
           addresses while it rings)
- none     no TURN server: a private callee asks for no leg, so the call is negotiated after
           Answer (the flow without pre-connect)

and, for `private`, what coturn relayed for Bob's leg (bytes per second of call, both ways, from
coturn's session usage lines): what the deployment's TURN server carries for every call
answered on a private leg with webrtcbin at both ends.

Needs root (namespaces, TUN). Usage:
    python3 bench/private_preconnect_bench.py [--bin .build/release] [--calls 5] [--rtt-ms 40]
"""
import argparse
import asyncio
import os
import re
import statistics
import sys
import time
import types

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def relayed_bytes(log_path, user):
    """Bytes coturn relayed between `user`'s allocations and their peers (both ways), from the
    "peer usage" line it writes when an allocation closes; None while one is still open."""
    total, opened, closed = 0, 0, 0
    with open(log_path, errors="replace") as log:
        for line in log:
            m = re.search(r"peer usage: realm=<[^>]*>, username=<[^:>]*:([^>]*)>, rp=\d+, rb=(\d+), sp=\d+, sb=(\d+)",
                          line)
            if m and m.group(1) == user:
                total += int(m.group(2)) + int(m.group(3))
                closed += 1
            if re.search(rf"session \d+: new, realm=<[^>]*>, username=<[^:>]*:{user}>", line):
                opened += 1
    return total if opened and closed >= opened else None


async def one_call(harness, variant, rtt_ms, ring_ms, talk):
    """(bob ms, alice ms, relayed bytes per second or None) from Bob's Answer."""
    scratch = harness.Scratch()
    stack_items = []

    def stack(item):
        stack_items.append(item)
        return item

    try:
        link = stack(await harness.NamespaceLink(scratch, rtt_ms=rtt_ms).start())
        coturn = None
        if variant != "none":
            coturn = stack(await harness.Coturn(scratch, types.SimpleNamespace(NS=link.NS_A, ADDR=link.ADDR_A),
                                                verbose=True).start())
        server = stack(await harness.Server(scratch, netns=link.NS_A, host=link.ADDR_A, turn=coturn).start())
        flags = ["--no-private-preconnect"] if variant == "open" else []
        bob = stack(await harness.Softphone(scratch, "bob", ["answer", "--server", server.url, "--token",
                                                             server.token("bob"), "--preconnect", *flags],
                                            netns=link.NS_B).start())
        await bob.wait_for("note", text="waiting for a call")
        alice = stack(await harness.Softphone(scratch, "alice", ["call", "--server", server.url, "--token",
                                                                 server.token("alice"), "--to", "bob",
                                                                 "--preconnect", "--duration", str(talk)],
                                              netns=link.NS_A).start())
        await bob.wait_for("note", text="press Enter to answer, or type d and Enter to decline")
        await asyncio.sleep(ring_ms / 1000)
        answered = time.time()
        bob.send("")
        await alice.wait_for("first-audio", timeout=30)
        await bob.wait_for("first-audio", timeout=30)
        harness.check(await alice.exit_status() == 0 and await bob.exit_status() == 0, "a softphone failed")
        rate = None
        if variant == "private":
            # Bob's softphone released its allocations (a Refresh with lifetime 0) as it ended;
            # coturn writes each one's usage as it closes.
            for _ in range(50):
                relayed = relayed_bytes(scratch.file("turnserver.log"), "bob")
                if relayed is not None:
                    rate = relayed / talk
                    break
                await asyncio.sleep(0.1)
        return ((bob.time_of("first-audio") - answered) * 1000, (alice.time_of("first-audio") - answered) * 1000,
                rate)
    finally:
        for item in reversed(stack_items):
            await item.stop()
        scratch.remove()


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"))
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--rtt-ms", type=int, default=40)
    parser.add_argument("--ring-ms", type=int, default=1500)
    parser.add_argument("--talk", type=int, default=5)
    args = parser.parse_args()
    os.environ["DIALTONE_BIN"] = os.path.abspath(args.bin)
    import harness  # after DIALTONE_BIN: it reads it once

    print(f"Answer → first audio, {args.calls} calls each, link RTT {args.rtt_ms} ms, ring {args.ring_ms} ms")
    print(f"{'variant':<9} {'bob p50':>8} {'bob p95':>8} {'alice p50':>10} {'alice p95':>10}  relayed for bob's leg")
    for variant in ("private", "open", "none"):
        results = [await one_call(harness, variant, args.rtt_ms, args.ring_ms, args.talk) for _ in range(args.calls)]
        bob = [r[0] for r in results]
        alice = [r[1] for r in results]
        rates = [r[2] for r in results if r[2] is not None]
        relayed = f"{statistics.median(rates) / 1000:.1f} kB/s (median)" if rates else "-"
        print(f"{variant:<9} {statistics.median(bob):8.0f} {pct(bob, 0.95):8.0f} {statistics.median(alice):10.0f} "
              f"{pct(alice, 0.95):10.0f}  {relayed}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
