/// Maps method + path pattern (`/v1/devices/{installationId}`) to an async handler.
import Foundation

public struct Router: Sendable {
  public typealias Handler = @Sendable (HTTPRequest) async throws -> HTTPResponse

  private struct Route: Sendable {
    let method: HTTPMethod
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

  public init() {}

  public mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping Handler) {
    let segments = Self.split(pattern).map { part -> Segment in
      if part.hasPrefix("{"), part.hasSuffix("}") { return .parameter(String(part.dropFirst().dropLast())) }
      return .literal(part)
    }
    routes.append(Route(method: method, segments: segments, handler: handler))
  }

  /// Runs the matching handler; unknown paths get 404, known paths with another method 405.
  public func respond(to request: HTTPRequest) async -> HTTPResponse {
    if let gate, let refusal = await gate(request) { return refusal }
    let parts = Self.split(request.path)
    var pathMatched = false
    for route in routes {
      guard let params = Self.match(route.segments, parts) else { continue }
      pathMatched = true
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
    if pathMatched {
      return .error(
        HTTPError(
          status: 405, code: "method-not-allowed",
          message: "\(request.method.rawValue) is not allowed on \(request.path)"))
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
      case .parameter(let name): params[name] = part.removingPercentEncoding ?? part
      }
    }
    return params
  }
}
