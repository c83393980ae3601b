import Testing

@testable import DialtoneNet

/// The coalescing timer's schedule, in virtual nanoseconds.
struct CoalescingScheduleTests {
  @Test func theFirstHeldMessageArmsTheTimerForItsDeadline() {
    var schedule = CoalescingSchedule()
    #expect(schedule.held(until: 30) == 30)
    #expect(schedule.armedUntil == 30)
  }

  @Test func laterMessagesDoNotReArmATimerThatExpiresSooner() {
    var schedule = CoalescingSchedule()
    _ = schedule.held(until: 30)
    #expect(schedule.held(until: 31) == nil)
    #expect(schedule.held(until: 45) == nil)
    #expect(schedule.armedUntil == 30)
  }

  @Test func anExpiryWithMessagesLeftWaitsForTheOldestOfThem() {
    var schedule = CoalescingSchedule()
    _ = schedule.held(until: 30)
    _ = schedule.held(until: 45)
    #expect(schedule.expired(oldest: 45) == 45)
    #expect(schedule.armedUntil == 45)
    #expect(schedule.held(until: 50) == nil)
  }

  @Test func anExpiryWithNothingHeldLeavesTheTimerIdle() {
    var schedule = CoalescingSchedule()
    _ = schedule.held(until: 30)
    #expect(schedule.expired(oldest: nil) == nil)
    #expect(schedule.armedUntil == nil)
    // The next message held arms it again.
    #expect(schedule.held(until: 80) == 80)
  }

  @Test func anEarlierDeadlineThanTheArmedOneReArms() {
    var schedule = CoalescingSchedule()
    _ = schedule.held(until: 30)
    #expect(schedule.held(until: 20) == 20)
  }
}
