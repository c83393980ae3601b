"""Processes for the end-to-end tests: the server, coturn, CLI softphones, a TCP proxy.

Everything listens on 127.0.0.1, on ports `free_port` picks (each once a run); every process is killed when
its test ends.
"""
import asyncio
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
import wave

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("DIALTONE_BIN", os.path.join(ROOT, ".build", "debug"))
# Every network namespace a run creates is named from this prefix, so that two runs on one
# machine (CI and a developer's, two worktrees) never delete or join each other's.
NETNS_PREFIX = os.environ.get("DIALTONE_E2E_NETNS", f"dte{os.getpid()}")
SECRET = "e2e-secret-0123456789abcdef0123"
TURN_SECRET = "e2e-turn-secret-0123456789"


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


# Ports this run has handed out (`free_port`, `claim_port`): never the same one twice.
_PORTS_GIVEN = set()


def port_given(port):
    """Whether a process of this run was given `port` already."""
    return port in _PORTS_GIVEN


def claim_port(port):
    """Records `port` as given to a process of this run; False if it was given before."""
    if port in _PORTS_GIVEN:
        return False
    _PORTS_GIVEN.add(port)
    return True


def free_port(kind=socket.SOCK_STREAM):
    """A loopback port for a process of this run to listen on: free on the host now, never handed
    out before in this run, and below the kernel's ephemeral range (32768-60999 by default).
    Letting the kernel pick (bind to port 0) handed the same port out twice in one scenario once:
    most processes listen inside a network namespace, so on the host the port still looked free,
    and a node then failed to bind the port Redis had in the namespace while the test talked to
    Redis as if it were that node (CI, `a_browser_in_a_group_call_outlives_the_calls_node`). Below
    the ephemeral range, no outgoing connection's source port can take it either."""
    for _ in range(1000):
        port = random.randint(10000, 19999)
        if port in _PORTS_GIVEN:
            continue
        try:
            with socket.socket(socket.AF_INET, kind) as s:
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        claim_port(port)
        return port
    raise Failure("no free loopback port in 10000-19999")


