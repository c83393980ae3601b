"""Scoring for bench/quality_bench.py: what a receiver recorded against the speech that was sent.

- `load`: a WAV file as float mono at 16 kHz (resampled with a polyphase filter: the CLI and
  the page both record at 48 kHz).
- `score`: aligns a recording to the reference by cross-correlation, cuts the reference's
  length from where it starts, and scores that with PESQ (ITU-T P.862.2 wideband, PyPI `pesq`)
  and ViSQOL 3 in speech mode (PyPI `visqol-python`; its deep-lattice mapper, as the C++
  ViSQOL's default, when `ai-edge-litert` is installed, else its polynomial fallback, which
  reads 1–2 points high: the result says which). It also measures the received duration: the
  recording's distance between where the reference's first and last 4 s windows align, over
  the reference's. 1.00 is a recorder that kept time; below 1 audio never came (a stall that
  a recorder writing as it decodes closes up, as the CLI's `--record` does), above 1 the
  receiver played more than was sent (concealment inserted, a jitter buffer growing).
- `heard`: the network-switch analysis. Short windows of the recording are located in the
  reference one by one (normalised cross-correlation); the reference time they cover is what
  was heard. The gap is the longest stretch of reference time between two heard windows (it
  includes up to one inter-sentence pause, 0.45 s, at each side); `lost_speech_s` adds up the
  reference's speech-active time after the first heard window that was never heard.

    python3 bench/quality_score.py REFERENCE.wav RECORDING.wav [--heard]
"""
import argparse
import json
import math
import os
import sys
import wave
from fractions import Fraction

import numpy as np
from scipy.signal import correlate, resample_poly

RATE = 16000
WINDOW_S = 4.0           # the start and end windows that place the reference in a recording
MIN_PEAK = 0.25          # a normalised correlation below this places nothing
_visqol = None


class ScoreError(Exception):
    pass


def load(path, rate=RATE):
    """A 16-bit PCM WAV file (mono or stereo) as float64 mono in [-1, 1] at `rate`."""
    with wave.open(path) as w:
        if w.getsampwidth() != 2:
            raise ScoreError(f"{path}: {8 * w.getsampwidth()}-bit, expected 16-bit PCM")
        channels, source_rate, frames = w.getnchannels(), w.getframerate(), w.readframes(w.getnframes())
    x = np.frombuffer(frames, dtype="<i2").astype(np.float64) / 32768.0
    if channels > 1:
        x = x.reshape(-1, channels).mean(axis=1)
    if source_rate != rate and len(x):
        ratio = Fraction(rate, source_rate)
        x = resample_poly(x, ratio.numerator, ratio.denominator)
    return x


def write(path, x, rate=RATE):
    pcm = (np.clip(x, -1, 1 - 1 / 32768) * 32768).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())


def locate(recording, window):
    """Where `window` best matches inside `recording` (it may hang over either end): (index of
    the window's first sample in the recording, normalised correlation there)."""
    if len(recording) == 0 or not np.any(window):
        return None, 0.0
    c = correlate(recording, window, mode="full", method="fft")
    # The recording's energy under each placement, for the normalisation.
    energy = np.concatenate(([0.0], np.cumsum(recording * recording)))
    n, m = len(recording), len(window)
    starts = np.arange(len(c)) - (m - 1)
    lo = np.clip(starts, 0, n)
    hi = np.clip(starts + m, 0, n)
    under = energy[hi] - energy[lo]
    norm = np.sqrt(np.maximum(under, 1e-12) * float(np.dot(window, window)))
    # Placements that overlap the recording by less than a quarter of the window are noise.
    valid = (hi - lo) >= m // 4
    score = np.where(valid, c / norm, 0.0)
    best = int(np.argmax(score))
    return int(starts[best]), float(score[best])


def visqol_api():
    global _visqol
    if _visqol is None:
        import logging
        import warnings
        logging.getLogger("visqol").setLevel(logging.ERROR)
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        from visqol import VisqolApi
        api = VisqolApi()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            api.create(mode="speech")
        lattice = bool(getattr(api._manager, "use_lattice_model", False))
        _visqol = (api, "lattice" if lattice else "polynomial")
    return _visqol


