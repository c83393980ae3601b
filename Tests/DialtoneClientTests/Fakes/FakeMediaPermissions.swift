import DialtoneClient
import DialtoneSupport

/// The OS's microphone and camera permissions, scripted: what each is now, and what the user
/// answers when asked (nil: the prompt could not be shown, the state stays undetermined).
final class FakeMediaPermissions: MediaPermissions, Sendable {
  private struct State: Sendable {
    var current: [MediaDevice: MediaAuthorization]
    var answers: [MediaDevice: MediaAuthorization]
    var asked: [MediaDevice] = []
  }
  private let state: Locked<State>

  init(
    microphone: MediaAuthorization, camera: MediaAuthorization = .granted,
    answers: [MediaDevice: MediaAuthorization] = [:]
  ) {
    state = Locked(State(current: [.microphone: microphone, .camera: camera], answers: answers))
  }

  /// Every prompt shown, in order.
  var asked: [MediaDevice] { state.withLock { $0.asked } }

  func authorization(for device: MediaDevice) -> MediaAuthorization {
    state.withLock { $0.current[device] ?? .notDetermined }
  }

  func requestAccess(to device: MediaDevice) async -> MediaAuthorization {
    state.withLock { state in
      guard state.current[device] == .notDetermined else { return state.current[device] ?? .notDetermined }
      state.asked.append(device)
      let answer = state.answers[device] ?? .notDetermined
      state.current[device] = answer
      return answer
    }
  }
}
