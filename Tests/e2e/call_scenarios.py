"""1:1 calls between CLI softphones (GStreamer), aiortc and each other: pre-connect, video, files,
TURN, dead paths and signaling, outcomes."""
import asyncio
import os
import time

from harness import (Coturn, MediaNamespace, NamespaceLink, Server, Softphone, TCPProxy, WireCounter, aiortc_peer,
                     check, dominant_frequency, eventually, wav_seconds)
from media_checks import auto_answering_bob, member, near, saw_video, write_tone_wav
from scenarios import scenario


@scenario
async def cli_calls_cli(s, stack):
    """Two CLI peers through the server: tone both ways, data channel both ways, hang-up ends both."""
    await two_clis_talk(s, stack)


@scenario
async def cli_calls_cli_without_preconnect(s, stack):
    """The same with a caller that does not pre-connect (`--no-preconnect`, like a client
    without 9b) and a callee that would: the invite does not ask for it, so the call goes
    today's way, with no leg on either side."""
    alice, bob = await two_clis_talk(s, stack, caller_flags=("--no-preconnect",))
    check(not bob.has("preconnected") and not alice.has("preconnected"), "a leg was made without pre-connect")


async def two_clis_talk(s, stack, caller_flags=()):
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--tone-frequency", "330", netns=ns.NS)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--tone-frequency", "523", "--duration", "4",
                                               "--record", s.file("alice.wav"), *caller_flags], netns=ns.NS).start())
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
    # Whoever hung up: the final figures, the speech estimate of a clean link (protocol.md
    # 7.19), media over UDP, and RED negotiated between two Dialtone devices (AudioSDP).
    for peer in (alice, bob):
        ended = peer.find("ended")
        mos = (ended.get("quality") or {}).get("mos")
        check(mos is not None and 3.5 <= mos <= 4.5, f"{peer.name}'s speech estimate: {ended}")
        stats = ended.get("stats") or {}
        check(stats.get("transport") == "udp" and stats.get("audioCodec") == "red", f"{peer.name}'s media: {stats}")
    return alice, bob


@scenario
async def preconnect_answer_only_switches_media_on(s, stack):
    """Pre-connect (protocol.md 11): Bob's CLI asks for a leg while it rings and Alice's makes
    it; ICE and DTLS complete before Bob answers, neither side hears anything before Answer, and
    Answer gives audio both ways on that leg. (No TURN here: Bob's leg gathers every candidate,
    --no-private-preconnect; privacy_scenarios.py has the private legs.)"""
    ns = stack(await MediaNamespace().start())
    wire = stack(await WireCounter(ns).start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = stack(await Softphone(s, "bob", ["answer", "--server", server.url, "--token", server.token("bob"),
                                           "--preconnect", "--no-private-preconnect", "--tone-frequency", "330",
                                           "--record", s.file("bob.wav")], netns=ns.NS).start())
    await bob.wait_for("note", text="waiting for a call")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--preconnect", "--tone-frequency", "523",
                                               "--duration", "3", "--record", s.file("alice.wav")],
                                  netns=ns.NS).start())
    await bob.wait_for("note", text="press Enter to answer, or type d and Enter to decline")
    await alice.wait_for("preconnected", device="cli")
    await bob.wait_for("preconnected", device="")
    await asyncio.sleep(1)  # it rings on with the leg up: nothing may be heard meanwhile
    check(not bob.has("first-audio") and not alice.has("first-audio"), "audio crossed before Answer")
    ringing = await wire.counts()
    check(ringing["dtls"] > 0 and ringing["rtp"] == 0, f"RTP crossed the wire before Answer: {ringing}")
    answered_at = time.time()
    bob.send("")
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not exit 0")
    talked = await wire.counts()
    check(talked["rtp"] > 100, f"too little RTP on the wire after Answer (is the counter blind?): {talked}")
    for peer in (alice, bob):
        heard = peer.time_of("first-audio")
        check(heard is not None and heard > answered_at, f"{peer.name} heard audio before Answer")
    near(dominant_frequency(s.file("bob.wav")), 523, s.file("bob.wav"))
    near(dominant_frequency(s.file("alice.wav")), 330, s.file("alice.wav"))


