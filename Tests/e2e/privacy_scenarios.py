"""Private pre-connect (protocol.md 11, docs/security.md): what a caller learns of a callee's
addresses while the callee's devices ring.

Alice (the caller), the server and coturn sit in one namespace (NamespaceLink's A, 10.78.0.1);
Bob (the callee) in another (B, 10.78.0.2), so Bob's own address can be looked for in what
Alice receives. Every peer is a CLI softphone (GStreamer webrtcbin).
"""
import asyncio
import time
import types

from harness import Coturn, NamespaceLink, Server, Softphone, check, dominant_frequency
from scenarios import scenario




async def ringing_call(s, stack, turn=True, callee_flags=()):
    """Alice calls Bob, both pre-connecting; returns once Bob rings (and, when a leg was made,
    once it connected on both sides): (link, alice, bob, whether a leg connected)."""
    link = stack(await NamespaceLink(s, rtt_ms=4).start())
    coturn = None
    if turn:
        coturn = stack(await Coturn(s, types.SimpleNamespace(NS=link.NS_A, ADDR=link.ADDR_A)).start())
    server = stack(await Server(s, netns=link.NS_A, host=link.ADDR_A, turn=coturn).start())
    bob = stack(await Softphone(s, "bob", ["answer", "--server", server.url, "--token", server.token("bob"),
                                           "--preconnect", "--tone-frequency", "330", "--record", s.file("bob.wav"),
                                           *callee_flags], netns=link.NS_B).start())
    await bob.wait_for("note", text="waiting for a call")
    alice = stack(await Softphone(s, "alice", ["call", "--server", server.url, "--token", server.token("alice"),
                                               "--to", "bob", "--preconnect", "--tone-frequency", "523",
                                               "--duration", "2", "--record", s.file("alice.wav")],
                                  netns=link.NS_A).start())
    await bob.wait_for("note", text="press Enter to answer, or type d and Enter to decline")
    return link, alice, bob


def candidates_before(peer, moment):
    """The remote candidates `peer` was given before `moment` (time.time())."""
    return [e for e, t in zip(peer.events, peer.stamps) if e.get("event") == "remote-candidate" and t < moment]


async def answer_and_talk(s, alice, bob):
    """Bob answers; both hear each other and exit 0. Returns when Bob answered."""
    answered_at = time.time()
    bob.send("")
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not exit 0")
    for peer in (alice, bob):
        heard = peer.time_of("first-audio")
        check(heard is not None and heard > answered_at, f"{peer.name} heard nothing after Answer")
    for path, tone in ((s.file("bob.wav"), 523), (s.file("alice.wav"), 330)):
        frequency = dominant_frequency(path)
        check(abs(frequency - tone) <= 5, f"{path}: heard {frequency} Hz, expected {tone} ± 5 Hz")
    return answered_at


@scenario
async def private_preconnect_shows_the_caller_only_the_relay(s, stack):
    """Bob's leg gathers relay candidates only: while his phone rings, every candidate Alice
    receives is coturn's relay (none names Bob's address, not even as the related address libnice
    writes into a relay candidate), the leg still connects, and Answer gives audio both ways on
    it. webrtcbin keeps the leg's relay after Answer: Bob's address never reaches Alice."""
    link, alice, bob = await ringing_call(s, stack)
    await alice.wait_for("preconnected", device="cli")
    await bob.wait_for("preconnected", device="")
    ringing = candidates_before(alice, time.time())
    check(ringing, "alice received no candidate of bob's leg while it rang")
    for event in ringing:
        check(event["type"] == "relay" and link.ADDR_B not in event["candidate"],
              f"alice learned more than the relay while bob's phone rang: {event['candidate']}")
    await answer_and_talk(s, alice, bob)
    for event in (e for e in alice.events if e.get("event") == "remote-candidate"):
        check(link.ADDR_B not in event["candidate"], f"bob's address reached alice: {event['candidate']}")


@scenario
async def preconnect_without_privacy_shows_the_callee_address(s, stack):
    """The control: with --no-private-preconnect Bob's leg gathers every candidate, and Alice
    receives Bob's own address while his phone rings (the check above is not blind)."""
    link, alice, bob = await ringing_call(s, stack, callee_flags=("--no-private-preconnect",))
    await alice.wait_for("preconnected", device="cli")
    ringing = candidates_before(alice, time.time())
    check(any(e["type"] == "host" and e["address"] == link.ADDR_B for e in ringing),
          f"bob's host candidate did not reach alice while ringing: {[e['candidate'] for e in ringing]}")
    await answer_and_talk(s, alice, bob)


@scenario
async def private_preconnect_without_turn_negotiates_after_answer(s, stack):
    """No TURN server: Bob's phone asks for no leg (a relay-only leg could never connect) and
    Alice learns nothing of Bob while it rings; Answer negotiates the call as without
    pre-connect, with audio both ways."""
    link, alice, bob = await ringing_call(s, stack, turn=False)
    await alice.wait_for("ringing")
    await asyncio.sleep(0.5)  # a leg, had one been asked for, would be offered and answered by now
    ringing_until = time.time()
    check(not alice.has("preconnected") and not bob.has("preconnected"), "a leg was made without a relay")
    check(not candidates_before(alice, ringing_until), "alice received a candidate of bob's while it rang")
    await answer_and_talk(s, alice, bob)
