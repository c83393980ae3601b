"""Scoring for bench/quality_bench.py: what a receiver recorded against the speech that was sent.

- `load`: a WAV file as float mono at 16 kHz (resampled with a polyphase filter: the CLI and
  the page both record at 48 kHz).
- `track`: where each 1 s speech window of the reference lies in a recording, by spectral shape
  (band energies, correlated over the window's speech frames only): robust to loss concealment
  and to a receiver stretching time (NetEQ does while its buffer settles), which sink a waveform
  correlation, and to pauses, which make any two windows alike by their envelopes alone.
- `score`: cuts the reference's span out of the recording, from where its speech begins (with
  0.1 s of margin, and room for the offset to move along the way), and scores it with PESQ
  (ITU-T P.862.2 wideband, PyPI `pesq`) and ViSQOL 3 in speech mode (PyPI `visqol-python`; its
  deep-lattice mapper, the C++ ViSQOL's default, when `ai-edge-litert` is installed, else its
  polynomial fallback, which reads 1–2 points high: the result says which). It also gives the
  received duration: how far apart the first and last placed windows are in the recording, over
  how far apart they are in the reference. 1.000 is a receiver that kept time; below 1, audio
  that never came was closed up (a recorder writing as it decodes, as the CLI's `--record`
  does, hides a stall that way: PESQ, which realigns each utterance, barely notices, ViSQOL
  does) or time was compressed; above 1, the receiver played more than was sent. And
  `speech_missed_at_start_s`: a recording that begins after the speech did (the call was set
  up too late for the first words; the bench does not score those and calls again).
- `heard`: the network-switch analysis. The (longer) reference's 1 s windows, every 0.25 s,
  are placed in the recording; placed windows less than 0.6 s apart form runs (a pause between
  sentences is 0.45 s), and runs shorter than 1.5 s do not count (a few packets through a dying
  path). The gap is the longest stretch of reference time between two runs, to about ±0.3 s;
  speech that never came back is reported as `recovered: false` with the time from the last
  run to the end of the speech.

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
from scipy.signal import correlate, resample_poly, stft

RATE = 16000
PAUSE_TAIL_S = 0.45      # the silence after a reference's last sentence (quality_speech.PAUSE_S)
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


FRAME_HOP_S = 0.01          # spectral frames every 10 ms (25 ms long)
BANDS = np.geomspace(100, 7000, 25)
FLOOR_DB = -100.0


def features(x):
    """Log energies (dB) of 24 bands from 100 Hz to 7 kHz, 25 ms frames every 10 ms: what a
    receiver's concealment and time stretching keep while they change the waveform's timing."""
    frame, hop = int(0.025 * RATE), int(FRAME_HOP_S * RATE)
    if len(x) < frame:
        return np.zeros((0, len(BANDS) - 1))
    f, _, z = stft(x, fs=RATE, nperseg=frame, noverlap=frame - hop, boundary=None, padded=False)
    power = np.abs(z) ** 2
    bands = np.stack([power[(f >= lo) & (f < hi)].sum(axis=0) for lo, hi in zip(BANDS[:-1], BANDS[1:])], axis=1)
    return np.maximum(10 * np.log10(bands + 1e-12), FLOOR_DB)


def speech_frames(f, below_peak_db=45.0):
    """Frames whose loudest band is within `below_peak_db` of the signal's loudest: speech."""
    loudest = f.max(axis=1) if len(f) else np.zeros(0)
    return loudest > (loudest.max() if len(loudest) else 0) - below_peak_db


def locate_speech(recording_features, window_features, window_speech):
    """Where a reference window lies in a recording, by spectral shape: the Pearson correlation
    of their band energies over the window's speech frames only (pauses would otherwise
    dominate, and every pause looks like every other), at each 10 ms placement; the window may
    hang over either end of the recording. (frame index of the window's start, which may be
    negative, and the correlation there)."""
    r_f, w_f, mask = recording_features, window_features, window_speech.astype(float)
    m, k = len(w_f), int(window_speech.sum())
    if len(r_f) == 0 or k < 10:
        return None, 0.0
    pad = np.full((m, r_f.shape[1]), FLOOR_DB)
    padded = np.concatenate((pad, r_f, pad))
    centred = np.zeros_like(w_f)
    centred[window_speech] = w_f[window_speech] - w_f[window_speech].mean(axis=0)
    products = np.zeros(len(padded) - m + 1)
    spread = np.zeros(len(padded) - m + 1)
    for band in range(w_f.shape[1]):
        column = padded[:, band]
        products += correlate(column, centred[:, band], mode="valid", method="fft")
        sums = correlate(column, mask, mode="valid", method="fft")
        squares = correlate(column * column, mask, mode="valid", method="fft")
        spread += squares - sums * sums / k
    r = products / np.sqrt(np.maximum(spread, 1e-9) * float((centred * centred).sum()))
    best = int(np.argmax(r))
    return best - m, float(r[best])


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


