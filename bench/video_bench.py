#!/usr/bin/env python3
"""Video calls over a constrained link, Dialtone's CLI against Chromium: `make bench-video`.

Two network namespaces (dtbv-a, dtbv-b) are joined by bench/delay_link.py: a userspace
forwarder between two TUN devices that delays each packet by RTT/2, drops it with the given
probability and, with a cap, serialises each direction at that rate behind a drop-tail queue of
--queue-ms (netem is not in this kernel). dialtone-server runs in B; the caller in A and the
callee in B, so the caller's signaling and all media cross the link.

For each link condition (caps --caps in kbit/s, 0 = uncapped, times losses --losses, at a
fixed --rtt-ms), each round makes one call per stack and camera content, interleaved:

- dialtone  `dialtone call --video P` in A to `dialtone answer --auto --video Q` in B
            (GStreamer webrtcbin; VP8 at the engine's fixed 600 kbit/s target);
- chromium  headless Chromium in A (the server's softphone page, `call=bob&video=1`) to
            headless Chromium in B (`answer=auto&video=1`), with Chromium's fake camera
            (--use-fake-device-for-media-stream --use-fake-ui-for-media-stream) fed a Y4M file
            of the same pictures, rendered by the same GStreamer videotestsrc.

Camera contents (--contents): `solid`: red from the caller, blue from the callee (the e2e
suite's patterns: almost free to encode); `smpte`: colour bars with a moving noise patch
(~0.7-0.9 Mbit/s of VP8 from the CLI); any other videotestsrc pattern; `builtin`: Chromium's
own fake-camera animation (Chromium only). 640x360 at 30 fps throughout.

Each call lasts --duration seconds from the caller's "connected"; the bench then hangs up.
Measured per call, in the same way for both stacks:

- accept -> first frame: on the caller, from the callee's accept arriving (the CLI's `accepted`
  milestone; the page's `connecting` state, set when the accept arrives) to the first decoded
  remote frame (the CLI's `first-video-frame`, taken where frames leave the decoder; the page's
  `first-video-frame`, its first requestVideoFrameCallback on the remote <video>), each on the
  caller's own clock;
- fps: decoded frames per second at each receiver, from the first sample that saw a frame to
  the last sample before the hang-up (samples every 0.1 s: the CLI's `video count` on stdin;
  the page's inbound-rtp `framesDecoded` from RTCPeerConnection.getStats(), reached through
  the page's top-level `call` over the DevTools pipe);
- link kbit/s: IP bytes the link delivered in each direction (audio, video, RTCP,
  retransmissions, padding: everything), from 2 s after "connected" to the hang-up;
- stalls: gaps of >= 0.5 s between two samples that saw new frames (or before the window's
  end), per receiver, and the share of its window they cover;
- CPU: CPU seconds per second of both endpoints together (every process of each), over the
  same window;
- Chromium only: inbound-rtp freezeCount (WebRTC's own definition), the received frame size,
  and the sender's bandwidth estimate (availableOutgoingBitrate), encoder targetBitrate and
  qualityLimitationReason.

fps, kbit/s and stalls pool both directions of every call (the link is symmetric). Medians
over rounds; ratios are Dialtone / Chromium on the same content, from the same run. Logs stay
in /tmp/dialtone-bench-video-*. Needs root. Usage:
    python3 bench/video_bench.py [--bin .build/release] [--rounds 3] [--duration 12]
        [--caps 300,1000,0] [--losses 0,0.02] [--rtt-ms 50] [--contents solid,smpte] [--json out.json]
"""
import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
import harness  # noqa: E402  (the Chromium DevTools-pipe driver)
from chromium_page import BenchError, Browser, Folder  # noqa: E402
from netns_pair import CLIEvents, NamespacePair, run_main, stop, token  # noqa: E402

