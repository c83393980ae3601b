"""The web softphone (issue 18): headless Chromium on the page the server serves at /, with CLI
softphones as the other side, all inside one MediaNamespace like run_e2e.py's browser scenarios.
The page rings and is answered or declined by a click, mutes, shows its socket reconnecting and
resuming, lists the call in its recent calls and sends its quality report (protocol.md 7.19).

The server serves the page from the repository (`--web-root`), the same file as the embedded one.
Registered in run_e2e.py's SCENARIOS after the others.
"""
import array
import asyncio
import json
import math
import os
import time
import wave

from harness import (Chromium, MediaNamespace, Server, Softphone, TCPProxy, check, dominant_frequency,
                     dominant_frequency_between, http_get, wav_seconds)
from scenarios import scenario


WEB_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "Sources", "DialtoneServer", "Resources"))



def near(frequency, expected, what):
    check(abs(frequency - expected) <= 5, f"{what}: heard {frequency} Hz, expected {expected} ± 5 Hz")


def heard(expected):
    return lambda state: state.get("remoteFrequency") is not None and abs(state["remoteFrequency"] - expected) <= 5


def rms_between(path, start, end):
    """The RMS level of a 16-bit mono WAV between `start` and `end` seconds."""
    with wave.open(path) as w:
        rate = w.getframerate()
        w.setpos(min(int(rate * max(start, 0)), w.getnframes()))
        samples = array.array("h", w.readframes(max(int(rate * (end - max(start, 0))), 0)))
    check(len(samples) >= rate * 0.5, f"{path}: only {len(samples) / rate:.2f} s of audio between {start:.1f} and {end:.1f} s")
    return math.sqrt(sum(x * x for x in samples) / len(samples))


async def softphone_server(s, stack, ns):
    return stack(await Server(s, netns=ns.NS, extra=["--web-root", WEB_ROOT]).start())


async def signed_in_page(s, stack, server, ns, user, fragment="", base=None):
    """`user`'s page (device `browser`) in headless Chromium, returned once it is signed in (a
    page given `call=` dials at once: it may be past idle already)."""
    page = stack(await Chromium(s, f"{base or server.url}/#token={server.token(user, 'browser')}{fragment}", ns.NS).start())
    await page.wait_for("sign-in", lambda st: st["state"] != "signed-out")
    return page


async def auto_answering_bob(s, stack, server, ns, tone):
    """Bob's CLI answering the first call with a tone and recording bob.wav."""
    bob = stack(await Softphone(s, "bob", ["answer", "--server", server.url, "--token", server.token("bob"), "--auto",
                                           "--tone-frequency", str(tone), "--record", s.file("bob.wav")],
                                netns=ns.NS).start())
    await bob.wait_for("note", text="waiting for a call")
    return bob


async def click(page, element_id):
    await page.evaluate(f'document.getElementById("{element_id}").click()')


async def recent_call_row(page, call_id):
    """The text of the page's recent-calls row of `call_id` (None if it has none)."""
    return await page.evaluate(
        f'(document.querySelector(\'#recentCalls li[data-call-id="{call_id}"]\') || {{}}).textContent || null')


async def call_detail(server, ns, call_id, token):
    """GET /v1/calls/{call_id} (protocol.md 16.5) with `token`."""
    response = await http_get(ns.NS, f"{server.url}/v1/calls/{call_id}", {"Authorization": f"Bearer {token}"})
    check(response["status"] == 200, f"GET /v1/calls/{call_id}: {response['status']} {response['body']}")
    return json.loads(response["body"])


