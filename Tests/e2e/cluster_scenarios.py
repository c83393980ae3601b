"""Cluster (issue 19): three dialtone-server nodes sharing one PostgreSQL database and one Redis,
with CLI softphones whose caller and callee sit on different nodes, behind a TCP balancer that
knows nothing of Dialtone (round robin, no stickiness).

Everything runs inside one MediaNamespace: PostgreSQL, Redis, the nodes and the balancer listen
on that namespace's loopback. Registered in run_e2e.py's SCENARIOS after its own.
"""
import asyncio
import contextvars
import os
import pwd
import random
import socket
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

from durability_scenarios import (DRIVER_FLAGS, driver_stats, history_problems, near, save_log, settled_histories,
                                  summary)
from harness import (Failure, Janus, MediaNamespace, Server, Softphone, check, dominant_frequency,
                     eventually, free_port, claim_port, port_given, http_get, sound_seconds, spawn, wait_port,
                     wait_port_in, wav_seconds)
from group_scenarios import (a_page_in_alices_call, audio_rates, hang_up, heard_everyone_else, hearing_grows_by,
                             page_hears)
from scenarios import scenario, time_limit
from protocol_driver import CallDriver, Session, fake_candidate, is_ack




def _inside(netns):
    """The command prefix that runs a process in `netns` (None: on this host's loopback)."""
    return ["ip", "netns", "exec", netns] if netns else []


async def _wait(netns, port, process, timeout=15):
    if netns:
        await wait_port_in(netns, "127.0.0.1", port, process, timeout=timeout)
    else:
        await wait_port(port, timeout=timeout, process=process)


def _postgres_bin():
    root = "/usr/lib/postgresql"
    for version in sorted(os.listdir(root), reverse=True) if os.path.isdir(root) else []:
        path = os.path.join(root, version, "bin")
        if os.path.exists(os.path.join(path, "initdb")):
            return path
    raise FileNotFoundError("no PostgreSQL server binaries under /usr/lib/postgresql (scripts/deps.sh installs them)")


class ScratchPostgres:
    """A throwaway PostgreSQL in the namespace (trust auth on its loopback, no fsync). initdb and
    postgres refuse root: as root they run as the `postgres` user."""

    def __init__(self, scratch, netns):
        self.scratch, self.netns = scratch, netns
        self.port = free_port()
        # Not under the scratch directory: root's 0700 scratch is closed to the postgres user.
        self.directory = tempfile.mkdtemp(prefix="dte2e-pg-")
        self.process = None

    def _as_owner(self):
        if os.geteuid() != 0:
            return []
        return ["setpriv", "--reuid", "postgres", "--regid", "postgres", "--clear-groups"]

    @property
    def url(self):
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    async def start(self):
        binaries = _postgres_bin()
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.directory, user.pw_uid, user.pw_gid)
        result = subprocess.run(self._as_owner() + [os.path.join(binaries, "initdb"), "-D", self.directory,
                                                    "-U", "postgres", "--auth=trust", "--no-sync"],
                                capture_output=True, text=True)
        check(result.returncode == 0, f"initdb failed: {result.stderr.strip()[-500:]}")
        await self._run()
        return self

    async def _run(self, log="postgres.log"):
        args = _inside(self.netns) + self._as_owner() + [
            os.path.join(_postgres_bin(), "postgres"), "-D", self.directory, "-h", "127.0.0.1", "-p", str(self.port),
            "-k", self.directory, "-c", "fsync=off", "-c", "max_connections=100", "-c", "shared_buffers=16MB"]
        self.process = await spawn("postgres", args, self.scratch.file(log))
        await _wait(self.netns, self.port, self.process, timeout=30)

    async def restart(self, down=2.0):
        """Kills the server (SIGKILL: a crash), waits `down` seconds, and starts it again on the same
        data and port (crash recovery replays its log)."""
        await self.process.stop()
        await asyncio.sleep(down)
        await self._run("postgres-2.log")

    async def stop(self):
        if self.process:
            await self.process.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


class ScratchRedis:
    """A throwaway redis-server in the namespace (no persistence)."""

    def __init__(self, scratch, netns):
        self.scratch, self.netns = scratch, netns
        self.port = free_port()
        self.process = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    async def start(self):
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        directory = self.scratch.file("redis")
        os.makedirs(directory, exist_ok=True)
        self._args = _inside(self.netns) + [binary, "--bind", "127.0.0.1", "--port", str(self.port),
                                            "--save", "", "--appendonly", "no", "--dir", directory]
        self.process = await spawn("redis", self._args, self.scratch.file("redis.log"))
        await _wait(self.netns, self.port, self.process)
        return self

    async def restart(self, down=2.0):
        """Kills Redis and starts it again, empty (no persistence), on the same port."""
        await self.process.stop()
        await asyncio.sleep(down)
        self.process = await spawn("redis", self._args, self.scratch.file("redis-2.log"))
        await _wait(self.netns, self.port, self.process)

    async def stop(self):
        if self.process:
            await self.process.stop()


def _key_slot(key):
    """A key's Redis Cluster hash slot (CRC16/XMODEM of the key, keys here carry no hash tag)."""
    crc = 0
    for byte in key.encode():
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc % 16384


def _free_cluster_port():
    """A loopback port free together with its cluster bus port (port + 10000), neither handed out
    before in this run (the shards listen in the namespace, where the host's check cannot see
    them; `free_port` picks below 20000, so the two never meet)."""
    for _ in range(2000):
        port = random.randint(20000, 29999)
        if port_given(port) or port_given(port + 10000):
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        claim_port(port)
        claim_port(port + 10000)
        return port
    raise Failure("no free port pair for a Redis Cluster")


