#!/usr/bin/env python3
"""What the per-node write-behind log (`WriteBehindLogScripts`, docs/architecture.md's write-behind
point 7) costs Redis per stored frame, against today's batch and acknowledgement scripts
(`WriteBehindStoreScript`, `SessionLedger.acknowledgeScript`), counted by callgrind on a scratch
redis-server (issue 41, item 4, twelfth step).

Both layouts get the same frames, shaped as `batch_script_probe.py` shapes them (the eleventh step's:
batches of 37 one-frame sessions over 200 sessions, one frame in `--request-every` an answer with a
request id, the others relayed copies with a once-key, each with its letter position), and the same
acknowledgements (every 20 batches each client acknowledges all but its last two frames):
- today: one batch script per batch; one acknowledgement script per session per round;
- the node log: per batch one append per stripe holding frames (the stripe's frames packed into
  one entry, `WriteBehindLogEntry`'s layout); per round one trim per stripe, up to its oldest
  entry holding a frame not acknowledged, writing the checkpoints ("last lp") of the sessions
  whose frames it trimmed and one blob of their once-keys.
Each also with the append as a transaction without Lua (`run_log`'s `transaction`). Also what a take (a
resume's read of a stripe, `takeScript`) costs as the stripe grows. Usage:
  python3 bench/node_log_probe.py [--batches 100] [--request-every 16] [--stripes 1 4] [--take-lengths 10 100 1000]
"""
import argparse
import os
import shutil
import sys
import tempfile

from batch_script_probe import (ACK_EVERY, LEDGER, PER_BATCH, ROOT, SCRIPT, SESSIONS, counted, frames, run, scripts,
                                swift_lua)

LOG_SCRIPTS = 'Sources/DialtoneCluster/WriteBehindLogScripts.swift'
EXPIRY = 3600000
ONCE_BLOBS = 64


def varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7f | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def data(raw):
    return varint(len(raw)) + raw


def entry(items):
    """One log entry (`WriteBehindLogEntry.encoded`): version 1, frame count, then per frame its session,
    epoch, seq, once-key, request id, letter position and frame (varints and length-prefixed strings)."""
    out = [b'\x01', varint(len(items))]
    for s, seq, body, request, once, letter in items:
        out += [data(f's{s}'.encode()), varint(1), varint(seq), data(once.encode()), data(request.encode()),
                data(letter.encode()), data(body.encode())]
    return b''.join(out)


def onces_blob(pairs):
    """One trim's once-keys (`WriteBehindLogTrimmed.Onces.encoded`)."""
    return b''.join(data(s.encode()) + data(once.encode()) for s, once in pairs)


def stripe_keys(stripe):
    tag = f'dt:wbl:{{n1:{stripe}}}'
    return [tag, tag + ':fence', tag + ':state', tag + ':onces']


def run_log(redis, lua, batches, request_every, stripes, mark, transaction=False):
    """The node log's appends ('batches') and trims ('acks') of `batches` batches; returns the frames.
    With `transaction`, each append is `MULTI`, `HMGET` of the fence, `RPUSH`, `EXEC` (and a `PEXPIRE`
    when the holder's stripe was empty) instead of the append script: the entry never enters Lua (not
    built: what it would take is in docs/architecture.md, write-behind point 7)."""
    append, trim = lua['appendScript'], lua['trimScript']
    redis.cmd('FLUSHALL')
    append_sha = redis.cmd('SCRIPT', 'LOAD', append).decode()
    trim_sha = redis.cmd('SCRIPT', 'LOAD', trim).decode()
    source = frames(request_every)
    # The holder's view of each stripe: its entries' absolute numbers and, per entry, its frames.
    held = [[] for _ in range(stripes)]
    last = [0] * SESSIONS
    count = 0
    for phase in range(0, batches, ACK_EVERY):
        mark('batches', True)
        for _ in range(phase, min(batches, phase + ACK_EVERY)):
            parts = [[] for _ in range(stripes)]
            for _ in range(PER_BATCH):
                item = next(source)
                parts[item[0] % stripes].append(item)
                last[item[0]] = item[1]
                count += 1
            for stripe, items in enumerate(parts):
                if not items:
                    continue
                keys = stripe_keys(stripe)
                if transaction:
                    redis.cmd('MULTI')
                    redis.cmd('HMGET', keys[1], 'gen', 'head')
                    redis.cmd('RPUSH', keys[0], entry(items))
                    if not held[stripe]:
                        redis.cmd('PEXPIRE', keys[0], EXPIRY)
                    fence, length = redis.cmd('EXEC')[:2]
                    reply = [1, int(fence[1] or 0) + length - 1]
                else:
                    reply = redis.cmd('EVALSHA', append_sha, 2, *keys[:2], '0', entry(items), EXPIRY)
                assert reply[0] == 1, reply
                held[stripe].append((reply[1], items))
        mark('batches', False)
        mark('acks', True)
        for stripe in range(stripes):
            # Each client acknowledged all but its last two frames: trim up to the first entry that
            # holds a frame not acknowledged; the trimmed frames' sessions get a checkpoint, their
            # once-keys one blob.
            keep = None
            checkpoints = {}
            onces = []
            while held[stripe]:
                number, items = held[stripe][0]
                if any(seq > last[s] - 2 for s, seq, *_ in items):
                    keep = number
                    break
                for s, seq, _, _, once, letter in items:
                    checkpoints[f's{s}'] = f'{seq} {letter}'
                    if once:
                        onces.append((f's{s}', once))
                held[stripe].pop(0)
                keep = number + 1
            if keep is None:
                continue
            pairs = [x for kv in checkpoints.items() for x in kv]
            reply = redis.cmd('EVALSHA', trim_sha, 4, *stripe_keys(stripe), '0', keep, EXPIRY, ONCE_BLOBS,
                              onces_blob(onces), *pairs)
            assert reply[0] == 1, reply
        mark('acks', False)
    return count


