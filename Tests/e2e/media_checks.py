"""What several topics' scenarios share: test tones, frequency and video checks, softphones that
answer or join."""
import os

from harness import Softphone, check


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


def member(s, stack, server, ns, user, *flags, device="cli", command="answer", record=True):
    args = [command, "--server", server.url, "--token", server.token(user, device=device), *flags]
    if record:
        args += ["--record", s.file(f"{user}.wav")]
    return stack(Softphone(s, f"{user}-{device}", args, netns=ns.NS))


def saw_video(peer_name, video, frames=30):
    check(video is not None, f"{peer_name} reported no video")
    check(video["frames"] >= frames, f"{peer_name}: only {video['frames']} video frames")
    check((video["width"], video["height"]) == (640, 360), f"{peer_name}: frames of {video['width']}x{video['height']}")
