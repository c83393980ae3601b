import DialtoneClient
import DialtoneProtocol
import DialtoneWebRTC
import Foundation
import SwiftUI
@preconcurrency import WebRTC

/// What the views show: call statuses from `SystemCallSession.statuses`, remote video from
/// the connections `WebRTCPeerConnectionFactory` makes. Every button goes to the session,
/// which goes through CallKit, so the system call UI and the app stay in step. The Call
/// Directory (caller labels and blocked numbers) is `DirectorySync`'s, refreshed from here.
@MainActor
final class PhoneModel: ObservableObject {
  typealias CallStatus = SystemCallSession.CallStatus

  /// The call on screen (CallKit allows one at a time; during glare two exist briefly).
  @Published private(set) var call: CallStatus?
  @Published private(set) var remoteVideoTrack: RTCVideoTrack?
  /// What the last Call Directory refresh did; nil before the first.
  @Published private(set) var directoryOutcome: DirectorySync.Outcome?
  /// The microphone's and camera's permissions, as last asked or read.
  @Published private(set) var mediaAccess: MediaAccess
  /// Why the last call could not be placed (shown until dismissed).
  @Published var callRefusal: CallPermissionError?
  let contacts = ExampleConfig.contacts
  private let session: SystemCallSession
  private var calls: [CallID: CallStatus] = [:]
  private let directory: DirectorySync?

  init(session: SystemCallSession, factory: WebRTCPeerConnectionFactory, directory: DirectorySync? = nil) {
    self.session = session
    self.directory = directory
    mediaAccess = session.mediaAccess
    let statuses = session.statuses
    Task { [weak self] in
      for await status in statuses { self?.apply(status) }
    }
    let created = factory.created
    Task { [weak self] in
      for await connection in created { self?.showVideo(of: connection) }
    }
    refreshDirectory()
  }

  /// Brings the Call Directory up to date (at launch, on coming to the foreground);
  /// `userInitiated` right after the user blocked or unblocked a number, so it reloads at once.
  func refreshDirectory(userInitiated: Bool = false) {
    guard let directory else { return }
    Task { [weak self] in
      let outcome = await directory.refresh(userInitiated: userInitiated)
      self?.directoryOutcome = outcome
    }
  }

  /// Onboarding: asks for the microphone and the camera now, in the foreground, once. Left to
  /// the first call, the prompt could not show on the lock screen where a pushed call is
  /// answered, and that call would be silent (docs/ios.md, "Microphone and camera").
  func askForMediaAccess() {
    let session = session
    Task { [weak self] in
      let access = await session.requestMediaAccess(video: true)
      self?.mediaAccess = access
    }
  }

  // MARK: Buttons

  func call(_ contact: Contact, video: Bool) {
    call(userId: contact.userId, name: contact.name, video: video)
  }

  /// Places a call; a call the other side would not hear (no microphone) is refused, and why is
  /// shown.
  func call(userId: String, name: String?, video: Bool) {
    guard call == nil else { return }
    let session = session
    Task { [weak self] in
      do {
        _ = try await session.dial(userId, displayName: name, video: video)
      } catch {
        self?.callRefusal = error
      }
      self?.mediaAccess = session.mediaAccess
    }
  }

  func toggleMute() {
    guard let call else { return }
    session.setMuted(call.callId, !call.isMuted)
  }

  func toggleHold() {
    guard let call else { return }
    session.setOnHold(call.callId, !call.isOnHold)
  }

  func toggleVideo() {
    guard let call else { return }
    session.setVideoEnabled(call.callId, !call.isVideoEnabled)
  }

  /// Hangs up, cancels or declines, as the call's state says.
  func hangUp() {
    guard let call else { return }
    session.hangUp(call.callId)
  }

  // MARK: Updates

  private func apply(_ status: CallStatus) {
    if status.phase == .ended {
      calls[status.callId] = nil
      if call?.callId == status.callId { call = calls.values.first }
      if call == nil { remoteVideoTrack = nil }
    } else {
      calls[status.callId] = status
      if call == nil || call?.callId == status.callId { call = status }
    }
  }

  /// A connection's remote video, until it closes (a replacement connection brings its own).
  private func showVideo(of connection: WebRTCPeerConnection) {
    Task { [weak self] in
      var last: RTCVideoTrack?
      for await track in connection.remoteVideoTracks {
        last = track
        self?.remoteVideoTrack = track
      }
      if let last, self?.remoteVideoTrack === last { self?.remoteVideoTrack = nil }
    }
  }
}
