import DialtoneNet
import Foundation
import Testing

@testable import DialtoneSFU
@testable import DialtoneServer

/// docs/openapi.yaml documents the routes the server really has: every route of a server with
/// every optional one on (the admin dashboard, /metrics on the public port, the LiveKit webhook)
/// is an operation of the document, and every operation of the document but the WebSocket
/// upgrade is a route. What each operation answers is checked against the document by
/// schemathesis (Tests/e2e/openapi_scenarios.py).
@Suite struct OpenAPIContractTests {
  /// A method (lowercase, as OpenAPI keys it) on a path pattern (`/v1/calls/{callId}`, the same
  /// spelling in the router and in OpenAPI).
  struct Endpoint: Hashable, CustomStringConvertible {
    var method: String
    var path: String
    var description: String { "\(method.uppercased()) \(path)" }
  }

  static let methodKeys: Set<String> = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

  static func document() throws -> String {
    let here = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
    let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    let url = root.appendingPathComponent("docs").appendingPathComponent("openapi.yaml")
    return try String(contentsOf: url, encoding: .utf8)
  }

  /// The operations under `paths:`, read without a YAML library: a path is a key indented by
  /// exactly two spaces, an operation a method key indented by exactly four under it (the layout
  /// the document's header comment promises to keep).
  static func endpoints(in yaml: String) -> [Endpoint] {
    var result: [Endpoint] = []
    var inPaths = false
    var path: String?
    for line in yaml.components(separatedBy: "\n") {
      let trimmed = line.trimmingCharacters(in: .whitespaces)
      if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
      let indent = line.prefix { $0 == " " }.count
      if indent == 0 {
        inPaths = trimmed == "paths:"
        path = nil
        continue
      }
      guard inPaths, trimmed.hasSuffix(":") else { continue }
      let key = unquoted(String(trimmed.dropLast()))
      if indent == 2 {
        path = key.hasPrefix("/") ? key : nil
      } else if indent == 4, let path, methodKeys.contains(key) {
        result.append(Endpoint(method: key, path: path))
      }
    }
    return result
  }

  static func unquoted(_ text: String) -> String {
    for quote in ["\"", "'"] where text.count >= 2 && text.hasPrefix(quote) && text.hasSuffix(quote) {
      return String(text.dropFirst().dropLast())
    }
    return text
  }

  /// The routes of a server with every optional route registered.
  static func registered() async throws -> [Endpoint] {
    let server = try await TestServer { c in
      c.adminToken = "contract-admin-token-0123456789"
      // A LiveKit that is never reached: configuring one is what registers the webhook route.
      c.liveKitURL = "ws://127.0.0.1:9"
      c.liveKitAPIKey = LiveKitFixture.credentials.apiKey
      c.liveKitAPISecret = LiveKitFixture.credentials.apiSecret
    }
    let routes = server.server.routes.map { Endpoint(method: $0.method.rawValue.lowercased(), path: $0.pattern) }
    await server.stop()
    return routes
  }

  @Test func everyRouteOfTheServerIsDocumented() async throws {
    let documented = Set(Self.endpoints(in: try Self.document()))
    let registered = try await Self.registered()
    // The optional routes are there, so that they are checked too.
    #expect(registered.contains(Endpoint(method: "post", path: "/v1/livekit/webhook")))
    #expect(registered.contains(Endpoint(method: "get", path: "/admin/api/overview")))
    #expect(registered.contains(Endpoint(method: "get", path: "/metrics")))
    for route in registered {
      #expect(documented.contains(route), "\(route) is a route of the server but not in docs/openapi.yaml")
    }
  }

  @Test func everyDocumentedOperationIsARouteOfTheServer() async throws {
    let registered = Set(try await Self.registered())
    let endpoints = Self.endpoints(in: try Self.document())
    // The WebSocket upgrade is served by the HTTP layer itself, not by a route.
    let webSocket = Endpoint(method: "get", path: WebServerConfiguration().webSocketPath)
    #expect(endpoints.contains(webSocket), "the WebSocket upgrade \(webSocket) is not in docs/openapi.yaml")
    for endpoint in endpoints where endpoint != webSocket {
      #expect(registered.contains(endpoint), "\(endpoint) is in docs/openapi.yaml but no route of the server")
    }
  }

  @Test func theDocumentIsReadAsItIsLaidOut() throws {
    let endpoints = Self.endpoints(in: try Self.document())
    #expect(endpoints.count == Set(endpoints).count, "an operation is listed twice")
    #expect(endpoints.count >= 15)
    // A path's own keys, keys deeper down and keys outside `paths:` are not operations.
    let sample = """
      openapi: 3.1.0
      paths:
        /a/{id}:
          parameters: []
          get:
            responses:
              "200":
                get:
        "/b":
          post:
      components:
        schemas:
          get:
      """
    #expect(
      Self.endpoints(in: sample) == [Endpoint(method: "get", path: "/a/{id}"), Endpoint(method: "post", path: "/b")])
  }
}
