"""Durability (issue 16): a server restart, clean (SIGTERM) or not (kill -9), on the same data
directory and port, ends no call and loses no acknowledged transition of one.

The CLI scenarios run the server and both softphones in one MediaNamespace, as the other audio
scenarios do; the raw-protocol ones (Tests/e2e/protocol_driver.py: no media, fake SDP) run the
server on this host's loopback. Registered in run_e2e.py's SCENARIOS after its own.
"""
import asyncio
import collections
import json
import random
import time
import uuid

from harness import (MediaNamespace, Server, Softphone, check, dominant_frequency, dominant_frequency_between,
                     eventually, wav_seconds)
from scenarios import scenario, time_limit
from protocol_driver import FAKE_OFFER, CallDriver, Session, is_ack





def near(frequency, expected, what):
    check(abs(frequency - expected) <= 5, f"{what}: heard {frequency} Hz, expected {expected} ± 5 Hz")


def ms(t):
    return int(t * 1000)


def ended_summary(peer):
    ended = peer.find("ended")
    return {k: ended.get(k) for k in ("reason", "status")} if ended else "no ended event"


async def only_call(server, user):
    """The one record of `user`'s history."""
    records = await server.calls(server.token(user))
    check(len(records) == 1, f"{user}'s history holds {len(records)} records, expected 1: {records}")
    return records[0]


async def softphone(s, stack, server, ns, name, *args):
    return stack(await Softphone(s, name, [*args, "--server", server.url, "--token", server.token(name)],
                                 netns=ns.NS).start())


async def both_reconnected(peers, timeout=30):
    """Each softphone signed in a second time (its client reconnects by itself, with backoff)."""
    for peer in peers:
        await peer.wait_for("note", timeout=timeout, times=2, text=f"signed in as {peer.name}/cli")