class ScratchRedisCluster:
    """A throwaway three-shard Redis Cluster in the namespace: three primaries with a replica each
    (`redis-cli --cluster create --cluster-replicas 1`), no persistence, a 1 s node timeout so that
    a killed primary's replica takes over within a few seconds."""

    def __init__(self, scratch, netns, shards=3):
        self.scratch, self.netns, self.shards = scratch, netns, shards
        self.ports = []
        while len(self.ports) < shards * 2:
            port = _free_cluster_port()
            if port not in self.ports:
                self.ports.append(port)
        self.processes = {}

    @property
    def url(self):
        return "redis-cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def _cli(self, port, *args, stdin=None):
        result = subprocess.run(_inside(self.netns) + ["redis-cli", "-p", str(port), *args],
                                capture_output=True, text=True, timeout=10, input=stdin)
        return result.stdout

    async def start(self):
        # Another process may take a port (or its bus port) between the pick and the bind: then
        # another set of ports, up to three times.
        for attempt in range(3):
            try:
                return await self._start()
            except Failure:
                logs = "".join(open(self.scratch.file(f"redis-{p}.log"), errors="replace").read()
                               for p in self.ports if os.path.exists(self.scratch.file(f"redis-{p}.log")))
                await self.stop()
                self.processes = {}
                if attempt == 2 or "Address already in use" not in logs:
                    raise
                self.ports = []
                while len(self.ports) < self.shards * 2:
                    port = _free_cluster_port()
                    if port not in self.ports:
                        self.ports.append(port)

    async def _start(self):
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self._args = {}
        for port in self.ports:
            directory = self.scratch.file(f"redis-{port}")
            os.makedirs(directory, exist_ok=True)
            self._args[port] = _inside(self.netns) + [
                binary, "--bind", "127.0.0.1", "--port", str(port), "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
                "--cluster-replica-validity-factor", "0", "--save", "", "--appendonly", "no", "--dir", directory]
        await self._run()
        create = subprocess.run(_inside(self.netns) + ["redis-cli", "--cluster", "create"]
                                + [f"127.0.0.1:{p}" for p in self.ports] + ["--cluster-replicas", "1", "--cluster-yes"],
                                capture_output=True, text=True, timeout=60)
        check(create.returncode == 0, f"redis-cli --cluster create failed: {create.stdout[-500:]} {create.stderr[-500:]}")
        await eventually(lambda: self._healthy(self.ports), 30, "the Redis Cluster to be whole, replicas in sync")
        return self

    async def _run(self, log="redis"):
        for port in self.ports:
            self.processes[port] = await spawn(f"redis-{port}", self._args[port],
                                               self.scratch.file(f"{log}-{port}.log"))
        for port in self.ports:
            await _wait(self.netns, port, self.processes[port])

    async def restart(self, down=2.0):
        """Kills every server and starts them again, empty (no persistence), on the same ports: the
        cluster comes back whole from its nodes.conf files, with none of its data."""
        for process in self.processes.values():
            await process.stop()
        self.processes = {}
        await asyncio.sleep(down)
        await self._run("redis-2")
        await eventually(lambda: self._healthy(self.ports), 30, "the Redis Cluster to be whole again")

    def _healthy(self, ports):
        for port in ports:
            if "cluster_state:ok" not in self._cli(port, "cluster", "info"):
                return False
            replication = self._cli(port, "info", "replication")
            if "role:master" in replication and ("state=online" not in replication
                                                  or not self._confirms_writes(port)):
                return False
        return True

    def _confirms_writes(self, port):
        """Whether the primary on `port` streams its writes to its replica: a probe write in one
        of its slots (gone 100 ms later) that the replica confirms (WAIT). "state=online" is not
        enough: after a full sync the primary sends a replica nothing until the replica's first
        REPLCONF ACK, up to a second later, and the nodes' first writes would go unconfirmed."""
        me = self._cli(port, "cluster", "myid").strip()
        ranges = []
        for line in self._cli(port, "cluster", "nodes").splitlines():
            fields = line.split()
            if fields and fields[0] == me:
                for part in fields[8:]:
                    if not part.startswith("["):
                        start, _, end = part.partition("-")
                        ranges.append((int(start), int(end or start)))
        if not ranges:
            return True  # a primary that serves no slot takes no writes
        key = next(f"dt-probe-{n}" for n in range(100_000)
                   if any(a <= _key_slot(f"dt-probe-{n}") <= b for a, b in ranges))
        replies = self._cli(port, stdin=f"SET {key} 1 PX 100\nWAIT 1 100\n").split()
        return replies[-1:] == ["1"]

    def primaries(self):
        """The ports of the live primaries, by the slot map."""
        for port in self.ports:
            if port in self.processes:
                nodes = self._cli(port, "cluster", "nodes")
                return sorted(int(line.split()[1].split("@")[0].rsplit(":", 1)[1]) for line in nodes.splitlines()
                              if "master" in line.split()[2] and "fail" not in line.split()[2]
                              and len(line.split()) > 8)
        return []

    async def kill_primary(self):
        """SIGKILL to one primary (a crash), then waits until its replica serves its slots."""
        victim = self.primaries()[0]
        await self.processes.pop(victim).stop()
        alive = [p for p in self.ports if p in self.processes]
        await eventually(lambda: len(self.primaries()) == 3 and victim not in self.primaries()
                         and all("cluster_state:ok" in self._cli(p, "cluster", "info") for p in alive),
                         30, "a replica to take the killed primary's slots over")
        return victim

    async def stop(self):
        for process in self.processes.values():
            await process.stop()


# Set by the scenarios that run on a Redis Cluster; DIALTONE_E2E_REDIS=cluster runs every cluster
# scenario on one.
_ON_REDIS_CLUSTER = contextvars.ContextVar("on_redis_cluster", default=os.environ.get("DIALTONE_E2E_REDIS") == "cluster")


def on_a_redis_cluster(fn):
    """`fn` again, on a three-shard Redis Cluster instead of one Redis."""
    async def run(s, stack):
        token = _ON_REDIS_CLUSTER.set(True)
        try:
            await fn(s, stack)
        finally:
            _ON_REDIS_CLUSTER.reset(token)
    run.__name__ = fn.__name__ + "__on_a_redis_cluster"
    run.__doc__ = fn.__doc__
    run.time_limit = getattr(fn, "time_limit", 90) + 30
    return run