@scenario
async def preconnect_declined_call_never_sends_audio(s, stack):
    """Pre-connect, then Bob declines: the leg was up for the whole ring, yet not one RTP
    packet crossed the wire in either direction, neither side decoded audio, and both end
    declined."""
    ns = stack(await MediaNamespace().start())
    wire = stack(await WireCounter(ns).start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = stack(await Softphone(s, "bob", ["answer", "--server", server.url, "--token", server.token("bob"),
                                           "--preconnect", "--no-private-preconnect", "--tone-frequency", "330"],
                                netns=ns.NS).start())
    await bob.wait_for("note", text="waiting for a call")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--preconnect", "--tone-frequency", "523"],
                                  netns=ns.NS).start())
    await alice.wait_for("preconnected", device="cli")
    await bob.wait_for("preconnected", device="")
    await asyncio.sleep(1.5)
    bob.send("d")
    check(await bob.exit_status() == 3, "bob did not end declined (exit 3)")
    check(await alice.exit_status() == 3, "alice did not end declined (exit 3)")
    seen = await wire.counts()
    check(seen["dtls"] > 0, f"the leg never connected (no DTLS on the wire): {seen}")
    check(seen["rtp"] == 0, f"RTP crossed the wire in a declined call: {seen}")
    check(not bob.has("first-audio") and not alice.has("first-audio"), "audio was decoded in a declined call")


