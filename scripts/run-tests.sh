#!/usr/bin/env bash
# Runs the already-built test suite. Services the tests need are started here (and stopped on exit).
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
# Serial: lws 4.1 on libuv closes an eventfd twice when a context is destroyed; with suites in
# parallel another test could be handed that descriptor number in between.
exec swift test --skip-build --no-parallel "$@"
