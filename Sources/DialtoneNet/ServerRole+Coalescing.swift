import DialtoneSupport
import Foundation

/// Coalesced sends: a message sent with `sendCoalesced` waits, already framed, for the next
/// message to its socket and leaves in the same write, or leaves alone once its wait ends.
///
/// A held message is due 3/4 of `coalescingDelay` after it was held. Every received message
/// releases what is due, which costs nothing extra on a busy loop. For quiet spells a ticker
/// runs every quarter delay while anything is held, so no message waits longer than the
/// delay, and stops itself after a tick that found nothing; a tick that follows traffic does
/// not wake the loop at all (the traffic did its work). The ticker is a dispatch timer,
/// not an lws sul timer: lws on libuv re-polls with a zero timeout until a sul is ripe, which
/// spins the loop for up to a millisecond per expiry.
extension ServerRole {
  func hold(_ bytes: [UInt8], on session: ServerWebSocket, loop: ServiceLoop) {
    guard let ticker = coalescingTicker else { return session.enqueue(bytes, binary: false, on: loop) }
    guard session.enqueueCoalesced(bytes, binary: false, on: loop) else { return }
    holding.append((session, DispatchTime.now().uptimeNanoseconds + UInt64(coalescingDelay * 0.75e9)))
    if !tickerRunning {
      let period = DispatchTimeInterval.microseconds(Int(coalescingDelay * 250_000))
      ticker.schedule(deadline: .now() + period, repeating: period, leeway: .milliseconds(1))
      tickerRunning = true
    }
  }

  /// Writes the held frames that are due: one write per socket. Sockets closed meanwhile are
  /// skipped (their messages stay in their delivery sessions for a resume). An entry can be
  /// stale (its frames left early with another message, and newer ones are held): those newer
  /// frames then go early.
  func releaseCoalesced(tick: Bool = false, on loop: ServiceLoop) {
    guard !holding.isEmpty else {
      if tick, tickerRunning {
        coalescingTicker?.schedule(deadline: .distantFuture)
        tickerRunning = false
      }
      return
    }
    let now = DispatchTime.now().uptimeNanoseconds
    while let due = holding.first, due.deadline <= now {
      holding.popFirst()
      // Still open: a socket's connection links back to it until it closes (no look-up by id).
      if due.session.connection.socket === due.session { due.session.flushHeld(on: loop) }
    }
  }
}
