#!/usr/bin/env python3
"""Cross-checks Dialtone's LiveKit tokens and webhook verifier against LiveKit's own
Python SDK (PyPI `livekit-api`), the reference implementation.

Driven by Tests/DialtoneServerTests/LiveKitCrossCheckTests.swift. Exit status: 0 success,
1 check failed, 2 usage error or missing dependency (run scripts/deps.sh).

  check                          is livekit-api importable? print its version
  verify-token --key K --secret S --token T
                                 verify T with livekit.api.TokenVerifier and print what it
                                 read back (identity, name, metadata, video grant, nbf, exp)
  sign-webhook --key K --secret S --event JSON [--ttl SECONDS] [--compact]
                                 build a WebhookEvent from JSON (snake_case fields, as
                                 ParseDict reads them; a JSON array signs each of its
                                 events and prints a list), serialize it with MessageToJson as
                                 LiveKit does, sign it as LiveKit's server signs webhooks and
                                 print {"body": ..., "token": ...}. Unless the token is already
                                 expired, livekit.api.WebhookReceiver must accept the pair first,
                                 so the signing is proven to be what the reference expects.
"""
import argparse
import base64
import dataclasses
import datetime
import hashlib
import json
import sys

try:
    import jwt
    from google.protobuf.json_format import MessageToJson, ParseDict
    from livekit import api
    from livekit.api.version import __version__ as livekit_api_version
except ImportError as error:  # the Swift test shows this text, so say how to fix it
    print(f"livekit_crosscheck: missing Python module ({error}); run scripts/deps.sh "
          "(pip install livekit-api)", file=sys.stderr)
    sys.exit(2)

# LiveKit's server signs each webhook with a token valid for five minutes
# (livekit/protocol webhook/url_notifier.go: SetValidFor(5 * time.Minute)).
WEBHOOK_TOKEN_TTL = 300


def verify_token(args):
    verifier = api.TokenVerifier(args.key, args.secret)
    try:
        claims = verifier.verify(args.token)
    except Exception as error:  # any rejection is a failed check, with the reason
        print(f"TokenVerifier rejected the token: {error!r}", file=sys.stderr)
        return 1
    # TokenVerifier does not expose the registered times; they are read from the payload it
    # has just verified.
    raw = jwt.decode(args.token, options={"verify_signature": False})
    video = {key: value for key, value in dataclasses.asdict(claims.video).items() if value is not None}
    print(json.dumps({
        "identity": claims.identity,
        "name": claims.name,
        "metadata": claims.metadata,
        "video": video,
        "iss": raw.get("iss"),
        "nbf": raw.get("nbf"),
        "exp": raw.get("exp"),
        "claimNames": sorted(raw.keys()),
        "videoNames": sorted(raw.get("video", {}).keys()),
    }, sort_keys=True))
    return 0


def sign_one(args, spec):
    event = ParseDict(spec, api.WebhookEvent())
    body = MessageToJson(event, indent=None if args.compact else 2)
    digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
    token = (api.AccessToken(args.key, args.secret)
             .with_sha256(digest)
             .with_ttl(datetime.timedelta(seconds=args.ttl))
             .to_jwt())
    if args.ttl > 0:
        # Raises if LiveKit's own receiver would refuse what we signed.
        api.WebhookReceiver(api.TokenVerifier(args.key, args.secret)).receive(body, token)
    return {"body": body, "token": token}


def sign_webhook(args):
    spec = json.loads(args.event)
    try:
        # A list signs several events in one run (importing livekit takes most of a second).
        signed = [sign_one(args, item) for item in spec] if isinstance(spec, list) else sign_one(args, spec)
    except Exception as error:
        print(f"signing or livekit's own WebhookReceiver failed: {error!r}", file=sys.stderr)
        return 1
    print(json.dumps(signed))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check")
    verify = commands.add_parser("verify-token")
    verify.add_argument("--key", required=True)
    verify.add_argument("--secret", required=True)
    verify.add_argument("--token", required=True)
    sign = commands.add_parser("sign-webhook")
    sign.add_argument("--key", required=True)
    sign.add_argument("--secret", required=True)
    sign.add_argument("--event", required=True)
    sign.add_argument("--ttl", type=int, default=WEBHOOK_TOKEN_TTL)
    sign.add_argument("--compact", action="store_true")
    args = parser.parse_args()

    if args.command == "check":
        print(f"livekit-api {livekit_api_version}")
        return 0
    if args.command == "verify-token":
        return verify_token(args)
    return sign_webhook(args)


if __name__ == "__main__":
    sys.exit(main())