_BALANCER = r"""
import asyncio, itertools, sys
port, backends = int(sys.argv[1]), [int(p) for p in sys.argv[2:]]
turn = itertools.cycle(range(len(backends)))

async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except Exception:
        pass
    finally:
        writer.close()

async def serve(reader, writer):
    # Round robin; a node that refuses is skipped (a dead one), as any TCP balancer's health check does.
    for _ in range(len(backends)):
        target = backends[next(turn)]
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            continue
        print(f"open {target}", flush=True)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        print(f"closed {target}", flush=True)
        return
    writer.close()

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", port)
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""


class Balancer:
    """A plain TCP balancer in the namespace: round robin over the nodes, skipping refusals."""

    def __init__(self, scratch, netns, ports):
        self.scratch, self.netns, self.ports = scratch, netns, ports
        self.port = free_port()
        self.process = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    async def start(self):
        args = _inside(self.netns) + ["python3", "-c", _BALANCER, str(self.port)] + [str(p) for p in self.ports]
        self.process = await spawn("balancer", args, self.scratch.file("balancer.log"))
        await _wait(self.netns, self.port, self.process)
        return self

    async def stop(self):
        if self.process:
            await self.process.stop()


async def sessions_connected(netns, node):
    answer = await http_get(netns, node.url + "/metrics")
    for line in answer["body"].splitlines():
        if line.startswith("dialtone_sessions_connected "):
            return float(line.split()[1])
    raise Failure(f"{node.url}/metrics has no dialtone_sessions_connected")


async def cluster_of(s, stack, count=3, media=True, extra=(), services=None, redis_via_proxy=()):
    """Three nodes, PostgreSQL and Redis in a MediaNamespace (for CLI peers), or on this host's
    loopback (`media=False`, for raw protocol clients). `services`, a dict, gets the PostgreSQL and
    Redis servers, and the TCP forwarder to Redis (a `Balancer` of one) of each node whose index is
    in `redis_via_proxy` (one Redis only), under `("redis proxy", index)`: frozen with SIGSTOP, it
    holds what that node sends to Redis."""
    ns = stack(await MediaNamespace().start()) if media else None
    netns = ns.NS if ns else None
    postgres = stack(await ScratchPostgres(s, netns).start())
    kind = ScratchRedisCluster if _ON_REDIS_CLUSTER.get() else ScratchRedis
    redis = stack(await kind(s, netns).start())
    if services is not None:
        services.update(postgres=postgres, redis=redis)
    nodes = []
    for index in range(count):
        redis_url = redis.url
        if index in redis_via_proxy:
            check(kind is ScratchRedis, "a proxy to a Redis Cluster")
            proxy = stack(await Balancer(s, netns, [redis.port]).start())
            redis_url = f"redis://127.0.0.1:{proxy.port}"
            if services is not None:
                services[("redis proxy", index)] = proxy
        node = Server(s, netns=netns, extra=["--database-url", postgres.url, "--redis-url", redis_url,
                                             "--node-name", f"n{index + 1}", "--log-level",
                                             os.environ.get("DIALTONE_E2E_CLUSTER_LOG", "info"), *extra])
        # Each node its own data directory (the shared state is in PostgreSQL and Redis).
        node.scratch = _NodeScratch(s, index + 1)
        nodes.append(stack(await node.start()))
    return ns, nodes


class _NodeScratch:
    """The scenario's scratch directory, with each node's files under a name of its own."""

    def __init__(self, scratch, index):
        self.scratch, self.index = scratch, index

    def file(self, name):
        return self.scratch.file(f"n{self.index}-{name}")


@scenario
async def a_call_across_three_nodes_has_audio_both_ways(s, stack):
    """Alice's CLI on node 1 calls Bob's on node 2; node 3 answers Bob's history: tones both
    ways, and the hang-up ends both."""
    ns, nodes = await cluster_of(s, stack)
    bob = stack(await Softphone(s, "bob", ["answer", "--server", nodes[1].url, "--token", nodes[1].token("bob"),
                                           "--auto", "--tone-frequency", "330", "--record", s.file("bob.wav")],
                                netns=ns.NS).start())
    await bob.wait_for("note", text="waiting for a call")
    await asyncio.sleep(0.5)  # Bob's presence reaches Redis
    alice = stack(await Softphone(s, "alice", ["call", "--server", nodes[0].url, "--token", nodes[0].token("alice"),
                                               "--to", "bob", "--tone-frequency", "523", "--duration", "4",
                                               "--record", s.file("alice.wav")], netns=ns.NS).start())
    for milestone in ("ringing", "accepted", "ice-connected", "first-audio"):
        await alice.wait_for(milestone)
    check(await alice.exit_status() == 0, "alice did not exit 0")
    check(await bob.exit_status() == 0, "bob did not exit 0 after alice hung up")
    check(bob.find("ended")["reason"] == "hangup", "bob's call did not end with hangup")
    # Each heard the other's tone, and for most of Alice's 4 s (the frequency is read before
    # the recording's quiet end, which says nothing of how long the sound lasted).
    for path, tone in (("bob.wav", 523), ("alice.wav", 330)):
        near(dominant_frequency(s.file(path)), tone, path)
        check(sound_seconds(s.file(path)) > 2, f"{path}: sound for only {sound_seconds(s.file(path)):.2f} s")
    history = await nodes[2].calls(nodes[2].token("bob"))
    check([c.get("endReason") for c in history] == ["hangup"], f"node 3 shows bob's history as {history}")


async def _alice_behind_a_balancer_calls_bob(s, stack, duration):
    """CLI softphones on a three-node cluster: Bob on node 2 answers at once with a 330 Hz tone;
    Alice, through a balancer over nodes 1 and 3, calls him with a 523 Hz tone for `duration` s."""
    ns, nodes = await cluster_of(s, stack)
    balancer = stack(await Balancer(s, ns.NS, [nodes[0].port, nodes[2].port]).start())
    bob = stack(await Softphone(s, "bob", ["answer", "--server", nodes[1].url, "--token", nodes[1].token("bob"),
                                           "--auto", "--tone-frequency", "330", "--record", s.file("bob.wav")],
                                netns=ns.NS).start())
    await bob.wait_for("note", text="waiting for a call")
    await asyncio.sleep(0.5)  # Bob's presence reaches Redis
    alice = stack(await Softphone(s, "alice", ["call", "--server", balancer.url, "--token", nodes[0].token("alice"),
                                               "--to", "bob", "--tone-frequency", "523", "--duration", str(duration),
                                               "--record", s.file("alice.wav")], netns=ns.NS).start())
    return ns, nodes, alice, bob


@scenario
async def the_caller_node_killed_mid_call_the_call_goes_on(s, stack):
    """Behind a balancer: the node holding Alice's socket and running the call is killed -9
    mid-call. Alice's CLI reconnects through the balancer to another node, which resumes her session
    and takes the call over from the shared journal; media never stopped, and her hang-up still ends
    Bob's call."""
    ns, nodes, alice, bob = await _alice_behind_a_balancer_calls_bob(s, stack, duration=9)
    await alice.wait_for("first-audio")
    await bob.wait_for("first-audio")
    await asyncio.sleep(1)
    # Alice's socket, and so her call, are on the node with a session connected.
    holding = [n for n in (nodes[0], nodes[2]) if await sessions_connected(ns.NS, n) > 0]
    check(len(holding) == 1, f"alice's session is on {len(holding)} nodes")
    await holding[0].kill9()
    await alice.wait_for("note", text="signaling disconnected; reconnecting")
    # Her session outlived the node (it is in Redis): the other node resumes it.
    await alice.wait_for("note", text="signed in as alice/cli", times=2)
    # The CLI notes how its session came back right after signing in (a line of its own, which
    # may be read a moment later).
    await eventually(lambda: alice.count("note", text="session resumed") + alice.count("note", text="new session: resync"),
                     5, "alice's note on how her session came back")
    check(alice.count("note", text="session resumed") >= 1 and not alice.count("note", text="new session: resync"),
          "alice's session was not resumed on the other node")
    check(await alice.exit_status(timeout=40) == 0, "alice did not exit 0")
    check(await bob.exit_status(timeout=30) == 0, "bob did not get the hang-up after the node died")
    check(bob.find("ended")["reason"] == "hangup", "bob's call did not end with hangup")
    check(not alice.has("ice-disconnected"), "the media path was disturbed")
    check(wav_seconds(s.file("bob.wav")) > 7, "bob's audio stopped when the node died")
    near(dominant_frequency(s.file("bob.wav")), 523, "bob.wav")


@scenario
async def the_caller_node_killed_while_the_call_rings_still_connects_with_audio(s, stack):
    """CLI softphones: Alice calls through a balancer over nodes 1 and 3, Bob on node 2 answers at
    once. The node holding Alice's socket and running the call is killed -9 as soon as she hears
    it ring, in the middle of the offer/answer and the trickle. She resumes on the other node, the
    call is taken over from the journal, and it connects with audio both ways."""
    ns, nodes, alice, bob = await _alice_behind_a_balancer_calls_bob(s, stack, duration=6)
    await alice.wait_for("ringing")
    holding = [n for n in (nodes[0], nodes[2]) if await sessions_connected(ns.NS, n) > 0]
    check(len(holding) == 1, f"alice's session is on {len(holding)} nodes")
    await holding[0].kill9()
    for milestone in ("accepted", "ice-connected", "first-audio"):
        await alice.wait_for(milestone, timeout=40)
    check(await alice.exit_status(timeout=40) == 0, "alice did not exit 0")
    check(await bob.exit_status(timeout=30) == 0, "bob did not get the hang-up")
    check(bob.find("ended")["reason"] == "hangup", "bob's call did not end with hangup")
    near(dominant_frequency(s.file("bob.wav")), 523, "bob.wav")
    near(dominant_frequency(s.file("alice.wav")), 330, "alice.wav")


@scenario
@time_limit(120)
async def the_caller_node_killed_mid_trickle_every_candidate_arrives_once_in_order(s, stack):
    """Raw protocol clients: Alice behind a balancer over nodes 1 and 3, Bob on node 2. While both
    trickle candidates, the node holding Alice's socket, which also runs the call, is killed -9.
    Alice reconnects through the balancer and resumes her session on the other node (resumed, not
    resync), re-sending what was unanswered; the call is taken over from the shared journal. Each
    side gets every candidate of the other exactly once, in order, and no seq is skipped."""
    await _killed_mid_trickle(s, stack, extra=(), twice_allowed=False)


@scenario
@time_limit(120)
async def the_caller_node_killed_mid_trickle_in_write_behind_every_candidate_arrives_in_order(s, stack):
    """The same with `--cluster-sessions write-behind` (issue 41 item 4, point 8): the killed node
    held Alice's session and numbered it itself, writing candidates before storing them; Bob's
    candidates for her that it had not stored wait as letters in its inbox for her resume on
    node 3, which numbers them after her own seq. Every candidate arrives, in order of first
    arrival, with no seq skipped; one may arrive twice."""
    await _killed_mid_trickle(s, stack, extra=("--cluster-sessions", "write-behind", "--batch-window-ms", "10"),
                              twice_allowed=True)


@scenario
@time_limit(120)
async def the_callee_node_killed_mid_trickle_in_write_behind_applies_each_letter_once(s, stack):
    """Write-behind (issue 41 item 4, point 8): Bob behind a balancer over nodes 1 and 3, Alice on
    node 2, whose node runs the call and leaves Alice's candidates for Bob unnumbered in his node's
    inbox. Bob's node is killed -9 mid trickle; its heartbeat still counts it alive (`--node-expiry
    10`) when Bob resumes on node 3, which applies the letters his dead node had not stored. Every
    candidate arrives in order of first arrival with no seq skipped; after his resume none arrives
    twice (only one his dead node wrote before storing it may come again)."""
    await _killed_mid_trickle(s, stack, extra=("--cluster-sessions", "write-behind", "--batch-window-ms", "10",
                                               "--node-expiry", "10"),
                              twice_allowed=True, victim="callee")


