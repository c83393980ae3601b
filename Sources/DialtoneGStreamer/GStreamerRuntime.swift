import CGStreamer
import Foundation

/// GStreamer's process-wide set-up: `gst_init` once, and the DTLS certificate generated ahead
/// of the first call (webrtcbin 1.22 otherwise generates it during the first offer).
public enum GStreamerRuntime {
  private static let initialised: Bool = {
    dt_gst_init()
    return true
  }()

  private static let certificate = CertificateWarmUp()

  /// Initialises GStreamer (idempotent, cheap after the first call).
  public static func ensureInitialised() {
    _ = initialised
  }

  /// Starts generating the DTLS certificate on a background thread; `await` it to be sure it
  /// is ready. Call at launch, long before dialing.
  public static func prepare() async {
    ensureInitialised()
    await certificate.ready()
  }
}

/// Runs the certificate generation once, off the caller's thread.
private actor CertificateWarmUp {
  private var task: Task<Void, Never>?

  func ready() async {
    if task == nil {
      task = Task.detached(priority: .userInitiated) { dt_pregenerate_dtls_certificate() }
    }
    await task?.value
  }
}
