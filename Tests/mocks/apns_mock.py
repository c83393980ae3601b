#!/usr/bin/env python3
"""APNs provider-API mock: HTTP/2 over TLS (ALPN "h2"), token (JWT) auth.

Usage:
  python3 apns_mock.py --port 0 --cert-out DIR --key-pub PUB.pem \
      --key-id KID --team-id TEAM [--log requests.jsonl] [--delay-ms N]
      [--max-streams N] [--goaway-after N] [--no-alpn] [--cert-host NAME]

Writes DIR/cert.pem (self-signed, CN/SAN localhost + 127.0.0.1; use it as the
client's CA file), listens on 127.0.0.1 and prints exactly one line
"LISTENING <port>" on stdout once ready. Runs until SIGTERM/SIGINT (exit 0).

Requests are validated like APNs does (method, path, provider JWT, apns-*
headers, payload size) and the answer can be scripted by the device token's
prefix -- see Tests/mocks/README.md. Every request is appended to --log as one
JSON line. Needs PyPI: h2, cryptography, pyjwt.
"""
import argparse
import asyncio
import datetime
import ipaddress
import json
import os
import signal

# A parent that runs libuv (dialtone, the Swift tests) may hand down a mask with these blocked.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
import ssl
import sys
import time
import uuid

import h2.config
import h2.errors
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

MAX_PAYLOAD = 5120          # bytes; APNs VoIP limit (also applied to alert)
MAX_BUFFERED_BODY = 1 << 20  # reset streams that send more than this
JWT_MAX_AGE = 3600          # seconds
JWT_FUTURE_SKEW = 300       # seconds an iat may lie in the future
HEX = set("0123456789abcdefABCDEF")