@scenario
@time_limit(150)
async def a_write_behind_node_frozen_past_its_lease_while_its_session_resumes_elsewhere_repeats_nothing(s, stack):
    """Write-behind: Bob behind a balancer over nodes 1 and 3, Alice on node 2. Mid trickle, Bob's
    node is frozen (SIGSTOP); Bob drops his socket and resumes on node 3, which takes his session
    over (its epoch moves on) and the letters his frozen node had not stored. The frozen node is
    thawed past its lease: it finds its lease stale and closes its sockets, a batch it had queued
    before the freeze, if any, is refused by Redis (printed: the freeze rarely catches one; the
    deterministic case is WriteBehindClusterTests), and it neither sends on nor stores anything of
    Bob's session. Every
    candidate arrives in order of first arrival with no seq skipped; after Bob's resume none
    arrives twice."""
    await _killed_mid_trickle(s, stack, extra=("--cluster-sessions", "write-behind", "--batch-window-ms", "10"),
                              twice_allowed=True, victim="callee", freeze=True)


# The node log (`--write-behind-log-stripes`, docs/architecture.md write-behind point 7): the same
# three scenarios with batches in each node's own log, which a resume takes the session from.
LOG = ("--write-behind-log-stripes", "8")


@scenario
@time_limit(120)
async def the_caller_node_killed_mid_trickle_in_write_behind_with_the_node_log_every_candidate_arrives_in_order(
        s, stack):
    """The caller's node killed -9 mid trickle, as above, with the node log: Alice's resume on node 3
    takes her session from the dead node's log."""
    await _killed_mid_trickle(s, stack, extra=("--cluster-sessions", "write-behind", "--batch-window-ms", "10", *LOG),
                              twice_allowed=True)


@scenario
@time_limit(120)
async def the_callee_node_killed_mid_trickle_in_write_behind_with_the_node_log_applies_each_letter_once(s, stack):
    """The callee's node killed -9 mid trickle while its heartbeat counts it alive, as above, with
    the node log: the letters it stored are in its log (dropped from the resume's by the take's
    letter position), the others applied once."""
    await _killed_mid_trickle(s, stack, extra=("--cluster-sessions", "write-behind", "--batch-window-ms", "10",
                                               "--node-expiry", "10", *LOG),
                              twice_allowed=True, victim="callee")


@scenario
@time_limit(150)
async def a_write_behind_node_with_the_node_log_frozen_past_its_lease_while_its_session_resumes_elsewhere_repeats_nothing(
        s, stack):
    """The callee's node frozen past its lease while Bob resumes elsewhere, as above, with the node
    log: the take fences its log, so what it appends on thawing for Bob is refused."""
    await _killed_mid_trickle(s, stack, extra=("--cluster-sessions", "write-behind", "--batch-window-ms", "10", *LOG),
                              twice_allowed=True, victim="callee", freeze=True)


async def _killed_mid_trickle(s, stack, extra, twice_allowed, victim="caller", freeze=False):
    services = {}
    _, nodes = await cluster_of(s, stack, media=False, extra=[*DRIVER_FLAGS, *extra], services=services)
    balancer = stack(await Balancer(s, None, [nodes[0].port, nodes[2].port]).start())
    balanced, fixed = ("alice", "bob") if victim == "caller" else ("bob", "alice")
    sessions = {balanced: Session("127.0.0.1", balancer.port, nodes[0].token(balanced), balanced),
                fixed: Session("127.0.0.1", nodes[1].port, nodes[1].token(fixed), fixed)}
    alice, bob = sessions["alice"], sessions["bob"]
    moving = sessions[balanced]
    frozen = None
    try:
        await alice.start()
        await bob.start()
        call = f"k-{uuid.uuid4()}"
        check(is_ack(await alice.request({"type": "invite", "callId": call, "to": "bob", "video": False,
                                           "offer": {"sdp": "v=0\r\n"}})), "the invite was refused")
        await bob.wait_for_message("invite", callId=call)
        check(is_ack(await bob.request({"type": "accept", "callId": call, "answer": {"sdp": "v=0\r\n"}})),
              "the accept was refused")
        await alice.wait_for_message("accept", callId=call)
        count = 60

        async def trickle(session, base):
            for n in range(count):
                reply = await session.request({"type": "candidate", "callId": call,
                                               "candidate": fake_candidate(base + n)}, timeout=60)
                check(is_ack(reply), f"{session.name}'s candidate {n} got {reply}")
                await asyncio.sleep(0.02)

        tasks = [asyncio.create_task(trickle(alice, 1)), asyncio.create_task(trickle(bob, 1001))]
        await moving.until(lambda: sum(1 for _, m in moving.answers if m.get("type") == "ack") >= 20, 20,
                           f"{moving.name}'s first candidates answered")
        holding = [n for n in (nodes[0], nodes[2]) if await sessions_connected(None, n) > 0]
        check(len(holding) == 1, f"{moving.name}'s session is on {len(holding)} nodes")
        if freeze:
            frozen = holding[0]
            os.kill(frozen.process.proc.pid, signal.SIGSTOP)
            frozen_at = time.time()
            # The client notices nothing by itself (the socket stays open): it drops it and resumes
            # through the balancer (a try on the frozen node gets no welcome and moves on).
            if moving.ws:
                moving.ws.close(1001)
            await moving.until(lambda: len(moving.welcomes) >= 2, 40, f"{moving.name}'s resume elsewhere")
            # Past its lease: node expiry 3 s, the holder stops at two thirds of it.
            await asyncio.sleep(max(0.0, frozen_at + 6 - time.time()))
            os.kill(frozen.process.proc.pid, signal.SIGCONT)
        elif victim == "callee":
            # Bob comes back only after a while (a phone switching networks), well within the dead
            # node's heartbeat: what Alice sends meanwhile waits as letters in the dead node's inbox.
            moving.port = free_port()
            await holding[0].kill9()
            await asyncio.sleep(1.5)
            moving.port = balancer.port
        else:
            await holding[0].kill9()
        await asyncio.wait_for(asyncio.gather(*tasks), 90)

        check(len(moving.welcomes) >= 2, f"{moving.name} never reconnected")
        resumes = [w for _, w in moving.welcomes[1:]]
        check(all(w.get("resumed") and not w.get("resync") for w in resumes),
              f"{moving.name}'s session was not resumed: {resumes}")
        resumed_at = moving.welcomes[1][0]

        def arrivals(session):
            return [(t, m["candidate"]["candidate"]) for t, m in session.inbox
                    if m.get("type") == "candidate" and m.get("callId") == call]

        def candidates_seen(session):
            return [c for _, c in arrivals(session)]

        expected = {"bob": [fake_candidate(1 + n)["candidate"] for n in range(count)],
                    "alice": [fake_candidate(1001 + n)["candidate"] for n in range(count)]}

        def firsts(seen):
            # Write-behind: a candidate may arrive twice across a node's death (protocol.md 4.2).
            return list(dict.fromkeys(seen)) if twice_allowed else seen

        for session in (bob, alice):
            try:
                await session.until(lambda: len(firsts(candidates_seen(session))) >= count, 20,
                                    f"{session.name}'s candidates, each")
            except Failure:
                seen = set(candidates_seen(session))
                missing = [expected[session.name].index(c) for c in expected[session.name] if c not in seen]
                print(f"  {session.name} missing candidates {missing}; last seq {session.last_seq}", flush=True)
                port = str(services["redis"].port)
                meta = subprocess.run(["redis-cli", "-p", port, "HGETALL", f"dt:session:{{{session.session_id}}}:meta"],
                                      capture_output=True, text=True).stdout
                print("  meta: " + meta.replace("\n", " "), flush=True)
                keys = subprocess.run(["redis-cli", "-p", port, "KEYS", "dt:inbox*"], capture_output=True,
                                      text=True).stdout.split()
                for key in keys:
                    entries = subprocess.run(["redis-cli", "-p", port, "XRANGE", key, "-", "+"], capture_output=True,
                                             text=True).stdout
                    print(f"  {key}: {entries.count('unnumbered')} unnumbered", flush=True)
                log = subprocess.run(["redis-cli", "-p", port, "ZRANGE", f"dt:session:{{{session.session_id}}}:log",
                                      "0", "-1"], capture_output=True, text=True).stdout
                print("  log: " + log[-600:].replace("\n", " "), flush=True)
                raise
            check(firsts(candidates_seen(session)) == expected[session.name],
                  f"{session.name} did not get the other's candidates once each, in order")
        # Nothing is applied twice by the nodes that go on: a candidate arrives a second time only
        # if the node that died (or froze) wrote it before storing it.
        for session in (bob, alice):
            later = [c for t, c in arrivals(session) if t >= resumed_at]
            repeated = sorted({c for c in later if later.count(c) > 1})
            check(not repeated, f"{session.name} got {len(repeated)} candidate(s) twice after the resume")
        check(not alice.gaps and not bob.gaps, f"seqs skipped: alice {alice.gaps}, bob {bob.gaps}")
        late = ""
        if frozen:
            log = frozen.scratch.file("server.log")
            await eventually(lambda: "lease lapsed" in open(log, errors="replace").read(), 15,
                             "the thawed node stopping as its lease lapsed")
            text = open(log, errors="replace").read()
            late = "; a batch it had sent was refused" if "Redis refused a batch" in text else \
                "; it had no batch in flight"
        check(is_ack(await alice.request({"type": "hangup", "callId": call}, timeout=20)), "the hang-up was refused")
        ended = await bob.wait_for_message("call-ended", callId=call, timeout=20)
        check(ended.get("reason") == "hangup", f"bob's call ended with {ended}")
        twice = (len(candidates_seen(alice)) - count, len(candidates_seen(bob)) - count)
        print(f"  {moving.name} resumed {len(resumes)} time(s), re-sent {moving.resent}; "
              f"candidates arriving twice: at alice {twice[0]}, at bob {twice[1]}{late}", flush=True)
    finally:
        if frozen and frozen.process.proc.returncode is None:
            os.kill(frozen.process.proc.pid, signal.SIGCONT)
        await alice.close()
        await bob.close()


