#!/usr/bin/env python3
"""What Redis spends per relayed message under three ways of storing a cluster's sessions
(issue 41, item 4: choosing the design by measuring).

A relayed candidate stores two frames: the copy for the callee's session and the `ack` in the
caller's session (remembered with its request id). Each mode stores N relayed messages for 200
sessions (100 calls) on a scratch redis-server, one round trip in flight, the clients
acknowledging every ~20 messages, and prints Redis's own CPU (INFO cpu) per relayed message:

  today[K]   the ledger's scripts as the server runs them (read from SessionLedgerScripts.swift):
             per message a `deliver` step (the callee's presence hash read whole) and an
             `append` step, in MULTI/EXEC; K messages per transaction (group commit), default 1.
  lean[K]    the same duties on a leaner layout: the log a list instead of a sorted set, the
             callee's presence entry read alone (HGET), both frames in one script per event.
  holder[K]  write-behind: the holder numbers its sessions' frames and stores K events' frames in
             one script (fenced by the session's owner); nothing is read back.
  batch[K]   write-behind as built (branch `write-behind`): `WriteBehindStore`'s batch script, read
             from WriteBehindStoreScript.swift, K events' frames per script in today's layout
             (the log a sorted set), fenced by the session's epoch and seq; the clients'
             acknowledgements with today's script.

Only Redis is measured: no node, no sockets to clients. Usage:
  python3 bench/redis_layout_probe.py [--messages 20000] [--rounds 2] [--trickle 1] [MODE ...]
"""
import argparse
import os
import re
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SESSIONS = 200
CANDIDATE_HEAD = b'{"type":"candidate","seq":'
CANDIDATE_TAIL = (
    b',"callId":"3f2c1a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69","from":{"userId":"bob","deviceId":"laptop",'
    b'"name":"Bob"},"candidate":{"candidate":"candidate:1 1 udp 2122260223 192.168.1.20 54321 typ host",'
    b'"sdpMid":"0","sdpMLineIndex":0}}')
ACK_HEAD = b'{"type":"ack","seq":'
# capacity, max bytes, reply memory, once memory, inbox capacity, inbox expiry ms, notify here
SHARED = [1024, 1 << 20, 512, 256, 100000, 120000, '1']


def ack_tail(i):
    return b',"replyTo":"m%d"}' % i


