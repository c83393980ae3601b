"""The OpenAPI contract (issue 18): schemathesis generates requests for every operation of
docs/openapi.yaml (valid and invalid parameters and bodies, missing and wrong credentials,
links between operations) against a real server, and checks every answer against the document:
no 5xx, only documented statuses, bodies and headers as described.

The server runs on loopback with every optional route on (admin token, LiveKit webhook) and the
HTTP rate limit off; a finished call with both quality reports and a ringing one are made first,
so the call, history and dashboard schemas are checked on real records, not only empty lists.

Registered in run_e2e.py's SCENARIOS after the others.
"""
import asyncio
import os
import re
import shutil
import sys
import uuid

from harness import Server, check
from scenarios import scenario
from observability_scenarios import http_get, samples
from protocol_driver import FAKE_ANSWER, FAKE_OFFER, Session, is_ack




DOCUMENT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "openapi.yaml"))
ADMIN_TOKEN = "e2e-admin-token-0123456789"
BACKEND_TOKEN = "e2e-backend-token-0123456789"
# A LiveKit the server never reaches (port 9, discard): configuring it is what registers the
# webhook route; receiving a webhook makes no request to LiveKit.
LIVEKIT = ["--livekit-url", "ws://127.0.0.1:9", "--livekit-api-key", "APIdialtoneE2E",
           "--livekit-api-secret", "lk-e2e-secret-0123456789abcdefghijklmnop"]
# Test cases per operation and phase: about 1,000 in all, some 15 s; SCHEMATHESIS_SECONDS bounds it.
MAX_EXAMPLES = 30
SCHEMATHESIS_SECONDS = 150
# Fixed, so that a failure reproduces; DIALTONE_OPENAPI_SEED explores other inputs.
SEED = os.environ.get("DIALTONE_OPENAPI_SEED", "1")
# Every check but `unsupported_method`, which sends methods the document does not list (PUT,
# TRACE, ...) and wants 405 with an `Allow` header: the router's 405 has no `Allow`, and
# libwebsockets answers methods it does not know (TRACE) with its own 403 before any route runs.
EXCLUDED_CHECKS = "unsupported_method"


def schemathesis_command():
    """`st` as installed by scripts/deps.sh (pip puts it next to the interpreter, or on PATH)."""
    beside = os.path.join(os.path.dirname(sys.executable), "st")
    return beside if os.path.exists(beside) else shutil.which("st")


async def seed_calls(stack, server, alice_token):
    """Alice calls Bob, Bob accepts, Alice hangs up, both send their final quality report; then
    Alice rings Carol, who never answers (the server's ring timeout outlasts the run). Returns
    the finished call's id."""
    alice = stack(await Session(server.host, server.port, alice_token, "alice").start())
    bob = stack(await Session(server.host, server.port, server.token("bob", "phone"), "bob").start())
    carol = stack(await Session(server.host, server.port, server.token("carol", "phone"), "carol").start())

    call_id = str(uuid.uuid4())
    reply = await alice.request({"type": "invite", "callId": call_id, "to": "bob", "video": False,
                                 "offer": {"sdp": FAKE_OFFER}})
    check(is_ack(reply), f"invite: {reply}")
    await bob.wait_for_message("invite", callId=call_id)
    reply = await bob.request({"type": "accept", "callId": call_id, "answer": {"sdp": FAKE_ANSWER}})
    check(is_ack(reply), f"accept: {reply}")
    reply = await alice.request({"type": "hangup", "callId": call_id})
    check(is_ack(reply), f"hangup: {reply}")
    for session, local in ((alice, "host"), (bob, "relay")):
        reply = await session.request({
            "type": "quality", "callId": call_id, "final": True, "rttMs": 24.5, "jitterMs": 3.2,
            "lossPercent": 0.4, "localCandidateType": local, "remoteCandidateType": "srflx", "durationMs": 1500,
            "milestones": {"ringing": 120, "accepted": 400, "iceConnected": 520, "dtlsConnected": 560,
                           "firstAudio": 610}})
        check(is_ack(reply), f"{session.name}'s quality report: {reply}")

    ringing = str(uuid.uuid4())
    reply = await alice.request({"type": "invite", "callId": ringing, "to": "carol", "video": True,
                                 "offer": {"sdp": FAKE_OFFER}})
    check(is_ack(reply), f"invite carol: {reply}")
    await carol.wait_for_message("invite", callId=ringing)
    return call_id


