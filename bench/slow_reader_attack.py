#!/usr/bin/env python3
"""The slow-reader attack from the hardening issue, measured: Bob accepts a call and then never
reads (his socket's receive buffer shrunk to 4 KB), while Alice keeps sending 32 KB offers.
Prints the server's RSS every second. Before the outgoing-queue bound the server grew from
~35 MB to ~836 MB in 9 s; now Bob's socket is closed with 4429 and memory stays flat.

  python3 bench/slow_reader_attack.py --bin .build/release [--seconds 10] [-- SERVER FLAGS...]
"""
import argparse
import asyncio
import base64
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "e2e"))


def mint(bin_dir, data_dir, user):
    out = subprocess.check_output([os.path.join(bin_dir, "dialtone"), "token", "--user", user, "--device", "d",
                                   "--data-dir", data_dir, "--ttl", "3600"], text=True)
    return out.strip().splitlines()[-1]


def frame(text):
    payload = text.encode()
    mask = os.urandom(4)
    header = bytes([0x81])
    n = len(payload)
    if n < 126:
        header += bytes([0x80 | n])
    elif n < 65536:
        header += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        header += bytes([0x80 | 127]) + struct.pack(">Q", n)
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def raw_socket(port, small):
    s = socket.socket()
    if small:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    response = b""
    while b"\r\n\r\n" not in response:
        response += s.recv(1)
    return s


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=".build/release")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("server_flags", nargs="*")
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="dialtone-attack-")
    port = 18000 + os.getpid() % 1000
    server = subprocess.Popen([os.path.join(args.bin, "dialtone-server"), "--port", str(port), "--data-dir", data,
                               "--log-level", "warning", *args.server_flags])
    try:
        time.sleep(1.0)
        alice_token, bob_token = mint(args.bin, data, "alice"), mint(args.bin, data, "bob")
        bob = raw_socket(port, small=True)
        bob.sendall(frame(json.dumps({"type": "hello", "id": "h", "version": 1, "token": bob_token})))
        alice = raw_socket(port, small=False)
        alice.sendall(frame(json.dumps({"type": "hello", "id": "h", "version": 1, "token": alice_token})))
        alice.sendall(frame(json.dumps({"type": "invite", "id": "i", "callId": "c1", "to": "bob", "video": False})))
        time.sleep(0.3)
        bob.sendall(frame(json.dumps({"type": "accept", "id": "a", "callId": "c1"})))
        time.sleep(0.3)
        # Alice reads whatever comes back so that only Bob is the slow reader.
        alice.setblocking(False)
        sdp = "v=0\r\n" + "a=x:" + "y" * 32_000 + "\r\n"
        start = time.time()
        sent = 0
        next_report = start
        peak = 0
        while time.time() - start < args.seconds:
            try:
                alice.sendall(frame(json.dumps({"type": "offer", "id": f"o{sent}", "callId": "c1", "sdp": sdp})))
                sent += 1
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                pass
            try:
                while alice.recv(65536):
                    pass
            except (BlockingIOError, ConnectionResetError):
                pass
            if time.time() >= next_report:
                rss = rss_mb(server.pid)
                peak = max(peak, rss)
                print(f"t={time.time() - start:4.1f}s offers={sent:6d} server RSS={rss:6.1f} MB", flush=True)
                next_report += 1
            time.sleep(0.001)
        print(f"peak RSS {peak:.1f} MB after {sent} offers of 32 KB ({sent * 32 / 1024:.0f} MB sent)")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
