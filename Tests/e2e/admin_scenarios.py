"""The admin dashboard (issue 18, docs/protocol.md 16.8): /admin and /admin/api/overview are off
without --admin-token and refuse a wrong or missing credential; the page, in headless Chromium,
draws what real CLI calls left behind (tables, tiles and SVG charts), checked in a screenshot.

Registered in run_e2e.py's SCENARIOS after the others.
"""
import asyncio
import base64
import json
import os
import re
import struct
import zlib

from harness import Chromium, MediaNamespace, Server, Softphone, check, http_get
from scenarios import scenario


ADMIN_TOKEN = "e2e-admin-token-0123456789"
# The page under test is the repository's own file (the server re-reads it on every request).
WEB_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "Sources", "DialtoneServer",
                                        "Resources"))
CHARTS = ("setupChart", "outcomesChart", "turnChart", "pathsChart", "pushChart", "mosChart")



def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def admin_server(s, ns, *extra):
    return Server(s, netns=ns.NS, extra=["--web-root", WEB_ROOT, *extra])


async def open_admin(s, stack, ns, url, authorization=None):
    """Chromium inside the namespace on `url`; with `authorization`, every request of the page
    (its load and its fetches) carries that header, set over CDP before navigating."""
    browser = stack(await Chromium(s, "about:blank", ns.NS).start())
    await browser.command("Emulation.setDeviceMetricsOverride",
                          {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                          session=browser.session)
    if authorization:
        await browser.command("Network.enable", session=browser.session)
        await browser.command("Network.setExtraHTTPHeaders", {"headers": {"Authorization": authorization}},
                              session=browser.session)
    await browser.command("Page.navigate", {"url": url}, session=browser.session)
    return browser


async def cancel_the_prompt(browser, timeout):
    """With the Fetch domain on (handleAuthRequests), lets the page's next paused request go
    and, when the server challenges it, cancels the Basic prompt as a person would. Headless
    Chromium would otherwise hold that request forever, waiting for a prompt nobody sees.
    Reads the DevTools pipe itself: `Chromium.command` drops the events this needs."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout

    def send(method, params):
        browser.next_id += 1  # the reply is skipped by the next `command`, like any other
        message = {"id": browser.next_id, "method": method, "params": params, "sessionId": browser.session}
        os.write(browser.to_browser, json.dumps(message).encode() + b"\0")

    while True:
        message = await browser._read_message(deadline)
        params = message.get("params", {})
        if message.get("method") == "Fetch.requestPaused":
            send("Fetch.continueRequest", {"requestId": params["requestId"]})
        elif message.get("method") == "Fetch.authRequired":
            send("Fetch.continueWithAuth", {"requestId": params["requestId"],
                                            "authChallengeResponse": {"response": "CancelAuth"}})
            return


@scenario
async def admin_is_off_without_a_token_and_refuses_wrong_credentials(s, stack):
    """No --admin-token: both routes 404. With one: no, a wrong or a misplaced credential gets
    401 with the Basic challenge; Bearer and Basic (any user, the token as password) get the
    page and the JSON. In Chromium, credentials in the URL answer the challenge and the page's
    own fetches carry them; once the server refuses them, the page says so."""
    ns = stack(await MediaNamespace().start())
    server = stack(await admin_server(s, ns).start())
    for path in ("/admin", "/admin/api/overview"):
        for headers in ({}, {"Authorization": f"Bearer {ADMIN_TOKEN}"}):
            response = await http_get(ns.NS, server.url + path, headers)
            check(response["status"] == 404, f"{path} without --admin-token answered {response['status']}")

    await server.terminate()
    server.extra += ["--admin-token", ADMIN_TOKEN]
    await server.restart()
    refused = {"no credential": {}, "a wrong Bearer": {"Authorization": "Bearer wrong-token-0123456789"},
               "a wrong Basic password": {"Authorization": basic("admin", "wrong-token-0123456789")},
               "the token as Basic's user name": {"Authorization": basic(ADMIN_TOKEN, "")},
               "an unknown scheme": {"Authorization": f"Token {ADMIN_TOKEN}"}}
    for path in ("/admin", "/admin/api/overview"):
        for what, headers in refused.items():
            response = await http_get(ns.NS, server.url + path, headers)
            check(response["status"] == 401, f"{path} with {what} answered {response['status']}")
            challenge = {k.lower(): v for k, v in response["headers"].items()}.get("www-authenticate", "")
            check(challenge.startswith('Basic realm="dialtone admin"'), f"{path} with {what}: challenge {challenge!r}")
        for what, authorization in (("Bearer", f"Bearer {ADMIN_TOKEN}"), ("Basic", basic("anyone", ADMIN_TOKEN))):
            response = await http_get(ns.NS, server.url + path, {"Authorization": authorization})
            check(response["status"] == 200, f"{path} with {what} answered {response['status']}")
            content_type = {k.lower(): v for k, v in response["headers"].items()}.get("content-type", "")
            if path == "/admin":
                check(content_type.startswith("text/html") and 'id="setupChart"' in response["body"],
                      f"/admin with {what} is not the dashboard ({content_type})")
            else:
                overview = json.loads(response["body"])
                check(overview["sockets"] == 0 and overview["recentCalls"] == [] and
                      len(overview["timeline"]["buckets"]) == 60, f"overview: {response['body'][:300]}")

    host = server.url.split("//", 1)[1]
    browser = await open_admin(s, stack, ns, f"http://admin:{ADMIN_TOKEN}@{host}/admin")
    # "ok" means the page's own fetch of the overview carried the credential too.
    await browser.wait_for("the overview", lambda st: st["status"] == "ok", timeout=15)
    empty = await browser.evaluate(
        "JSON.stringify([...document.querySelectorAll('svg.chart')].map(c => [c.id, c.dataset.empty,"
        " c.textContent.includes('no ')]))")
    check(all(e == "true" and says for _, e, says in json.loads(empty)),
          f"a chart of an idle server is not in its empty state: {empty}")
    # The server restarts with another token: the next poll is refused, the browser would
    # prompt, the person cancels, and the page says what happened.
    await browser.command("Fetch.enable", {"patterns": [{"urlPattern": "*/admin/api/overview"}],
                                           "handleAuthRequests": True}, session=browser.session)
    await server.terminate()
    server.extra[server.extra.index(ADMIN_TOKEN)] = "another-admin-token-0123456789"
    await server.restart()
    await cancel_the_prompt(browser, timeout=15)
    await browser.wait_for("the refusal", lambda st: st["status"] == "unauthorized", timeout=5)
    problem = await browser.evaluate("document.getElementById('problem').hidden ? '' :"
                                     " document.getElementById('problem').textContent")
    check("admin token" in problem, f"the page does not say it was refused: {problem!r}")


# --- Screenshot checks -------------------------------------------------------------------------

def decode_png(data):
    """The pixels of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium captures) as a
    numpy array of shape (height, width, channels): zlib, then each row's filter undone."""
    import numpy
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "the screenshot is not a PNG")
    position, compressed, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, colour_type, _, _, interlace = header
    check(depth == 8 and colour_type in (2, 6) and interlace == 0,
          f"unexpected PNG: depth {depth}, colour type {colour_type}, interlace {interlace}")
    bpp = 4 if colour_type == 6 else 3
    stride = width * bpp
    raw = zlib.decompress(b"".join(compressed))
    check(len(raw) == height * (stride + 1), "truncated PNG data")
    previous = bytearray(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:  # Sub
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:  # Up
            line = bytearray((numpy.frombuffer(line, numpy.uint8) + numpy.frombuffer(previous, numpy.uint8)).tobytes())
        elif kind == 3:  # Average
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:  # Paeth
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = previous[i]
                c = previous[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        else:
            check(kind == 0, f"PNG filter {kind}")
        rows.append(bytes(line))
        previous = line
    return numpy.frombuffer(b"".join(rows), numpy.uint8).reshape(height, width, bpp)


def colour_pixels(pixels, box, colour, tolerance=6):
    """How many pixels inside `box` (x, y, width, height in pixels) are `colour` (r, g, b)."""
    import numpy
    x, y, w, h = (int(round(v)) for v in box)
    region = pixels[max(y, 0):y + h, max(x, 0):x + w, :3].astype(numpy.int16)
    return int(numpy.all(numpy.abs(region - numpy.array(colour, numpy.int16)) <= tolerance, axis=2).sum())


# Each chart's box in CSS pixels, the colours of its marks (a mark's fill, or its stroke), its
# legend's swatches and axis titles.
_CHART_GEOMETRY = """JSON.stringify({dpr: devicePixelRatio, innerWidth, charts: Object.fromEntries(
  %s.map(id => { const chart = document.getElementById(id); const box = chart.getBoundingClientRect();
    const colours = [...new Set([...chart.querySelectorAll('.mark')].map(m => { const style = getComputedStyle(m);
      return style.fill !== 'none' ? style.fill : style.stroke; }))];
    const count = (selector) => chart.querySelectorAll(selector).length;
    return [id, {box: [box.x, box.y, box.width, box.height], colours, marks: count('.mark'),
                 swatches: count('.swatch'), axisTitles: count('.axis-title'), empty: chart.dataset.empty,
                 label: chart.getAttribute('aria-label') || '',
                 title: chart.querySelector('title') ? chart.querySelector('title').textContent : ''}]; }))})"""

_TABLES = """JSON.stringify({
  recent: [...document.querySelectorAll('#recentCalls tbody tr')].map(tr => [...tr.cells].map(td => td.textContent)),
  live: [...document.querySelectorAll('#liveCalls tbody tr')].map(tr => [...tr.cells].map(td => td.textContent)),
  tiles: Object.fromEntries([...document.querySelectorAll('.tile .value')].map(v => [v.id, v.textContent])),
  header: document.querySelector('header').textContent, images: document.querySelectorAll('img').length,
  pwned: window.pwned === 1})"""

# A user id with markup in it: the page must show it as text.
HOSTILE = '<img src=x onerror="window.pwned=1">mallory'


@scenario
async def the_dashboard_draws_real_calls(s, stack):
    """Three CLI calls: one answered with 3 s of media (hang-up), one declined by a callee
    whose caller's id is markup, one still live. /admin in Chromium lists them, its tiles
    show numbers, and in a screenshot every chart with data has its marks' colours inside its
    box (the pushes chart, with no push provider, says it has none)."""
    ns = stack(await MediaNamespace().start())
    server = stack(await admin_server(s, ns, "--admin-token", ADMIN_TOKEN).start())

    def phone(name, user, *args):
        return stack(Softphone(s, name, [args[0], "--server", server.url, "--token", server.token(user), *args[1:]],
                               netns=ns.NS))

    bob = await phone("bob", "bob", "answer", "--auto").start()
    dave = await phone("dave", "dave", "answer").start()
    frank = await phone("frank", "frank", "answer", "--auto").start()
    for callee in (bob, dave, frank):
        await callee.wait_for("note", text="waiting for a call")
    alice = await phone("alice", "alice", "call", "--to", "bob", "--duration", "3").start()
    mallory = await phone("mallory", HOSTILE, "call", "--to", "dave").start()
    erin = await phone("erin", "erin", "call", "--to", "frank", "--duration", "60").start()
    await dave.wait_for("note", text="press Enter to answer, or type d and Enter to decline")
    dave.send("d")
    check(await mallory.exit_status() == 3, "the declined call did not exit 3")
    await erin.wait_for("connected")
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not exit 0")

    browser = await open_admin(s, stack, ns, f"{server.url}/admin", basic("admin", ADMIN_TOKEN))

    async def charts():
        return json.loads(await browser.evaluate(_CHART_GEOMETRY % json.dumps(CHARTS)))["charts"]

    # The callee's final report may land a moment after its process exits: a poll or two.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while True:
        state = await browser.page_state()
        drawn = await charts() if state and state["status"] == "ok" else {}
        if drawn and all(drawn[c]["marks"] > 0 for c in CHARTS if c != "pushChart") \
                and len(drawn["outcomesChart"]["colours"]) >= 2:
            break
        check(loop.time() < deadline, f"the charts were not all drawn: {state} {json.dumps(drawn)[:800]}")
        await asyncio.sleep(0.3)

    tables = json.loads(await browser.evaluate(_TABLES))
    check(not tables["pwned"] and tables["images"] == 0, "markup from a user id became HTML")
    outcomes = {(row[1], row[2]): row[4] for row in tables["recent"]}
    check(outcomes.get(("alice", "bob")) == "hangup", f"recent calls: {tables['recent']}")
    check(outcomes.get((HOSTILE, "dave")) == "declined", f"recent calls: {tables['recent']}")
    answered = next(row for row in tables["recent"] if row[1] == "alice")
    check(re.fullmatch(r"\d+\.\d s", answered[5]) and float(answered[5][:-2]) >= 2.5, f"duration: {answered}")
    check(re.fullmatch(r"\d+ ms|\d+\.\d s", answered[7]) and answered[11] in ("direct", "relayed (TURN)"),
          f"quality: {answered}")
    # The CLI's speech estimate (protocol.md 7.19): a clean namespace link scores well.
    check(re.fullmatch(r"\d\.\d\d", answered[10]) and 3.5 <= float(answered[10]) <= 4.5, f"MOS: {answered}")
    check([row[:3] for row in tables["live"]] == [["erin", "frank", "accepted"]], f"live calls: {tables['live']}")
    tiles = tables["tiles"]
    check(tiles["tileLiveCalls"] == "1" and int(tiles["tileSockets"]) >= 2 and int(tiles["tileSessions"]) >= 2
          and tiles["tileLiveGroupCalls"] == "0", f"tiles: {tiles}")
    for tile in ("tileSetupP50", "tileSetupP90"):
        check(re.fullmatch(r"\d+ ms|\d+(\.\d)? s", tiles[tile]), f"{tile}: {tiles[tile]!r}")
    check(re.fullmatch(r"\d+ %", tiles["tileTurnShare"]), f"TURN share tile: {tiles['tileTurnShare']!r}")
    check(re.search(r"version \S+ · up \d", tables["header"]), f"header: {tables['header']!r}")

    # The whole page in one screenshot: the viewport as tall as the page.
    height = await browser.evaluate("document.documentElement.scrollHeight")
    await browser.command("Emulation.setDeviceMetricsOverride",
                          {"width": 1280, "height": height, "deviceScaleFactor": 1, "mobile": False},
                          session=browser.session)
    geometry = json.loads(await browser.evaluate(_CHART_GEOMETRY % json.dumps(CHARTS)))
    shot = await browser.command("Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True},
                                 session=browser.session, timeout=30)
    png = base64.b64decode(shot["data"])
    with open(s.file("admin.png"), "wb") as f:
        f.write(png)
    pixels = decode_png(png)
    scale = pixels.shape[1] / geometry["innerWidth"]  # image pixels per CSS pixel (the DPR)
    check(abs(scale - geometry["dpr"]) < 0.01, f"the screenshot is {pixels.shape[1]} px wide for {geometry}")
    for chart, info in geometry["charts"].items():
        check(info["title"] and info["label"].startswith(info["title"]), f"{chart} has no accessible name: {info}")
        if chart == "pushChart":
            check(info["empty"] == "true" and info["marks"] == 0 and "no pushes" in info["label"],
                  f"the pushes chart is not empty: {info}")
            continue
        check(info["swatches"] >= len(info["colours"]) and (chart == "turnChart" or info["axisTitles"] == 2),
              f"{chart} lacks its legend or axis titles: {info}")
        box = [v * scale for v in info["box"]]
        for colour in info["colours"]:
            rgb = tuple(int(v) for v in re.findall(r"\d+", colour)[:3])
            # More than a legend swatch (10 × 10) of that colour: the marks themselves.
            count = colour_pixels(pixels, box, rgb)
            check(count > 250 * scale * scale, f"{chart}: only {count} pixels of {colour} in the screenshot")
