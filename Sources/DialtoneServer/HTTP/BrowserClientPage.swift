/// The browser client served at `/`: plain JavaScript over the browser's own WebRTC, speaking
/// docs/protocol.md (hello/welcome, seq/ack with resume, trickle ICE, pending candidates,
/// ICE restart, the call lifecycle). No build step: this file is the whole client.
///
/// URL fragment parameters, for demos and headless tests: `#token=T` signs in at once,
/// `call=USER` dials, `answer=auto` answers the first call, `tone=HZ` sends a sine tone instead
/// of the microphone, `hangupAfter=S` hangs up S seconds after connecting. `window.dialtoneTest`
/// exposes the call's state and the dominant frequency heard (a WebAudio analyser).
enum BrowserClientPage {
  static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Dialtone</title>
<style>
  body { font: 15px/1.4 system-ui, sans-serif; max-width: 40rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
  h1 { font-size: 1.4rem; }
  textarea, input { font: inherit; width: 100%; box-sizing: border-box; padding: .4rem; }
  button { font: inherit; padding: .4rem .9rem; margin: .3rem .3rem .3rem 0; }
  #status { font-weight: 600; margin: .8rem 0; }
  #incoming { background: #eef6ff; padding: .6rem; border-radius: .4rem; }
  #log { font: 12px/1.3 ui-monospace, monospace; white-space: pre-wrap; color: #555; max-height: 16rem; overflow: auto; }
  [hidden] { display: none !important; }
</style>
</head>
<body>
<h1>Dialtone</h1>
<section id="signin">
  <p>Paste a token (<code>dialtone token --user alice --data-dir ./data</code>):</p>
  <textarea id="token" rows="3" placeholder="eyJ..."></textarea>
  <button id="connect">Sign in</button>
</section>
<section id="phone" hidden>
  <p>Signed in as <b id="me"></b></p>
  <div id="dialer">
    <input id="callee" placeholder="user id to call">
    <button id="call">Call</button>
  </div>
  <div id="incoming" hidden>
    <span id="caller"></span> is calling
    <button id="answer">Answer</button><button id="decline">Decline</button>
  </div>
  <div id="status">Idle</div>
  <div id="controls" hidden><button id="mute">Mute</button><button id="hangup">Hang up</button></div>
  <audio id="remote" autoplay></audio>
</section>
<div id="log"></div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.hash.slice(1));
const test = window.dialtoneTest = { events: [], state: "signed-out", remoteFrequency: null, ended: null };

function log(event, detail) {
  test.events.push(detail === undefined ? { event } : { event, detail });
  const line = `${(performance.now() / 1000).toFixed(3)}  ${event}${detail === undefined ? "" : " " + JSON.stringify(detail)}\n`;
  $("log").textContent = line + $("log").textContent;
}

function setStatus(state, text) {
  test.state = state;
  $("status").textContent = text || state;
  log("state", state);
}

function newId() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  return "xxxxxxxx-xxxx-4xxx-8xxx-xxxxxxxxxxxx".replace(/x/g, () => (Math.random() * 16 | 0).toString(16));
}

// ---- Signaling: protocol.md sections 4-5 (hello, seq/ack, resume, request ids) ----

class Signaling {
  constructor(token, handlers) {
    this.token = token;
    this.handlers = handlers;
    this.sessionId = null;
    this.lastSeq = 0;
    this.unacked = 0;
    this.ackTimer = null;
    this.pending = new Map();   // id -> { message, resolve }
    this.nextId = 0;
    this.welcomed = false;
    this.stopped = false;
    this.attempt = 0;
  }

  connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = this.ws = new WebSocket(scheme + location.host + "/v1/ws");
    ws.onopen = () => {
      const hello = { type: "hello", id: "hello-" + (++this.nextId), version: 1, token: this.token };
      if (this.sessionId) hello.resume = { sessionId: this.sessionId, lastSeq: this.lastSeq };
      ws.send(JSON.stringify(hello));
    };
    ws.onmessage = (event) => this.received(JSON.parse(event.data));
    ws.onclose = (event) => {
      this.welcomed = false;
      if (this.stopped) return;
      // 4400 protocol error, 4401 bad token, 4409 replaced: retrying cannot help.
      if ([4400, 4401, 4409].includes(event.code)) {
        this.stopped = true;
        this.handlers.stopped(event.code);
        return;
      }
      this.handlers.disconnected();
      const delays = [0.5, 1, 2, 4, 8];
      const delay = delays[Math.min(this.attempt++, delays.length - 1)] * (0.5 + Math.random());
      setTimeout(() => this.connect(), delay * 1000);
    };
  }

  received(m) {
    if (m.type === "welcome") {
      this.welcomed = true;
      this.attempt = 0;
      if (!m.resumed) { this.lastSeq = 0; this.unacked = 0; }
      const resync = this.sessionId !== null && !m.resumed;
      this.sessionId = m.sessionId;
      this.handlers.welcome(m, resync);
      // Requests never answered go again, with their original ids (protocol.md 5.3).
      for (const { message } of this.pending.values()) this.ws.send(JSON.stringify(message));
      return;
    }
    if (typeof m.seq === "number") {
      if (m.seq <= this.lastSeq) { this.scheduleAck(); return; }   // a replayed duplicate
      this.lastSeq = m.seq;
      if (++this.unacked >= 16) this.ack(); else this.scheduleAck();
    }
    if (m.replyTo && this.pending.has(m.replyTo)) {
      const request = this.pending.get(m.replyTo);
      this.pending.delete(m.replyTo);
      if (m.type === "error") log("error", { request: request.message.type, code: m.code, message: m.message });
      request.resolve(m);
      return;
    }
    if (!m.replyTo) this.handlers.message(m);
  }

  request(message) {
    message.id = "b" + (++this.nextId);
    return new Promise((resolve) => {
      this.pending.set(message.id, { message, resolve });
      if (this.welcomed) this.ws.send(JSON.stringify(message));
    });
  }

  scheduleAck() {
    if (this.ackTimer) return;
    this.ackTimer = setTimeout(() => this.ack(), 500);
  }

  ack() {
    clearTimeout(this.ackTimer);
    this.ackTimer = null;
    this.unacked = 0;
    if (this.welcomed) this.ws.send(JSON.stringify({ type: "ack", seq: this.lastSeq }));
  }
}

// ---- Audio: the outgoing tone or microphone, and the analyser for what is heard ----

let audioContext = null;
function context() {
  if (!audioContext) audioContext = new AudioContext({ sampleRate: 48000 });
  if (audioContext.state === "suspended") audioContext.resume();
  return audioContext;
}

async function localStream() {
  const tone = Number(params.get("tone"));
  if (tone > 0) {
    const ctx = context();
    const oscillator = ctx.createOscillator();
    const gain = ctx.createGain();
    oscillator.frequency.value = tone;
    gain.gain.value = 0.3;
    const destination = ctx.createMediaStreamDestination();
    oscillator.connect(gain).connect(destination);
    oscillator.start();
    return destination.stream;
  }
  return navigator.mediaDevices.getUserMedia({ audio: true, video: false });
}

function analyse(stream) {
  const ctx = context();
  const analyser = ctx.createAnalyser();
  analyser.fftSize = 32768;
  analyser.smoothingTimeConstant = 0;
  ctx.createMediaStreamSource(stream).connect(analyser);
  const bins = new Float32Array(analyser.frequencyBinCount);
  const hz = ctx.sampleRate / analyser.fftSize;
  const readings = [];
  const timer = setInterval(() => {
    if (!call) { clearInterval(timer); return; }
    analyser.getFloatFrequencyData(bins);
    let best = -1;
    for (let i = Math.floor(100 / hz); i < Math.min(bins.length - 1, Math.ceil(2000 / hz)); i++) {
      if (best < 0 || bins[i] > bins[best]) best = i;
    }
    if (best <= 0 || bins[best] < -70) return;   // silence
    // Parabolic interpolation between the peak bin and its neighbours.
    const [a, b, c] = [bins[best - 1], bins[best], bins[best + 1]];
    const offset = 0.5 * (a - c) / (a - 2 * b + c || 1);
    readings.push((best + offset) * hz);
    if (readings.length === 1) log("first-audio");
    const sorted = readings.slice(-8).sort((x, y) => x - y);
    test.remoteFrequency = Math.round(sorted[sorted.length >> 1] * 10) / 10;
  }, 250);
}

// ---- The call: protocol.md sections 7-9 ----

let signaling = null;
let iceServers = [];
let call = null;   // { id, role, peer, pc, remoteReady, pendingCandidates, canTrickle, queued, stream, restarts }

