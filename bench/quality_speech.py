"""The speech that bench/quality_bench.py sends: Harvard sentences (IEEE 1969, public domain)
spoken by espeak-ng in two voices taking turns (a lower male US voice and a higher female
British one), 16 kHz mono 16-bit, made at run time with espeak-ng and sox and cached under
.build/bench-quality/ by a hash of everything that shapes it.

- `reference`: the speech alone (what the receiver's recording is scored against), peak at
  −3 dBFS, each sentence followed by 0.45 s of silence, about 14.5 s;
- `switch reference`: longer speech (different sentences, so that no stretch repeats) for the
  network switch, about 33 s;
- `sent file`: a reference with digital silence before it (`lead`: the call sets up while it
  plays) and after it (`tail`): what the senders play (`dialtone --audio`, Chromium's
  --use-file-for-fake-audio-capture).
"""
import hashlib
import os
import shutil
import subprocess
import tempfile
import wave

RATE = 16000
VOICES = ("en-us+m3", "en-gb+f3")
WORDS_PER_MINUTE = 165
PAUSE_S = 0.45
SENTENCES = (
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It is easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.",
)
SWITCH_SENTENCES = (
    "The box was thrown beside the parked truck.",
    "The hogs were fed chopped corn and garbage.",
    "Four hours of steady work faced us.",
    "A large size in stockings is hard to sell.",
    "The boy was there when the sun rose.",
    "A rod is used to catch pink salmon.",
    "The source of the huge river is the clear spring.",
    "Kick the ball straight and follow through.",
    "Help the woman get back to her feet.",
    "A pot of tea helps to pass the evening.",
    "Smoky fires lack flame and heat.",
    "The soft cushion broke the man's fall.",
)


class SpeechError(Exception):
    pass


def _run(args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise SpeechError(f"{' '.join(args[:2])}: {result.stderr.strip()[-300:]}")


def _tools():
    missing = [tool for tool in ("espeak-ng", "sox") if not shutil.which(tool)]
    if missing:
        raise SpeechError(f"{', '.join(missing)} missing: run `scripts/deps.sh bench`")


def _speak(sentences, path):
    """Every sentence in turn by the two voices, resampled to 16 kHz, with its pause, joined and
    normalised to a −3 dBFS peak."""
    _tools()
    with tempfile.TemporaryDirectory(prefix="dialtone-speech-") as scratch:
        parts = []
        for n, sentence in enumerate(sentences):
            raw = os.path.join(scratch, f"raw{n}.wav")
            part = os.path.join(scratch, f"part{n}.wav")
            _run(["espeak-ng", "-v", VOICES[n % len(VOICES)], "-s", str(WORDS_PER_MINUTE), "-w", raw, sentence])
            _run(["sox", raw, "-r", str(RATE), "-c", "1", "-b", "16", part, "pad", "0", str(PAUSE_S)])
            parts.append(part)
        _run(["sox", *parts, path, "norm", "-3"])


def _padded(source, path, lead, tail):
    _run(["sox", source, path, "pad", str(lead), str(tail)])


def _cached(folder, key, make):
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:12]
    path = os.path.join(folder, f"{key[0]}-{digest}.wav")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        temporary = path + ".part.wav"
        make(temporary)
        os.replace(temporary, path)
    return path


def espeak_version():
    try:
        return subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return None


def samples(folder, lead, tail):
    """{name: path}: the references and the files the senders play (see the module docstring)."""
    version = espeak_version()
    shape = (VOICES, WORDS_PER_MINUTE, PAUSE_S, RATE, version)
    reference = _cached(folder, ("speech", SENTENCES, shape), lambda p: _speak(SENTENCES, p))
    switch = _cached(folder, ("switch-speech", SWITCH_SENTENCES, shape), lambda p: _speak(SWITCH_SENTENCES, p))
    return {"reference": reference, "switch_reference": switch,
            "sent": _cached(folder, ("sent", reference, lead, tail), lambda p: _padded(reference, p, lead, tail)),
            "switch_sent": _cached(folder, ("switch-sent", switch, lead, tail),
                                   lambda p: _padded(switch, p, lead, tail))}


def seconds(path):
    with wave.open(path) as w:
        return w.getnframes() / w.getframerate()
