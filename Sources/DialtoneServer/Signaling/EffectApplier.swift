import DialtoneCalls
import DialtoneProtocol
import DialtoneSFU
import DialtoneSessions
import DialtoneSupport
import Foundation

/// Carries out what the desk decided: messages to devices and users (their sessions here, or the
/// cluster's store wherever they are), timers, the SFU's work, and call events for pushes and
/// metrics. Runs on the hub's thread.
final class EffectApplier {
  private let registry: SessionRegistry
  private let store: (any SessionStore)?
  private let sfu: (any SFUBackend)?
  private let remote: any RemoteDevices
  private let sink: any CallEffectSink
  private let clock: any DialtoneClock
  private let mailbox: HubMailbox
  private var timers: [CallTimer: any ScheduledAction] = [:]

  init(
    registry: SessionRegistry, store: (any SessionStore)?, sfu: (any SFUBackend)?, remote: any RemoteDevices,
    sink: any CallEffectSink, clock: any DialtoneClock, mailbox: HubMailbox
  ) {
    self.registry = registry
    self.store = store
    self.sfu = sfu
    self.remote = remote
    self.sink = sink
    self.clock = clock
    self.mailbox = mailbox
  }

  func apply(_ effects: [CallEffect]) {
    for effect in effects {
      switch effect {
      case .send(let message, .device(let userId, let deviceId)):
        deliver(message, toDevice: deviceId, of: userId)
      case .send(let message, .user(let userId, let exceptDevice)):
        deliver(message, toUser: userId, except: exceptDevice)
      case .schedule(let timer, let delay):
        timers[timer]?.cancel()
        timers[timer] = mailbox.post(.callTimer(timer), after: delay, on: clock)
      case .cancel(let timer):
        timers.removeValue(forKey: timer)?.cancel()
      case .external(let event):
        remote.dispatch(event, connectedHere: registry.connectedDeviceIDs(of: event.userId), to: sink)
      case .sfu(let command):
        sfu?.perform(command)
      case .persist:
        break  // written by the journal before these effects were applied
      }
    }
  }

  /// A timer that fired is no longer held.
  func fired(_ timer: CallTimer) { timers.removeValue(forKey: timer) }

  /// A device's session here, or wherever else in the cluster it has one.
  func deliver(_ message: ServerMessage, toDevice deviceId: String, of userId: String) {
    if let store {
      store.deliver(message, to: userId, device: deviceId, skipping: [])
    } else {
      registry.session(of: userId, device: deviceId)?.deliver(message)
    }
  }

  private func deliver(_ message: ServerMessage, toUser userId: String, except exceptDevice: String?) {
    if let store {
      store.deliver(message, to: userId, device: nil, skipping: exceptDevice.map { [$0] } ?? [])
      return
    }
    let sessions = registry.sessions(of: userId)
    guard !sessions.isEmpty else { return }
    let excluded = exceptDevice.map { sessions[$0] == nil ? 0 : 1 } ?? 0
    if sessions.count - excluded == 1 {
      // The usual case, one device: encoding it straight away saves the template's copy.
      for (deviceId, session) in sessions where deviceId != exceptDevice { session.deliver(message) }
    } else {
      // Encoded once for all of the user's devices; each copy only gets its own seq.
      let frame = ServerFrame(message)
      for (deviceId, session) in sessions where deviceId != exceptDevice { session.deliver(frame) }
    }
  }
}
