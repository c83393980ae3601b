#!/usr/bin/env bash
# Builds the libFuzzer harnesses (FuzzTesting/) with the fuzzer and address sanitizers and runs
# each for FUZZ_SECONDS, two at a time. Each grows a working corpus in FuzzTesting/.corpus
# (seeded from FuzzTesting/Corpus, which stays as committed); a crash leaves its input in
# FuzzTesting/crashes/ and fails the run: copy it to FuzzTesting/Regressions/<Harness>/ once
# fixed, and `make test` replays it from then on.
#   scripts/fuzz.sh [HARNESS...]        (default: all)
set -euo pipefail
cd "$(dirname "$0")/../FuzzTesting"
# FuzzHTTPRequest's in-process server holds a socket per connection it has not yet closed.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
SECONDS_EACH="${FUZZ_SECONDS:-60}"
JOBS="${FUZZ_PARALLEL:-2}"
ALL=(FuzzClientMessage FuzzServerMessage FuzzHTTPBodies FuzzPushPayload FuzzSDP FuzzJWT FuzzHTTPRequest FuzzWebSocketFrames
  FuzzHTTPHead)
TARGETS=("${@:-${ALL[@]}}")
swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library 2>&1 \
  | grep -v "ld.gold: warning: Cannot export local symbol" || true
BIN="$(swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library --show-bin-path)"
mkdir -p crashes logs
run_one() {
  local target="$1"
  local status=0
  local extra=()
  # The server answers on its own thread, so what one input allocates is freed during a later
  # one: LeakSanitizer's per-input check would call that a leak.
  local asan="${ASAN_OPTIONS:-quarantine_size_mb=64}"
  # ...and LeakSanitizer's own pass over the server's threads died once with "Can't open
  # /proc/PID/task" after 11 minutes: leaks are not checked in this harness at all.
  if [ "$target" = FuzzHTTPRequest ]; then
    extra+=(-detect_leaks=0 -max_len=8192)
    asan="quarantine_size_mb=16:detect_leaks=0"
  fi
  mkdir -p ".corpus/$target"
  # On a crash the Swift backtracer would otherwise hang for minutes.
  SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="$asan" "$BIN/$target" ".corpus/$target" "Corpus/$target" \
    -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="crashes/$target-" "${extra[@]}" > "logs/$target.log" 2>&1 || status=$?
  local summary
  summary="$(grep -E '^#[0-9]+.*DONE' "logs/$target.log" | tail -1 || true)"
  echo "$target: exit $status; $summary; corpus $(ls ".corpus/$target" | wc -l) files"
  return $status
}
failed=0
pids=()
for target in "${TARGETS[@]}"; do
  run_one "$target" & pids+=($!)
  if [ "${#pids[@]}" -ge "$JOBS" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
if [ "$failed" -ne 0 ]; then
  echo "fuzz: a harness failed; inputs in FuzzTesting/crashes/, logs in FuzzTesting/logs/" >&2
  exit 1
fi