def score(reference, recording, with_visqol=True):
    """The scores of one received recording (float arrays at 16 kHz); see the module docstring."""
    from pesq import pesq, PesqError
    result = {"recorded_s": round(len(recording) / RATE, 3), "reference_s": round(len(reference) / RATE, 3)}
    w = int(WINDOW_S * RATE)
    if len(recording) < RATE or len(reference) <= 2 * w:
        result["error"] = "recording too short"
        return result
    start, peak_start = locate(recording, reference[:w])
    end, peak_end = locate(recording, reference[-w:])
    result.update(start_peak=round(peak_start, 3), end_peak=round(peak_end, 3))
    if start is None or peak_start < MIN_PEAK:
        result["error"] = f"the speech's start is not in the recording (correlation {peak_start:.2f})"
        return result
    # Where the recording starts, in the reference's time: negative is before the speech (the
    # media came in time); positive means the first words were never received.
    result["speech_missed_at_start_s"] = round(max(0, -start) / RATE, 3)
    if end is not None and peak_end >= MIN_PEAK:
        result["duration_ratio"] = round((end - start) / (len(reference) - w), 4)
    degraded = np.zeros(len(reference))
    lo, hi = max(0, start), min(len(recording), start + len(reference))
    if hi > lo:
        degraded[lo - start:hi - start] = recording[lo:hi]
    result["received_in_window_s"] = round((hi - lo) / RATE, 3)
    try:
        result["pesq_wb"] = round(float(pesq(RATE, reference, degraded, "wb")), 3)
    except PesqError as error:
        result["pesq_error"] = str(error)
    if with_visqol:
        api, mapper = visqol_api()
        try:
            result["visqol"] = round(float(api.measure_from_arrays(reference, degraded, RATE).moslqo), 3)
            result["visqol_mapper"] = mapper
        except (ValueError, RuntimeError) as error:
            result["visqol_error"] = str(error)
    return result


def active(x, frame, threshold_db=-45.0):
    """Per frame of `frame` samples: does it hold speech (RMS above the threshold, relative to
    the signal's loudest frame)?"""
    frames = len(x) // frame
    if frames == 0:
        return np.zeros(0, dtype=bool)
    rms = np.sqrt(np.mean(x[:frames * frame].reshape(frames, frame) ** 2, axis=1) + 1e-20)
    return 20 * np.log10(rms / max(rms.max(), 1e-10)) > threshold_db


def heard(reference, recording, window_s=0.3, hop_s=0.15, min_peak=0.5):
    """What of the reference a recording holds, window by window (see the module docstring)."""
    rate = RATE // 2     # 8 kHz is plenty to place speech, and four times cheaper
    ref, rec = resample_poly(reference, 1, 2), resample_poly(recording, 1, 2)
    n, hop = int(window_s * rate), int(hop_s * rate)
    rec_active = active(rec, hop)
    spans = []                      # (reference start s, recording start s, correlation)
    for i in range(0, max(0, len(rec) - n), hop):
        if not rec_active[i // hop: i // hop + n // hop].any():
            continue
        at, peak = locate(ref, rec[i:i + n])   # this piece of the recording, in the reference
        if at is None or peak < min_peak or at < 0 or at + n > len(ref):
            continue
        spans.append((at / rate, i / rate, peak))
    result = {"windows": len(spans), "reference_s": round(len(ref) / rate, 3)}
    if not spans:
        result["error"] = "nothing of the reference was found in the recording"
        return result
    # The heard reference time, as a union of intervals.
    intervals = sorted((s, s + window_s) for s, _, _ in spans)
    merged = [list(intervals[0])]
    for s, e in intervals[1:]:
        if s <= merged[-1][1] + 1e-9:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    holes = [(a[1], b[0]) for a, b in zip(merged, merged[1:])]
    largest = max(holes, key=lambda h: h[1] - h[0]) if holes else None
    ref_frames = active(ref, hop)
    heard_frames = np.zeros(len(ref_frames), dtype=bool)
    for s, e in merged:
        heard_frames[int(s * rate) // hop: int(math.ceil(e * rate / hop))] = True
    first = int(merged[0][0] * rate) // hop
    lost = np.logical_and(ref_frames[first:], ~heard_frames[first:len(ref_frames)]).sum() * hop / rate
    result.update(first_heard_s=round(merged[0][0], 3), last_heard_s=round(merged[-1][1], 3),
                  gap_s=round(largest[1] - largest[0], 3) if largest else 0.0,
                  gap_at_s=round(largest[0], 3) if largest else None,
                  lost_speech_s=round(float(lost), 3), holes=[[round(a, 2), round(b, 2)] for a, b in holes])
    return result


def main():
    parser = argparse.ArgumentParser(description="Score a recording against a reference (16 kHz WAV).")
    parser.add_argument("reference")
    parser.add_argument("recording")
    parser.add_argument("--heard", action="store_true", help="the network-switch analysis instead")
    parser.add_argument("--no-visqol", action="store_true")
    args = parser.parse_args()
    reference, recording = load(args.reference), load(args.recording)
    result = heard(reference, recording) if args.heard else score(reference, recording, not args.no_visqol)
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
