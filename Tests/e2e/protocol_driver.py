"""A raw client of docs/protocol.md for the end-to-end tests, with no media and no dependency
beyond the standard library: a small RFC 6455 WebSocket client, a signaling `Session` (hello,
welcome, resume, seq and cumulative acks, requests answered by `replyTo`, re-sent with their
original ids after a reconnect), and a `CallDriver` that runs scripted 1:1 calls between pairs of
sessions (invite with a fake offer, accept with a fake answer, a few candidates, hangup: the server
only relays SDP) and logs every request the server acknowledged.

Every wait is bounded in time and every loop in count or time.
"""
import asyncio
import base64
import hashlib
import json
import os
import random
import struct
import time
import uuid

from harness import Failure

FAKE_OFFER = "v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
FAKE_ANSWER = "v=0\r\no=- 2890844526 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"


def fake_candidate(n):
    return {"candidate": f"candidate:{n} 1 udp 2122260223 10.99.0.{n % 250 + 1} {50000 + n} typ host",
            "sdpMid": "0", "sdpMLineIndex": 0}


class DriverError(Failure):
    pass


class RequestTimeout(DriverError):
    pass


# ---------------------------------------------------------------------------------------------
# WebSocket (RFC 6455): client side, text frames, masked, ping answered with pong.

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class WebSocket:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.close_code = None  # set once closed: the peer's code, or 1006 for a dropped connection
        self._close_sent = False

    @classmethod
    async def connect(cls, host, port, path="/v1/ws", timeout=5.0):
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        try:
            key = base64.b64encode(os.urandom(16)).decode()
            writer.write((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                          "Sec-WebSocket-Version: 13\r\n\r\n").encode())
            head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)).decode(errors="replace")
            lines = head.split("\r\n")
            if len(lines[0].split()) < 2 or lines[0].split()[1] != "101":
                raise DriverError(f"WebSocket upgrade refused: {lines[0]}")
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            expected = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
            if headers.get("sec-websocket-accept") != expected:
                raise DriverError("WebSocket upgrade: wrong Sec-WebSocket-Accept")
        except BaseException:
            writer.close()
            raise
        return cls(reader, writer)

    def _frame(self, opcode, payload):
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        mask = os.urandom(4)
        if n:
            repeated = (mask * (n // 4 + 1))[:n]
            payload = (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(n, "big")
        return header + mask + payload

    def send(self, text):
        """Queues one text frame (nothing happens on a closed connection: the reader notices)."""
        if self.close_code is None and not self.writer.is_closing():
            self.writer.write(self._frame(0x1, text.encode()))

    async def recv(self):
        """The next text message, or None once the connection is closed (see `close_code`)."""
        message = b""
        try:
            while True:
                b0, b1 = await self.reader.readexactly(2)
                fin, opcode, n = b0 & 0x80, b0 & 0x0F, b1 & 0x7F
                if n == 126:
                    n = struct.unpack("!H", await self.reader.readexactly(2))[0]
                elif n == 127:
                    n = struct.unpack("!Q", await self.reader.readexactly(8))[0]
                mask = await self.reader.readexactly(4) if b1 & 0x80 else None
                payload = await self.reader.readexactly(n)
                if mask:
                    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
                if opcode == 0x8:
                    self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                    self._send_close(self.close_code if self.close_code != 1005 else 1000)
                    self.writer.close()
                    return None
                if opcode == 0x9:
                    self.writer.write(self._frame(0xA, payload))
                elif opcode in (0x0, 0x1, 0x2):
                    message += payload
                    if fin:
                        return message.decode(errors="replace")
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            self.close_code = self.close_code or 1006
            self.writer.close()
            return None

    def _send_close(self, code):
        if not self._close_sent and not self.writer.is_closing():
            self._close_sent = True
            self.writer.write(self._frame(0x8, struct.pack("!H", code)))

    def close(self, code=1000):
        self._send_close(code)
        self.close_code = self.close_code or code
        self.writer.close()


# ---------------------------------------------------------------------------------------------
# A signaling session that outlives its sockets.

# Close codes after which a client must not reconnect by itself (protocol.md section 14).
FINAL_CLOSES = {1000, 1002, 1007, 4400, 4401, 4409}


class Session:
    """One device's signaling: connects, says hello (with `resume` once it has a session),
    acknowledges what it processed (cumulatively, within 250 ms or every 16 messages),
    answers requests by id and, after every reconnect, re-sends the requests that were never
    answered with their original ids. Reconnects by itself (backoff 0.05 s doubling to 0.5 s)
    until `close()`, for at most `give_up` seconds without a welcome."""

    def __init__(self, host, port, token, name, give_up=60.0):
        self.host, self.port, self.token, self.name = host, port, token, name
        self.give_up = give_up
        self.prefix = f"{name}-{uuid.uuid4().hex[:6]}"
        self.counter = 0
        self.session_id = None
        self.last_seq = 0
        self.unacked = 0
        self.ws = None
        self.welcomes = []      # (time.time(), welcome) for every welcome received
        self.inbox = []         # (time.time(), message) for every server message that is not an answer
        self.answers = []       # (time.time(), message) for every answer (ack/error with replyTo)
        self.pending = {}       # id -> [message, future, rate-limit retries]; dict order = send order
        self.resent = 0         # requests sent again after a reconnect
        self.gaps = []          # (last seq, seq received) wherever a session's seqs skipped one
        self.history = []       # (time.time(), what happened to a socket), for a failed run's log
        self.failure = None     # why the session stopped for good
        self.running = False
        self._changed = asyncio.Event()
        self._ack_timer = None
        self._task = None
        self._last_sent = 0.0
        self._heartbeat = 25

    # Lifecycle

    async def start(self, timeout=10.0):
        """Starts the session and waits for its first welcome."""
        self.running = True
        self._task = asyncio.create_task(self._run())
        await self.until(lambda: self.welcomes or self.failure, timeout, "a welcome")
        if self.failure:
            raise DriverError(f"{self.name}: {self.failure}")
        return self

    async def close(self):
        self.running = False
        if self.ws:
            self.ws.close(1000)
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        self._abandon("closed")

    stop = close

    @property
    def connected(self):
        return self.ws is not None

    @property
    def last_welcome_at(self):
        return self.welcomes[-1][0] if self.welcomes else 0.0

    async def _run(self):
        try:
            await self._reconnecting()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a bug of the script itself: the session says so, it does not just stop
            self.history.append((time.time(), f"the session's loop failed: {error!r}"))
            self._fail(f"the session's loop failed: {error!r}")

    async def _reconnecting(self):
        backoff = 0.05
        since = time.monotonic()
        while self.running:
            try:
                ws = await WebSocket.connect(self.host, self.port)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    DriverError) as error:
                # A node that is stopping may accept the connection and close it unanswered (EOF).
                self.history.append((time.time(), f"connect failed: {error!r}"))
                if time.monotonic() - since > self.give_up:
                    self._fail(f"no connection for {self.give_up:.0f} s")
                    return
                await asyncio.sleep(backoff * random.uniform(0.5, 1.5))
                backoff = min(backoff * 2, 0.5)
                continue
            welcomed = await self._serve(ws)
            self.history.append((time.time(), f"closed {ws.close_code} (welcomed: {welcomed})"))
            if welcomed:
                backoff, since = 0.05, time.monotonic()
            if ws.close_code in FINAL_CLOSES and self.running:
                self._fail(f"closed by the server with {ws.close_code}")
                return
            if not welcomed:
                if time.monotonic() - since > self.give_up:
                    self._fail(f"no welcome for {self.give_up:.0f} s")
                    return
                await asyncio.sleep(backoff * random.uniform(0.5, 1.5))
                backoff = min(backoff * 2, 0.5)

    def _fail(self, why):
        self.failure = why
        self.running = False
        self._abandon(why)
        self._changed.set()

    def _abandon(self, why):
        """Fails every request still waiting for its answer."""
        for _, future, _ in self.pending.values():
            if not future.done():
                future.set_exception(DriverError(f"{self.name}: {why}"))
                future.exception()  # retrieved: nobody may be waiting any more

    async def _serve(self, ws):
        """One socket: hello, welcome, then every frame until it closes. Whether it was welcomed."""
        hello = {"type": "hello", "id": self._next_id(), "version": 1, "token": self.token,
                 "client": {"name": "dialtone-e2e-driver", "version": "1"}}
        if self.session_id:
            hello["resume"] = {"sessionId": self.session_id, "lastSeq": self.last_seq}
        ws.send(json.dumps(hello))
        try:
            text = await asyncio.wait_for(ws.recv(), 10)
        except asyncio.TimeoutError:
            self.history.append((time.time(), "no welcome in 10 s"))
            ws.close(1001)
            return False
        if text is None:
            # Closed before its welcome (a node closing every socket as Redis came back empty).
            self.history.append((time.time(), "closed before a welcome"))
            return False
        first = self._decode(text)
        if first is None or first.get("type") != "welcome":
            self.history.append((time.time(), f"hello answered {text!r:.200}"))
            if first is not None and first.get("type") == "error" and first.get("code") == "unauthorized":
                self._fail(f"hello refused: {first}")
            ws.close(1000 if first is None else 1001)
            return False
        self._welcomed(ws, first)
        keepalive = asyncio.create_task(self._keep_alive(ws))
        try:
            while True:
                text = await ws.recv()
                if text is None:
                    break
                message = self._decode(text)
                if message is not None:
                    self._received(message)
        finally:
            keepalive.cancel()
            if self._ack_timer:
                self._ack_timer.cancel()
                self._ack_timer = None
            self.ws = None
            self._changed.set()
        return True

    def _welcomed(self, ws, welcome):
        if not welcome.get("resumed"):
            self.last_seq = 0  # a new session: seq restarts at 1, nothing is replayed
        self.unacked = 0
        self.session_id = welcome.get("sessionId")
        self._heartbeat = welcome.get("heartbeatSeconds") or 25
        self.welcomes.append((time.time(), welcome))
        self.ws = ws
        # Requests never answered go again, with their original ids, in their original order.
        for message, future, _ in list(self.pending.values()):
            if not future.done():
                self.resent += 1
                self._transmit(message)
        self._changed.set()

    @staticmethod
    def _decode(text):
        try:
            message = json.loads(text)
        except ValueError:
            return None
        return message if isinstance(message, dict) else None

    def _received(self, message):
        seq = message.get("seq")
        if seq is None:
            # An error before welcome, or an answer outside the sequence (a candidate's `ack` on
            # one server and in write-behind, write-behind's `rate-limited`, section 4.2):
            # resolved by `replyTo`, not counted in lastSeq nor acknowledged.
            if message.get("replyTo") is not None:
                self._answered(message)
            return
        if seq <= self.last_seq:
            self._schedule_ack()  # a replayed duplicate: acknowledge, do not process twice
            return
        if seq != self.last_seq + 1:
            self.gaps.append((self.last_seq, seq))  # the protocol's seqs never skip (section 5.2)
        self.last_seq = seq
        self.unacked += 1
        if self.unacked >= 16:
            self._send_ack()
        else:
            self._schedule_ack()
        if message.get("replyTo") is None:
            self.inbox.append((time.time(), message))
            self._changed.set()
        else:
            self._answered(message)

    def _answered(self, message):
        self.answers.append((time.time(), message))
        entry = self.pending.get(message.get("replyTo"))
        if entry and not entry[1].done():
            if message.get("type") == "error" and message.get("code") == "rate-limited" and entry[2] < 5:
                entry[2] += 1  # not remembered by the server: the same request again, later
                wait = min(max(message.get("retryAfterMs") or 1000, 50), 10_000) / 1000
                asyncio.get_running_loop().call_later(wait, self._transmit, entry[0])
            else:
                entry[1].set_result(message)
        self._changed.set()

    def _schedule_ack(self):
        if self._ack_timer is None:
            self._ack_timer = asyncio.get_running_loop().call_later(0.25, self._send_ack)

    def _send_ack(self):
        if self._ack_timer:
            self._ack_timer.cancel()
            self._ack_timer = None
        self.unacked = 0
        if self.ws:
            self.ws.send(json.dumps({"type": "ack", "seq": self.last_seq}))
            self._last_sent = time.monotonic()

    def _transmit(self, message):
        if self.ws:
            self.ws.send(json.dumps(message))
            self._last_sent = time.monotonic()

    async def _keep_alive(self, ws):
        """A ping once half the heartbeat passed in silence; no answer within 10 s: the socket is dead."""
        while True:
            await asyncio.sleep(1)
            if time.monotonic() - self._last_sent < self._heartbeat / 2:
                continue
            try:
                await self.request({"type": "ping"}, timeout=10)
            except RequestTimeout:
                ws.close(1001)
                return
            except DriverError:
                return

    def _next_id(self):
        self.counter += 1
        return f"{self.prefix}-{self.counter}"

    # Requests and messages

    async def request(self, message, timeout=15.0):
        """Sends a request (a fresh id is added) and returns its answer (`ack` or `error`). A
        socket that drops meanwhile does not lose it: it goes again after the reconnect."""
        if self.failure:
            raise DriverError(f"{self.name}: {self.failure}")
        message = {**message, "id": self._next_id()}
        future = asyncio.get_running_loop().create_future()
        self.pending[message["id"]] = [message, future, 0]
        self._transmit(message)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            raise RequestTimeout(f"{self.name}: no answer to {message['type']} {message['id']} in {timeout} s")
        finally:
            self.pending.pop(message["id"], None)

    async def until(self, condition, timeout, what="a condition"):
        """Waits until `condition()` is truthy (checked at every change) and returns its value."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = condition()
            if value:
                return value
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RequestTimeout(f"{self.name}: no {what} within {timeout} s")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.5))
            except asyncio.TimeoutError:
                pass

    def find(self, type, **fields):
        """The first server message of `type` with `fields`, or None."""
        return next((m for _, m in self.inbox
                     if m.get("type") == type and all(m.get(k) == v for k, v in fields.items())), None)

    async def wait_for_message(self, type, timeout=5.0, cap=20.0, **fields):
        """Waits for a server message, for `timeout` seconds after the start or after the latest
        welcome, whichever is later (a restart delays everything), and `cap` seconds at most."""
        loop = asyncio.get_running_loop()
        started, hard = time.time(), loop.time() + cap
        while True:
            found = self.find(type, **fields)
            if found:
                return found
            deadline = max(started, self.last_welcome_at) + timeout
            if time.time() > deadline or loop.time() > hard or self.failure:
                raise RequestTimeout(f"{self.name}: no {type} {fields}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), 0.25)
            except asyncio.TimeoutError:
                pass


def is_ack(reply):
    return reply is not None and reply.get("type") == "ack"


# ---------------------------------------------------------------------------------------------
# Scripted calls.

class CallRecordLog:
    """What the driver knows of one call: every request it sent for it and its answer."""

    def __init__(self, call_id, caller, callee, index):
        self.call_id, self.caller, self.callee, self.index = call_id, caller, callee, index
        self.started = time.time()
        self.acked = {}    # request type -> time.time() of its ack (the first one)
        self.refused = {}  # request type -> error code (the last one)
        self.notes = []

    def answered(self, kind, reply):
        if is_ack(reply):
            self.acked.setdefault(kind, time.time())
        elif reply is not None:
            self.refused[kind] = reply.get("code")

    def __repr__(self):
        return f"{self.call_id}({self.caller}->{self.callee} acked={sorted(self.acked)} refused={self.refused})"


class CallDriver:
    """`pairs` caller/callee session pairs (users `{prefix}-caller-N` and `{prefix}-callee-N`),
    each making scripted calls back to back until `total` calls have been started: invite (fake
    offer) → the callee waits for the invite and accepts (fake answer) → two candidates each →
    `hold` seconds → the caller hangs up. A call whose accept is refused is cancelled. Every
    answer is logged per call (`calls`), every failure to keep to the script is noted, and the
    script goes on with the next call."""

    def __init__(self, host, port, token, pairs, total, prefix="d", hold=(0.2, 0.6), seed=1):
        self.host, self.port, self.token = host, port, token
        self.pairs_count, self.total, self.prefix, self.hold = pairs, total, prefix, hold
        self.rng = random.Random(seed)
        self.pairs = []
        self.calls = {}      # call id -> CallRecordLog, in the order the calls were started
        self.started = 0
        self.done = asyncio.Event()
        self.errors = []     # unexpected exceptions of the pair loops
        self._tasks = []
        self._finisher = None

    @property
    def sessions(self):
        return [s for pair in self.pairs for s in pair]

    async def start(self):
        """Signs every session in (stack the driver first: `stop()` closes whatever started)."""
        for n in range(self.pairs_count):
            caller = Session(self.host, self.port, self.token(f"{self.prefix}-caller-{n}"), f"{self.prefix}-caller-{n}")
            callee = Session(self.host, self.port, self.token(f"{self.prefix}-callee-{n}"), f"{self.prefix}-callee-{n}")
            self.pairs.append((caller, callee))
        await asyncio.gather(*(s.start() for s in self.sessions))
        return self

    def run(self):
        """Starts the pairs' loops; `done` is set when every loop has finished."""
        self._tasks = [asyncio.create_task(self._pair_loop(caller, callee)) for caller, callee in self.pairs]

        async def finished():
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self.done.set()
        self._finisher = asyncio.create_task(finished())

    def acked_count(self, kind):
        return sum(1 for c in self.calls.values() if kind in c.acked)

    async def _pair_loop(self, caller, callee):
        while self.started < self.total:
            self.started += 1
            call_id = str(uuid.uuid4())
            log = self.calls[call_id] = CallRecordLog(call_id, caller.name, callee.name, self.started)
            try:
                await self._one_call(caller, callee, log)
            except DriverError as error:
                log.notes.append(str(error))
            except Exception as error:  # a bug of the script itself: keep it for the report
                log.notes.append(repr(error))
                self.errors.append(repr(error))

    async def _one_call(self, caller, callee, log):
        call_id = log.call_id
        reply = await caller.request({"type": "invite", "callId": call_id, "to": callee.name, "video": False,
                                      "offer": {"sdp": FAKE_OFFER}})
        log.answered("invite", reply)
        if not is_ack(reply):
            return
        await self._candidates(caller, log, 2)
        try:
            await callee.wait_for_message("invite", callId=call_id)
            reply = await callee.request({"type": "accept", "callId": call_id, "answer": {"sdp": FAKE_ANSWER}})
        except DriverError as error:
            log.notes.append(str(error))
            reply = None
        log.answered("accept", reply)
        if not is_ack(reply):
            log.answered("cancel", await caller.request({"type": "cancel", "callId": call_id}))
            return
        await self._candidates(callee, log, 2)
        await asyncio.sleep(self.rng.uniform(*self.hold))
        log.answered("hangup", await caller.request({"type": "hangup", "callId": call_id}))

    @staticmethod
    async def _candidates(session, log, count):
        base = random.randrange(1, 10_000)
        replies = await asyncio.gather(*(session.request({"type": "candidate", "callId": log.call_id,
                                                          "candidate": fake_candidate(base + i)})
                                         for i in range(count)))
        for reply in replies:
            log.answered("candidate", reply)

    async def wait(self, timeout):
        """Waits until every loop finished (raises RequestTimeout after `timeout` seconds)."""
        try:
            await asyncio.wait_for(self.done.wait(), timeout)
        except asyncio.TimeoutError:
            raise RequestTimeout(f"the driver started {self.started} of {self.total} calls in {timeout} s")

    async def end_unfinished(self):
        """Ends every call the log does not show ended: hangup for an acknowledged accept without
        an acknowledged hangup, cancel for an acknowledged invite without either."""
        sessions = {s.name: s for s in self.sessions}
        jobs = []
        for log in self.calls.values():
            if "invite" not in log.acked or "hangup" in log.acked or "cancel" in log.acked:
                continue
            kind = "hangup" if "accept" in log.acked else "cancel"
            jobs.append((log, kind, sessions[log.caller].request({"type": kind, "callId": log.call_id})))
        results = await asyncio.gather(*(job for _, _, job in jobs), return_exceptions=True)
        for (log, kind, _), result in zip(jobs, results):
            if isinstance(result, BaseException):
                log.notes.append(f"{kind} at the end: {result}")
            else:
                log.answered(kind, result)
                log.notes.append(f"{kind} at the end: {result.get('type')} {result.get('code') or ''}")

    async def stop(self):
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(s.close() for s in self.sessions), return_exceptions=True)
