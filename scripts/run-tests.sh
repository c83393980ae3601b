#!/usr/bin/env bash
# Runs the already-built test suite. Services the tests need are started here (and stopped on exit).
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
# Serial: lws 4.1 on libuv closes an eventfd twice when a context is destroyed; with suites in
# parallel another test could be handed that descriptor number in between.
if [ $# -eq 0 ]; then
  swift test --skip-build --no-parallel --skip DialtoneGStreamerTests
  # webrtcbin peers (libnice) inside a namespace of their own: no test packet reaches this
  # host's own address.
  scripts/in-media-netns.sh swift test --skip-build --no-parallel --filter DialtoneGStreamerTests
else
  swift test --skip-build --no-parallel "$@"
fi
# The Autobahn WebSocket cases (kosoku) against DialtoneNet's server and client, on loopback;
# 9.* (performance, 16 MiB messages) only in `make autobahn-full`.
if [ $# -eq 0 ]; then
  python3 scripts/autobahn.py --bin .build/debug
fi
# End-to-end calls with real media and real peers (coturn, aiortc, headless Chromium).
if [ $# -eq 0 ]; then
  python3 Tests/e2e/run_e2e.py
fi