@scenario
async def preconnect_three_devices_ring_and_one_answers(s, stack):
    """Pre-connect with forking: three of Bob's devices ring and each gets its own leg from
    Alice; the laptop answers, the call has audio both ways, and the phone and the tablet end
    answered-elsewhere (their legs closed) without ever hearing Alice."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    devices = {}
    for device in ("phone", "tablet", "laptop"):
        devices[device] = await member(s, stack, server, ns, "bob", "--preconnect", "--no-private-preconnect",
                                       "--tone-frequency", "330", device=device,
                                       record=(device == "laptop")).start()
    for peer in devices.values():
        await peer.wait_for("note", text="waiting for a call")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--preconnect", "--tone-frequency", "523",
                                               "--duration", "3", "--record", s.file("alice.wav")],
                                  netns=ns.NS).start())
    for device, peer in devices.items():
        await peer.wait_for("preconnected", device="")
        await alice.wait_for("preconnected", device=device)
    devices["laptop"].send("")
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await devices["laptop"].exit_status() == 0, "the laptop did not exit 0")
    for device in ("phone", "tablet"):
        check(await devices[device].exit_status() == 8, f"the {device} did not end answered-elsewhere (exit 8)")
        check(not devices[device].has("first-audio"), f"the {device} heard Alice without answering")
    near(dominant_frequency(s.file("alice.wav")), 330, s.file("alice.wav"))


@scenario
async def preconnect_losing_legs_release_their_turn_allocations(s, stack):
    """Pre-connect relay-only through coturn: every leg allocates a relay while it rings
    (one per connection: one interface in the namespace); once the laptop answers, the
    losing legs, the phone's, the tablet's and Alice's for them, release theirs (a Refresh with
    lifetime 0) while the call goes on on one allocation each, and the hang-up releases the last two."""
    ns = stack(await MediaNamespace().start())
    turn = stack(await Coturn(s, ns, verbose=True).start())
    server = stack(await Server(s, netns=ns.NS, turn=turn).start())
    devices = {}
    for device in ("phone", "tablet", "laptop"):
        devices[device] = await member(s, stack, server, ns, "bob", "--preconnect", "--relay-only",
                                       "--tone-frequency", "330", device=device, record=(device == "laptop")).start()
    for peer in devices.values():
        await peer.wait_for("note", text="waiting for a call")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--preconnect", "--relay-only", "--tone-frequency",
                                               "523", "--duration", "6"], netns=ns.NS).start())
    for device, peer in devices.items():
        await peer.wait_for("preconnected", device="")
        await alice.wait_for("preconnected", device=device)
    ringing = turn.allocations()
    check(ringing["bob"]["live"] >= 3 and ringing["alice"]["live"] >= 3,
          f"the legs did not allocate relays while ringing: {ringing}")
    devices["laptop"].send("")
    await devices["laptop"].wait_for("first-audio")
    for device in ("phone", "tablet"):
        check(await devices[device].exit_status() == 8, f"the {device} did not end answered-elsewhere (exit 8)")
    def one_relay_each():
        live = turn.allocations()
        return live["alice"]["live"] == 1 and live["bob"]["live"] == 1
    await eventually(one_relay_each, 10, "release of the losing legs' relays (one live allocation each)")
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await devices["laptop"].exit_status() == 0, "the laptop did not exit 0")
    ended = turn.allocations()
    check(ended["alice"]["live"] == 0 and ended["bob"]["live"] == 0, f"the call's relays outlived it: {ended}")
    check(not devices["phone"].has("first-audio") and not devices["tablet"].has("first-audio"),
          "a losing device heard Alice")


@scenario
async def cli_sends_a_wav_file(s, stack):
    """--audio FILE.wav: the callee hears the file (a 750 Hz tone written here)."""
    ns = stack(await MediaNamespace().start())
    write_tone_wav(s.file("tone.wav"), 750, seconds=6)
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, netns=ns.NS)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--audio", s.file("tone.wav"), "--duration", "3"], netns=ns.NS).start())
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not exit 0")
    near(dominant_frequency(s.file("bob.wav")), 750, s.file("bob.wav"))


@scenario
async def cli_video_call_cli(s, stack):
    """A VP8 video call between two CLIs: each decodes the other's camera (a solid test pattern)
    at its resolution and frame rate, recognisably that sender's colour, while audio flows."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--video", "blue", "--tone-frequency", "330", netns=ns.NS)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--video", "red", "--duration", "4",
                                               "--record", s.file("alice.wav"),
                                               "--record-video", s.file("alice.webm")], netns=ns.NS).start())
    for peer in (alice, bob):
        await peer.wait_for("first-video-frame")
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not exit 0")
    for peer, colour in ((alice, 2), (bob, 0)):  # alice sees bob's blue, bob sees alice's red
        video = peer.find("video")
        # A count, not a rate: a loaded CI machine decodes fewer than 30 fps, but a stream
        # that kept flowing for the call delivers far more than one second's worth.
        saw_video(peer.name, video)
        rgb = video["rgb"]
        if peer is alice:  # the side that hangs up reports the call's stats: video figures apart
            figures = peer.find("ended")["stats"].get("video") or {}
            check(figures.get("bytesSent", 0) > 0 and figures.get("bytesReceived", 0) > 0
                  and figures.get("framesDecoded", 0) > 0 and figures.get("targetBitrate", 0) >= 100_000
                  and figures.get("framesPerSecond", 0) > 0, f"alice's video stats: {figures}")
        check(rgb[colour] > 200 and all(rgb[i] < 60 for i in range(3) if i != colour),
              f"{peer.name}: the frames' colour {rgb} is not the sender's pattern")
    near(dominant_frequency(s.file("alice.wav")), 330, s.file("alice.wav"))
    # --record-video: a WebM that GStreamer demuxes and decodes back to Bob's frames.
    frames, size = decode_webm(s.file("alice.webm"))
    check(frames >= 30 and size == (640, 360), f"alice.webm: {frames} frames of {size}")


