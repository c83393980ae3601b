/// Maps method + path pattern (`/v1/devices/{installationId}`) to an async handler.
import Foundation

public struct Router: Sendable {
  public typealias Handler = @Sendable (HTTPRequest) async throws -> HTTPResponse

  private struct Route: Sendable {
    let method: HTTPMethod
    let pattern: String
    let segments: [Segment]
    let handler: Handler
  }
  private enum Segment: Sendable, Equatable {
    case literal(String)
    case parameter(String)
  }

  private var routes: [Route] = []
  /// Runs before any route: a response here (429, say) answers the request instead.
  public var gate: (@Sendable (HTTPRequest) async -> HTTPResponse?)?
  /// Told of every answered request: the pattern of the route its path matched (nil: none,
  /// a bounded label for metrics), its status, and how long it took.
  public var observer: (@Sendable (HTTPRequest, _ route: String?, _ status: Int, _ elapsed: Duration) -> Void)?

  /// Every registered method and pattern, in registration order (for the API's contract test).
  public var registered: [(method: HTTPMethod, pattern: String)] { routes.map { ($0.method, $0.pattern) } }

  public init() {}

  public mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping Handler) {
    let segments = Self.split(pattern).map { part -> Segment in
      if part.hasPrefix("{"), part.hasSuffix("}") { return .parameter(String(part.dropFirst().dropLast())) }
      return .literal(part)
    }
    routes.append(Route(method: method, pattern: pattern, segments: segments, handler: handler))
  }

  /// Runs the matching handler; unknown paths get 404, known paths with another method 405.
  public func respond(to request: HTTPRequest) async -> HTTPResponse {
    guard let observer else { return await answer(request) }
    let started = ContinuousClock.now
    let response = await answer(request)
    let parts = Self.split(request.path)
    let pattern = routes.first { Self.match($0.segments, parts) != nil }?.pattern
    observer(request, pattern, response.status, ContinuousClock.now - started)
    return response
  }

  private func answer(_ request: HTTPRequest) async -> HTTPResponse {
    if let gate, let refusal = await gate(request) { return refusal }
    let parts = Self.split(request.path)
    var allowed: [HTTPMethod] = []
    for route in routes {
      guard let params = Self.match(route.segments, parts) else { continue }
      allowed.append(route.method)
      guard route.method == request.method || (request.method == .HEAD && route.method == .GET) else { continue }
      var matched = request
      matched.pathParameters = params
      do {
        return try await route.handler(matched)
      } catch let error as HTTPError {
        return .error(error)
      } catch {
        return .error(HTTPError(status: 500, code: "internal", message: "internal error"))
      }
    }
    if !allowed.isEmpty {
      // RFC 9110 §15.5.6: a 405 lists the methods the resource has (GET brings HEAD).
      if allowed.contains(.GET) { allowed.append(.HEAD) }
      return .error(
        HTTPError(
          status: 405, code: "method-not-allowed",
          message: "\(request.method.rawValue) is not allowed on \(request.path)",
          headers: [HTTPHeaderField("allow", allowed.map(\.rawValue).joined(separator: ", "))]))
    }
    return .error(.notFound("no route for \(request.path)"))
  }

  private static func split(_ path: String) -> [String] {
    path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
  }

  private static func match(_ segments: [Segment], _ parts: [String]) -> [String: String]? {
    guard segments.count == parts.count else { return nil }
    var params: [String: String] = [:]
    for (segment, part) in zip(segments, parts) {
      switch segment {
      case .literal(let literal): if literal != part { return nil }
      // The path arrives percent-decoded already: decoding again would read `%2541` as `A`.
      case .parameter(let name): params[name] = part
      }
    }
    return params
  }
}
