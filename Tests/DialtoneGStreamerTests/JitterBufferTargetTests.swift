import Testing

@testable import DialtoneGStreamer

@Suite struct JitterBufferTargetTests {
  /// Packet `i` of a 20 ms stream (960 RTP ticks at 48 kHz), sent at i × 20 ms and arriving
  /// `late(i)` ms after that.
  private func feed(
    _ target: inout JitterBufferTarget, packets: Range<Int>, firstTimestamp: UInt32 = 0, late: (Int) -> Int = { _ in 0 }
  ) {
    for i in packets {
      target.arrival(
        sequence: UInt16(truncatingIfNeeded: i), rtpTimestamp: firstTimestamp &+ UInt32(i * 960),
        at: .milliseconds(i * 20 + late(i)))
    }
  }

  @Test func theLatencyRisesAtOnceToTheSpreadOfArrivals() {
    var target = JitterBufferTarget()
    #expect(target.latencyMs == JitterBufferTarget.startMs)
    // Every fifth packet 60 ms late: the 98th percentile is 60 ms, plus 5 ms of headroom.
    feed(&target, packets: 0..<150) { $0 % 5 == 0 ? 60 : 0 }
    #expect(target.tick(now: .milliseconds(3000), lateArrivals: 0) == 65)
    #expect(target.latencyMs == 65)
  }

  @Test func theLatencyFallsOnlyAfterItWasTooHighForAWhileAndAStepAtATime() {
    var target = JitterBufferTarget()
    var changes: [Int: Int] = [:]
    // On time throughout: 20 ms would do, 40 is 20 too many.
    for tick in 0..<48 {
      let now = 3000 + tick * 250
      feed(&target, packets: (now - 250) / 20..<now / 20)
      if let changed = target.tick(now: .milliseconds(now), lateArrivals: 0) { changes[now] = changed }
    }
    // Four seconds after it was first too high, one 10 ms step; then 30 is within 15 ms of
    // the target and stays.
    #expect(changes == [7000: 30])
    #expect(target.latencyMs == 30)
  }

  @Test func packetsTheBufferThrewAwayAsLateAddAStep() {
    var target = JitterBufferTarget()
    feed(&target, packets: 0..<150)
    #expect(target.tick(now: .milliseconds(3000), lateArrivals: 2) == 60)
  }

  @Test func secondCopiesTheBufferCountsAsLateAreNotLate() {
    // Reordering: every tenth packet is 50 ms late, and RED's copy of it (with the packet two
    // later, 40 ms after its time) comes first. rtpjitterbuffer plays the copy and counts the
    // original as late, as it would a packet that missed its place.
    var target = JitterBufferTarget()
    var originals: UInt64 = 0
    for i in 0..<150 where i % 10 != 0 {
      let at = Duration.milliseconds(i * 20)
      if i % 10 == 2 {
        target.arrival(sequence: UInt16(i - 2), rtpTimestamp: UInt32((i - 2) * 960), at: at, recovered: true)
      }
      target.arrival(sequence: UInt16(i), rtpTimestamp: UInt32(i * 960), at: at)
    }
    for i in stride(from: 0, to: 150, by: 10) {
      target.arrival(sequence: UInt16(i), rtpTimestamp: UInt32(i * 960), at: .milliseconds(i * 20 + 50))
      originals += 1
    }
    // The spread (the late originals: 50 ms, plus 5) and no step for the 15 "late" ones.
    #expect(target.tick(now: .milliseconds(3000), counts: .init(late: originals, duplicates: 0)) == 55)
    // One packet that really came too late adds a step.
    #expect(target.tick(now: .milliseconds(3250), counts: .init(late: originals + 1, duplicates: 0)) == 75)
  }

