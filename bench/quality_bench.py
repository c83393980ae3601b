#!/usr/bin/env python3
"""How calls sound on bad networks, Dialtone against Chromium in the same run: `make bench-quality`.

Two network namespaces (dtq-a, dtq-b) are joined by bench/delay_link.py, a userspace forwarder
between two TUN devices (netem is not in this kernel) that shapes every packet both ways alike:
UDP media, STUN, DTLS, ICE-TCP and the signaling's TCP. dialtone-server runs in B. Each call has
its caller in A and its callee in B, so the caller's signaling and all media cross the link.

Both sides of every call send the same speech (bench/quality_speech.py: ~14 s of Harvard
sentences by espeak-ng in two voices, 16 kHz, after `--lead` s of silence during which the call
sets up) and record what they receive. Pairs (`--pairs`):

- cli-cli    `dialtone call --audio SENT --record OUT` ↔ `dialtone answer --auto --audio SENT
             --record OUT` (GStreamer webrtcbin);
- page-cli   the server's page at `/` in headless Chromium (caller) ↔ the CLI (callee);
- page-page  the page ↔ the page: libwebrtc's Opus and NetEQ, the anchor.

(bench/quality_peers.py says how the page is fed and recorded.) Each received recording is
aligned to the speech by cross-correlation, resampled to 16 kHz and scored with PESQ wideband and
ViSQOL speech (bench/quality_score.py), after all calls (so that scoring never competes with a
call for the CPU). The cells pool both directions of a pair whose two ends are the same stack;
page-cli is two cells, one per receiver. A recording that misses the first words of the speech
(the call was set up after the speech began) is not scored, counted as `late`, and the call is
made again (at most 3 × `--calls` attempts per cell).

Link conditions (`--conditions`), every one both ways: clean (40 ms RTT), random loss 5/10/20 %,
bursty loss 5 % and 15 % (Gilbert–Elliott, mean burst 3 packets), jitter ±30 ms (one way
50 ± 30 ms uniform, i.e. RTT ≈ 100 ms) kept FIFO as one path's queue would be (`jitter30`) and
reordering as netem does without a rate (`jitter30r`), 150 ms RTT. And the network switch
(`--switch-calls`, cli-cli and page-page): on a clean link, `--switch-after` s after the call
connected, the caller's namespace loses its address and gets another one at once (the path it
used dies, a new one is there); the gap is the longest stretch of the (longer) speech never
heard on each side (quality_score.heard).

Per call the link's own counters give the real loss and delay, and which transport carried the
media (RTP bytes over UDP against TCP bytes other than the signaling's: ICE-TCP); the endpoints
give their selected candidate pair. Prints a markdown table and writes every call's figures to
.build/bench-quality/ (results-<time>.json and latest.json); recordings and logs stay in
/tmp/dialtone-bench-quality-*. `--rescore RESULTS.json` scores a finished run's recordings again;
`--trace` has the link log every RTP/RTCP header (time, sequence number, RTP timestamp) per
condition, to see how each sender paces its packets.

Needs root, chromium, espeak-ng, sox, PyPI pesq and visqol-python (`scripts/deps.sh bench`).
    python3 bench/quality_bench.py [--bin .build/release] [--calls 3] [--conditions clean,loss5,...]
        [--pairs cli-cli,page-cli,page-page] [--switch-calls 2]
"""
import argparse
import asyncio
import concurrent.futures
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
import harness  # noqa: E402  (the Chromium DevTools-pipe driver's errors)
import quality_score  # noqa: E402
import quality_speech  # noqa: E402
from chromium_page import BenchError  # noqa: E402
from netns_pair import NamespacePair, run_main, sh, stop, token  # noqa: E402
from quality_peers import CLIPeer, PagePeer  # noqa: E402

