#!/usr/bin/env python3
"""The Autobahn WebSocket test cases (kosoku) against DialtoneNet's server and client.

Server: `dialtone-bench ws-echo` (WebServer with the server's limits) on a free loopback port,
driven by kosoku's fuzzing client. Client: kosoku's fuzzing server on a free loopback port,
driven by `dialtone-bench ws-autobahn-client` (WebSocketClient). Fails on any case that neither
passes nor is listed in DOCUMENTED below (each with its reason; docs/security.md has them too)
and prints one summary line. Reports (Autobahn's index.json/html) go to --reports.

    python3 scripts/autobahn.py                # make test: all but 9.* (performance), our limits
    python3 scripts/autobahn.py --full         # make autobahn-full: every case, 16 MiB limits
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import os
import subprocess
import sys
import time

from kosoku import FailureError, run_fuzzingclient, run_fuzzingserver

try:  # The module kosoku's own CLI writes its reports with.
    from kosoku._report import write_reports
except ImportError:  # pragma: no cover - a kosoku without it still gets checked
    write_reports = None

# Cases that do not pass, each with why (glob, sides, reason). Anything else failing fails the run.
DOCUMENTED = [
    (
        "2.10",
        {"client"},
        "10 pings in a burst get fewer than 10 pongs: lws 4.1.6's client keeps one owed pong and drops "
        "pings that arrive before it is written (ops-ws.c, 'DROP PING since one pending'); pings never "
        "reach our callbacks. RFC 6455 5.5.3 allows answering only one of several pings; the case "
        "itself says 'not required by the Spec'. (The server frames its own WebSockets and answers "
        "every ping.)",
    ),
    ("2.11", {"client"}, "2.10 sent octet by octet: same cause."),
    (
        "7.3.2",
        {"client"},
        "intermittent, seen once in about ten runs, on a loaded machine: the server's close frame "
        "with a 1-byte payload ('a', right after a 1-byte text message 'a') was answered with a "
        "2-byte close payload 'aa' (code 24929) instead of 1002. lws 4.1.6's client parser echoes "
        "the close payload itself; our PEER_INITIATED_CLOSE callback refuses a 1-byte payload with "
        "1002, and does in every other run, so lws must have handed it two bytes (its receive "
        "buffer still holding the text message's byte).",
    ),
]

ACCEPTED = {"OK": "passed", "NON-STRICT": "non-strict", "INFORMATIONAL": "informational", "UNIMPLEMENTED": "unimplemented"}
ACCEPTED_CLOSE = {"OK", "INFORMATIONAL"}
SIDE_SECONDS = 300  # each side's whole run, at most


def documented(case_id: str, side: str) -> str | None:
    for pattern, sides, reason in DOCUMENTED:
        if side in sides and fnmatch.fnmatchcase(case_id, pattern):
            return reason
    return None


def classify(results, side: str):
    """Counts per outcome, the documented non-passes, and the failures (case, text)."""
    counts = {name: 0 for name in list(ACCEPTED.values()) + ["documented"]}
    documented_ids, failures = [], []
    for r in results:
        behavior, close = r.behavior.value, r.behavior_close.value
        if behavior in ACCEPTED and close in ACCEPTED_CLOSE:
            counts[ACCEPTED[behavior]] += 1
        elif documented(r.case_id, side):
            counts["documented"] += 1
            documented_ids.append(r.case_id)
        else:
            failures.append((r.case_id, f"behavior={behavior}, close={close}: {r.result} / {r.result_close}"))
    return counts, documented_ids, failures


def save(results, outdir: str) -> None:
    if write_reports is not None and results:
        write_reports(results, outdir)


async def read_port(process: subprocess.Popen, seconds: float) -> int:
    """The port from ws-echo's first line ("ws-echo listening on ws://127.0.0.1:PORT/...")."""
    loop = asyncio.get_running_loop()
    line = await asyncio.wait_for(loop.run_in_executor(None, process.stdout.readline), seconds)
    if "127.0.0.1:" not in line:
        raise RuntimeError(f"ws-echo did not start: {line!r}")
    return int(line.split("127.0.0.1:")[1].split("/")[0])


