"""Group calls through Janus: the server, Janus and every CLI inside one namespace (libnice needs a
non-loopback address; the media never leaves the namespace)."""
import asyncio
import os
import signal

from harness import (Chromium, Janus, MediaNamespace, Server, Softphone, TCPProxy, check, dominant_frequency,
                     dominant_frequency_between, tone_levels, wav_seconds)
from media_checks import member, near, saw_video
from call_scenarios import video_count_reply
from scenarios import scenario, time_limit


async def group_stack(s, stack, ring_timeout=None, extra=()):
    ns = stack(await MediaNamespace().start())
    janus = stack(await Janus(s, ns).start())
    server = stack(await Server(s, netns=ns.NS, ring_timeout=ring_timeout,
                                extra=[*janus.server_args(), *extra]).start())
    return ns, janus, server




def heard_everyone_else(s, tones, user):
    """`user`'s recordings hold every other participant's tone (each in its own file, at its
    frequency) and, mixed, none of `user`'s own."""
    others = [u for u in tones if u != user]
    paths = [s.file(f"{user}-{other}.wav") for other in others]
    for other, path in zip(others, paths):
        check(os.path.exists(path), f"{user} recorded nothing from {other}")
        near(dominant_frequency(path), tones[other], path)
    check(not os.path.exists(s.file(f"{user}-{user}.wav")), f"{user} was sent its own stream")
    levels = tone_levels(paths, list(tones.values()))
    for other in others:
        check(levels[tones[other]] > 0.2, f"{user}: {other}'s {tones[other]} Hz is missing from the mix ({levels})")
    check(levels[tones[user]] < 0.05, f"{user} hears its own {tones[user]} Hz ({levels})")


async def hang_up(creator, *others):
    """The creator ends the call for everyone (its CLI interrupted); every device completes it."""
    creator.interrupt()
    for peer in dict.fromkeys((creator, *others)):
        check(await peer.exit_status() == 0, f"{peer.name} did not complete the call")



async def group_call_of(n, s, stack, extra=()):
    ns, _, server = await group_stack(s, stack)
    names = ["alice", "bob", "carol", "dave", "erin"][:n]
    tones = {name: 330 + 110 * i for i, name in enumerate(names)}
    members = []
    for name in names[1:]:
        peer = member(s, stack, server, ns, name, "--auto", "--tone-frequency", str(tones[name]), *extra)
        await peer.start()
        members.append(peer)
    for peer in members:
        await peer.wait_for("note", text="waiting for a call")
    alice = member(s, stack, server, ns, "alice", "--to", ",".join(names[1:]), "--tone-frequency",
                   str(tones["alice"]), "--duration", "6", "--end-for-all", *extra, command="group call")
    await alice.start()
    for peer in [alice, *members]:
        for other in names:
            if f"{other}-" not in peer.name:
                await peer.wait_for(f"first-audio {other}", timeout=20)
    for peer in [alice, *members]:
        check(await peer.exit_status() == 0, f"{peer.name} did not complete the call")
    for peer in members:
        check(peer.has("ended", reason="ended"), f"{peer.name}: the creator's end did not reach it")
    for name in names:
        heard_everyone_else(s, tones, name)


@scenario
async def group_call_of_three_through_janus(s, stack):
    """Alice rings Bob and Carol; each hears the other two through Janus (on one subscriber
    connection, the default) and none its own tone; Alice ends the call for everyone."""
    await group_call_of(3, s, stack)


@scenario
async def group_call_of_five_through_janus(s, stack):
    """Five softphones, each hearing the other four, each on one connection per other
    participant (`--no-multistream`: twenty receiving connections in all)."""
    await group_call_of(5, s, stack, extra=("--no-multistream",))


async def group_video_counts(peer):
    """How many video frames a group softphone decoded so far from each participant."""
    return (await video_count_reply(peer))["participants"]


async def group_video_flows(peers, senders, frames=30, within=30):
    """Waits until each peer decoded `frames` frames from each of `senders` but itself (an
    eventual condition with a generous deadline, not a rate: a loaded machine decodes fewer fps)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    for peer in peers:
        expected = [s for s in senders if not peer.name.startswith(f"{s}-")]
        while True:
            counts = await group_video_counts(peer)
            if all(counts.get(s, 0) >= frames for s in expected):
                break
            check(loop.time() < deadline, f"{peer.name} decoded only {counts} in {within} s")
            await asyncio.sleep(0.25)


def saw_colour(peer, sender, colour):
    """`peer`'s summary of `sender`'s video: enough frames, at the camera's size, in its colour."""
    video = next((e for e in peer.events if e.get("event") == "participant-video" and e.get("user") == sender), None)
    saw_video(f"{peer.name} (from {sender})", video)
    rgb, c = video["rgb"], {"red": 0, "green": 1, "blue": 2}[colour]
    check(rgb[c] > 200 and all(rgb[i] < 60 for i in range(3) if i != c),
          f"{peer.name}: {sender}'s frames are {rgb}, not {colour}")


