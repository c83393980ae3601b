#!/usr/bin/env python3
"""End-to-end calls with real media: CLI softphones (GStreamer webrtcbin) through the real
server, coturn, aiortc and headless Chromium, all on loopback.

    python3 Tests/e2e/run_e2e.py [name-filter ...]

Each scenario prints PASS or FAIL with the reason; the exit status is non-zero if any failed.
Logs of a failed scenario are kept (their directory is printed).
"""
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import (Chromium, Coturn, Failure, NamespaceLink, Scratch, Server, Softphone, TCPProxy,  # noqa: E402
                     aiortc_peer, check, dominant_frequency, wav_seconds)

SCENARIOS = []


def scenario(fn):
    SCENARIOS.append(fn)
    return fn


def write_tone_wav(path, frequency, seconds, rate=44100):
    """A 16-bit mono sine WAV (44.1 kHz, so the engine resamples it too)."""
    import math
    import struct
    import wave
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(12000 * math.sin(2 * math.pi * frequency * n / rate)))
                               for n in range(int(rate * seconds))))


def near(frequency, expected, path):
    check(abs(frequency - expected) <= 5, f"{os.path.basename(path)}: heard {frequency} Hz, expected {expected} ± 5 Hz")


async def auto_answering_bob(s, stack, server, *flags, url=None, netns=None):
    """Bob's CLI answering every call and recording bob.wav, returned once it waits for a call."""
    bob = stack(await Softphone(s, "bob", ["answer", "--server", url or server.url, "--token", server.token("bob"),
                                           "--auto", *flags, "--record", s.file("bob.wav")], netns=netns).start())
    await bob.wait_for("note", text="waiting for a call")
    return bob


@scenario
async def cli_calls_cli(s, stack):
    """Two CLI peers through the server: tone both ways, data channel both ways, hang-up ends both."""
    server = stack(await Server(s).start())
    bob = await auto_answering_bob(s, stack, server, "--tone-frequency", "330")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--tone-frequency", "523", "--duration", "4",
                                               "--record", s.file("alice.wav")]).start())
    for peer in (alice, bob):
        await peer.wait_for("data-channel-open")
    alice.send("hello from alice")
    bob.send("hello from bob")
    await bob.wait_for("data", text="hello from alice")
    await alice.wait_for("data", text="hello from bob")
    for milestone in ("ringing", "accepted", "ice-connected", "dtls-connected", "first-audio"):
        await alice.wait_for(milestone)
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not exit 0 after alice hung up")
    check(bob.find("ended")["reason"] == "hangup", "bob's call did not end with hangup")
    near(dominant_frequency(s.file("bob.wav")), 523, s.file("bob.wav"))
    near(dominant_frequency(s.file("alice.wav")), 330, s.file("alice.wav"))


@scenario
async def cli_sends_a_wav_file(s, stack):
    """--audio FILE.wav: the callee hears the file (a 750 Hz tone written here)."""
    write_tone_wav(s.file("tone.wav"), 750, seconds=6)
    server = stack(await Server(s).start())
    bob = await auto_answering_bob(s, stack, server)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--audio", s.file("tone.wav"), "--duration", "3"]).start())
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not exit 0")
    near(dominant_frequency(s.file("bob.wav")), 750, s.file("bob.wav"))


@scenario
async def relay_only_through_coturn(s, stack):
    """Both peers relay-only, TURN credentials from the server: the selected pair is relay/relay."""
    turn = stack(await Coturn(s).start())
    server = stack(await Server(s, turn=turn).start())
    bob = await auto_answering_bob(s, stack, server, "--relay-only")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--relay-only", "--tone-frequency", "440",
                                               "--duration", "3"]).start())
    check(await alice.exit_status() == 0, "alice did not exit 0")
    stats = alice.find("ended").get("stats") or {}
    check(stats.get("localCandidateType") == "relay" and stats.get("remoteCandidateType") == "relay",
          f"selected pair is not relay/relay: {stats}")
    check(stats.get("packetsReceived", 0) > 50, f"too little media through TURN: {stats}")
    check(await bob.exit_status() == 0, "bob did not exit 0")
    near(dominant_frequency(s.file("bob.wav")), 440, s.file("bob.wav"))