@scenario
@time_limit(240)
async def write_behind_node_killed_under_a_relayed_load_every_client_resumes_with_nothing_missing(s, stack):
    """Write-behind under a bench-cluster-like relayed load (issue 41 item 4, point 8): 20 calls,
    each side trickling 120 candidates paced to 25 a second (up to 1,000 relayed a second in
    all), one side of each call behind a balancer over nodes 1 and 3 (the caller in even calls,
    the callee in odd ones), the other on node 2. Mid trickle node 1 is killed -9 while its
    heartbeat still counts it alive (`--node-expiry 10`) and its clients stay away 1.5 s, so that
    letters wait in its inbox. Every client that was on it resumes (never resyncs: the resume
    window is 30 s) on node 3; every candidate arrives in order of first arrival, no seq skipped,
    and none twice after a resume (only one the dead node wrote before storing it may come
    again)."""
    await _under_load(s, stack, extra=("--cluster-sessions", "write-behind", "--batch-window-ms", "10",
                                       "--node-expiry", "10"))


@scenario
@time_limit(240)
async def write_behind_node_frozen_under_a_relayed_load_repeats_nothing_and_skips_no_seq(s, stack):
    """The same load; node 1 is frozen (SIGSTOP) mid trickle, its path to Redis (a forwarder)
    frozen a moment before it, so that what its sender sent last (often a batch) is on the way;
    the balanced clients drop their sockets and resume on node 3 (or on node 3 again); the
    forwarder is thawed, and a batch it held lands after those resumes and is refused; node 1 is
    thawed past its lease and stops. Nothing
    of the sessions it lost is sent on or stored: the same checks as the kill."""
    await _under_load(s, stack, extra=("--cluster-sessions", "write-behind", "--batch-window-ms", "10"),
                      freeze=True)


@scenario
@time_limit(240)
async def write_behind_node_with_the_node_log_killed_under_a_relayed_load_every_client_resumes_with_nothing_missing(
        s, stack):
    """The relayed load with node 1 killed -9, as above, with the node log."""
    await _under_load(s, stack, extra=("--cluster-sessions", "write-behind", "--batch-window-ms", "10",
                                       "--node-expiry", "10", *LOG))


@scenario
@time_limit(240)
async def write_behind_node_with_the_node_log_frozen_under_a_relayed_load_repeats_nothing_and_skips_no_seq(s, stack):
    """The relayed load with node 1 and its path to Redis frozen, as above, with the node log: its
    late appends are refused by the takes."""
    await _under_load(s, stack, extra=("--cluster-sessions", "write-behind", "--batch-window-ms", "10", *LOG),
                      freeze=True)


