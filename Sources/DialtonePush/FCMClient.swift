import DialtoneCrypto
import DialtoneHTTPClient
import DialtoneJSON
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// FCM HTTP v1: an OAuth2 access token from the service account (RS256 JWT bearer grant),
/// cached until shortly before it expires, then high-priority data messages with `ttl: 0s`.
public final class FCMClient: Sendable {
  public struct ServiceAccount: Sendable {
    var projectID: String
    var clientEmail: String
    var privateKeyPEM: String
    var tokenURI: String

    public init(json bytes: [UInt8]) throws(FCMConfigurationError) {
      guard let json = JSONValue(parsing: bytes), let project = json["project_id"]?.stringValue,
        let email = json["client_email"]?.stringValue, let key = json["private_key"]?.stringValue,
        let tokenURI = json["token_uri"]?.stringValue
      else {
        throw FCMConfigurationError(
          description: "the FCM service account needs project_id, client_email, private_key and token_uri")
      }
      projectID = project
      clientEmail = email
      privateKeyPEM = key
      self.tokenURI = tokenURI
    }
  }

  static let scope = "https://www.googleapis.com/auth/firebase.messaging"

  private let account: ServiceAccount
  private let signer: JWTSigner
  private let sendURL: String
  private let http: HTTPClient
  private let now: @Sendable () -> Date
  private let accessToken = Locked<(value: String, expires: Date)?>(nil)

  public init(
    account: ServiceAccount, baseURL: String?, http: HTTPClient, now: @escaping @Sendable () -> Date = Date.init
  ) throws {
    self.account = account
    signer = try JWTSigner.rs256(pem: account.privateKeyPEM)
    sendURL = "\(baseURL ?? "https://fcm.googleapis.com")/v1/projects/\(account.projectID)/messages:send"
    self.http = http
    self.now = now
  }

  public func send(token: String, data: [String: String]) async -> PushOutcome {
    let message: JSONValue = [
      "message": [
        "token": .string(token),
        "data": .object(data.mapValues { .string($0) }),
        "android": ["priority": "HIGH", "ttl": "0s"],
      ]
    ]
    for _ in 0..<2 {
      let bearer: String
      switch await currentAccessToken() {
      case .success(let value): bearer = value
      case .failure(let outcome): return outcome
      }
      let response: HTTPClientResponse
      do {
        response = try await http.send(
          HTTPClientRequest(
            url: sendURL, headers: [("authorization", "Bearer \(bearer)"), ("content-type", "application/json")],
            body: message.serialized))
      } catch {
        return .retryable("transport: \(error)")
      }
      let error = JSONValue(parsing: response.body)?["error"]
      let status = error?["status"]?.stringValue ?? ""
      let codes = error?["details"]?.arrayValue?.compactMap { $0["errorCode"]?.stringValue } ?? []
      switch response.status {
      case 200: return .delivered
      case 401:
        accessToken.withLock { $0 = nil }
        continue
      case 404 where codes.contains("UNREGISTERED") || status == "NOT_FOUND": return .invalidToken("404 \(status)")
      case 400 where codes.contains("UNREGISTERED"): return .invalidToken("400 UNREGISTERED")
      case 429, 500...599: return .retryable("\(response.status) \(status)")
      default: return .failed("\(response.status) \(status)")
      }
    }
    return .failed("FCM rejected a fresh access token")
  }

  private enum TokenResult {
    case success(String)
    case failure(PushOutcome)
  }

  private func currentAccessToken() async -> TokenResult {
    let issued = now()
    if let cached = accessToken.current, cached.expires > issued { return .success(cached.value) }
    let assertion: String
    do {
      assertion = try signer.sign(
        claims: JWTClaims(
          issuer: account.clientEmail, audience: account.tokenURI, issuedAt: issued,
          expiresAt: issued.addingTimeInterval(3600),
          extra: ["scope": .string(Self.scope)]))
    } catch {
      return .failure(.failed("cannot sign the OAuth assertion: \(error)"))
    }
    let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
    let response: HTTPClientResponse
    do {
      response = try await http.send(
        HTTPClientRequest(
          url: account.tokenURI, headers: [("content-type", "application/x-www-form-urlencoded")],
          body: Array(form.utf8)))
    } catch {
      return .failure(.retryable("token endpoint: \(error)"))
    }
    guard response.status == 200, let json = JSONValue(parsing: response.body),
      let value = json["access_token"]?.stringValue
    else {
      return .failure(
        response.status >= 500 || response.status == 429
          ? .retryable("token endpoint \(response.status)")
          : .failed("token endpoint \(response.status)"))
    }
    let lifetime = Double(json["expires_in"]?.intValue ?? 3600)
    // Renew a minute early so a token never expires in flight.
    accessToken.withLock { $0 = (value, issued.addingTimeInterval(max(0, lifetime - 60))) }
    return .success(value)
  }
}

extension FCMClient: PushProvider {
  public var purposes: [PushTokenKind: PushPurpose] { [.fcm: .incomingCall] }

  public func send(_ message: PushMessage, to token: PushToken) async -> PushOutcome {
    switch message {
    case .incomingCall(let push): return await send(token: token.token, data: push.fcmData)
    case .missedCall: return .failed("FCM tokens get no missed-call notification")
    }
  }
}

public struct FCMConfigurationError: Error, Sendable, CustomStringConvertible {
  public let description: String
}