NS_A, NS_B = "dtq-a", "dtq-b"
ADDR_A, ADDR_A_MOVED, ADDR_B = "10.85.0.1", "10.85.0.3", "10.85.0.2"
PORT = 18980
SECRET = "bench-quality-secret-0123456789abcdef"
SERVER = f"http://{ADDR_B}:{PORT}"
PAIR = NamespacePair(NS_A, ADDR_A, NS_B, ADDR_B, PORT)
OUT_DIR = os.path.join(ROOT, ".build", "bench-quality")
BURST = 3.0

# name: (label, delay_link arguments)
CONDITIONS = {
    "clean": ("clean, 40 ms RTT", ["--rtt-ms", "40"]),
    "loss5": ("5 % random loss", ["--rtt-ms", "40", "--loss", "0.05"]),
    "loss10": ("10 % random loss", ["--rtt-ms", "40", "--loss", "0.10"]),
    "loss20": ("20 % random loss", ["--rtt-ms", "40", "--loss", "0.20"]),
    "burst5": ("5 % bursty loss (GE, burst 3)", ["--rtt-ms", "40", "--loss", "0.05", "--loss-model", "gilbert",
                                                  "--burst", str(BURST)]),
    "burst15": ("15 % bursty loss (GE, burst 3)", ["--rtt-ms", "40", "--loss", "0.15", "--loss-model", "gilbert",
                                                    "--burst", str(BURST)]),
    "jitter30": ("±30 ms jitter (50 ± 30 ms one way, FIFO)", ["--rtt-ms", "100", "--jitter-ms", "30"]),
    "jitter30r": ("±30 ms jitter, reordering (netem-like)", ["--rtt-ms", "100", "--jitter-ms", "30", "--reorder"]),
    "rtt150": ("150 ms RTT", ["--rtt-ms", "150"]),
}
SWITCH_LINK = ["--rtt-ms", "40"]
PAIRS = ("cli-cli", "page-cli", "page-page")
# The cells of the table: (pair, receiver) → column; a pair of one stack pools both receivers.
COLUMNS = (("cli-cli", None, "CLI ↔ CLI"), ("page-cli", "cli", "browser → CLI"),
           ("page-cli", "page", "CLI → browser"), ("page-page", None, "Chromium ↔ Chromium"))


def place_a(address):
    """A's only address on its link: `address` (the network switch moves it)."""
    sh("ip", "-n", NS_A, "addr", "flush", "dev", "dt0")
    sh("ip", "-n", NS_A, "addr", "add", f"{address}/24", "dev", "dt0")


def condition_link(arguments, log):
    """bench/delay_link.py for one condition, a little ahead of the peers for the CPU (its timing
    is the condition), telling the signaling's TCP by its port."""
    return PAIR.link(["--signaling-port", str(PORT), *arguments], log, nice=-5)


def link_window(before, after):
    """What the link did during one call, per direction: loss of RTP/RTCP packets, delays, and
    the bytes each transport carried."""
    out = {}
    for way in ("a_to_b", "b_to_a"):
        b, a = before[way]["classes"], after[way]["classes"]

        def delta(kind, field):
            return a.get(kind, {}).get(field, 0) - b.get(kind, {}).get(field, 0)
        rtp_in, rtp_lost = delta("rtp", "packets"), delta("rtp", "lost")
        out[way] = {"rtp_packets": rtp_in, "rtp_lost": rtp_lost,
                    "rtp_loss": round(rtp_lost / rtp_in, 4) if rtp_in else None,
                    "rtp_bytes": delta("rtp", "bytes"), "ice_tcp_bytes": delta("tcp", "bytes"),
                    "signaling_bytes": delta("tcp-signaling", "bytes"), "delay": after[way]["delay_recent"]}
    udp = sum(out[w]["rtp_bytes"] for w in out)
    tcp = sum(out[w]["ice_tcp_bytes"] for w in out)
    out["transport"] = "none" if udp + tcp < 20000 else "tcp" if tcp > udp else \
        "udp+tcp" if tcp > 0.2 * udp else "udp"
    return out


