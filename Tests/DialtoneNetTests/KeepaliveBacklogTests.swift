import Testing

@testable import DialtoneNet

/// A sweep's pings leave with traffic, a few per received message, or a slice per loop pass
/// when the loop is quiet; oldest first, none lost and none twice.
@Suite struct KeepaliveBacklogTests {
  @Test func trafficCarriesOneOrAFewPerMessage() {
    var backlog = KeepaliveBacklog()
    for id in 1...10_000 as ClosedRange<UInt64> { backlog.owe(id) }
    #expect(backlog.piggyback() == [1, 2])  // 10,000 owed: one, plus one per 8,192
    var carried = 2
    var messages = 1
    while !backlog.isEmpty {
      carried += backlog.piggyback().count
      messages += 1
    }
    #expect(carried == 10_000)
    #expect(messages > 5_000)  // spread over thousands of messages, not one burst
    var big = KeepaliveBacklog(sliceSize: 128)
    for id in 1...1_100_000 as ClosedRange<UInt64> { big.owe(id) }
    #expect(big.piggybackCount == 128)  // never more than a slice
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
