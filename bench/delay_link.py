#!/usr/bin/env python3
"""A userspace link between two network namespaces, with added delay and loss (netem is not in
this kernel).

Each namespace gets a TUN device `dt0`; this process holds both and copies every IP packet from
one to the other after `--rtt-ms / 2` milliseconds, dropping each with probability `--loss`.

    delay_link.py --ns-a NS_A --ns-b NS_B --rtt-ms 50 --loss 0.02

The namespaces and their `dt0` devices must exist (bench/setup_bench.py makes them). Prints
READY once both devices are attached; runs until killed.
"""
import argparse
import asyncio
import ctypes
import fcntl
import os
import random
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ns-a", required=True)
    parser.add_argument("--ns-b", required=True)
    parser.add_argument("--rtt-ms", type=float, default=0)
    parser.add_argument("--loss", type=float, default=0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    fd_a = open_tun(args.ns_a, home)
    fd_b = open_tun(args.ns_b, home)
    rng = random.Random(args.seed)
    one_way = args.rtt_ms / 2000
    counters = {"forwarded": 0, "dropped": 0}

    loop = asyncio.new_event_loop()

    def forward(source, target):
        while True:
            try:
                packet = os.read(source, 65535)
            except BlockingIOError:
                return
            if args.loss and rng.random() < args.loss:
                counters["dropped"] += 1
                continue
            counters["forwarded"] += 1
            if one_way:
                loop.call_later(one_way, write, target, packet)
            else:
                write(target, packet)

    def write(target, packet):
        try:
            os.write(target, packet)
        except OSError:
            pass  # the device went away: the benchmark is tearing down

    loop.add_reader(fd_a, forward, fd_a, fd_b)
    loop.add_reader(fd_b, forward, fd_b, fd_a)
    print("READY", flush=True)
    try:
        loop.run_forever()
    finally:
        print(f"forwarded {counters['forwarded']} dropped {counters['dropped']}", file=sys.stderr)


if __name__ == "__main__":
    main()