def make_peer(kind, role, args, tokens, sent, scratch):
    """A caller (in A) or callee (in B) of one kind, sending `sent`."""
    ns = NS_A if role == "caller" else NS_B
    name = f"{'alice' if role == 'caller' else 'bob'}-{kind}"
    if kind == "cli":
        cli = [os.path.join(args.bin, "dialtone")]
        user_token = tokens[("alice" if role == "caller" else "bob", "cli")]
        common = ["--server", SERVER, "--token", user_token, "--audio", sent, *args.cli_args]
        if role == "caller":
            # The bench hangs up (SIGINT); --duration only bounds a stuck run.
            return CLIPeer(name, ns, cli + ["call", "--to", "bob", *common, "--duration", "300"], scratch)
        return CLIPeer(name, ns, cli + ["answer", "--auto", *common], scratch)
    user_token = tokens[("alice" if role == "caller" else "bob", "page")]
    fragment = f"token={user_token}&call=bob" if role == "caller" else f"token={user_token}&answer=auto"
    return PagePeer(name, ns, f"{SERVER}/#{fragment}", SERVER, sent, scratch, raw_audio=not args.browser_apm)


async def one_call(args, pair, link, tokens, sent, length, scratch, log, switch_after=None):
    """One call of `pair`: both sides send `sent` (`length` s) and record; returns its record."""
    caller_kind, callee_kind = {"cli-cli": ("cli", "cli"), "page-cli": ("page", "cli"),
                                "page-page": ("page", "page")}[pair]
    os.makedirs(scratch, exist_ok=True)
    place_a(ADDR_A)
    callee = make_peer(callee_kind, "callee", args, tokens, sent, scratch)
    caller = make_peer(caller_kind, "caller", args, tokens, sent, scratch)
    record = {"pair": pair, "scratch": scratch}
    watchers = []
    try:
        await callee.start()
        await callee.ready(30)
        before = await link.stats()
        started = time.time()
        await caller.start()
        connected = await asyncio.gather(caller.connected(60), callee.connected(60))
        record["connect_s"] = round(max(connected) - started, 3)
        # Each sender's file began before its side connected: all of it has left by then.
        end = max(connected) + length + 0.8
        watchers += [asyncio.create_task(peer.watch(end)) for peer in (caller, callee) if peer.kind == "page"]
        if switch_after is not None:
            await asyncio.sleep(max(0.0, max(connected) + switch_after - time.time()))
            record["switched_at"] = time.time()
            place_a(ADDR_A_MOVED)
        await asyncio.sleep(max(0.0, end - time.time()))
        for task in watchers:
            await task
        for peer in (caller, callee):
            if peer.kind == "page":
                await peer.collect()
        # Both at once: a CLI prints its connection's figures only when it hangs up itself.
        await asyncio.gather(caller.hang_up(), callee.hang_up())
        results = {"caller": await caller.finish(20), "callee": await callee.finish(20)}
        after = await link.stats()
        record["link"] = link_window(before, after)
        for role, peer in (("caller", caller), ("callee", callee)):
            results[role]["kind"] = peer.kind
            results[role]["timeline"] = [(round(t - started, 3), what) for t, what in peer.timeline()]
        record["sides"] = results
        record["ok"] = all(results[r]["recording"] for r in results)
        record["load"] = os.getloadavg()[0]
    except (BenchError, harness.Failure, asyncio.TimeoutError, OSError, ValueError) as error:
        record["ok"] = False
        record["error"] = str(error) or "timed out"
    except Exception as error:   # a bench bug: this call fails, the run goes on, the log keeps the trace
        record["ok"] = False
        record["error"] = f"{type(error).__name__}: {error}"
        log.write(f"{scratch}: {traceback.format_exc()}\n".encode())
        log.flush()
    finally:
        for task in watchers:
            task.cancel()
        await caller.stop()
        await callee.stop()
    return record


def quick_check(record, reference):
    """Does each recording hold the speech from its start? (placement only: about a second)"""
    for side in record.get("sides", {}).values():
        path = side.get("recording")
        if not path:
            continue
        # Every other window of the whole speech: under heavy loss the first ones may not place.
        placed = quality_score.track(reference, quality_score.load(path), hop_s=1.0)
        side["check"] = {"placed": len(placed), "offset_first_s": round(placed[0][1], 3) if placed else None}
        side["late"] = bool(placed) and placed[0][1] < 0
    return not any(side.get("late") for side in record.get("sides", {}).values())


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec="{:.2f}"):
    return "–" if value is None else spec.format(value)


