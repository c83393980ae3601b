#!/usr/bin/env bash
# Runs the already-built test suite. Services the tests need are started here (and stopped on exit).
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
# Serial: lws 4.1 on libuv closes an eventfd twice when a context is destroyed; with suites in
# parallel another test could be handed that descriptor number in between.
# A run that fails or hangs (a test throwing before its rig stops leaves xctest waiting) is run
# once more: a pass the second time is printed as FLAKY, so it is seen; two failures fail.
twice() {
  local limit=$1
  shift
  if timeout --kill-after=10 "$limit" "$@"; then return 0; fi
  echo "RETRY: '$*' failed or passed its ${limit} s limit; running it once more" >&2
  if timeout --kill-after=10 "$limit" "$@"; then
    echo "FLAKY: '$*' passed on its second run" >&2
    return 0
  fi
  return 1
}
# The iOS build, type-checked on Linux where the iPhoneOS SDK is laid out (one "skipped" line
# elsewhere); about a minute.
if [ $# -eq 0 ]; then
  scripts/ios-check.sh
fi
if [ $# -eq 0 ]; then
  twice 1200 swift test --skip-build --no-parallel --skip DialtoneGStreamerTests
  # webrtcbin peers (libnice) inside a namespace of their own: no test packet reaches this
  # host's own address.
  twice 600 scripts/in-media-netns.sh swift test --skip-build --no-parallel --filter DialtoneGStreamerTests
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
