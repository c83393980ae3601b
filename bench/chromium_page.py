"""Headless Chromium on the server's softphone page, for the benches that run it across network
namespaces (bench/video_bench.py, bench/setup_bench.py).

`Browser` is Tests/e2e/harness.py's Chromium (the DevTools-pipe driver) launched with the flags
a page needs when the server is not on localhost but at http://10.x inside a namespace: that
origin treated as secure (`--unsafely-treat-insecure-origin-as-secure`, or getUserMedia is
missing), no loopback candidates, Chromium's fake camera and microphone (its own pattern at
30 fps, or a Y4M file it loops), no timer throttling, each browser in its own process group.
It adds what the benches read off the page: `value` / `evaluate_json` (Runtime.evaluate),
`state` / `wait_state` (the page's `dialtoneTest.state`) and `timeline` (the page's log).

`spawn` starts any child in a process group of its own and remembers it in `LEADERS`;
`kill_group` kills such a group (Chromium's helpers die with it), `kill_all` every one left.
"""
import asyncio
import json
import os
import re
import shlex
import shutil
import signal
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "e2e"))
import harness  # noqa: E402  (the Chromium DevTools-pipe driver)

LEADERS = set()    # process-group leaders started through spawn() and not yet killed
LOG_LINE = re.compile(r"^(\d+\.\d+)  (\S+)(?: (.*))?$")


class BenchError(Exception):
    pass


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    LEADERS.discard(pid)


def kill_all():
    """Kills every process group spawn() started that is still known (for a bench's last finally)."""
    for pid in list(LEADERS):
        kill_group(pid)


async def spawn(args, stdout=None, stdin=None, stderr=None, pass_fds=()):
    """A child in its own process group (so Chromium's helpers die with it)."""
    proc = await asyncio.create_subprocess_exec(*args, stdin=stdin if stdin is not None else asyncio.subprocess.DEVNULL,
                                                stdout=stdout, stderr=stderr, start_new_session=True,
                                                pass_fds=pass_fds)
    LEADERS.add(proc.pid)
    return proc


class Folder:
    """Where one browser keeps its profile and log (what harness.Chromium expects of a Scratch)."""

    def __init__(self, path):
        self.path = path
        os.makedirs(path, exist_ok=True)

    def file(self, name):
        return os.path.join(self.path, name)


def origin_of(url):
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class Browser(harness.Chromium):
    """harness.Chromium, launched with the benches' flags: no loopback candidates, the server's
    http `origin` (by default the page's own) treated as secure (getUserMedia), the fake camera
    (Chromium's own pattern at 30 fps, or `camera`, a Y4M file it loops), the fake microphone
    (Chromium's beep, or `microphone`, a WAV file played once from each getUserMedia on: the
    `%noloop` form of --use-file-for-fake-audio-capture), in its own process group."""

    def __init__(self, scratch, url, netns, origin=None, camera=None, microphone=None):
        super().__init__(scratch, url, netns)
        self.origin = origin or origin_of(url)
        self.camera = camera
        self.microphone = microphone

    async def start(self):
        binary = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
        camera = [f"--use-file-for-fake-video-capture={self.camera}"] if self.camera else []
        if self.microphone:
            camera.append(f"--use-file-for-fake-audio-capture={self.microphone}%noloop")
        args = [binary, "--headless=new", "--no-sandbox", "--use-fake-device-for-media-stream=fps=30", *camera,
                "--use-fake-ui-for-media-stream", f"--unsafely-treat-insecure-origin-as-secure={self.origin}",
                "--disable-features=WebRtcHideLocalIpsWithMdns", "--autoplay-policy=no-user-gesture-required",
                "--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-crash-reporter", "--disable-breakpad",
                "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                "--remote-debugging-pipe", f"--user-data-dir={self.scratch.file('profile')}", self.url]
        command_read, command_write = os.pipe()
        reply_read, reply_write = os.pipe()
        launch = f"exec {shlex.join(args)} 3<&{command_read} 4>&{reply_write}"
        log = open(self.scratch.file("chromium.log"), "wb")
        proc = await spawn(["ip", "netns", "exec", self.netns, "bash", "-c", launch], stdout=log,
                           stderr=asyncio.subprocess.STDOUT, pass_fds=(command_read, reply_write))
        self.process = harness.Process(proc, "chromium", log)
        os.close(command_read)
        os.close(reply_write)
        self.to_browser, self.from_browser = command_write, reply_read
        os.set_blocking(reply_read, False)
        deadline = time.monotonic() + 30
        page = None
        while page is None:
            if time.monotonic() > deadline:
                raise BenchError("chromium has no page")
            targets = await self.command("Target.getTargets", timeout=30)
            page = next((t for t in targets.get("targetInfos", []) if t.get("type") == "page"), None)
            if page is None:
                await asyncio.sleep(0.1)
        attached = await self.command("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})
        self.session = attached["sessionId"]
        return self

    async def close(self):
        """Stops the browser, kills its process group and removes its profile (keeps chromium.log)."""
        await self.stop()
        if self.process:
            kill_group(self.process.proc.pid)
        shutil.rmtree(self.scratch.file("profile"), ignore_errors=True)

    async def try_value(self, expression, timeout=3):
        """`value`, or None if the page cannot tell (not started, gone, or the expression threw)."""
        if self.session is None:
            return None
        try:
            return await self.value(expression, timeout)
        except (BenchError, harness.Failure, OSError, ValueError):
            return None

    async def save_log(self, name="page.log"):
        """Best effort: the page's log (newest first) into the browser's folder."""
        text = await self.try_value("document.getElementById('log').textContent")
        if text is not None:
            with open(self.scratch.file(name), "w") as f:
                f.write(text)

    async def value(self, expression, timeout=15):
        result = await self.command("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                         "awaitPromise": True}, session=self.session, timeout=timeout)
        if "exceptionDetails" in result:
            raise BenchError(f"page: {expression[:60]}: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    async def evaluate_json(self, expression, timeout=15):
        """`expression` yields JSON text (JSON.stringify(...)); its value."""
        text = await self.value(expression, timeout)
        return json.loads(text) if text else None

    async def state(self):
        return await self.evaluate_json("JSON.stringify({state: window.dialtoneTest && dialtoneTest.state,"
                                        " frames: window.dialtoneTest && dialtoneTest.videoFrames})")

    async def wait_state(self, wanted, timeout, poll=0.1):
        deadline = time.monotonic() + timeout
        while True:
            st = await self.state()
            if st and st.get("state") in wanted:
                return time.monotonic(), st
            if time.monotonic() > deadline:
                raise BenchError(f"page: no state {wanted} within {timeout:.0f} s (last {st})")
            await asyncio.sleep(poll)

    async def timeline(self):
        """The page's log (newest first, `seconds  event detail`) as {event detail: first ms}."""
        text = await self.value("document.getElementById('log').textContent") or ""
        marks = {}
        for line in reversed(text.splitlines()):
            m = LOG_LINE.match(line)
            if not m:
                continue
            key = m.group(2) + (" " + m.group(3) if m.group(3) and m.group(2) in ("state", "connection") else "")
            marks.setdefault(key, float(m.group(1)) * 1000)
        return marks
