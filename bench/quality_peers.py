"""The two kinds of peer bench/quality_bench.py puts on each side of a call, both sending a WAV
file of speech and recording what they receive.

- `CLIPeer`: `dialtone call|answer --audio SENT --record OUT --json` in a namespace (GStreamer
  webrtcbin). Its events are kept with the wall time they were read. Its recording is written
  when it exits, as it decoded the audio (not against a clock).
- `PagePeer`: headless Chromium on the server's own softphone page at `/` (bench/chromium_page.py),
  its microphone Chromium's fake capture device playing the same WAV file once from each
  getUserMedia (`--use-file-for-fake-audio-capture=SENT%noloop`). Before the page's own script
  runs, the bench adds one script through the DevTools protocol
  (Page.addScriptToEvaluateOnNewDocument; the product page is not changed):
  1. getUserMedia's audio constraints get echoCancellation, noiseSuppression and
     autoGainControl false, so the file reaches the encoder as the CLI's does (with them on,
     Chromium's audio processing alone takes a TTS file from PESQ 4.6 to about 3.0 before any
     network, see docs/benchmarks.md); `--browser-apm` keeps them;
  2. every RTCPeerConnection the page makes is remembered, and each remote audio track is fed
     through WebAudio (a MediaStreamAudioSourceNode into an AudioWorklet at 48 kHz) into one
     recording. It starts when the first remote track unmutes (its first packet), as the CLI's
     does with its first decoded audio, and from then on it runs against the AudioContext's
     clock: what NetEQ played, concealment and silence included.
  The recording comes back over the DevTools pipe as base64 PCM; `stats()` reads the
  connection's inbound audio figures and its selected candidate pair.
"""
import asyncio
import base64
import json
import os
import signal
import time
import wave

from chromium_page import BenchError, Browser, Folder, harness, kill_group
from netns_pair import CLIEvents

PAGE_SCRIPT = r"""
(() => {
  const RAW = %(raw)s;
  const q = window.__quality = { pcs: [], started: null, chunks: [], frames: 0, error: null, ctx: null,
                                 node: null, ready: null, pcm: null, tracks: 0 };
  const md = navigator.mediaDevices;
  if (RAW && md && md.getUserMedia) {
    const gum = md.getUserMedia.bind(md);
    md.getUserMedia = (c) => {
      if (c && c.audio) {
        const audio = Object.assign(typeof c.audio === "object" ? Object.assign({}, c.audio) : {},
                                    { echoCancellation: false, noiseSuppression: false, autoGainControl: false });
        c = Object.assign({}, c, { audio });
      }
      return gum(c);
    };
  }
  const WORKLET = `class QualityTap extends AudioWorkletProcessor {
    constructor() { super(); this.buffer = new Float32Array(4800); this.n = 0; }
    process(inputs) {
      const channel = inputs[0] && inputs[0][0];
      const frames = channel ? channel.length : 128;
      for (let i = 0; i < frames; i++) {
        this.buffer[this.n++] = channel ? channel[i] : 0;
        if (this.n === this.buffer.length) {
          this.port.postMessage(this.buffer, [this.buffer.buffer]);
          this.buffer = new Float32Array(4800);
          this.n = 0;
        }
      }
      return true;
    }
  }
  registerProcessor("quality-tap", QualityTap);`;
  function node() {
    if (!q.ready) q.ready = (async () => {
      const ctx = q.ctx = new AudioContext({ sampleRate: 48000 });
      await ctx.audioWorklet.addModule(URL.createObjectURL(new Blob([WORKLET], { type: "text/javascript" })));
      const tap = new AudioWorkletNode(ctx, "quality-tap", { channelCount: 1, channelCountMode: "explicit" });
      tap.port.onmessage = (e) => { if (q.started !== null) { q.chunks.push(e.data); q.frames += e.data.length; } };
      tap.connect(ctx.destination);
      if (ctx.state !== "running") await ctx.resume();
      return q.node = tap;
    })();
    return q.ready;
  }
  async function tap(track) {
    try {
      const sink = await node();
      q.ctx.createMediaStreamSource(new MediaStream([track])).connect(sink);
      q.tracks++;
      const start = () => { if (q.started === null) q.started = performance.timeOrigin + performance.now(); };
      if (!track.muted) start(); else track.addEventListener("unmute", start, { once: true });
    } catch (e) { q.error = String(e); }
  }
  const Native = window.RTCPeerConnection;
  window.RTCPeerConnection = class extends Native {
    constructor(...args) {
      super(...args);
      q.pcs.push(this);
      this.addEventListener("track", (e) => { if (e.track.kind === "audio") tap(e.track); });
    }
  };
  q.seal = () => {
    const pcm = new Int16Array(q.frames);
    let at = 0;
    for (const chunk of q.chunks) {
      for (let i = 0; i < chunk.length; i++) pcm[at + i] = Math.max(-32768, Math.min(32767, Math.round(chunk[i] * 32768)));
      at += chunk.length;
    }
    q.pcm = pcm;
    q.chunks = [];
    return pcm.length;
  };
  q.slice = (from, count) => {
    const bytes = new Uint8Array(q.pcm.buffer, from * 2, Math.min(count, q.pcm.length - from) * 2);
    let text = "";
    for (let i = 0; i < bytes.length; i += 8192) text += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192));
    return btoa(text);
  };
  q.stats = async () => {
    const out = [];
    for (const pc of q.pcs) {
      const report = await pc.getStats();
      const entry = { connection: pc.connectionState, inbound: null, outbound: null, pair: null, codec: null };
      const byId = new Map();
      report.forEach((s) => byId.set(s.id, s));
      report.forEach((s) => {
        if (s.type === "inbound-rtp" && s.kind === "audio") entry.inbound = s;
        if (s.type === "outbound-rtp" && s.kind === "audio") entry.outbound = s;
      });
      report.forEach((s) => {
        if (s.type !== "transport" || !s.selectedCandidatePairId) return;
        const pair = byId.get(s.selectedCandidatePairId);
        if (!pair) return;
        const local = byId.get(pair.localCandidateId) || {}, remote = byId.get(pair.remoteCandidateId) || {};
        entry.pair = { local: local.candidateType, localProtocol: local.protocol, remote: remote.candidateType,
                       remoteProtocol: remote.protocol, rtt: pair.currentRoundTripTime };
      });
      if (entry.inbound && entry.inbound.codecId) {
        const codec = byId.get(entry.inbound.codecId) || {};
        entry.codec = { mimeType: codec.mimeType, sdpFmtpLine: codec.sdpFmtpLine };
      }
      out.push(entry);
    }
    return JSON.stringify(out);
  };
})();
"""

