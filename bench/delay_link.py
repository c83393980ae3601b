#!/usr/bin/env python3
"""A userspace link between two network namespaces, with added delay, jitter, loss (random or
bursty) and an optional bandwidth cap (netem is not in this kernel).

Each namespace gets a TUN device `dt0`; this process holds both and copies every IP packet from
one to the other after `--rtt-ms / 2` milliseconds, dropping some on the way. Everything that
crosses is shaped alike: UDP media, STUN, DTLS, ICE-TCP and the signaling's TCP.

    delay_link.py --ns-a NS_A --ns-b NS_B --rtt-ms 50 --loss 0.02 [--rate-kbps 300 --queue-ms 100]
        [--loss-model gilbert --burst 3] [--jitter-ms 30 [--jitter-dist normal] [--reorder]]
        [--signaling-port 18900]

Loss (`--loss P`, each direction on its own, from one seeded generator):
- `random` (the default): each packet is dropped with probability P, independently.
- `gilbert`: a Gilbert–Elliott chain per direction with a Good state that loses nothing and a
  Bad state that loses every packet. Each packet first moves the chain (Good → Bad with
  probability p, Bad → Good with probability r = 1 / `--burst`), then is dropped if the chain
  is Bad. Bursts are geometric with a mean of `--burst` packets, and p = P · r / (1 − P) makes
  the long-run loss P. With --burst 3: P 5 % → p 0.0175; P 15 % → p 0.0588.

Jitter (`--jitter-ms J`): each packet's one-way delay is RTT/2 plus a draw from U(−J, +J)
(`--jitter-dist uniform`, the default) or N(0, J/2) cut at ±J (`normal`), never below 0. By
default the link stays FIFO, as one path through one queue does: a packet whose draw would land
it before the packet ahead of it waits for that one (so delays skew a little late and nothing is
reordered). `--reorder` instead sends each packet at its own draw, as netem does without a rate
(reordering whenever two draws differ by more than the packets' spacing).

`--rate-kbps N` (0, the default: uncapped) caps each direction on its own at N kbit/s of IP
packets (headers included). It is a serialisation queue, as at a bottleneck router: a packet that
survives the loss waits for the packets ahead of it to be "transmitted" (size × 8 / rate each),
then for the one-way delay. The queue is bounded in time, drop-tail: a packet that would wait
more than `--queue-ms` (default 100 ms; a byte budget of rate × queue-ms, e.g. 3,750 bytes at
300 kbit/s) before its transmission starts is dropped. Loss is applied before the queue.

Counters, per direction (`a_to_b`: packets read from NS_A's device, written into NS_B's):
packets and bytes read, delivered (written to the other side), lost (loss model) and
queue-dropped, the longest queueing delay seen (`queue_ms_max`) and the longest since the
previous report (`queue_ms_max_recent`); `classes`: packets, bytes and losses read per kind of
packet (`rtp` for RTP and RTCP, `stun`, `dtls`, `udp` for other UDP, `tcp-signaling` for TCP to
or from `--signaling-port`, `tcp` for other TCP, such as ICE-TCP media; cumulative); and, since
the previous report, `delay_recent`: the one-way delays packets really got (from read to write,
the forwarder's own lateness included: p50, p95, p99, max, mean, sd in ms), `late_p99_ms` (how
late the forwarder wrote them against their schedule: its scheduling error) and `reordered`
(packets written after one that was read later). `kill -USR1` prints them as one JSON line on
stdout; SIGTERM prints them (a final line, `"final": true`) and exits. SIGKILL (what
bench/setup_bench.py and the e2e harness send) prints nothing.

The namespaces and their `dt0` devices must exist (bench/setup_bench.py makes them). Prints
READY once both devices are attached; runs until killed.
"""
import argparse
import asyncio
import collections
import ctypes
import fcntl
import json
import math
import os
import random
import signal
import struct
import sys

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
DELAY_BIN_MS = 0.25          # the delay histogram's resolution
DELAY_BINS = 16000           # up to 4 s; longer delays land in the last bin

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


def packet_class(packet, signaling_port):
    """What kind of packet this is, from its IPv4 header and the first payload byte (RFC 7983)."""
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return "other"
    header = (packet[0] & 0x0F) * 4
    protocol = packet[9]
    if protocol == 6:
        if len(packet) >= header + 4:
            ports = struct.unpack_from("!HH", packet, header)
            if signaling_port and signaling_port in ports:
                return "tcp-signaling"
        return "tcp"
    if protocol == 17:
        if len(packet) <= header + 8:
            return "udp"
        first = packet[header + 8]
        if first <= 3:
            return "stun"
        if 20 <= first <= 63:
            return "dtls"
        if 128 <= first <= 191:
            return "rtp"
        return "udp"
    return "other"