def receivers(calls, receiver_kind):
    """The scored received recordings of these calls ((call, side) pairs), for one receiver kind
    or, with None, both sides."""
    out = []
    for call in calls:
        for role, side in call.get("sides", {}).items():
            if receiver_kind is None or side.get("kind") == receiver_kind:
                out.append((call, side))
    return out


def pair_text(side, call):
    pair = side.get("pair") or {}
    local, remote = pair.get("local") or "?", pair.get("remote") or "?"
    protocol = pair.get("protocol") or (call.get("link") or {}).get("transport", "?")
    return f"{local}/{remote} {protocol}"


def cell_summary(calls, receiver_kind):
    sides = receivers([c for c in calls if c.get("ok")], receiver_kind)
    scored = [(c, s) for c, s in sides if not s.get("late") and "score" in s]
    scores = [s["score"] for _, s in scored]
    pairs = {}
    for c, s in sides:
        text = pair_text(s, c)
        pairs[text] = pairs.get(text, 0) + 1
    transports = {}
    for c in calls:
        if c.get("ok"):
            t = (c.get("link") or {}).get("transport", "?")
            transports[t] = transports.get(t, 0) + 1
    pesq = [x.get("pesq_wb") for x in scores if x.get("pesq_wb") is not None]
    return {"n": len(pesq), "late": sum(1 for _, s in sides if s.get("late")),
            "failed": sum(1 for c in calls if not c.get("ok")),
            "pesq": med(pesq), "pesq_min": min(pesq) if pesq else None, "pesq_max": max(pesq) if pesq else None,
            "visqol": med([x.get("visqol") for x in scores]),
            "duration": med([x.get("duration_ratio") for x in scores]),
            "pairs": pairs, "transports": transports,
            "rtp_loss": med([w.get("rtp_loss") for c in calls if c.get("ok")
                             for w in (c["link"]["a_to_b"], c["link"]["b_to_a"])]),
            "concealed": med([(s.get("stats") or {}).get("concealedSamples", 0) /
                              max(1, (s.get("stats") or {}).get("totalSamplesReceived", 0) or 1)
                              for _, s in sides if s.get("kind") == "page" and s.get("stats")]),
            "fec": med([(s.get("stats") or {}).get("fecPacketsReceived") for _, s in sides
                        if s.get("kind") == "page" and s.get("stats")]),
            "load": med([c.get("load") for c in calls if c.get("ok")]),
            "lateness": max([w["delay"].get("late_p99_ms") or 0 for c in calls if c.get("ok")
                         for w in (c["link"]["a_to_b"], c["link"]["b_to_a"])], default=None)}


def score_all(results, reference_paths, log=print, workers=2):
    """PESQ and ViSQOL (or the switch analysis) for every recording, after the calls, on
    `workers` processes."""
    jobs = []
    for call in results["calls"]:
        for side in call.get("sides", {}).values():
            path = side.get("recording")
            if path and os.path.exists(path):
                kind = "heard" if call.get("switch") else "score"
                reference = reference_paths["switch_reference" if call.get("switch") else "reference"]
                jobs.append((side, kind, reference, path))
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(quality_score.score_file, kind, reference, path): (side, kind)
                   for side, kind, reference, path in jobs}
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            side, kind = futures[future]
            side[kind] = future.result()
            if kind == "score":
                side["late"] = side["score"].get("speech_missed_at_start_s", 0) > 0
            if done % 25 == 0:
                log(f"# scored {done}/{len(jobs)}")