async def _under_load(s, stack, extra, freeze=False, pairs=50, count=200, interval=0.02):
    services = {}
    _, nodes = await cluster_of(s, stack, media=False, extra=[*DRIVER_FLAGS, *extra], services=services,
                                redis_via_proxy=(0,) if freeze else ())
    balancer = stack(await Balancer(s, None, [nodes[0].port, nodes[2].port]).start())
    calls = []  # (call id, caller, callee, the balanced one)
    sessions = []
    victim = nodes[0]
    try:
        for index in range(pairs):
            caller, callee = f"la{index}", f"lb{index}"
            if index % 2 == 0:
                alice = Session("127.0.0.1", balancer.port, nodes[0].token(caller), caller)
                bob = Session("127.0.0.1", nodes[1].port, nodes[1].token(callee), callee)
                moving = alice
            else:
                alice = Session("127.0.0.1", nodes[1].port, nodes[1].token(caller), caller)
                bob = Session("127.0.0.1", balancer.port, nodes[0].token(callee), callee)
                moving = bob
            sessions += [alice, bob]
            await alice.start()
            await bob.start()
            call = f"l-{uuid.uuid4()}"
            check(is_ack(await alice.request({"type": "invite", "callId": call, "to": callee, "video": False,
                                               "offer": {"sdp": "v=0\r\n"}})), "an invite was refused")
            await bob.wait_for_message("invite", callId=call)
            check(is_ack(await bob.request({"type": "accept", "callId": call, "answer": {"sdp": "v=0\r\n"}})),
                  "an accept was refused")
            await alice.wait_for_message("accept", callId=call)
            calls.append((call, alice, bob, moving))
        balanced = [m for _, _, _, m in calls]
        check(await sessions_connected(None, victim) > 0, "no balanced client is on node 1")

        async def trickle(call, session, base):
            for n in range(count):
                reply = await session.request({"type": "candidate", "callId": call,
                                               "candidate": fake_candidate(base + n)}, timeout=90)
                check(is_ack(reply), f"{session.name}'s candidate {n} got {reply}")
                await asyncio.sleep(interval)

        started = time.time()
        tasks = [asyncio.create_task(trickle(call, side, base)) for call, alice, bob, _ in calls
                 for side, base in ((alice, 1), (bob, 1001))]
        await balanced[0].until(lambda: sum(1 for _, m in balanced[0].answers if m.get("type") == "ack") >= 40, 30,
                                "the first candidates answered")
        if freeze:
            # Node 1 reaches Redis through a forwarder: frozen a moment before node 1, it holds the
            # batch node 1 sent last (and anything else it sent), which reaches Redis only when the
            # forwarder is thawed, after every client resumed elsewhere: late, it must be refused.
            proxy = services[("redis proxy", 0)].process.proc.pid
            os.kill(proxy, signal.SIGSTOP)
            await asyncio.sleep(0.3)
            os.kill(victim.process.proc.pid, signal.SIGSTOP)
            frozen_at = time.time()
            for moving in balanced:
                if moving.ws:
                    moving.ws.close(1001)
            for moving in balanced:
                await moving.until(lambda m=moving: len(m.welcomes) >= 2, 60, f"{moving.name}'s resume")
            os.kill(proxy, signal.SIGCONT)
            await asyncio.sleep(max(0.0, frozen_at + 6 - time.time()))
            os.kill(victim.process.proc.pid, signal.SIGCONT)
        else:
            away = free_port()
            for moving in balanced:
                moving.port = away
            await victim.kill9()
            await asyncio.sleep(1.5)
            for moving in balanced:
                moving.port = balancer.port
        await asyncio.wait_for(asyncio.gather(*tasks), 150)
        elapsed = time.time() - started
        moved = [m for m in balanced if len(m.welcomes) >= 2]
        check(moved, "no client reconnected")
        for moving in moved:
            resumes = [w for _, w in moving.welcomes[1:]]
            check(all(w.get("resumed") and not w.get("resync") for w in resumes),
                  f"{moving.name}'s session was not resumed: {resumes}")

        def arrivals(session, call):
            return [(t, m["candidate"]["candidate"]) for t, m in session.inbox
                    if m.get("type") == "candidate" and m.get("callId") == call]

        twice = 0
        for call, alice, bob, moving in calls:
            expected = {bob.name: [fake_candidate(1 + n)["candidate"] for n in range(count)],
                        alice.name: [fake_candidate(1001 + n)["candidate"] for n in range(count)]}
            for session in (alice, bob):
                await session.until(lambda s_=session: len(set(c for _, c in arrivals(s_, call))) >= count, 30,
                                    f"{session.name}'s candidates, each")
                seen = [c for _, c in arrivals(session, call)]
                check(list(dict.fromkeys(seen)) == expected[session.name],
                      f"{session.name} did not get the other's candidates in order of first arrival")
                twice += len(seen) - count
                resumed_at = moving.welcomes[1][0] if len(moving.welcomes) >= 2 else 0
                later = [c for t, c in arrivals(session, call) if t >= resumed_at]
                repeated = sorted({c for c in later if later.count(c) > 1})
                check(not repeated, f"{session.name} got {len(repeated)} candidate(s) twice after the resume")
                check(not session.gaps, f"{session.name}'s seqs skipped: {session.gaps}")
        late = ""
        if freeze:
            log = victim.scratch.file("server.log")
            await eventually(lambda: "lease lapsed" in open(log, errors="replace").read(), 15,
                             "the thawed node stopping as its lease lapsed")
            text = open(log, errors="replace").read()
            # What the frozen forwarder held may be a batch (refused when it lands late) or another
            # job of node 1's sender (an answer to a forwarded request that waited for its batch,
            # an acknowledgement): then the thawed node, its lease lapsed, drops its queue and sends
            # no batch late. A late batch that landed would show above, as a candidate twice or a seq
            # skipped; that the refusal itself works is WriteBehindClusterTests' (HeldSender).
            late = (f"; node 1 after the thaw: {text.count('Redis refused a batch')} batch(es) refused, "
                    f"{text.count('lease lapsed')} lease lapse(s) logged")
        for call, alice, bob, _ in calls:
            check(is_ack(await alice.request({"type": "hangup", "callId": call}, timeout=30)), "a hang-up was refused")
            await bob.wait_for_message("call-ended", callId=call, timeout=20)
        relayed = 2 * pairs * count
        print(f"  {relayed} candidates relayed in {elapsed:.1f} s ({relayed / elapsed:.0f}/s); "
              f"{len(moved)} of {len(balanced)} balanced clients reconnected, "
              f"re-sent {sum(m.resent for m in balanced)}; candidates arriving twice: {twice}{late}", flush=True)
    finally:
        if freeze and victim.process.proc.returncode is None:
            os.kill(victim.process.proc.pid, signal.SIGCONT)
        if freeze and ("redis proxy", 0) in services:
            os.kill(services[("redis proxy", 0)].process.proc.pid, signal.SIGCONT)
        for session in sessions:
            await session.close()


@scenario
@time_limit(150)
async def a_rolling_restart_of_every_node_fails_no_call_set_up(s, stack):
    """Six caller/callee pairs of raw protocol clients make short calls back to back through a
    round-robin TCP balancer over three nodes, while each node in turn gets SIGTERM and is started
    again. Clients on a draining node reconnect at once to another, resume their sessions there and
    re-send what was unanswered; the calls the node ran are taken over by the others. Every call whose
    invite was acknowledged is set up (its accept acknowledged) and ends in the history as the
    clients saw it, once."""
    _, nodes = await cluster_of(s, stack, media=False, extra=DRIVER_FLAGS)
    balancer = stack(await Balancer(s, None, [n.port for n in nodes]).start())
    driver = stack(CallDriver("127.0.0.1", balancer.port, nodes[0].token, pairs=6, total=240, prefix="r",
                              hold=(0.2, 0.6)))
    await driver.start()
    driver.run()
    restarts = []
    for node in nodes:
        await asyncio.sleep(1.5)
        check(not driver.done.is_set(), f"the calls were over after {len(restarts)} restarts")
        restarts.append(time.time())
        status = await node.terminate()
        check(status == 0, f"a node exited {status} on SIGTERM")
        await node.restart()
    await driver.wait(90)
    await driver.end_unfinished()
    histories = await settled_histories(nodes[0], driver)
    save_log(s, driver, restarts=restarts)
    problems = history_problems(driver, histories)
    failed = [c.call_id for c in driver.calls.values() if "invite" in c.acked and "accept" not in c.acked]
    if failed:
        problems["invite acknowledged but never set up"] = failed
    check(not driver.errors, f"the driver's script failed: {driver.errors[:3]}")
    check(not problems, f"{summary(problems)} [{driver_stats(driver)}]")
    print(f"  rolling restart: {driver_stats(driver)}", flush=True)



async def _calls_while(s, stack, restart, prefix, extra=()):
    """A steady stream of scripted calls (raw protocol clients, through a balancer over three
    nodes) while `restart(services)` runs: the driver, the moment it returned, the problems the
    histories show with what the clients saw acknowledged, and the sessions' skipped seqs."""
    services = {}
    _, nodes = await cluster_of(s, stack, media=False, extra=[*DRIVER_FLAGS, *extra], services=services)
    balancer = stack(await Balancer(s, None, [n.port for n in nodes]).start())
    driver = stack(CallDriver("127.0.0.1", balancer.port, nodes[0].token, pairs=4, total=10_000, prefix=prefix,
                              hold=(0.2, 0.6)))
    await driver.start()
    driver.run()
    await asyncio.sleep(2)
    check(driver.acked_count("accept") > 0, "no call was set up before the restart")
    await restart(services)
    back = time.time()
    # Calls are set up again: 20 accepts acknowledged after the restart, then no new call starts.
    deadline = time.time() + 45
    while time.time() < deadline and sum(1 for c in driver.calls.values() if c.acked.get("accept", 0) > back) < 20:
        await asyncio.sleep(0.5)
    driver.total = driver.started
    await driver.wait(60)
    await driver.end_unfinished()
    histories = await settled_histories(nodes[0], driver, timeout=20)
    save_log(s, driver, back=back)
    after = sum(1 for c in driver.calls.values() if c.acked.get("accept", 0) > back)
    check(after >= 20, f"only {after} calls were set up after the restart [{driver_stats(driver)}]")
    problems = history_problems(driver, histories)
    gaps = {x.name: x.gaps for x in driver.sessions if x.gaps}
    check(not driver.errors, f"the driver's script failed: {driver.errors[:3]}")
    check(not gaps, f"sessions skipped seqs: {gaps}")
    check(not problems, f"{summary(problems)} [{driver_stats(driver)}]")
    return driver, back


