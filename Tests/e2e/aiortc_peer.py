#!/usr/bin/env python3
"""A Dialtone client in Python over aiortc, written from docs/protocol.md alone: it proves the
protocol document is enough to interoperate, and that our media stack talks to a WebRTC
implementation we did not write.

    aiortc_peer.py --server URL --token T (--call USER | --answer) [--tone HZ] [--duration S]
                   [--record OUT.wav] [--video red|green|blue]

--video makes a video call (or answers with video): a solid-colour 640x360 camera at 30 fps;
the frames received are counted and their size and mean colour printed as a `video` event.

Prints one JSON object per line ({"event": ...}); exits 0 after a call that connected and
ended with a hang-up.
"""
import argparse
import asyncio
import fractions
import json
import math
import os
import sys
import time
import uuid
import wave

import numpy
import websockets
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import AudioStreamTrack, MediaStreamError, VideoStreamTrack
from aiortc.sdp import candidate_from_sdp
from av import AudioFrame, VideoFrame


STARTED = None  # when the call started (dial, or the invite's arrival), for timings


def say(event, **fields):
    if STARTED is not None and event in ("ringing", "accepted", "ice-connected", "connected", "first-audio"):
        fields["ms"] = round((time.monotonic() - STARTED) * 1000, 1)
    print(json.dumps({"event": event, **fields}), flush=True)


def start_clock():
    global STARTED
    STARTED = time.monotonic()


class Tone(AudioStreamTrack):
    """A sine tone, 20 ms frames of 48 kHz mono s16."""

    def __init__(self, frequency):
        super().__init__()
        self.frequency = frequency
        self.sent = 0

    async def recv(self):
        samples = 960
        if self.sent == 0:
            self._start = asyncio.get_running_loop().time()
        else:
            wait = self._start + self.sent / 48000 - asyncio.get_running_loop().time()
            if wait > 0:
                await asyncio.sleep(wait)
        t = (numpy.arange(samples) + self.sent) / 48000
        pcm = (numpy.sin(2 * math.pi * self.frequency * t) * 12000).astype(numpy.int16)
        frame = AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = 48000
        frame.pts = self.sent
        frame.time_base = fractions.Fraction(1, 48000)
        self.sent += samples
        return frame


COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}


class SolidCamera(VideoStreamTrack):
    """A 640x360 camera that shows one colour."""

    def __init__(self, colour):
        super().__init__()
        image = numpy.zeros((360, 640, 3), dtype=numpy.uint8)
        image[:, :] = COLOURS[colour]
        self.image = image

    async def recv(self):
        pts, time_base = await self.next_timestamp()
        frame = VideoFrame.from_ndarray(self.image, format="rgb24")
        frame.pts = pts
        frame.time_base = time_base
        return frame


