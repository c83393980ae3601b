import Testing

@testable import DialtoneNet

/// The coalescing timer's schedule, in virtual nanoseconds (a 40-unit delay: held for 30, a
/// quarter delay of 10 between expiries).
struct CoalescingScheduleTests {
  @Test func theFirstHeldMessageArmsTheTimerForItsDeadline() {
    var schedule = CoalescingSchedule(minimumGap: 10)
    #expect(schedule.held(until: 30) == 30)
    #expect(schedule.armedUntil == 30)
  }

  @Test func laterMessagesDoNotReArmATimerThatExpiresSooner() {
    var schedule = CoalescingSchedule(minimumGap: 10)
    _ = schedule.held(until: 30)
    #expect(schedule.held(until: 31) == nil)
    #expect(schedule.held(until: 45) == nil)
    #expect(schedule.armedUntil == 30)
  }

  @Test func anExpiryWithMessagesLeftWaitsForTheOldestOfThem() {
    var schedule = CoalescingSchedule(minimumGap: 10)
    _ = schedule.held(until: 30)
    _ = schedule.held(until: 45)
    #expect(schedule.expired(oldest: 45, now: 30) == 45)
    #expect(schedule.armedUntil == 45)
    #expect(schedule.held(until: 50) == nil)
  }

  /// Under traffic the oldest message left is due moments after the expiry: waking for each
  /// would be a wake-up per message, so the next expiry is a quarter delay later at the soonest.
  @Test func expiriesAreAtLeastTheMinimumGapApart() {
    var schedule = CoalescingSchedule(minimumGap: 10)
    _ = schedule.held(until: 30)
    #expect(schedule.expired(oldest: 31, now: 30) == 40)
    #expect(schedule.expired(oldest: 41, now: 40) == 50)
    #expect(schedule.held(until: 75) == nil)
  }

  @Test func anExpiryWithNothingHeldLeavesTheTimerIdle() {
    var schedule = CoalescingSchedule(minimumGap: 10)
    _ = schedule.held(until: 30)
    #expect(schedule.expired(oldest: nil, now: 30) == nil)
    #expect(schedule.armedUntil == nil)
    // The next message held arms it again.
    #expect(schedule.held(until: 80) == 80)
  }

  @Test func anEarlierDeadlineThanTheArmedOneReArms() {
    var schedule = CoalescingSchedule(minimumGap: 10)
    _ = schedule.held(until: 30)
    #expect(schedule.held(until: 20) == 20)
  }
}