@scenario
@time_limit(150)
async def redis_restarted_under_calls_means_errors_or_resyncs_never_a_gap(s, stack):
    """Redis is killed under a steady stream of calls and started again empty 2 s later (as
    without persistence). While it is away, hellos and requests get errors and sockets close with
    4503; once it is back every node notices the lost state and closes its sockets (4503), and
    every device reconnects with `resync` (its session is gone), never `resumed`, and makes calls
    again. No session skips a seq, and what the clients saw acknowledged is in the histories."""
    went_down = []

    async def restart(services):
        went_down.append(time.time())
        await services["redis"].restart(down=2)

    driver, _ = await _calls_while(s, stack, restart, "x")
    for session in driver.sessions:
        # Nothing can open a session while Redis is away: every welcome since it went down is of a
        # session opened since (a resync), or a resume of one of those.
        later = [w for t, w in session.welcomes if t > went_down[0]]
        check(later, f"{session.name} was not closed when Redis came back empty")
        fresh = {w.get("sessionId") for w in later if not w.get("resumed")}
        check(later[0].get("resync") and all(w.get("sessionId") in fresh for w in later if w.get("resumed")),
              f"{session.name} resumed a session Redis no longer had: "
              f"{[(w.get('sessionId'), w.get('resumed'), w.get('resync')) for w in later]}")
    closes = sum(1 for x in driver.sessions for _, what in x.history if what.startswith("closed 4503"))
    print(f"  redis restart: {closes} sockets closed with 4503; {driver_stats(driver)}", flush=True)


@scenario
@time_limit(150)
async def postgres_restarted_under_calls_delays_answers_and_loses_none(s, stack):
    """PostgreSQL is killed under a steady stream of calls and started again 2 s later. Meanwhile
    invites are refused with `internal` (a call id cannot be checked; the client may try again)
    and the changes of calls in progress wait in each node's journal, their answers with them.
    Afterwards every request the clients saw acknowledged is in the histories as they saw it, no
    session skips a seq, and calls are set up again."""
    async def restart(services):
        await services["postgres"].restart(down=2)

    driver, _ = await _calls_while(s, stack, restart, "y")
    refused = sum(1 for c in driver.calls.values() if c.refused.get("invite"))
    print(f"  postgres restart: {refused} invites refused meanwhile; {driver_stats(driver)}", flush=True)


@scenario
@time_limit(90)
async def a_node_frozen_past_its_lease_cannot_overwrite_the_call_its_successor_took_over(s, stack):
    """Raw protocol clients on two nodes: Alice on node 1, which runs her call to Bob (on node 2).
    Node 1 is frozen (SIGSTOP) while the call rings; Alice's hang-up waits unread in its socket.
    Node 2 takes the call over when Bob accepts it (node 1 stopped beating) and runs it from then on.
    Node 1 is thawed: it reads Alice's hang-up as the call's owner it no longer is, and its journal
    write of that end (cancelled) is refused, because node 2's take-over raised the call's epoch in
    PostgreSQL. Bob's hang-up through node 2 is what the history keeps."""
    _, nodes = await cluster_of(s, stack, count=2, media=False, extra=DRIVER_FLAGS)
    alice = Session("127.0.0.1", nodes[0].port, nodes[0].token("alice"), "alice")
    bob = Session("127.0.0.1", nodes[1].port, nodes[1].token("bob"), "bob")
    frozen = nodes[0].process.proc
    try:
        await alice.start()
        await bob.start()
        call = f"f-{uuid.uuid4()}"
        check(is_ack(await alice.request({"type": "invite", "callId": call, "to": "bob", "video": False,
                                           "offer": {"sdp": "v=0\r\n"}})), "the invite was refused")
        await bob.wait_for_message("invite", callId=call)
        check(is_ack(await bob.request({"type": "ringing", "callId": call})), "bob's ringing was refused")
        await asyncio.sleep(0.5)  # node 1's journal has the call

        os.kill(frozen.pid, signal.SIGSTOP)
        # Alice hangs up; node 1 reads it only when it wakes up.
        stale_hangup = asyncio.create_task(alice.request({"type": "hangup", "callId": call}, timeout=60))
        await asyncio.sleep(6)  # past node 1's expiry (3 s without a heartbeat)
        accepted = await bob.request({"type": "accept", "callId": call, "answer": {"sdp": "v=0\r\n"}}, timeout=30)
        check(is_ack(accepted), f"node 2 did not take the call over for bob's accept: {accepted}")
        os.kill(frozen.pid, signal.SIGCONT)

        refused = "refused a write of call " + call
        log = nodes[0].scratch.file("server.log")
        await eventually(lambda: refused in open(log, errors="replace").read() or "lost the lease of call " + call
                         in open(log, errors="replace").read(), 15, "node 1 noticing it no longer runs the call")
        wrote_late = refused in open(log, errors="replace").read()
        await asyncio.sleep(1)
        check(is_ack(await bob.request({"type": "hangup", "callId": call}, timeout=20)), "bob's hang-up was refused")

        records = []
        for _ in range(30):
            records = [c for c in await nodes[1].calls(nodes[1].token("bob")) if c.get("callId") == call]
            if records:
                break
            await asyncio.sleep(0.5)
        check([r.get("endReason") for r in records] == ["hangup"] and records[0].get("answeredBy"),
              f"the history keeps the frozen node's late write: {records}")
        stale_hangup.cancel()
        print(f"  node 1 {'wrote late and was refused' if wrote_late else 'noticed the lost lease first'}", flush=True)
    finally:
        if frozen.returncode is None:
            os.kill(frozen.pid, signal.SIGCONT)
        await alice.close()
        await bob.close()


@scenario
@time_limit(150)
async def a_shard_primary_killed_under_calls_means_errors_or_resyncs_never_a_gap(s, stack):
    """Three nodes on a three-shard Redis Cluster (a replica per shard): one shard's primary is
    killed under a steady stream of calls, and its replica takes its slots over about 2 s later.
    Meanwhile the steps on that shard wait or fail (sessions they broke resync); afterwards calls
    are set up again, no session skips a seq, and what the clients saw acknowledged is in the
    histories: every write a client saw had reached the replica (WAIT) before the answer."""
    killed = []

    async def kill(services):
        killed.append(await services["redis"].kill_primary())

    token = _ON_REDIS_CLUSTER.set(True)
    try:
        # A node whose heartbeat key is on the killed shard cannot beat until the replica takes
        # over (~2.5 s with a 1 s cluster-node-timeout): its expiry must outlast that, or the other
        # nodes take its calls over while it still runs them (deploy.md, Redis Cluster).
        driver, _ = await _calls_while(s, stack, kill, "k", extra=["--node-expiry", "6"])
    finally:
        _ON_REDIS_CLUSTER.reset(token)
    resyncs = sum(1 for x in driver.sessions for _, w in x.welcomes if w.get("resync"))
    print(f"  primary :{killed[0]} killed: {resyncs} resyncs; {driver_stats(driver)}", flush=True)


# The cluster's calls again on a Redis Cluster: audio across three nodes, and a node killed
# mid-trickle (every candidate once, in order). DIALTONE_E2E_REDIS=cluster runs them all there.
scenario(on_a_redis_cluster(a_call_across_three_nodes_has_audio_both_ways))
scenario(on_a_redis_cluster(the_caller_node_killed_mid_trickle_every_candidate_arrives_once_in_order))


async def _cluster_with_janus(s, stack):
    """Three nodes as `cluster_of`, each with a Janus of its own (as each would have on its own
    host, Janus's API on loopback), all in one MediaNamespace. Returns (ns, nodes, januses)."""
    ns = stack(await MediaNamespace().start())
    postgres = stack(await ScratchPostgres(s, ns.NS).start())
    redis = stack(await ScratchRedis(s, ns.NS).start())
    nodes, januses = [], []
    for index in range(3):
        janus = stack(await Janus(_NodeScratch(s, index + 1), ns).start())
        node = Server(s, netns=ns.NS, extra=["--database-url", postgres.url, "--redis-url", redis.url,
                                             "--node-name", f"n{index + 1}", "--log-level",
                                             os.environ.get("DIALTONE_E2E_CLUSTER_LOG", "info"),
                                             *janus.server_args()])
        node.scratch = _NodeScratch(s, index + 1)
        nodes.append(stack(await node.start()))
        januses.append(janus)
    return ns, nodes, januses


def _group_member(s, stack, ns, url, token, user, *flags, command="answer"):
    return stack(Softphone(s, f"{user}-cli", [command, "--server", url, "--token", token, "--record",
                                              s.file(f"{user}.wav"), *flags], netns=ns.NS))


