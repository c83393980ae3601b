import DialtoneHTTP2
import DialtoneJSON
import DialtoneProtocol
import Foundation

/// What became of one push attempt, as the dispatcher needs to know it.
public enum PushOutcome: Sendable, Equatable {
  case delivered
  /// The token is dead (uninstalled app, wrong topic): forget it.
  case invalidToken(String)
  /// Worth trying again later (throttled, server trouble, no connection).
  case retryable(String)
  /// Will not work by retrying (bad payload, bad key): logged.
  case failed(String)
}

public struct APNsRequest: Sendable {
  public enum PushType: String, Sendable { case voip, alert }
  public var deviceToken: String
  public var bundleID: String
  public var environment: APNsEnvironment
  public var pushType: PushType
  public var payload: [UInt8]

  public init(deviceToken: String, bundleID: String, environment: APNsEnvironment, pushType: PushType, payload: [UInt8])
  {
    self.deviceToken = deviceToken
    self.bundleID = bundleID
    self.environment = environment
    self.pushType = pushType
    self.payload = payload
  }
}

/// The APNs provider API over HTTP/2 (one multiplexed connection per environment), on our own
/// HTTP/2 client (`HTTP2Client`): curl's per-transfer bookkeeping was most of a push's CPU.
public final class APNsClient: Sendable {
  public struct Configuration: Sendable {
    public var keyPEM: String
    public var keyID: String
    public var teamID: String
    /// Overrides both environments' base URL (a mock, or a proxy).
    public var baseURL: String?

    public init(keyPEM: String, keyID: String, teamID: String, baseURL: String? = nil) {
      self.keyPEM = keyPEM
      self.keyID = keyID
      self.teamID = teamID
      self.baseURL = baseURL
    }
  }

  private let http: HTTP2Client
  private let providerToken: APNsProviderToken
  /// Where each environment's pushes go, and the path before "/3/device/…" (a proxy's prefix).
  private let production: (origin: HTTP2Origin, path: String)
  private let sandbox: (origin: HTTP2Origin, path: String)
  private let now: @Sendable () -> Date

  /// Throws if the key is not a usable ES256 key or the base URL is not an https:// URL.
  public init(configuration: Configuration, http: HTTP2Client, now: @escaping @Sendable () -> Date = Date.init) throws {
    providerToken = try APNsProviderToken(
      p8PEM: configuration.keyPEM, keyID: configuration.keyID, teamID: configuration.teamID)
    if let baseURL = configuration.baseURL {
      production = try HTTP2Origin.parse(url: baseURL)
      sandbox = production
    } else {
      production = (HTTP2Origin(host: "api.push.apple.com"), "")
      sandbox = (HTTP2Origin(host: "api.sandbox.push.apple.com"), "")
    }
    self.http = http
    self.now = now
  }

  public func send(_ request: APNsRequest) async -> PushOutcome {
    // One refresh of the provider token per push if APNs says it expired.
    for _ in 0..<2 {
      let token: String
      do { token = try providerToken.token(now: now()) } catch {
        return .failed("cannot sign the provider token: \(error)")
      }
      let target = request.environment == .production ? production : sandbox
      let voip = request.pushType == .voip
      let headers: [(name: String, value: String)] = [
        ("authorization", "bearer \(token)"),
        ("apns-push-type", request.pushType.rawValue),
        ("apns-topic", voip ? request.bundleID + ".voip" : request.bundleID),
        ("apns-priority", "10"),
        // A call push is useless later: deliver now or never. A missed-call notice may wait a day.
        ("apns-expiration", voip ? "0" : String(Int(now().timeIntervalSince1970) + 86_400)),
        ("content-type", "application/json"),
      ]
      let response: HTTP2Response
      do {
        response = try await http.send(
          HTTP2Request(
            origin: target.origin, path: "\(target.path)/3/device/\(request.deviceToken)", headers: headers,
            body: request.payload))
      } catch {
        return .retryable("transport: \(error)")
      }
      let reason = JSONValue(parsing: response.body)?["reason"]?.stringValue ?? ""
      switch (response.status, reason) {
      case (200, _): return .delivered
      case (403, "ExpiredProviderToken"):
        providerToken.invalidate(token)
        continue
      case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"):
        return .invalidToken("\(response.status) \(reason)")
      case (429, _), (500...599, _): return .retryable("\(response.status) \(reason)")
      default: return .failed("\(response.status) \(reason)")
      }
    }
    return .failed("provider token rejected twice")
  }
}

extension APNsClient: PushProvider {
  public var purposes: [PushTokenKind: PushPurpose] { [.voip: .incomingCall, .alert: .missedCall] }

  public func send(_ message: PushMessage, to token: PushToken) async -> PushOutcome {
    guard let bundleID = token.topic else { return .failed("\(token.kind) token without a bundle id") }
    let environment = token.environment.flatMap(APNsEnvironment.init(rawValue:)) ?? .production
    let pushType: APNsRequest.PushType
    let payload: [UInt8]
    switch message {
    case .incomingCall(let push): (pushType, payload) = (.voip, push.jsonBytes)
    case .missedCall(let push): (pushType, payload) = (.alert, push.jsonBytes)
    }
    return await send(
      APNsRequest(
        deviceToken: token.token, bundleID: bundleID, environment: environment,
        pushType: pushType, payload: payload))
  }
}
