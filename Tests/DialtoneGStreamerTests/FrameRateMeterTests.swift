import Testing

@testable import DialtoneGStreamer

struct FrameRateMeterTests {
  @Test func theRateIsTheFramesOfTheLastSecond() {
    var meter = FrameRateMeter()
    #expect(meter.framesPerSecond(at: 5) == 0)
    for i in 0..<60 { meter.frame(at: Double(i) / 30) }  // 30 fps for two seconds
    #expect(meter.framesPerSecond(at: 59.0 / 30 + 0.01) == 30)
    #expect(meter.framesPerSecond(at: 2.5) == 14)  // the stream stopped half a second ago: frames 46 to 59
    #expect(meter.framesPerSecond(at: 4) == 0)  // frozen
  }

  @Test func aFastStreamKeepsABoundedHistory() {
    var meter = FrameRateMeter()
    for i in 0..<1000 { meter.frame(at: Double(i) / 500) }  // 500 fps: more than it keeps
    #expect(meter.framesPerSecond(at: 999.0 / 500) == Double(FrameRateMeter.capacity))
  }
}
