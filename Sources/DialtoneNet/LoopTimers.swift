import CLibWebSockets
import DialtoneSupport
import Dispatch
import Foundation
import Synchronization

/// One timer of a network loop (`LoopTimers`): its action runs once, on the loop's thread, at or
/// after its deadline, unless it is cancelled first.
final class LoopTimer: ScheduledAction, @unchecked Sendable {
  // @unchecked: `heapIndex` is only touched on the loop's thread, `done` is atomic, the rest is
  // immutable.
  /// Monotonic nanoseconds (`DispatchTime`'s uptime).
  let deadline: UInt64
  /// Orders timers with equal deadlines: the one scheduled first fires first.
  let sequence: UInt64
  /// Where the timer sits in its loop's heap; -1 when it is in none.
  var heapIndex = -1
  private let action: @Sendable () -> Void
  /// Set by whichever comes first, the firing or the cancelling.
  private let done = Atomic<Bool>(false)
  private let owner: LoopTimers?

  init(deadline: UInt64, sequence: UInt64, owner: LoopTimers?, action: @escaping @Sendable () -> Void) {
    self.deadline = deadline
    self.sequence = sequence
    self.owner = owner
    self.action = action
  }

  func cancel() {
    guard !done.exchange(true, ordering: .acquiringAndReleasing) else { return }
    owner?.cancelled(self)
  }

  /// Runs the action unless it already ran or the timer was cancelled.
  func fire() {
    guard !done.exchange(true, ordering: .acquiringAndReleasing) else { return }
    action()
  }
}

/// The timers of a network loop, for the work that runs on its thread (the signaling hub's ring
/// and grace timers, hello deadlines, session expiries): a heap of deadlines (`TimerHeap`) and
/// one timerfd in the loop's own event loop armed for the earliest, the way the coalescing timer
/// is (`ServerRole+Coalescing`). An expiry is one more event on the network thread: no timer
/// thread, and the action runs where its work is, with no hop back. A dispatch timer instead
/// created a timer source per schedule (waking libdispatch's manager thread), woke a worker at
/// each deadline even when cancelled, and a firing came back through a task to the loop.
///
/// Cancelling on the loop's thread takes the timer out of the heap. The descriptor is left armed
/// (an expiry with nothing due only re-arms it, or disarms it when the heap is empty), so a
/// call's ring timer, scheduled and cancelled in the same second, costs no system call. An
/// expiry costs one: the re-arming or disarming consumes it, the descriptor is never read. Cancelling from another thread only marks the
/// timer; it leaves the heap when its deadline comes, without running.
///
/// When the loop stops, the timers still pending go on a `SystemClock` with what is left of
/// their delay (`handOver`): a timer fires once, or not at all if cancelled, loop or no loop.
final class LoopTimers: @unchecked Sendable {
  // @unchecked: everything but `loopThread` is only touched on the loop's thread; `loopThread`
  // is written once, before the loop's thread makes any timer another thread could cancel.
  private var heap = TimerHeap()
  private var nextSequence: UInt64 = 0
  /// The timerfd's wsi, adopted at the first schedule; nil before, or after lws closed it.
  private(set) var descriptor: OpaquePointer?
  private var descriptorFailed = false
  /// The time the descriptor is armed to expire at; nil when it is not armed.
  private var armedUntil: UInt64?
  /// How many times the descriptor expired (tests: each arming expires once).
  private(set) var expiries = 0
  /// Timers are being fired: schedules wait for the expiry's own re-arming.
  private var expiring = false
  /// The loop has stopped: no more timers here.
  private(set) var handedOver = false
  private var loopThread: pthread_t?

  var pendingCount: Int { heap.count }

  /// Called on the loop's thread as it starts.
  func loopStarted() { loopThread = pthread_self() }

  private var onLoopThread: Bool {
    guard let loopThread else { return false }
    return pthread_equal(loopThread, pthread_self()) != 0
  }

  /// Schedules `action` `nanoseconds` from now; nil when this loop cannot keep the timer (no
  /// descriptor could be made, or the loop has stopped): the caller then schedules it elsewhere.
  /// On the loop's thread only.
  func schedule(
    after nanoseconds: UInt64, in context: OpaquePointer, _ action: @escaping @Sendable () -> Void
  ) -> LoopTimer? {
    guard !handedOver, let wsi = descriptor(in: context) else { return nil }
    let now = DispatchTime.now().uptimeNanoseconds
    let (sum, overflow) = now.addingReportingOverflow(nanoseconds)
    let deadline = overflow ? UInt64.max : sum
    nextSequence += 1
    let timer = LoopTimer(deadline: deadline, sequence: nextSequence, owner: self, action: action)
    heap.insert(timer)
    if !expiring, armedUntil.map({ deadline < $0 }) ?? true { arm(wsi, for: deadline, now: now) }
    return timer
  }

  /// `timer` was cancelled: out of the heap when this is the loop's thread.
  fileprivate func cancelled(_ timer: LoopTimer) {
    guard onLoopThread, !handedOver else { return }
    heap.remove(timer)
  }

  /// The descriptor expired: every timer due runs, in deadline order (equal deadlines in the
  /// order they were scheduled), then the descriptor is armed for the next, or disarmed when none
  /// is left (either consumes the expiry). Timers scheduled by the actions run at the next
  /// expiry, even with no delay, so an action that schedules again cannot keep this loop from
  /// returning.
  func expired() {
    guard descriptor != nil else { return }
    expiries &+= 1
    armedUntil = nil
    expiring = true
    let now = DispatchTime.now().uptimeNanoseconds
    while let first = heap.first, first.deadline <= now {
      heap.popFirst()
      first.fire()
    }
    expiring = false
    // Arming or disarming also consumes the expiry (the descriptor is not read).
    guard let wsi = descriptor else { return }
    if let first = heap.first {
      arm(wsi, for: first.deadline, now: DispatchTime.now().uptimeNanoseconds)
    } else {
      _ = dt_lws_timer_disarm(wsi)
    }
  }

  /// lws closed the descriptor (the context is going).
  func descriptorClosed(_ wsi: OpaquePointer) {
    guard wsi == descriptor else { return }
    descriptor = nil
    armedUntil = nil
  }

  /// The loop has stopped (on what was its thread): the pending timers go on `clock`, each with
  /// what is left of its delay. Their cancelling still works: a cancelled timer's action is not run.
  func handOver(to clock: any DialtoneClock) {
    handedOver = true
    let pending = heap.removeAll().sorted(by: TimerHeap.precedes)
    let now = DispatchTime.now().uptimeNanoseconds
    for timer in pending {
      let left = timer.deadline > now ? timer.deadline - now : 0
      _ = clock.schedule(after: .nanoseconds(Int64(clamping: left))) { timer.fire() }
    }
  }

  private func descriptor(in context: OpaquePointer) -> OpaquePointer? {
    if let descriptor { return descriptor }
    guard !descriptorFailed else { return nil }
    descriptor = dt_lws_adopt_timer(context)
    descriptorFailed = descriptor == nil
    // A descriptor made again after lws closed the last: timers may already wait.
    if let descriptor, let first = heap.first {
      arm(descriptor, for: first.deadline, now: DispatchTime.now().uptimeNanoseconds)
    }
    return descriptor
  }

  private func arm(_ wsi: OpaquePointer, for deadline: UInt64, now: UInt64) {
    armedUntil = deadline
    _ = dt_lws_timer_arm(wsi, deadline > now ? deadline - now : 0)
  }
}