def decode_webm(path, demuxer="matroskademux", decoder=("vp8dec",)):
    """Frames and last size of a WebM's VP8 track (or, with tsdemux, h264parse and openh264dec, an
    MPEG-TS file's H.264), decoded by gst-launch (gstreamer1.0-tools)."""
    import re
    import subprocess
    check(os.path.exists(path) and os.path.getsize(path) > 0, f"{path} was not written")
    steps = [x for d in decoder for x in ("!", d)]
    result = subprocess.run(
        ["gst-launch-1.0", "-v", "filesrc", f"location={path}", "!", demuxer, *steps, "!",
         "fakesink", "silent=false"], capture_output=True, text=True, timeout=60)
    check(result.returncode == 0, f"{path} does not decode: {result.stderr.strip()[-300:]}")
    frames = result.stdout.count("chain   ******* (fakesink0:sink)")
    # The size the recording ends at: it starts at the first picture's, which is sized for the
    # start bitrate (VideoResolutionLadder), and changes with the sender's.
    sizes = re.findall(r"width=\(int\)(\d+), height=\(int\)(\d+)", result.stdout)
    return frames, (int(sizes[-1][0]), int(sizes[-1][1])) if sizes else None


@scenario
async def cli_h264_video_call_cli(s, stack):
    """H.264 (OpenH264) between two CLIs: Alice offers H.264 only, Bob (who prefers VP8) answers
    it; each decodes the other's colour, the call's stats name the codec, and Alice's recording
    is an MPEG-TS file of Bob's H.264 that decodes back to his frames."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--video", "blue", netns=ns.NS)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--video", "red", "--video-codec", "h264",
                                               "--duration", "4", "--record-video", s.file("alice.ts")],
                                  netns=ns.NS).start())
    for peer in (alice, bob):
        await peer.wait_for("first-video-frame")
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not exit 0")
    for peer, colour in ((alice, 2), (bob, 0)):
        video = peer.find("video")
        saw_video(peer.name, video)
        rgb = video["rgb"]
        check(rgb[colour] > 200 and all(rgb[i] < 60 for i in range(3) if i != colour),
              f"{peer.name}: the frames' colour {rgb} is not the sender's pattern")
    figures = alice.find("ended")["stats"].get("video") or {}
    check(figures.get("codec") == "H264" and figures.get("framesDecoded", 0) > 0, f"alice's video stats: {figures}")
    frames, size = decode_webm(s.file("alice.ts"), demuxer="tsdemux", decoder=("h264parse", "openh264dec"))
    check(frames >= 30 and size == (640, 360), f"alice.ts: {frames} frames of {size}")


@scenario
async def cli_sends_a_video_file(s, stack):
    """--video FILE: the camera is a video file (a green WebM written here with gst-launch),
    scaled to --video-size: Bob decodes green frames at that size."""
    import subprocess
    movie = s.file("green.webm")
    subprocess.run(["gst-launch-1.0", "-q", "videotestsrc", "num-buffers=150", "pattern=green", "!",
                    "video/x-raw,width=320,height=240,framerate=30/1", "!", "vp8enc", "deadline=1", "!",
                    "webmmux", "!", "filesink", f"location={movie}"], check=True, timeout=60)
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--video", "blue", netns=ns.NS)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--video", movie, "--video-size", "480x270",
                                               "--video-fps", "15"], netns=ns.NS).start())
    await bob.wait_for("first-video-frame")
    await frames_grow(bob, 0, by=20, within=15, what="the file's frames did not keep arriving")
    reply = await video_count_reply(bob)
    rgb = reply["rgb"]
    # videotestsrc's green, through two VP8 encodings and their YUV conversions: ~190.
    check(rgb[1] > 150 and rgb[0] < 60 and rgb[2] < 60, f"bob's frames are not the file's green: {rgb}")
    alice.interrupt()
    check(await alice.exit_status() == 0 and await bob.exit_status() == 0, "the call did not complete")
    video = bob.find("video")
    check((video["width"], video["height"]) == (480, 270), f"bob got {video['width']}x{video['height']}")


async def video_count_reply(peer):
    """Sends a softphone `video count` and returns its reply (the `video-count` event)."""
    before = sum(1 for e in peer.events if e.get("event") == "video-count")
    peer.send("video count")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while sum(1 for e in peer.events if e.get("event") == "video-count") == before:
        check(peer.proc.returncode is None and not peer.has("ended"),
              f"{peer.name} was asked for its frame count after its call ended")
        check(loop.time() < deadline, f"{peer.name} did not count its frames")
        await asyncio.sleep(0.05)
    return [e for e in peer.events if e.get("event") == "video-count"][-1]


async def video_count(peer):
    """How many video frames a softphone decoded so far."""
    return (await video_count_reply(peer))["frames"]


async def frames_grow(peer, start, by, within, what):
    """Waits until a softphone decoded `by` more frames than `start` (an eventual condition,
    not a rate: the deadline is generous)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while (count := await video_count(peer)) - start < by:
        check(loop.time() < deadline, f"{what} ({count - start} in {within} s)")
        await asyncio.sleep(0.25)


