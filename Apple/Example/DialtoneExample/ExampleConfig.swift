import DialtoneProtocol
import Foundation

/// Where the example talks to. Replace with your deployment.
enum ExampleConfig {
  /// The Dialtone server (signaling at `wss://…/v1/ws`, API at `https://…/v1/…`).
  static let dialtoneHost = "calls.example.com"
  /// Your app backend's endpoint that mints a Dialtone JWT for the signed-in user
  /// (protocol.md section 3). It must put `installationId` in the `device` claim.
  static let tokenEndpoint = URL(string: "https://api.example.com/dialtone-token")!
  /// Used when the cache has nothing fresher (rule 4: never fetch on the call's critical path).
  static let defaultIceServers = [IceServer(urls: ["stun:calls.example.com:3478"])]

  static var signalingURL: String { "wss://\(dialtoneHost)/v1/ws" }
  static var apiBaseURL: URL { URL(string: "https://\(dialtoneHost)")! }

  static let contacts: [Contact] = [
    Contact(userId: "alice", name: "Alice"),
    Contact(userId: "bob", name: "Bob"),
    Contact(userId: "carol", name: "Carol"),
  ]
}

struct Contact: Identifiable, Hashable, Sendable {
  var userId: String
  var name: String
  var id: String { userId }
}

/// Fetches the Dialtone JWT from the app's own backend, caching it until shortly before it
/// expires. The app's session cookie / auth header is the backend's business.
actor TokenStore {
  private var token: String?
  private var expiresAt = Date.distantPast
  private let installationId: String

  init(installationId: String) { self.installationId = installationId }

  func current() async throws -> String {
    if let token, Date() < expiresAt.addingTimeInterval(-60) { return token }
    var request = URLRequest(url: ExampleConfig.tokenEndpoint)
    request.httpMethod = "POST"
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    request.httpBody = try JSONSerialization.data(withJSONObject: ["device": installationId])
    let (data, response) = try await URLSession.shared.data(for: request)
    guard (response as? HTTPURLResponse)?.statusCode == 200,
      let body = try JSONSerialization.jsonObject(with: data) as? [String: Any],
      let jwt = body["token"] as? String
    else { throw URLError(.userAuthenticationRequired) }
    let ttl = (body["expiresIn"] as? Double) ?? 3600
    token = jwt
    expiresAt = Date().addingTimeInterval(ttl)
    return jwt
  }
}