@scenario
async def callee_signaling_dies_mid_call(s, stack):
    """The callee's signaling socket is killed mid-call: media goes on, signaling resumes, and
    the caller's hang-up still reaches it."""
    server = stack(await Server(s).start())
    proxy = stack(await TCPProxy(server.port).start())
    bob = await auto_answering_bob(s, stack, server, url=f"http://127.0.0.1:{proxy.port}")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--tone-frequency", "600", "--duration", "6"]).start())
    await bob.wait_for("first-audio")
    await asyncio.sleep(1)
    proxy.cut()
    check(proxy.cuts > 0, "there was no signaling connection to cut")
    await bob.wait_for("note", text="signaling disconnected; reconnecting")
    # Data still crosses: the media path never depended on the socket.
    await alice.wait_for("data-channel-open")
    alice.send("still there?")
    await bob.wait_for("data", text="still there?")
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not get the hang-up after resuming")
    check(bob.find("ended")["reason"] == "hangup", "bob's call did not end with hangup")
    check(not alice.has("ice-disconnected"), "the media path was disturbed")
    check(wav_seconds(s.file("bob.wav")) > 5, "bob's audio stopped when his signaling died")
    near(dominant_frequency(s.file("bob.wav")), 600, s.file("bob.wav"))


@scenario
async def the_call_survives_a_dead_network_path(s, stack):
    """The path between caller and callee dies for 10 s (media and the caller's signaling). The
    engines notice the silence, restart ICE on fresh connections (webrtcbin cannot restart ICE
    in place) and the call goes on once the path is back."""
    link = stack(await NamespaceLink(s).start())
    server = stack(await Server(s, netns=link.NS_B, host=link.ADDR_B).start())
    bob = await auto_answering_bob(s, stack, server, "--tone-frequency", "440", netns=link.NS_B)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--tone-frequency", "523", "--duration", "26"],
                                  netns=link.NS_A).start())
    await alice.wait_for("first-audio")
    await asyncio.sleep(1)
    await link.cut()
    await alice.wait_for("ice-disconnected", timeout=10)
    await asyncio.sleep(10)
    await link.restore()
    await alice.wait_for("reconnected", timeout=30)
    check(await alice.exit_status(timeout=40) == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not exit 0")
    # Before the cut Bob heard ~2 s of Alice; a recovered call adds several more seconds.
    check(wav_seconds(s.file("bob.wav")) > 5, "no audio reached bob after the path came back")
    near(dominant_frequency(s.file("bob.wav")), 523, s.file("bob.wav"))


@scenario
async def declined_missed_and_busy_calls_exit_with_their_status(s, stack):
    """Declined: the caller exits 3 (and so does the callee who declined). Missed after the
    ring timeout: both exit 5. Busy: calling someone who is in a call exits 4."""
    server = stack(await Server(s, ring_timeout=2).start())
    bob = stack(await Softphone(s, "bob", ["answer", "--server", server.url, "--token", server.token("bob")]).start())
    await bob.wait_for("note", text="waiting for a call")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob"]).start())
    await bob.wait_for("note", text="press Enter to answer, or type d and Enter to decline")
    bob.send("d")
    check(await alice.exit_status() == 3, "a declined call did not exit 3 for the caller")
    check(await bob.exit_status() == 3, "declining did not exit 3 for the callee")

    carol = stack(await Softphone(s, "carol", ["answer", "--server", server.url, "--token", server.token("carol")]).start())
    await carol.wait_for("note", text="waiting for a call")
    dave = stack(await Softphone(s, "dave", ["call", "--server", server.url, "--token", server.token("dave"),
                                             "--to", "carol"]).start())
    check(await dave.exit_status() == 5, "an unanswered call did not exit 5 (missed)")
    check(await carol.exit_status() == 5, "the unanswered callee did not exit 5 (missed)")

    erin = stack(await Softphone(s, "erin", ["answer", "--server", server.url, "--token", server.token("erin"),
                                             "--auto"]).start())
    await erin.wait_for("note", text="waiting for a call")
    frank = stack(await Softphone(s, "frank", ["call", "--server", server.url, "--token", server.token("frank"),
                                               "--to", "erin", "--duration", "30"]).start())
    await frank.wait_for("connected")
    grace = stack(await Softphone(s, "grace", ["call", "--server", server.url, "--token", server.token("grace"),
                                               "--to", "erin"]).start())
    check(await grace.exit_status() == 4, "calling a user in a call did not exit 4 (busy)")


@scenario
async def aiortc_calls_cli(s, stack):
    """aiortc (our protocol.md client in Python) calls the CLI: audio verified both ways."""
    server = stack(await Server(s).start())
    bob = await auto_answering_bob(s, stack, server, "--tone-frequency", "330")
    alice = stack(await aiortc_peer(s, "aiortc", ["--server", server.url, "--token", server.token("alice"),
                                                  "--call", "bob", "--tone", "700", "--duration", "4",
                                                  "--record", s.file("aiortc.wav")]).start())
    await alice.wait_for("connected")
    await bob.wait_for("first-audio")
    await alice.wait_for("first-audio")
    check(await alice.exit_status() == 0, "aiortc did not exit 0")
    check(await bob.exit_status() == 0, "the CLI did not exit 0 after aiortc hung up")
    near(dominant_frequency(s.file("bob.wav")), 700, s.file("bob.wav"))
    near(dominant_frequency(s.file("aiortc.wav")), 330, s.file("aiortc.wav"))


@scenario
async def cli_calls_aiortc(s, stack):
    """The CLI calls aiortc (which answers a trickled offer): audio verified both ways."""
    server = stack(await Server(s).start())
    bob = stack(await aiortc_peer(s, "aiortc", ["--server", server.url, "--token", server.token("bob"),
                                                "--answer", "--tone", "880", "--record", s.file("aiortc.wav")]).start())
    await bob.wait_for("note", text="waiting for a call")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--tone-frequency", "523", "--duration", "4",
                                               "--record", s.file("alice.wav")]).start())
    await alice.wait_for("first-audio")
    check(await alice.exit_status() == 0, "the CLI did not exit 0")
    check(await bob.exit_status() == 0, "aiortc did not exit 0 after the CLI hung up")
    near(dominant_frequency(s.file("aiortc.wav")), 523, s.file("aiortc.wav"))
    near(dominant_frequency(s.file("alice.wav")), 880, s.file("alice.wav"))


