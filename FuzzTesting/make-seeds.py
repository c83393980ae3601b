#!/usr/bin/env python3
"""Writes the seed corpus (FuzzTesting/Corpus/<Harness>/seed-*) from docs/protocol.md's examples
and a few hand-made inputs. Re-run after the protocol changes; the output is committed."""
import base64
import hashlib
import hmac
import json
import os
import re
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = open(os.path.join(HERE, "..", "docs", "protocol.md"), encoding="utf-8").read()
SECRET = b"fuzzing-secret-0123456789"  # the key Sources/DialtoneFuzzTargets/JWT.swift verifies with


def examples(arrow):
    return [line[2:].strip() for line in DOC.splitlines() if line.startswith(arrow + " {")]


def json_blocks():
    return [b.strip() for b in re.findall(r"```json\n(.*?)```", DOC, re.S)]


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(claims, alg="HS256"):
    header = b64(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    payload = b64(json.dumps(claims).encode())
    signature = b64(hmac.new(SECRET, f"{header}.{payload}".encode(), hashlib.sha256).digest())
    return f"{header}.{payload}.{signature}"


SDP = "\r\n".join([
    "v=0", "o=- 1 2 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0 1",
    "m=audio 9 UDP/TLS/RTP/SAVPF 111", "c=IN IP4 0.0.0.0", "a=mid:0", "a=rtpmap:111 opus/48000/2",
    "a=ice-ufrag:abcd", "a=ice-pwd:0123456789abcdef012345", "a=fingerprint:sha-256 " + ":".join(["AB"] * 32),
    "a=setup:actpass", "a=sendrecv",
    "m=video 9 UDP/TLS/RTP/SAVPF 96 97", "c=IN IP4 0.0.0.0", "a=mid:1", "a=rtpmap:96 VP8/90000",
    "a=rtpmap:97 rtx/90000", "a=fmtp:97 apt=96", "a=ssrc:1234 cname:x", "a=recvonly", "",
])
CANDIDATE = ('{"type":"candidate","seq":3,"callId":"c1","from":{"userId":"bob","deviceId":"phone"},'
             '"candidate":{"candidate":"candidate:1 1 UDP 2122252543 10.0.0.2 49152 typ host",'
             '"sdpMid":"0","sdpMLineIndex":0}}')

REQUESTS = [
    "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /items/a%20b?q=1&r HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n",
    "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "POST /echo HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\nabc",
    "POST /echo HTTP/1.1\r\nTransfer-Encoding : chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
]
# An upgrade followed by masked frames: text, ping, close.
UPGRADE = REQUESTS[-1].encode()
MASK = b"\x01\x02\x03\x04"


def frame(opcode, payload):
    masked = bytes(b ^ MASK[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + MASK + masked


def frame_bytes(opcode, payload, fin=True, masked=True, rsv=0):
    """A client frame of any length (7-, 16- or 64-bit), masked unless told otherwise."""
    first = (0x80 if fin else 0) | rsv | opcode
    n = len(payload)
    bit = 0x80 if masked else 0
    if n < 126:
        head = bytes([first, bit | n])
    elif n <= 0xFFFF:
        head = bytes([first, bit | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([first, bit | 127]) + n.to_bytes(8, "big")
    if not masked:
        return head + payload
    return head + MASK + bytes(b ^ MASK[i % 4] for i, b in enumerate(payload))


# Server frame parser seeds: the first byte is the size of the pieces the rest is read in.
WS_FRAMES = [
    frame_bytes(1, b'{"type":"ping","id":"p1"}') + frame_bytes(9, b"k") + frame_bytes(10, b"") + frame_bytes(8, b"\x03\xe8bye"),
    frame_bytes(1, "κόσμε".encode(), fin=False) + frame_bytes(9, b"p") + frame_bytes(0, b" more"),
    frame_bytes(2, bytes(range(256)) * 2) + frame_bytes(2, bytes(5000)),
    frame_bytes(1, b"hello", masked=False),
    frame_bytes(1, b"rsv", rsv=0x40),
    frame_bytes(0, b"orphan"),
    frame_bytes(1, b"\xed\xa0\x80"),
    frame_bytes(8, b"\x03"),
    frame_bytes(8, b"\x03\xedbad"),
    frame_bytes(9, bytes(126)),
]
HEADS = [
    "GET /items/a%20b/../c?q=1+2&r;s=%26 HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nX-A: 2\r\n\r\n",
    "\r\nPOST /echo HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /healthz HTTP/1.0\r\n\r\n",
    "GET /x HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n",
    "GET /x HTTP/1.1\r\nContent-Length : 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    "GET /x HTTP/1.1\nHost: bare-lf\n\nBREW /pot HTTP/2.0\r\n\r\n",
    "GET http://h/v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    "Sec-WebSocket-Protocol: chat, dialtone\r\n\r\n",
]


def main():
    seeds = {
        "FuzzClientMessage": [e.encode() for e in examples("→")],
        "FuzzServerMessage": [e.encode() for e in examples("←")] + [CANDIDATE.encode()],
        "FuzzHTTPBodies": [bytes([n]) + b.encode() for b in json_blocks() for n in range(6)][:60] + [
            b"\x00" + b'{"installationId":"i1","platform":"ios","bundleId":"com.example.chat",'
            b'"apnsEnvironment":"production","voipToken":"' + b"ab" * 32 + b'"}',
            b"\x00" + b'{"installationId":"i2","platform":"android","fcmToken":"fcm-token-0123456789"}',
        ],
        "FuzzPushPayload": [b.encode() for b in json_blocks() if '"dialtone"' in b] + [
            b'{"dialtone":1,"type":"incoming-call","callId":"c1","callerId":"alice","callerName":"Alice",'
            b'"hasVideo":"1","createdAt":"1800000000000","memberCount":3,"title":"Standup"}',
            b'{"dialtone":1,"type":"missed-call","callId":"c1","callerId":"alice"}',
        ],
        "FuzzSDP": [SDP.encode(), SDP.encode() + b"\x00" + CANDIDATE.encode(), SDP.replace("\r\n", "\n").encode()],
        "FuzzJWT": [
            token({"sub": "alice", "device": "phone", "exp": 1_900_000_000}).encode(),
            token({"sub": "alice", "exp": 1_700_000_000}).encode(),
            token({"sub": "alice", "exp": 1_900_000_000}, alg="none").encode(),
            b'{"sub":"alice","device":"phone","name":"Alice","exp":1900000000,"nbf":1700000000}',
            b"not.a.jwt",
        ],
        "FuzzHTTPRequest": [r.encode() for r in REQUESTS] + [
            UPGRADE + frame(1, b'{"type":"ping","id":"p1"}') + frame(9, b"k") + frame(8, b"\x03\xe8bye"),
            UPGRADE + bytes([0x81, 0x05]) + b"hello",  # unmasked: must fail the connection
            UPGRADE + frame(8, b"\x03"),  # a 1-byte close payload
        ],
        "FuzzWebSocketFrames": [bytes([n]) + f for f in WS_FRAMES for n in (255, 1, 7)],
        "FuzzHTTPHead": [bytes([n]) + h.encode() for h in HEADS for n in (255, 1, 5)],
    }
    for harness, inputs in seeds.items():
        folder = os.path.join(HERE, "Corpus", harness)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        for n, data in enumerate(inputs):
            with open(os.path.join(folder, f"seed-{n:03d}"), "wb") as f:
                f.write(data)
        print(f"{harness}: {len(inputs)} seeds")


if __name__ == "__main__":
    main()
