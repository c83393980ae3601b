internal import CGStreamer
import DialtoneClient
import Foundation

/// GStreamer's process-wide set-up, done once and off the dial path: `gst_init`, the DTLS
/// certificate GStreamer generates for its first DTLS element (webrtcbin 1.22 would otherwise
/// generate it during the first offer), and a throwaway offer that loads every plugin a call
/// uses (the first offer of a process costs ~30 ms more than the next ones).
public enum GStreamerRuntime {
  private static let initialised: Bool = {
    dt_gst_init()
    return true
  }()

  private static let warmUp = WarmUp()

  /// Initialises GStreamer (idempotent, cheap after the first call).
  public static func ensureInitialised() {
    _ = initialised
  }

  /// Starts generating the DTLS certificate on a background thread; `await` it to be sure it
  /// is ready. Call at launch, long before dialing.
  public static func prepare() async {
    ensureInitialised()
    await warmUp.ready()
  }
}

/// Runs the process's warm-up (certificate, rehearsal offer) once, off the caller's thread.
private actor WarmUp {
  private var task: Task<Void, Never>?

  func ready() async {
    if task == nil {
      task = Task.detached(priority: .userInitiated) {
        dt_pregenerate_dtls_certificate()
        guard
          let rehearsal = try? GStreamerPeerConnection(
            video: false, media: GStreamerMedia(audio: .silence), certificate: nil)
        else { return }
        rehearsal.configure(PeerConnectionConfiguration(iceServers: [], video: false, dataChannel: true))
        _ = try? await rehearsal.createOffer(iceRestart: false)
        await rehearsal.close()
      }
    }
    await task?.value
  }
}