@scenario
async def a_killed_server_keeps_a_call_up(s, stack):
    """kill -9 mid-call, restart on the same data directory and port: the two CLIs' call stays
    up (tone heard before and after the restart, both exit 0, Bob's call ends with Alice's
    hangup) and Alice's history holds one record of it, answered before the crash and ended
    after the restart."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS).start())
    bob = await softphone(s, stack, server, ns, "bob", "answer", "--auto", "--tone-frequency", "330",
                          "--record", s.file("bob.wav"))
    await bob.wait_for("note", text="waiting for a call")
    alice = await softphone(s, stack, server, ns, "alice", "call", "--to", "bob", "--tone-frequency", "523",
                            "--duration", "12", "--record", s.file("alice.wav"))
    for peer in (alice, bob):
        await peer.wait_for("first-audio", timeout=30)
    await asyncio.sleep(2)  # audio before the crash
    killed = time.time()
    await server.kill9()
    await server.restart()
    restarted = time.time()
    await both_reconnected((alice, bob))
    status = await alice.exit_status(timeout=40)
    check(status == 0, f"alice's call did not survive the restart: exit {status}, {ended_summary(alice)}")
    status = await bob.exit_status()
    check(status == 0 and bob.find("ended")["reason"] == "hangup",
          f"bob's call did not end with alice's hangup: exit {status}, {ended_summary(bob)}")
    # The recordings start with the first audio: a window before the crash, one after the restart.
    for peer, path, tone in ((bob, s.file("bob.wav"), 523), (alice, s.file("alice.wav"), 330)):
        heard = peer.time_of("first-audio")
        before = killed - heard
        after = restarted - heard + 1.0
        near(dominant_frequency_between(path, max(before - 1.5, 0), before - 0.1), tone,
             f"{peer.name}.wav before the crash")
        check(wav_seconds(path) >= after + 2, f"{peer.name}.wav: {wav_seconds(path):.1f} s of audio, the restart "
              f"was {restarted - heard:.1f} s after its first audio: no audio after the restart")
        near(dominant_frequency_between(path, after, after + 2), tone, f"{peer.name}.wav after the restart")
    record = await only_call(server, "alice")
    hung_up = alice.time_of("note", text="duration reached: hanging up")
    check(record.get("endReason") == "hangup" and record.get("answeredAt") and record.get("endedAt"),
          f"the record is not an answered call that was hung up: {record}")
    check(record["answeredAt"] < ms(killed) and record["endedAt"] > ms(restarted),
          f"the record does not span the restart ({ms(killed)} → {ms(restarted)}): {record}")
    talked = ms(hung_up - alice.time_of("first-audio"))
    check(record.get("durationMs", 0) >= talked - 1500,
          f"the record's duration {record.get('durationMs')} ms is shorter than the call ({talked} ms)")


@scenario
async def a_call_ringing_through_a_crash_can_still_be_answered(s, stack):
    """Bob's phone rings (he answers by hand) when the server is killed and restarted: after
    both reconnect it still rings, Bob accepts, audio flows both ways, Alice hangs up, and the
    history has the call answered after the restart."""
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS, ring_timeout=40).start())
    bob = await softphone(s, stack, server, ns, "bob", "answer", "--tone-frequency", "330",
                          "--record", s.file("bob.wav"))
    await bob.wait_for("note", text="waiting for a call")
    alice = await softphone(s, stack, server, ns, "alice", "call", "--to", "bob", "--tone-frequency", "523",
                            "--duration", "4", "--record", s.file("alice.wav"))
    await bob.wait_for("note", timeout=30, text="press Enter to answer, or type d and Enter to decline")
    await server.kill9()
    await server.restart()
    restarted = time.time()
    await both_reconnected((alice, bob))
    await asyncio.sleep(2)  # their get-call answers (and Bob's re-sent invite) have arrived
    for peer in (bob, alice):
        check(not peer.has("ended"), f"{peer.name}'s ringing call ended after the restart: {ended_summary(peer)}")
    bob.send("")  # Enter: answer
    await bob.wait_for("answering")
    for peer in (alice, bob):
        await peer.wait_for("first-audio", timeout=30)
    status = await alice.exit_status(timeout=30)
    check(status == 0, f"alice's call did not complete: exit {status}, {ended_summary(alice)}")
    status = await bob.exit_status()
    check(status == 0 and bob.find("ended")["reason"] == "hangup",
          f"bob's call did not end with alice's hangup: exit {status}, {ended_summary(bob)}")
    near(dominant_frequency(s.file("bob.wav")), 523, "bob.wav")
    near(dominant_frequency(s.file("alice.wav")), 330, "alice.wav")
    record = await only_call(server, "alice")
    check(record.get("endReason") == "hangup" and (record.get("answeredAt") or 0) > ms(restarted),
          f"the record is not a call answered after the restart ({ms(restarted)}) and hung up: {record}")


@scenario
async def a_call_ringing_through_a_crash_ends_missed_at_its_deadline(s, stack):
    """The server (4 s ring timeout) is killed while Alice's call rings Bob and stays down past
    the call's deadline: after the restart both ends are told `missed` (exit 5), and the history
    records the call missed at its original deadline, not at the restart."""
    ring_timeout = 4
    ns = stack(await MediaNamespace().start())
    server = stack(await Server(s, netns=ns.NS, ring_timeout=ring_timeout).start())
    bob = await softphone(s, stack, server, ns, "bob", "answer")
    await bob.wait_for("note", text="waiting for a call")
    alice = await softphone(s, stack, server, ns, "alice", "call", "--to", "bob")
    await bob.wait_for("note", timeout=30, text="press Enter to answer, or type d and Enter to decline")
    killed = time.time()
    await server.kill9()
    # The invite was accepted before the kill: its deadline is less than 4 s after it.
    await asyncio.sleep(killed + ring_timeout + 2.5 - time.time())
    await server.restart()
    restarted = time.time()
    for peer in (alice, bob):
        status = await peer.exit_status(timeout=40)
        check(status == 5 and peer.find("ended")["reason"] == "missed",
              f"{peer.name}'s call did not end missed after the restart: exit {status}, {ended_summary(peer)}")
    record = await only_call(server, "alice")
    check(record.get("endReason") == "missed" and not record.get("answeredAt"), f"not a missed call: {record}")
    deadline = record["createdAt"] + ring_timeout * 1000
    check(abs(record.get("endedAt", 0) - deadline) <= 2000 and record["endedAt"] < ms(restarted) - 1000,
          f"the call ended at {record.get('endedAt')}, its deadline was {deadline}, the restart {ms(restarted)}")


# Raw-protocol scenarios: no media, so on this host's loopback. The limits a real client would
# meet are lifted: these scenarios make many calls per user, fast.
DRIVER_FLAGS = ["--invites-per-minute", "0", "--messages-per-second", "0", "--http-requests-per-second", "0",
                "--max-live-calls-per-user", "64"]


def driver_users(driver):
    return sorted({name for log in driver.calls.values() for name in (log.caller, log.callee)})


async def histories_of(server, users):
    records = await asyncio.gather(*(server.calls(server.token(user)) for user in users))
    return dict(zip(users, records))


async def settled_histories(server, driver, timeout=10):
    """Every driver user's history, once each call whose invite was acknowledged has an ended
    record (or `timeout` passed: what is missing then is reported by `history_problems`)."""
    users = driver_users(driver)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        histories = await histories_of(server, users)
        ended = {r["callId"] for r in histories_all(histories) if r.get("endReason")}
        if all(log.call_id in ended for log in driver.calls.values() if "invite" in log.acked) \
                or loop.time() > deadline:
            return histories
        await asyncio.sleep(0.5)


def histories_all(histories):
    return [r for records in histories.values() for r in records]


def history_problems(driver, histories):
    """What the histories contradict of the driver's log of acknowledged requests, by kind."""
    problems = collections.defaultdict(list)
    for user, records in histories.items():
        counts = collections.Counter(r["callId"] for r in records)
        problems["a call id twice in one history"] += [f"{user}:{c}" for c, n in counts.items() if n > 1]
    for log in driver.calls.values():
        if "invite" not in log.acked:
            continue
        record = next((r for r in histories.get(log.caller, []) if r["callId"] == log.call_id), None)
        acked = log.acked
        if record is None:
            for kind in ("hangup", "accept", "cancel", "invite"):
                if kind in acked:
                    problems[f"{kind} acknowledged, no record"].append(log.call_id)
                    break
            continue
        if (record.get("callerId"), record.get("calleeId")) != (log.caller, log.callee):
            problems["the record is another call's"].append(log.call_id)
        if not any(r["callId"] == log.call_id for r in histories.get(log.callee, [])):
            problems["not in the callee's history"].append(log.call_id)
        reason, answered = record.get("endReason"), record.get("answeredAt")
        if "hangup" in acked and (reason != "hangup" or not answered):
            problems["hangup acknowledged, record not an answered hangup"].append(f"{log.call_id}: {reason}")
        elif "accept" in acked and (not answered or not reason):
            problems["accept acknowledged, record not answered and ended"].append(f"{log.call_id}: {reason}")
        elif "cancel" in acked and "accept" not in acked and reason not in ("cancelled", "hangup"):
            problems["cancel acknowledged, record neither cancelled nor hung up"].append(f"{log.call_id}: {reason}")
        elif not reason:
            problems["invite acknowledged, record never ended"].append(log.call_id)
    return {kind: items for kind, items in problems.items() if items}


