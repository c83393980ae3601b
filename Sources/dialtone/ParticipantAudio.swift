import DialtoneGStreamer
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The remote audio of a group call, kept apart per participant: each one's first audio is
/// reported, and with `--record PATH` each one's audio is written to `PATH` with the user id
/// before the extension (`out.wav` → `out-bob.wav`).
final class ParticipantAudio: Sendable {
  private struct State: Sendable {
    var writers: [String: WAVWriter] = [:]
    var heard: Set<String> = []
    /// Bytes of decoded audio received from each participant so far (`audio count`).
    var received: [String: Int] = [:]
    var onFirstAudio: (@Sendable (Peer, ContinuousClock.Instant) -> Void)?
  }
  private let recordPath: String?
  private let state = Locked(State())

  init(recordPath: String?) { self.recordPath = recordPath }

  /// `report` gets the instant the audio arrived (the report may print it later).
  func onFirstAudio(_ report: @escaping @Sendable (Peer, ContinuousClock.Instant) -> Void) {
    state.withLock { $0.onFirstAudio = report }
  }

  /// The sink for one of `participant`'s streams.
  func sink(for participant: Peer) -> @Sendable (RemoteAudio) -> Void {
    let writer: WAVWriter? = recordPath.map { path in
      state.withLock { state in
        if let existing = state.writers[participant.userId] { return existing }
        let made = WAVWriter(path: Self.path(path, for: participant.userId))
        state.writers[participant.userId] = made
        return made
      }
    }
    return { [state] audio in
      writer?.append(audio)
      let first: (@Sendable (Peer, ContinuousClock.Instant) -> Void)? = state.withLock { state in
        state.received[participant.userId, default: 0] += audio.samples.count
        guard state.heard.insert(participant.userId).inserted else { return nil }
        return state.onFirstAudio
      }
      first?(participant, ContinuousClock.now)
    }
  }

  /// Bytes of decoded audio received from each participant so far.
  var received: [String: Int] { state.withLock { $0.received } }

  /// The participant's stream ended (they left, or were removed): their file ends here rather
  /// than run on in silence to the end of the call.
  func streamEnded(_ userId: String) {
    state.withLock { $0.writers[userId] }?.stop()
  }

  /// Writes every participant's file; returns the paths written.
  func finish() throws -> [String] {
    let writers = state.withLock { Array($0.writers.values) }
    for writer in writers { try writer.finish() }
    return writers.map(\.path).sorted()
  }

  static func path(_ path: String, for userId: String) -> String {
    let safe = String(userId.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" })
    let url = URL(fileURLWithPath: path)
    let ext = url.pathExtension.isEmpty ? "wav" : url.pathExtension
    return url.deletingPathExtension().path + "-" + safe + "." + ext
  }
}
