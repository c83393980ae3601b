#!/usr/bin/env bash
# Runs the already-built test suite. Services the tests need are started here (and stopped on exit).
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec swift test --skip-build "$@"