def log_err(*a):
    print("apns_mock:", *a, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- TLS

def make_cert(cert_dir, cert_host=None):
    """Self-signed EC P-256 cert for localhost/127.0.0.1 (or only for DNS name cert_host, to
    test a client's name check). Returns (cert, key) paths."""
    os.makedirs(cert_dir, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(cert_host)] if cert_host else [
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            ]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True,
            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path = os.path.join(cert_dir, "cert.pem")
    key_path = os.path.join(cert_dir, "key.pem")
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    tmp = cert_path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    os.replace(tmp, cert_path)  # atomic: a reader never sees a half-written file
    return cert_path, key_path


def make_ssl_context(cert_path, key_path, alpn=True):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_COMPRESSION
    ctx.load_cert_chain(cert_path, key_path)
    if alpn:  # --no-alpn: a TLS server that does not speak h2, which clients must refuse
        ctx.set_alpn_protocols(["h2"])
    return ctx


# ------------------------------------------------------------------------ state

class MockState:
    def __init__(self, args):
        with open(args.key_pub, "rb") as f:
            self.pub_key = serialization.load_pem_public_key(f.read())
        self.key_id = args.key_id
        self.team_id = args.team_id
        self.delay = max(0, args.delay_ms) / 1000.0
        self.max_streams = args.max_streams
        self.goaway_after = args.goaway_after
        self.log_file = open(args.log, "a", encoding="utf-8") if args.log else None
        self.next_conn_id = 0
        self.connections = set()
        self.counts = {}          # token -> number of requests that reached scripting
        self.expired_jwt = {}     # 403e token -> first JWT seen (treated as expired)
        self.sig_cache = {}       # raw JWT -> verified claims
        self.stats = {"requests": 0, "connections": 0, "by_status": {}, "pings": 0}

    def log(self, rec):
        self.stats["requests"] += 1
        key = str(rec.get("status"))
        self.stats["by_status"][key] = self.stats["by_status"].get(key, 0) + 1
        if self.log_file:
            self.log_file.write(json.dumps(rec, separators=(",", ":")) + "\n")
            self.log_file.flush()

    # -------------------------------------------------------------- validation

    def check_jwt(self, auth):
        """Returns (jwt_info, error_reason or None)."""
        info = {"valid": False, "kid": None, "iss": None, "iat": None, "raw": None}
        if auth is None:
            return info, "MissingProviderToken"
        parts = auth.split(None, 1)
        if len(parts) != 2 or parts[0].lower() != "bearer":
            info["error"] = "authorization is not 'bearer <jwt>'"
            return info, "InvalidProviderToken"
        raw = parts[1].strip()
        info["raw"] = raw
        try:
            hdr = jwt.get_unverified_header(raw)
            info["kid"] = hdr.get("kid")
            unverified = jwt.decode(raw, options={"verify_signature": False})
            info["iss"] = unverified.get("iss")
            info["iat"] = unverified.get("iat")
        except Exception as e:  # noqa: BLE001 - anything malformed is "invalid"
            info["error"] = "malformed: %s" % e
            return info, "InvalidProviderToken"
        if hdr.get("alg") != "ES256":
            info["error"] = "alg is %r, want ES256" % hdr.get("alg")
            return info, "InvalidProviderToken"
        if info["kid"] != self.key_id:
            info["error"] = "kid %r != %r" % (info["kid"], self.key_id)
            return info, "InvalidProviderToken"
        claims = self.sig_cache.get(raw)
        if claims is None:
            try:
                claims = jwt.decode(raw, self.pub_key, algorithms=["ES256"],
                                    options={"verify_exp": False, "verify_iat": False,
                                             "verify_nbf": False, "verify_aud": False})
            except Exception as e:  # noqa: BLE001
                info["error"] = "signature: %s" % e
                return info, "InvalidProviderToken"
            if len(self.sig_cache) > 10000:
                self.sig_cache.clear()
            self.sig_cache[raw] = claims  # signature verified once per distinct JWT
        if claims.get("iss") != self.team_id:
            info["error"] = "iss %r != %r" % (claims.get("iss"), self.team_id)
            return info, "InvalidProviderToken"
        iat = claims.get("iat")
        if not isinstance(iat, (int, float)) or isinstance(iat, bool):
            info["error"] = "iat missing or not a number"
            return info, "InvalidProviderToken"
        now = time.time()
        if iat > now + JWT_FUTURE_SKEW:
            info["error"] = "iat is in the future"
            return info, "InvalidProviderToken"
        if now - iat > JWT_MAX_AGE:
            info["error"] = "iat older than %d s" % JWT_MAX_AGE
            return info, "ExpiredProviderToken"
        info["valid"] = True
        return info, None

    @staticmethod
    def check_headers(h):
        """Returns an error reason (400) or None."""
        ptype = h.get("apns-push-type")
        if ptype not in ("voip", "alert"):
            return "InvalidPushType"
        topic = h.get("apns-topic")
        if not topic:
            return "MissingTopic"
        if ptype == "voip" and not topic.endswith(".voip"):
            return "BadTopic"
        if ptype == "alert" and topic.endswith(".voip"):
            return "BadTopic"
        prio = h.get("apns-priority")
        if ptype == "voip":
            if prio != "10":
                return "BadPriority"
            # Apple accepts any UNIX time here (0 = deliver now or never). The Swift tests check
            # that Dialtone sends exactly "0" from the log; other clients (aioapns) send now+ttl.
            exp = h.get("apns-expiration")
            if exp is None or not exp.isdigit():
                return "BadExpirationDate"
        else:
            if prio is not None and prio not in ("1", "5", "10"):
                return "BadPriority"
            exp = h.get("apns-expiration")
            if exp is not None and not exp.isdigit():
                return "BadExpirationDate"
        apns_id = h.get("apns-id")
        if apns_id is not None:
            try:
                uuid.UUID(apns_id)
            except ValueError:
                return "BadMessageId"
        cid = h.get("apns-collapse-id")
        if cid is not None and len(cid.encode()) > 64:
            return "BadCollapseId"
        return None

    def scripted(self, token, jwt_raw):
        """Scripted answer by token prefix: (status, body dict or None)."""
        t = token.lower()
        n = self.counts.get(t, 0) + 1
        self.counts[t] = n
        if t.startswith("4000"):
            return 400, {"reason": "BadDeviceToken"}
        if t.startswith("4001"):
            return 400, {"reason": "DeviceTokenNotForTopic"}
        if t.startswith("403e"):
            first = self.expired_jwt.setdefault(t, jwt_raw)
            if jwt_raw == first:
                return 403, {"reason": "ExpiredProviderToken"}
            return 200, None
        if t.startswith("410"):
            return 410, {"reason": "Unregistered", "timestamp": int(time.time() * 1000)}
        if t.startswith("429"):
            return 429, {"reason": "TooManyRequests"}
        if t.startswith("500"):
            return 500, {"reason": "InternalServerError"}
        if t.startswith("5031"):
            if n <= 2:
                return 503, {"reason": "ServiceUnavailable"}
            return 200, None
        return 200, None

    def handle(self, conn_id, headers, dup, body):
        """Full request -> (status, response headers list, body bytes, log record)."""
        method = headers.get(":method")
        path = headers.get(":path") or ""
        rec = {"token": None, "method": method, "path": path, "headers": headers,
               "payload": None, "jwt": None, "status": None, "reason": None,
               "connection": conn_id, "time": time.time()}
        apns_id = headers.get("apns-id")
        try:
            uuid.UUID(apns_id or "")
        except ValueError:
            apns_id = None
        apns_id = apns_id or str(uuid.uuid4()).upper()

        def finish(status, payload):
            rec["status"] = status
            rec["reason"] = payload.get("reason") if payload else None
            rec["apns_id"] = apns_id
            data = json.dumps(payload, separators=(",", ":")).encode() if payload else b""
            hdrs = [(":status", str(status)), ("apns-id", apns_id)]
            if data:
                hdrs.append(("content-type", "application/json"))
            hdrs.append(("content-length", str(len(data))))
            return status, hdrs, data, rec

        # mock-only introspection endpoint
        if method == "GET" and path == "/_mock/stats":
            s = dict(self.stats, connections_open=len(self.connections))
            data = json.dumps(s).encode()
            return 200, [(":status", "200"), ("content-type", "application/json"),
                         ("content-length", str(len(data)))], data, None

        # payload parse (for the log) happens early so every record has it
        if body:
            try:
                rec["payload"] = json.loads(body.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                rec["payload"] = None
                rec["payload_raw"] = body[:MAX_PAYLOAD * 2].decode("utf-8", "replace")
        rec["payload_bytes"] = len(body)

        prefix = "/3/device/"
        if path.startswith(prefix):
            rec["token"] = path[len(prefix):].split("?", 1)[0]
        if method != "POST":
            return finish(405, {"reason": "MethodNotAllowed"})
        if not path.startswith(prefix):
            return finish(404, {"reason": "BadPath"})
        token = rec["token"]
        if not token:
            return finish(400, {"reason": "MissingDeviceToken"})
        if not set(token) <= HEX:
            return finish(400, {"reason": "BadDeviceToken"})
        info, err = self.check_jwt(headers.get("authorization"))
        rec["jwt"] = info
        if err:
            return finish(403, {"reason": err})
        if dup:
            return finish(400, {"reason": "DuplicateHeaders"})
        err = self.check_headers(headers)
        if err:
            return finish(400, {"reason": err})
        if len(body) > MAX_PAYLOAD:
            return finish(413, {"reason": "PayloadTooLarge"})
        if not body:
            return finish(400, {"reason": "PayloadEmpty"})
        if not isinstance(rec["payload"], dict):
            return finish(400, {"reason": "BadPayload"})  # mock-specific reason
        status, payload = self.scripted(token, info["raw"])
        return finish(status, payload)


# --------------------------------------------------------------------- protocol

class H2Protocol(asyncio.Protocol):
    def __init__(self, state):
        self.state = state
        self.transport = None
        self.conn = None
        self.conn_id = None
        self.streams = {}   # stream_id -> {"headers", "dup", "body"}
        self.pending = {}   # stream_id -> [bytes remaining, end_stream]
        self.closed = False
        self.frozen = False  # a "fade" token: nothing more is read or answered, the socket stays
        self.first_data = True
        self.answered = 0   # requests answered on this connection (--goaway-after)
        self.last_answered = 0  # and the highest stream id among them

    def connection_made(self, transport):
        self.transport = transport
        self.state.next_conn_id += 1
        self.conn_id = self.state.next_conn_id
        self.state.stats["connections"] += 1
        self.state.connections.add(self)
        cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=cfg)
        self.conn.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.state.max_streams,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 65536,
        })
        self.conn.initiate_connection()
        ssl_obj = transport.get_extra_info("ssl_object")
        self.alpn_h2 = bool(ssl_obj) and ssl_obj.selected_alpn_protocol() == "h2"
        if self.alpn_h2:
            self.flush()  # else: hold our preface until the client proves it speaks h2

    def connection_lost(self, exc):
        self.closed = True
        self.state.connections.discard(self)

    def flush(self):
        if not self.closed:
            data = self.conn.data_to_send()
            if data:
                self.transport.write(data)

    def data_received(self, data):
        if self.closed or self.frozen:
            return  # after --goaway-after's GOAWAY, a "dead" or a "fade" token: nothing more is processed
        if self.first_data:
            self.first_data = False
            if not data.startswith(b"PRI * HTTP/2.0"[:len(data)]):
                # not HTTP/2 (e.g. an HTTP/1.1 client without ALPN h2)
                msg = b"HTTP/2 required (ALPN h2)\n"
                self.transport.write(b"HTTP/1.1 505 HTTP Version Not Supported\r\n"
                                     b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                                     % (len(msg), msg))
                self.transport.close()
                self.closed = True
                return
            if not self.alpn_h2:
                log_err("conn %d: client did not negotiate ALPN h2 but sent the "
                        "HTTP/2 preface; accepting" % self.conn_id)
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            log_err("conn %d protocol error: %s" % (self.conn_id, e))
            self.flush()
            self.transport.close()
            return
        for ev in events:
            if self.closed or self.frozen:
                return  # (a PING in the same read as a "fade" request goes unanswered too)
            if isinstance(ev, h2.events.RequestReceived):
                hdrs, dup = {}, False
                for k, v in ev.headers:
                    k = k.lower()
                    if k in hdrs and not k.startswith(":"):
                        dup = True
                        hdrs[k] = hdrs[k] + ", " + v
                    else:
                        hdrs[k] = v
                self.streams[ev.stream_id] = {"headers": hdrs, "dup": dup, "body": bytearray()}
                if ev.stream_ended:
                    self.request_done(ev.stream_id)
            elif isinstance(ev, h2.events.DataReceived):
                s = self.streams.get(ev.stream_id)
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if s is not None:
                    s["body"] += ev.data
                    if len(s["body"]) > MAX_BUFFERED_BODY:
                        self.streams.pop(ev.stream_id, None)
                        self.safe(self.conn.reset_stream, ev.stream_id,
                                  h2.errors.ErrorCodes.REFUSED_STREAM)
                if ev.stream_ended:
                    self.request_done(ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                self.request_done(ev.stream_id)
            elif isinstance(ev, h2.events.StreamReset):
                self.streams.pop(ev.stream_id, None)
                self.pending.pop(ev.stream_id, None)
            elif isinstance(ev, h2.events.PingReceived):
                self.state.stats["pings"] += 1  # h2 queues the ACK itself
            elif isinstance(ev, h2.events.WindowUpdated):
                self.send_pending()
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.flush()
                self.transport.close()
                return
        self.flush()

    def safe(self, fn, *a):
        try:
            fn(*a)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
            pass

    def request_done(self, stream_id):
        s = self.streams.pop(stream_id, None)
        if s is None or self.closed:
            return
        if s["headers"].get(":path", "").lower().startswith("/3/device/dead"):
            # Token prefix "dead": the connection drops with every request on it unanswered.
            self.closed = True
            self.state.connections.discard(self)
            self.transport.abort()
            return
        if s["headers"].get(":path", "").lower().startswith("/3/device/fade"):
            # Token prefix "fade": a peer gone silent (a dead NAT mapping, a hung server): the
            # connection stays open but nothing on it is read or answered any more, PINGs included.
            self.frozen = True
            return
        try:
            status, hdrs, body, rec = self.state.handle(
                self.conn_id, s["headers"], s["dup"], bytes(s["body"]))
        except Exception as e:  # noqa: BLE001 - never kill the connection on a mock bug
            log_err("handler error: %r" % e)
            status, hdrs, body, rec = 500, [(":status", "500"), ("content-length", "0")], b"", None
        if rec is not None:
            self.state.log(rec)
        if self.state.delay:
            asyncio.get_running_loop().call_later(
                self.state.delay, self.respond, stream_id, hdrs, body)
        else:
            self.respond(stream_id, hdrs, body)
        self.answered += 1
        self.last_answered = max(self.last_answered, stream_id)
        if self.state.goaway_after and self.answered == self.state.goaway_after:
            self.go_away()

    def go_away(self):
        """--goaway-after: GOAWAY naming the last stream whose request was answered (every one
        below it was too); the streams above it are left unprocessed, for the client to send
        again on a new connection. Then the connection closes."""
        # Not h2's highest_inbound_stream_id: it counts frames parsed but not yet handled here.
        last = self.last_answered
        if self.streams:
            last = min(last, min(self.streams) - 2)
        self.safe(self.conn.close_connection, 0, None, max(0, last))
        self.flush()
        self.closed = True
        self.state.connections.discard(self)
        self.transport.close()

    def respond(self, stream_id, hdrs, body):
        if self.closed:
            return
        try:
            self.conn.send_headers(stream_id, hdrs, end_stream=not body)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
            return
        if body:
            self.pending[stream_id] = [body, True]
            self.send_pending()
        self.flush()

    def send_pending(self):
        for sid in list(self.pending):
            data, end = self.pending[sid]
            try:
                window = self.conn.local_flow_control_window(sid)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
                del self.pending[sid]
                continue
            n = min(window, len(data), self.conn.max_outbound_frame_size)
            while n > 0:
                chunk, data = data[:n], data[n:]
                self.safe(self.conn.send_data, sid, chunk, end and not data)
                window -= n
                n = min(window, len(data), self.conn.max_outbound_frame_size)
            if data:
                self.pending[sid][0] = data
            else:
                del self.pending[sid]
        self.flush()

    def shutdown(self):
        if self.closed:
            return
        try:
            self.conn.close_connection()
            self.flush()
        except Exception:  # noqa: BLE001
            pass
        self.transport.close()


# ------------------------------------------------------------------------- main

async def amain(args):
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    cert_path, key_path = make_cert(args.cert_out, args.cert_host)
    state = MockState(args)
    ctx = make_ssl_context(cert_path, key_path, alpn=not args.no_alpn)
    server = await loop.create_server(lambda: H2Protocol(state), "127.0.0.1", args.port,
                                      ssl=ctx, backlog=1024, reuse_address=True)
    port = server.sockets[0].getsockname()[1]
    print("LISTENING %d" % port, flush=True)
    await stop.wait()
    server.close()
    for p in list(state.connections):
        p.shutdown()
    await asyncio.sleep(0.05)  # let GOAWAY frames go out
    if state.log_file:
        state.log_file.close()


def main():
    ap = argparse.ArgumentParser(description="APNs HTTP/2 provider API mock")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--cert-out", required=True, help="directory; cert.pem (+key.pem) written here")
    ap.add_argument("--key-pub", required=True, help="PEM public key (P-256) verifying the provider JWT")
    ap.add_argument("--key-id", required=True, help="expected JWT header kid")
    ap.add_argument("--team-id", required=True, help="expected JWT claim iss")
    ap.add_argument("--log", help="append one JSON line per request here")
    ap.add_argument("--delay-ms", type=int, default=0, help="delay every response (default 0)")
    ap.add_argument("--max-streams", type=int, default=1000,
                    help="SETTINGS_MAX_CONCURRENT_STREAMS (default 1000); h2 resets a connection exceeding it")
    ap.add_argument("--goaway-after", type=int, default=0,
                    help="send GOAWAY and close each connection after answering N requests (default: never)")
    ap.add_argument("--no-alpn", action="store_true", help="do not offer ALPN h2 (a server clients must refuse)")
    ap.add_argument("--cert-host", help="issue the certificate for this DNS name only (not localhost/127.0.0.1)")
    args = ap.parse_args()
    try:
        asyncio.run(amain(args))
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
