#!/usr/bin/env python3
"""FCM HTTP v1 + Google OAuth2 (JWT-bearer) token endpoint mock, plain HTTP/1.1.

Usage:
  python3 fcm_mock.py --port 0 --service-account-out DIR --project PROJ \
      [--log requests.jsonl] [--token-expires-in 3600] [--delay-ms N]

Generates an RSA-2048 key and writes DIR/service-account.json (Google format,
token_uri = http://127.0.0.1:<port>/token), prints exactly one line
"LISTENING <port>" on stdout once ready, runs until SIGTERM/SIGINT (exit 0).

  POST /token                              OAuth2 jwt-bearer grant -> access token
  POST /v1/projects/PROJ/messages:send     FCM v1 send (Bearer access token)
  GET  /_mock/stats                        counters (mock-only)

Answers can be scripted by the registration token's prefix -- see
Tests/mocks/README.md. Every request is appended to --log as one JSON line.
Needs PyPI: cryptography, pyjwt.
"""
import argparse
import http.server
import json
import os
import secrets
import signal

# A parent that runs libuv (dialtone, the Swift tests) may hand down a mask with these blocked.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
import sys
import threading
import time
import urllib.parse

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
MAX_BODY = 1 << 20
MAX_DATA_BYTES = 4096          # FCM data payload limit (keys + values)
RESERVED_DATA_KEYS = {"from", "notification", "message_type"}
RESERVED_DATA_PREFIXES = ("google.", "gcm.")
MESSAGE_FIELDS = {"name", "data", "notification", "android", "webpush", "apns",
                  "fcm_options", "token", "topic", "condition"}
ANDROID_FIELDS = {"collapse_key", "priority", "ttl", "restricted_package_name", "data",
                  "notification", "fcm_options", "direct_boot_ok"}


def log_err(*a):
    print("fcm_mock:", *a, file=sys.stderr, flush=True)


