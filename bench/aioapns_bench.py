"""The same push load as `dialtone bench-push`, through aioapns (PyPI), against the same APNs mock.

Usage: aioapns_bench.py PORT CA_FILE KEY_FILE KEY_ID TEAM_ID COUNT CONCURRENCY
Prints one JSON line: {"pushes_per_s", "p50_ms", "p99_ms", "ok", "failed", "cpu_us_per_push"}.
"""
import asyncio, json, ssl, sys, time, uuid

from aioapns import APNs, NotificationRequest, PushType
from aioapns import connection as aioapns_connection


async def main():
    port, ca_file, key_file, key_id, team_id = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
    count, concurrency = int(sys.argv[6]), int(sys.argv[7])
    # aioapns hard-codes Apple's hosts: point its protocol classes at the mock instead.
    for cls in (aioapns_connection.APNsProductionClientProtocol, aioapns_connection.APNsDevelopmentClientProtocol):
        cls.APNS_SERVER = "127.0.0.1"
        cls.APNS_PORT = port
    client = APNs(key=open(key_file).read(), key_id=key_id, team_id=team_id, topic="com.example.chat.voip",
                  use_sandbox=False, max_connections=1)
    context = ssl.create_default_context(cafile=ca_file)
    context.set_alpn_protocols(["h2"])
    client.pool.ssl_context = context

    payload = {"dialtone": 1, "type": "incoming-call", "callId": "", "callerId": "alice", "callerHandle": "alice",
               "callerName": "Alice", "hasVideo": False, "createdAt": 1732880000000}
    latencies, failed = [], 0
    gate = asyncio.Semaphore(concurrency)
    token = "ab" * 32

    async def one(i):
        nonlocal failed
        async with gate:
            request = NotificationRequest(device_token=token, message=dict(payload, callId=f"c{i}"),
                                          push_type=PushType.VOIP, priority=10, time_to_live=0,
                                          notification_id=str(uuid.uuid4()))
            start = time.perf_counter()
            result = await client.send_notification(request)
            latencies.append((time.perf_counter() - start) * 1000)
            if not result.is_successful:
                failed += 1

    await asyncio.gather(*(one(i) for i in range(min(200, count))))  # warm-up: connection, TLS, JWT
    latencies.clear(); failed = 0
    start = time.perf_counter()
    cpu_start = time.process_time()
    await asyncio.gather(*(one(i) for i in range(count)))
    cpu_used = time.process_time() - cpu_start
    elapsed = time.perf_counter() - start
    latencies.sort()
    print(json.dumps({"pushes_per_s": count / elapsed, "p50_ms": latencies[len(latencies) // 2],
                      "p99_ms": latencies[int(len(latencies) * 0.99)], "ok": count - failed, "failed": failed,
                      "cpu_us_per_push": cpu_used / count * 1e6}))


asyncio.run(main())
