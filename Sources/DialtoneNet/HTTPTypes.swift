import DialtoneJSON
import Foundation

// The wire spelling: the raw values are the request line's method tokens.
// swift-format-ignore: AlwaysUseLowerCamelCase
public enum HTTPMethod: String, Sendable, CaseIterable {
  case GET, POST, PUT, PATCH, DELETE, OPTIONS, HEAD
}

/// Request headers, looked up case-insensitively (names are stored lowercased).
public struct HTTPHeaders: Sendable, Equatable {
  private var storage: [String: String] = [:]
  public init(_ pairs: [(String, String)] = []) {
    for (name, value) in pairs { storage[name.lowercased()] = value }
  }
  public subscript(_ name: String) -> String? {
    get { storage[name.lowercased()] }
    set { storage[name.lowercased()] = newValue }
  }
}

public struct HTTPRequest: Sendable {
  public var method: HTTPMethod
  public var path: String
  public var query: [String: String]
  public var headers: HTTPHeaders
  public var body: [UInt8]
  public var remoteAddress: String
  /// Filled by the router from `{name}` segments of the matched pattern.
  public var pathParameters: [String: String] = [:]

  public init(
    method: HTTPMethod, path: String, query: [String: String] = [:], headers: HTTPHeaders = HTTPHeaders(),
    body: [UInt8] = [], remoteAddress: String = ""
  ) {
    self.method = method
    self.path = path
    self.query = query
    self.headers = headers
    self.body = body
    self.remoteAddress = remoteAddress
  }

  /// The token of an `Authorization: Bearer <token>` header, if any.
  public var bearerToken: String? {
    guard let value = headers["authorization"] else { return nil }
    let parts = value.split(separator: " ", maxSplits: 1)
    guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
    let token = parts[1].trimmingCharacters(in: .whitespaces)
    return token.isEmpty ? nil : token
  }
}

public struct HTTPResponse: Sendable {
  public var status: Int
  public var contentType: String
  public var headers: [HTTPHeaderField]
  public var body: [UInt8]

  public init(
    status: Int = 200, contentType: String = "application/json", headers: [HTTPHeaderField] = [], body: [UInt8] = []
  ) {
    self.status = status
    self.contentType = contentType
    self.headers = headers
    self.body = body
  }

  /// A status that never carries content (RFC 9110 §6.4.1): no body is written, whatever `body` holds.
  public var hasNoContent: Bool { status == 204 || status == 304 || (100..<200).contains(status) }

  /// The one error shape of the HTTP API: `{"error":{"code":"...","message":"..."}}`.
  public static func error(_ error: HTTPError) -> HTTPResponse {
    let body = JSONValue.object(["error": .object(["code": .string(error.code), "message": .string(error.message)])])
    return HTTPResponse(status: error.status, headers: error.headers, body: body.serialized)
  }

  public static func text(_ text: String, status: Int = 200, contentType: String = "text/plain; charset=utf-8")
    -> HTTPResponse
  {
    HTTPResponse(status: status, contentType: contentType, body: Array(text.utf8))
  }
}

public struct HTTPHeaderField: Sendable, Equatable {
  public var name: String
  public var value: String
  public init(_ name: String, _ value: String) {
    self.name = name
    self.value = value
  }
}

/// An error a route handler throws to answer with a status and the API's error body.
public struct HTTPError: Error, Sendable, Equatable, CustomStringConvertible {
  public var status: Int
  public var code: String
  public var message: String
  public var headers: [HTTPHeaderField]
  public init(status: Int, code: String, message: String, headers: [HTTPHeaderField] = []) {
    self.status = status
    self.code = code
    self.message = message
    self.headers = headers
  }
  public var description: String { "\(status) \(code): \(message)" }

  public static func notFound(_ message: String = "not found") -> HTTPError {
    HTTPError(status: 404, code: "not-found", message: message)
  }
  public static func unauthorized(_ message: String) -> HTTPError {
    HTTPError(
      status: 401, code: "unauthorized", message: message, headers: [HTTPHeaderField("www-authenticate", "Bearer")])
  }
  public static func badRequest(_ message: String) -> HTTPError {
    HTTPError(status: 400, code: "bad-request", message: message)
  }
}