class State:
    def __init__(self, args):
        self.project = args.project
        self.expires_in = args.token_expires_in
        self.delay = max(0, args.delay_ms) / 1000.0
        self.lock = threading.Lock()
        self.log_file = open(args.log, "a", encoding="utf-8") if args.log else None
        self.access_tokens = {}   # token -> expiry (epoch seconds)
        self.counts = {}          # registration token -> requests reaching scripting
        self.next_conn = 0
        self.stats = {"token_requests": 0, "tokens_issued": 0, "send_requests": 0,
                      "connections": 0, "by_status": {}}
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.pub = self.key.public_key()
        self.key_id = secrets.token_hex(20)
        self.client_email = "dialtone@%s.iam.gserviceaccount.com" % self.project
        self.token_uri = None  # set once the port is known
        self.send_path = "/v1/projects/%s/messages:send" % self.project

    def write_service_account(self, out_dir):
        os.makedirs(out_dir, exist_ok=True)
        pem = self.key.private_bytes(serialization.Encoding.PEM,
                                     serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()).decode()
        sa = {
            "type": "service_account",
            "project_id": self.project,
            "private_key_id": self.key_id,
            "private_key": pem,
            "client_email": self.client_email,
            "client_id": str(secrets.randbelow(10 ** 20)),
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": self.token_uri,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/"
                                    + urllib.parse.quote(self.client_email),
            "universe_domain": "googleapis.com",
        }
        path = os.path.join(out_dir, "service-account.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(sa, f, indent=2)
        os.replace(tmp, path)

    def log(self, rec):
        with self.lock:
            key = str(rec.get("status"))
            self.stats["by_status"][key] = self.stats["by_status"].get(key, 0) + 1
            if self.log_file:
                self.log_file.write(json.dumps(rec, separators=(",", ":")) + "\n")
                self.log_file.flush()

    # ------------------------------------------------------------------ /token

    def token(self, body, rec):
        with self.lock:
            self.stats["token_requests"] += 1
        info = {"valid": False, "kid": None, "iss": None, "aud": None, "scope": None,
                "iat": None, "exp": None, "raw": None}
        rec["jwt"] = info
        try:
            form = urllib.parse.parse_qs(body.decode("utf-8"), keep_blank_values=True)
        except UnicodeDecodeError:
            form = {}
        rec["form"] = {k: v[0] if len(v) == 1 else v for k, v in form.items()}

        def bad(desc):
            info["error"] = desc
            return 400, {"error": "invalid_grant", "error_description": desc}

        if form.get("grant_type") != [GRANT]:
            return bad("grant_type must be %s" % GRANT)
        raw = (form.get("assertion") or [""])[0]
        if not raw:
            return bad("missing assertion")
        info["raw"] = raw
        try:
            hdr = jwt.get_unverified_header(raw)
            c = jwt.decode(raw, options={"verify_signature": False})
            info.update(kid=hdr.get("kid"), iss=c.get("iss"), aud=c.get("aud"),
                        scope=c.get("scope"), iat=c.get("iat"), exp=c.get("exp"))
        except Exception as e:  # noqa: BLE001
            return bad("malformed assertion: %s" % e)
        if hdr.get("alg") != "RS256":
            return bad("alg must be RS256")
        if hdr.get("kid") is not None and hdr.get("kid") != self.key_id:
            return bad("kid does not match private_key_id")
        try:
            jwt.decode(raw, self.pub, algorithms=["RS256"],
                       options={"verify_exp": False, "verify_iat": False,
                                "verify_nbf": False, "verify_aud": False})
        except Exception as e:  # noqa: BLE001
            return bad("invalid signature: %s" % e)
        c = jwt.decode(raw, options={"verify_signature": False})
        if c.get("iss") != self.client_email:
            return bad("iss must be %s" % self.client_email)
        if c.get("aud") != self.token_uri:
            return bad("aud must be %s" % self.token_uri)
        scopes = str(c.get("scope") or "").split()
        if SCOPE not in scopes:
            return bad("scope must contain %s" % SCOPE)
        iat, exp = c.get("iat"), c.get("exp")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (iat, exp)):
            return bad("iat and exp must be numbers")
        now = time.time()
        if exp - iat > 3600 or exp <= iat:
            return bad("exp - iat must be in (0, 3600]")
        if exp < now - 60:
            return bad("assertion expired")
        if iat > now + 300:
            return bad("iat in the future")
        info["valid"] = True
        tok = "ya29.mock-" + secrets.token_urlsafe(32)
        with self.lock:
            self.access_tokens[tok] = now + self.expires_in
            self.stats["tokens_issued"] += 1
        rec["access_token"] = tok
        return 200, {"access_token": tok, "expires_in": self.expires_in, "token_type": "Bearer"}

    # ------------------------------------------------------------------- send

    @staticmethod
    def gerr(code, status, message, error_code=None):
        e = {"code": code, "message": message, "status": status}
        if error_code:
            e["details"] = [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                             "errorCode": error_code}]
        return code, {"error": e}

    def send(self, headers, body, rec):
        with self.lock:
            self.stats["send_requests"] += 1
        auth = headers.get("authorization") or ""
        parts = auth.split(None, 1)
        tok = parts[1].strip() if len(parts) == 2 and parts[0].lower() == "bearer" else None
        rec["access_token"] = tok
        with self.lock:
            expiry = self.access_tokens.get(tok) if tok else None
        if expiry is None or expiry < time.time():
            return self.gerr(401, "UNAUTHENTICATED",
                             "Request had invalid authentication credentials.")
        try:
            doc = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return self.gerr(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        rec["payload"] = doc

        def inval(msg):
            return self.gerr(400, "INVALID_ARGUMENT", msg, "INVALID_ARGUMENT")

        if not isinstance(doc, dict) or not isinstance(doc.get("message"), dict):
            return inval("body must be {\"message\": {...}}")
        unknown = set(doc) - {"message", "validate_only"}
        if unknown:
            return inval("Invalid JSON payload received. Unknown name %r" % sorted(unknown)[0])
        m = doc["message"]
        unknown = set(m) - MESSAGE_FIELDS
        if unknown:
            return inval("Invalid JSON payload received. Unknown name %r at 'message'"
                         % sorted(unknown)[0])
        token = m.get("token")
        if not isinstance(token, str) or not token:
            return inval("message.token must be a non-empty string")
        rec["token"] = token
        data = m.get("data")
        if not isinstance(data, dict):
            return inval("message.data must be an object of string values")
        size = 0
        for k, v in data.items():
            if not isinstance(v, str):
                return inval("message.data[%r]: value must be a string" % k)
            if k in RESERVED_DATA_KEYS or k.startswith(RESERVED_DATA_PREFIXES):
                return inval("Invalid data payload key: %s" % k)
            size += len(k.encode()) + len(v.encode())
        if size > MAX_DATA_BYTES:
            return inval("Android message is too big")
        a = m.get("android")
        if not isinstance(a, dict):
            return inval("message.android must be an object")
        unknown = set(a) - ANDROID_FIELDS
        if unknown:
            return inval("Invalid JSON payload received. Unknown name %r at 'message.android'"
                         % sorted(unknown)[0])
        if a.get("priority") != "HIGH":
            return inval("message.android.priority must be \"HIGH\"")
        if a.get("ttl") != "0s":
            return inval("message.android.ttl must be \"0s\"")
        if "notification" in m or "notification" in a:
            return inval("call pushes must be data-only (no notification)")  # mock-specific

        with self.lock:
            n = self.counts.get(token, 0) + 1
            self.counts[token] = n
        if token.startswith("unreg"):
            return self.gerr(404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED")
        if token.startswith("quota"):
            return self.gerr(429, "RESOURCE_EXHAUSTED",
                             "Quota exceeded for this device.", "QUOTA_EXCEEDED")
        if token.startswith("flaky") and n <= 2:
            return self.gerr(503, "UNAVAILABLE", "The service is currently unavailable.",
                             "UNAVAILABLE")
        return 200, {"name": "projects/%s/messages/0:%d%%%s" % (
            self.project, int(time.time() * 1e6), secrets.token_hex(8))}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fcm-mock/1"
    state = None  # set in main

    def setup(self):
        super().setup()
        with self.state.lock:
            self.state.next_conn += 1
            self.conn_id = self.state.next_conn
            self.state.stats["connections"] += 1

    def log_message(self, fmt, *args):  # keep stderr quiet
        pass

    def reply(self, status, obj):
        data = json.dumps(obj).encode()
        if self.state.delay:
            time.sleep(self.state.delay)
        self.send_response(status)
        self.send_header("content-type", "application/json; charset=UTF-8")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        n = int(self.headers.get("content-length") or 0)
        if n > MAX_BODY:
            self.close_connection = True
            return None
        return self.rfile.read(n) if n > 0 else b""

    def handle_any(self):
        st = self.state
        path = urllib.parse.urlsplit(self.path).path
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            self.close_connection = True
            return self.reply(411, {"error": "chunked bodies not supported by the mock"})
        body = self.read_body()
        if body is None:
            return self.reply(413, {"error": "body too large"})
        headers = {k.lower(): v for k, v in self.headers.items()}
        rec = {"kind": None, "token": None, "method": self.command, "path": self.path,
               "headers": headers, "payload": None, "jwt": None, "status": None,
               "reason": None, "connection": self.conn_id, "time": time.time()}
        if self.command == "GET" and path == "/_mock/stats":
            with st.lock:
                s = json.loads(json.dumps(st.stats))
            return self.reply(200, s)
        if path == "/token":
            rec["kind"] = "token"
            if self.command != "POST":
                status, resp = 405, {"error": "method_not_allowed"}
            else:
                status, resp = st.token(body, rec)
            rec["reason"] = resp.get("error") if status != 200 else None
        elif path == st.send_path or path.endswith("/messages:send"):
            rec["kind"] = "send"
            if path != st.send_path:
                status, resp = st.gerr(404, "NOT_FOUND", "unknown project in path")
            elif self.command != "POST":
                status, resp = st.gerr(405, "METHOD_NOT_ALLOWED", "use POST")
            else:
                status, resp = st.send(headers, body, rec)
            if status != 200:
                e = resp["error"]
                codes = [d.get("errorCode") for d in e.get("details", [])]
                rec["reason"] = codes[0] if codes else e["status"]
        else:
            rec["kind"] = "other"
            status, resp = 404, {"error": {"code": 404, "status": "NOT_FOUND",
                                           "message": "no such endpoint"}}
            rec["reason"] = "NOT_FOUND"
        rec["status"] = status
        rec["response"] = resp
        st.log(rec)
        self.reply(status, resp)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = handle_any


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def main():
    ap = argparse.ArgumentParser(description="FCM HTTP v1 + OAuth2 token endpoint mock")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--service-account-out", required=True,
                    help="directory; service-account.json written here")
    ap.add_argument("--project", required=True)
    ap.add_argument("--log", help="append one JSON line per request here")
    ap.add_argument("--token-expires-in", type=int, default=3600,
                    help="lifetime (s) of issued access tokens (default 3600)")
    ap.add_argument("--delay-ms", type=int, default=0, help="delay every response (default 0)")
    args = ap.parse_args()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    state = State(args)
    Handler.state = state
    srv = Server(("127.0.0.1", args.port), Handler)
    port = srv.server_address[1]
    state.token_uri = "http://127.0.0.1:%d/token" % port
    state.write_service_account(args.service_account_out)

    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    t.start()
    print("LISTENING %d" % port, flush=True)
    while not stop.wait(0.5):
        pass
    srv.shutdown()
    srv.server_close()
    with state.lock:
        if state.log_file:
            state.log_file.close()
            state.log_file = None
    sys.exit(0)


if __name__ == "__main__":
    main()