INBOUND_FIELDS = ("packetsReceived", "packetsLost", "packetsDiscarded", "jitter", "jitterBufferDelay",
                  "jitterBufferTargetDelay", "jitterBufferEmittedCount", "totalSamplesReceived",
                  "concealedSamples", "silentConcealedSamples", "concealmentEvents",
                  "insertedSamplesForDeceleration", "removedSamplesForAcceleration", "fecPacketsReceived",
                  "fecPacketsDiscarded", "totalSamplesDuration")


def write_wav(path, pcm_bytes, rate=48000):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm_bytes)


class CLIPeer(CLIEvents):
    """`dialtone call|answer --json` in a namespace; `events` are (wall time, event)."""

    kind = "cli"
    clock = time.time

    def __init__(self, name, ns, args, scratch):
        super().__init__(name, ns, args, scratch)
        self.recording = os.path.join(scratch, f"{name}-received.wav")

    async def start(self):
        return await super().start(["--record", self.recording])

    async def ready(self, timeout=30):
        await self.wait_for("note", timeout, text="waiting for a call")

    async def connected(self, timeout):
        return (await self.wait_for("connected", timeout))[0]

    async def hang_up(self):
        if self.proc and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)

    async def finish(self, timeout=20):
        """Waits for the process to end (it writes its recording as it exits); its summary."""
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        await self.stop()
        ended = self.find("ended")
        stats = (ended[1].get("stats") or {}) if ended else {}
        return {"recording": self.recording if os.path.exists(self.recording) else None,
                "ended": ended[1].get("reason") if ended else None,
                "status": ended[1].get("status") if ended else self.proc.returncode,
                "pair": {"local": stats.get("localCandidateType"), "remote": stats.get("remoteCandidateType")},
                "stats": stats, "quality": (ended[1].get("quality") or {}) if ended else {}}

    def timeline(self):
        """(wall time, event name or state) of what a switch analysis wants to see."""
        return [(t, e.get("event") if e.get("event") != "note" else "note: " + str(e.get("text"))[:80])
                for t, e in self.events]

    async def stop(self):
        if self.proc is None:
            return
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(self.proc.wait(), 5)
            except asyncio.TimeoutError:
                pass
        kill_group(self.proc.pid)
        if self.reader:
            try:
                await asyncio.wait_for(self.reader, 5)
            except asyncio.TimeoutError:
                self.reader.cancel()


