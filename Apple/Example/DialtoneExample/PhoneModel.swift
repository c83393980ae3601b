import Foundation
import SwiftUI
@preconcurrency import WebRTC

/// The UI's view of CallService.
@MainActor
final class PhoneModel: ObservableObject {
  @Published private(set) var call: CallSnapshot?
  @Published private(set) var remoteVideoTrack: RTCVideoTrack?
  let contacts = ExampleConfig.contacts
  private let service: CallService

  init(service: CallService) {
    self.service = service
    Task { [weak self] in
      for await snapshot in service.snapshots { self?.call = snapshot }
    }
    Task { [weak self] in
      for await track in service.remoteVideo { self?.remoteVideoTrack = track }
    }
  }

  func call(_ contact: Contact, video: Bool) {
    Task { await service.call(contact, video: video) }
  }

  func toggleMute() { Task { await service.toggleMute() } }
  func toggleVideo() { Task { await service.toggleVideo() } }
  func hangUp() { Task { await service.hangUp() } }
}
