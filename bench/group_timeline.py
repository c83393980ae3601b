#!/usr/bin/env python3
"""Where accept → first audio goes in a group call: per-member timelines of bench-group rounds.

Runs rounds of `bench/group_bench.py`'s group call (N softphones through dialtone-server and
Janus) with every softphone at `--log-level debug` (the SDK logs each message it sends and
receives) and the server at debug level (the Janus adapter logs joins, Janus's answers, each
`webrtcup` and each subscriber request), then prints, for each member, every step on one wall
clock in ms after its accept (the creator: after its start), with the moments the others'
publishers came up. Trickled candidates and participant-list updates are left out.

`--server-nice -15` runs the server and Janus at that nice value (as bench-group's
`--infra-nice`). Needs root. Usage:
    python3 bench/group_timeline.py --bin .build/release [--n 3] [--rounds 2] [--flags=--multistream]
"""
import argparse
import asyncio
import datetime
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))

STAMP = r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z)\s"
SDK = re.compile(STAMP + r".*(received|sending) (group-[a-z-]+)")
SERVER = re.compile(STAMP + r".*group call \S+: (.*?)( \[call=.*)?$")
QUIET = ("group-candidate", "group-update", "group-end-of-candidates")


def wall(iso):
    return datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def timeline(peer):
    """(wall time, label) of a softphone's milestones and of the messages it sent and received."""
    origin = next((t - e.get("ms", 0) / 1000 for e, t in zip(peer.events, peer.stamps) if e.get("event") == "start"),
                  None)
    steps = []
    for e in peer.events:
        if origin is None or "ms" not in e or e.get("event") == "start":
            continue
        if e["event"] == "participant":
            if e.get("state") != "stream":
                continue
            label = f"{e.get('user')}'s stream added"
        else:
            label = e["event"]
        steps.append((origin + e["ms"] / 1000, label))
    for line in peer.lines:
        m = SDK.match(line)
        if m and m.group(3) not in QUIET:
            steps.append((wall(m.group(1)), ("← " if m.group(2) == "received" else "→ ") + m.group(3)))
    return steps


def server_steps(path, name):
    steps = []
    with open(path, errors="replace") as log:
        for line in log:
            m = SERVER.match(line)
            if m and re.search(rf"\b{re.escape(name)}\b", m.group(2)):
                steps.append((wall(m.group(1)), "   server: " + m.group(2)))
    return steps


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"))
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--flags", default="--multistream", help="the softphones' flags (--no-multistream)")
    parser.add_argument("--server-nice", type=int, default=None)
    args = parser.parse_args()
    os.environ["DIALTONE_BIN"] = os.path.abspath(args.bin)
    os.environ["DIALTONE_E2E_SERVER_LOG"] = "debug"
    import harness as h  # noqa: E402  (reads DIALTONE_BIN)
    import group_bench as gb  # noqa: E402
    if os.geteuid() != 0:
        sys.exit("group_timeline needs root (network namespaces)")
    gb.INFRA_NICE = args.server_nice
    plain = h.Softphone.__init__
    for number in range(args.rounds):
        scratch = h.Scratch()
        peers = {}

        def with_log(self, s, name, arguments, command=None, netns=None):
            plain(self, s, name, list(arguments) + ["--log-level", "debug"], command, netns)
            peers[name] = self

        h.Softphone.__init__ = with_log
        try:
            answers, _, _ = await asyncio.wait_for(
                gb.janus_round(h, scratch, args.n, 1, flags=tuple(args.flags.split())), 240)
        finally:
            h.Softphone.__init__ = plain
        print(f"## round {number}: accept → first audio {[round(a) for a in answers]} ms (logs in {scratch.path})")
        for name, peer in sorted(peers.items()):
            steps = timeline(peer)
            zero = next((t for t, label in steps if label == "answering"), None)
            print(f"# {name} (0 = {'its accept' if zero else 'its start'})")
            if zero is None:
                zero = min(t for t, _ in steps)
            others = [(t, f"   ({other} publishing)") for other, p in peers.items() if other != name
                      for t, label in timeline(p) if label == "publishing"]
            for t, label in sorted(steps + others + server_steps(scratch.file("server.log"), name)):
                print(f"  {1000 * (t - zero):7.1f}  {label}")


if __name__ == "__main__":
    asyncio.run(main())
