import DialtoneClient
import Testing

@Suite struct SpeechQualityEstimateTests {
  @Test func aCleanCallScoresHighAndLossLowersIt() {
    let clean = SpeechQualityEstimate.mos(lossPercent: 0, jitterMs: 1, rttMs: 40, protection: .fec)
    #expect(clean > 4.0 && clean <= 4.5)
    var previous = clean
    for loss in [1.0, 5, 10, 20, 50] {
      let mos = SpeechQualityEstimate.mos(lossPercent: loss, jitterMs: 1, rttMs: 40, protection: .fec)
      #expect(mos < previous, "\(loss) %")
      previous = mos
    }
  }

  @Test func redundancyRepairsMoreThanFECAlone() {
    let fec = SpeechQualityEstimate.mos(lossPercent: 10, jitterMs: 5, rttMs: 40, protection: .fec)
    let red = SpeechQualityEstimate.mos(lossPercent: 10, jitterMs: 5, rttMs: 40, protection: .redundancy)
    #expect(red > fec)
  }

  @Test func burstyLossCostsMoreThanRandomLossOfTheSameRate() {
    let random = SpeechQualityEstimate.mos(lossPercent: 5, jitterMs: 2, rttMs: 40, protection: .redundancy)
    let same = SpeechQualityEstimate.mos(
      lossPercent: 5, jitterMs: 2, rttMs: 40, protection: .redundancy, burstRatio: 1)
    let bursty = SpeechQualityEstimate.mos(
      lossPercent: 5, jitterMs: 2, rttMs: 40, protection: .redundancy, burstRatio: 3)
    #expect(same == random)
    #expect(bursty < random)
    // Nonsense ratios are bounded: below 1 is random loss, no ratio makes a score below 1.
    #expect(
      SpeechQualityEstimate.mos(lossPercent: 5, jitterMs: 2, rttMs: 40, protection: .redundancy, burstRatio: 0.2)
        == random)
    #expect(
      SpeechQualityEstimate.mos(lossPercent: 50, jitterMs: 2, rttMs: 40, protection: .fec, burstRatio: .infinity) >= 1)
  }

  @Test func delayAndJitterCostAndMissingFiguresCountAsNone() {
    let near = SpeechQualityEstimate.mos(lossPercent: 0, jitterMs: 0, rttMs: 20, protection: .fec)
    let far = SpeechQualityEstimate.mos(lossPercent: 0, jitterMs: 0, rttMs: 600, protection: .fec)
    let jittery = SpeechQualityEstimate.mos(lossPercent: 0, jitterMs: 60, rttMs: 20, protection: .fec)
    #expect(far < near)
    #expect(jittery < near)
    #expect(
      SpeechQualityEstimate.mos(lossPercent: nil, jitterMs: nil, rttMs: nil, protection: .fec)
        == SpeechQualityEstimate.mos(lossPercent: 0, jitterMs: 0, rttMs: 0, protection: .fec))
  }

  @Test func theScoreStaysWithinOneToFourAndAHalf() {
    #expect(SpeechQualityEstimate.mos(lossPercent: 100, jitterMs: 10_000, rttMs: 60_000, protection: .fec) >= 1)
    #expect(SpeechQualityEstimate.mos(lossPercent: .nan, jitterMs: -5, rttMs: .infinity, protection: .fec) <= 4.5)
    #expect(SpeechQualityEstimate.mos(rating: -3) == 1)
    #expect(SpeechQualityEstimate.mos(rating: 120) == 4.5)
    #expect(SpeechQualityEstimate.mos(rating: .nan) == 1)
  }
}
