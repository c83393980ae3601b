#!/usr/bin/env python3
"""A userspace link between two network namespaces, with added delay, loss and an optional
bandwidth cap (netem is not in this kernel).

Each namespace gets a TUN device `dt0`; this process holds both and copies every IP packet from
one to the other after `--rtt-ms / 2` milliseconds, dropping each with probability `--loss`.

    delay_link.py --ns-a NS_A --ns-b NS_B --rtt-ms 50 --loss 0.02 [--rate-kbps 300 --queue-ms 100]

`--rate-kbps N` (0, the default: uncapped) caps each direction on its own at N kbit/s of IP
packets (headers included). It is a serialisation queue, as at a bottleneck router: a packet that
survives the random loss waits for the packets ahead of it to be "transmitted" (size × 8 / rate
each), then for the one-way delay. The queue is bounded in time, drop-tail: a packet that would
wait more than `--queue-ms` (default 100 ms; a byte budget of rate × queue-ms, e.g. 3,750 bytes
at 300 kbit/s) before its transmission starts is dropped. Random loss is applied before the queue.

Counters, per direction (`a_to_b`: packets read from NS_A's device, written into NS_B's):
packets and bytes read, delivered (written to the other side), lost (random loss) and
queue-dropped, the longest queueing delay seen (`queue_ms_max`) and the longest since the
previous report (`queue_ms_max_recent`). `kill -USR1` prints them as one JSON line
on stdout; SIGTERM prints them (a final line, `"final": true`) and exits. SIGKILL (what
bench/setup_bench.py and the e2e harness send) prints nothing.

The namespaces and their `dt0` devices must exist (bench/setup_bench.py makes them). Prints
READY once both devices are attached; runs until killed.
"""
import argparse
import asyncio
import ctypes
import fcntl
import json
import os
import random
import signal
import struct
import sys

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000

libc = ctypes.CDLL("libc.so.6", use_errno=True)


def enter(namespace):
    with open(f"/var/run/netns/{namespace}") as f:
        if libc.setns(f.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {namespace}")


def open_tun(namespace, home):
    """Attaches to `dt0` inside `namespace` (a TUN fd stays bound to its namespace's device)."""
    enter(namespace)
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", b"dt0", IFF_TUN | IFF_NO_PI))
    if libc.setns(home, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns back")
    return fd


class Direction:
    """One way across the link: its counters and, with a cap, its serialisation queue."""

    def __init__(self, name):
        self.name = name
        self.busy_until = 0.0  # when the last accepted packet finishes its transmission
        self.counts = {"packets_in": 0, "bytes_in": 0, "packets": 0, "bytes": 0, "lost": 0, "lost_bytes": 0,
                       "queue_dropped": 0, "queue_dropped_bytes": 0, "queue_ms_max": 0.0,
                       "queue_ms_max_recent": 0.0}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ns-a", required=True)
    parser.add_argument("--ns-b", required=True)
    parser.add_argument("--rtt-ms", type=float, default=0)
    parser.add_argument("--loss", type=float, default=0)
    parser.add_argument("--rate-kbps", type=float, default=0, help="cap per direction, kbit/s (0: uncapped)")
    parser.add_argument("--queue-ms", type=float, default=100, help="with a cap: drop-tail beyond this queueing delay")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    fd_a = open_tun(args.ns_a, home)
    fd_b = open_tun(args.ns_b, home)
    rng = random.Random(args.seed)
    one_way = args.rtt_ms / 2000
    bytes_per_second = args.rate_kbps * 1000 / 8
    max_queue = args.queue_ms / 1000
    directions = {fd_a: Direction("a_to_b"), fd_b: Direction("b_to_a")}
    counters = {"forwarded": 0, "dropped": 0}

    loop = asyncio.new_event_loop()

    def forward(source, target):
        way = directions[source]
        c = way.counts
        while True:
            try:
                packet = os.read(source, 65535)
            except BlockingIOError:
                return
            size = len(packet)
            c["packets_in"] += 1
            c["bytes_in"] += size
            if args.loss and rng.random() < args.loss:
                counters["dropped"] += 1
                c["lost"] += 1
                c["lost_bytes"] += size
                continue
            if bytes_per_second:
                now = loop.time()
                start = max(now, way.busy_until)
                if start - now > max_queue:
                    counters["dropped"] += 1
                    c["queue_dropped"] += 1
                    c["queue_dropped_bytes"] += size
                    continue
                waited = (start - now) * 1000
                c["queue_ms_max"] = max(c["queue_ms_max"], waited)
                c["queue_ms_max_recent"] = max(c["queue_ms_max_recent"], waited)
                way.busy_until = start + size / bytes_per_second
                counters["forwarded"] += 1
                loop.call_at(way.busy_until + one_way, write, target, packet, c)
                continue
            counters["forwarded"] += 1
            if one_way:
                loop.call_later(one_way, write, target, packet, c)
            else:
                write(target, packet, c)

    def write(target, packet, c):
        try:
            os.write(target, packet)
            c["packets"] += 1
            c["bytes"] += len(packet)
        except OSError:
            pass  # the device went away: the benchmark is tearing down

    def report(final=False):
        stats = {"event": "link-stats", "t": round(loop.time(), 6), "rate_kbps": args.rate_kbps,
                 "loss": args.loss, "rtt_ms": args.rtt_ms}
        for way in directions.values():
            stats[way.name] = dict(way.counts, queue_ms_max=round(way.counts["queue_ms_max"], 2),
                                   queue_ms_max_recent=round(way.counts["queue_ms_max_recent"], 2))
            way.counts["queue_ms_max_recent"] = 0.0
        if final:
            stats["final"] = True
        try:
            print(json.dumps(stats), flush=True)
        except OSError:
            pass  # nobody reads stdout any more

    def terminate():
        try:
            report(final=True)
        finally:
            loop.stop()

    loop.add_reader(fd_a, forward, fd_a, fd_b)
    loop.add_reader(fd_b, forward, fd_b, fd_a)
    loop.add_signal_handler(signal.SIGUSR1, report)
    loop.add_signal_handler(signal.SIGTERM, terminate)
    print("READY", flush=True)
    try:
        loop.run_forever()
    finally:
        print(f"forwarded {counters['forwarded']} dropped {counters['dropped']}", file=sys.stderr)


if __name__ == "__main__":
    main()