function makePeerConnection() {
  const pc = new RTCPeerConnection({ iceServers });
  pc.onicecandidate = (event) => {
    if (!call || call.pc !== pc) return;
    const message = event.candidate
      ? { type: "candidate", callId: call.id, candidate: event.candidate.toJSON() }
      : { type: "end-of-candidates", callId: call.id };
    // Candidates follow the offer/answer they belong to.
    if (call.canTrickle) signaling.request(message); else call.queued.push(message);
  };
  pc.ontrack = (event) => {
    const stream = event.streams[0] || new MediaStream([event.track]);
    $("remote").srcObject = stream;   // Chrome feeds remote audio to WebAudio only once it plays
    analyse(stream);
  };
  pc.onconnectionstatechange = () => {
    if (!call || call.pc !== pc) return;
    log("connection", pc.connectionState);
    if (pc.connectionState === "connected") connected();
  };
  pc.oniceconnectionstatechange = () => {
    if (!call || call.pc !== pc) return;
    const s = pc.iceConnectionState;
    if (s === "failed" || s === "disconnected") iceTrouble(s);
  };
  return pc;
}

function startTrickle() {
  call.canTrickle = true;
  for (const message of call.queued) signaling.request(message);
  call.queued = [];
}

async function flushCandidates() {
  call.remoteReady = true;
  for (const candidate of call.pendingCandidates) await call.pc.addIceCandidate(candidate).catch((e) => log("candidate-error", String(e)));
  call.pendingCandidates = [];
}

async function dial(to) {
  if (call) return;
  call = { id: newId(), role: "caller", pc: null, remoteReady: false, pendingCandidates: [], canTrickle: false, queued: [], restarts: 0 };
  setStatus("calling", `Calling ${to}…`);
  showControls(true);
  call.stream = await localStream();
  call.pc = makePeerConnection();
  for (const track of call.stream.getTracks()) call.pc.addTrack(track, call.stream);
  const offer = await call.pc.createOffer();
  await call.pc.setLocalDescription(offer);
  const reply = await signaling.request({ type: "invite", callId: call.id, to, video: false, offer: { sdp: offer.sdp } });
  if (reply.type === "error") { end(reply.code); return; }
  startTrickle();
}

async function answer() {
  if (!call || call.role !== "callee" || call.answered) return;
  call.answered = true;
  $("incoming").hidden = true;
  setStatus("connecting", "Connecting…");
  call.stream = await localStream();
  call.pc = makePeerConnection();
  for (const track of call.stream.getTracks()) call.pc.addTrack(track, call.stream);
  await call.pc.setRemoteDescription({ type: "offer", sdp: call.offer.sdp });
  await flushCandidates();
  const description = await call.pc.createAnswer();
  await call.pc.setLocalDescription(description);
  const reply = await signaling.request({ type: "accept", callId: call.id, answer: { sdp: description.sdp } });
  if (reply.type === "error") { end(reply.code); return; }
  startTrickle();
}

function hangUp() {
  if (!call) return;
  const type = call.role === "caller" ? (call.accepted ? "hangup" : "cancel") : (call.answered ? "hangup" : "decline");
  signaling.request({ type, callId: call.id });
  end("local");
}

function connected() {
  if (call.connected) return;
  call.connected = true;
  call.restarts = 0;
  setStatus("connected", "Connected");
  const after = Number(params.get("hangupAfter"));
  if (after > 0) setTimeout(() => { if (call && call.connected) hangUp(); }, after * 1000);
}

// Reference policy (protocol.md 9): disconnected waits 4 s, failed restarts at once, retries
// after 1, 2, 3 s. The caller (offerer) restarts; the callee asks it to.
function iceTrouble(state) {
  if (!call || call.restartTimer) return;
  const delay = state === "disconnected" ? 4000 : [0, 1000, 2000, 3000][call.restarts] ?? -1;
  if (delay < 0) { hangUp(); return; }
  setStatus("reconnecting", "Reconnecting…");
  call.restartTimer = setTimeout(async () => {
    call.restartTimer = null;
    if (!call || ["connected", "completed"].includes(call.pc.iceConnectionState)) return;
    call.restarts++;
    if (call.role === "callee") { signaling.request({ type: "ice-restart-request", callId: call.id }); return; }
    const offer = await call.pc.createOffer({ iceRestart: true });
    await call.pc.setLocalDescription(offer);
    call.remoteReady = false;
    signaling.request({ type: "offer", callId: call.id, sdp: offer.sdp, iceRestart: true });
  }, delay);
}