def heard(expected):
    return lambda state: state.get("remoteFrequency") is not None and abs(state["remoteFrequency"] - expected) <= 5


@scenario
async def browser_calls_cli(s, stack):
    """Headless Chromium running the page served at / calls the CLI: the page's analyser hears
    the CLI's tone, the CLI's recording has the page's tone."""
    server = stack(await Server(s).start())
    bob = await auto_answering_bob(s, stack, server, "--tone-frequency", "330")
    browser = stack(await Chromium(s, f"{server.url}/#token={server.token('alice', 'browser')}"
                                      f"&call=bob&tone=660&hangupAfter=5").start())
    await browser.wait_for("the connected state", lambda st: st["state"] == "connected")
    await browser.wait_for("330 Hz in the analyser", heard(330))
    check(await bob.exit_status() == 0, "the CLI did not exit 0 after the browser hung up")
    state = await browser.wait_for("the end of the call", lambda st: st.get("ended"))
    check(state["ended"] == "local", f"the browser's call ended with {state['ended']}")
    near(dominant_frequency(s.file("bob.wav")), 660, s.file("bob.wav"))


@scenario
async def cli_calls_browser(s, stack):
    """The CLI calls the page in headless Chromium, which answers: audio verified both ways,
    and the CLI's hang-up ends the page's call."""
    server = stack(await Server(s).start())
    browser = stack(await Chromium(s, f"{server.url}/#token={server.token('bob', 'browser')}&answer=auto&tone=660").start())
    await browser.wait_for("sign-in", lambda st: st["state"] == "idle")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--tone-frequency", "523", "--duration", "5",
                                               "--record", s.file("alice.wav")]).start())
    await browser.wait_for("523 Hz in the analyser", heard(523))
    check(await alice.exit_status() == 0, "the CLI did not exit 0")
    state = await browser.wait_for("the end of the call", lambda st: st.get("ended"))
    check(state["ended"] == "hangup", f"the browser's call ended with {state['ended']}")
    near(dominant_frequency(s.file("alice.wav")), 660, s.file("alice.wav"))


async def run(selected):
    failures = 0
    for fn in SCENARIOS:
        if selected and not any(word in fn.__name__ for word in selected):
            continue
        scratch = Scratch()
        stacked = []

        def stack(thing):
            stacked.append(thing)
            return thing

        started = time.monotonic()
        try:
            await asyncio.wait_for(fn(scratch, stack), 90)
            print(f"PASS {fn.__name__} ({time.monotonic() - started:.1f} s)", flush=True)
            ok = True
        except (Failure, asyncio.TimeoutError) as error:
            print(f"FAIL {fn.__name__}: {error or 'timed out'} (logs in {scratch.path})", flush=True)
            ok = False
        finally:
            for thing in reversed(stacked):
                await thing.stop()
        if ok:
            scratch.remove()
        else:
            failures += 1
    return failures


if __name__ == "__main__":
    sys.exit(1 if asyncio.run(run(sys.argv[1:])) else 0)