async def group_video_call(s, stack, cameras, tones, extra=()):
    """Alice rings the others of `tones` in a video call; the members in `cameras` send that
    solid colour. Returns the peers (Alice first) once each decoded 30 frames from every camera
    but its own and heard everyone else, and Alice ended the call for everyone (^C). `extra`:
    more flags for every softphone (on one subscriber connection, the default, a connection's
    first frame is not told apart by participant: only the per-participant counts are waited
    for; with `--no-multistream` each participant's first frame is)."""
    ns, _, server = await group_stack(s, stack)
    names = list(tones)
    members = []
    for name in names[1:]:
        flags = ["--video", cameras[name]] if name in cameras else []
        peer = member(s, stack, server, ns, name, "--auto", "--tone-frequency", str(tones[name]), *flags, *extra,
                      record=False)
        await peer.start()
        members.append(peer)
    for peer in members:
        await peer.wait_for("note", text="waiting for a call")
    alice = member(s, stack, server, ns, "alice", "--to", ",".join(names[1:]), "--video", cameras["alice"],
                   "--tone-frequency", str(tones["alice"]), "--end-for-all", *extra, record=False,
                   command="group call")
    await alice.start()
    everyone = [alice, *members]
    for peer in everyone:
        for other in names:
            if not peer.name.startswith(f"{other}-"):
                await peer.wait_for(f"first-audio {other}", timeout=30)
                if other in cameras and "--no-multistream" in extra:
                    await peer.wait_for(f"first-video-frame {other}", timeout=30)
    await group_video_flows(everyone, list(cameras))
    alice.proc.send_signal(signal.SIGINT)
    for peer in everyone:
        check(await peer.exit_status() == 0, f"{peer.name} did not complete the call")
    for peer in members:
        check(peer.has("ended", reason="ended"), f"{peer.name}: the creator's end did not reach it")
    return everyone


@scenario
async def group_video_call_of_three_through_janus(s, stack):
    """A video group call: Alice, Bob and Carol each publish a solid-colour camera (VP8) through
    Janus and decode both others' video, at the sender's resolution and in the sender's colour,
    while they hear each other; each receives every participant on a connection of its own
    (`--no-multistream`)."""
    cameras = {"alice": "red", "bob": "green", "carol": "blue"}
    everyone = await group_video_call(s, stack, cameras, {"alice": 550, "bob": 440, "carol": 660},
                                      extra=("--no-multistream",))
    for peer in everyone:
        check(not any(peer.has("participant-video", user=u) for u in cameras if peer.name.startswith(f"{u}-")),
              f"{peer.name} was sent its own video")
        for other, colour in cameras.items():
            if not peer.name.startswith(f"{other}-"):
                saw_colour(peer, other, colour)


@scenario
async def a_group_video_call_on_one_subscriber_connection_each(s, stack):
    """The video call above on one subscriber connection (protocol.md 20.9): each device receives both
    others' audio and VP8 video on its one subscriber connection, each participant's frames
    kept apart by section, at the sender's resolution and in the sender's colour."""
    cameras = {"alice": "red", "bob": "green", "carol": "blue"}
    everyone = await group_video_call(s, stack, cameras, {"alice": 550, "bob": 440, "carol": 660},
                                      extra=("--multistream",))
    for peer in everyone:
        for other, colour in cameras.items():
            if not peer.name.startswith(f"{other}-"):
                saw_colour(peer, other, colour)


@scenario
async def an_audio_only_participant_in_a_group_video_call(s, stack):
    """Carol has no camera in Alice's video call: she still hears both and sees both cameras,
    and they hear her, with no video from her."""
    cameras = {"alice": "red", "bob": "green"}
    alice, bob, carol = await group_video_call(s, stack, cameras, {"alice": 550, "bob": 440, "carol": 660})
    saw_colour(carol, "alice", "red")
    saw_colour(carol, "bob", "green")
    saw_colour(alice, "bob", "green")
    saw_colour(bob, "alice", "red")
    for peer in (alice, bob):
        video = next((e for e in peer.events if e.get("event") == "participant-video" and e.get("user") == "carol"),
                     None)
        check(video is None or video["frames"] == 0, f"{peer.name} decoded video from carol, who has no camera")


@scenario
async def a_participant_leaves_and_the_others_keep_talking(s, stack):
    """Carol leaves after 3 s: Alice and Bob see it, and go on hearing each other."""
    ns, _, server = await group_stack(s, stack)
    bob = member(s, stack, server, ns, "bob", "--auto", "--tone-frequency", "440")
    carol = member(s, stack, server, ns, "carol", "--auto", "--tone-frequency", "660", "--duration", "3")
    await bob.start()
    await carol.start()
    for peer in (bob, carol):
        await peer.wait_for("note", text="waiting for a call")
    alice = member(s, stack, server, ns, "alice", "--to", "bob,carol", "--tone-frequency", "550", "--duration", "9",
                   "--end-for-all", command="group call")
    await alice.start()
    await carol.wait_for("first-audio alice")
    check(await carol.exit_status() == 0, "carol's leave did not complete")
    for peer in (alice, bob):
        await peer.wait_for("participant", user="carol", state="left")
        await peer.wait_for("participant", user="carol", state="stream-ended")
    check(await alice.exit_status() == 0 and await bob.exit_status() == 0, "the call did not complete")
    # After Carol left at ~3 s, Alice and Bob went on talking until ~9 s.
    for path, tone in ((s.file("alice-bob.wav"), 440), (s.file("bob-alice.wav"), 550)):
        check(wav_seconds(path) > 6, f"{path}: only {wav_seconds(path):.1f} s")
        near(dominant_frequency(path), tone, path)


async def audio_counts(peer):
    """How many bytes of audio a group softphone decoded so far from each participant."""
    before = peer.count("audio-count")
    peer.send("audio count")
    await peer.wait_for("audio-count", times=before + 1, timeout=5)
    return [e for e in peer.events if e.get("event") == "audio-count"][-1]["participants"]