async function handle(m) {
  if (m.type === "invite") {
    if (call) return;   // the server answers busy for us; a re-delivered invite is ignored too
    call = { id: m.callId, role: "callee", peer: m.from, offer: m.offer, pc: null, remoteReady: false,
             pendingCandidates: [], canTrickle: false, queued: [], restarts: 0 };
    $("caller").textContent = m.from.name || m.from.userId;
    $("incoming").hidden = false;
    showControls(true);
    setStatus("ringing", `${m.from.userId} is calling`);
    signaling.request({ type: "ringing", callId: m.callId });
    if (params.get("answer") === "auto") answer();
    return;
  }
  if (!call || m.callId !== call.id) return;
  switch (m.type) {
    case "ringing":
      setStatus("ringing", "Ringing…");
      break;
    case "accept":
      call.accepted = true;
      setStatus("connecting", "Connecting…");
      if (m.answer) { await call.pc.setRemoteDescription({ type: "answer", sdp: m.answer.sdp }); await flushCandidates(); }
      break;
    case "answer":
      await call.pc.setRemoteDescription({ type: "answer", sdp: m.sdp });
      await flushCandidates();
      break;
    case "offer":
      // A restart from the caller (it may come from a fresh connection of the caller's).
      call.remoteReady = false;
      await call.pc.setRemoteDescription({ type: "offer", sdp: m.sdp });
      await flushCandidates();
      const description = await call.pc.createAnswer();
      await call.pc.setLocalDescription(description);
      signaling.request({ type: "answer", callId: call.id, sdp: description.sdp });
      break;
    case "candidate":
      if (!m.candidate.candidate) break;
      if (call.remoteReady) await call.pc.addIceCandidate(m.candidate).catch((e) => log("candidate-error", String(e)));
      else call.pendingCandidates.push(m.candidate);
      break;
    case "ice-restart-request":
      if (call.role === "caller") { call.restarts = 0; iceTrouble("failed"); }
      break;
    case "call-ended":
      end(m.reason);
      break;
  }
}

function end(reason) {
  if (!call) return;
  clearTimeout(call.restartTimer);
  if (call.pc) call.pc.close();
  if (call.stream) for (const track of call.stream.getTracks()) track.stop();
  call = null;
  test.ended = reason;
  $("incoming").hidden = true;
  showControls(false);
  setStatus("ended", `Call ended: ${reason}`);
}

function showControls(inCall) {
  $("controls").hidden = !inCall;
  $("dialer").hidden = inCall;
}

function signIn(token) {
  signaling = new Signaling(token.trim(), {
    welcome(w, resync) {
      iceServers = w.iceServers || [];
      $("signin").hidden = true;
      $("phone").hidden = false;
      $("me").textContent = `${w.userId} (${w.deviceId})`;
      if (test.state === "signed-out") setStatus("idle", "Idle");
      log("welcome", { resumed: w.resumed, resync });
      if (resync && call) {
        signaling.request({ type: "get-call", callId: call.id }).then((r) => {
          if (r.type === "error" || (r.call && r.call.state === "ended")) end(r.call ? r.call.endReason : "connection-lost");
        });
      }
      if (params.get("call") && !test.dialed) { test.dialed = true; dial(params.get("call")); }
    },
    message: (m) => handle(m).catch((e) => log("error", String(e))),
    disconnected() { log("signaling", "disconnected"); },
    stopped(code) { setStatus("signed-out", `Signed out (close ${code})`); $("signin").hidden = false; $("phone").hidden = true; },
  });
  signaling.connect();
}

$("connect").onclick = () => signIn($("token").value);
$("call").onclick = () => { const to = $("callee").value.trim(); if (to) dial(to); };
$("answer").onclick = () => answer();
$("decline").onclick = () => hangUp();
$("hangup").onclick = () => hangUp();
$("mute").onclick = () => {
  if (!call || !call.stream) return;
  for (const track of call.stream.getAudioTracks()) track.enabled = !track.enabled;
  $("mute").textContent = call.stream.getAudioTracks().some((t) => !t.enabled) ? "Unmute" : "Mute";
};
if (params.get("token")) signIn(params.get("token"));
</script>
</body>
</html>
"""#
}
