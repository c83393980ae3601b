"""1:1 calls between the browser page (headless Chromium) and the CLI, audio and video, H.264, upgrades."""
from harness import Chromium, MediaNamespace, Server, Softphone, check, dominant_frequency
from media_checks import auto_answering_bob, near, saw_video
from call_scenarios import video_count_reply, frames_grow
from scenarios import scenario


def heard(expected):
    return lambda state: state.get("remoteFrequency") is not None and abs(state["remoteFrequency"] - expected) <= 5


@scenario
async def browser_calls_cli(s, stack):
    """Headless Chromium running the page served at / calls the CLI: the page's analyser hears
    the CLI's tone, the CLI's recording has the page's tone."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--tone-frequency", "330", netns=ns.NS)
    browser = stack(await Chromium(s, f"{server.url}/#token={server.token('alice', 'browser')}"
                                      f"&call=bob&tone=660&hangupAfter=5", ns.NS).start())
    await browser.wait_for("the connected state", lambda st: st["state"] == "connected")
    await browser.wait_for("330 Hz in the analyser", heard(330))
    check(await bob.exit_status() == 0, "the CLI did not exit 0 after the browser hung up")
    state = await browser.wait_for("the end of the call", lambda st: st.get("ended"))
    check(state["ended"] == "local", f"the browser's call ended with {state['ended']}")
    near(dominant_frequency(s.file("bob.wav")), 660, s.file("bob.wav"))




async def auto_answering_page(s, stack, server, ns):
    """Bob's page in headless Chromium, answering every call with a 660 Hz tone (and its fake
    camera when the call has video), returned once it is signed in."""
    page = stack(await Chromium(s, f"{server.url}/#token={server.token('bob', 'browser')}&answer=auto&tone=660",
                                ns.NS).start())
    await page.wait_for("sign-in", lambda st: st["state"] == "idle")
    return page


async def page_sees(page, colour, name):
    """Waits for a page's first 30 remote frames and checks they are the CLI's solid `colour`
    (0 red, 1 green, 2 blue); returns the page's state."""
    state = await page.wait_for("30 video frames", lambda st: st.get("videoFrames", 0) >= 30 and st.get("videoColour"))
    rgb = state["videoColour"]
    check(rgb[colour] > 180 and all(rgb[i] < 70 for i in range(3) if i != colour),
          f"the page's frames are not the CLI's {name}: {rgb}")
    return state


@scenario
async def browser_video_calls_cli(s, stack):
    """Chromium (fake camera) makes a video call to the CLI: each side decodes the other's VP8
    at 640x360; the page sees the CLI's blue pattern."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--tone-frequency", "330", "--video", "blue", netns=ns.NS)
    browser = stack(await Chromium(s, f"{server.url}/#token={server.token('alice', 'browser')}"
                                      f"&call=bob&tone=660&video=1&hangupAfter=5", ns.NS).start())
    await page_sees(browser, 2, "blue")
    # The CLI's first picture is sized for the start bitrate; it climbs to 640x360 within seconds.
    await browser.wait_for("the CLI's camera size", lambda st: (st.get("videoWidth"), st.get("videoHeight")) == (640, 360),
                           timeout=15)
    check(await bob.exit_status() == 0, "the CLI did not exit 0 after the browser hung up")
    saw_video("bob", bob.find("video"))


@scenario
async def browser_calls_cli_in_h264(s, stack):
    """H.264 with Chromium: the page calls a CLI that prefers H.264, which answers Chromium's
    offer (VP8 first) with it; both sides decode the other's frames, the CLI reports H.264."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--video", "blue", "--video-codec", "h264", netns=ns.NS)
    browser = stack(await Chromium(s, f"{server.url}/#token={server.token('alice', 'browser')}"
                                      f"&call=bob&tone=660&video=1", ns.NS).start())
    await page_sees(browser, 2, "blue")
    await frames_grow(bob, 0, by=30, within=10, what="the CLI decoded no H.264 from the page")
    check((await video_count_reply(bob)).get("codec") == "h264", "the page's call was not H.264")
    await browser.evaluate('document.getElementById("hangup").click()')
    check(await bob.exit_status() == 0, "the CLI did not exit 0 after the browser hung up")


