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

  @Test func aCleanLinkGrowsTheRateUpToTheMaximum() {
    var c = VideoRateController(start: 600_000, maximum: 700_000)
    #expect(c.update(report(0)) == 648_000)
    #expect(c.update(report(0.01)) == 699_840)
    #expect(c.update(report(0)) == 700_000)
  }

  @Test func moderateLossHolds() {
    var c = VideoRateController(start: 600_000)
    #expect(c.update(report(0.05)) == 600_000)
  }

  @Test func aGrowingQueueLowersTheRateBeforeLoss() {
    var c = VideoRateController(start: 600_000)
    _ = c.update(report(0, rtt: 0.05))
    #expect(c.baseRoundTripTime == 0.05)
    #expect(c.update(report(0, rtt: 0.3)) == 550_800)  // 648,000 × 0.85
    #expect(c.baseRoundTripTime == 0.05)
  }

  @Test func theRateNeverLeavesItsBoundsWhateverTheReports() {
    var c = VideoRateController(start: 5_000_000, minimum: 100_000, maximum: 1_500_000)
    #expect(c.target == 1_500_000)
    for _ in 0..<50 { _ = c.update(report(1.0)) }
    #expect(c.target == 100_000)
    #expect(c.update(report(-3, rtt: -1)) == 108_000)  // nonsense is clamped, not trusted
  }
}