@scenario
async def browser_accepts_a_cli_call_and_reports_its_quality(s, stack):
    """The CLI calls the page: it rings with the caller's name until the test clicks Accept;
    audio both ways; the timer runs and the network shows good; after the CLI hangs up the
    call is in the page's recent calls, and GET /v1/calls/{id} holds the page's final report
    (callee, device browser, its set-up milestones and the selected candidate types)."""
    ns = stack(await MediaNamespace().start())
    server = await softphone_server(s, stack, ns)
    page = await signed_in_page(s, stack, server, ns, "bob", "&tone=660")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token",
                                               server.token("alice", name="Alice Liddell"), "--to", "bob",
                                               "--tone-frequency", "523", "--duration", "5",
                                               "--record", s.file("alice.wav")], netns=ns.NS).start())
    state = await page.wait_for("the incoming call", lambda st: st.get("incoming") == "alice")
    check(state["incomingName"] == "Alice Liddell", f"the page shows the caller as {state['incomingName']!r}")
    check(state["ringtone"] == "incoming", f"the page does not ring: {state['ringtone']}")
    shown = await page.evaluate('!document.getElementById("incoming").hidden && document.getElementById("caller").textContent')
    check(shown == "Alice Liddell", f"the incoming screen shows {shown!r}")
    await alice.wait_for("ringing")
    await asyncio.sleep(1)  # it rings on: nothing answers for the user
    check(not alice.has("accepted"), "the call was answered before Accept was clicked")

    await click(page, "accept")
    state = await page.wait_for("the connected state", lambda st: st["state"] == "connected")
    check(state["ringtone"] is None and state["incoming"] is None, f"the ring did not stop: {state['ringtone']}")
    await page.wait_for("523 Hz in the analyser", heard(523))
    await page.wait_for("a running timer", lambda st: st.get("timer", "") >= "00:02")
    await page.wait_for("a good network", lambda st: st.get("quality") == "good")
    check(await alice.exit_status() == 0, "the CLI did not exit 0")
    near(dominant_frequency(s.file("alice.wav")), 660, "alice.wav")

    state = await page.wait_for("the quality report's ack", lambda st: st.get("qualitySent"))
    check(state["ended"] == "hangup", f"the page's call ended with {state['ended']}")
    call_id = state["callId"]
    await page.wait_for("the call in recent calls", lambda st: st.get("recentCalls", 0) >= 1)
    row = await recent_call_row(page, call_id)
    check(row and "alice" in row and "incoming" in row and "answered" in row, f"the recent-calls row says {row!r}")

    detail = await call_detail(server, ns, call_id, server.token("bob", "browser"))
    entry = next((q for q in detail["quality"] if q["deviceId"] == "browser"), None)
    check(entry is not None, f"no report of the page's: {detail['quality']}")
    check(entry["role"] == "callee" and entry["userId"] == "bob", f"the page's report is filed as {entry}")
    report = entry["report"]
    check(report.get("final") is True, f"the page's report is not final: {report}")
    milestones = report.get("milestones", {})
    for name in ("ringing", "accepted", "iceConnected", "dtlsConnected", "firstAudio"):
        check(name in milestones, f"the page's report has no {name} milestone: {report}")
    check(milestones["ringing"] <= milestones["accepted"] <= milestones["firstAudio"], f"milestones out of order: {milestones}")
    check(milestones["accepted"] >= 1000, f"accepted {milestones['accepted']} ms after the ring, yet it rang for 1 s")
    for side in ("localCandidateType", "remoteCandidateType"):
        check(report.get(side) in ("host", "srflx", "prflx", "relay"), f"{side}: {report.get(side)}")
    check(report.get("durationMs", 0) > 3000, f"the page's report has a duration of {report.get('durationMs')} ms")
    check(report.get("iceRestarts") == 0 and "rttMs" in report and report.get("receiveKbps", 0) > 10,
          f"the page's report lacks its statistics: {report}")
    # Its speech estimate (protocol.md 7.19), the same formula as the native clients': a clean link.
    check(3.5 <= report.get("mos", 0) <= 4.5, f"the page's speech estimate: {report}")


@scenario
async def browser_declines_a_cli_call(s, stack):
    """The CLI calls the page and the test clicks Decline: the CLI's call ends declined (exit
    3) with no audio, the page stops ringing, and its recent calls show the declined call."""
    ns = stack(await MediaNamespace().start())
    server = await softphone_server(s, stack, ns)
    page = await signed_in_page(s, stack, server, ns, "bob", "&tone=660")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--tone-frequency", "523"], netns=ns.NS).start())
    await page.wait_for("the incoming call", lambda st: st.get("incoming") == "alice" and st.get("ringtone") == "incoming")
    await alice.wait_for("ringing")
    await click(page, "decline")
    check(await alice.exit_status() == 3, "the CLI did not end declined (exit 3)")
    check(alice.find("ended")["reason"] == "declined", f"the CLI's call ended with {alice.find('ended')}")
    check(not alice.has("first-audio"), "the CLI heard audio from a declined call")
    state = await page.wait_for("the end of the call", lambda st: st.get("ended") and st.get("qualitySent"))
    check(state["ended"] == "declined" and state["ringtone"] is None and state["incoming"] is None,
          f"the page did not stop ringing: {state['ended']}, {state['ringtone']}, {state['incoming']}")
    await page.wait_for("the call in recent calls", lambda st: st.get("recentCalls", 0) >= 1)
    row = await recent_call_row(page, state["callId"])
    check(row and "alice" in row and "declined" in row, f"the recent-calls row says {row!r}")


