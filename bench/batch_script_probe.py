#!/usr/bin/env python3
"""What the write-behind batch script (`WriteBehindStoreScript`) costs Redis per frame, this tree's
script against a base commit's (read with `git show`), on a scratch redis-server, interleaved
(base, this, this, base, ...) (issue 41, item 4, fifth step).

The batches are shaped as `make bench-cluster`'s one-node row sends them with a 10 ms window
(`cluster_bench.py --slowlog`): about 37 sessions per batch with one frame each; every other frame
an answer (a request id, remembered in the replies), every other one a relayed candidate (a
once-key); 200 sessions, whose logs are trimmed every four batches to their last two frames (as
the clients' acknowledgements do; that trim's own cost, measured alone, is taken off). Only Redis is measured: its CPU (`INFO cpu`) per frame. Usage:
  python3 bench/batch_script_probe.py [--base HEAD] [--rounds 3] [--batches 400]
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from resp_client import Redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = 'Sources/DialtoneCluster/WriteBehindStoreScript.swift'
LEDGER = 'Sources/DialtoneCluster/SessionLedgerScripts.swift'


def swift_lua(text, name, ledger):
    """The Lua of the Swift string `name` in `text`, with the ledger's shared snippets it interpolates
    (`\\(SessionLedger.sessionLog)`, `\\(acknowledgedFrames)`) put in."""
    match = re.search(r'static let ' + name + r' = (?:RedisScript\(\n    )?"""\n(.*?)\n    """', text, re.S)
    if not match:
        return ''
    lua = match.group(1)
    for snippet in re.findall(r'\\\((?:SessionLedger\.)?(\w+)\)', lua):
        lua = re.sub(r'\\\((?:SessionLedger\.)?' + snippet + r'\)', lambda _: swift_lua(ledger, snippet, ledger), lua)
    return lua.replace('\\\\', '\\')


def scripts(batch_text, ledger_text):
    """The batch script, the acknowledgement script and the open script of one tree."""
    return (swift_lua(batch_text, 'batchScript', ledger_text), swift_lua(ledger_text, 'acknowledgeScript', ledger_text),
            swift_lua(ledger_text, 'openScript', ledger_text))


SESSIONS = 200
PER_BATCH = 37


def keys(session):
    tag = f'dt:session:{{s{session}}}'
    return [tag + ':meta', tag + ':log', tag + ':replies', tag + ':reply-order', tag + ':once']


ACK_EVERY = 20


def frames(request_every):
    """The probe's frames, endlessly, round the sessions: (session, seq, body, request id, once-key,
    letter position); one in `request_every` an answer with a request id, the others relayed copies
    with a once-key (`node_log_probe.py` stores the same ones)."""
    seqs = [0] * SESSIONS
    cursor = 0
    while True:
        s = cursor % SESSIONS
        cursor += 1
        seqs[s] += 1
        seq = seqs[s]
        body = ('{"type":"candidate","callId":"c%06d","candidate":{"candidate":"candidate:1 1 udp 2122260223 '
                '127.0.0.1 5%04d typ host","sdpMid":"0","sdpMLineIndex":0},"from":"u%d","seq":%d}'
                % (s, cursor % 10000, s, seq))
        request = f'r{cursor}' if cursor % request_every == 0 else ''
        once = f'c{s}:{cursor}' if cursor % request_every != 0 else ''
        yield s, seq, body, request, once, f'1733500000000-{cursor}'


def run(redis, tree, batches, request_every, mark=None):
    """Redis CPU µs per frame of `batches` batches, and of the acknowledgements that trim the logs,
    with one tree's scripts. With `mark` (callgrind), `mark(part, on)` is called around each phase of
    'batches' and of 'acks' instead, and nothing is measured here."""
    script, acknowledge, open_script = tree
    # The layout the script takes: five keys a session and a seq a frame (before the eleventh
    # step), or the meta key alone, the first seq a session and "seq:frame" log entries.
    five_keys = '#KEYS / 5' in script
    redis.cmd('FLUSHALL')
    # Each session opened by the tree's own open script (its meta hash's fields in its order), and
    # claimed by a holder.
    for s in range(SESSIONS):
        redis.cmd('EVAL', open_script, 5, *keys(s), f'u{s}', 'd', 'n1', 3600000)
        redis.cmd('HSET', keys(s)[0], 'wb', 1)
    sha = redis.cmd('SCRIPT', 'LOAD', script).decode()
    ack_sha = redis.cmd('SCRIPT', 'LOAD', acknowledge).decode()
    seqs = [0] * SESSIONS
    source = frames(request_every)
    count = 0
    spent = acks = 0.0
    cpu = (lambda: 0.0) if mark else redis.cpu
    mark = mark or (lambda part, on: None)
    for phase in range(0, batches, ACK_EVERY):
        mark('batches', True)
        before = cpu()
        for _ in range(phase, min(batches, phase + ACK_EVERY)):
            ks = []
            argv = [256, 1 << 20, 256, 256]
            for _ in range(PER_BATCH):
                s, seq, body, request, once, letter = next(source)
                seqs[s] = seq
                if five_keys:
                    ks += keys(s)
                    argv += [1, 1, letter, seq, body, request, once]
                else:
                    ks.append(keys(s)[0])
                    argv += [1, 1, letter, seq, f'{seq}:{body}', request, once]
                count += 1
            redis.cmd('EVALSHA', sha, len(ks), *ks, *argv)
        middle = cpu()
        mark('batches', False)
        mark('acks', True)
        # The clients' acknowledgements trim the logs to their last two frames, by the tree's own
        # acknowledgement script.
        for s in range(SESSIONS):
            redis.cmd('EVALSHA', ack_sha, 2, keys(s)[0], keys(s)[1], seqs[s] - 2)
        after = cpu()
        mark('acks', False)
        spent += middle - before
        acks += after - middle
    return spent * 1e6 / count, acks * 1e6 / count, count


def start_server(folder, valgrind_out=None):
    """A scratch redis-server (under callgrind, its instrumentation off until asked, with
    `valgrind_out`) and a client of it."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    command = ['redis-server', '--port', str(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
               '--dir', folder]
    if valgrind_out:
        command = ['valgrind', '--tool=callgrind', '--instr-atstart=no', f'--callgrind-out-file={valgrind_out}'] + command
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            redis = Redis(port)
            redis.cmd('PING')
            return server, redis
        except OSError:
            time.sleep(0.1)
    raise RuntimeError('redis-server did not start')