async def eventually(condition, timeout, what):
    """Waits until `condition()` holds; fails with "no <what>" after `timeout` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        check(loop.time() < deadline, f"no {what} within {timeout} s")
        await asyncio.sleep(0.05)


async def wait_port(port, timeout=15, process=None):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if process is not None:
            check(process.proc.returncode is None, f"{process.name} exited (see its log)")
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise Failure(f"nothing listens on {port}")


async def wait_port_in(netns, host, port, process, timeout=15):
    """Waits until something listens on host:port inside `netns` (not reachable from here)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        check(process.proc.returncode is None, f"{process.name} exited (see its log)")
        probe = await asyncio.create_subprocess_exec(
            "ip", "netns", "exec", netns, "bash", "-c", f"exec 3<>/dev/tcp/{host}/{port}",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        if await probe.wait() == 0:
            return
        await asyncio.sleep(0.05)
    raise Failure(f"nothing listens on {host}:{port} in {netns}")


async def run_stacked(fn, timeout):
    """`await fn(stack)` within `timeout`, where `stack(thing)` registers what `fn` starts (and
    returns it); every registered thing is stopped, newest first, however `fn` ends. Returns what
    `fn` returns; raises what it raises, or `asyncio.TimeoutError`."""
    stacked = []

    def stack(thing):
        stacked.append(thing)
        return thing

    try:
        return await asyncio.wait_for(fn(stack), timeout)
    finally:
        for thing in reversed(stacked):
            await thing.stop()


async def python_json(netns, script, *args, timeout=15, what="the helper"):
    """Runs `script` with `args` in a Python of its own (inside `netns` when given, so that its
    requests reach the namespace's addresses) and returns what it printed, as JSON."""
    prefix = ["ip", "netns", "exec", netns] if netns else []
    proc = await asyncio.create_subprocess_exec(
        *prefix, sys.executable, "-c", script, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise Failure(f"{what} took more than {timeout} s")
    check(proc.returncode == 0, f"{what} failed: {err.decode(errors='replace').strip()[-400:]}")
    return json.loads(out)


# GET URL with headers (JSON object) from wherever this runs; prints {"status","headers","body"}.
_GET = r"""
import json, sys, urllib.request, urllib.error
request = urllib.request.Request(sys.argv[1], headers=json.loads(sys.argv[2]))
try:
    with urllib.request.urlopen(request, timeout=10) as response:
        status, headers, body = response.status, dict(response.headers), response.read()
except urllib.error.HTTPError as error:
    status, headers, body = error.code, dict(error.headers), error.read()
print(json.dumps({"status": status, "headers": headers, "body": body.decode("utf-8", "replace")}))
"""


async def http_get(netns, url, headers=None, timeout=15):
    """GET from inside `netns`: {"status", "headers", "body"}, whatever the status."""
    return await python_json(netns, _GET, url, json.dumps(headers or {}), timeout=timeout, what=f"GET {url}")


class Scratch:
    """A temporary directory removed at the end."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="dialtone-e2e-")

    def file(self, name):
        return os.path.join(self.path, name)

    def remove(self):
        shutil.rmtree(self.path, ignore_errors=True)


class Process:
    def __init__(self, proc, name, log):
        self.proc, self.name, self.log = proc, name, log

    async def stop(self):
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


async def spawn(name, args, log_path, **kw):
    log = open(log_path, "wb")
    proc = await asyncio.create_subprocess_exec(*args, stdout=log, stderr=asyncio.subprocess.STDOUT, **kw)
    return Process(proc, name, log)


class Server:
    """dialtone-server on a free port, optionally handing out TURN credentials, optionally inside
    a network namespace (`netns`, with `host` its address there)."""

    def __init__(self, scratch, turn=None, static_root=None, ring_timeout=None, netns=None, host="127.0.0.1",
                 extra=()):
        self.scratch = scratch
        self.extra = list(extra)
        self.ring_timeout = ring_timeout
        self.port = free_port()
        self.turn = turn
        self.static_root = static_root
        self.netns = netns
        self.host = host
        self.process = None
        self.starts = 0

    @property
    def url(self):
        return f"http://{self.host}:{self.port}"

    async def start(self):
        """Starts the server; again after `kill9()` or `terminate()`, on the same port and data
        directory (each run logs to a file of its own: server.log, server-2.log, ...)."""
        check(self.process is None or self.process.proc.returncode is not None, "the server is already running")
        self.starts += 1
        log = "server.log" if self.starts == 1 else f"server-{self.starts}.log"
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        args = prefix + [os.path.join(BIN, "dialtone-server"), "--host", self.host, "--port", str(self.port),
                "--data-dir", self.scratch.file("server-data"), "--auth-secret", SECRET,
                "--log-level", os.environ.get("DIALTONE_E2E_SERVER_LOG", "warning")]
        if self.ring_timeout:
            args += ["--ring-timeout", str(self.ring_timeout)]
        args += self.extra
        if self.turn:
            args += ["--turn-secret", TURN_SECRET, "--turn-url", f"turn:{self.turn.address}:{self.turn.port}?transport=udp"]
        self.process = await spawn("server", args, self.scratch.file(log))
        if self.netns:
            await wait_port_in(self.netns, self.host, self.port, self.process)
        else:
            await wait_port(self.port, process=self.process)
        return self

    async def restart(self, timeout=20):
        """Starts the stopped server again on the same port and data directory, retrying while
        the port cannot be bound yet."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                return await self.start()
            except Failure:
                if self.process.proc.returncode is None or loop.time() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def kill9(self, timeout=10):
        """SIGKILL: the server dies at once (nothing flushed, no socket closed cleanly)."""
        proc = self.process.proc
        if proc.returncode is None:
            proc.kill()
        await asyncio.wait_for(proc.wait(), timeout)

    async def terminate(self, timeout=20):
        """SIGTERM: the server drains (sockets closed with 1001, writes finished) and exits.
        Returns its exit status."""
        proc = self.process.proc
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise Failure(f"the server did not exit within {timeout} s of SIGTERM")
        return proc.returncode

    async def stop(self):
        if self.process:
            await self.process.stop()

    async def calls(self, token, limit=200, max_pages=50, timeout=15):
        """Every record of `GET /v1/calls` for the token's user (all pages, newest first), fetched
        from inside the server's namespace when it has one."""
        return await python_json(self.netns, _HISTORY_CLIENT, self.url, token, str(limit), str(max_pages),
                                 timeout=timeout, what="GET /v1/calls")

    def token(self, user, device="cli", name=None):
        import subprocess
        args = [os.path.join(BIN, "dialtone"), "token", "--user", user, "--device", device, "--secret", SECRET]
        if name:
            args += ["--name", name]
        return subprocess.check_output(args, text=True).strip()


# GET /v1/calls?limit=&before=, page after page (run with: URL TOKEN LIMIT MAX_PAGES).
_HISTORY_CLIENT = r"""
import json, sys, urllib.parse, urllib.request
url, token, limit, max_pages = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
calls, cursor = [], None
for _ in range(max_pages):
    query = {"limit": limit} if cursor is None else {"limit": limit, "before": cursor}
    request = urllib.request.Request(url + "/v1/calls?" + urllib.parse.urlencode(query),
                                     headers={"Authorization": "Bearer " + token})
    with opener.open(request, timeout=10) as response:
        page = json.load(response)
    calls += page.get("calls", [])
    cursor = page.get("next")
    if not cursor:
        break
else:
    sys.exit(f"more than {max_pages} pages of history")
json.dump(calls, sys.stdout)
"""


class Coturn:
    """coturn with TURN REST credentials (use-auth-secret), UDP only, on the test namespace's
    address (libnice pins each socket to its interface, so peers cannot reach a TURN server on
    loopback)."""

    def __init__(self, scratch, namespace, verbose=False):
        self.scratch, self.namespace, self.verbose = scratch, namespace, verbose
        self.address = namespace.ADDR
        self.port = free_port(socket.SOCK_DGRAM)
        self.process = None

    async def start(self):
        relay_low = 40000 + (self.port % 10000)
        args = ["ip", "netns", "exec", self.namespace.NS, "turnserver", "-n", "--listening-ip", self.address, "--relay-ip", self.address,
                "--listening-port", str(self.port), "--use-auth-secret", "--static-auth-secret", TURN_SECRET,
                "--realm", "dialtone.test", "--allow-loopback-peers", "--no-tls", "--no-dtls", "--no-tcp",
                "--no-cli", "--min-port", str(relay_low), "--max-port", str(relay_low + 200),
                "--log-file", self.scratch.file("turnserver.log"), "--simple-log",
                "--pidfile", self.scratch.file("turnserver.pid")] + (["--verbose"] if self.verbose else [])
        self.process = await spawn("coturn", args, self.scratch.file("coturn.log"))
        await asyncio.sleep(0.5)
        check(self.process.proc.returncode is None, "coturn did not start (see coturn.log)")
        return self

    def allocations(self):
        """{user: {"allocated": n, "live": n}} from the session log (`verbose` only): a session is
        live from its allocation until a Refresh with lifetime 0 or its close."""
        sessions = {}
        with open(self.scratch.file("turnserver.log"), errors="replace") as log:
            for line in log:
                m = re.search(r"session (\d+): (new|refreshed|closed)\b.*?username=<[^:>]*:([^>]*)>(.*)", line) or \
                    re.search(r"session (\d+): (closed) \(2nd stage\), user <[^:>]*:([^>]*)>(.*)", line)
                if not m:
                    continue
                session, what, user, rest = m.groups()
                if what == "new":
                    sessions[session] = (user, True)
                elif session in sessions and (what == "closed" or "lifetime=0" in rest):
                    sessions[session] = (user, False)
        counts = {"alice": {"allocated": 0, "live": 0}, "bob": {"allocated": 0, "live": 0}}
        for user, live in sessions.values():
            entry = counts.setdefault(user, {"allocated": 0, "live": 0})
            entry["allocated"] += 1
            entry["live"] += live
        return counts

    async def stop(self):
        if self.process:
            await self.process.stop()


class Softphone:
    """`dialtone call|answer --json`: its events are read as they are printed."""

    def __init__(self, scratch, name, args, command=None, netns=None):
        self.scratch, self.name, self.args = scratch, name, args
        self.command = command or [os.path.join(BIN, "dialtone"), *args, "--json"]
        if netns:
            self.command = ["ip", "netns", "exec", netns, *self.command]
        self.events = []
        self.stamps = []  # time.time() when each of `events` was read
        self.lines = []
        self.proc = None
        self._reader = None
        self._changed = asyncio.Event()

    async def start(self):
        self.proc = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self):
        with open(self.scratch.file(f"{self.name}.log"), "w") as log:
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    break
                text = line.decode(errors="replace").rstrip("\n")
                self.lines.append(text)
                log.write(text + "\n")
                log.flush()
                try:
                    event = json.loads(text)
                    self.stamps.append(time.time())
                    self.events.append(event)
                except ValueError:
                    pass  # GStreamer warnings and the like
                self._changed.set()
        self._changed.set()

    def has(self, event, **fields):
        return any(e.get("event") == event and all(e.get(k) == v for k, v in fields.items()) for e in self.events)

    def count(self, event, **fields):
        return sum(1 for e in self.events if e.get("event") == event and all(e.get(k) == v for k, v in fields.items()))

    def find(self, event):
        return next((e for e in self.events if e.get("event") == event), None)

    def time_of(self, event, **fields):
        """When (time.time()) the first matching event was read, or None."""
        return next((t for e, t in zip(self.events, self.stamps)
                     if e.get("event") == event and all(e.get(k) == v for k, v in fields.items())), None)

    async def wait_for(self, event, timeout=20, times=1, **fields):
        """Waits until `event` (with `fields`) has been printed `times` times."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.count(event, **fields) < times:
            remaining = deadline - loop.time()
            if remaining <= 0 or (self.proc.returncode is not None and self._reader.done()):
                what = f"{event} {fields or ''}" + (f" {times} times" if times > 1 else "")
                raise Failure(f"{self.name}: no {what} (log: {self.scratch.file(self.name + '.log')})")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.5))
            except asyncio.TimeoutError:
                pass

    def send(self, line):
        self.proc.stdin.write((line + "\n").encode())

    def interrupt(self):
        """^C: the softphone hangs up as a person would."""
        self.proc.send_signal(signal.SIGINT)

    async def exit_status(self, timeout=30):
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except asyncio.TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise Failure(f"{self.name} did not exit")
        await self._reader
        return self.proc.returncode

    async def stop(self):
        if self.proc and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


def aiortc_peer(scratch, name, args, netns):
    """The Python client of Tests/e2e/aiortc_peer.py (same JSON event lines as the CLI), inside
    the test's namespace."""
    script = os.path.join(os.path.dirname(__file__), "aiortc_peer.py")
    return Softphone(scratch, name, args, command=["ip", "netns", "exec", netns, sys.executable, script, *args])


class TCPProxy:
    """Forwards a port to the server, inside the test's namespace (Tests/e2e/tcp_proxy.py);
    `cut()` drops every connection it carries (a signaling socket dying mid-call) while new
    connections keep working. `delay_ms`: what the server sends reaches the client that late."""

    def __init__(self, target_port, netns, host=None, delay_ms=0):
        self.target_port, self.netns, self.host, self.delay_ms = target_port, netns, host, delay_ms
        self.port = None
        self.proc = None
        self.cuts = 0

    async def start(self):
        script = os.path.join(os.path.dirname(__file__), "tcp_proxy.py")
        self.proc = await asyncio.create_subprocess_exec(
            "ip", "netns", "exec", self.netns, sys.executable, script,
            *(["--delay-ms", str(self.delay_ms)] if self.delay_ms else []), str(self.target_port),
            *([self.host] if self.host else []), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        line = (await asyncio.wait_for(self.proc.stdout.readline(), 10)).decode().split()
        check(len(line) == 2 and line[0] == "PORT", "the TCP proxy did not start")
        self.port = int(line[1])
        return self

    async def cut(self):
        self.proc.stdin.write(b"cut\n")
        await self.proc.stdin.drain()
        line = (await asyncio.wait_for(self.proc.stdout.readline(), 10)).decode().split()
        check(len(line) == 2 and line[0] == "CUT", "the TCP proxy did not cut")
        self.cuts += int(line[1])

    async def stop(self):
        if self.proc and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


def wav_seconds(path):
    with wave.open(path) as w:
        return w.getnframes() / w.getframerate()


def _wav_samples(path):
    with wave.open(path) as w:
        rate = w.getframerate()
        frames = w.readframes(w.getnframes())
        channels = w.getnchannels()
    return struct.unpack(f"<{len(frames) // 2}h", frames)[::channels], rate


def _sound_end(samples, quiet=300):
    """Where the recording's quiet end starts: the index after its last sample louder than `quiet`."""
    end = len(samples)
    while end > 0 and abs(samples[end - 1]) < quiet:
        end -= 1
    return end


def sound_seconds(path):
    """Seconds of a 16-bit mono WAV up to its last sound (its quiet end left out)."""
    samples, rate = _wav_samples(path)
    return _sound_end(samples) / rate


def dominant_frequency(path, seconds=1.0):
    """The strongest frequency in the last `seconds` of a 16-bit mono WAV before its quiet end: a
    coarse Goertzel scan over the last 0.1 s, refined to 1 Hz over the whole window.

    The quiet end is left out because a recording runs against the clock until its own call
    ends: the one who hung up stopped sending before the hang-up reached the others, whose
    recordings carry on in silence until it does (longer across nodes, longer on a loaded
    machine). A coarse scan of 0.1 s of silence picks its first frequency, 100 Hz, and the
    refinement then finds some side lobe of the tone between 90 and 110 Hz."""
    samples, rate = _wav_samples(path)
    end = _sound_end(samples)
    long = samples[max(0, end - int(rate * seconds)):end]
    check(len(long) >= rate * 0.5,
          f"{path}: only {len(long) / rate:.2f} s of sound ({len(samples) / rate:.2f} s recorded)")
    return _strongest(long, rate)


def dominant_frequency_between(path, start, end):
    """The strongest frequency between `start` and `end` seconds into a 16-bit mono WAV (as
    `dominant_frequency`, over that window: at least 0.5 s of it must have been recorded)."""
    samples, rate = _wav_samples(path)
    window = samples[int(rate * max(start, 0)):int(rate * end)]
    check(len(window) >= rate * 0.5,
          f"{path}: only {len(window) / rate:.2f} s of audio between {start:.1f} s and {end:.1f} s "
          f"({len(samples) / rate:.2f} s recorded)")
    return _strongest(window, rate)


def _strongest(long, rate):
    short = long[-int(rate * 0.1):]

    def power(f, window):
        k = 2 * math.cos(2 * math.pi * f / rate)
        s1 = s2 = 0.0
        for x in window:
            s1, s2 = x + k * s1 - s2, s1
        return s1 * s1 + s2 * s2 - k * s1 * s2

    coarse = max(range(100, 2001, 5), key=lambda f: power(f, short))
    return max(range(coarse - 10, coarse + 11), key=lambda f: power(f, long))


class Chromium:
    """Headless Chromium on one page inside the test's namespace, driven over the DevTools
    protocol through a pipe (`--remote-debugging-pipe`: fd 3 in, fd 4 out, NUL-separated JSON),
    so that nothing but the page's own traffic touches the network."""

    def __init__(self, scratch, url, netns):
        self.scratch, self.url, self.netns = scratch, url, netns
        self.process = None
        self.to_browser = None
        self.from_browser = None
        self.session = None
        self.next_id = 0
        self.buffer = b""

    async def start(self):
        profile = self.scratch.file("chromium-profile")
        binary = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
        args = [binary, "--headless=new", "--no-sandbox", "--use-fake-device-for-media-stream",
                "--use-fake-ui-for-media-stream", "--allow-loopback-in-peer-connection",
                "--disable-features=WebRtcHideLocalIpsWithMdns", "--autoplay-policy=no-user-gesture-required",
                "--no-first-run", "--disable-gpu", "--disable-dev-shm-usage", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", self.url]
        command_read, command_write = os.pipe()
        reply_read, reply_write = os.pipe()
        import shlex
        launch = f"exec {shlex.join(args)} 3<&{command_read} 4>&{reply_write}"
        log = open(self.scratch.file("chromium.log"), "wb")
        proc = await asyncio.create_subprocess_exec(
            "ip", "netns", "exec", self.netns, "bash", "-c", launch, stdout=log, stderr=asyncio.subprocess.STDOUT,
            pass_fds=(command_read, reply_write))
        self.process = Process(proc, "chromium", log)
        os.close(command_read)
        os.close(reply_write)
        self.to_browser = command_write
        self.from_browser = reply_read
        os.set_blocking(reply_read, False)
        targets = await self.command("Target.getTargets", timeout=30)
        page = next((t for t in targets.get("targetInfos", []) if t.get("type") == "page"), None)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while page is None:
            check(loop.time() < deadline, "chromium has no page")
            await asyncio.sleep(0.1)
            targets = await self.command("Target.getTargets")
            page = next((t for t in targets.get("targetInfos", []) if t.get("type") == "page"), None)
        attached = await self.command("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})
        self.session = attached["sessionId"]
        return self

    async def _read_message(self, deadline):
        loop = asyncio.get_running_loop()
        while b"\0" not in self.buffer:
            check(loop.time() < deadline and self.process.proc.returncode is None,
                  "chromium stopped answering (see chromium.log)")
            try:
                chunk = os.read(self.from_browser, 65536)
            except BlockingIOError:
                await asyncio.sleep(0.01)
                continue
            check(chunk != b"", "chromium closed its DevTools pipe (see chromium.log)")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    async def command(self, method, params=None, session=None, timeout=15):
        self.next_id += 1
        ident = self.next_id
        message = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            reply = await self._read_message(deadline)
            if reply.get("id") == ident:
                return reply.get("result", {})

    async def evaluate(self, expression):
        result = await self.command("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                    session=self.session)
        return result.get("result", {}).get("value")

    async def page_state(self):
        text = await self.evaluate("JSON.stringify(window.dialtoneTest || null)")
        return json.loads(text) if text else None

    async def wait_for(self, what, predicate, timeout=30):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            state = await self.page_state()
            if state and predicate(state):
                return state
            if loop.time() > deadline:
                raise Failure(f"browser: no {what} (last state: {json.dumps(state)[:600]})")
            await asyncio.sleep(0.2)

    async def stop(self):
        if self.process:
            await self.process.stop()
        for fd in (self.to_browser, self.from_browser):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.to_browser = self.from_browser = None


class NamespaceLink:
    """Two network namespaces joined by bench/delay_link.py (TUN devices and a userspace
    forwarder): a network path the test can cut and restore. Needs root."""

    NS_A, NS_B = NETNS_PREFIX + "-a", NETNS_PREFIX + "-b"
    ADDR_A, ADDR_B = "10.78.0.1", "10.78.0.2"

    def __init__(self, scratch, rtt_ms=10, loss=0.0, rate_kbps=0):
        self.scratch, self.rtt_ms, self.loss, self.rate_kbps = scratch, rtt_ms, loss, rate_kbps
        self.forwarder = None

    @staticmethod
    def _ip(*args, check_ok=True):
        import subprocess
        result = subprocess.run(["ip", *args], capture_output=True, text=True)
        if check_ok:
            check(result.returncode == 0, f"ip {' '.join(args)}: {result.stderr.strip()}")

    async def start(self):
        check(os.geteuid() == 0, "network namespaces need root")
        self._remove()
        for ns, addr in ((self.NS_A, self.ADDR_A), (self.NS_B, self.ADDR_B)):
            self._ip("netns", "add", ns)
            self._ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
            self._ip("netns", "exec", ns, "ip", "tuntap", "add", "dev", "dt0", "mode", "tun")
            self._ip("netns", "exec", ns, "ip", "addr", "add", f"{addr}/24", "dev", "dt0")
            self._ip("netns", "exec", ns, "ip", "link", "set", "dt0", "up")
        await self.restore()
        return self

    async def restore(self):
        """Starts forwarding (again)."""
        script = os.path.join(ROOT, "bench", "delay_link.py")
        self.forwarder = await asyncio.create_subprocess_exec(
            sys.executable, script, "--ns-a", self.NS_A, "--ns-b", self.NS_B, "--rtt-ms", str(self.rtt_ms),
            "--loss", str(self.loss), "--rate-kbps", str(self.rate_kbps),
            stdout=asyncio.subprocess.PIPE, stderr=open(self.scratch.file("link.log"), "ab"))
        line = await asyncio.wait_for(self.forwarder.stdout.readline(), 10)
        check(line.strip() == b"READY", "the delay link did not start")

    async def cut(self):
        """Every packet between the namespaces is lost until `restore()`."""
        if self.forwarder and self.forwarder.returncode is None:
            self.forwarder.kill()
            await self.forwarder.wait()

    def _remove(self):
        for ns in (self.NS_A, self.NS_B):
            self._ip("netns", "del", ns, check_ok=False)

    async def stop(self):
        await self.cut()
        self._remove()


class WireCounter:
    """Tests/e2e/rtp_counter.py in a namespace: what crossed its loopback so far, by RFC 7983
    class ({"rtp", "rtp_bytes", "rtcp", "dtls", "stun"}), read off the wire."""

    def __init__(self, namespace):
        self.namespace = namespace
        self.proc = None

    async def start(self):
        self.proc = await asyncio.create_subprocess_exec(
            "ip", "netns", "exec", self.namespace.NS, sys.executable, os.path.join(os.path.dirname(__file__),
                                                                                   "rtp_counter.py"),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        line = await asyncio.wait_for(self.proc.stdout.readline(), 10)
        check(line.strip() == b"READY", "the wire counter did not start")
        return self

    async def counts(self):
        self.proc.stdin.write(b"\n")
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), 10)
        values = [int(v) for v in line.split()]
        check(len(values) == 5, f"the wire counter said {line!r}")
        return dict(zip(("rtp", "rtp_bytes", "rtcp", "dtls", "stun"), values))

    async def stop(self):
        if self.proc and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


class MediaNamespace:
    """One network namespace for libnice peers (webrtcbin CLIs, Janus) and the server they use.

    libnice gathers no loopback candidates, so the namespace gets a veth pair with a test
    address: every peer inside gathers it, and its media never leaves the namespace (nor
    reaches this host's own address). Needs root."""

    NS = NETNS_PREFIX + "-media"
    ADDR = "10.79.0.1"

    @staticmethod
    def _ip(*args, check_ok=True):
        import subprocess
        result = subprocess.run(["ip", *args], capture_output=True, text=True)
        if check_ok:
            check(result.returncode == 0, f"ip {' '.join(args)}: {result.stderr.strip()}")

    def run(self, *args):
        import subprocess
        return subprocess.run(["ip", "netns", "exec", self.NS, *args], capture_output=True, text=True)

    async def start(self):
        check(os.geteuid() == 0, "network namespaces need root")
        self._ip("netns", "del", self.NS, check_ok=False)
        self._ip("netns", "add", self.NS)
        inside = ("netns", "exec", self.NS)
        self._ip(*inside, "ip", "link", "set", "lo", "up")
        self.run("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        self._ip(*inside, "ip", "link", "add", "dt0", "type", "veth", "peer", "name", "dt1")
        self._ip(*inside, "ip", "addr", "add", f"{self.ADDR}/24", "dev", "dt0")
        self._ip(*inside, "ip", "link", "set", "dt0", "up")
        self._ip(*inside, "ip", "link", "set", "dt1", "up")
        return self

    async def stop(self):
        self._ip("netns", "del", self.NS, check_ok=False)


JANUS_PLUGINS = "/usr/lib/" + os.popen("gcc -print-multiarch 2>/dev/null").read().strip() + "/janus"


class Janus:
    """Janus (Debian's 1.1.2) from a generated configuration: only the VideoRoom plugin and the
    HTTP transport, on 127.0.0.1 of the namespace, with an api_secret and a VideoRoom admin_key
    that only the server is given."""

    def __init__(self, scratch, namespace):
        import secrets
        self.scratch, self.namespace = scratch, namespace
        self.port = free_port()
        self.api_secret = secrets.token_hex(16)
        self.admin_key = secrets.token_hex(16)
        self.process = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/janus"

    def server_args(self):
        return ["--janus-url", self.url, "--janus-api-secret", self.api_secret, "--janus-admin-key", self.admin_key]

    def _configure(self):
        folder = self.scratch.file("janus")
        os.makedirs(folder, exist_ok=True)
        plugins = [p for p in os.listdir(os.path.join(JANUS_PLUGINS, "plugins")) if p.endswith(".so")]
        transports = [t for t in os.listdir(os.path.join(JANUS_PLUGINS, "transports")) if t.endswith(".so")]
        disabled_plugins = ",".join(p for p in plugins if p != "libjanus_videoroom.so")
        disabled_transports = ",".join(t for t in transports if t != "libjanus_http.so")
        with open(os.path.join(folder, "janus.jcfg"), "w") as f:
            f.write(f'''general: {{ configs_folder = "{folder}"; plugins_folder = "{JANUS_PLUGINS}/plugins";
  transports_folder = "{JANUS_PLUGINS}/transports"; events_folder = "{JANUS_PLUGINS}/events";
  loggers_folder = "{JANUS_PLUGINS}/loggers"; debug_level = 4; api_secret = "{self.api_secret}"; }}
media: {{ }}
nat: {{ }}
plugins: {{ disable = "{disabled_plugins}"; }}
transports: {{ disable = "{disabled_transports}"; }}
events: {{ broadcast = false; }}
loggers: {{ disable = "libjanus_jsonlog.so"; }}
''')
        with open(os.path.join(folder, "janus.transport.http.jcfg"), "w") as f:
            f.write(f'''general: {{ json = "compact"; base_path = "/janus"; http = true; port = {self.port};
  ip = "127.0.0.1"; https = false; }}
admin: {{ admin_http = false; }}
''')
        with open(os.path.join(folder, "janus.plugin.videoroom.jcfg"), "w") as f:
            f.write(f'general: {{ admin_key = "{self.admin_key}"; lock_rtp_forward = true; }}\n')
        return folder

    async def start(self):
        """Starts Janus and waits for its HTTP transport. Once, in a three-node run, Janus exited
        while starting: its core shows exit(1) from main while the HTTP transport's timer thread
        segfaulted (`http timer` in dmesg), the fatal line never flushed to its log. Most likely
        its HTTP port was taken inside the namespace: `free_port` finds a port free on the host,
        and a connection another process of the namespace opened can hold it there. So an exit
        while starting is said on stdout, its log kept as janus.log.crashed, and Janus started
        once more on another port; a second exit fails the test."""
        check(shutil.which("janus") is not None, "janus is not installed (run scripts/deps.sh)")
        log_path = self.scratch.file("janus.log")
        for attempt in (1, 2):
            folder = self._configure()
            self.process = await spawn(
                "janus", ["ip", "netns", "exec", self.namespace.NS, "janus", "-F", folder, "-C",
                          os.path.join(folder, "janus.jcfg")], log_path)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 15
            while loop.time() < deadline:
                with open(log_path, errors="replace") as log:
                    if "HTTP webserver started" in log.read():
                        return self
                code = self.process.proc.returncode
                if code is not None:
                    break
                await asyncio.sleep(0.1)
            else:
                raise Failure("janus did not start its HTTP transport (see janus.log)")
            check(attempt == 1, f"janus exited with {code} while starting, twice (see janus.log)")
            print(f"  note: janus exited with {code} while starting on port {self.port}; starting it again on "
                  f"another (its log: {log_path}.crashed)", flush=True)
            self.process.log.close()
            os.replace(log_path, log_path + ".crashed")
            self.port = free_port()
        raise Failure("unreachable")

    async def kill(self):
        """SIGKILL: Janus dies mid-call."""
        await self.process.stop()

    async def stop(self):
        if self.process:
            await self.process.stop()


def tone_levels(paths, frequencies, seconds=1.5):
    """Mixes the last `seconds` of the WAVs (what one participant heard from each of the others)
    and returns the FFT magnitude at each frequency (±3 Hz), over the strongest of them."""
    import numpy
    tails = []
    rate = 48000
    for path in paths:
        with wave.open(path) as w:
            rate = w.getframerate()
            frames = w.readframes(w.getnframes())
        tail = numpy.frombuffer(frames, dtype="<i2").astype(numpy.float64)[-int(rate * seconds):]
        check(len(tail) >= rate * 0.5, f"{path}: only {len(tail) / rate:.2f} s of audio")
        tails.append(tail)
    length = min(len(t) for t in tails)
    samples = sum(t[-length:] for t in tails)
    spectrum = numpy.abs(numpy.fft.rfft(samples * numpy.hanning(len(samples))))
    step = rate / len(samples)

    def level(f):
        low, high = int((f - 3) / step), int((f + 3) / step) + 1
        return float(spectrum[max(low, 0):high].max())

    levels = {f: level(f) for f in frequencies}
    top = max(levels.values()) or 1.0
    return {f: v / top for f, v in levels.items()}
