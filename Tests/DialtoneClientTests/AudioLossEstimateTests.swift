import DialtoneClient
import Testing

@Suite struct AudioLossEstimateTests {
  @Test func lossRisesAtOnceAndFallsSlowly() {
    var estimate = AudioLossEstimate()
    #expect(estimate.report(fractionLost: 0) == 0)
    #expect(estimate.report(fractionLost: 0.2) == 20)
    #expect(estimate.report(fractionLost: 0) == 15)
    #expect(estimate.report(fractionLost: 0) == 12)
    #expect(estimate.report(fractionLost: 0.3) == 30)
  }

  @Test func nonsenseIsIgnoredAndTheCeilingHolds() {
    var estimate = AudioLossEstimate()
    #expect(estimate.report(fractionLost: 0.9) == AudioLossEstimate.ceiling)
    var other = AudioLossEstimate()
    #expect(other.report(fractionLost: -1) == 0)
    #expect(other.report(fractionLost: .nan) == 0)
    #expect(other.report(fractionLost: 2) == 0)
    #expect(other.report(fractionLost: 0.0005) == 0)
    #expect(other.report(fractionLost: 0.004) == 1)
  }
}