async def test_server(args, include, exclude):
    command = [os.path.join(args.bin, "dialtone-bench"), "ws-echo", "--port", "0", "--seconds", str(SIDE_SECONDS + 60)]
    if args.full:
        command += ["--max-message-bytes", str(16 << 20)]
    echo = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        port = await read_port(echo, 20)
        try:
            results = await asyncio.wait_for(
                run_fuzzingclient(f"ws://127.0.0.1:{port}/v1/ws", include, exclude, concurrency=args.parallelism),
                SIDE_SECONDS,
            )
        except FailureError as failure:
            results = failure.results
        return results
    finally:
        echo.terminate()
        try:
            echo.wait(10)
        except subprocess.TimeoutExpired:
            echo.kill()


async def test_client(args, include, exclude):
    async with run_fuzzingserver(include, exclude, host="127.0.0.1", port=0) as server:
        command = [
            os.path.join(args.bin, "dialtone-bench"), "ws-autobahn-client", "--url", f"ws://127.0.0.1:{server.port}",
        ]
        if args.full:
            command += ["--max-message-bytes", str(16 << 20)]
        client = await asyncio.create_subprocess_exec(*command, stdout=subprocess.DEVNULL)
        try:
            try:
                results = await asyncio.wait_for(server.get_result(), SIDE_SECONDS)
            except FailureError as failure:
                results = failure.results
            await asyncio.wait_for(client.wait(), 30)
            return results
        finally:
            if client.returncode is None:
                client.kill()
                await client.wait()


def describe(side: str, counts, documented_ids, total: int) -> str:
    text = f"{side} {total} cases: " + ", ".join(f"{n} {name}" for name, n in counts.items() if name != "documented")
    if documented_ids:
        groups = []
        for pattern, sides, _ in DOCUMENTED:
            n = sum(fnmatch.fnmatchcase(c, pattern) for c in documented_ids)
            if side in sides and n:
                groups.append(pattern if n == 1 else f"{pattern} x{n}")
        text += f", {len(documented_ids)} documented non-pass ({', '.join(groups)})"
    return text


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=".build/debug", help="folder holding dialtone-bench")
    parser.add_argument("--full", action="store_true", help="every case, including 9.* (16 MiB messages)")
    parser.add_argument("--reports", default=".build/autobahn", help="where the Autobahn reports go")
    parser.add_argument("--parallelism", type=int, default=4, help="server cases run at once")
    args = parser.parse_args()
    # 9.* sends up to 16 MiB, beyond the server's 64 KiB limit (1009 by design): only --full
    # runs them, with the limits raised to fit.
    include, exclude = None, (None if args.full else ["9.*"])

    started = time.monotonic()
    lines, failed = [], False
    for side, run in (("server", test_server), ("client", test_client)):
        results = await run(args, include, exclude)
        save(results, os.path.join(args.reports, side))
        counts, documented_ids, failures = classify(results, side)
        if not results:
            failures.append(("-", "no case ran"))
        for case_id, text in failures:
            print(f"autobahn: {side} case {case_id} FAILED: {text}", file=sys.stderr)
        failed = failed or bool(failures)
        lines.append(describe(side, counts, documented_ids, len(results)))
        for pattern, sides, _ in DOCUMENTED:
            if side in sides and not any(fnmatch.fnmatchcase(c, pattern) for c in documented_ids):
                ran = [r for r in results if fnmatch.fnmatchcase(r.case_id, pattern)]
                if ran:
                    # 2.11 depends on timing (whether lws has written the pong before the next ping).
                    print(f"autobahn: note: {side} {pattern} passed this run", file=sys.stderr)
    verdict = "FAILED" if failed else "ok"
    print(f"autobahn {verdict}: " + "; ".join(lines) + f" ({time.monotonic() - started:.1f} s, reports in {args.reports})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