def track(reference, recording, window_s=1.0, hop_s=0.5, min_r=0.8, until_s=None):
    """Where each speech window of the reference (`window_s` long, every `hop_s`) lies in the
    recording (up to `until_s` of the reference), by spectral shape (locate_speech):
    [(reference time s, offset s, correlation)],
    offset being the recording's time minus the reference's. Windows under 40 % speech place
    nothing. On this speech, 1 s windows of the reference match other places of itself at
    r ≤ 0.75, so `min_r` 0.8 keeps chance matches out; a window whose offset agrees with
    neither neighbour's (within 0.2 s) is dropped as well."""
    ref_f, rec_f = features(reference), features(recording)
    speech = speech_frames(ref_f)
    n, hop = int(round(window_s / FRAME_HOP_S)), max(1, int(round(hop_s / FRAME_HOP_S)))
    placed = []
    last = len(ref_f) - n + 1 if until_s is None else min(len(ref_f) - n + 1, int(until_s / FRAME_HOP_S))
    for at in range(0, max(1, last), hop):
        mask = speech[at:at + n]
        if len(mask) < n or mask.mean() < 0.4:
            continue
        where, r = locate_speech(rec_f, ref_f[at:at + n], mask)
        if where is not None and r >= min_r:
            placed.append((at * FRAME_HOP_S, (where - at) * FRAME_HOP_S, r))
    kept = []
    for i, (t, offset, r) in enumerate(placed):
        neighbours = [placed[j][1] for j in (i - 1, i + 1) if 0 <= j < len(placed)]
        if any(abs(offset - o) <= 0.2 for o in neighbours):
            kept.append((t, offset, r))
    return kept


def score(reference, recording, with_visqol=True):
    """The scores of one received recording (float arrays at 16 kHz); see the module docstring."""
    from pesq import pesq, PesqError
    result = {"recorded_s": round(len(recording) / RATE, 3), "reference_s": round(len(reference) / RATE, 3)}
    if len(recording) < RATE or len(reference) < 4 * RATE:
        result["error"] = "recording too short"
        return result
    placed = track(reference, recording)
    result["windows_placed"] = len(placed)
    if len(placed) < 3:
        result["error"] = "the speech is not in the recording"
        return result
    (t0, first, _), (t1, last, _) = placed[0], placed[-1]
    offsets = [o for _, o, _ in placed]
    result.update(offset_first_s=round(first, 3), offset_last_s=round(last, 3),
                  offset_spread_s=round(max(offsets) - min(offsets), 3))
    # Where the recording begins, in the reference's time: after 0, its first words never came.
    result["speech_missed_at_start_s"] = round(max(0.0, -first), 3)
    if t1 - t0 >= 4:
        result["duration_ratio"] = round(1 + (last - first) / (t1 - t0), 4)
    # The reference's span in the recording, with room for the offset to move within it.
    lo = int(round((min(offsets) - 0.1) * RATE))
    hi = int(round((max(offsets) + 0.1) * RATE)) + len(reference)
    degraded = np.zeros(hi - lo)
    a, b = max(0, lo), min(len(recording), hi)
    if b > a:
        degraded[a - lo:b - lo] = recording[a:b]
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


def heard(reference, recording, window_s=1.0, hop_s=0.25, pause_s=0.6, sustained_s=1.5):
    """What of the (switch) reference a recording holds; see the module docstring. Heard windows
    closer than `pause_s` join into one run (an inter-sentence pause is 0.45 s); a run shorter
    than `sustained_s` is not the speech being back (a few packets through a dying path, or a
    chance match)."""
    placed = track(reference, recording, window_s, hop_s)
    result = {"windows": len(placed), "reference_s": round(len(reference) / RATE, 3)}
    if not placed:
        result["error"] = "nothing of the reference was found in the recording"
        return result
    runs = []
    for t, _, _ in placed:
        if runs and t <= runs[-1][1] + pause_s:
            runs[-1][1] = t + window_s
        else:
            runs.append([t, t + window_s])
    sustained = [r for r in runs if r[1] - r[0] >= sustained_s]
    result["runs"] = [[round(a, 2), round(b, 2)] for a, b in runs]
    if not sustained:
        result["error"] = "no sustained speech in the recording"
        return result
    holes = [(a[1], b[0]) for a, b in zip(sustained, sustained[1:])]
    end_of_speech = len(reference) / RATE - PAUSE_TAIL_S
    result.update(first_heard_s=round(sustained[0][0], 3), last_heard_s=round(sustained[-1][1], 3))
    if holes:
        largest = max(holes, key=lambda h: h[1] - h[0])
        result.update(gap_s=round(largest[1] - largest[0], 3), gap_at_s=round(largest[0], 3), recovered=True)
    # Speech that stopped for good: the rest of the reference never came back.
    unheard_tail = end_of_speech - sustained[-1][1]
    if unheard_tail > max(2.0, result.get("gap_s", 0)):
        result.update(recovered=False, gap_s=None, unheard_to_end_s=round(unheard_tail, 3),
                      gap_at_s=round(sustained[-1][1], 3))
    elif not holes:
        result.update(gap_s=0.0, recovered=True)
    return result


def score_file(kind, reference_path, recording_path):
    """`score` ("score") or `heard` ("heard") of two WAV files: for a pool of worker processes."""
    reference, recording = load(reference_path), load(recording_path)
    return heard(reference, recording) if kind == "heard" else score(reference, recording)


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
