import DialtoneCalls
import DialtoneHTTP2
import DialtoneHTTPClient
import DialtonePush
import DialtoneStorage
import DialtoneSupport
import Foundation

/// Builds the push dispatcher from the configuration, or nothing (with a clear log line) when no
/// push credentials are configured.
enum PushSetup {
  static func dispatcher(
    configuration c: ServerConfiguration, store: any DeviceStore, clock: any DialtoneClock,
    observations: Observations? = nil, log: Log
  ) throws -> PushDispatcher? {
    let http = HTTPClient(configuration: .init(caFile: c.pushCAFile))
    var apns: APNsClient?
    var http2: HTTP2Client?
    if let keyFile = c.apnsKeyFile, let keyID = c.apnsKeyID, let teamID = c.apnsTeamID {
      let pem: String
      do { pem = try String(contentsOfFile: keyFile, encoding: .utf8) } catch {
        http.shutdown()
        throw ConfigurationError("cannot read --apns-key-file \(keyFile): \(error.localizedDescription)")
      }
      // APNs has its own HTTP/2 client (one engine thread); FCM and OAuth stay on curl's.
      let client: HTTP2Client
      do { client = try HTTP2Client(configuration: .init(caFile: c.pushCAFile)) } catch {
        http.shutdown()
        throw ConfigurationError("--push-ca-file: \(error)")
      }
      http2 = client
      do {
        apns = try APNsClient(
          configuration: .init(keyPEM: pem, keyID: keyID, teamID: teamID, baseURL: c.apnsURL), http: client,
          now: { clock.now })
      } catch {
        client.shutdown()
        http.shutdown()
        throw ConfigurationError(
          "--apns-key-file \(keyFile) / --apns-url: not a usable ES256 .p8 key or https:// URL: \(error)")
      }
    }
    var fcm: FCMClient?
    if let file = c.fcmServiceAccountFile {
      guard let data = FileManager.default.contents(atPath: file) else {
        http.shutdown()
        http2?.shutdown()
        throw ConfigurationError("cannot read --fcm-service-account \(file)")
      }
      do {
        fcm = try FCMClient(account: .init(json: Array(data)), baseURL: c.fcmURL, http: http, now: { clock.now })
      } catch {
        http.shutdown()
        http2?.shutdown()
        throw ConfigurationError("--fcm-service-account \(file): \(error)")
      }
    }
    switch (apns, fcm) {
    case (nil, nil):
      log.info(
        "pushes are off: no --apns-key-file / --fcm-service-account configured (devices without a socket will not ring)"
      )
      http.shutdown()
      return nil
    case (nil, _): log.info("APNs pushes are off (no --apns-key-file); FCM is on")
    case (_, nil):
      http.shutdown()  // only FCM uses curl's client
      log.info("FCM pushes are off (no --fcm-service-account); APNs is on")
    default: log.info("APNs and FCM pushes are on")
    }
    let providers: [any PushProvider] = [apns as (any PushProvider)?, fcm].compactMap { $0 }
    return PushDispatcher(
      store: store, providers: providers,
      retry: .init(firstDelay: c.pushRetryFirstDelay, maxDelay: max(4, c.pushRetryFirstDelay)),
      observations: observations, log: log
    ) { [http2, usesCurl = fcm != nil] in
      http2?.shutdown()
      if usesCurl { http.shutdown() }
    }
  }
}

/// Hands each call event to several sinks (history, pushes).
struct FanOutSink: CallEffectSink {
  let sinks: [any CallEffectSink]
  func handle(_ event: CallEvent, connectedDevices: Set<String>) {
    for sink in sinks { sink.handle(event, connectedDevices: connectedDevices) }
  }
}