async def three_talking_with_carol_behind_a_proxy(s, stack, grace):
    """Alice's group call with Bob and Carol through Janus, everyone hearing everyone, Carol's
    signaling through a TCP proxy that a scenario stops to cut her socket for good."""
    ns, _, server = await group_stack(s, stack, extra=["--reconnect-grace", str(grace)])
    proxy = stack(await TCPProxy(server.port, ns.NS).start())
    bob = member(s, stack, server, ns, "bob", "--auto", "--tone-frequency", "440", record=False)
    carol = stack(Softphone(s, "carol-cli", [
        "answer", "--server", f"http://127.0.0.1:{proxy.port}", "--token", server.token("carol", device="cli", name="Carol"),
        "--auto", "--tone-frequency", "660"], netns=ns.NS))
    for peer in (bob, carol):
        await peer.start()
        await peer.wait_for("note", text="waiting for a call")
    alice = member(s, stack, server, ns, "alice", "--to", "bob,carol", "--tone-frequency", "550", "--duration", "40",
                   "--end-for-all", record=False, command="group call")
    await alice.start()
    for peer, others in ((alice, ("bob", "carol")), (bob, ("alice", "carol")), (carol, ("alice", "bob"))):
        for other in others:
            await peer.wait_for(f"first-audio {other}", timeout=20)
    return ns, proxy, alice, bob, carol


@scenario
async def a_member_gone_past_the_grace_is_cut_out_of_the_media_both_ways(s, stack):
    """Carol's signaling socket dies and never comes back while her softphone keeps its media
    running: after the reconnect grace (3 s here) Alice and Bob see her leave and her stream end,
    and from then on she decodes nothing from them (Janus kicked her, her handles are detached)
    and they nothing from her, while Alice and Bob go on hearing each other."""
    ns, proxy, alice, bob, carol = await three_talking_with_carol_behind_a_proxy(s, stack, grace=3)
    await proxy.stop()  # every later reconnect of Carol's is refused: she is gone for good
    for peer in (alice, bob):
        await peer.wait_for("participant", user="carol", state="left", timeout=15)
        await peer.wait_for("participant", user="carol", state="stream-ended", timeout=10)
    await asyncio.sleep(1)  # what was in flight when the SFU let her go
    first = {peer.name: await audio_counts(peer) for peer in (alice, bob, carol)}
    await asyncio.sleep(2)
    then = {peer.name: await audio_counts(peer) for peer in (alice, bob, carol)}
    check(carol.proc.returncode is None, "carol's softphone stopped: her media must still be running for this test")
    for peer, other in ((alice, "carol"), (bob, "carol"), (carol, "alice"), (carol, "bob")):
        got = then[peer.name].get(other, 0) - first[peer.name].get(other, 0)
        check(got == 0, f"{peer.name} still decoded {got} bytes of {other}'s audio after the grace")
    for peer, other in ((alice, "bob"), (bob, "alice")):
        check(then[peer.name].get(other, 0) > first[peer.name].get(other, 0),
              f"{peer.name} stopped hearing {other} (a control: the call goes on for them)")
    await hang_up(alice, bob)


async def media_cut_both_ways(alice, bob, carol, gone="carol"):
    """From now on `gone` decodes nothing from the others and they nothing from `gone`, while the
    others go on hearing each other (the counts of issue 35's scenario above)."""
    await asyncio.sleep(1)  # what was in flight when the SFU let them go
    first = {peer.name: await audio_counts(peer) for peer in (alice, bob, carol)}
    await asyncio.sleep(2)
    then = {peer.name: await audio_counts(peer) for peer in (alice, bob, carol)}
    check(carol.proc.returncode is None, f"{gone}'s softphone stopped: its media must still be running for this test")
    for peer, other in ((alice, gone), (bob, gone), (carol, "alice"), (carol, "bob")):
        got = then[peer.name].get(other, 0) - first[peer.name].get(other, 0)
        check(got == 0, f"{peer.name} still decoded {got} bytes of {other}'s audio after {gone} was cut out")
    for peer, other in ((alice, "bob"), (bob, "alice")):
        check(then[peer.name].get(other, 0) > first[peer.name].get(other, 0),
              f"{peer.name} stopped hearing {other} (a control: the call goes on for them)")


@scenario
async def the_owner_removes_a_member_who_is_cut_out_of_the_media_both_ways(s, stack):
    """Alice, Bob and Carol talk through Janus; Carol's signaling socket dies (so nothing her
    softphone does can help) and Alice, the owner, removes her at once (`remove carol` on stdin:
    group-remove). Alice and Bob see her removed and her stream end well before any grace (60 s
    here), and from then on she decodes nothing from them and they nothing from her (Janus kicked
    her, her handles are detached), while Alice and Bob go on hearing each other."""
    ns, proxy, alice, bob, carol = await three_talking_with_carol_behind_a_proxy(s, stack, grace=60)
    await proxy.stop()  # Carol cannot hear of her removal: only the SFU can cut her out
    alice.send("remove carol")
    for peer in (alice, bob):
        await peer.wait_for("participant", user="carol", state="removed", timeout=10)
        await peer.wait_for("participant", user="carol", state="stream-ended", timeout=10)
    await media_cut_both_ways(alice, bob, carol)
    await hang_up(alice, bob)


