#!/usr/bin/env python3
"""What the write-behind resume's letter index costs and saves Redis (issue 41, item 4: the resume
path), this tree's scripts against a base commit's (read with `git show`), on a scratch
redis-server, interleaved (base, this, this, base, ...):

  letter   Redis CPU per letter another node leaves a live write-behind holder's session (the
           `deliver` step), 200 sessions, the holder storing each session's letters ten at a
           time (its batches move the session's `lp`): what the index adds to a message across
           nodes.
  resume   Redis CPU of one resume (`resumeScript`, holding) whose dead holder's inbox holds
           100,000 letters, 3 of them for the resumed session: the scan the index replaces.

Only Redis is measured. Usage:
  python3 bench/letter_index_probe.py [--base ccbb7b1] [--rounds 2] [--letters 20000]
"""
import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from resp_client import Redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = 'Sources/DialtoneCluster/SessionLedgerScripts.swift'


def probe_module(root):
    """`redis_layout_probe` as of `root` (its `swift_scripts` reads that tree's ledger scripts)."""
    spec = importlib.util.spec_from_file_location('probe_' + str(abs(hash(root))),
                                                  os.path.join(root, 'bench', 'redis_layout_probe.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.ROOT = root
    return module


def resume_script(root):
    """`resumeScript` as the server loads it, with the letter index's helpers if it has them."""
    text = open(os.path.join(root, SCRIPTS)).read()
    lua = re.search(r'static let resumeScript = RedisScript\(\n    """\n(.*?)\n    """\)', text, re.S).group(1)
    index = re.search(r'private static let letterIndex = """\n(.*?)\n    """', text, re.S)
    if index:
        lua = lua.replace('\\(letterIndex)', index.group(1))
    return lua.replace('\\\\', '\\')


def sessions(r, holder, count):
    ids = ['s%03d' % i for i in range(count)]
    for i, sid in enumerate(ids):
        r.cmd('HSET', 'dt:session:{%s}:meta' % sid, 'user', 'u%d' % i, 'device', 'phone', 'owner', holder, 'last', 0,
              'dropped', 0, 'bytes', 0, 'onces', 0, 'epoch', 1, 'wb', '1')
        r.cmd('HSET', 'dt:presence:{u%d}' % i, 'phone', '%s\n%s\n' % (holder, sid))
    return ids


def letter(r, probe, deliver, user):
    return r.cmd('EVALSHA', deliver, 1, 'dt:presence:{%s}' % user, 'n-producer', 'phone', '', probe.CANDIDATE_HEAD,
                 probe.CANDIDATE_TAIL, '', '', *probe.SHARED)


def run_letter(r, probe, scripts, letters):
    r.cmd('FLUSHALL')
    deliver = r.cmd('SCRIPT', 'LOAD', scripts['deliver']).decode()
    holder = 'n-holder'
    r.cmd('SET', 'dt:node:{%s}' % holder, '1')
    ids = sessions(r, holder, 200)
    start = r.cpu()
    for m in range(letters):
        letter(r, probe, deliver, 'u%d' % (m % 200))
        if (m // 200) % 10 == 9:  # the holder's batch stored this session's last ten letters
            newest = r.cmd('XREVRANGE', 'dt:inbox:{%s}' % holder, '+', '-', 'COUNT', 1)
            r.cmd('HSET', 'dt:session:{%s}:meta' % ids[m % 200], 'lp', newest[0][0])
        if m % 5000 == 4999:
            r.cmd('XTRIM', 'dt:inbox:{%s}' % holder, 'MAXLEN', 1000)
    return (r.cpu() - start) / letters * 1e6, 'µs per letter'


def run_resume(r, probe, scripts, _letters, total=100_000):
    r.cmd('FLUSHALL')
    deliver = r.cmd('SCRIPT', 'LOAD', scripts['deliver']).decode()
    resume = r.cmd('SCRIPT', 'LOAD', scripts['resume']).decode()
    sessions(r, 'n-dead', 2)
    for m in range(total):
        letter(r, probe, deliver, 'u0' if m in (10, total // 2, total - 10) else 'u1')
    keys = ['dt:session:{s000}:%s' % k for k in ('meta', 'log', 'replies', 'reply-order', 'once')]
    # The base reads up to the inbox bound; this tree takes the session's capacity there.
    bound = 1024 if 'stale_entries' in scripts['resume'] else 100_000
    start = r.cpu()
    reply = r.cmd('EVALSHA', resume, 5, *keys, 'u0', 'phone', 0, 'n-new', 60000, 256, '1', bound, 's000', 120000)
    used = (r.cpu() - start) * 1000
    found = sum(1 for x in reply if isinstance(x, bytes) and x.startswith(b'{"k":"unnumbered"'))
    assert found == 3, f'the resume found {found} letters, not 3'
    return used, 'ms per resume'


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--base', default='ccbb7b1')
    parser.add_argument('--rounds', type=int, default=2)
    parser.add_argument('--letters', type=int, default=20000)
    parser.add_argument('--port', type=int, default=16490)
    args = parser.parse_args()
    base_root = tempfile.mkdtemp()
    for path in (SCRIPTS, 'bench/redis_layout_probe.py'):
        os.makedirs(os.path.join(base_root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(base_root, path), 'w') as f:
            f.write(subprocess.check_output(['git', '-C', ROOT, 'show', f'{args.base}:{path}'], text=True))
    trees = {}
    for name, root in (('base', base_root), ('this', ROOT)):
        probe = probe_module(root)
        trees[name] = (probe, {'deliver': probe.swift_scripts()[0], 'resume': resume_script(root)})
    data = tempfile.mkdtemp()
    server = subprocess.Popen(['redis-server', '--port', str(args.port), '--save', '', '--appendonly', 'no',
                               '--dir', data], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        r = Redis(args.port)
        for mode, run in (('letter', run_letter), ('resume', run_resume)):
            results = {'base': [], 'this': []}
            for _ in range(args.rounds):
                for name in ('base', 'this', 'this', 'base'):
                    probe, scripts = trees[name]
                    value, unit = run(r, probe, scripts, args.letters)
                    results[name].append(value)
            medians = {name: sorted(v)[len(v) // 2] for name, v in results.items()}
            print(f'{mode}: base {args.base} {[round(v, 2) for v in results["base"]]}, '
                  f'this {[round(v, 2) for v in results["this"]]} ({unit}); medians {medians["base"]:.2f} / '
                  f'{medians["this"]:.2f}, ratio {medians["this"] / medians["base"]:.3f}', flush=True)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(base_root, ignore_errors=True)


if __name__ == '__main__':
    main()
