import Testing

@testable import DialtoneGStreamer

@Suite struct FreezeCounterTests {
  @Test func aGapWellOverTheFrameIntervalIsOneFreeze() {
    var counter = FreezeCounter()
    var t = 0.0
    for _ in 0..<30 {
      counter.frame(at: t)
      t += 1.0 / 30
    }
    #expect(counter.freezes == 0)
    t += 0.4  // 0.43 s without a frame at 30 fps
    counter.frame(at: t)
    #expect(counter.freezes == 1)
    for _ in 0..<10 {
      t += 1.0 / 30
      counter.frame(at: t)
    }
    #expect(counter.freezes == 1)
  }

  @Test func aSlowButSteadyStreamDoesNotFreeze() {
    var counter = FreezeCounter()
    for i in 0..<20 { counter.frame(at: Double(i) * 0.2) }  // 5 fps
    #expect(counter.freezes == 0)
    counter.frame(at: 4.1)  // 0.3 s: late, but under max(3 × 0.2, 0.2 + 0.15)
    #expect(counter.freezes == 0)
  }

  @Test func timeGoingBackwardsIsIgnored() {
    var counter = FreezeCounter()
    counter.frame(at: 5)
    counter.frame(at: 4)
    counter.frame(at: 4.03)
    #expect(counter.freezes == 0)
  }
}
