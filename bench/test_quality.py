"""Tests of bench-quality's own parts that need no namespace: the link's loss model and packet
classes, and the scorer's alignment, durations and switch gaps on speech degraded in known ways.

    python3 -m unittest bench/test_quality.py     (needs espeak-ng, sox, numpy, scipy, pesq)
"""
import os
import random
import struct
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import delay_link  # noqa: E402
import quality_score as q  # noqa: E402
import quality_speech  # noqa: E402

RATE = q.RATE


def ipv4(protocol, payload, sport=5000, dport=6000):
    l4 = struct.pack("!HH", sport, dport) + (b"\0" * 4 if protocol == 17 else b"\0" * 16) + payload
    return bytes([0x45, 0]) + struct.pack("!H", 20 + len(l4)) + b"\0" * 5 + bytes([protocol]) + b"\0" * 10 + l4


class LinkTests(unittest.TestCase):
    def test_gilbert_elliott_long_run_loss_and_burst_length(self):
        for loss in (0.05, 0.15):
            chain = delay_link.GilbertElliott(loss, 3.0, random.Random(7))
            drops = [chain.drops() for _ in range(200_000)]
            bursts, run = [], 0
            for dropped in drops:
                if dropped:
                    run += 1
                elif run:
                    bursts.append(run)
                    run = 0
            self.assertAlmostEqual(sum(drops) / len(drops), loss, delta=0.01)
            self.assertAlmostEqual(sum(bursts) / len(bursts), 3.0, delta=0.15)

    def test_packet_classes(self):
        self.assertEqual(delay_link.packet_class(ipv4(17, bytes([0x80, 111]) + b"\0" * 10), 0), "rtp")
        self.assertEqual(delay_link.packet_class(ipv4(17, bytes([0x00, 0x01]) + b"\0" * 18), 0), "stun")
        self.assertEqual(delay_link.packet_class(ipv4(17, bytes([22, 0xFE]) + b"\0" * 11), 0), "dtls")
        self.assertEqual(delay_link.packet_class(ipv4(6, b"", sport=18980), 18980), "tcp-signaling")
        self.assertEqual(delay_link.packet_class(ipv4(6, b"", sport=9), 18980), "tcp")


class ScoreTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp(prefix="dialtone-test-quality-")
        samples = quality_speech.samples(cls.folder, lead=3, tail=0.5)
        cls.reference = q.load(samples["reference"])
        cls.sent = q.load(samples["sent"])
        cls.switch = q.load(samples["switch_reference"])

    def test_a_faithful_recording_scores_high_and_kept_time(self):
        recording = self.sent[RATE:]            # began 1 s into the lead: nothing missed
        result = q.score(self.reference, recording, with_visqol=False)
        self.assertGreater(result["pesq_wb"], 4.4)
        self.assertAlmostEqual(result["duration_ratio"], 1.0, delta=0.002)
        self.assertEqual(result["speech_missed_at_start_s"], 0.0)
        self.assertAlmostEqual(result["offset_first_s"], 2.0, delta=0.02)

    def test_a_recording_that_began_late_is_told(self):
        recording = self.sent[4 * RATE:]        # 1 s after the speech began
        result = q.score(self.reference, recording, with_visqol=False)
        self.assertAlmostEqual(result["speech_missed_at_start_s"], 1.0, delta=0.05)

    def test_a_closed_up_stall_shortens_the_received_duration(self):
        stall = slice(int(8 * RATE), int(9.5 * RATE))   # 1.5 s never written, as the CLI's recorder does
        recording = np.concatenate((self.sent[:stall.start], self.sent[stall.stop:]))
        result = q.score(self.reference, recording, with_visqol=False)
        span = len(self.reference) / RATE - 1.0
        self.assertLess(result["duration_ratio"], 1 - 1.0 / span)

    def test_lost_packets_lower_pesq(self):
        recording = self.sent.copy()
        rng = np.random.default_rng(3)
        for at in range(0, len(recording) - 320, 320):
            if rng.random() < 0.1:
                recording[at:at + 320] = 0
        result = q.score(self.reference, recording, with_visqol=False)
        self.assertLess(result["pesq_wb"], 2.5)

    def test_switch_gap_is_measured_against_the_reference(self):
        cut = np.concatenate((self.switch[:10 * RATE], np.zeros(2 * RATE), self.switch[15 * RATE:]))
        result = q.heard(self.switch, cut)
        self.assertTrue(result["recovered"])
        self.assertAlmostEqual(result["gap_s"], 5.0, delta=0.6)
        self.assertAlmostEqual(result["gap_at_s"], 10.0, delta=0.6)

    def test_speech_that_never_came_back(self):
        result = q.heard(self.switch, self.switch[:10 * RATE])
        self.assertFalse(result["recovered"])
        self.assertGreater(result["unheard_to_end_s"], 20)


if __name__ == "__main__":
    unittest.main()
