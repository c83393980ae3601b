#!/usr/bin/env bash
# Runs the already-built test suite. Services the tests need are started here (and stopped on exit).
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
# Serial: lws 4.1 on libuv closes an eventfd twice when a context is destroyed; with suites in
# parallel another test could be handed that descriptor number in between.
swift test --skip-build --no-parallel "$@"
# End-to-end calls with real media and real peers (coturn, aiortc, headless Chromium).
if [ $# -eq 0 ]; then
  python3 Tests/e2e/run_e2e.py
fi