@scenario
async def someone_invited_mid_call_joins_is_heard_and_removed(s, stack):
    """Alice, Bob and Carol talk; mid-call Bob (any member may, by default) rings a fourth person
    in with `invite dave`: Dave's softphone is rung from Bob, answers, hears all three and is heard
    by all three, each at its own tone. Then Alice, the owner, removes Dave: his softphone ends
    with removed (exit 9), the others see it, and go on hearing each other."""
    ns, _, server = await group_stack(s, stack)
    tones = {"alice": 550, "bob": 440, "carol": 660, "dave": 770}
    bob = member(s, stack, server, ns, "bob", "--auto", "--tone-frequency", str(tones["bob"]))
    carol = member(s, stack, server, ns, "carol", "--auto", "--tone-frequency", str(tones["carol"]))
    dave = member(s, stack, server, ns, "dave", "--auto", "--tone-frequency", str(tones["dave"]))
    for peer in (bob, carol, dave):
        await peer.start()
        await peer.wait_for("note", text="waiting for a call")
    alice = member(s, stack, server, ns, "alice", "--to", "bob,carol", "--tone-frequency", str(tones["alice"]),
                   "--duration", "40", "--end-for-all", command="group call")
    await alice.start()
    first = {alice: ("bob", "carol"), bob: ("alice", "carol"), carol: ("alice", "bob")}
    for peer, others in first.items():
        for other in others:
            await peer.wait_for(f"first-audio {other}", timeout=20)
    check(not dave.has("start"), "dave was rung before anyone invited him")
    bob.send("invite dave")
    await dave.wait_for("start", timeout=10)
    for peer, others in ((dave, ("alice", "bob", "carol")), (alice, ("dave",)), (bob, ("dave",)), (carol, ("dave",))):
        for other in others:
            await peer.wait_for(f"first-audio {other}", timeout=20)
    await asyncio.sleep(2)  # a couple of seconds of everyone's tone in every recording
    alice.send("remove dave")
    check(await dave.exit_status() == 9, "dave's softphone did not end with removed (9)")
    check(dave.has("ended", reason="removed"), "dave was not told he was removed")
    for peer in (alice, bob, carol):
        await peer.wait_for("participant", user="dave", state="removed", timeout=10)
        await peer.wait_for("participant", user="dave", state="stream-ended", timeout=10)
    before = {peer.name: await audio_counts(peer) for peer in (alice, bob, carol)}
    await asyncio.sleep(1.5)
    after = {peer.name: await audio_counts(peer) for peer in (alice, bob, carol)}
    for peer, others in first.items():
        for other in others:
            check(after[peer.name].get(other, 0) > before[peer.name].get(other, 0),
                  f"{peer.name} stopped hearing {other} after dave was removed")
    await hang_up(alice, bob, carol)
    for listener, other in [(name, "dave") for name in ("alice", "bob", "carol")] + [
            ("dave", name) for name in ("alice", "bob", "carol")]:
        path = s.file(f"{listener}-{other}.wav")
        check(os.path.exists(path), f"{listener} recorded nothing from {other}")
        near(dominant_frequency(path), tones[other], path)


@scenario
async def group_rings_declined_missed_joined_later_and_elsewhere(s, stack):
    """Bob declines, Carol's ring times out and she joins later by id, Dave's laptop joins and
    his phone stops ringing (joined elsewhere)."""
    ns, _, server = await group_stack(s, stack, ring_timeout=4)
    bob = member(s, stack, server, ns, "bob", record=False)
    carol = member(s, stack, server, ns, "carol", record=False)
    dave_phone = member(s, stack, server, ns, "dave", device="phone", record=False)
    dave_laptop = member(s, stack, server, ns, "dave", "--auto", "--tone-frequency", "440", device="laptop",
                         record=False)
    for peer in (bob, carol, dave_phone, dave_laptop):
        await peer.start()
        await peer.wait_for("note", text="waiting for a call")
    alice = member(s, stack, server, ns, "alice", "--to", "bob,carol,dave", "--tone-frequency", "880",
                   "--duration", "14", "--end-for-all", command="group call")
    await alice.start()
    await bob.wait_for("start")
    bob.send("d")
    check(await bob.exit_status() == 3, "bob's decline did not exit with 3 (declined)")
    await alice.wait_for("participant", user="bob", state="declined")
    check(await dave_phone.exit_status() == 8, "dave's phone did not stop with joined elsewhere (8)")
    await alice.wait_for("participant", user="dave", state="joined")
    check(await carol.exit_status() == 5, "carol's unanswered ring did not end as missed (5)")
    await alice.wait_for("participant", user="carol", state="missed")
    call_id = next(e["text"].split()[-1] for e in alice.events if e.get("event") == "note"
                   and e.get("text", "").startswith("group call "))
    late = member(s, stack, server, ns, "carol", call_id, "--tone-frequency", "660", command="group join")
    await late.start()
    await late.wait_for("first-audio alice")
    await alice.wait_for("participant", user="carol", state="joined")
    await alice.wait_for("first-audio carol")
    check(await alice.exit_status() == 0, "alice's call did not complete")
    # Her recordings are written as her softphone exits.
    check(await late.exit_status() == 0, "carol's late join did not complete")
    near(dominant_frequency(s.file("carol-alice.wav")), 880, s.file("carol-alice.wav"))


@scenario
async def the_creator_cancels_before_anyone_joined(s, stack):
    """Nobody answers; the creator hangs up after 2 s: every ringing device stops with cancelled."""
    ns, _, server = await group_stack(s, stack)
    bob = member(s, stack, server, ns, "bob", record=False)
    await bob.start()
    await bob.wait_for("note", text="waiting for a call")
    alice = member(s, stack, server, ns, "alice", "--to", "bob", "--duration", "2", "--end-for-all",
                   record=False, command="group call")
    await alice.start()
    await bob.wait_for("start")
    check(await bob.exit_status() == 7, "bob's ring did not end as cancelled (7)")
    check(await alice.exit_status() == 0, "alice's cancel failed")


