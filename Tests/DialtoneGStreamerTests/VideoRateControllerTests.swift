import DialtoneGStreamer
import Testing

@Suite struct VideoRateControllerTests {
  private func report(_ loss: Double, rtt: Double? = 0.05) -> VideoRateController.Report {
    .init(fractionLost: loss, roundTripTime: rtt)
  }

  @Test func heavyLossCutsTheRateByHalfTheLoss() {
    var c = VideoRateController(start: 600_000)
    #expect(c.update(report(0.2)) == 540_000)
    #expect(c.update(report(0.5)) == 405_000)
  }

  // Until the first congestion a clean link grows the rate by 25 % a report, then by 8 %.
  @Test func aCleanLinkGrowsTheRateUpToTheMaximum() {
    var c = VideoRateController(start: 600_000, maximum: 2_000_000)
    #expect(c.update(report(0)) == 750_000)
    #expect(c.probing)
    #expect(c.update(report(0.2)) == 675_000)
    #expect(!c.probing)
    #expect(c.update(report(0.01)) == 729_000)
    for _ in 0..<30 { _ = c.update(report(0)) }
    #expect(c.target == 2_000_000)
  }

  @Test func moderateLossHolds() {
    var c = VideoRateController(start: 600_000)
    #expect(c.update(report(0.05)) == 600_000)
  }

  @Test func aGrowingQueueLowersTheRateBeforeLoss() {
    var c = VideoRateController(start: 600_000)
    _ = c.update(report(0, rtt: 0.05))
    #expect(c.baseRoundTripTime == 0.05)
    #expect(c.update(report(0, rtt: 0.3)) == 637_500)  // 750,000 × 0.85
    #expect(!c.probing)
    #expect(c.baseRoundTripTime == 0.05)
  }

  @Test func theRateNeverLeavesItsBoundsWhateverTheReports() {
    var c = VideoRateController(start: 5_000_000, minimum: 100_000, maximum: 1_500_000)
    #expect(c.target == 1_500_000)
    for _ in 0..<50 { _ = c.update(report(1.0)) }
    #expect(c.target == 100_000)
    #expect(c.update(report(-3, rtt: -1)) == 108_000)  // nonsense is clamped, not trusted
  }

  private func sample(_ loss: Double?, lostSoFar: Int64 = 0, nacks: UInt64, packets: UInt64)
    -> VideoRateController.Sample
  {
    .init(
      fractionLost: loss, roundTripTime: 0.05, cumulativeLost: lostSoFar, nacksReceived: nacks, packetsSent: packets)
  }

  // A report is used once: webrtcbin repeats the latest until the next one comes.
  @Test func aRepeatedReportIsUsedOnce() {
    var c = VideoRateController(start: 600_000)
    #expect(c.observe(sample(0.2, lostSoFar: 10, nacks: 0, packets: 100)) == 540_000)
    #expect(c.observe(sample(0.2, lostSoFar: 10, nacks: 0, packets: 110)) == nil)  // too few packets for NACKs
    #expect(c.observe(sample(0.2, lostSoFar: 25, nacks: 0, packets: 200)) == 486_000)  // a new report
  }

  // Between reports, the NACK rate (counted double: one NACK may name several packets) is the loss.
  @Test func nacksStandForTheLossBetweenReports() {
    var c = VideoRateController(start: 600_000)
    #expect(c.observe(sample(nil, nacks: 0, packets: 0)) == nil)
    #expect(c.observe(sample(nil, nacks: 10, packets: 100)) == 540_000)  // 20 % → down 10 %
    #expect(c.observe(sample(nil, nacks: 10, packets: 200)) == 583_200)  // no NACKs: up 8 %
    #expect(c.observe(sample(0.01, nacks: 30, packets: 300)) == 466_560)  // the worse of the two: 40 %
    // A few NACKs (late packets) between reports do not hold the rate back.
    #expect(c.observe(sample(0.01, nacks: 33, packets: 400)) == 503_884)  // 6 % → counts as clean
    // Counters that go backwards (a fresh connection) are not a rate.
    #expect(c.observe(sample(0.01, nacks: 0, packets: 10)) == nil)
  }
}
