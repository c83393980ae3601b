"""Observability (issue 18): /metrics moves with real calls, the quality reports the CLIs send
reach GET /v1/calls/{id} (participants only), --metrics-listen takes /metrics off the public
port, and --log-format json writes one JSON object per line with nothing secret at info.

Registered in run_e2e.py's SCENARIOS after the others.
"""
import asyncio
import json
import re

from harness import MediaNamespace, Server, Softphone, check, free_port, http_get
from scenarios import scenario




def samples(text):
    """The exposition's samples: {'name{labels}': value}; checks every line is well formed."""
    values = {}
    for line in text.splitlines():
        if not line or line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        match = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?) (\S+)', line)
        check(match is not None, f"not a Prometheus sample line: {line!r}")
        values[match.group(1)] = float(match.group(2))
    return values


def value(values, key):
    return values.get(key, 0.0)


async def scrape(netns, url):
    response = await http_get(netns, url)
    check(response["status"] == 200, f"GET {url}: {response['status']}")
    content_type = {k.lower(): v for k, v in response["headers"].items()}.get("content-type", "")
    check(content_type.startswith("text/plain; version=0.0.4"), f"/metrics content type {content_type!r}")
    return samples(response["body"])


@scenario
async def metrics_and_quality_reports_follow_real_calls(s, stack):
    """A CLI call moves the counters and histograms; both sides' final quality reports are
    stored with the call, visible to its participants only; /metrics is served only on
    --metrics-listen."""
    ns = stack(await MediaNamespace().start())
    metrics_port = free_port()
    server = stack(await Server(s, netns=ns.NS, extra=["--metrics-listen", f"127.0.0.1:{metrics_port}"]).start())
    metrics_url = f"http://{server.host}:{metrics_port}/metrics"
    before = await scrape(ns.NS, metrics_url)
    public = await http_get(ns.NS, f"{server.url}/metrics")
    check(public["status"] == 404, f"/metrics on the public port answered {public['status']} with --metrics-listen")

    bob = stack(await Softphone(s, "bob", ["answer", "--server", server.url, "--token", server.token("bob"),
                                           "--auto", "--tone-frequency", "330"], netns=ns.NS).start())
    await bob.wait_for("note", text="waiting for a call")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--tone-frequency", "523", "--duration", "3"],
                                  netns=ns.NS).start())
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not exit 0")

    alice_token = server.token("alice")
    history = await server.calls(alice_token)
    check(len(history) == 1 and history[0]["endReason"] == "hangup", f"alice's history: {history}")
    call_id = history[0]["callId"]
    detail = None
    for _ in range(50):  # the callee's report may land a moment after the caller's process exits
        response = await http_get(ns.NS, f"{server.url}/v1/calls/{call_id}", {"Authorization": f"Bearer {alice_token}"})
        check(response["status"] == 200, f"GET /v1/calls/{call_id}: {response['status']} {response['body']}")
        detail = json.loads(response["body"])
        if len(detail["quality"]) == 2:
            break
        await asyncio.sleep(0.2)
    check(detail["call"]["callId"] == call_id and detail["call"]["endReason"] == "hangup", f"call: {detail['call']}")
    reports = {entry["role"]: entry for entry in detail["quality"]}
    check(set(reports) == {"caller", "callee"}, f"quality reports: {detail['quality']}")
    for role, entry in reports.items():
        report = entry["report"]
        check(report["final"] is True, f"{role}'s report is not final: {report}")
        milestones = report.get("milestones", {})
        for name in ("accepted", "iceConnected", "dtlsConnected", "firstAudio"):
            check(name in milestones, f"{role}'s report has no {name} milestone: {report}")
        check(milestones["firstAudio"] >= milestones["accepted"], f"{role}: first audio before accept: {milestones}")
        check(report.get("localCandidateType") in ("host", "srflx", "prflx", "relay"), f"{role}: {report}")
        check(report.get("durationMs", 0) > 1000, f"{role}: duration {report.get('durationMs')}")
        check("packetsLost" not in report, "the stored report has fields the protocol does not")
    check(reports["caller"]["userId"] == "alice" and reports["callee"]["userId"] == "bob", f"{reports}")

    stranger = await http_get(ns.NS, f"{server.url}/v1/calls/{call_id}",
                              {"Authorization": f"Bearer {server.token('carol')}"})
    check(stranger["status"] == 404, f"a non-participant got {stranger['status']} for the call")
    anonymous = await http_get(ns.NS, f"{server.url}/v1/calls/{call_id}")
    check(anonymous["status"] == 401, f"no token got {anonymous['status']}")

    after = await scrape(ns.NS, metrics_url)

    def moved(key, by):
        got = value(after, key) - value(before, key)
        check(got == by, f"{key} moved by {got}, not {by}")

    moved('dialtone_calls_started_total{video="false"}', 1)
    moved('dialtone_calls_ended_total{reason="hangup"}', 1)
    moved("dialtone_call_ring_seconds_count", 1)
    moved("dialtone_call_answer_seconds_count", 1)
    moved('dialtone_quality_reports_total{final="true"}', 2)
    moved('dialtone_call_setup_seconds_count{role="caller"}', 1)
    moved('dialtone_call_setup_seconds_count{role="callee"}', 1)
    paths = (value(after, 'dialtone_call_media_path_total{path="direct"}')
             + value(after, 'dialtone_call_media_path_total{path="relay"}'))
    check(paths == 2, f"{paths} media paths counted, not 2")
    moved('dialtone_sessions_total{kind="new"}', 2)
    check(value(after, 'dialtone_messages_received_total{type="invite"}') == 1, "no invite counted")
    check(value(after, 'dialtone_messages_received_total{type="candidate"}') >= 2, "no candidates counted")
    check(value(after, "dialtone_relay_latency_seconds_count") >= 3,
          f"relayed messages were not timed: {[(k, v) for k, v in after.items() if 'relay' in k or 'received' in k]}")
    check(value(after, "dialtone_messages_sent_total") > value(before, "dialtone_messages_sent_total"),
          "no server message counted")
    check(value(after, 'dialtone_ice_server_requests_total{source="welcome"}') >= 2, "welcome ICE lists not counted")
    check(value(after, 'dialtone_http_requests_total{method="GET",route="/v1/calls/{callId}",status="200"}') >= 1,
          "GET /v1/calls/{callId} not counted by route pattern")
    check(value(after, 'dialtone_http_requests_total{method="GET",route="/v1/calls/{callId}",status="404"}') == 1,
          "the stranger's 404 not counted")
    check(value(after, "dialtone_websocket_connections") == 0, "sockets still counted open after both CLIs left")
    check(not any(call_id in key or "alice" in key for key in after), "a call or user id is in a label")