@scenario
async def janus_dying_mid_call_ends_the_call_clearly(s, stack):
    """Janus is killed while three talk: every participant's call ends with media-failed (exit 6)."""
    ns, janus, server = await group_stack(s, stack)
    bob = member(s, stack, server, ns, "bob", "--auto", "--tone-frequency", "440", record=False)
    carol = member(s, stack, server, ns, "carol", "--auto", "--tone-frequency", "660", record=False)
    for peer in (bob, carol):
        await peer.start()
        await peer.wait_for("note", text="waiting for a call")
    alice = member(s, stack, server, ns, "alice", "--to", "bob,carol", "--tone-frequency", "550", record=False,
                   command="group call")
    await alice.start()
    for peer, other in ((alice, "bob"), (bob, "carol"), (carol, "alice")):
        await peer.wait_for(f"first-audio {other}")
    await janus.kill()
    for peer in (alice, bob, carol):
        check(await peer.exit_status(timeout=15) == 6, f"{peer.name} did not end with 6 (failed)")
        check(peer.has("ended", reason="media-failed"), f"{peer.name}: no media-failed")


async def hearing_grows(peers_and_others, pause=1.5):
    """Each (peer, others): `peer` decodes more of each of `others` over `pause` seconds."""
    before = {peer.name: await audio_counts(peer) for peer, _ in peers_and_others}
    await asyncio.sleep(pause)
    after = {peer.name: await audio_counts(peer) for peer, _ in peers_and_others}
    for peer, others in peers_and_others:
        for other in others:
            check(after[peer.name].get(other, 0) > before[peer.name].get(other, 0),
                  f"{peer.name} does not hear {other} ({before[peer.name]} -> {after[peer.name]})")


async def connections_made(peer):
    """The peer connections a group softphone made so far (publisher and receivers)."""
    before = peer.count("audio-count")
    peer.send("audio count")
    await peer.wait_for("audio-count", times=before + 1, timeout=5)
    return [e for e in peer.events if e.get("event") == "audio-count"][-1]["connections"]


@scenario
@time_limit(150)
async def four_on_one_subscriber_connection_each_one_leaves_one_joins(s, stack):
    """Issue 38 item 2 (protocol.md 20.9): Alice, Bob, Carol and Dave each ask for one
    subscriber connection (`--multistream`); each hears the three others at their own tone on
    it. Carol leaves (^C): the others see her stream end on their connection, which Janus
    renegotiates. Alice rings Eve in mid-call: Eve joins, hears the three, and is heard by them
    on the same connections (her sections reuse Carol's). Throughout, every device held exactly
    two peer connections: its publisher and its one subscriber connection."""
    ns, _, server = await group_stack(s, stack)
    tones = {"alice": 550, "bob": 440, "carol": 660, "dave": 770, "eve": 880}
    peers = {name: member(s, stack, server, ns, name, "--auto", "--multistream", "--tone-frequency", str(tone))
             for name, tone in tones.items() if name != "alice"}
    for peer in peers.values():
        await peer.start()
        await peer.wait_for("note", text="waiting for a call")
    alice = member(s, stack, server, ns, "alice", "--to", "bob,carol,dave", "--multistream", "--tone-frequency",
                   str(tones["alice"]), "--duration", "60", "--end-for-all", command="group call")
    await alice.start()
    bob, carol, dave, eve = peers["bob"], peers["carol"], peers["dave"], peers["eve"]
    four = {"alice": alice, "bob": bob, "carol": carol, "dave": dave}
    for name, peer in four.items():
        for other in four:
            if other != name:
                await peer.wait_for(f"first-audio {other}", timeout=30)
    for peer in four.values():
        check(await connections_made(peer) == 2, f"{peer.name} made {await connections_made(peer)} connections, not 2")
    # A couple of seconds of everyone's tone in every recording before Carol goes.
    await hearing_grows([(peer, [o for o in four if o != name]) for name, peer in four.items()], pause=2)

    carol.interrupt()
    check(await carol.exit_status() == 0, "carol's leave did not complete")
    stayed = {"alice": alice, "bob": bob, "dave": dave}
    for peer in stayed.values():
        await peer.wait_for("participant", user="carol", state="left", timeout=10)
        await peer.wait_for("participant", user="carol", state="stream-ended", timeout=10)
    await hearing_grows([(peer, [o for o in stayed if o != name]) for name, peer in stayed.items()])

    alice.send("invite eve")
    await eve.wait_for("start", timeout=10)
    everyone = {**stayed, "eve": eve}
    for name, peer in everyone.items():
        for other in everyone:
            if other != name:
                await peer.wait_for(f"first-audio {other}", timeout=30)
    await hearing_grows([(peer, [o for o in everyone if o != name]) for name, peer in everyone.items()])
    for peer in everyone.values():
        check(await connections_made(peer) == 2, f"{peer.name} made {await connections_made(peer)} connections, not 2")

    await hang_up(alice, *everyone.values())
    for listener in everyone:
        for other in [o for o in tones if o != listener and not (listener == "eve" and o == "carol")]:
            path = s.file(f"{listener}-{other}.wav")
            check(os.path.exists(path), f"{listener} recorded nothing from {other}")
            near(dominant_frequency(path), tones[other], path)
    check(not os.path.exists(s.file("eve-carol.wav")), "eve was offered carol, who had left")