@scenario
async def browser_mute_silences_what_the_cli_hears(s, stack):
    """The page calls the CLI with a tone: the CLI hears it, then silence for as long as Mute is
    pressed (aria-pressed), then the tone again once it is released."""
    ns = stack(await MediaNamespace().start())
    server = await softphone_server(s, stack, ns)
    bob = await auto_answering_bob(s, stack, server, ns, 330)
    page = await signed_in_page(s, stack, server, ns, "alice", "&call=bob&tone=660")
    await page.wait_for("the connected state", lambda st: st["state"] == "connected")
    await bob.wait_for("first-audio")
    await asyncio.sleep(2)
    muted_at = time.time()
    await click(page, "mute")
    state = await page.page_state()
    pressed = await page.evaluate('document.getElementById("mute").getAttribute("aria-pressed")')
    check(state["muted"] and pressed == "true", f"Mute is not pressed: muted {state['muted']}, aria-pressed {pressed}")
    await asyncio.sleep(3)
    unmuted_at = time.time()
    await click(page, "mute")
    pressed = await page.evaluate('document.getElementById("mute").getAttribute("aria-pressed")')
    check(not (await page.page_state())["muted"] and pressed == "false", "Mute did not release")
    await asyncio.sleep(2.5)
    await click(page, "hangup")
    check(await bob.exit_status() == 0, "the CLI did not exit 0 after the page hung up")

    # bob.wav starts with the CLI's first audio: windows before, during and after the mute,
    # each clear of the switch by a margin for the jitter buffer.
    path, start = s.file("bob.wav"), bob.time_of("first-audio")
    mute, unmute = muted_at - start, unmuted_at - start
    near(dominant_frequency_between(path, mute - 1.5, mute - 0.2), 660, "bob.wav before Mute")
    check(wav_seconds(path) >= unmute + 2, f"bob.wav: {wav_seconds(path):.1f} s, unmuted at {unmute:.1f} s")
    near(dominant_frequency_between(path, unmute + 0.6, unmute + 2), 660, "bob.wav after Mute was released")
    loud, quiet = rms_between(path, mute - 1.5, mute - 0.2), rms_between(path, mute + 0.6, unmute - 0.3)
    check(loud > 1000, f"bob.wav before Mute is too quiet to compare (RMS {loud:.0f})")
    check(quiet < loud / 50, f"bob.wav while muted has RMS {quiet:.0f} (the tone had {loud:.0f})")


@scenario
async def browser_shows_reconnecting_and_the_call_goes_on(s, stack):
    """The page's signaling socket is cut mid-call (it talks through a TCP proxy): it shows
    Reconnecting, resumes its session, the call stays connected with media flowing, and its
    hang-up and quality report go over the resumed session."""
    ns = stack(await MediaNamespace().start())
    server = await softphone_server(s, stack, ns)
    proxy = stack(await TCPProxy(server.port, ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, ns, 330)
    page = await signed_in_page(s, stack, server, ns, "alice", "&call=bob&tone=660", base=f"http://127.0.0.1:{proxy.port}")
    await page.wait_for("the connected state", lambda st: st["state"] == "connected")
    await page.wait_for("330 Hz in the analyser", heard(330))
    await asyncio.sleep(1)
    await proxy.cut()
    check(proxy.cuts > 0, "there was no signaling connection to cut")
    state = await page.wait_for("a resumed session", lambda st: st["reconnects"] >= 1 and not st["reconnecting"], timeout=15)
    events = state["events"]
    check(any(e["event"] == "status" and e.get("detail") == "Reconnecting…" for e in events),
          "the call never showed Reconnecting")
    welcomes = [e["detail"] for e in events if e["event"] == "welcome"]
    check(len(welcomes) == 2 and welcomes[-1]["resumed"], f"the page did not resume its session: {welcomes}")
    check(state["state"] == "connected" and state["statusText"] == "Connected",
          f"the call is {state['state']} ({state['statusText']}) after the reconnect")
    timer = state["timer"]
    await page.wait_for("the timer going on", lambda st: st["timer"] > timer, timeout=5)
    hung_up = time.time()
    await click(page, "hangup")
    check(await bob.exit_status() == 0, "the CLI did not get the hang-up after the page resumed")
    check(bob.find("ended")["reason"] == "hangup", f"the CLI's call ended with {bob.find('ended')}")
    talked = hung_up - bob.time_of("first-audio")
    check(wav_seconds(s.file("bob.wav")) > talked - 1, f"bob.wav: {wav_seconds(s.file('bob.wav')):.1f} s of a "
          f"{talked:.1f} s call: the audio stopped with the socket")
    near(dominant_frequency(s.file("bob.wav")), 660, "bob.wav")
    await page.wait_for("the quality report's ack", lambda st: st.get("qualitySent"))
