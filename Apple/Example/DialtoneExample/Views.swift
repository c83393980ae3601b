import DialtoneClient
import SwiftUI
@preconcurrency import WebRTC

struct ContentView: View {
  @ObservedObject var model: PhoneModel

  var body: some View {
    if let call = model.call {
      CallView(model: model, call: call)
    } else {
      ContactsView(model: model)
    }
  }
}

/// The contact list: tap the phone or the camera to call.
struct ContactsView: View {
  @ObservedObject var model: PhoneModel

  var body: some View {
    NavigationStack {
      List(model.contacts) { contact in
        HStack {
          Text(contact.name)
          Spacer()
          Button {
            model.call(contact, video: false)
          } label: {
            Image(systemName: "phone.fill")
          }
          .buttonStyle(.borderless)
          .accessibilityLabel("Call \(contact.name)")
          Button {
            model.call(contact, video: true)
          } label: {
            Image(systemName: "video.fill")
          }
          .buttonStyle(.borderless)
          .accessibilityLabel("Video call \(contact.name)")
        }
      }
      .navigationTitle("Contacts")
      .safeAreaInset(edge: .top) {
        if model.mediaAccess.microphone == .denied {
          MicrophoneBanner()
        }
      }
      .alert(
        "The call was not placed",
        isPresented: Binding(get: { model.callRefusal != nil }, set: { if !$0 { model.callRefusal = nil } }),
        presenting: model.callRefusal
      ) { _ in
        Button("OK", role: .cancel) {}
      } message: { refusal in
        Text(refusal.description)
      }
    }
    // Onboarding: the permission prompts now, in the foreground, never on the lock screen.
    .task { model.askForMediaAccess() }
  }
}

/// Calls need the microphone: without it the other side hears nothing.
struct MicrophoneBanner: View {
  var body: some View {
    HStack {
      Text("Calls need the microphone. Allow it in Settings.")
      Spacer()
      Button("Settings") {
        if let url = URL(string: UIApplication.openSettingsURLString) { UIApplication.shared.open(url) }
      }
    }
    .padding()
    .background(.yellow.opacity(0.3))
  }
}

/// The in-app call screen (CallKit shows its own on the lock screen, and answers there).
struct CallView: View {
  @ObservedObject var model: PhoneModel
  let call: PhoneModel.CallStatus

  var body: some View {
    ZStack {
      if call.isVideoEnabled, let track = model.remoteVideoTrack {
        VideoView(track: track).ignoresSafeArea()
      } else {
        Color.black.ignoresSafeArea()
      }
      VStack(spacing: 12) {
        Text(call.title).font(.largeTitle).foregroundStyle(.white)
        Text(call.statusText).foregroundStyle(.white.opacity(0.8))
        if let note = call.mediaNote {
          Text(note).foregroundStyle(.yellow)
        }
        Spacer()
        HStack(spacing: 20) {
          RoundButton(symbol: call.isMuted ? "mic.slash.fill" : "mic.fill", tint: .gray, label: "Mute") {
            model.toggleMute()
          }
          RoundButton(symbol: call.isOnHold ? "play.fill" : "pause.fill", tint: .gray, label: "Hold") {
            model.toggleHold()
          }
          RoundButton(symbol: call.isVideoEnabled ? "video.fill" : "video.slash.fill", tint: .gray, label: "Video") {
            model.toggleVideo()
          }
          RoundButton(symbol: "phone.down.fill", tint: .red, label: "Hang up") {
            model.hangUp()
          }
        }
        .padding(.bottom, 40)
      }
      .padding(.top, 60)
    }
  }
}

extension SystemCallSession.CallStatus {
  var title: String { displayName ?? handle }

  /// What this device's microphone and camera cannot do in the call, if anything.
  var mediaNote: String? {
    if microphone != .granted { return "Microphone not allowed: the other side cannot hear you" }
    switch localVideo {
    case .paused: return "Video paused until you open the app"
    case .unavailable: return "Camera not allowed: the other side cannot see you"
    case .on, .off: return nil
    }
  }

  var statusText: String {
    if isOnHold { return "On hold" }
    if isRemoteOnHold { return "On hold by the other side" }
    switch phase {
    case .incoming: return "Ringing"
    case .dialing: return "Calling…"
    case .remoteRinging: return "Ringing…"
    case .connecting: return "Connecting…"
    case .connected: return "Connected"
    case .reconnecting: return "Reconnecting…"
    case .ended: return "Ended"
    }
  }
}

struct RoundButton: View {
  let symbol: String
  let tint: Color
  let label: String
  let action: () -> Void

  var body: some View {
    Button(action: action) {
      Image(systemName: symbol)
        .font(.title)
        .foregroundStyle(.white)
        .frame(width: 72, height: 72)
        .background(Circle().fill(tint))
    }
    .accessibilityLabel(label)
  }
}

/// Renders a WebRTC video track with Metal.
struct VideoView: UIViewRepresentable {
  let track: RTCVideoTrack

  func makeUIView(context: Context) -> RTCMTLVideoView {
    let view = RTCMTLVideoView()
    view.videoContentMode = .scaleAspectFill
    track.add(view)
    context.coordinator.track = track
    return view
  }

  func updateUIView(_ view: RTCMTLVideoView, context: Context) {
    guard context.coordinator.track !== track else { return }
    context.coordinator.track?.remove(view)
    track.add(view)
    context.coordinator.track = track
  }

  static func dismantleUIView(_ view: RTCMTLVideoView, coordinator: Coordinator) {
    coordinator.track?.remove(view)
  }

  func makeCoordinator() -> Coordinator { Coordinator() }

  final class Coordinator {
    var track: RTCVideoTrack?
  }
}