@scenario
async def camera_off_and_on_mid_call(s, stack):
    """Alice turns her camera off mid-call: Bob is told (media-state) and her frames stop; on
    again: he is told and they resume (a keyframe first), with no renegotiation."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--video", "blue", netns=ns.NS)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--video", "red"], netns=ns.NS).start())
    await bob.wait_for("first-video-frame")
    await asyncio.sleep(1)
    alice.send("camera off")
    await bob.wait_for("remote-camera", on=False)
    await asyncio.sleep(0.5)
    off_start = await video_count(bob)
    await asyncio.sleep(1.5)
    off_end = await video_count(bob)
    check(off_end - off_start <= 3, f"frames kept arriving with the camera off ({off_end - off_start} in 1.5 s)")
    check((await video_count_reply(bob))["fps"] == 0, "bob's frame rate did not fall to 0 with the camera off")
    alice.send("camera on")
    await bob.wait_for("remote-camera", on=True)
    await frames_grow(bob, off_end, by=20, within=5, what="frames did not resume after the camera came back")
    check(not alice.has("ice-disconnected") and not bob.has("ice-disconnected"), "the media path was disturbed")
    alice.interrupt()
    check(await alice.exit_status() == 0 and await bob.exit_status() == 0, "the call did not complete")


async def colour_of(peer):
    """The mean colour of the latest frame a softphone decoded, from its `video count` reply."""
    return (await video_count_reply(peer)).get("rgb")


@scenario
async def an_audio_call_is_upgraded_to_video_and_back(s, stack):
    """An audio call between CLIs with cameras: Alice turns video on (renegotiated) and Bob sees
    her red frames; Bob turns his on too and Alice sees blue; Alice goes back to audio and her
    frames stop while Bob's keep coming; audio flows throughout and the call completes."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--camera", "blue", "--tone-frequency", "330", netns=ns.NS)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--camera", "red",
                                               "--record", s.file("alice.wav")], netns=ns.NS).start())
    await alice.wait_for("first-audio")
    check(await video_count(bob) == 0, "video flowed in an audio call")
    alice.send("video on")
    await bob.wait_for("remote-video", on=True)
    await frames_grow(bob, 0, by=20, within=10, what="Bob got no video after Alice's upgrade")
    rgb = await colour_of(bob)
    check(rgb[0] > 200 and rgb[2] < 60, f"Bob's frames {rgb} are not Alice's red")
    bob.send("video on")
    await alice.wait_for("remote-video", on=True)
    await frames_grow(alice, 0, by=20, within=10, what="Alice got no video after Bob's upgrade")
    rgb = await colour_of(alice)
    check(rgb[2] > 200 and rgb[0] < 60, f"Alice's frames {rgb} are not Bob's blue")
    alice.send("video off")
    await bob.wait_for("remote-video", on=False)
    await frames_grow(alice, await video_count(alice), by=20, within=10, what="Bob's video stopped with Alice's")
    stopped = await video_count(bob)
    await asyncio.sleep(1.5)
    check(await video_count(bob) - stopped <= 2, "Alice's frames kept arriving after she went back to audio")
    alice.interrupt()
    check(await alice.exit_status(timeout=40) == 0 and await bob.exit_status() == 0, "the call did not complete")
    near(dominant_frequency(s.file("alice.wav")), 330, s.file("alice.wav"))