def summary(problems):
    return "; ".join(f"{kind}: {len(items)} ({', '.join(items[:3])}{', ...' if len(items) > 3 else ''})"
                     for kind, items in problems.items())


def save_log(s, driver, **context):
    with open(s.file("calls.json"), "w") as f:
        json.dump({"context": context, "calls": [
            {"callId": c.call_id, "caller": c.caller, "callee": c.callee, "acked": c.acked, "refused": c.refused,
             "notes": c.notes} for c in driver.calls.values()],
            "sessions": [{"name": x.name, "lastSeq": x.last_seq, "gaps": x.gaps, "pending": list(x.pending),
                          "history": x.history, "failure": x.failure,
                          "welcomes": [(t, w.get("sessionId"), w.get("resumed"), w.get("resync"))
                                       for t, w in x.welcomes]} for x in driver.sessions]}, f, indent=1)


def driver_stats(driver):
    return (f"{driver.started} calls started, {driver.acked_count('invite')} invites, "
            f"{driver.acked_count('accept')} accepts and {driver.acked_count('hangup')} hangups acknowledged, "
            f"{sum(x.resent for x in driver.sessions)} requests re-sent after reconnects")


def resynced_after(driver, moment):
    """Sessions that were welcomed again after `moment` with anything but resumed:false,
    resync:true (sessions do not outlive the server), or not at all."""
    wrong = []
    for session in driver.sessions:
        later = [w for t, w in session.welcomes if t > moment]
        if not later or any(w.get("resumed") or not w.get("resync") for w in later):
            wrong.append(f"{session.name}: {[(w.get('resumed'), w.get('resync')) for w in later]}")
    return wrong