def acknowledges(m):
    """Each pair's clients acknowledge about every 20 of its messages (k: message m's ordinal
    among its pair's, with `--trickle`; without, the pairs take turns and k is m // 100)."""
    k = (m // (TRICKLE * (SESSIONS // 2))) * TRICKLE + m % TRICKLE
    return k % 20 == 19


# Consecutive messages of one call (`--trickle`): 1 spreads them over every call in turn, as
# many calls' messages interleave on a busy node; more sends a call's candidates in a row.
TRICKLE = 1


def pair(m):
    sender = 2 * ((m // TRICKLE) % (SESSIONS // 2))
    return sender, sender + 1


class Redis:
    """RESP over one socket: commands written together, replies read in order."""

    def __init__(self, port):
        self.sock = socket.create_connection(('127.0.0.1', port))
        self.buf = b''

    @staticmethod
    def encode(args):
        out = [b'*%d\r\n' % len(args)]
        for a in args:
            a = str(a).encode() if isinstance(a, int) else a.encode() if isinstance(a, str) else a
            out.append(b'$%d\r\n%s\r\n' % (len(a), a))
        return b''.join(out)

    def _fill(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError('redis closed the connection')
            self.buf += chunk

    def _line(self):
        while b'\r\n' not in self.buf:
            self._fill(len(self.buf) + 1)
        line, self.buf = self.buf.split(b'\r\n', 1)
        return line

    def read(self):
        line = self._line()
        kind = line[:1]
        if kind in (b'+', b':'):
            return line[1:]
        if kind == b'-':
            raise RuntimeError(line[1:].decode())
        if kind == b'$':
            n = int(line[1:])
            if n < 0:
                return None
            self._fill(n + 2)
            value, self.buf = self.buf[:n], self.buf[n + 2:]
            return value
        if kind == b'*':
            n = int(line[1:])
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError('unexpected reply %r' % line)

    def many(self, commands):
        self.sock.sendall(b''.join(self.encode(c) for c in commands))
        return [self.read() for _ in commands]

    def command(self, *args):
        return self.many([args])[0]

    def cpu(self):
        info = self.command('INFO', 'cpu').decode()
        fields = dict(line.split(':', 1) for line in info.split('\r\n') if ':' in line)
        return float(fields['used_cpu_user']) + float(fields['used_cpu_sys'])


def batch_script():
    """`WriteBehindStore.batchScript` as the server loads it."""
    text = open(os.path.join(ROOT, 'Sources/DialtoneCluster/WriteBehindStoreScript.swift')).read()
    lua = re.search(r'static let batchScript = RedisScript\(\n    """\n(.*?)\n    """\)', text, re.S).group(1)
    return lua.replace('\\\\', '\\')


def swift_scripts():
    """The ledger's `deliver`, `append` and `acknowledge` scripts as the server loads them."""
    text = open(os.path.join(ROOT, 'Sources/DialtoneCluster/SessionLedgerScripts.swift')).read()

    def unescape(lua):
        return lua.replace('\\\\', '\\')

    # The letter index's helpers (`letterIndex`) are interpolated at the step's head.
    index = unescape(re.search(r'private static let letterIndex = """\n(.*?)\n    """', text, re.S).group(1))
    step = unescape(re.search(r'private static let appendStep = """\n(.*?)\n    """', text, re.S).group(1))
    step = step.replace('\\(letterIndex)', index)
    deliver = unescape(re.search(
        r'static let deliverScript = RedisScript\(\n    appendStep \+ """\n(.*?)\n      """\)', text, re.S).group(1))
    append = unescape(re.search(
        r'static let appendScript = RedisScript\(\n    appendStep \+ """\n(.*?)\n      """\)', text, re.S).group(1))
    acknowledge = unescape(re.search(
        r'static let acknowledgeScript = RedisScript\(\n    """\n(.*?)\n    """\)', text, re.S).group(1))
    return step + deliver, step + append, acknowledge


# The same duties as today's append (owner check, count and byte bounds, the seq dropped, the
# reply memory), with the log a list of frames.
LEAN_STEP = r"""
local function append_to(sid, node, head, tail, request)
  local tag = 'dt:session:{' .. sid .. '}'
  local meta, log = tag .. ':meta', tag .. ':log'
  local m = redis.call('HMGET', meta, 'owner', 'last', 'bytes')
  if not m[1] then return {4} end
  local seq = (tonumber(m[2]) or 0) + 1
  local frame = head .. seq .. tail
  local bytes = (tonumber(m[3]) or 0) + #frame
  local count = redis.call('RPUSH', log, frame)
  if count > 1024 or bytes > 1048576 then
    bytes = bytes - #redis.call('LPOP', log)
    redis.call('HSET', meta, 'last', seq, 'bytes', bytes, 'dropped', seq - count + 1)
  else
    redis.call('HSET', meta, 'last', seq, 'bytes', bytes)
  end
  if request ~= '' and redis.call('HSET', tag .. ':replies', request, frame) == 1 then
    if redis.call('RPUSH', tag .. ':reply-order', request) > 512 then
      redis.call('HDEL', tag .. ':replies', redis.call('LPOP', tag .. ':reply-order'))
    end
  end
  if m[1] == node then return {0, seq, frame} end
  return {2, seq}
end
"""

# KEYS: the callee's presence. ARGV: node, callee device, its frame's head and tail, the caller's
# session, its answer's head and tail, the request id.
LEAN_EVENT = LEAN_STEP + r"""
local out = {}
local entry = redis.call('HGET', KEYS[1], ARGV[2])
if entry then
  out[1] = append_to(string.match(entry, '^[^\n]*\n([^\n]*)\n'), ARGV[1], ARGV[3], ARGV[4], '')
else
  out[1] = {4}
end
out[2] = append_to(ARGV[5], ARGV[1], ARGV[6], ARGV[7], ARGV[8])
return out
"""

# KEYS: meta, log. ARGV: the seq acknowledged.
LEAN_ACKNOWLEDGE = r"""
local last = tonumber(redis.call('HGET', KEYS[1], 'last'))
local count = redis.call('LLEN', KEYS[2])
local drop = count - (last - math.min(tonumber(ARGV[1]), last))
if drop > 0 then redis.call('LTRIM', KEYS[2], drop, -1) end
return drop
"""

# ARGV: node, then per frame: session, seq, frame, request id ('' for none). A session another
# node owns refuses its frames (the fence).
HOLDER_BATCH = r"""
local node = ARGV[1]
local out = {}
local owners = {}
for i = 2, #ARGV, 4 do
  local sid, seq, frame, request = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local tag = 'dt:session:{' .. sid .. '}'
  local meta = tag .. ':meta'
  local owner = owners[sid]
  if owner == nil then
    owner = redis.call('HGET', meta, 'owner') or ''
    owners[sid] = owner
  end
  if owner ~= node then
    out[#out + 1] = 0
  else
    if redis.call('RPUSH', tag .. ':log', frame) > 1024 then redis.call('LPOP', tag .. ':log') end
    redis.call('HSET', meta, 'last', seq)
    if request ~= '' and redis.call('HSET', tag .. ':replies', request, frame) == 1 then
      if redis.call('RPUSH', tag .. ':reply-order', request) > 512 then
        redis.call('HDEL', tag .. ':replies', redis.call('LPOP', tag .. ':reply-order'))
      end
    end
    out[#out + 1] = 1
  end
end
return out
"""


def session_keys(index):
    tag = 'dt:session:{s%d}' % index
    return [tag + ':meta', tag + ':log', tag + ':replies', tag + ':reply-order', tag + ':once']


def setup(redis):
    redis.command('FLUSHALL')
    commands = [('SET', 'dt:node:{n1}', '1')]
    for i in range(SESSIONS):
        meta = session_keys(i)[0]
        commands.append(('HSET', meta, 'user', 'u%d' % i, 'device', 'd', 'owner', 'n1', 'last', 0, 'dropped', 0,
                         'bytes', 0, 'onces', 0, 'epoch', 1))
        commands.append(('HSET', 'dt:presence:{u%d}' % i, 'd', 'n1\ns%d\n1' % i))
    redis.many(commands)


def check(replies):
    for reply in replies:
        if isinstance(reply, list) and reply and reply[0] in (b'3', b'4'):
            raise RuntimeError('a frame found no session: %r' % reply)


def run_today(redis, n, per_transaction):
    deliver, append, acknowledge = (redis.command('SCRIPT', 'LOAD', s).decode() for s in swift_scripts())
    for start in range(0, n, per_transaction):
        commands, acks = [('MULTI',)], []
        for m in range(start, min(n, start + per_transaction)):
            sender, receiver = pair(m)
            commands.append(('EVALSHA', deliver, 1, 'dt:presence:{u%d}' % receiver, 'n1', 'd', '', CANDIDATE_HEAD,
                             CANDIDATE_TAIL, '', '', *SHARED))
            commands.append(('EVALSHA', append, 5, *session_keys(sender), 'n1', 's%d' % sender, ACK_HEAD, ack_tail(m),
                             'm%d' % m, '', *SHARED))
            if acknowledges(m):
                acks += [('EVALSHA', acknowledge, 2, *session_keys(s)[:2], 10 ** 12) for s in (sender, receiver)]
        commands.append(('EXEC',))
        replies = redis.many(commands + acks)
        check(replies[len(commands) - 1])


def run_lean(redis, n, per_transaction):
    event = redis.command('SCRIPT', 'LOAD', LEAN_EVENT).decode()
    acknowledge = redis.command('SCRIPT', 'LOAD', LEAN_ACKNOWLEDGE).decode()
    for start in range(0, n, per_transaction):
        commands, acks = [], []
        for m in range(start, min(n, start + per_transaction)):
            sender, receiver = pair(m)
            commands.append(('EVALSHA', event, 1, 'dt:presence:{u%d}' % receiver, 'n1', 'd', CANDIDATE_HEAD,
                             CANDIDATE_TAIL, 's%d' % sender, ACK_HEAD, ack_tail(m), 'm%d' % m))
            if acknowledges(m):
                acks += [('EVALSHA', acknowledge, 2, *session_keys(s)[:2], 10 ** 12) for s in (sender, receiver)]
        if len(commands) > 1:
            commands = [('MULTI',)] + commands + [('EXEC',)]
            check(sum(redis.many(commands + acks)[len(commands) - 1], []))
        else:
            check(redis.many(commands + acks)[0])


def run_holder(redis, n, per_batch):
    batch = redis.command('SCRIPT', 'LOAD', HOLDER_BATCH).decode()
    seqs = [0] * SESSIONS
    for start in range(0, n, per_batch):
        arguments, acks = ['n1'], []
        for m in range(start, min(n, start + per_batch)):
            sender, receiver = pair(m)
            seqs[receiver] += 1
            seqs[sender] += 1
            arguments += ['s%d' % receiver, seqs[receiver], CANDIDATE_HEAD + b'%d' % seqs[receiver] + CANDIDATE_TAIL, '']
            arguments += ['s%d' % sender, seqs[sender], ACK_HEAD + b'%d' % seqs[sender] + ack_tail(m), 'm%d' % m]
            if acknowledges(m):
                acks += [('LTRIM', session_keys(s)[1], 20, -1) for s in (sender, receiver)]
        replies = redis.many([('EVALSHA', batch, 0, *arguments)] + acks)
        if b'0' in replies[0]:
            raise RuntimeError('a frame was fenced off')


def run_batch(redis, n, per_batch):
    batch = redis.command('SCRIPT', 'LOAD', batch_script()).decode()
    acknowledge = redis.command('SCRIPT', 'LOAD', swift_scripts()[2]).decode()
    seqs = [0] * SESSIONS
    for start in range(0, n, per_batch):
        frames, order, acks = {}, [], []
        for m in range(start, min(n, start + per_batch)):
            sender, receiver = pair(m)
            for s, head, tail, request in ((receiver, CANDIDATE_HEAD, CANDIDATE_TAIL, ''),
                                           (sender, ACK_HEAD, ack_tail(m), 'm%d' % m)):
                seqs[s] += 1
                if s not in frames:
                    frames[s] = []
                    order.append(s)
                frames[s] += [seqs[s], head + b'%d' % seqs[s] + tail, request]
            if acknowledges(m):
                acks += [('EVALSHA', acknowledge, 2, *session_keys(s)[:2], 10 ** 12) for s in (sender, receiver)]
        keys, arguments = [], [1024, 1 << 20, 512, '', 120000]
        for s in order:
            keys += session_keys(s)[:4]
            arguments += [1, len(frames[s]) // 3, *frames[s]]
        keys.append('dt:inbox-applied:{n1}')
        replies = redis.many([('EVALSHA', batch, len(keys), *keys, *arguments)] + acks)
        if replies[0]:
            raise RuntimeError('a session was refused: %r' % replies[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--messages', type=int, default=20000)
    parser.add_argument('--rounds', type=int, default=2)
    parser.add_argument('--trickle', type=int, default=1, help='consecutive messages of one call')
    parser.add_argument('modes', nargs='*', default=['today', 'today5', 'lean', 'lean5', 'holder', 'holder5'])
    args = parser.parse_args()
    global TRICKLE
    TRICKLE = max(1, args.trickle)
    runners = {'today': run_today, 'lean': run_lean, 'holder': run_holder, 'batch': run_batch}
    scratch = tempfile.mkdtemp(prefix='dialtone-redis-probe-')
    probe = socket.socket()
    probe.bind(('127.0.0.1', 0))
    port = probe.getsockname()[1]
    probe.close()
    server = subprocess.Popen(
        ['redis-server', '--port', str(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir',
         scratch], stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while True:
            try:
                redis = Redis(port)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        print('%-9s %9s %10s  %s' % ('mode', 'relayed', 'per second', 'Redis CPU per relayed message'))
        for _ in range(args.rounds):
            for mode in args.modes:
                name = mode.rstrip('0123456789')
                size = int(mode[len(name):] or 1)
                setup(redis)
                cpu, started = redis.cpu(), time.time()
                runners[name](redis, args.messages, size)
                elapsed, used = time.time() - started, redis.cpu() - cpu
                print('%-9s %9d %10.0f  %.1f µs' % (mode, args.messages, args.messages / elapsed,
                                                    used / args.messages * 1e6))
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == '__main__':
    main()