@scenario
async def both_sides_upgrade_at_once(s, stack):
    """Alice and Bob turn video on at the same moment (glare): the caller's offer wins, the
    callee's change follows it, and each ends up seeing the other's camera."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--camera", "blue", netns=ns.NS)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--camera", "red"],
                                  netns=ns.NS).start())
    await alice.wait_for("first-audio")
    await bob.wait_for("first-audio")
    alice.send("video on")
    bob.send("video on")
    for peer, colour in ((alice, 2), (bob, 0)):
        await peer.wait_for("remote-video", on=True, timeout=15)
        await frames_grow(peer, 0, by=20, within=10, what=f"{peer.name} got no video")
        rgb = await colour_of(peer)
        check(rgb[colour] > 200, f"{peer.name}'s frames {rgb} are not the other side's camera")
    alice.interrupt()
    check(await alice.exit_status(timeout=40) == 0 and await bob.exit_status() == 0, "the call did not complete")


@scenario
async def relay_only_through_coturn(s, stack):
    """Both peers relay-only, TURN credentials from the server: the selected pair is relay/relay."""
    ns = stack(await MediaNamespace().start())
    turn = stack(await Coturn(s, ns).start())
    server = stack(await Server(s, netns=ns.NS, turn=turn).start())
    bob = await auto_answering_bob(s, stack, server, "--relay-only", netns=ns.NS)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--relay-only", "--tone-frequency", "440",
                                               "--duration", "3"], netns=ns.NS).start())
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
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    proxy = stack(await TCPProxy(server.port, ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, url=f"http://127.0.0.1:{proxy.port}", netns=ns.NS)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--tone-frequency", "600", "--duration", "6"], netns=ns.NS).start())
    await bob.wait_for("first-audio")
    await asyncio.sleep(1)
    await proxy.cut()
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
async def video_follows_a_narrow_link(s, stack):
    """A 640x360 test pattern that needs ~0.7 Mbit/s, sent over a 300 kbit/s link with 50 ms RTT:
    the sender lowers its target below the cap from the receiver's reports, and the receiver
    keeps decoding frames instead of freezing on lost keyframes."""
    link = stack(await NamespaceLink(s, rtt_ms=50, rate_kbps=300).start())
    server = stack(await Server(s, netns=link.NS_B, host=link.ADDR_B).start())
    bob = await auto_answering_bob(s, stack, server, netns=link.NS_B)
    # No --duration: a loaded machine may take long to the first frame, and the call must not end
    # before the checks do. Alice hangs up (^C) when they are done.
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--video", "smpte"], netns=link.NS_A).start())
    await bob.wait_for("first-video-frame", timeout=30)
    await asyncio.sleep(8)  # the controller settles under the cap
    await frames_grow(bob, await video_count(bob), by=30, within=20, what="video froze on the narrow link")
    alice.interrupt()
    check(await alice.exit_status(timeout=40) == 0, "alice's call did not complete")
    figures = alice.find("ended")["stats"].get("video") or {}
    check(0 < figures.get("targetBitrate", 0) <= 300_000, f"the sender did not follow the link: {figures}")
    # Fewer pixels rather than a picture the encoder cannot fill (VideoResolutionLadder).
    check(await bob.exit_status(timeout=40) == 0, "bob's call did not complete")
    video = bob.find("video")
    check(video and video["width"] < 640, f"the sender kept 640x360 on a 300 kbit/s link: {video}")


@scenario
async def video_both_ways_over_a_narrow_link(s, stack):
    """Both sides send the busy pattern over 300 kbit/s each way (50 ms RTT), so each side's
    feedback crosses a link full of the other's video: the transport-wide feedback still
    reaches both senders, they step down in rate and size, and both receivers keep decoding."""
    link = stack(await NamespaceLink(s, rtt_ms=50, rate_kbps=300).start())
    server = stack(await Server(s, netns=link.NS_B, host=link.ADDR_B).start())
    bob = await auto_answering_bob(s, stack, server, "--video", "smpte", netns=link.NS_B)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--video", "smpte"], netns=link.NS_A).start())
    for peer in (alice, bob):
        await peer.wait_for("first-video-frame", timeout=30)
    await asyncio.sleep(6)  # both controllers settle under the cap
    for peer in (alice, bob):
        await frames_grow(peer, await video_count(peer), by=30, within=20, what=f"{peer.name}'s video froze")
    alice.interrupt()
    check(await alice.exit_status(timeout=40) == 0, "alice's call did not complete")
    check(await bob.exit_status(timeout=40) == 0, "bob's call did not complete")
    for peer in (alice, bob):
        video = peer.find("video")
        check(video and video["width"] < 640, f"{peer.name} still got 640x360 over 300 kbit/s: {video}")
    figures = alice.find("ended")["stats"].get("video") or {}
    check(0 < figures.get("targetBitrate", 0) <= 300_000, f"alice's sender did not follow the link: {figures}")


@scenario
async def declined_missed_and_busy_calls_exit_with_their_status(s, stack):
    """Declined: the caller exits 3 (and so does the callee who declined). Missed after the
    ring timeout: both exit 5. Busy: calling someone who is in a call exits 4."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS, ring_timeout=2).start())
    bob = stack(await Softphone(s, "bob", ["answer", "--server", server.url, "--token", server.token("bob")], netns=ns.NS).start())
    await bob.wait_for("note", text="waiting for a call")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob"], netns=ns.NS).start())
    await bob.wait_for("note", text="press Enter to answer, or type d and Enter to decline")
    bob.send("d")
    check(await alice.exit_status() == 3, "a declined call did not exit 3 for the caller")
    check(await bob.exit_status() == 3, "declining did not exit 3 for the callee")

    carol = stack(await Softphone(s, "carol", ["answer", "--server", server.url, "--token", server.token("carol")], netns=ns.NS).start())
    await carol.wait_for("note", text="waiting for a call")
    dave = stack(await Softphone(s, "dave", ["call", "--server", server.url, "--token", server.token("dave"),
                                             "--to", "carol"], netns=ns.NS).start())
    check(await dave.exit_status() == 5, "an unanswered call did not exit 5 (missed)")
    check(await carol.exit_status() == 5, "the unanswered callee did not exit 5 (missed)")

    erin = stack(await Softphone(s, "erin", ["answer", "--server", server.url, "--token", server.token("erin"),
                                             "--auto"], netns=ns.NS).start())
    await erin.wait_for("note", text="waiting for a call")
    frank = stack(await Softphone(s, "frank", ["call", "--server", server.url, "--token", server.token("frank"),
                                               "--to", "erin", "--duration", "30"], netns=ns.NS).start())
    await frank.wait_for("connected")
    grace = stack(await Softphone(s, "grace", ["call", "--server", server.url, "--token", server.token("grace"),
                                               "--to", "erin"], netns=ns.NS).start())
    check(await grace.exit_status() == 4, "calling a user in a call did not exit 4 (busy)")


