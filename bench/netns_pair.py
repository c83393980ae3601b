"""The frame of the benches that put a call's two ends in two network namespaces joined by
bench/delay_link.py (bench/quality_bench.py, bench/video_bench.py, bench/setup_bench.py),
written once.

- `NamespacePair`: namespaces A and B, each with one TUN device `dt0` holding its address (the
  link forwards between the two devices), dialtone-server in B, and the probe that waits until
  it listens; `link()` starts bench/delay_link.py between them as `DelayLink`.
- `CLIEvents`: `dialtone call|answer … --json` in a namespace, its JSON event lines kept as
  (time read, event), with `find` / `wait_for`. A bench picks the clock (`clock`) and may keep
  more per event (`on_event`).
- `sh`, `stop`, `token`, and `run_main`: the bench's `main()` run so that Ctrl-C or SIGTERM
  still runs its cleanup, kills every process group `chromium_page.spawn` started and removes
  the namespaces.
"""
import asyncio
import json
import os
import signal
import subprocess
import sys
import time

from chromium_page import LEADERS, BenchError, kill_group, spawn

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


async def stop(proc, grace=0.0, sig=signal.SIGINT):
    """`sig` first and `grace` seconds to exit, then SIGKILL to the whole group."""
    if proc is None:
        return
    if proc.returncode is None and grace > 0:
        try:
            proc.send_signal(sig)
            await asyncio.wait_for(proc.wait(), grace)
        except (asyncio.TimeoutError, ProcessLookupError):
            pass
    kill_group(proc.pid)
    if proc.returncode is None:
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except asyncio.TimeoutError:
            pass


def token(binary, user, device, secret):
    """A client token from `binary`/dialtone, signed with the bench server's `secret`."""
    return sh(os.path.join(binary, "dialtone"), "token", "--user", user, "--device", device,
              "--secret", secret).stdout.strip()