@scenario
@time_limit(120)
async def a_member_whose_signaling_lags_hears_who_takes_over_a_section(s, stack):
    """Issue 38 item 2, the race behind the multistream flake. Janus (1.1.2) sends a sender report
    for each section once a second, under the SSRC its latest offer gave that section: a reused
    section gets its new participant's SSRC as soon as Janus makes the offer, so the report often
    reaches the device before the offer does. webrtcbin 1.22 then files that SSRC's stream under
    the connection's first section for good, whatever the offer says once applied. Here Alice's
    signaling lags her media by 1.2 s (a proxy), so a report always comes first: Bob leaves,
    Dave takes over his section, and Alice must hear Dave (and Carol) at their own tones."""
    ns, _, server = await group_stack(s, stack)
    proxy = stack(await TCPProxy(server.port, ns.NS, delay_ms=1200).start())
    tones = {"alice": 550, "bob": 440, "carol": 660, "dave": 770}
    peers = {name: member(s, stack, server, ns, name, "--auto", "--multistream", "--tone-frequency", str(tone))
             for name, tone in tones.items() if name != "alice"}
    for peer in peers.values():
        await peer.start()
        await peer.wait_for("note", text="waiting for a call")
    bob, carol, dave = peers["bob"], peers["carol"], peers["dave"]
    alice = stack(Softphone(s, "alice-cli", [
        "group call", "--server", f"http://127.0.0.1:{proxy.port}", "--token", server.token("alice", device="cli"),
        "--to", "bob,carol", "--multistream", "--tone-frequency", str(tones["alice"]), "--duration", "60",
        "--end-for-all", "--record", s.file("alice.wav")], netns=ns.NS))
    await alice.start()
    for other in ("bob", "carol"):
        await alice.wait_for(f"first-audio {other}", timeout=30)
    await hearing_grows([(alice, ["bob", "carol"])])

    bob.interrupt()
    check(await bob.exit_status() == 0, "bob's leave did not complete")
    await alice.wait_for("participant", user="bob", state="stream-ended", timeout=10)
    alice.send("invite dave")
    await dave.wait_for("start", timeout=10)
    await alice.wait_for("first-audio dave", timeout=20)
    await hearing_grows([(alice, ["carol", "dave"])])
    await hang_up(alice, carol, dave)
    # Each recording's first second: its ends are silence while Alice's lagging signaling has not
    # yet told her that a section changed hands.
    for other in ("bob", "carol", "dave"):
        path = s.file(f"alice-{other}.wav")
        near(dominant_frequency_between(path, 0, 1), tones[other], path)


def page_hears(expected):
    """A predicate on the page's state: its subscriber connection hears each user at its tone."""
    def check_state(state):
        heard = (state.get("group") or {}).get("heard") or {}
        return all(user in heard and abs(heard[user] - tone) <= 8 for user, tone in expected.items())
    return check_state


async def a_page_in_alices_call(s, stack, make_member, page_url, page_ns, tones, waiting=("bob",), extra=(),
                                duration=60, presence=0):
    """The browser group scenarios' opening: the `waiting` CLI members (`--auto`, each at its tone)
    and Carol's page (softphone.html at `page_url`, a full address with its `#token=`, run in
    `page_ns`; `answer=auto`, one subscriber connection) wait for a call, then Alice calls Bob and
    Carol for `duration` seconds. Returns (alice, the waiting members by name, the page, its state)
    once the page hears Alice and Bob at their tones and both of them decode Carol.
    `make_member(user, *flags, command=...)` makes a CLI member; `extra`: flags for every member;
    `presence`: seconds for the members' presence to reach a cluster's Redis before Alice calls."""
    members = {}
    for user in waiting:
        members[user] = make_member(user, "--auto", *extra, "--tone-frequency", str(tones[user]))
        await members[user].start()
        await members[user].wait_for("note", text="waiting for a call")
    page = stack(await Chromium(s, f"{page_url}&answer=auto&tone={tones['carol']}", page_ns).start())
    await page.wait_for("sign-in", lambda st: st["state"] == "idle")
    if presence:
        await asyncio.sleep(presence)
    alice = make_member("alice", "--to", "bob,carol", *extra, "--tone-frequency", str(tones["alice"]),
                        "--duration", str(duration), "--end-for-all", command="group call")
    await alice.start()
    state = await page.wait_for("alice and bob on the subscriber connection",
                                page_hears({"alice": tones["alice"], "bob": tones["bob"]}))
    for peer in (alice, members["bob"]):
        await peer.wait_for("first-audio carol", timeout=30)
    return alice, members, page, state


@scenario
@time_limit(150)
async def a_browser_on_one_subscriber_connection_in_a_group_call(s, stack):
    """The browser page in a group call through Janus (protocol.md 20.9): Carol's page joins
    Alice's call with Bob (CLIs, `--multistream`) asking for one subscriber connection, hears
    each of them at their own tone on it and is heard by both. Bob leaves and Alice rings Dave
    in: the page's connection is renegotiated (Bob's section inactive, then reused for Dave)
    and it hears Dave; it made exactly two connections, publisher and subscriber."""
    ns, _, server = await group_stack(s, stack)
    tones = {"alice": 550, "bob": 440, "carol": 660, "dave": 770}
    alice, members, page, state = await a_page_in_alices_call(
        s, stack, lambda user, *flags, **kw: member(s, stack, server, ns, user, *flags, **kw),
        f"{server.url}/#token={server.token('carol', 'browser')}", ns.NS, tones, waiting=("bob", "dave"),
        extra=("--multistream",))
    bob, dave = members["bob"], members["dave"]
    check(state["group"]["multistream"], "the server did not grant the page one subscriber connection")
    await hearing_grows([(alice, ["bob", "carol"]), (bob, ["alice", "carol"])], pause=2)

    bob.interrupt()
    check(await bob.exit_status() == 0, "bob's leave did not complete")
    alice.send("invite dave")
    await dave.wait_for("start", timeout=10)
    state = await page.wait_for("dave on the renegotiated connection",
                                page_hears({"alice": tones["alice"], "dave": tones["dave"]}))
    check(state["group"]["connections"] == 2, f"the page made {state['group']['connections']} connections, not 2")
    check(state["group"]["receivers"] == 1, f"the page has {state['group']['receivers']} receiving connections")
    await dave.wait_for("first-audio carol", timeout=30)
    await hearing_grows([(alice, ["dave", "carol"]), (dave, ["alice", "carol"])], pause=2)
    await hang_up(alice, dave)
    await page.wait_for("the end of the call", lambda st: st.get("groupEnded"))
    for listener in ("alice", "bob", "dave"):
        path = s.file(f"{listener}-carol.wav")
        near(dominant_frequency(path), tones["carol"], path)