def counted(folder, part, body):
    """Redis's instructions (callgrind: deterministic) over the phases `body(redis, mark)` marks as
    `part` (it calls `mark(part, on)` around each), and what `body` returned (the frames, or whatever
    else they were for)."""
    out = os.path.join(folder, f'callgrind-{part}.out')
    server, redis = start_server(folder, out)

    def mark(which, on):
        if which == part:
            subprocess.run(['callgrind_control', '-i', 'on' if on else 'off', str(server.pid)], check=True,
                           capture_output=True)
    try:
        units = body(redis, mark)
    finally:
        server.terminate()
        server.wait()
    totals = subprocess.run(['callgrind_annotate', out], capture_output=True, text=True, check=True).stdout
    os.remove(out)
    return int(re.search(r'([\d,]+) \(100.0%\)\s+PROGRAM TOTALS', totals).group(1).replace(',', '')), units


def instructions(tree, part, batches, request_every, folder):
    """Redis's instructions per frame of one part ('batches' or 'acks') of a run with one tree's
    scripts, the other part and the set-up not counted."""
    total, count = counted(folder, part, lambda redis, mark: run(redis, tree, batches, request_every, mark)[2])
    return total / count


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--base', default='HEAD')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--batches', type=int, default=400)
    parser.add_argument('--request-every', type=int, default=16,
                        help='one frame in this many an answer with a request id, the others candidates with a '
                             'once-key (16: the tenth step\'s INFO commandstats; 2: the fifth step\'s shape)')
    parser.add_argument('--this', help='a Swift file to read the script from instead of this tree\'s')
    parser.add_argument('--callgrind', action='store_true',
                        help='count Redis\'s instructions per frame under callgrind (one run per tree and part, '
                             'deterministic) instead of its CPU time')
    args = parser.parse_args()
    def show(path):
        return subprocess.run(['git', 'show', f'{args.base}:{path}'], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout
    base = scripts(show(SCRIPT), show(LEDGER))
    this = scripts(open(args.this or os.path.join(ROOT, SCRIPT)).read(), open(os.path.join(ROOT, LEDGER)).read())
    folder = tempfile.mkdtemp(prefix='batch-probe-')
    if args.callgrind:
        try:
            counts = {(name, part): instructions(tree, part, args.batches, args.request_every, folder)
                      for name, tree in (('base', base), ('this', this)) for part in ('batches', 'acks')}
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        for part in ('batches', 'acks'):
            print(f'{part}: Redis instructions per frame, base {counts["base", part]:,.0f}, this '
                  f'{counts["this", part]:,.0f}; this / base {counts["this", part] / counts["base", part]:.2f}')
        return
    server, redis = start_server(folder)
    try:
        results = {'base': [], 'this': []}
        for _ in range(args.rounds):
            for name in ('base', 'this', 'this', 'base'):
                results[name].append(run(redis, base if name == 'base' else this, args.batches, args.request_every))
        medians = {}
        for name, values in results.items():
            for part, label in ((0, 'batches'), (1, 'acknowledgements')):
                figures = sorted(v[part] for v in values)
                medians[name, part] = figures[len(figures) // 2]
                print(f'{name}: {label}, Redis CPU µs per frame {", ".join(f"{v:.2f}" for v in figures)}; '
                      f'median {medians[name, part]:.2f}')
        print(f'this / base: batches {medians["this", 0] / medians["base", 0]:.2f}, acknowledgements '
              f'{medians["this", 1] / medians["base", 1]:.2f}')
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
