#if os(iOS)
  import AVFoundation
  import DialtoneClient
  import DialtoneProtocol
  import Foundation
  import LiveKit

  /// `GroupMediaControl` over LiveKit's Swift SDK (2.8 or later): one `Room` per group call whose
  /// server handed over LiveKit credentials (`GroupCall.Event.liveKit(url:token:)`), under
  /// CallKit's audio control. `SystemCallSession` decides when to connect, mute and disconnect;
  /// this only translates, and reports each room back with `groupMediaStateChanged`.
  ///
  /// Audio (rule 5): LiveKit must neither configure nor activate the `AVAudioSession` CallKit
  /// owns. `configure()` turns LiveKit's automatic audio-session configuration off for good and
  /// makes its audio engine unavailable, so a room connects and publishes the microphone without
  /// starting audio I/O. After CallKit's `didActivate` the session calls `audioSessionActivated()`,
  /// which makes the engine available (LiveKit starts it); `didDeactivate` (or a provider reset)
  /// makes it unavailable again.
  ///
  /// Audio only: the microphone is published, remote audio is played. LiveKit video is not
  /// wired (the camera is `WebRTCCallMedia`'s).
  public final class LiveKitGroupMedia: GroupMediaControl, @unchecked Sendable {
    // @unchecked: `rooms` and `session` are only touched under `lock`; LiveKit's `Room` may be
    // used from any thread.
    private let lock = NSLock()
    private var rooms: [CallID: Entry] = [:]
    private weak var session: SystemCallSession?

    private struct Entry {
      let room: Room
      /// LiveKit keeps its delegates weakly: the watcher lives as long as the entry.
      let watcher: RoomWatcher
    }

    public init() {}

    /// Once at launch, before any room exists and before CallKit can activate audio (next to
    /// `WebRTCCallMedia.configure()`).
    public func configure() {
      AudioManager.shared.audioSession.isAutomaticConfigurationEnabled = false
      try? AudioManager.shared.setEngineAvailability(.none)
    }

    /// The session the rooms are reported to; call once, right after making it.
    public func attach(_ session: SystemCallSession) {
      lock.withLock { self.session = session }
    }

    // MARK: GroupMediaControl

    public func connect(callId: CallID, url: String, token: String, video: Bool, muted: Bool) {
      let report = reporter(callId)
      let watcher = RoomWatcher(report: report)
      let room = Room(delegate: watcher)
      lock.withLock { rooms[callId] = Entry(room: room, watcher: watcher) }
      Task {
        do {
          try await room.connect(url: url, token: token)
        } catch {
          report(watcher, .failed)
          return
        }
        guard isCurrent(callId, watcher) else { return await room.disconnect() }
        report(watcher, .connected)
        // Published now, heard once the engine is available (after didActivate). A microphone
        // that cannot be published (no permission) leaves a listen-only call, not a failed one.
        if !muted { _ = try? await room.localParticipant.setMicrophone(enabled: true) }
      }
    }

    public func setMuted(callId: CallID, muted: Bool) {
      guard let room = lock.withLock({ rooms[callId]?.room }) else { return }
      Task { _ = try? await room.localParticipant.setMicrophone(enabled: !muted) }
    }

    public func disconnect(callId: CallID) {
      guard let entry = lock.withLock({ rooms.removeValue(forKey: callId) }) else { return }
      Task { await entry.room.disconnect() }
    }

    /// After CallKit's `didActivate`: LiveKit's audio engine may start. The session category is
    /// the one `WebRTCCallMedia.prepareAudio` set before the activation (play and record); an app
    /// without it gets that category here.
    public func audioSessionActivated() {
      let audio = AVAudioSession.sharedInstance()
      if audio.category != .playAndRecord {
        try? audio.setCategory(.playAndRecord, mode: .voiceChat, options: [.allowBluetooth])
      }
      try? AudioManager.shared.setEngineAvailability(.default)
    }

    /// After CallKit's `didDeactivate`, or a provider reset: LiveKit's audio engine stops.
    public func audioSessionDeactivated() {
      try? AudioManager.shared.setEngineAvailability(.none)
    }

    // MARK: Rooms

    private func isCurrent(_ callId: CallID, _ watcher: RoomWatcher) -> Bool {
      lock.withLock { rooms[callId]?.watcher === watcher }
    }

    /// Reports a room's state to the session, unless the room was disconnected (or replaced)
    /// meanwhile.
    private func reporter(_ callId: CallID) -> @Sendable (RoomWatcher, PeerConnectionState) -> Void {
      { [weak self] watcher, state in
        guard let self, self.isCurrent(callId, watcher) else { return }
        let session = self.lock.withLock { self.session }
        session?.groupMediaStateChanged(callId, state)
      }
    }
  }

  /// A room's connection states, as `PeerConnectionState`: reconnecting is `.disconnected`
  /// (LiveKit recovers by itself), back to connected is `.connected`, and a room that drops
  /// after it was up is `.failed` (the session ends the call).
  private final class RoomWatcher: NSObject, RoomDelegate, Sendable {
    let report: @Sendable (RoomWatcher, PeerConnectionState) -> Void

    init(report: @escaping @Sendable (RoomWatcher, PeerConnectionState) -> Void) {
      self.report = report
    }

    func room(
      _ room: Room, didUpdateConnectionState connectionState: ConnectionState, from oldConnectionState: ConnectionState
    ) {
      if connectionState == .reconnecting {
        report(self, .disconnected)
      } else if connectionState == .connected && oldConnectionState == .reconnecting {
        report(self, .connected)
      } else if connectionState == .disconnected
        && (oldConnectionState == .connected || oldConnectionState == .reconnecting)
      {
        report(self, .failed)
      }
    }
  }
#endif