@scenario
async def cli_calls_browser_in_h264(s, stack):
    """The CLI calls the page offering H.264 only: Chromium answers H.264, frames both ways."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    callee = await auto_answering_page(s, stack, server, ns)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--video", "red", "--video-codec", "h264"],
                                  netns=ns.NS).start())
    await page_sees(callee, 0, "red")
    await frames_grow(alice, 0, by=30, within=10, what="the CLI decoded no H.264 from the page")
    check((await video_count_reply(alice)).get("codec") == "h264", "the CLI's call was not H.264")
    alice.interrupt()
    check(await alice.exit_status(timeout=30) == 0, "the CLI's call did not complete")


@scenario
async def browser_and_cli_upgrade_an_audio_call(s, stack):
    """The page calls the CLI (audio). The page turns video on: the CLI is told and decodes the
    fake camera; the CLI turns its video on: the page sees its blue; the page's camera off and
    on reach the CLI (media-state); the page goes back to audio: the CLI is told."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await auto_answering_bob(s, stack, server, "--tone-frequency", "330", "--camera", "blue", netns=ns.NS)
    browser = stack(await Chromium(s, f"{server.url}/#token={server.token('alice', 'browser')}"
                                      f"&call=bob&tone=660", ns.NS).start())
    await browser.wait_for("the connected state", lambda st: st["state"] == "connected")
    await browser.wait_for("330 Hz in the analyser", heard(330))
    check(not (await browser.page_state())["remoteVideo"], "an audio call showed video")
    await browser.evaluate('document.getElementById("videoToggle").click()')
    await bob.wait_for("remote-video", on=True)
    await frames_grow(bob, 0, by=20, within=10, what="the CLI got no video after the page's upgrade")
    bob.send("video on")
    state = await browser.wait_for("the CLI's blue", lambda st: st["remoteVideo"] and st.get("videoFrames", 0) >= 20
                                   and st.get("videoColour") and st["videoColour"][2] > 180)
    check(state["sendsVideo"], "the page stopped sending after the CLI's upgrade")
    await browser.evaluate('document.getElementById("cameraToggle").click()')
    await bob.wait_for("remote-camera", on=False)
    await browser.evaluate('document.getElementById("cameraToggle").click()')
    await bob.wait_for("remote-camera", on=True)
    await browser.evaluate('document.getElementById("videoToggle").click()')
    await bob.wait_for("remote-video", on=False, timeout=15)
    await browser.wait_for("330 Hz after the renegotiations", heard(330))
    await browser.evaluate('document.getElementById("hangup").click()')
    check(await bob.exit_status() == 0, "the CLI did not exit 0 after the browser hung up")


@scenario
async def cli_upgrades_a_call_with_the_browser(s, stack):
    """The CLI calls the page (audio) and turns video on: the page shows its red frames."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    browser = await auto_answering_page(s, stack, server, ns)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--camera", "red"],
                                  netns=ns.NS).start())
    await alice.wait_for("first-audio")
    alice.send("video on")
    await browser.wait_for("the CLI's red", lambda st: st["remoteVideo"] and st.get("videoFrames", 0) >= 20
                           and st.get("videoColour") and st["videoColour"][0] > 180)
    # The upgrade's fresh connection starts at the size for the start bitrate (480x270) and
    # climbs to the camera's on the first rate steps (VideoResolutionLadder).
    await browser.wait_for("the CLI's camera size", lambda st: (st.get("videoWidth"), st.get("videoHeight")) == (640, 360),
                           timeout=15)
    alice.interrupt()
    check(await alice.exit_status(timeout=30) == 0, "the CLI's call did not complete")


@scenario
async def cli_video_calls_browser(s, stack):
    """The CLI makes a video call to the page (which answers with its fake camera): frames both ways."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    browser = await auto_answering_page(s, stack, server, ns)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--video", "red", "--duration", "5"], netns=ns.NS).start())
    await page_sees(browser, 0, "red")
    check(await alice.exit_status() == 0, "the CLI did not exit 0")
    saw_video("alice", alice.find("video"))


@scenario
async def cli_calls_browser(s, stack):
    """The CLI calls the page in headless Chromium, which answers: audio verified both ways,
    and the CLI's hang-up ends the page's call."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    browser = await auto_answering_page(s, stack, server, ns)
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--tone-frequency", "523", "--duration", "5",
                                               "--record", s.file("alice.wav")], netns=ns.NS).start())
    await browser.wait_for("523 Hz in the analyser", heard(523))
    check(await alice.exit_status() == 0, "the CLI did not exit 0")
    state = await browser.wait_for("the end of the call", lambda st: st.get("ended"))
    check(state["ended"] == "hangup", f"the browser's call ended with {state['ended']}")
    near(dominant_frequency(s.file("alice.wav")), 660, s.file("alice.wav"))