class NamespacePair:
    """Namespaces `ns_a` and `ns_b` with their addresses on `dt0`; the server listens on
    `addr_b`:`port` in B. IPv6 is turned off in both unless `ipv6`: the media benches measure
    over IPv4 alone, while bench/setup_bench.py has always left it on, and its figures were
    taken so."""

    def __init__(self, ns_a, addr_a, ns_b, addr_b, port, ipv6=False):
        self.ns_a, self.addr_a, self.ns_b, self.addr_b, self.port = ns_a, addr_a, ns_b, addr_b, port
        self.ipv6 = ipv6

    def make(self):
        self.remove()
        for ns, addr in ((self.ns_a, self.addr_a), (self.ns_b, self.addr_b)):
            sh("ip", "netns", "add", ns)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            if not self.ipv6:
                sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                   "net.ipv6.conf.default.disable_ipv6=1")
            sh("ip", "netns", "exec", ns, "ip", "tuntap", "add", "dev", "dt0", "mode", "tun")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{addr}/24", "dev", "dt0")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "dt0", "up")

    def remove(self):
        for ns in (self.ns_a, self.ns_b):
            sh("ip", "netns", "del", ns, check=False)

    async def start_server(self, binary, data_dir, secret, log):
        """`binary`/dialtone-server in B, quiet but for errors, its output into `log`."""
        return await spawn(["ip", "netns", "exec", self.ns_b, os.path.join(binary, "dialtone-server"), "--host",
                            self.addr_b, "--port", str(self.port), "--data-dir", data_dir, "--auth-secret", secret,
                            "--log-level", "error"], stdout=log, stderr=log)

    async def wait_listening(self, proc, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                raise BenchError("dialtone-server exited (see the log)")
            probe = await asyncio.create_subprocess_exec(
                "ip", "netns", "exec", self.ns_b, "bash", "-c", f"exec 3<>/dev/tcp/{self.addr_b}/{self.port}",
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            if await probe.wait() == 0:
                return
            await asyncio.sleep(0.1)
        raise BenchError(f"nothing listens on {self.addr_b}:{self.port}")

    def link(self, arguments, log, nice=None):
        """bench/delay_link.py between A and B with `arguments` (the condition); with `nice`, at
        that niceness."""
        return DelayLink(self.link_command(arguments, nice), log)

    def link_command(self, arguments, nice=None):
        prefix = ["nice", "-n", str(nice)] if nice is not None else []
        return [*prefix, sys.executable, os.path.join(HERE, "delay_link.py"), "--ns-a", self.ns_a,
                "--ns-b", self.ns_b, *arguments]


class DelayLink:
    """A running bench/delay_link.py (`async with`); `stats()` reads its counters (and restarts
    its recent delay figures)."""

    def __init__(self, command, log):
        self.command, self.log, self.proc = command, log, None

    async def __aenter__(self):
        self.proc = await spawn(self.command, stdout=asyncio.subprocess.PIPE, stderr=self.log)
        line = await asyncio.wait_for(self.proc.stdout.readline(), 10)
        if line.strip() != b"READY":
            raise BenchError("the delay link did not start")
        return self

    async def stats(self):
        self.proc.send_signal(signal.SIGUSR1)
        return json.loads(await asyncio.wait_for(self.proc.stdout.readline(), 5))

    async def __aexit__(self, *exc):
        await stop(self.proc, grace=3, sig=signal.SIGTERM)


class CLIEvents:
    """`args` (`dialtone call|answer …`) with `--json` in namespace `ns`: every line goes to
    `scratch`/`name`.log with the time it was read, and every JSON object line into `events` as
    (`clock()`, event)."""

    clock = time.monotonic

    def __init__(self, name, ns, args, scratch):
        self.name, self.ns, self.args, self.scratch = name, ns, args, scratch
        self.events = []
        self.proc = None
        self.reader = None
        self.changed = asyncio.Event()

    def command(self, extra=()):
        return ["ip", "netns", "exec", self.ns, *self.args, *extra, "--json"]

    async def start(self, extra=()):
        """Starts the CLI, `extra` arguments after the bench's own."""
        self.proc = await spawn(self.command(extra), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                stderr=asyncio.subprocess.STDOUT)
        self.reader = asyncio.create_task(self.read())
        return self

    def on_event(self, now, event):
        """Called for each event before it joins `events`."""

    async def read(self):
        with open(os.path.join(self.scratch, f"{self.name}.log"), "w") as log:
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    break
                now = self.clock()
                text = line.decode(errors="replace").rstrip("\n")
                log.write(f"{now:.3f} {text}\n")
                try:
                    event = json.loads(text)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    self.on_event(now, event)
                    self.events.append((now, event))
                    self.changed.set()
        self.changed.set()

    def find(self, name, after=0.0, **fields):
        """The first event `name` read at or after `after` whose `fields` have these values."""
        return next(((t, e) for t, e in self.events if t >= after and e.get("event") == name
                     and all(e.get(k) == v for k, v in fields.items())), None)

    async def wait_for(self, name, timeout, after=0.0, **fields):
        deadline = time.monotonic() + timeout
        while (found := self.find(name, after, **fields)) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.reader.done():
                raise BenchError(f"{self.name}: no {name} within {timeout:.0f} s")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), min(remaining, 0.5))
            except asyncio.TimeoutError:
                pass
        return found


def run_main(main, cleanup):
    """Runs the coroutine `main()`; on Ctrl-C or SIGTERM its finally blocks get 15 s, and then,
    however it ended, every spawned process group is killed and `cleanup()` runs."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(main())
    for sig in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, task.cancel)
    try:
        loop.run_until_complete(task)
    except (KeyboardInterrupt, asyncio.CancelledError):
        # Ctrl-C or SIGTERM: let the task's finally blocks run (bounded), then clean up regardless.
        task.cancel()
        try:
            loop.run_until_complete(asyncio.wait_for(asyncio.shield(task), 15))
        except BaseException:
            pass
        print("# interrupted", file=sys.stderr)
        sys.exit(130)
    finally:
        for pid in list(LEADERS):
            kill_group(pid)
        cleanup()
        loop.close()
