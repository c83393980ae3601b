#!/usr/bin/env python3
"""Counts the RTP packets crossing one network namespace's loopback, as the wire sees them.

Run inside the namespace (`ip netns exec NS python3 rtp_counter.py`); needs root (AF_PACKET).
Every peer of an e2e scenario lives in one namespace and reaches the others' host candidates on
the namespace's own address, so all media passes through `lo`. Each UDP datagram is classified
by RFC 7983's first-byte demultiplexing: 0-3 STUN, 20-63 DTLS, 128-191 RTP or RTCP; among the
latter, RFC 5761's second byte tells RTCP (packet types 192-223) from RTP. SRTP keeps the RTP
header in the clear, so this needs no keys.

Prints `<rtp packets> <rtp bytes> <rtcp packets> <dtls packets> <stun packets>` (cumulative)
on every line of stdin it reads, and once more at EOF.
"""
import select
import socket
import struct
import sys

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # loopback shows each packet twice: count the copy going out only


def classify(frame):
    """'rtp' / 'rtcp' / 'dtls' / 'stun' for a UDP datagram in an Ethernet frame, else None."""
    if len(frame) < 14 + 20 + 8 or struct.unpack("!H", frame[12:14])[0] != 0x0800:
        return None, 0
    ip = frame[14:]
    header = (ip[0] & 0x0F) * 4
    if ip[9] != 17 or len(ip) < header + 8:
        return None, 0
    payload = ip[header + 8:]
    if len(payload) < 2:
        return None, 0
    first, second = payload[0], payload[1]
    if first <= 3:
        return "stun", len(payload)
    if 20 <= first <= 63:
        return "dtls", len(payload)
    if 128 <= first <= 191:
        return ("rtcp" if 192 <= second <= 223 else "rtp"), len(payload)
    return None, 0


def main():
    sniffer = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sniffer.bind(("lo", 0))
    counts = {"rtp": 0, "rtp_bytes": 0, "rtcp": 0, "dtls": 0, "stun": 0}

    def report():
        sys.stdout.write(f"{counts['rtp']} {counts['rtp_bytes']} {counts['rtcp']} {counts['dtls']} {counts['stun']}\n")
        sys.stdout.flush()

    print("READY", flush=True)
    while True:
        ready, _, _ = select.select([sniffer, sys.stdin], [], [])
        if sniffer in ready:
            frame, address = sniffer.recvfrom(65535)
            if address[2] == PACKET_OUTGOING:
                kind, size = classify(frame)
                if kind:
                    counts[kind] += 1
                    if kind == "rtp":
                        counts["rtp_bytes"] += size
        if sys.stdin in ready:
            if not sys.stdin.readline():
                report()
                return
            report()


if __name__ == "__main__":
    main()
