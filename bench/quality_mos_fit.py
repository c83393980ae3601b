#!/usr/bin/env python3
"""Fits SpeechQualityEstimate's constants (the codec impairment Ie and RED's loss robustness Bpl)
to a `make bench-quality` run: every recording a CLI made, its PESQ-WB against what that CLI
measured (the network's loss before repair plus what came too late to play, the loss's burst
ratio, jitter and round trip, from its `ended` event), least squares over a grid.

    python3 bench/quality_mos_fit.py .build/bench-quality/results-<time>.json

Prints the fit, then per condition the median PESQ-WB beside the median estimate with the fitted
constants and with the CLI's own (the `mos` its final quality report carried).
"""
import json
import statistics
import sys


def mos(loss, jitter_ms, rtt_ms, burst, ie, bpl):
    """SpeechQualityEstimate.mos, with the constants as arguments."""
    one_way = rtt_ms / 2 + max(20.0, 2.5 * jitter_ms) + 45
    delay = 0.024 * one_way + (0.11 * (one_way - 177.3) if one_way > 177.3 else 0)
    effective = ie + (95 - ie) * loss / (loss / max(1.0, min(10.0, burst)) + bpl)
    r = min(93.2, max(0.0, 93.2 - delay - effective))
    if r <= 0:
        return 1.0
    return min(4.5, 1 + 0.035 * r + 7e-6 * r * (r - 60) * (100 - r))


def samples(results):
    """(condition, pesq, loss %, jitter ms, rtt ms, burst ratio, CLI's mos) per CLI recording that
    has the whole speech (a late start is not scored in the tables either)."""
    out = []
    for call in results["calls"]:
        if not call.get("ok") or call.get("condition") == "switch":
            continue
        for side in call.get("sides", {}).values():
            stats, score = side.get("stats") or {}, side.get("score") or {}
            if (side.get("kind") != "cli" or side.get("late") or score.get("pesq_wb") is None
                    or not stats.get("packetsReceived")):
                continue
            lost = max(0, stats.get("packetsLost", 0))
            expected = stats["packetsReceived"] + lost
            loss = 100.0 * (lost + stats.get("packetsDiscarded", 0)) / expected
            out.append((call["condition"], score["pesq_wb"], min(100.0, loss), 1000 * (stats.get("jitter") or 0),
                        1000 * (stats.get("roundTripTime") or 0), stats.get("audioBurstRatio") or 1.0,
                        (side.get("quality") or {}).get("mos")))
    return out


def fit(points):
    best = None
    for ie10 in range(0, 201, 2):
        ie = ie10 / 10
        for bpl2 in range(10, 161):
            bpl = bpl2 / 2
            error = sum((mos(loss, j, rtt, b, ie, bpl) - pesq) ** 2 for _, pesq, loss, j, rtt, b, _ in points)
            if best is None or error < best[0]:
                best = (error, ie, bpl)
    return best


def main():
    results = json.load(open(sys.argv[1]))
    points = samples(results)
    if not points:
        sys.exit("no CLI recordings with statistics in this run")
    error, ie, bpl = fit(points)
    rms = (error / len(points)) ** 0.5
    print(f"fit over {len(points)} CLI recordings: Ie = {ie:g}, Bpl (RED) = {bpl:g}; RMS error {rms:.2f} PESQ")
    print()
    print("| condition | n | PESQ-WB | loss + late (median) | burst ratio | estimate (fit) | CLI's MOS |")
    print("|---|---|---|---|---|---|---|")
    for condition in dict.fromkeys(p[0] for p in points):
        cell = [p for p in points if p[0] == condition]
        fitted = [mos(loss, j, rtt, b, ie, bpl) for _, _, loss, j, rtt, b, _ in cell]
        own = [p[6] for p in cell if p[6] is not None]
        print(f"| {condition} | {len(cell)} | {statistics.median(p[1] for p in cell):.2f} | "
              f"{statistics.median(p[2] for p in cell):.1f} % | {statistics.median(p[5] for p in cell):.2f} | "
              f"{statistics.median(fitted):.2f} | {statistics.median(own):.2f} |" if own else
              f"| {condition} | {len(cell)} | {statistics.median(p[1] for p in cell):.2f} | "
              f"{statistics.median(p[2] for p in cell):.1f} % | {statistics.median(p[5] for p in cell):.2f} | "
              f"{statistics.median(fitted):.2f} | – |")


if __name__ == "__main__":
    main()