NS_A, NS_B = "dtbv-a", "dtbv-b"
ADDR_A, ADDR_B = "10.81.0.1", "10.81.0.2"
PORT = 18950
SECRET = "bench-video-secret-0123456789abcdef"
SERVER = f"http://{ADDR_B}:{PORT}"
PAIR = NamespacePair(NS_A, ADDR_A, NS_B, ADDR_B, PORT)
SAMPLE_S = 0.1     # frame-count sampling period
STALL_S = 0.5      # no new frame for this long: a stall
WARMUP_S = 2.0     # link bytes are counted from connected + this
# A content's camera patterns (caller, callee); any other name is one videotestsrc pattern for both.
CLI_PATTERNS = {"solid": ("red", "blue")}
# Solid colours in Y4M's limited-range BT.601 (the fallback when GStreamer's Python bindings are missing).
SOLID_YUV = {"red": (81, 90, 240), "green": (145, 54, 34), "blue": (41, 240, 110), "white": (235, 128, 128),
             "black": (16, 128, 128)}


def write_y4m(pattern, path, seconds=2):
    """`seconds` of 640x360 at 30 fps of `pattern`, for Chromium's file camera: rendered by the
    same GStreamer videotestsrc the CLI's camera uses (Debian's python3-gi), or, for a solid
    colour without it, written here."""
    script = ("import sys, gi; gi.require_version('Gst', '1.0'); from gi.repository import Gst; Gst.init(None); "
              "p = Gst.parse_launch(sys.argv[1]); p.set_state(Gst.State.PLAYING); "
              "m = p.get_bus().timed_pop_filtered(60 * Gst.SECOND, Gst.MessageType.EOS | Gst.MessageType.ERROR); "
              "p.set_state(Gst.State.NULL); sys.exit(0 if m and m.type == Gst.MessageType.EOS else 1)")
    pipeline = (f"videotestsrc pattern={pattern} num-buffers={30 * seconds} ! "
                f"video/x-raw,format=I420,width=640,height=360,framerate=30/1 ! y4menc ! filesink location={path}")
    for python in ("/usr/bin/python3", sys.executable):
        if os.path.exists(python):
            if subprocess.run([python, "-c", script, pipeline], capture_output=True).returncode == 0:
                return path
    if pattern not in SOLID_YUV:
        raise BenchError(f"cannot render {pattern} for Chromium (needs python3-gi and GStreamer)")
    y, u, v = SOLID_YUV[pattern]
    frame = b"FRAME\n" + bytes([y]) * (640 * 360) + bytes([u]) * (320 * 180) + bytes([v]) * (320 * 180)
    with open(path, "wb") as f:
        f.write(b"YUV4MPEG2 W640 H360 F30:1 Ip A1:1 C420jpeg\n")
        for _ in range(30 * seconds):
            f.write(frame)
    return path


def kbps(before, after, way):
    elapsed = after["t"] - before["t"]
    if elapsed <= 0:
        return None
    return (after[way]["bytes"] - before[way]["bytes"]) * 8 / elapsed / 1000


TICKS = os.sysconf("SC_CLK_TCK")


def group_cpu(leaders):
    """CPU seconds (utime + stime) of every live process in these process groups."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) in leaders:  # pgrp
            total += int(fields[11]) + int(fields[12])
    return total / TICKS


class Window:
    """The measuring window: link counters and the endpoints' CPU at its start and end."""

    def __init__(self, link, leaders):
        self.link, self.leaders = link, set(leaders)

    async def open(self):
        self.before, self.cpu0, self.t0 = await self.link.stats(), group_cpu(self.leaders), time.monotonic()

    async def close(self):
        self.after, self.cpu1, self.t1 = await self.link.stats(), group_cpu(self.leaders), time.monotonic()
        self.cpu = (self.cpu1 - self.cpu0) / (self.t1 - self.t0)
        self.load = os.getloadavg()[0]


def between(start, end):
    """ms from one milestone to another (None if either is missing)."""
    return end - start if start is not None and end is not None else None


def link_delta(before, after, way):
    """The link's counters over the window: packets and bytes in, delivered, lost, queue-dropped,
    and the longest queueing delay within it."""
    delta = {k: v - before[way][k] for k, v in after[way].items() if not k.startswith("queue_ms")}
    delta["queue_ms_max"] = after[way]["queue_ms_max_recent"]
    return delta