class PagePeer:
    """The server's page in headless Chromium (see the module docstring)."""

    kind = "page"

    def __init__(self, name, ns, url, origin, microphone, scratch, raw_audio=True):
        self.name, self.ns, self.url, self.scratch = name, ns, url, scratch
        self.browser = Browser(Folder(os.path.join(scratch, name)), "about:blank", ns, origin=origin,
                               microphone=microphone)
        self.raw_audio = raw_audio
        self.recording = os.path.join(scratch, f"{name}-received.wav")
        self.states = []   # (wall time, state) as polled
        self.info = {}

    async def start(self):
        b = self.browser
        await b.start()
        await b.command("Page.enable", session=b.session)
        added = await b.command("Page.addScriptToEvaluateOnNewDocument",
                                {"source": PAGE_SCRIPT % {"raw": "true" if self.raw_audio else "false"}},
                                session=b.session)
        if "identifier" not in added:
            raise BenchError(f"{self.name}: the page script was not added ({added})")
        await b.command("Page.navigate", {"url": self.url}, session=b.session)
        return self

    async def state(self):
        st = await self.browser.state()
        value = st.get("state") if st else None
        if not self.states or self.states[-1][1] != value:
            self.states.append((time.time(), value))
        return value

    async def wait_state(self, wanted, timeout, poll=0.05):
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = await self.state()
            except (BenchError, ValueError):
                value = None   # the page is still loading
            if value in wanted:
                return time.time()
            if time.monotonic() > deadline:
                raise BenchError(f"{self.name}: page state {value}, not {sorted(wanted)}, after {timeout:.0f} s")
            await asyncio.sleep(poll)

    async def ready(self, timeout=30):
        await self.wait_state({"idle"}, timeout)

    async def connected(self, timeout):
        return await self.wait_state({"connected"}, timeout)

    async def watch(self, until, poll=0.1):
        """Polls the page's state until `until` (wall time), for a timeline."""
        while time.time() < until and self.browser.to_browser is not None:
            try:
                await self.state()
            except (BenchError, harness.Failure, ValueError, OSError):
                pass
            await asyncio.sleep(poll)

    async def collect(self):
        """Takes the recording and the connection's figures off the page (before hanging up)."""
        b = self.browser
        try:
            self.info["stats"] = json.loads(await b.value("window.__quality.stats()", timeout=10) or "[]")
        except (BenchError, ValueError) as error:
            self.info["stats_error"] = str(error)
        q = await b.evaluate_json("JSON.stringify({started: __quality.started, frames: __quality.frames, "
                                  "error: __quality.error, tracks: __quality.tracks, "
                                  "context: __quality.ctx && __quality.ctx.state})")
        self.info["recorder"] = q
        frames = await b.value("__quality.seal()", timeout=30)
        pcm = bytearray()
        step = 240000
        for start in range(0, frames or 0, step):
            pcm += base64.b64decode(await b.value(f"__quality.slice({start}, {step})", timeout=30))
        if pcm:
            write_wav(self.recording, bytes(pcm))

    async def hang_up(self):
        await self.browser.try_value("hangUp(), 'ok'")

    async def finish(self, timeout=0):
        await self.browser.save_log()
        await self.browser.close()
        stats = self.info.get("stats") or []
        current = next((s for s in reversed(stats) if s.get("pair")), stats[-1] if stats else {})
        inbound = current.get("inbound") or {}
        pair = current.get("pair") or {}
        return {"recording": self.recording if os.path.exists(self.recording) else None,
                "pair": {"local": pair.get("local"), "remote": pair.get("remote"),
                         "protocol": pair.get("localProtocol")},
                "connections": len(stats), "recorder": self.info.get("recorder"),
                "codec": current.get("codec"),
                "stats": {k: inbound.get(k) for k in INBOUND_FIELDS if k in inbound},
                "outbound": {k: (current.get("outbound") or {}).get(k) for k in
                             ("packetsSent", "bytesSent", "targetBitrate", "retransmittedPacketsSent")},
                "error": self.info.get("stats_error")}

    def timeline(self):
        return [(t, f"state {s}") for t, s in self.states]

    async def stop(self):
        await self.browser.close()