async def _a_group_call_outlives_its_node(s, stack, drain, extra=()):
    """Alice (through a balancer over nodes 1 and 3) rings Bob and Carol (both on node 2) into a
    group call, which runs on Alice's node and its Janus; everyone hears everyone. That node
    stops: killed with its Janus (`drain` False: the host died) or SIGTERM (`drain`: a deploy;
    it closes its Janus rooms and hands its calls over). Alice's socket resumes on the other
    node, a surviving node takes the call over from the shared journal, makes its room again on
    its own Janus, and every device publishes and subscribes afresh (group-media with restart:
    connection): everyone hears everyone again, nobody was rung again, nobody left the call.
    Measured: the node stopped -> every listener decodes 1 s more of every speaker. `extra`: the
    members' softphone flags (`--no-multistream`: one connection per participant)."""
    ns, nodes, januses = await _cluster_with_janus(s, stack)
    balancer = stack(await Balancer(s, ns.NS, [nodes[0].port, nodes[2].port]).start())
    tones = {"alice": 550, "bob": 440, "carol": 660}
    bob = _group_member(s, stack, ns, nodes[1].url, nodes[1].token("bob", device="cli"), "bob", "--auto",
                        "--tone-frequency", str(tones["bob"]), *extra)
    carol = _group_member(s, stack, ns, nodes[1].url, nodes[1].token("carol", device="cli"), "carol", "--auto",
                          "--tone-frequency", str(tones["carol"]), *extra)
    for peer in (bob, carol):
        await peer.start()
        await peer.wait_for("note", text="waiting for a call")
    await asyncio.sleep(0.5)  # their presence reaches Redis
    alice = _group_member(s, stack, ns, balancer.url, nodes[0].token("alice", device="cli"), "alice", "--to",
                          "bob,carol", "--tone-frequency", str(tones["alice"]), "--duration", "120", "--end-for-all",
                          *extra, command="group call")
    await alice.start()
    everyone = {"alice": alice, "bob": bob, "carol": carol}
    for name, peer in everyone.items():
        for other in everyone:
            if other != name:
                await peer.wait_for(f"first-audio {other}", timeout=30)
    pairs = [(peer, [o for o in everyone if o != name]) for name, peer in everyone.items()]
    rates = await audio_rates(pairs)
    check(all(rate > 0 for rate in rates.values()), f"not everyone hears everyone before the kill: {rates}")

    # The call runs where Alice created it: on the node holding her session.
    holding = [i for i in (0, 2) if await sessions_connected(ns.NS, nodes[i]) > 0]
    check(len(holding) == 1, f"alice's session is on {len(holding)} nodes")
    dead = holding[0]
    loop = asyncio.get_running_loop()
    killed = loop.time()
    if drain:
        check(await nodes[dead].terminate() == 0, "the draining node did not exit 0")
    else:
        await nodes[dead].kill9()
        await januses[dead].process.stop()
    # What was on its way when the media died has played out by then.
    await asyncio.sleep(1.5)
    await hearing_grows_by(pairs, rates, seconds=1, within=60)
    gap = loop.time() - killed
    print(f"  {'per-feed' if extra else 'multistream'}: node {'drained (SIGTERM)' if drain else 'killed with its Janus'}"
          f" -> 1 s more audio decoded every way: {gap:.1f} s", flush=True)
    # It stays back: 3 s more every way.
    await hearing_grows_by(pairs, rates, seconds=3, within=20)

    survivors = [n for i, n in enumerate(nodes) if i != dead]
    took_over = [n for n in survivors if "took over 1 group call(s)" in open(n.scratch.file("server.log")).read()]
    check(len(took_over) == 1, f"{len(took_over)} surviving nodes took the group call over")
    for name, peer in everyone.items():
        check(not peer.has("ended"), f"{name}'s call ended at the node's death")
        check(peer.count("start") == 1, f"{name} was rung again ({peer.count('start')} starts)")
        for other in everyone:
            check(not peer.has("participant", user=other, state="left"), f"{name} saw {other} leave")
    await hang_up(alice, *everyone.values())
    for peer in (bob, carol):
        check(peer.find("ended")["reason"] == "ended", f"{peer.name}: the creator's end did not reach it")
    for name in everyone:
        heard_everyone_else(s, tones, name)


@scenario
@time_limit(200)
async def a_group_call_outlives_its_node_killed_with_its_janus(s, stack):
    """Issue 38 item 4: the node running a group call and its Janus are killed (SIGKILL); see
    _a_group_call_outlives_its_node."""
    await _a_group_call_outlives_its_node(s, stack, drain=False)


@scenario
@time_limit(200)
async def a_group_call_outlives_its_node_drained(s, stack):
    """Issue 38 item 4: the node running a group call drains (SIGTERM, a deploy); see
    _a_group_call_outlives_its_node."""
    await _a_group_call_outlives_its_node(s, stack, drain=True)


@scenario
@time_limit(200)
async def a_group_call_on_per_feed_connections_outlives_its_node(s, stack):
    """Issue 38 item 4 with one connection per participant (`--no-multistream`): every `feed-…`
    stream of the dead room ends at the device, and the new room's come as new streams; see
    _a_group_call_outlives_its_node."""
    await _a_group_call_outlives_its_node(s, stack, drain=False, extra=("--no-multistream",))


@scenario
@time_limit(200)
async def a_browser_in_a_group_call_outlives_the_calls_node(s, stack):
    """Issue 38 item 4 with the browser page (softphone.html, one subscriber connection): Carol's
    page on node 2 is in Alice's call (Alice through the balancer, Bob on node 2). Alice's node
    and its Janus are killed: the page publishes from a fresh connection and gets a fresh
    subscriber connection from the new room (`group-media` with `restart: connection`), hears
    Alice and Bob again and is heard by both, without leaving the call."""
    ns, nodes, januses = await _cluster_with_janus(s, stack)
    balancer = stack(await Balancer(s, ns.NS, [nodes[0].port, nodes[2].port]).start())
    tones = {"alice": 550, "bob": 440, "carol": 660}

    def make_member(user, *flags, **kw):
        # Alice comes through the balancer (to node 1 or 3), Bob to node 2 with the page.
        node, url = (nodes[0], balancer.url) if user == "alice" else (nodes[1], nodes[1].url)
        return _group_member(s, stack, ns, url, node.token(user, device="cli"), user, *flags, **kw)

    alice, members, page, _ = await a_page_in_alices_call(
        s, stack, make_member, f"{nodes[1].url}/#token={nodes[1].token('carol', 'browser')}", ns.NS, tones,
        duration=120, presence=0.5)
    bob = members["bob"]
    around = [(alice, ["bob", "carol"]), (bob, ["alice", "carol"])]
    rates = await audio_rates(around)
    check(all(rate > 0 for rate in rates.values()), f"not everyone hears everyone before the kill: {rates}")
    before = (await page.page_state())["group"]["connections"]

    holding = [i for i in (0, 2) if await sessions_connected(ns.NS, nodes[i]) > 0]
    check(len(holding) == 1, f"alice's session is on {len(holding)} nodes")
    await nodes[holding[0]].kill9()
    await januses[holding[0]].process.stop()
    await asyncio.sleep(1.5)
    await hearing_grows_by(around, rates, seconds=1, within=60)
    state = await page.wait_for("alice and bob again, on fresh connections",
                                lambda st: st["group"]["connections"] >= before + 2
                                and page_hears({"alice": tones["alice"], "bob": tones["bob"]})(st))
    check(state["group"]["state"] == "joined" and not state.get("groupEnded"), f"the page left the call: {state}")
    check(state["group"]["receivers"] == 1, f"the page has {state['group']['receivers']} receiving connections")
    check(bob.count("start") == 1 and not bob.has("ended"), "bob was rung again or his call ended")
    await hang_up(alice, bob)
    await page.wait_for("the end of the call", lambda st: st.get("groupEnded"))