def frame_metrics(samples, end):
    """fps and stalls of one receiver from (time, frames) samples (seconds), up to `end`."""
    samples = [(t, n) for t, n in samples if t <= end]
    seen = [(t, n) for t, n in samples if n > 0]
    if not seen:
        return {"fps": 0.0, "stalls": None, "stalled": None, "frames": 0}
    (t0, n0), (t1, n1) = seen[0], seen[-1]
    window = end - t0
    fps = (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0
    stalls, stalled = 0, 0.0
    last_t, last_n = t0, n0
    for t, n in seen[1:]:
        if n > last_n:
            if t - last_t >= STALL_S:
                stalls += 1
                stalled += t - last_t
            last_t, last_n = t, n
    if end - last_t >= STALL_S:
        stalls += 1
        stalled += end - last_t
    return {"fps": fps, "stalls": stalls, "stalled": stalled / window if window > 0 else None, "frames": n1,
            "window_s": window}


# ---- Dialtone: CLI softphones ----

class CLI(CLIEvents):
    """`dialtone call|answer --json` in a namespace: events with their arrival time, and frame
    counts sampled with `video count` on stdin."""

    def __init__(self, name, ns, args, scratch):
        super().__init__(name, ns, args, scratch)   # events: (monotonic, event)
        self.counts = []   # (monotonic, frames)

    def on_event(self, now, event):
        if event.get("event") == "video-count":
            self.counts.append((now, event.get("frames", 0)))

    def ask_count(self):
        if self.proc.returncode is None and not self.proc.stdin.is_closing():
            try:
                self.proc.stdin.write(b"video count\n")
            except (BrokenPipeError, ConnectionResetError):
                pass

    def mark(self, name):
        e = self.find(name)
        return e[1].get("ms") if e else None


async def sample_clis(clis, until):
    while time.monotonic() < until:
        for cli in clis:
            cli.ask_count()
        await asyncio.sleep(SAMPLE_S)


async def dialtone_call(args, content, tokens, scratch, link):
    caller_video, callee_video = CLI_PATTERNS.get(content, (content, content))
    cli = [os.path.join(args.bin, "dialtone")]
    safety = str(args.duration + 60)  # the bench hangs up first; this bounds a stuck run
    callee = CLI("bob", NS_B, cli + ["answer", "--server", SERVER, "--token", tokens["bob"], "--auto",
                                     "--video", callee_video, "--duration", safety], scratch)
    caller = CLI("alice", NS_A, cli + ["call", "--server", SERVER, "--token", tokens["alice"], "--to", "bob",
                                       "--video", caller_video, "--duration", safety], scratch)
    try:
        await callee.start()
        await callee.wait_for("note", 30, text="waiting for a call")
        await caller.start()
        connected_at, _ = await caller.wait_for("connected", 30)
        end = connected_at + args.duration
        sampler = asyncio.create_task(sample_clis([caller, callee], end + 0.05))
        await asyncio.sleep(max(0, connected_at + WARMUP_S - time.monotonic()))
        window = Window(link, [caller.proc.pid, callee.proc.pid])
        await window.open()
        await sampler
        await window.close()
        before, after, end = window.before, window.after, window.t1
        await asyncio.sleep(0.2)  # the last counts' replies
        # Hang up (SIGINT: the CLI hangs up gracefully and prints its `video` summary).
        caller.proc.send_signal(signal.SIGINT)
        for peer in (caller, callee):
            try:
                await peer.wait_for("ended", 10)
            except BenchError:
                pass
        result = {"stack": "dialtone", "connected": True, "cpu": window.cpu, "load": window.load}
        result["accept_to_frame_ms"] = between(caller.mark("accepted"), caller.mark("first-video-frame"))
        result["connected_to_frame_ms"] = {
            "caller": between(caller.mark("connected"), caller.mark("first-video-frame")),
            "callee": between(callee.mark("connected"), callee.mark("first-video-frame"))}
        result["directions"] = {}
        for way, receiver in (("b_to_a", caller), ("a_to_b", callee)):
            d = frame_metrics(receiver.counts, end)
            d["link_kbps"] = kbps(before, after, way)
            video = receiver.find("video")
            if video:
                d["size"] = f"{video[1].get('width')}x{video[1].get('height')}"
                d["frames_total"] = video[1].get("frames")
            d["link"] = link_delta(before, after, way)
            result["directions"][way] = d
        return result
    finally:
        await stop(caller.proc, grace=3)
        await stop(callee.proc, grace=3)


# ---- Chromium: the server's softphone page in headless Chromium ----

SAMPLER_JS = r"""
(() => {
  if (window.__bv) return "already";
  const bv = window.__bv = { inbound: [], audio: [], outbound: [], pair: [], error: null };
  let busy = false;
  setInterval(async () => {
    const c = typeof call !== "undefined" ? call : null;   // the page's top-level `let call`
    if (busy || !c || !c.pc) return;
    busy = true;
    try {
      const report = await c.pc.getStats();
      const t = performance.now();
      report.forEach((s) => {
        if (s.type === "inbound-rtp" && s.kind === "video") {
          bv.inbound.push({ t, framesDecoded: s.framesDecoded || 0, bytesReceived: s.bytesReceived || 0,
            freezeCount: s.freezeCount || 0, totalFreezesDuration: s.totalFreezesDuration || 0,
            framesPerSecond: s.framesPerSecond || 0, frameWidth: s.frameWidth || 0, frameHeight: s.frameHeight || 0,
            packetsLost: s.packetsLost || 0, nackCount: s.nackCount || 0, pliCount: s.pliCount || 0,
            framesDropped: s.framesDropped || 0, keyFramesDecoded: s.keyFramesDecoded || 0 });
        } else if (s.type === "inbound-rtp" && s.kind === "audio") {
          bv.audio.push({ t, bytesReceived: s.bytesReceived || 0 });
        } else if (s.type === "outbound-rtp" && s.kind === "video") {
          bv.outbound.push({ t, bytesSent: s.bytesSent || 0, targetBitrate: s.targetBitrate || 0,
            framesPerSecond: s.framesPerSecond || 0, frameWidth: s.frameWidth || 0, frameHeight: s.frameHeight || 0,
            qualityLimitationReason: s.qualityLimitationReason || "",
            retransmittedBytesSent: s.retransmittedBytesSent || 0 });
        } else if (s.type === "candidate-pair" && s.nominated && s.state === "succeeded") {
          bv.pair.push({ t, availableOutgoingBitrate: s.availableOutgoingBitrate || 0,
            currentRoundTripTime: s.currentRoundTripTime || 0 });
        }
      });
    } catch (e) { bv.error = String(e); }
    busy = false;
  }, %d);
  return "ok";
})()
""" % int(SAMPLE_S * 1000)

def browser_direction(bv, end_page_ms):
    inbound = [s for s in bv.get("inbound", []) if s["t"] <= end_page_ms]
    d = frame_metrics([(s["t"] / 1000, s["framesDecoded"]) for s in inbound], end_page_ms / 1000)
    seen = [s for s in inbound if s["framesDecoded"] > 0]
    if seen:
        first, last = seen[0], seen[-1]
        d["freeze_count"] = last["freezeCount"] - first["freezeCount"]
        d["freeze_s"] = last["totalFreezesDuration"] - first["totalFreezesDuration"]
        d["size"] = f"{last['frameWidth']}x{last['frameHeight']}"
        d["frames_total"] = last["framesDecoded"]
        span = (last["t"] - first["t"]) / 1000
        d["video_rtp_kbps"] = (last["bytesReceived"] - first["bytesReceived"]) * 8 / span / 1000 if span > 0 else None
        audio = [s for s in bv.get("audio", []) if first["t"] <= s["t"] <= last["t"]]
        if len(audio) > 1 and audio[-1]["t"] > audio[0]["t"]:
            d["audio_rtp_kbps"] = ((audio[-1]["bytesReceived"] - audio[0]["bytesReceived"]) * 8
                                   / (audio[-1]["t"] - audio[0]["t"]))
        d["nack"] = last["nackCount"]
        d["pli"] = last["pliCount"]
        d["packets_lost"] = last["packetsLost"]
    return d


def sender_summary(bv, end_page_ms):
    out = [s for s in bv.get("outbound", []) if s["t"] <= end_page_ms]
    pair = [s for s in bv.get("pair", []) if s["t"] <= end_page_ms and s["availableOutgoingBitrate"]]
    if not out:
        return {}
    tail = out[len(out) // 2:]  # the second half of the call: after the estimate settled
    reasons = {}
    for s in tail:
        reasons[s["qualityLimitationReason"]] = reasons.get(s["qualityLimitationReason"], 0) + 1
    return {"target_kbps": statistics.median(s["targetBitrate"] for s in tail) / 1000,
            "sent_size": f"{tail[-1]['frameWidth']}x{tail[-1]['frameHeight']}",
            "sent_fps": statistics.median(s["framesPerSecond"] for s in tail),
            "limitation": max(reasons, key=reasons.get),
            "available_kbps": statistics.median(s["availableOutgoingBitrate"] for s in pair[len(pair) // 2:]) / 1000
            if pair else None}


async def chromium_call(args, content, tokens, scratch, link):
    caller_video, callee_video = CLI_PATTERNS.get(content, (content, content))
    files = (None, None) if content == "builtin" else (args.y4m[caller_video], args.y4m[callee_video])
    callee_dir = Folder(os.path.join(scratch, "bob-chromium"))
    caller_dir = Folder(os.path.join(scratch, "alice-chromium"))
    callee = Browser(callee_dir, f"{SERVER}/#token={tokens['bob-browser']}&answer=auto&video=1&tone=330", NS_B,
                     origin=SERVER, camera=files[1])
    caller = Browser(caller_dir, f"{SERVER}/#token={tokens['alice-browser']}&call=bob&video=1&tone=523", NS_A,
                     origin=SERVER, camera=files[0])
    try:
        await callee.start()
        await callee.wait_state({"idle"}, 30)
        await callee.value(SAMPLER_JS)
        await caller.start()
        await caller.wait_state({"idle", "calling", "ringing", "connecting", "connected"}, 30)  # the page is loaded
        await caller.value(SAMPLER_JS)
        connected_at, _ = await caller.wait_state({"connected"}, 30)
        await asyncio.sleep(max(0, connected_at + WARMUP_S - time.monotonic()))
        window = Window(link, [caller.process.proc.pid, callee.process.proc.pid])
        await window.open()
        await asyncio.sleep(max(0, connected_at + args.duration - time.monotonic()))
        await window.close()
        before, after = window.before, window.after
        # Everything up to now, then hang up.
        caller_bv = await caller.evaluate_json("JSON.stringify(Object.assign({now: performance.now()}, window.__bv))")
        callee_bv = await callee.evaluate_json("JSON.stringify(Object.assign({now: performance.now()}, window.__bv))")
        caller_marks, callee_marks = await caller.timeline(), await callee.timeline()
        await caller.value("hangUp(), 'ok'")
        result = {"stack": "chromium", "connected": True, "cpu": window.cpu, "load": window.load}
        result["accept_to_frame_ms"] = between(caller_marks.get('state "connecting"'),
                                               caller_marks.get("first-video-frame"))
        result["connected_to_frame_ms"] = {
            side: between(marks.get('connection "connected"'), marks.get("first-video-frame"))
            for side, marks in (("caller", caller_marks), ("callee", callee_marks))}
        result["directions"] = {}
        for way, receiver, sender in (("b_to_a", caller_bv, callee_bv), ("a_to_b", callee_bv, caller_bv)):
            d = browser_direction(receiver, receiver["now"])
            d["link_kbps"] = kbps(before, after, way)
            d["sender"] = sender_summary(sender, sender["now"])
            d["link"] = link_delta(before, after, way)
            if receiver.get("error"):
                d["stats_error"] = receiver["error"]
            result["directions"][way] = d
        await asyncio.sleep(0.3)
        return result
    finally:
        await caller.close()  # keeps chromium.log
        await callee.close()


# ---- Summary ----

def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec, unit=""):
    return "–" if value is None else f"{value:{spec}}{unit}"


def summarise(calls):
    ok = [c for c in calls if c.get("connected")]
    dirs = [d for c in ok for d in c["directions"].values()]
    s = {"calls": f"{len(ok)}/{len(calls)}",
         "ttff": med([c.get("accept_to_frame_ms") for c in ok]),
         "fps": med([d.get("fps") for d in dirs]),
         "kbps": med([d.get("link_kbps") for d in dirs]),
         "stalls": med([d.get("stalls") for d in dirs]),
         "stalled": med([d.get("stalled") for d in dirs]),
         "freezes": med([d.get("freeze_count") for d in dirs]),
         "cpu": med([c.get("cpu") for c in ok]),
         "no_video": sum(1 for d in dirs if not d.get("frames")),
         "receivers": len(dirs),
         "sizes": sorted({d["size"] for d in dirs if d.get("size")})}
    senders = [d["sender"] for d in dirs if d.get("sender")]
    s["target"] = med([x.get("target_kbps") for x in senders])
    s["bwe"] = med([x.get("available_kbps") for x in senders])
    limits = [x.get("limitation") for x in senders if x.get("limitation")]
    s["limitation"] = max(set(limits), key=limits.count) if limits else None
    return s


def cap_text(cap):
    return f"{cap:g} kbit/s" if cap else "uncapped"


def row(cap, loss, label, s):
    extra = []
    if s["target"] is not None:
        extra.append(f"BWE {fmt(s['bwe'], '.0f')}, encoder target {s['target']:.0f} kbit/s, "
                     f"limited by {s['limitation']}")
    if s["no_video"]:
        extra.append(f"{s['no_video']}/{s['receivers']} receivers got no frame")
    return (f"| {cap_text(cap)} | {loss * 100:g}% | {label} | {s['calls']} | {fmt(s['ttff'], '.0f', ' ms')} | "
            f"{fmt(s['fps'], '.1f')} | {fmt(s['kbps'], '.0f')} | {fmt(s['stalls'], 'g')} | "
            f"{fmt(None if s['stalled'] is None else s['stalled'] * 100, '.1f', ' %')} | "
            f"{fmt(s['freezes'], 'g')} | {fmt(None if s['cpu'] is None else s['cpu'] * 100, '.0f', ' %')} | "
            f"{', '.join(s['sizes']) or '–'} | {'; '.join(extra)} |")


def ratio(a, b):
    return "–" if a is None or b in (None, 0) else f"{a / b:.2f}×"


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=12, help="seconds from connected to the hang-up")
    parser.add_argument("--caps", default="300,1000,0", help="kbit/s per direction, 0: uncapped")
    parser.add_argument("--losses", default="0,0.02")
    parser.add_argument("--rtt-ms", type=float, default=50)
    parser.add_argument("--queue-ms", type=float, default=100, help="the capped link's drop-tail queue")
    parser.add_argument("--stacks", default="dialtone,chromium")
    parser.add_argument("--contents", default="solid,smpte",
                        help="what the cameras show: solid (red from the caller, blue from the callee), a "
                             "videotestsrc pattern (both sides), or builtin (Chromium's own fake camera; "
                             "Chromium only)")
    parser.add_argument("--json", help="write every call's figures here")
    parser.add_argument("--call-timeout", type=float, default=0, help="per call (default: duration + 90 s)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-video needs root (network namespaces and TUN devices)")
    if args.rounds < 1 or args.duration <= WARMUP_S + 1:
        sys.exit(f"--rounds must be >= 1 and --duration > {WARMUP_S + 1:g} s")
    args.bin = os.path.abspath(args.bin)
    stacks, contents = args.stacks.split(","), args.contents.split(",")
    if "chromium" in stacks and not shutil.which("chromium"):
        sys.exit("chromium is not installed")
    cases = [(stack, content) for content in contents for stack in stacks
             if not (stack == "dialtone" and content == "builtin")]
    call_timeout = args.call_timeout or args.duration + 90

    work = tempfile.mkdtemp(prefix="dialtone-bench-video-")
    log = open(os.path.join(work, "bench.log"), "wb")
    args.y4m = {}
    if "chromium" in stacks:
        for content in contents:
            if content != "builtin":
                for pattern in set(CLI_PATTERNS.get(content, (content, content))):
                    args.y4m[pattern] = write_y4m(pattern, os.path.join(work, f"{pattern}.y4m"))
    tokens = {"alice": token(args.bin, "alice", "cli", SECRET), "bob": token(args.bin, "bob", "cli", SECRET),
              "alice-browser": token(args.bin, "alice", "browser", SECRET),
              "bob-browser": token(args.bin, "bob", "browser", SECRET)}
    PAIR.make()
    server = await PAIR.start_server(args.bin, os.path.join(work, "server-data"), SECRET, log)
    results = []
    started = time.monotonic()
    try:
        await PAIR.wait_listening(server)
        print(f"# bench-video on {platform.node()}: {os.cpu_count()} cores, {platform.platform()}, "
              f"load {os.getloadavg()[0]:.2f}")
        print(f"# {args.rounds} rounds per cell, {args.duration:g} s calls, RTT {args.rtt_ms:g} ms, "
              f"queue {args.queue_ms:g} ms; binaries {args.bin}; logs {work}")
        print("| cap | loss | stack / camera | calls | accept → 1st frame | fps | link kbit/s | stalls | stalled | "
              "freezeCount | CPU | received size | sender / notes |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
        cells = []
        for cap in [float(x) for x in args.caps.split(",")]:
            for loss in [float(x) for x in args.losses.split(",")]:
                per_case = {case: [] for case in cases}
                condition = ["--rtt-ms", str(args.rtt_ms), "--loss", str(loss), "--rate-kbps", str(cap),
                             "--queue-ms", str(args.queue_ms)]
                async with PAIR.link(condition, log) as link:
                    await asyncio.sleep(0.3)
                    for n in range(args.rounds):
                        for stack, content in cases:
                            scratch = os.path.join(work, f"{int(cap)}-{loss:g}-{stack}-{content}-{n}")
                            os.makedirs(scratch, exist_ok=True)
                            run = dialtone_call if stack == "dialtone" else chromium_call
                            try:
                                result = await asyncio.wait_for(run(args, content, tokens, scratch, link),
                                                                call_timeout)
                            except (BenchError, harness.Failure, asyncio.TimeoutError, OSError, ValueError) as error:
                                print(f"# {stack}/{content} cap {cap:g} loss {loss:g} round {n}: failed "
                                      f"({error or 'timed out'}); logs in {scratch}", flush=True)
                                result = {"connected": False, "error": str(error) or "timed out"}
                            result.update(stack=stack, content=content, cap_kbps=cap, loss=loss, round=n)
                            per_case[(stack, content)].append(result)
                            results.append(result)
                summaries = {case: summarise(calls) for case, calls in per_case.items()}
                for (stack, content), summary in summaries.items():
                    print(row(cap, loss, f"{stack} / {content}", summary), flush=True)
                cells.append((cap, loss, summaries))
        paired = [c for c in contents if ("dialtone", c) in cases and ("chromium", c) in cases]
        if paired:
            print("\n# Dialtone ÷ Chromium, same camera content (medians of this run)")
            print("| cap | loss | camera | accept → 1st frame | fps | link kbit/s | stalls | stalled | CPU |")
            print("|---|---|---|---|---|---|---|---|---|")
            for cap, loss, s in cells:
                for content in paired:
                    d, c = s[("dialtone", content)], s[("chromium", content)]
                    print(f"| {cap_text(cap)} | {loss * 100:g}% | {content} | {ratio(d['ttff'], c['ttff'])} | "
                          f"{ratio(d['fps'], c['fps'])} | {ratio(d['kbps'], c['kbps'])} | "
                          f"{ratio(d['stalls'], c['stalls'])} | {ratio(d['stalled'], c['stalled'])} | "
                          f"{ratio(d['cpu'], c['cpu'])} |")
        print(f"\n# {len(results)} calls in {(time.monotonic() - started) / 60:.1f} min; "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        await stop(server, grace=2)
        for path in args.y4m.values():
            os.remove(path)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"machine": f"{platform.node()} {os.cpu_count()} cores {platform.platform()}",
                           "args": {k: v for k, v in vars(args).items() if k != "y4m"}, "calls": results}, f, indent=1)
            print(f"# wrote {args.json}")


if __name__ == "__main__":
    run_main(main, PAIR.remove)