class Peer:
    def __init__(self, args):
        self.args = args
        self.ws = None
        self.next_id = 0
        self.last_seq = 0
        self.unacked = 0
        self.call_id = None
        self.pc = None
        self.remote_ready = False
        self.pending_candidates = []
        self.connected = False
        self.ended = None
        self.pcm = []
        self.video_frames = 0
        self.video_size = (0, 0)
        self.video_colour = None

    # --- signaling (protocol.md sections 4, 5, 7, 8) ---

    async def send(self, message):
        if message.get("type") != "ack":
            self.next_id += 1
            message["id"] = f"py-{self.next_id}"
        await self.ws.send(json.dumps(message))

    async def ack(self):
        if self.unacked:
            self.unacked = 0
            await self.ws.send(json.dumps({"type": "ack", "seq": self.last_seq}))

    async def acker(self):
        while True:
            await asyncio.sleep(0.5)
            await self.ack()

    async def run(self):
        self.ended = asyncio.get_running_loop().create_future()
        url = self.args.server.replace("http://", "ws://").replace("https://", "wss://").rstrip("/") + "/v1/ws"
        async with websockets.connect(url, max_size=65536) as ws:
            self.ws = ws
            await self.send({"type": "hello", "version": 1, "token": self.args.token})
            welcome = json.loads(await ws.recv())
            if welcome.get("type") != "welcome":
                say("error", text=f"no welcome: {welcome}")
                return 1
            say("note", text=f"signed in as {welcome['userId']}/{welcome['deviceId']}")
            acker = asyncio.create_task(self.acker())
            reader = asyncio.create_task(self.read())
            if self.args.call:
                await self.dial(self.args.call)
            else:
                say("note", text="waiting for a call")
            try:
                reason = await asyncio.wait_for(self.ended, 60)
            finally:
                acker.cancel()
                reader.cancel()
                if self.pc:
                    await self.pc.close()
            self.write_recording()
            if self.video_frames:
                say("video", frames=self.video_frames, width=self.video_size[0], height=self.video_size[1],
                    rgb=self.video_colour)
            say("ended", reason=reason)
            return 0 if self.connected and reason == "hangup" else 6

    async def read(self):
        async for text in self.ws:
            message = json.loads(text)
            seq = message.get("seq")
            if seq is not None:
                if seq <= self.last_seq:
                    continue  # a replayed duplicate
                self.last_seq = seq
                self.unacked += 1
                if self.unacked >= 16:
                    await self.ack()
            await self.handle(message)

    async def handle(self, m):
        kind = m.get("type")
        if kind == "error":
            say("error", text=m.get("message"), code=m.get("code"))
        if m.get("callId") not in (None, self.call_id) and kind != "invite":
            return
        if kind == "invite" and self.call_id is None and not self.args.call:
            self.call_id = m["callId"]
            start_clock()
            say("incoming", caller=m["from"]["userId"])
            await self.send({"type": "ringing", "callId": self.call_id})
            await self.answer(m["offer"]["sdp"])
        elif kind == "ringing" and self.args.call:
            say("ringing")
        elif kind == "accept" and self.args.call:
            say("accepted")
            if m.get("answer"):
                await self.set_remote(m["answer"]["sdp"], "answer")
        elif kind == "answer":
            await self.set_remote(m["sdp"], "answer")
        elif kind == "candidate":
            await self.add_candidate(m["candidate"])
        elif kind == "call-ended":
            if not self.ended.done():
                self.ended.set_result(m["reason"])

    # --- media ---

    def make_pc(self):
        # iceServers=[]: aiortc would otherwise ask a public STUN server.
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        if not self.args.silent:
            pc.addTrack(Tone(self.args.tone))
        if self.args.video:
            pc.addTrack(SolidCamera(self.args.video))

        @pc.on("track")
        def on_track(track):
            if track.kind == "audio":
                asyncio.ensure_future(self.record(track))
            elif track.kind == "video":
                asyncio.ensure_future(self.watch(track))

        @pc.on("iceconnectionstatechange")
        async def on_ice_state():
            if pc.iceConnectionState in ("connected", "completed") and not getattr(self, "ice_connected", False):
                self.ice_connected = True
                say("ice-connected")

        @pc.on("connectionstatechange")
        async def on_state():
            say("state", state=pc.connectionState)
            if pc.connectionState == "connected" and not self.connected:
                self.connected = True
                say("connected")
                asyncio.ensure_future(self.hang_up_later())
            elif pc.connectionState == "failed" and not self.ended.done():
                self.ended.set_result("failed")

        self.pc = pc
        return pc

    async def dial(self, callee):
        start_clock()
        self.call_id = str(uuid.uuid4())
        pc = self.make_pc()
        # aiortc does not trickle: the offer carries every candidate once gathering is done.
        await pc.setLocalDescription(await pc.createOffer())
        say("dialing", callee=callee)
        await self.send({"type": "invite", "callId": self.call_id, "to": callee, "video": bool(self.args.video),
                         "offer": {"sdp": pc.localDescription.sdp}})

    async def answer(self, offer_sdp):
        pc = self.make_pc()
        await self.set_remote(offer_sdp, "offer")
        await pc.setLocalDescription(await pc.createAnswer())
        await self.send({"type": "accept", "callId": self.call_id, "answer": {"sdp": pc.localDescription.sdp}})
        say("answered")

    async def set_remote(self, sdp, kind):
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type=kind))
        self.remote_ready = True
        for c in self.pending_candidates:
            await self.add_candidate(c)
        self.pending_candidates = []

    async def add_candidate(self, c):
        # Candidates that arrive before the remote description wait for it (protocol.md 9).
        if not self.remote_ready:
            self.pending_candidates.append(c)
            return
        line = c.get("candidate", "")
        if not line:
            return
        candidate = candidate_from_sdp(line.split(":", 1)[1] if line.startswith("candidate:") else line)
        candidate.sdpMid = c.get("sdpMid")
        candidate.sdpMLineIndex = c.get("sdpMLineIndex")
        if candidate.sdpMid is None:
            # Our peers always send the index; aiortc matches by mid.
            mids = [t.mid for t in self.pc.getTransceivers()]
            index = candidate.sdpMLineIndex or 0
            candidate.sdpMid = mids[index] if index < len(mids) else (mids[0] if mids else "0")
        await self.pc.addIceCandidate(candidate)

    async def record(self, track):
        first = True
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            if first:
                first = False
                say("first-audio")
            pcm = frame.to_ndarray().reshape(-1)
            if frame.layout.name == "stereo":
                pcm = pcm[::2]
            if frame.sample_rate == 48000:
                self.pcm.append(pcm.astype(numpy.int16))

    async def watch(self, track):
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            self.video_frames += 1
            if self.video_frames == 1:
                say("first-video-frame")
            if self.video_frames % 15 == 1:
                image = frame.to_ndarray(format="rgb24")
                self.video_size = (frame.width, frame.height)
                self.video_colour = [int(v) for v in image[::8, ::8].reshape(-1, 3).mean(axis=0)]

    async def hang_up_later(self):
        if self.args.duration <= 0:
            return
        await asyncio.sleep(self.args.duration)
        await self.send({"type": "hangup", "callId": self.call_id})
        if not self.ended.done():
            self.ended.set_result("hangup")

    def write_recording(self):
        if not self.args.record:
            return
        pcm = numpy.concatenate(self.pcm) if self.pcm else numpy.zeros(0, dtype=numpy.int16)
        with wave.open(self.args.record, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(48000)
            w.writeframes(pcm.tobytes())


def main():
    if os.environ.get("AIORTC_DEBUG"):
        import logging
        logging.basicConfig(level=logging.DEBUG)
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--token", required=True)
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--call")
    who.add_argument("--answer", action="store_true")
    parser.add_argument("--tone", type=float, default=700)
    parser.add_argument("--silent", action="store_true", help="send no media at all (ICE and DTLS only)")
    parser.add_argument("--duration", type=float, default=0)
    parser.add_argument("--record")
    parser.add_argument("--video", choices=sorted(COLOURS))
    args = parser.parse_args()
    sys.exit(asyncio.run(Peer(args).run()))


if __name__ == "__main__":
    main()
