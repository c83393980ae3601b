import CLibWebSockets
import DialtoneSupport
import Foundation

/// Coalesced sends: a message sent with `sendCoalesced` waits, already framed, for the next
/// message to its socket and leaves in the same write, or leaves alone once its wait ends.
///
/// A held message is due 3/4 of `coalescingDelay` after it was held. Every received message
/// releases what is due, which costs nothing extra on a busy loop. For quiet spells the loop
/// waits on a timer of its own (a timerfd in its event loop, `CoalescingSchedule` says when),
/// kept between an eighth and a quarter of the delay past the oldest held message's deadline:
/// under traffic it is moved on now and then (a system call, no wake-up) and does not expire,
/// and in a quiet spell its expiry is one more event on the network thread, with no timer thread
/// and no wake-up hop, so no message waits longer than the delay. Holdings
/// whose frames already left with a later message are skipped, not waited for. Not an lws sul timer: lws on
/// libuv re-polls with a zero timeout until a sul is ripe, which spins the loop for up to a
/// millisecond per expiry. Not a dispatch timer either: each of its ticks woke libdispatch's
/// manager thread and a worker thread (futexes and context switches on a loaded machine).
extension ServerRole {
  func hold(_ bytes: [UInt8], on session: ServerWebSocket, loop: ServiceLoop) {
    guard coalescingDelay > 0, let timer = coalescingTimer(on: loop) else {
      return session.enqueue(bytes, binary: false, on: loop)
    }
    guard session.enqueueCoalesced(bytes, binary: false, on: loop) else { return }
    let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(coalescingDelay * 0.75e9)
    let held = HeldFrames(session: session, holding: session.holdings, deadline: deadline)
    changeHolding { $0.append(held) }
    // Only the oldest held message sets the timer: a later one changes it only when it is the first.
    if holding.count == 1 || coalescingSchedule.armedUntil == nil { oldestMoved(timer) }
  }

  /// The loop's coalescing timer, adopted into its event loop at the first hold (on the network
  /// thread); nil when it cannot be made (messages then leave at once).
  private func coalescingTimer(on loop: ServiceLoop) -> OpaquePointer? {
    if let timer = coalescingTimerWSI { return timer }
    guard !coalescingTimerFailed, let context = loop.context else { return nil }
    coalescingTimerWSI = dt_lws_adopt_timer(context)
    coalescingTimerFailed = coalescingTimerWSI == nil
    return coalescingTimerWSI
  }

  /// The timer expired: what is due leaves, the holdings whose frames already left are dropped,
  /// and the timer waits for the oldest holding left, or is disarmed. Either consumes the expiry
  /// (`dt_lws_timer_disarm`): one system call per expiry, not a read of the descriptor as well.
  func coalescingTimerExpired(_ timer: OpaquePointer, on loop: ServiceLoop) {
    coalescingTimerExpiries &+= 1
    sendDue(on: loop)
    dropLeftHoldings()
    apply(coalescingSchedule.expired(oldest: holding.first?.deadline), to: timer)
  }

  /// The oldest held message changed (one left, or the first was held): the timer follows it
  /// (`CoalescingSchedule.oldestMoved`), which under traffic seldom takes a system call.
  private func oldestMoved(_ timer: OpaquePointer) {
    dropLeftHoldings()
    if let change = coalescingSchedule.oldestMoved(to: holding.first?.deadline) { apply(change, to: timer) }
  }

  /// Holdings at the head whose frames already left: the timer is not set for them.
  private func dropLeftHoldings() {
    while let first = holding.first, !first.isLive { changeHolding { $0.popFirst() } }
  }

  private func apply(_ change: CoalescingSchedule.Change, to timer: OpaquePointer) {
    switch change {
    case .arm(let expiry):
      let now = DispatchTime.now().uptimeNanoseconds
      _ = dt_lws_timer_arm(timer, expiry > now ? expiry - now : 0)
    case .disarm:
      _ = dt_lws_timer_disarm(timer)
    }
  }

  /// Writes the held frames that are due: one write per socket. Holdings whose frames already
  /// left (with a later message, or handed to a close) are skipped, as are sockets closed
  /// meanwhile (their messages stay in their delivery sessions for a resume). Runs for every
  /// message received: it reads only the list's head until something is due.
  func releaseCoalesced(on loop: ServiceLoop) {
    guard !holding.isEmpty, sendDue(on: loop), let timer = coalescingTimerWSI else { return }
    oldestMoved(timer)
  }

  /// Writes the held frames that are due; true when any holding left the list.
  @discardableResult
  private func sendDue(on loop: ServiceLoop) -> Bool {
    let now = DispatchTime.now().uptimeNanoseconds
    var left = false
    while let due = holding.first, due.deadline <= now {
      changeHolding { $0.popFirst() }
      left = true
      if due.isLive { due.session.flushHeld(on: loop) }
    }
    return left
  }

  /// Changes `holding` on the queue moved out of the property and back. An access to the
  /// property spanning the queue's own calls (which may free what they drop: code the optimiser
  /// cannot see through) made every access to it a runtime exclusivity check, the read of
  /// `isEmpty` every received message makes included. `change` only changes the queue.
  @discardableResult
  private func changeHolding<Result>(_ change: (inout FIFOQueue<HeldFrames>) -> Result) -> Result {
    var queue = FIFOQueue<HeldFrames>()
    swap(&queue, &holding)
    defer { swap(&queue, &holding) }
    return change(&queue)
  }
}

/// One socket's frames held for company, with the time their wait ends.
struct HeldFrames {
  let session: ServerWebSocket
  /// Which holding of the socket's these are (`ServerWebSocket.holdings`).
  let holding: UInt32
  let deadline: UInt64

  /// Still open (a socket's connection links back to it until it closes: no look-up by id) and
  /// still holding the frames this holding began with.
  var isLive: Bool { session.connection.socket === session && session.isHolding(holding) }
}