@scenario
async def aiortc_calls_cli(s, stack):
    """aiortc (our protocol.md client in Python) calls the CLI: audio verified both ways."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--tone-frequency", "330", netns=ns.NS)
    alice = stack(await aiortc_peer(s, "aiortc", ["--server", server.url, "--token", server.token("alice"),
                                                  "--call", "bob", "--tone", "700", "--duration", "4",
                                                  "--record", s.file("aiortc.wav")], ns.NS).start())
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
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = stack(await aiortc_peer(s, "aiortc", ["--server", server.url, "--token", server.token("bob"),
                                                "--answer", "--tone", "880", "--record", s.file("aiortc.wav")], ns.NS).start())
    await bob.wait_for("note", text="waiting for a call")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--tone-frequency", "523", "--duration", "4",
                                               "--record", s.file("alice.wav")], netns=ns.NS).start())
    await alice.wait_for("first-audio")
    check(await alice.exit_status() == 0, "the CLI did not exit 0")
    check(await bob.exit_status() == 0, "aiortc did not exit 0 after the CLI hung up")
    near(dominant_frequency(s.file("aiortc.wav")), 523, s.file("aiortc.wav"))
    near(dominant_frequency(s.file("alice.wav")), 880, s.file("alice.wav"))


@scenario
async def a_call_that_carries_no_media_exits_failed(s, stack):
    """aiortc answers and connects (ICE, DTLS) but sends nothing: the CLI's call ends as
    `failed` with reason "no media" (exit 6), not as a completed call."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = stack(await aiortc_peer(s, "aiortc", ["--server", server.url, "--token", server.token("bob"),
                                                "--answer", "--silent"], ns.NS).start())
    await bob.wait_for("note", text="waiting for a call")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--duration", "3"], netns=ns.NS).start())
    await alice.wait_for("connected")
    check(await alice.exit_status() == 6, "a call without media did not exit 6 (failed)")
    ended = alice.find("ended")
    check(ended and ended.get("reason") == "no media", f"the call ended with {ended}")


