"""Tests of bench/netns_pair.py's parts that need no namespace or root: the namespaces' and the delay
link's command lines as each bench starts them, a CLI's event stream (read from a stand-in child), and run_main's
cleanup.

    python3 -m unittest bench/test_netns_pair.py
"""
import asyncio
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_pair  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class LinkCommandTests(unittest.TestCase):
    def test_the_commands_the_two_benches_started_before(self):
        pair = netns_pair.NamespacePair("dtq-a", "10.85.0.1", "dtq-b", "10.85.0.2", 18980)
        link = os.path.join(HERE, "delay_link.py")
        # bench/quality_bench.py: niced, told the signaling's port.
        self.assertEqual(pair.link_command(["--signaling-port", "18980", "--rtt-ms", "40"], nice=-5),
                         ["nice", "-n", "-5", sys.executable, link, "--ns-a", "dtq-a", "--ns-b", "dtq-b",
                          "--signaling-port", "18980", "--rtt-ms", "40"])
        # bench/video_bench.py: as it is.
        self.assertEqual(pair.link_command(["--rtt-ms", "50", "--loss", "0.0"]),
                         [sys.executable, link, "--ns-a", "dtq-a", "--ns-b", "dtq-b", "--rtt-ms", "50", "--loss", "0.0"])


class NamespaceCommandTests(unittest.TestCase):
    """make() and remove() run these commands: the media benches' (IPv6 off) and, with `ipv6`,
    bench/setup_bench.py's, as each built them before the pair was shared."""

    def commands(self, pair, method):
        ran = []
        saved = netns_pair.sh
        netns_pair.sh = lambda *args, check=True: ran.append(list(args))
        try:
            getattr(pair, method)()
        finally:
            netns_pair.sh = saved
        return ran

    @staticmethod
    def expected(ns_a, addr_a, ns_b, addr_b, ipv6):
        commands = [["ip", "netns", "del", ns_a], ["ip", "netns", "del", ns_b]]
        for ns, addr in ((ns_a, addr_a), (ns_b, addr_b)):
            commands += [["ip", "netns", "add", ns], ["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"]]
            if not ipv6:
                commands.append(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                                 "net.ipv6.conf.default.disable_ipv6=1"])
            commands += [["ip", "netns", "exec", ns, "ip", "tuntap", "add", "dev", "dt0", "mode", "tun"],
                         ["ip", "netns", "exec", ns, "ip", "addr", "add", f"{addr}/24", "dev", "dt0"],
                         ["ip", "netns", "exec", ns, "ip", "link", "set", "dt0", "up"]]
        return commands

    def test_media_benches_turn_ipv6_off(self):
        pair = netns_pair.NamespacePair("dtq-a", "10.85.0.1", "dtq-b", "10.85.0.2", 18980)
        self.assertEqual(self.commands(pair, "make"),
                         self.expected("dtq-a", "10.85.0.1", "dtq-b", "10.85.0.2", ipv6=False))

    def test_the_setup_bench_keeps_ipv6_and_its_link(self):
        import setup_bench
        pair = setup_bench.PAIR
        self.assertEqual(self.commands(pair, "make"),
                         self.expected("dtbench-a", "10.77.0.1", "dtbench-b", "10.77.0.2", ipv6=True))
        self.assertEqual(self.commands(pair, "remove"),
                         [["ip", "netns", "del", "dtbench-a"], ["ip", "netns", "del", "dtbench-b"]])
        # The delay link's command line as bench/setup_bench.py built it before.
        self.assertEqual(pair.link_command(setup_bench.link_arguments(50.0, 0.02)),
                         [sys.executable, os.path.join(HERE, "delay_link.py"), "--ns-a", "dtbench-a", "--ns-b",
                          "dtbench-b", "--rtt-ms", "50.0", "--loss", "0.02"])


LINES = ['{"event":"note","text":"waiting for a call"}', "not json", "[1, 2]",
         '{"event":"video-count","frames":7}', '{"event":"connected","ms":12}', '{"event":"connected","ms":30}']


class StandIn(netns_pair.CLIEvents):
    """Prints LINES instead of running the CLI in a namespace; keeps what on_event saw."""

    def __init__(self, scratch, clock):
        super().__init__("stand-in", "no-namespace", [], scratch)
        self.clock = clock
        self.seen = []

    def command(self, extra=()):
        return [sys.executable, "-c", "import sys; print(sys.argv[1])", "\n".join(LINES), *extra]

    def on_event(self, now, event):
        self.seen.append(event.get("event"))


class CLIEventsTests(unittest.TestCase):
    def run_stand_in(self, clock):
        async def go(scratch):
            peer = StandIn(scratch, clock)
            await peer.start()
            found = await peer.wait_for("connected", 10, ms=30)
            await peer.proc.wait()
            await peer.reader
            return peer, found

        with tempfile.TemporaryDirectory() as scratch:
            peer, found = asyncio.run(go(scratch))
            with open(os.path.join(scratch, "stand-in.log")) as log:
                logged = log.read().splitlines()
        return peer, found, logged

    def test_events_are_the_json_objects_in_order_with_the_clocks_time(self):
        for clock in (time.monotonic, time.time):
            before = clock()
            peer, found, logged = self.run_stand_in(clock)
            self.assertEqual([e for _, e in peer.events],
                             [{"event": "note", "text": "waiting for a call"}, {"event": "video-count", "frames": 7},
                              {"event": "connected", "ms": 12}, {"event": "connected", "ms": 30}])
            self.assertTrue(all(before <= t <= clock() for t, _ in peer.events))
            self.assertEqual(peer.seen, ["note", "video-count", "connected", "connected"])
            self.assertEqual(found[1], {"event": "connected", "ms": 30})
            # Every line is logged with its time, JSON or not.
            self.assertEqual([line.split(" ", 1)[1] for line in logged], LINES)

    def test_find_matches_fields_and_time(self):
        peer, _, _ = self.run_stand_in(time.monotonic)
        self.assertEqual(peer.find("connected")[1]["ms"], 12)
        self.assertEqual(peer.find("note", text="waiting for a call")[1]["event"], "note")
        self.assertIsNone(peer.find("note", text="other"))
        self.assertIsNone(peer.find("connected", after=peer.events[-1][0] + 1))

    def test_wait_for_gives_up_when_the_child_is_done(self):
        async def go(scratch):
            peer = StandIn(scratch, time.monotonic)
            await peer.start()
            # Its own timeout is an hour: only the child's end can stop it within the outer bound.
            with self.assertRaises(netns_pair.BenchError):
                await asyncio.wait_for(peer.wait_for("ended", 3600), 60)
            await peer.proc.wait()

        with tempfile.TemporaryDirectory() as scratch:
            asyncio.run(go(scratch))


class RunMainTests(unittest.TestCase):
    def test_cleanup_runs_after_main(self):
        order = []

        async def main():
            order.append("main")

        netns_pair.run_main(main, lambda: order.append("cleanup"))
        self.assertEqual(order, ["main", "cleanup"])

    def test_cleanup_runs_when_main_fails(self):
        order = []

        async def main():
            raise ValueError("boom")

        with self.assertRaises(ValueError):
            netns_pair.run_main(main, lambda: order.append("cleanup"))
        self.assertEqual(order, ["cleanup"])


if __name__ == "__main__":
    unittest.main()
