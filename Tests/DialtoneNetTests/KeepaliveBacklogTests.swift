import Testing

@testable import DialtoneNet

/// A sweep's pings leave with traffic, a few per received message, or a slice per loop pass
/// when the loop is quiet; oldest first, none lost and none twice.
@Suite struct KeepaliveBacklogTests {
  @Test func trafficCarriesTheOwedPingsAcrossTheInterval() {
    var backlog = KeepaliveBacklog()
    for id in 1...2_000 as ClosedRange<UInt64> { backlog.owe(id) }
    backlog.planDrain(expectedMessages: 5_000)  // 0.5 pings per message
    var carried: [UInt64] = []
    var messages = 0
    while !backlog.isEmpty {
      let slice = backlog.piggyback()
      #expect(slice.count <= 1)
      carried += slice
      messages += 1
    }
    #expect(carried == Array(1...2_000))
    #expect(messages == 4_000)  // four fifths of the expected traffic
    // A quiet last interval: each message that comes carries a few, never a whole slice (it
    // would wait behind them), and the sweep drains the rest.
    var quiet = KeepaliveBacklog(sliceSize: 128, maxPerMessage: 4)
    for id in 1...1_000 as ClosedRange<UInt64> { quiet.owe(id) }
    quiet.planDrain(expectedMessages: 0)
    let perMessage = (0..<3).map { _ in quiet.piggyback().count }
    #expect(perMessage == [4, 4, 4])
    #expect(quiet.nextSlice().count == 128)
  }

  @Test func phasesSpreadDueSocketsAndNeverDelayPastTheLimit() {
    // The defaults: sweeps of 5 s, pings after 25 s, dead after 75 s.
    let phases = KeepaliveBacklog.phases(pingIntervalTicks: 5, idleTimeoutTicks: 15)
    #expect(phases == 5)
    // Ten thousand sockets gone quiet together: each sweep owes about a fifth of them.
    for tick: UInt32 in 100..<105 {
      let due = (0..<10_000 as Range<UInt64>).filter {
        KeepaliveBacklog.isDue(id: $0, idle: 5, tick: tick, pingIntervalTicks: 5, phases: phases)
      }
      #expect(due.count == 2_000)
    }
    // Whatever its phase, a socket is owed its ping within `phases` sweeps of falling due.
    for id: UInt64 in 0..<20 {
      let owedAt = (5...9 as ClosedRange<UInt32>).first {
        KeepaliveBacklog.isDue(id: id, idle: $0, tick: 1_000 + $0, pingIntervalTicks: 5, phases: phases)
      }
      #expect(owedAt != nil)
    }
    #expect(!KeepaliveBacklog.isDue(id: 0, idle: 4, tick: 0, pingIntervalTicks: 5, phases: phases))
    // A tight idle timeout leaves less room to wait.
    #expect(KeepaliveBacklog.phases(pingIntervalTicks: 10, idleTimeoutTicks: 20) == 5)
    #expect(KeepaliveBacklog.phases(pingIntervalTicks: 5, idleTimeoutTicks: 6) == 1)
  }

  @Test func slicesAreBoundedAndInOrder() {
    var backlog = KeepaliveBacklog(sliceSize: 128)
    for id in 1...10_000 as ClosedRange<UInt64> { backlog.owe(id) }
    var slices: [[UInt64]] = []
    while !backlog.isEmpty {
      let slice = backlog.nextSlice()
      #expect(!slice.isEmpty && slice.count <= 128)
      slices.append(slice)
    }
    #expect(slices.count == 79)  // 78 full slices and 16 left over
    #expect(slices.flatMap { $0 } == Array(1...10_000))
    #expect(backlog.nextSlice().isEmpty)
  }

  @Test func owingDuringADrainQueuesBehind() {
    var backlog = KeepaliveBacklog(sliceSize: 2)
    backlog.owe(1)
    backlog.owe(2)
    backlog.owe(3)
    #expect(backlog.nextSlice() == [1, 2])
    backlog.owe(4)
    #expect(backlog.count == 2)
    #expect(backlog.nextSlice() == [3, 4])
  }

  @Test func aSliceIsNeverEmptyWhileSomethingIsOwed() {
    var backlog = KeepaliveBacklog(sliceSize: 0)  // clamped to 1
    backlog.owe(7)
    #expect(backlog.nextSlice() == [7])
  }
}