@scenario
async def aiortc_and_cli_video_both_ways(s, stack):
    """aiortc video-calls the CLI, then the CLI video-calls aiortc: each decodes the other's
    VP8 at 640x360 in the sender's colour."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--video", "blue", netns=ns.NS)
    alice = stack(await aiortc_peer(s, "aiortc", ["--server", server.url, "--token", server.token("alice"),
                                                  "--call", "bob", "--video", "green", "--duration", "4"],
                                    ns.NS).start())
    check(await alice.exit_status() == 0, "aiortc did not exit 0")
    check(await bob.exit_status() == 0, "the CLI did not exit 0 after aiortc hung up")
    for peer, channel in ((alice, 2), (bob, 1)):  # aiortc sees the CLI's blue, the CLI aiortc's green
        video = peer.find("video")
        saw_video(peer.name, video)
        check(video["rgb"][channel] > 180 and all(video["rgb"][i] < 70 for i in range(3) if i != channel),
              f"{peer.name}: the frames' colour {video['rgb']} is not the sender's")

    carol = stack(await aiortc_peer(s, "aiortc-answer", ["--server", server.url, "--token", server.token("carol"),
                                                         "--answer", "--video", "red"], ns.NS).start())
    await carol.wait_for("note", text="waiting for a call")
    dave = stack(await Softphone(s, "dave", ["call", "--server", server.url, "--token", server.token("dave"),
                                             "--to", "carol", "--video", "green", "--duration", "4"],
                                 netns=ns.NS).start())
    check(await dave.exit_status() == 0, "the CLI did not exit 0")
    check(await carol.exit_status() == 0, "aiortc did not exit 0 after the CLI hung up")
    for peer, channel in ((carol, 1), (dave, 0)):
        video = peer.find("video")
        saw_video(peer.name, video)
        check(video["rgb"][channel] > 180 and all(video["rgb"][i] < 70 for i in range(3) if i != channel),
              f"{peer.name}: the frames' colour {video['rgb']} is not the sender's")
