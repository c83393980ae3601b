#!/bin/bash
# Instructions the server runs per relayed message, counted by callgrind (deterministic where
# timing is not: docs/benchmarks.md, "The relay path, a fourteenth look").
#
#   bench/callgrind_relay.sh <dialtone-server> [rate] [window seconds] [dialtone-bench]
#
# Runs `dialtone-bench signaling --calls 100 --idle 1000 --rate <rate>` (default 300 a second:
# what the server keeps up with under callgrind) against the server under
# `valgrind --tool=callgrind`; once the load is steady, zeroes the counts, waits the window
# (default 30 s) and dumps them. The relayed messages of the window are the server's own count
# (`dialtone_messages_received_total` of invite, accept, candidate and hangup, from /metrics,
# read just before the zero and just after the dump). Prints instructions per relayed message
# and the dump's path, for `callgrind_annotate --inclusive=yes <dump>`.
#
# Valgrind 3.19 writes into the signal mask a program passes to sigsuspend; libdispatch's
# main-thread wait passes one in read-only memory, and Valgrind dies of a SIGSEGV. A preloaded
# sigsuspend (bench/valgrind_sigsuspend.c, built here) passes a copy: the server is unchanged.
set -euo pipefail
server=$(realpath "$1")
rate=${2:-300}
window=${3:-30}
bench=$(realpath "${4:-.build/release/dialtone-bench}")
work=$(mktemp -d /tmp/callgrind-relay.XXXXXX)

cc -O2 -shared -fPIC -o "$work/libsigsuspend.so" "$(dirname "$0")/valgrind_sigsuspend.c"
cat > "$work/server.sh" <<SH
#!/bin/sh
export LD_PRELOAD=$work/libsigsuspend.so
exec valgrind --tool=callgrind --callgrind-out-file=$work/callgrind.out.%p "$server" "\$@" 2>>"$work/valgrind.log"
SH
chmod +x "$work/server.sh"

"$bench" signaling --calls 100 --idle 1000 --rate "$rate" --seconds $((window + 45)) --dialtone-only \
  --server-binary "$work/server.sh" > "$work/bench.txt" 2>&1 &
bench_pid=$!
server_pid=""
for _ in $(seq 1 50); do
  server_pid=$(pgrep -P "$bench_pid" | head -1 || true)
  [ -n "$server_pid" ] && break
  sleep 0.2
done
[ -n "$server_pid" ] || { echo "the server did not start" >&2; exit 1; }
port=$(tr '\0' '\n' < "/proc/$server_pid/cmdline" | grep -A1 -- '^--port$' | tail -1)
relayed() {
  curl -s "http://127.0.0.1:$port/metrics" | awk '/^dialtone_messages_received_total\{type="(invite|accept|candidate|hangup)"\}/ { s += $2 } END { print s + 0 }'
}
# Steady: the count has grown twice in a row; then five seconds more.
previous=0
for _ in $(seq 1 300); do
  # curl fails until the server listens; awk still prints 0 (no second "0" from a fallback).
  now=$(relayed || true)
  if [ "$previous" -gt 0 ] && [ "$now" -gt "$previous" ]; then break; fi
  previous=$now
  sleep 1
done
sleep 5
before=$(relayed)
callgrind_control -z "$server_pid" > /dev/null 2>&1
sleep "$window"
callgrind_control -d "$server_pid" > /dev/null 2>&1
after=$(relayed)
wait "$bench_pid"
dump=$(ls "$work"/callgrind.out."$server_pid".1)
instructions=$(awk '/^(summary|totals):/ { print $2; exit }' "$dump")
messages=$((after - before))
echo "relayed $messages in ${window} s, $instructions instructions, $((instructions / messages)) per relayed message"
echo "dump: $dump"
tail -1 "$work/bench.txt"
