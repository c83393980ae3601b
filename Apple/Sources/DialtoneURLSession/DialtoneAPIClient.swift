import DialtoneClient
import DialtoneProtocol
import Foundation

/// The Dialtone HTTP API (protocol.md section 16) over URLSession: push registration, ICE
/// servers and the phone-number directory. Bodies are encoded and decoded by
/// DialtoneProtocol's wire types.
public struct DialtoneAPIClient: Sendable {
  public enum APIError: Error, Sendable, CustomStringConvertible {
    /// The server answered with an error status; `body` is its `ErrorBody` when it sent one.
    case status(Int, body: ErrorBody?)
    case badResponse(String)

    public var description: String {
      switch self {
      case .status(let code, let body): return "HTTP \(code)" + (body.map { ": \($0.jsonString)" } ?? "")
      case .badResponse(let why): return "bad response: \(why)"
      }
    }
  }

  /// e.g. `https://calls.example.com` (the API lives under `/v1/...`).
  public let baseURL: URL
  private let session: URLSession
  private let token: @Sendable () async throws -> String

  /// - Parameter token: returns a fresh app JWT (protocol.md section 3) for each request.
  public init(baseURL: URL, session: URLSession = .shared, token: @escaping @Sendable () async throws -> String) {
    self.baseURL = baseURL
    self.session = session
    self.token = token
  }

  /// `POST /v1/devices`: registers (or replaces) this installation's push tokens.
  @discardableResult
  public func registerDevice(_ registration: DeviceRegistration) async throws -> DeviceInfo {
    let data = try await send("POST", path: "/v1/devices", body: Data(registration.jsonBytes), expect: 200)
    return try decode(DeviceInfo.self, data)
  }

  /// `DELETE /v1/devices/{installationId}`. A `404` (already gone) counts as success.
  public func unregisterDevice(installationId: String) async throws {
    let escaped = installationId.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? installationId
    do {
      _ = try await send("DELETE", path: "/v1/devices/\(escaped)", body: nil, expect: 204)
    } catch APIError.status(404, _) {
      return
    }
  }

  /// `GET /v1/ice-servers`, shaped as `IceServerCache.Fetcher`.
  public func iceServers() async throws -> (servers: [IceServer], ttl: Int) {
    let data = try await send("GET", path: "/v1/ice-servers", body: nil, expect: 200)
    let response = try decode(IceServersResponse.self, data)
    return (response.iceServers, response.ttl)
  }

  /// `GET /v1/directory?since=` (protocol.md §16.11), shaped as `DirectorySync.Fetch`: the whole
  /// lists without `since`, otherwise the changes since that version (or the whole lists when
  /// the server no longer has them; `full` says which).
  public func directory(since: Int64?) async throws -> DirectoryResponse {
    let path = since.map { "/v1/directory?since=\($0)" } ?? "/v1/directory"
    let data = try await send("GET", path: path, body: nil, expect: 200)
    return try decode(DirectoryResponse.self, data)
  }

  // MARK: Plumbing

  private func send(_ method: String, path: String, body: Data?, expect: Int) async throws -> Data {
    guard let url = URL(string: path, relativeTo: baseURL) else { throw APIError.badResponse("bad path \(path)") }
    var request = URLRequest(url: url)
    request.httpMethod = method
    request.setValue("Bearer \(try await token())", forHTTPHeaderField: "Authorization")
    if let body {
      request.httpBody = body
      request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    }
    let (data, response) = try await session.data(for: request)
    guard let http = response as? HTTPURLResponse else { throw APIError.badResponse("not HTTP") }
    guard http.statusCode == expect else {
      throw APIError.status(http.statusCode, body: try? ErrorBody(jsonBytes: Array(data), options: .lenient))
    }
    return data
  }

  private func decode<T: WireCodable>(_ type: T.Type, _ data: Data) throws -> T {
    do {
      return try T(jsonBytes: Array(data), options: .lenient)
    } catch {
      throw APIError.badResponse("\(T.self): \(error)")
    }
  }
}

/// The device calls `DeviceRegistrations` (DialtoneClient) makes.
extension DialtoneAPIClient: DeviceRegistrationAPI {
  public func register(_ registration: DeviceRegistration) async throws {
    _ = try await registerDevice(registration)
  }

  public func unregister(installationId: String) async throws {
    try await unregisterDevice(installationId: installationId)
  }
}