@scenario
async def sigterm_under_a_stream_of_calls_loses_no_acknowledged_call(s, stack):
    """Eight caller/callee pairs of raw protocol clients make short calls back to back; the
    server gets SIGTERM mid-stream and is restarted. The clients resume (and are told to
    resync), re-send what was unanswered and carry on; the calls in progress are found by
    get-call after the restart, and every acknowledged accept and hangup is in the history,
    each call once."""
    server = stack(await Server(s, extra=DRIVER_FLAGS).start())
    driver = stack(CallDriver("127.0.0.1", server.port, server.token, pairs=8, total=96, prefix="t", hold=(0.2, 0.6)))
    await driver.start()
    driver.run()
    await eventually(lambda: driver.acked_count("hangup") >= 24 or driver.done.is_set(), 30, "24 calls hung up")
    check(not driver.done.is_set(), "the calls were over before the SIGTERM")
    sigterm = time.time()
    status = await server.terminate()
    check(status == 0, f"the server exited {status} on SIGTERM")
    await server.restart()
    in_progress = [c for c in driver.calls.values()
                   if c.acked.get("accept", sigterm) < sigterm and c.acked.get("hangup", sigterm + 1) > sigterm]
    check(in_progress, "the SIGTERM caught no call in progress")
    await eventually(lambda: all(x.last_welcome_at > sigterm for x in driver.sessions), 20,
                     "reconnect of every session")
    callers = {x.name: x for x in driver.sessions}
    replies = await asyncio.gather(*(callers[c.caller].request({"type": "get-call", "callId": c.call_id})
                                     for c in in_progress), return_exceptions=True)
    await driver.wait(60)
    await driver.end_unfinished()
    histories = await settled_histories(server, driver)
    save_log(s, driver, sigterm=sigterm)
    problems = {}
    wrong = resynced_after(driver, sigterm)
    if wrong:
        problems["not welcomed back with resync"] = wrong
    lost = [f"{c.call_id}: {r if isinstance(r, BaseException) else r.get('code') or r.get('call', {}).get('state')}"
            for c, r in zip(in_progress, replies)
            if not (is_ack(r) and r.get("call", {}).get("state") in ("accepted", "ended"))]
    if lost:
        problems["get-call after the restart did not find a call in progress at SIGTERM"] = lost
    problems.update(history_problems(driver, histories))
    check(not driver.errors, f"the driver's script failed: {driver.errors[:3]}")
    check(not problems, f"{summary(problems)} [{driver_stats(driver)}, {len(in_progress)} in progress at SIGTERM]")


@scenario
@time_limit(170)
async def crash_loop_of_200_calls_loses_nothing(s, stack):
    """200 scripted calls over eight pairs of raw protocol clients while the server is killed
    (-9) at random points and restarted, ten times: every acknowledged transition is in the
    history, no record appears twice or is overwritten, and an invite with a used call id
    (before the first crash or after) is refused with `conflict`."""
    seed = 16
    rng = random.Random(seed)
    server = stack(await Server(s, extra=DRIVER_FLAGS).start())
    driver = stack(CallDriver("127.0.0.1", server.port, server.token, pairs=8, total=200, prefix="k",
                              hold=(0.3, 1.2), seed=seed))
    await driver.start()
    driver.run()
    loop = asyncio.get_running_loop()
    kill_deadline = loop.time() + 120
    kills = []
    while len(kills) < 10 and loop.time() < kill_deadline and not driver.done.is_set():
        try:
            await asyncio.wait_for(driver.done.wait(), rng.uniform(0.3, 2.0))
            break
        except asyncio.TimeoutError:
            pass
        kills.append(time.time())
        await server.kill9()
        await server.restart()
    check(len(kills) >= 5, f"only {len(kills)} kills before the calls were over")
    await driver.wait(max(kill_deadline - loop.time(), 30))
    await driver.end_unfinished()
    histories = await settled_histories(server, driver)
    save_log(s, driver, kills=kills)
    problems = history_problems(driver, histories)
    wrong = resynced_after(driver, kills[-1])
    if wrong:
        problems["not welcomed back with resync after the last restart"] = wrong

    # Used call ids, from before the first crash and after, offered again by another user.
    used = [c for c in driver.calls.values() if "invite" in c.acked]
    early = [c for c in used if c.acked["invite"] < kills[0]]
    late = [c for c in used if c.acked["invite"] >= kills[0]]
    check(early and late, f"{len(early)} calls before the first crash, {len(late)} after")
    sample = rng.sample(early, min(8, len(early)))
    sample += rng.sample(late, min(20 - len(sample), len(late)))
    prober = stack(Session("127.0.0.1", server.port, server.token("k-prober"), "k-prober"))
    await prober.start()

    async def offer_again(call_id, to):
        reply = await prober.request({"type": "invite", "callId": call_id, "to": to, "video": False,
                                      "offer": {"sdp": FAKE_OFFER}})
        if is_ack(reply):
            await prober.request({"type": "cancel", "callId": call_id})
        return reply
    fresh = await offer_again(str(uuid.uuid4()), sample[0].callee)
    check(is_ack(fresh), f"the prober cannot call at all: {fresh}")
    for c in sample:
        reply = await offer_again(c.call_id, c.callee)
        if reply.get("code") != "conflict":
            when = "before the first crash" if c in early else "after it"
            problems.setdefault("a used call id was not refused with conflict", []).append(
                f"{c.call_id} ({when}): {reply.get('type')} {reply.get('code') or ''}".strip())
    again = await histories_of(server, driver_users(driver))
    for user, records in histories.items():
        now = {r["callId"]: r for r in again[user]}
        changed = [r["callId"] for r in records if now.get(r["callId"]) != r]
        if changed:
            problems.setdefault("a record changed after the probes", []).extend(f"{user}:{c}" for c in changed)
    check(not driver.errors, f"the driver's script failed: {driver.errors[:3]}")
    check(not problems, f"{summary(problems)} [{driver_stats(driver)}, {len(kills)} kills]")