def table(results):
    calls = [c for c in results["calls"] if not c.get("switch")]
    lines = []
    conditions = [k for k in results["args"]["conditions"] if any(c["condition"] == k for c in calls)]
    lines.append("| link (both directions) | " + " | ".join(label for _, _, label in COLUMNS) + " |")
    lines.append("|---|" + "---|" * len(COLUMNS))
    for key in conditions:
        cells = []
        for pair, receiver, _ in COLUMNS:
            s = cell_summary([c for c in calls if c["condition"] == key and c["pair"] == pair], receiver)
            cells.append("–" if s["pesq"] is None else f"{s['pesq']:.2f} / {fmt(s['visqol'])}")
        lines.append(f"| {CONDITIONS[key][0]} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("PESQ-WB median / ViSQOL (speech) median per cell. Details:")
    lines.append("")
    lines.append("| link | receiver | n | PESQ-WB median (min–max) | ViSQOL | received/sent duration | "
                 "late / failed | RTP loss on the link | page: concealed, FEC packets | candidate pairs "
                 "(local/remote, transport) | media transport (link) | load, link lateness p99 |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in conditions:
        for pair, receiver, label in COLUMNS:
            in_cell = [c for c in calls if c["condition"] == key and c["pair"] == pair]
            if not in_cell:
                continue
            s = cell_summary(in_cell, receiver)
            page = "–" if s["concealed"] is None else f"{s['concealed'] * 100:.1f} %, {fmt(s['fec'], '{:.0f}')}"
            lines.append(
                f"| {CONDITIONS[key][0]} | {label} | {s['n']} | {fmt(s['pesq'])} ({fmt(s['pesq_min'])}–"
                f"{fmt(s['pesq_max'])}) | {fmt(s['visqol'])} | {fmt(s['duration'], '{:.3f}')} | "
                f"{s['late']} / {s['failed']} | {fmt(None if s['rtp_loss'] is None else s['rtp_loss'] * 100, '{:.1f} %')}"
                f" | {page} | {', '.join(f'{k} ×{v}' for k, v in sorted(s['pairs'].items()))} | "
                f"{', '.join(f'{k} ×{v}' for k, v in sorted(s['transports'].items()))} | "
                f"{fmt(s['load'], '{:.1f}')}, {fmt(s['lateness'], '{:.1f} ms')} |")
    switch = [c for c in results["calls"] if c.get("switch")]
    if switch:
        lines.append("")
        lines.append(f"Network switch (clean 40 ms link; {results['args']['switch_after']:g} s after connecting, the "
                     "caller's namespace loses its address and gets another at once): the longest stretch of the "
                     "speech never heard, per call, s; 'never' = not back before the speech ended (the time from "
                     "the break to the speech's end in brackets)")
        lines.append("")
        lines.append("| pair | heard by the callee (from the side that moved) | heard by the caller (the side that "
                     "moved) | back, both ways | media transport |")
        lines.append("|---|---|---|---|---|")
        for pair in ("cli-cli", "page-page"):
            in_pair = [c for c in switch if c["pair"] == pair]
            if not in_pair:
                continue
            cells, back = [], 0
            for role in ("callee", "caller"):
                texts = []
                for c in in_pair:
                    h = (c.get("sides") or {}).get(role, {}).get("heard") or {}
                    if not c.get("ok") or "error" in h:
                        texts.append("failed" if not c.get("ok") else h.get("error", "?"))
                    elif h.get("recovered"):
                        texts.append(f"{h['gap_s']:.1f}")
                    else:
                        texts.append(f"never ({h.get('unheard_to_end_s', 0):.0f})")
                cells.append(", ".join(texts))
            for c in in_pair:
                if c.get("ok") and all(((c["sides"][r].get("heard") or {}).get("recovered")) for r in ("callee", "caller")):
                    back += 1
            transports = {}
            for c in in_pair:
                if c.get("ok"):
                    t = c["link"]["transport"]
                    transports[t] = transports.get(t, 0) + 1
            lines.append(f"| {pair} | {cells[0]} | {cells[1]} | {back}/{len(in_pair)} | "
                         f"{', '.join(f'{k} ×{v}' for k, v in sorted(transports.items()))} |")
    return "\n".join(lines)


async def run_matrix(args, tokens, samples, results, work, log):
    reference = quality_score.load(samples["reference"])
    length = quality_speech.seconds(samples["sent"])
    for key in args.conditions:
        label, link_args = CONDITIONS[key]
        trace = ["--trace", os.path.join(work, f"{key}-rtp.trace")] if args.trace else []
        async with condition_link(link_args + trace, log) as link:
            await asyncio.sleep(0.3)
            for pair in args.pairs:
                good, attempts = 0, 0
                while good < args.calls and attempts < 3 * args.calls:
                    scratch = os.path.join(work, f"{key}-{pair}-{attempts}")
                    attempts += 1
                    record = await asyncio.wait_for(
                        one_call(args, pair, link, tokens, samples["sent"], length, scratch, log), length + 150)
                    record.update(condition=key, attempt=attempts)
                    ok = record.get("ok") and quick_check(record, reference)
                    good += 1 if ok else 0
                    results["calls"].append(record)
                    state = "ok" if ok else ("late start" if record.get("ok") else f"failed: {record.get('error')}")
                    print(f"# {label} · {pair} · call {attempts}: {state}; connected in "
                          f"{fmt(record.get('connect_s'), '{:.1f}')} s, media {record.get('link', {}).get('transport')}",
                          flush=True)


async def run_switch(args, tokens, samples, results, work, log):
    length = quality_speech.seconds(samples["switch_sent"])
    async with condition_link(SWITCH_LINK, log) as link:
        await asyncio.sleep(0.3)
        for pair in ("cli-cli", "page-page"):
            if pair not in args.pairs:
                continue
            for n in range(args.switch_calls):
                scratch = os.path.join(work, f"switch-{pair}-{n}")
                record = await asyncio.wait_for(
                    one_call(args, pair, link, tokens, samples["switch_sent"], length, scratch, log,
                             switch_after=args.switch_after), length + 150)
                record.update(condition="switch", switch=True, attempt=n + 1)
                results["calls"].append(record)
                print(f"# network switch · {pair} · call {n + 1}: "
                      f"{'ok' if record.get('ok') else 'failed: ' + str(record.get('error'))}", flush=True)
    place_a(ADDR_A)


def versions(binary):
    out = {"chromium": None, "espeak-ng": quality_speech.espeak_version()}
    try:
        out["chromium"] = sh(shutil.which("chromium") or "chromium", "--version", check=False).stdout.strip()
    except OSError:
        pass
    for module in ("pesq", "visqol", "numpy", "scipy"):
        try:
            out[module] = getattr(__import__(module), "__version__", "?")
        except ImportError:
            out[module] = None
    try:
        out["commit"] = sh("git", "-C", ROOT, "rev-parse", "--short", "HEAD").stdout.strip()
        out["dirty"] = bool(sh("git", "-C", ROOT, "status", "--porcelain", "--", "Sources").stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    return out


def save(results, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"))
    parser.add_argument("--calls", type=int, default=3, help="good calls per condition and pair")
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help=", ".join(CONDITIONS))
    parser.add_argument("--pairs", default=",".join(PAIRS))
    parser.add_argument("--switch-calls", type=int, default=2, help="network-switch calls per pair (0: none)")
    parser.add_argument("--switch-after", type=float, default=8.0, help="s after connecting")
    parser.add_argument("--lead", type=float, default=3.0, help="s of silence before the speech")
    parser.add_argument("--tail", type=float, default=0.5, help="s of silence after it")
    parser.add_argument("--browser-apm", action="store_true",
                        help="keep Chromium's echo cancellation, noise suppression and gain control on the file")
    parser.add_argument("--trace", action="store_true",
                        help="the link logs every RTP/RTCP packet's header to <work>/<condition>-rtp.trace")
    parser.add_argument("--cli-args", default="",
                        help="extra arguments for every CLI peer, e.g. \"--audio-profile red=0\" (to measure one choice)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--rescore", metavar="RESULTS_JSON", help="score a finished run's recordings again")
    args = parser.parse_args()
    args.conditions = [c for c in args.conditions.split(",") if c]
    args.pairs = [p for p in args.pairs.split(",") if p]
    args.cli_args = args.cli_args.split()
    unknown = [c for c in args.conditions if c not in CONDITIONS] + [p for p in args.pairs if p not in PAIRS]
    if unknown:
        sys.exit(f"unknown condition or pair: {', '.join(unknown)}")
    if args.calls < 1 or args.lead < 1:
        sys.exit("--calls must be >= 1 and --lead >= 1 s")
    samples = quality_speech.samples(os.path.join(OUT_DIR, "speech"), args.lead, args.tail)

    if args.rescore:
        with open(args.rescore) as f:
            results = json.load(f)
        score_all(results, {"reference": samples["reference"], "switch_reference": samples["switch_reference"]})
        print(table(results))
        save(results, args.rescore)
        return

    if os.geteuid() != 0:
        sys.exit("bench-quality needs root (network namespaces and TUN devices)")
    if any(p.startswith("page") for p in args.pairs) and not shutil.which("chromium"):
        sys.exit("chromium is not installed")
    args.bin = os.path.abspath(args.bin)
    for tool in ("dialtone", "dialtone-server"):
        if not os.path.exists(os.path.join(args.bin, tool)):
            sys.exit(f"{args.bin}/{tool} missing: build first (make release)")
    quality_score.visqol_api()   # fails early if visqol-python is missing, and warms its JIT

    work = tempfile.mkdtemp(prefix="dialtone-bench-quality-")
    log = open(os.path.join(work, "bench.log"), "wb")
    tokens = {(user, kind): token(args.bin, user, f"bench-{kind}", SECRET) for user in ("alice", "bob")
              for kind in ("cli", "page")}
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    results = {"machine": f"{platform.node()}: {os.cpu_count()} cores, {platform.platform()}",
               "started": stamp, "load_before": os.getloadavg(), "versions": versions(args.bin),
               "args": dict(vars(args)), "samples": {k: [v, quality_speech.seconds(v)] for k, v in samples.items()},
               "work": work, "calls": []}
    per_call = quality_speech.seconds(samples["sent"]) + 8
    estimate = (len(args.conditions) * len(args.pairs) * args.calls * per_call
                + 2 * args.switch_calls * (quality_speech.seconds(samples["switch_sent"]) + 8)) / 60
    print(f"# bench-quality on {results['machine']}, load {os.getloadavg()[0]:.2f}; binaries {args.bin} "
          f"({results['versions'].get('commit')}); recordings and logs in {work}")
    print(f"# {args.calls} calls per cell; speech {quality_speech.seconds(samples['reference']):.1f} s after "
          f"{args.lead:g} s of silence; about {estimate:.0f} min of calls, then scoring", flush=True)
    PAIR.make()
    server = await PAIR.start_server(args.bin, os.path.join(work, "server-data"), SECRET, log)
    started = time.monotonic()
    out = args.json or os.path.join(OUT_DIR, f"results-{stamp}.json")
    try:
        await PAIR.wait_listening(server)
        await run_matrix(args, tokens, samples, results, work, log)
        if args.switch_calls > 0:
            await run_switch(args, tokens, samples, results, work, log)
        results["calls_minutes"] = round((time.monotonic() - started) / 60, 1)
        results["load_after_calls"] = os.getloadavg()
    finally:
        await stop(server, grace=2)
        save(results, out)   # what was measured so far, even after a failure
    print(f"# {len(results['calls'])} calls in {results['calls_minutes']} min; scoring", flush=True)
    score_all(results, {"reference": samples["reference"], "switch_reference": samples["switch_reference"]})
    results["minutes"] = round((time.monotonic() - started) / 60, 1)
    save(results, out)
    if not args.json:   # a run of the defaults' shape is the one latest.json keeps
        save(results, os.path.join(OUT_DIR, "latest.json"))
    print()
    print(table(results))
    print(f"\n# {results['minutes']} min in all; wrote {out}" + ("" if args.json else " and latest.json"))


if __name__ == "__main__":
    run_main(main, PAIR.remove)
