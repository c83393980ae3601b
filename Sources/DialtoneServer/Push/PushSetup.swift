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
    let apns = try makeAPNs(c, clock: clock)
    let fcm: (client: FCMClient, http: HTTPClient)?
    do { fcm = try makeFCM(c, clock: clock) } catch {
      apns?.http.shutdown()
      throw error
    }
    switch (apns, fcm) {
    case (nil, nil):
      log.info(
        "pushes are off: no --apns-key-file / --fcm-service-account configured (devices without a socket will not ring)"
      )
      return nil
    case (nil, _): log.info("APNs pushes are off (no --apns-key-file); FCM is on")
    case (_, nil): log.info("FCM pushes are off (no --fcm-service-account); APNs is on")
    default: log.info("APNs and FCM pushes are on")
    }
    let providers: [any PushProvider] = [apns?.client as (any PushProvider)?, fcm?.client].compactMap { $0 }
    return PushDispatcher(
      store: store, providers: providers,
      retry: .init(firstDelay: c.pushRetryFirstDelay, maxDelay: max(4, c.pushRetryFirstDelay)),
      observations: observations, log: log
    ) { [apnsHTTP = apns?.http, fcmHTTP = fcm?.http] in
      apnsHTTP?.shutdown()
      fcmHTTP?.shutdown()
    }
  }

  /// APNs on its own HTTP/2 client (one engine thread); nil when it is not configured. Each
  /// client is made only once what could fail before it has not, so a failure leaves nothing
  /// running.
  private static func makeAPNs(_ c: ServerConfiguration, clock: any DialtoneClock) throws -> (
    client: APNsClient, http: HTTP2Client
  )? {
    guard let keyFile = c.apnsKeyFile, let keyID = c.apnsKeyID, let teamID = c.apnsTeamID else { return nil }
    let pem: String
    do { pem = try String(contentsOfFile: keyFile, encoding: .utf8) } catch {
      throw ConfigurationError("cannot read --apns-key-file \(keyFile): \(error.localizedDescription)")
    }
    let http: HTTP2Client
    do { http = try HTTP2Client(configuration: .init(caFile: c.pushCAFile)) } catch {
      throw ConfigurationError("--push-ca-file: \(error)")
    }
    do {
      let client = try APNsClient(
        configuration: .init(keyPEM: pem, keyID: keyID, teamID: teamID, baseURL: c.apnsURL), http: http,
        now: { clock.now })
      return (client, http)
    } catch {
      http.shutdown()
      throw ConfigurationError(
        "--apns-key-file \(keyFile) / --apns-url: not a usable ES256 .p8 key or https:// URL: \(error)")
    }
  }

  /// FCM (and its OAuth token exchange) on curl's client; nil when it is not configured.
  private static func makeFCM(_ c: ServerConfiguration, clock: any DialtoneClock) throws -> (
    client: FCMClient, http: HTTPClient
  )? {
    guard let file = c.fcmServiceAccountFile else { return nil }
    guard let data = FileManager.default.contents(atPath: file) else {
      throw ConfigurationError("cannot read --fcm-service-account \(file)")
    }
    let http = HTTPClient(configuration: .init(caFile: c.pushCAFile))
    do {
      let client = try FCMClient(account: .init(json: Array(data)), baseURL: c.fcmURL, http: http, now: { clock.now })
      return (client, http)
    } catch {
      http.shutdown()
      throw ConfigurationError("--fcm-service-account \(file): \(error)")
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