async def run_schemathesis(s, server, alice_token):
    """Runs schemathesis over the whole document but the WebSocket; returns (exit status, output)."""
    command = schemathesis_command()
    check(command is not None, "schemathesis is not installed (scripts/deps.sh installs it)")
    # One credential per security scheme of the document: the user's JWT for /v1/*, the admin
    # token for /admin*. The LiveKit webhook's signature cannot be made up front (it covers each
    # body), so every webhook schemathesis sends is refused: the document says 401.
    config = s.file("schemathesis.toml")
    with open(config, "w") as f:
        f.write(f'[auth.openapi.userToken]\nbearer = "{alice_token}"\n'
                f'[auth.openapi.adminBearer]\nbearer = "{ADMIN_TOKEN}"\n'
                f'[auth.openapi.backendBearer]\nbearer = "{BACKEND_TOKEN}"\n')
    args = [command, "--config-file", config, "--no-color", "run", DOCUMENT, "--url", server.url,
            "--checks", "all", "--exclude-checks", EXCLUDED_CHECKS,
            "--exclude-path", "/v1/ws",  # the WebSocket upgrade is not an HTTP operation
            "--max-examples", str(MAX_EXAMPLES), "--seed", SEED,
            # A decoded NUL in the path makes libwebsockets drop the connection unanswered.
            "--generation-allow-x00", "false",
            # One worker: parallel ones hit a CPython 3.11 bug in schemathesis ("SystemError: AST
            # constructor recursion depth mismatch").
            "--workers", "1",
            "--request-timeout", "10"]
    with open(s.file("schemathesis.log"), "wb") as log:
        proc = await asyncio.create_subprocess_exec(*args, stdout=log, stderr=asyncio.subprocess.STDOUT,
                                                    cwd=s.path)
        try:
            status = await asyncio.wait_for(proc.wait(), SCHEMATHESIS_SECONDS)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            status = None
    with open(s.file("schemathesis.log"), encoding="utf-8", errors="replace") as log:
        return status, log.read()


# The HTTP operations of docs/openapi.yaml (all but the WebSocket), as the server's metrics name them.
OPERATIONS = [("GET", "/healthz"), ("GET", "/v1/me"), ("GET", "/v1/ice-servers"), ("GET", "/v1/calls"),
              ("GET", "/v1/calls/{callId}"), ("GET", "/v1/group-calls"), ("GET", "/v1/devices"),
              ("POST", "/v1/devices"), ("DELETE", "/v1/devices/{installationId}"), ("POST", "/v1/livekit/webhook"),
              ("GET", "/v1/blocks"), ("PUT", "/v1/blocks/{userId}"), ("DELETE", "/v1/blocks/{userId}"),
              ("GET", "/v1/directory"), ("PUT", "/v1/directory/{userId}"),
              ("GET", "/"), ("GET", "/admin"), ("GET", "/admin/api/overview"), ("GET", "/metrics")]


async def answered(server):
    """`dialtone_http_requests_total` as {(method, route pattern, status): count}."""
    response = await http_get(None, f"{server.url}/metrics")
    check(response["status"] == 200, f"/metrics: {response['status']}")
    counts = {}
    for key, value in samples(response["body"]).items():
        if key.startswith("dialtone_http_requests_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', key))
            counts[(labels["method"], labels["route"], labels["status"])] = value
    return counts


@scenario
async def the_server_answers_as_docs_openapi_yaml_says(s, stack):
    """schemathesis over every HTTP operation of docs/openapi.yaml (all its checks but
    unsupported_method) finds nothing, and the server's own request counter shows every route
    was exercised, the call detail with a 200 too."""
    server = stack(await Server(s, ring_timeout=600, extra=[
        "--admin-token", ADMIN_TOKEN, "--directory-token", BACKEND_TOKEN, "--http-requests-per-second", "0",
        *LIVEKIT]).start())
    alice_token = server.token("alice", "dev1")
    call_id = await seed_calls(stack, server, alice_token)
    detail = await http_get(None, f"{server.url}/v1/calls/{call_id}", {"Authorization": f"Bearer {alice_token}"})
    check(detail["status"] == 200 and '"quality":[{' in detail["body"], f"the seeded call: {detail}")

    before = await answered(server)
    status, output = await run_schemathesis(s, server, alice_token)
    if status != 0:
        print(output[-12000:], flush=True)
    check(status is not None, f"schemathesis ran longer than {SCHEMATHESIS_SECONDS} s")
    check(status == 0, f"schemathesis found failures (exit {status}); its output is above and in schemathesis.log")

    after = await answered(server)
    during = {key: count - before.get(key, 0) for key, count in after.items() if count > before.get(key, 0)}
    routes = {(method, route) for method, route, _ in during}
    for method, route in OPERATIONS:
        check((method, route) in routes, f"schemathesis never reached {method} {route}: {sorted(routes)}")
    check(during.get(("GET", "/v1/calls/{callId}", "200"), 0) >= 1, "no GET /v1/calls/{callId} answered 200")
    check(during.get(("POST", "/v1/devices", "200"), 0) >= 1, "no device registration was accepted")
    check(during.get(("GET", "/admin/api/overview", "200"), 0) >= 1, "the admin overview never answered 200")
    check(not any(code.startswith("5") for _, _, code in during), f"5xx answers: {during}")


the_server_answers_as_docs_openapi_yaml_says.time_limit = 240