class RoamingNamespace:
    """A namespace of its own for one member, joined to the media namespace by a veth pair: the
    member reaches the server and Janus at the media namespace's address through a gateway, and
    the test moves its address to another subnet mid-call (Wi-Fi to LTE): every socket and ICE
    candidate bound to the old address dies. Needs root."""

    NS = MediaNamespace.NS.replace("-media", "-roam")
    OLD, NEW = ("10.79.5.1", "10.79.5.2"), ("10.79.6.1", "10.79.6.2")

    def __init__(self, media):
        self.media = media

    @staticmethod
    def _ip(*args):
        import subprocess
        result = subprocess.run(["ip", *args], capture_output=True, text=True)
        check(result.returncode == 0, f"ip {' '.join(args)}: {result.stderr.strip()}")

    async def start(self):
        import subprocess
        subprocess.run(["ip", "netns", "del", self.NS], capture_output=True)
        self._ip("netns", "add", self.NS)
        media, roam = ("netns", "exec", self.media.NS), ("netns", "exec", self.NS)
        self._ip(*roam, "ip", "link", "set", "lo", "up")
        subprocess.run(["ip", "netns", "exec", self.NS, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
                       capture_output=True)
        self._ip(*media, "ip", "link", "add", "rm0", "type", "veth", "peer", "name", "rm1", "netns", self.NS)
        self._ip(*media, "ip", "addr", "add", f"{self.OLD[0]}/24", "dev", "rm0")
        self._ip(*media, "ip", "addr", "add", f"{self.NEW[0]}/24", "dev", "rm0")
        self._ip(*media, "ip", "link", "set", "rm0", "up")
        self._ip(*roam, "ip", "addr", "add", f"{self.OLD[1]}/24", "dev", "rm1")
        self._ip(*roam, "ip", "link", "set", "rm1", "up")
        self._ip(*roam, "ip", "route", "add", "default", "via", self.OLD[0])
        return self

    def move(self):
        """The member's address changes: the new one comes, the old one (and its route) goes."""
        roam = ("netns", "exec", self.NS)
        self._ip(*roam, "ip", "addr", "add", f"{self.NEW[1]}/24", "dev", "rm1")
        self._ip(*roam, "ip", "addr", "del", f"{self.OLD[1]}/24", "dev", "rm1")
        self._ip(*roam, "ip", "route", "replace", "default", "via", self.NEW[0])

    async def stop(self):
        import subprocess
        subprocess.run(["ip", "netns", "del", self.NS], capture_output=True)


async def audio_rates(peers_and_others, pause=2):
    """Bytes of decoded audio per second each (peer, other) gets now."""
    before = {peer.name: await audio_counts(peer) for peer, _ in peers_and_others}
    await asyncio.sleep(pause)
    after = {peer.name: await audio_counts(peer) for peer, _ in peers_and_others}
    return {(peer.name, other): (after[peer.name].get(other, 0) - before[peer.name].get(other, 0)) / pause
            for peer, others in peers_and_others for other in others}


async def hearing_grows_by(peers_and_others, rates, seconds, within):
    """Each (peer, others): `peer` decodes at least `seconds` of audio more of each of `others`
    (at the rate `rates` measured before) within `within` seconds: an eventual condition.
    Returns how long it took."""
    loop = asyncio.get_running_loop()
    before = {peer.name: await audio_counts(peer) for peer, _ in peers_and_others}
    started = loop.time()
    deadline = started + within
    while True:
        now = {peer.name: await audio_counts(peer) for peer, _ in peers_and_others}
        missing = [(peer.name, other, now[peer.name].get(other, 0) - before[peer.name].get(other, 0))
                   for peer, others in peers_and_others for other in others
                   if now[peer.name].get(other, 0) - before[peer.name].get(other, 0)
                   < seconds * rates[(peer.name, other)]]
        if not missing:
            return loop.time() - started
        check(loop.time() < deadline, f"no audio back within {within} s (listener, speaker, bytes): {missing}")
        await asyncio.sleep(0.5)


async def a_member_moves_network_mid_call(s, stack, extra=()):
    """Alice (creator), Bob and Carol talk through Janus; Carol's softphone runs in a namespace
    of its own. Mid-call her address moves to another subnet: her signaling reconnects, each of
    her connections is replaced (webrtcbin cannot restart ICE in place: a fresh publisher
    connection, `group-offer` with `restart: connection`, and `group-restart` for what she
    receives), and the others get her feed again. Measured: after the move, Alice and Bob each
    decode seconds more of Carol's audio and Carol of theirs, and the tail of every recording
    holds the right tones."""
    ns = stack(await MediaNamespace().start())
    roam = stack(await RoamingNamespace(ns).start())
    janus = stack(await Janus(s, ns).start())
    server = stack(await Server(s, netns=ns.NS, host=ns.ADDR, extra=janus.server_args()).start())
    tones = {"alice": 550, "bob": 440, "carol": 660}
    bob = member(s, stack, server, ns, "bob", "--auto", "--tone-frequency", str(tones["bob"]), *extra)
    carol = member(s, stack, server, roam, "carol", "--auto", "--tone-frequency", str(tones["carol"]), *extra)
    for peer in (bob, carol):
        await peer.start()
        await peer.wait_for("note", text="waiting for a call")
    alice = member(s, stack, server, ns, "alice", "--to", "bob,carol", "--tone-frequency", str(tones["alice"]),
                   "--duration", "90", "--end-for-all", *extra, command="group call")
    await alice.start()
    everyone = {"alice": alice, "bob": bob, "carol": carol}
    for name, peer in everyone.items():
        for other in everyone:
            if other != name:
                await peer.wait_for(f"first-audio {other}", timeout=30)
    around_carol = [(alice, ["carol"]), (bob, ["carol"]), (carol, ["alice", "bob"])]
    rates = await audio_rates(around_carol)
    check(all(rate > 0 for rate in rates.values()), f"not everyone hears carol and is heard by her: {rates}")
    connections_before = await connections_made(carol)

    moved = asyncio.get_running_loop().time()
    roam.move()
    await carol.wait_for("note", text="network changed: reconnecting signaling", timeout=10)
    # What was already on its way when the path died has played out by now.
    await asyncio.sleep(1.5)
    await hearing_grows_by(around_carol, rates, seconds=3, within=45)
    # (3 s of audio each way, counted from 1.5 s after the change was noticed.)
    print(f"  {'per-feed' if '--no-multistream' in extra else 'multistream'}: 3 s of audio back both ways "
          f"{asyncio.get_running_loop().time() - moved:.1f} s after the move", flush=True)
    await hearing_grows([(alice, ["bob"]), (bob, ["alice"])])
    # Each of Carol's connections was replaced by a fresh one (webrtcbin cannot restart ICE), and
    # the others were offered her new feed.
    connections_after = await connections_made(carol)
    check(connections_after >= 2 * connections_before,
          f"carol made {connections_after} connections in all, {connections_before} before the move")
    for peer in (alice, bob):
        check(peer.has("participant", user="carol", state="stream-ended"),
              f"{peer.name} never saw carol's old stream end")
    check(all(peer.has("participant", user="carol", state="joined") and
              not peer.has("participant", user="carol", state="left") for peer in (alice, bob)),
          "carol left the call")

    await hang_up(alice, *everyone.values())
    for name in everyone:
        heard_everyone_else(s, tones, name)


@scenario
@time_limit(180)
async def a_member_moves_network_mid_group_call(s, stack):
    """Issue 38 item 3, one connection per feed (`--no-multistream`): see
    a_member_moves_network_mid_call."""
    await a_member_moves_network_mid_call(s, stack, extra=("--no-multistream",))


@scenario
@time_limit(180)
async def a_member_moves_network_on_one_subscriber_connection(s, stack):
    """Issue 38 item 3 on one subscriber connection (protocol.md 20.9): Carol's single subscriber
    connection is replaced by a new subscription, and the others' subscriber connections drop
    her sections and take her new feed in two renegotiations."""
    await a_member_moves_network_mid_call(s, stack, extra=("--multistream",))


@scenario
@time_limit(180)
async def a_browser_moves_network_mid_group_call(s, stack):
    """Issue 38 item 3 on the web softphone (protocol.md 20.10): Carol's page (one subscriber
    connection) talks with Alice and Bob (CLIs); its address moves mid-call. The page restarts
    ICE in place: its publisher offers new credentials (`group-offer` with `restart: ice`) and
    its subscriber connection asks for them (`group-restart`). Alice and Bob decode seconds
    more of Carol, and the page hears both again."""
    ns = stack(await MediaNamespace().start())
    roam = stack(await RoamingNamespace(ns).start())
    janus = stack(await Janus(s, ns).start())
    server = stack(await Server(s, netns=ns.NS, host=ns.ADDR, extra=janus.server_args()).start())
    # The page is served from 127.0.0.1 (a secure context) of its own namespace.
    proxy = stack(await TCPProxy(server.port, roam.NS, host=ns.ADDR).start())
    tones = {"alice": 550, "bob": 440, "carol": 660}
    alice, members, page, _ = await a_page_in_alices_call(
        s, stack, lambda user, *flags, **kw: member(s, stack, server, ns, user, *flags, **kw),
        f"http://127.0.0.1:{proxy.port}/#token={server.token('carol', 'browser')}", roam.NS, tones,
        extra=("--multistream",), duration=90)
    bob = members["bob"]
    rates = await audio_rates([(alice, ["carol"]), (bob, ["carol"])])
    check(all(rate > 0 for rate in rates.values()), f"carol's page is not heard: {rates}")

    roam.move()
    # Its signaling socket died with the old address (the CLI's path watch notices that itself).
    await proxy.cut()
    await page.wait_for("both of its connections restarted", lambda st: st["group"]["iceRestarts"] >= 2, timeout=40)
    await hearing_grows_by([(alice, ["carol"]), (bob, ["carol"])], rates, seconds=3, within=45)
    mark = (await page.page_state())["group"]["readings"]
    await page.wait_for("alice and bob again", lambda st: all(
        st["group"]["readings"].get(user, 0) >= mark.get(user, 0) + 8 for user in ("alice", "bob")), timeout=30)
    state = await page.page_state()
    check(state["group"]["connections"] == 2, f"the page made {state['group']['connections']} connections, not 2")
    await hang_up(alice, bob)
    for listener in ("alice", "bob"):
        path = s.file(f"{listener}-carol.wav")
        near(dominant_frequency(path), tones["carol"], path)