def run_take(redis, lua, length, takes, mark):
    """`takes` takes of one stripe `length` entries long (entries as the 4-stripe shape packs them)."""
    redis.cmd('FLUSHALL')
    append_sha = redis.cmd('SCRIPT', 'LOAD', lua['appendScript']).decode()
    take_sha = redis.cmd('SCRIPT', 'LOAD', lua['takeScript']).decode()
    source = frames(16)
    keys = stripe_keys(0)
    for _ in range(length):
        items = [next(source) for _ in range(PER_BATCH // 4)]
        redis.cmd('EVALSHA', append_sha, 2, *keys[:2], '0', entry(items), EXPIRY)
    mark('take', True)
    for t in range(takes):
        reply = redis.cmd('EVALSHA', take_sha, 4, *keys, f's{t}', 2, EXPIRY)
        assert reply[0] == 1 and len(reply[4]) == length, reply[:3]
    mark('take', False)
    return takes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--batches', type=int, default=100)
    parser.add_argument('--request-every', type=int, default=16)
    parser.add_argument('--stripes', type=int, nargs='+', default=[1, 4])
    parser.add_argument('--take-lengths', type=int, nargs='+', default=[10, 100, 1000])
    parser.add_argument('--takes', type=int, default=20)
    args = parser.parse_args()
    ledger = open(os.path.join(ROOT, LEDGER)).read()
    today = scripts(open(os.path.join(ROOT, SCRIPT)).read(), ledger)
    text = open(os.path.join(ROOT, LOG_SCRIPTS)).read()
    lua = {name: swift_lua(text, name, text) for name in ('appendScript', 'trimScript', 'takeScript')}
    assert all(lua.values()), 'a script was not found in ' + LOG_SCRIPTS
    folder = tempfile.mkdtemp(prefix='node-log-probe-')
    try:
        rows = []
        for part in ('batches', 'acks'):
            total, units = counted(folder, part, lambda redis, mark: run(redis, today, args.batches,
                                                                       args.request_every, mark)[2])
            rows.append(('today', part, total / units))
        for stripes in args.stripes:
            for transaction in (False, True):
                name = f'node log, {stripes} stripe{"s" if stripes > 1 else ""}'
                name += ', appended in a transaction (not built)' if transaction else ''
                for part in ('batches', 'acks'):
                    total, units = counted(folder, part, lambda redis, mark: run_log(
                        redis, lua, args.batches, args.request_every, stripes, mark, transaction))
                    rows.append((name, part, total / units))
        by = {}
        for name, part, value in rows:
            by.setdefault(name, {})[part] = value
        base = by['today']['batches'] + by['today']['acks']
        print('Redis instructions per stored frame (batches, acknowledgements or trims, both):')
        for name, parts in by.items():
            both = parts['batches'] + parts['acks']
            print(f'  {name}: {parts["batches"]:,.0f} + {parts["acks"]:,.0f} = {both:,.0f}; {both / base:.2f} of today')
        print(f'A take (a resume reading one stripe), instructions per take, entries of {PER_BATCH // 4} frames:')
        for length in args.take_lengths:
            total, units = counted(folder, 'take', lambda redis, mark: run_take(redis, lua, length, args.takes, mark))
            print(f'  {length} entries: {total / units:,.0f}')
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