@scenario
async def json_logs_are_one_object_per_line_without_secrets(s, stack):
    """--log-format json at info, with a call through the server: every line is a JSON object
    with time, level, component and msg; none carries a token, SDP or an ICE candidate."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS, extra=["--log-format", "json", "--log-level", "info"]).start())
    bob = stack(await Softphone(s, "bob", ["answer", "--server", server.url, "--token", server.token("bob"),
                                           "--auto"], netns=ns.NS).start())
    await bob.wait_for("note", text="waiting for a call")
    alice_token = server.token("alice")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", alice_token,
                                               "--to", "bob", "--duration", "2"], netns=ns.NS).start())
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not exit 0")
    await server.terminate()
    lines = [line for line in open(s.file("server.log"), encoding="utf-8").read().splitlines() if line.strip()]
    check(len(lines) >= 3, f"only {len(lines)} log lines")
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            raise AssertionError(f"not JSON: {line!r}")
        check(isinstance(entry, dict), f"not an object: {line!r}")
        for field in ("time", "level", "component", "msg"):
            check(field in entry, f"no {field}: {line!r}")
        check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["time"]), f"time {entry['time']!r}")
        check(entry["level"] in ("info", "warning", "error"), f"level {entry['level']} at --log-level info")
        for secret in (alice_token, "a=candidate", "v=0", "candidate:", "ice-pwd", "fingerprint"):
            check(secret not in line, f"a log line carries {secret[:12]!r}: {line!r}")
    ended = [json.loads(line) for line in lines if '"callId"' in line]
    check(any(entry["msg"].startswith("call ended") for entry in ended), "no call-ended line with its callId")