class GilbertElliott:
    """Good loses nothing, Bad loses everything; see the module's docstring."""

    def __init__(self, loss, burst, rng):
        self.r = 1.0 / burst
        self.p = loss * self.r / (1.0 - loss) if loss < 1 else 1.0
        self.bad = False
        self.rng = rng

    def drops(self):
        if self.bad:
            self.bad = self.rng.random() >= self.r
        else:
            self.bad = self.rng.random() < self.p
        return self.bad


class Direction:
    """One way across the link: its counters, its loss chain, its queue of packets in flight."""

    def __init__(self, name):
        self.name = name
        self.busy_until = 0.0  # when the last accepted packet finishes its transmission
        self.last_due = 0.0    # FIFO: when the last packet in flight is due
        self.flight = collections.deque()   # (due, read at, sequence, packet, class), FIFO mode
        self.timer = None
        self.read_seq = 0
        self.written_seq = -1
        self.chain = None
        self.counts = {"packets_in": 0, "bytes_in": 0, "packets": 0, "bytes": 0, "lost": 0, "lost_bytes": 0,
                       "queue_dropped": 0, "queue_dropped_bytes": 0, "queue_ms_max": 0.0,
                       "queue_ms_max_recent": 0.0}
        self.classes = {}
        self.reset_recent()

    def reset_recent(self):
        self.delays = [0] * DELAY_BINS
        self.delay_n = 0
        self.delay_sum = 0.0
        self.delay_sq = 0.0
        self.delay_max = 0.0
        self.late = [0] * 400   # 0.25 ms bins, up to 100 ms
        self.reordered = 0

    def record_delay(self, delay_ms, late_ms):
        self.delays[min(DELAY_BINS - 1, int(delay_ms / DELAY_BIN_MS))] += 1
        self.delay_n += 1
        self.delay_sum += delay_ms
        self.delay_sq += delay_ms * delay_ms
        self.delay_max = max(self.delay_max, delay_ms)
        self.late[min(len(self.late) - 1, max(0, int(late_ms / DELAY_BIN_MS)))] += 1

    def recent(self):
        def quantile(bins, q, n):
            if n == 0:
                return None
            target, seen = q * n, 0
            for i, count in enumerate(bins):
                seen += count
                if seen >= target:
                    return round((i + 0.5) * DELAY_BIN_MS, 2)
            return None
        n = self.delay_n
        mean = self.delay_sum / n if n else None
        sd = math.sqrt(max(0.0, self.delay_sq / n - mean * mean)) if n else None
        return {"packets": n, "p50": quantile(self.delays, 0.5, n), "p95": quantile(self.delays, 0.95, n),
                "p99": quantile(self.delays, 0.99, n), "max": round(self.delay_max, 2),
                "mean": None if mean is None else round(mean, 2), "sd": None if sd is None else round(sd, 2),
                "late_p99_ms": quantile(self.late, 0.99, n), "reordered": self.reordered}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ns-a", required=True)
    parser.add_argument("--ns-b", required=True)
    parser.add_argument("--rtt-ms", type=float, default=0)
    parser.add_argument("--loss", type=float, default=0, help="long-run loss probability per direction")
    parser.add_argument("--loss-model", choices=("random", "gilbert"), default="random")
    parser.add_argument("--burst", type=float, default=3.0, help="gilbert: mean burst length in packets")
    parser.add_argument("--jitter-ms", type=float, default=0, help="one-way delay varies by up to ± this")
    parser.add_argument("--jitter-dist", choices=("uniform", "normal"), default="uniform")
    parser.add_argument("--reorder", action="store_true", help="jitter may reorder packets (netem-like)")
    parser.add_argument("--rate-kbps", type=float, default=0, help="cap per direction, kbit/s (0: uncapped)")
    parser.add_argument("--queue-ms", type=float, default=100, help="with a cap: drop-tail beyond this queueing delay")
    parser.add_argument("--signaling-port", type=int, default=0, help="TCP to or from it counts as tcp-signaling")
    parser.add_argument("--trace", help="append one line per RTP/RTCP packet read here: time, direction, "
                                         "size, payload type, sequence number, RTP timestamp, dropped")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not 0 <= args.loss < 1 or args.burst < 1 or args.jitter_ms < 0:
        parser.error("--loss must be in [0, 1), --burst >= 1, --jitter-ms >= 0")

    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    fd_a = open_tun(args.ns_a, home)
    fd_b = open_tun(args.ns_b, home)
    rng = random.Random(args.seed)
    one_way = args.rtt_ms / 2000
    jitter = args.jitter_ms / 1000
    bytes_per_second = args.rate_kbps * 1000 / 8
    max_queue = args.queue_ms / 1000
    directions = {fd_a: Direction("a_to_b"), fd_b: Direction("b_to_a")}
    for way in directions.values():
        if args.loss_model == "gilbert" and args.loss:
            way.chain = GilbertElliott(args.loss, args.burst, rng)
    counters = {"forwarded": 0, "dropped": 0}
    trace = open(args.trace, "a", buffering=1 << 16) if args.trace else None

    loop = asyncio.new_event_loop()

    def traced(way, packet, now, dropped):
        """RTP headers are in the clear under SRTP: payload type, sequence number, timestamp."""
        header = (packet[0] & 0x0F) * 4 + 8
        if len(packet) < header + 12:
            return
        pt, seq, ts = packet[header + 1] & 0x7F, *struct.unpack_from("!HI", packet, header + 2)
        if 72 <= packet[header + 1] <= 76:   # RTCP (RFC 5761): no sequence number
            pt, seq, ts = packet[header + 1], -1, -1
        trace.write(f"{now:.6f} {way.name} {len(packet)} {pt} {seq} {ts} {int(dropped)}\n")

    def jitter_draw():
        if not jitter:
            return 0.0
        if args.jitter_dist == "uniform":
            return rng.uniform(-jitter, jitter)
        return max(-jitter, min(jitter, rng.gauss(0.0, jitter / 2)))

    def drops(way):
        if not args.loss:
            return False
        if way.chain:
            return way.chain.drops()
        return rng.random() < args.loss

    def forward(source, target):
        way = directions[source]
        c = way.counts
        while True:
            try:
                packet = os.read(source, 65535)
            except BlockingIOError:
                return
            now = loop.time()
            size = len(packet)
            kind = packet_class(packet, args.signaling_port)
            k = way.classes.setdefault(kind, {"packets": 0, "bytes": 0, "lost": 0})
            k["packets"] += 1
            k["bytes"] += size
            c["packets_in"] += 1
            c["bytes_in"] += size
            dropped = drops(way)
            if trace and kind == "rtp":
                traced(way, packet, now, dropped)
            if dropped:
                counters["dropped"] += 1
                c["lost"] += 1
                c["lost_bytes"] += size
                k["lost"] += 1
                continue
            depart = now
            if bytes_per_second:
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
                depart = way.busy_until
            counters["forwarded"] += 1
            due = depart + max(0.0, one_way + jitter_draw())
            sequence = way.read_seq
            way.read_seq += 1
            if args.reorder:
                loop.call_at(due, write, target, way, packet, now, due, sequence)
                continue
            due = max(due, way.last_due)   # FIFO: never ahead of the packet before it
            way.last_due = due
            if due <= now and not way.flight:
                write(target, way, packet, now, due, sequence)
                continue
            way.flight.append((due, now, sequence, packet))
            if way.timer is None:
                way.timer = loop.call_at(due, flush, target, way)

    def flush(target, way):
        """Writes every packet in flight that is due, in order, and waits for the next."""
        way.timer = None
        now = loop.time()
        while way.flight and way.flight[0][0] <= now + 0.0002:
            due, read_at, sequence, packet = way.flight.popleft()
            write(target, way, packet, read_at, due, sequence)
        if way.flight:
            way.timer = loop.call_at(way.flight[0][0], flush, target, way)

    def write(target, way, packet, read_at, due, sequence):
        c = way.counts
        try:
            os.write(target, packet)
        except OSError:
            return  # the device went away (the benchmark is tearing down) or its link is down
        now = loop.time()
        c["packets"] += 1
        c["bytes"] += len(packet)
        if sequence < way.written_seq:
            way.reordered += 1
        way.written_seq = max(way.written_seq, sequence)
        way.record_delay((now - read_at) * 1000, (now - due) * 1000)

    def report(final=False):
        stats = {"event": "link-stats", "t": round(loop.time(), 6), "rate_kbps": args.rate_kbps,
                 "loss": args.loss, "loss_model": args.loss_model, "burst": args.burst, "rtt_ms": args.rtt_ms,
                 "jitter_ms": args.jitter_ms, "jitter_dist": args.jitter_dist, "reorder": args.reorder}
        for way in directions.values():
            stats[way.name] = dict(way.counts, queue_ms_max=round(way.counts["queue_ms_max"], 2),
                                   queue_ms_max_recent=round(way.counts["queue_ms_max_recent"], 2),
                                   classes={k: dict(v) for k, v in way.classes.items()},
                                   delay_recent=way.recent())
            way.counts["queue_ms_max_recent"] = 0.0
            way.reset_recent()
        if final:
            stats["final"] = True
        try:
            print(json.dumps(stats), flush=True)
        except OSError:
            pass  # nobody reads stdout any more

    def terminate():
        try:
            if trace:
                trace.flush()
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