  @Test func whileRedRepairsTheLatencyCoversItsCopies() {
    // Bursty loss on a path without jitter: packets 100–102 lost; RED's copies of 101 and 102
    // come with 103 and 104, 40 ms after their time. Too few for the 98th percentile of the
    // window, but the latency must wait for them.
    var target = JitterBufferTarget(fixedMs: nil)
    feed(&target, packets: 0..<100)
    for i in 103..<150 {
      let at = Duration.milliseconds(i * 20)
      if i == 103 || i == 104 {
        target.arrival(sequence: UInt16(i - 2), rtpTimestamp: UInt32((i - 2) * 960), at: at, recovered: true)
      }
      target.arrival(sequence: UInt16(i), rtpTimestamp: UInt32(i * 960), at: at)
    }
    #expect(target.tick(now: .milliseconds(3000), lateArrivals: 0) == 45)
    // Ten seconds after the last copy the hold ends, and the latency comes down step by step.
    var now = 3000
    var i = 150
    while now < 20_000 {
      now += 250
      while i * 20 < now {
        target.arrival(sequence: UInt16(i), rtpTimestamp: UInt32(i * 960), at: .milliseconds(i * 20))
        i += 1
      }
      _ = target.tick(now: .milliseconds(now), lateArrivals: 0)
      if now < 2080 + 10_000 { #expect(target.latencyMs == 45) }
    }
    #expect(target.latencyMs < 45)
  }

  @Test func aCopyWhoseOriginalCameAfterRepairedNothing() {
    // Reordering alone: packet 101 comes 45 ms late, after RED's copy of it (with 103). The copy
    // repaired nothing, so once the window has forgotten them, nothing holds the latency up.
    var target = JitterBufferTarget()
    feed(&target, packets: 0..<101)
    feed(&target, packets: 102..<103)
    target.arrival(sequence: 101, rtpTimestamp: 101 * 960, at: .milliseconds(103 * 20), recovered: true)
    feed(&target, packets: 103..<104)
    target.arrival(sequence: 101, rtpTimestamp: 101 * 960, at: .milliseconds(101 * 20 + 45))
    feed(&target, packets: 104..<250)
    #expect(target.tick(now: .milliseconds(5000), counts: .init(late: 1, duplicates: 0)) == nil)
    #expect(target.latencyMs == JitterBufferTarget.startMs)
  }

  @Test func theFirstSecondsBurstIsNotCounted() {
    var target = JitterBufferTarget()
    // The first second's packets all at once (as after DTLS), then on time.
    for i in 0..<50 { target.arrival(sequence: UInt16(i), rtpTimestamp: UInt32(i * 960), at: .zero) }
    feed(&target, packets: 50..<150)
    #expect(target.tick(now: .milliseconds(3000), lateArrivals: 0) == nil)
    #expect(target.latencyMs == JitterBufferTarget.startMs)
  }

  @Test func timestampsThatWrapAreUnwrapped() {
    var target = JitterBufferTarget()
    feed(&target, packets: 0..<150, firstTimestamp: UInt32.max - 960 * 100)
    #expect(target.tick(now: .milliseconds(3000), lateArrivals: 0) == nil)
    #expect(target.latencyMs == JitterBufferTarget.startMs)
  }

  @Test func aFixedLatencyNeverMovesAndIsBounded() {
    var target = JitterBufferTarget(fixedMs: 80)
    feed(&target, packets: 0..<150) { $0 % 2 == 0 ? 200 : 0 }
    #expect(target.tick(now: .milliseconds(3000), lateArrivals: 10) == nil)
    #expect(target.latencyMs == 80)
    #expect(JitterBufferTarget(fixedMs: 5000).latencyMs == JitterBufferTarget.maximumMs)
  }

  @Test func theLatencyNeverPassesTheMaximum() {
    var target = JitterBufferTarget()
    feed(&target, packets: 0..<150) { $0 % 2 == 0 ? 400 : 0 }
    #expect(target.tick(now: .milliseconds(3400), lateArrivals: 0) == JitterBufferTarget.maximumMs)
  }
}

@Suite struct PlayoutTimelineTests {
  private let ms: UInt64 = 1_000_000
  private let chunk = 960  // 20 ms at 48 kHz

  @Test func audioInTimeIsWrittenAsItCame() {
    var timeline = PlayoutTimeline()
    for k in 0..<50 {
      let placement = timeline.place(count: chunk, arrived: 1_000 * ms + UInt64(k * 20) * ms, delay: 60 * ms)
      #expect(placement == .init(silence: 0, kept: 0..<chunk), "chunk \(k)")
    }
    #expect(timeline.start == 1_060 * ms)
    #expect(timeline.written == 50 * chunk)
  }

  @Test func aStallStaysInTheRecordingAndWhatCameTooLateIsSkipped() {
    var timeline = PlayoutTimeline()
    for k in 0..<10 { _ = timeline.place(count: chunk, arrived: UInt64(k * 20) * ms, delay: 60 * ms) }
    // Chunks 10...19 were due from 200 ms on and all come at 400 ms: the device played
    // silence from 200 ms (when the queue ran dry) and waits for the 60 ms queue again.
    let resumed = timeline.place(count: chunk, arrived: 400 * ms, delay: 60 * ms)
    #expect(resumed.silence == 10 * chunk)
    #expect(resumed.kept == 0..<chunk)
    // The rest of the burst is beyond the queue's target and slack: skipped, not played late.
    for _ in 11..<20 {
      #expect(timeline.place(count: chunk, arrived: 400 * ms, delay: 60 * ms).kept.isEmpty)
    }
    // The recording is as long as the time that passed: 340 ms played, 60 ms queued, one chunk.
    #expect(timeline.written == (340 + 60 + 20) * 48)
  }

  @Test func aLongerDelayIsWaitedForWithSilence() {
    var timeline = PlayoutTimeline()
    _ = timeline.place(count: chunk, arrived: 0, delay: 40 * ms)
    let placement = timeline.place(count: chunk, arrived: 20 * ms, delay: 80 * ms)
    #expect(placement.silence == 40 * 48)
  }

  @Test func theEndIsSilenceUpToWhenTheCallEnded() {
    var timeline = PlayoutTimeline()
    #expect(timeline.finish(at: 5 * ms) == 0)
    _ = timeline.place(count: chunk, arrived: 0, delay: 60 * ms)
    // Started at 60 ms; at 1060 ms one second has played, 20 ms of it audio.
    #expect(timeline.finish(at: 1_060 * ms) == 48_000 - chunk)
    #expect(timeline.written == 48_000)
    #expect(timeline.place(count: 0, arrived: 2_000 * ms, delay: 0) == .init(silence: 0, kept: 0..<0))
  }
}
