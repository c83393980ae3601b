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


def batch_script(text):
    lua = re.search(r'static let batchScript = RedisScript\(\n    """\n(.*?)\n    """\)', text, re.S).group(1)
    return lua.replace('\\\\', '\\')


SESSIONS = 200
PER_BATCH = 37


def keys(session):
    tag = f'dt:session:{{s{session}}}'
    return [tag + ':meta', tag + ':log', tag + ':replies', tag + ':order', tag + ':once']


def run(redis, script, batches):
    """Redis CPU µs per frame of `batches` batches."""
    redis.cmd('FLUSHALL')
    for s in range(SESSIONS):
        meta = keys(s)[0]
        redis.cmd('HSET', meta, 'last', 0, 'dropped', 0, 'bytes', 0, 'onces', 0, 'epoch', 1, 'owner', 'n1', 'wb', 1)
        redis.cmd('PEXPIRE', meta, 3600000)
    sha = redis.cmd('SCRIPT', 'LOAD', script).decode()
    seqs = [0] * SESSIONS
    frames = 0
    cursor = 0
    before = redis.cpu()
    for b in range(batches):
        ks = []
        argv = [256, 1 << 20, 256, 256]
        for _ in range(PER_BATCH):
            s = cursor % SESSIONS
            cursor += 1
            seqs[s] += 1
            seq = seqs[s]
            ks += keys(s)
            argv += [1, 1, f'1733500000000-{cursor}']
            body = ('{"type":"candidate","callId":"c%06d","candidate":{"candidate":"candidate:1 1 udp 2122260223 '
                    '127.0.0.1 5%04d typ host","sdpMid":"0","sdpMLineIndex":0},"from":"u%d","seq":%d}'
                    % (s, cursor % 10000, s, seq))
            request = f'r{cursor}' if cursor % 2 == 0 else ''
            once = f'c{s}:{cursor}' if cursor % 2 == 1 else ''
            argv += [seq, body, request, once]
            frames += 1
        redis.cmd('EVALSHA', sha, len(ks), *ks, *argv)
        # The clients' acknowledgements trim the logs (as `acknowledgeScript` does, by score).
        if b % 4 == 3:
            for s in range(SESSIONS):
                redis.cmd('ZREMRANGEBYSCORE', keys(s)[1], '-inf', seqs[s] - 2)
    after = redis.cpu()
    # The acknowledgements' own cost, measured alone, is taken off.
    before_acks = redis.cpu()
    for _ in range(batches // 4):
        for s in range(SESSIONS):
            redis.cmd('ZREMRANGEBYSCORE', keys(s)[1], '-inf', 0)
    acks = redis.cpu() - before_acks
    return (after - before - acks) * 1e6 / frames


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--base', default='HEAD')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--batches', type=int, default=400)
    parser.add_argument('--this', help='a Swift file to read the script from instead of this tree\'s')
    args = parser.parse_args()
    base = batch_script(subprocess.run(['git', 'show', f'{args.base}:{SCRIPT}'], cwd=ROOT, capture_output=True,
                                       text=True, check=True).stdout)
    this = batch_script(open(args.this or os.path.join(ROOT, SCRIPT)).read())
    folder = tempfile.mkdtemp(prefix='batch-probe-')
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(['redis-server', '--port', str(port), '--bind', '127.0.0.1', '--save', '',
                               '--appendonly', 'no', '--dir', folder], stdout=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                redis = Redis(port)
                redis.cmd('PING')
                break
            except OSError:
                time.sleep(0.1)
        results = {'base': [], 'this': []}
        for _ in range(args.rounds):
            for name in ('base', 'this', 'this', 'base'):
                results[name].append(run(redis, base if name == 'base' else this, args.batches))
        for name, values in results.items():
            values.sort()
            print(f'{name}: Redis CPU µs per frame {", ".join(f"{v:.1f}" for v in values)}; '
                  f'median {values[len(values) // 2]:.1f}')
        b = sorted(results['base'])[len(results['base']) // 2]
        t = sorted(results['this'])[len(results['this']) // 2]
        print(f'this / base: {t / b:.2f}')
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
