#!/usr/bin/env python3
"""End-to-end calls with real media: CLI softphones (GStreamer webrtcbin) through the real
server, coturn, aiortc, headless Chromium and Janus, each scenario inside network namespaces it
creates (libnice ignores loopback; no test packet reaches this host's own address).

    python3 Tests/e2e/run_e2e.py [name-filter ...]

Each scenario prints PASS or FAIL with the reason; the exit status is non-zero if any failed.
Logs of a failed scenario are kept (their directory is printed). The scenarios live in topic
modules, registered with `scenarios.scenario`; they run in the order the modules are imported.
"""
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import Failure, Scratch, run_stacked  # noqa: E402
from scenarios import SCENARIOS  # noqa: E402

# The topics, in the order they run.
import call_scenarios  # noqa: E402,F401  1:1 calls between CLIs and aiortc
import browser_call_scenarios  # noqa: E402,F401  the browser page and the CLI
import group_scenarios  # noqa: E402,F401  group calls through Janus
import durability_scenarios  # noqa: E402,F401  restarts and kill -9 (issue 16)
import observability_scenarios  # noqa: E402,F401  metrics, history, quality (issue 18)
import browser_scenarios  # noqa: E402,F401  the web softphone (issue 18)
import admin_scenarios  # noqa: E402,F401  the admin dashboard (issue 18)
import openapi_scenarios  # noqa: E402,F401  the OpenAPI contract (issue 18)
import cluster_scenarios  # noqa: E402,F401  three nodes on PostgreSQL and Redis (issue 19)
import privacy_scenarios  # noqa: E402,F401  what a caller learns of a ringing callee


def print_log_tails(scratch, lines=15):
    """The last lines of every log a failed attempt left, so CI's output shows what happened."""
    for name in sorted(os.listdir(scratch.path)):
        if not name.endswith(".log"):
            continue
        with open(scratch.file(name), errors="replace") as log:
            tail = log.readlines()[-lines:]
        for line in tail:
            print(f"  | {name}: {line.rstrip()[:300]}", flush=True)


async def attempt(fn):
    """One run of a scenario in a scratch directory of its own: (error or None, scratch, seconds)."""
    scratch = Scratch()
    started = time.monotonic()
    try:
        await run_stacked(lambda stack: fn(scratch, stack), getattr(fn, "time_limit", 90))
        return None, scratch, time.monotonic() - started
    except (Failure, asyncio.TimeoutError) as error:
        return str(error) or "timed out", scratch, time.monotonic() - started


async def run(selected, attempts=2):
    """Each scenario, and once more if it failed: real media on a loaded 2-core machine fails a
    scenario now and then for reasons of the machine. A pass on the second attempt is printed as
    FLAKY with the first attempt's error and log tails, so it is seen and not hidden; only a
    scenario failing both times fails the run."""
    failures = 0
    for fn in SCENARIOS:
        if selected and not any(word in fn.__name__ for word in selected):
            continue
        errors = []
        for number in range(1, attempts + 1):
            error, scratch, seconds = await attempt(fn)
            if error is None:
                scratch.remove()
                if errors:
                    print(f"FLAKY {fn.__name__}: passed on attempt {number} ({seconds:.1f} s) after: "
                          + "; ".join(errors), flush=True)
                else:
                    print(f"PASS {fn.__name__} ({seconds:.1f} s)", flush=True)
                break
            errors.append(f"{error} (logs in {scratch.path})")
            print(f"{'FAIL' if number == attempts else 'RETRY'} {fn.__name__}: {error} "
                  f"(attempt {number}, logs in {scratch.path})", flush=True)
            print_log_tails(scratch)
        else:
            failures += 1
    return failures


if __name__ == "__main__":
    sys.exit(1 if asyncio.run(run(sys.argv[1:])) else 0)
