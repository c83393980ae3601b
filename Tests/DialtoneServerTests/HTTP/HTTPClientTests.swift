import DialtoneHTTPClient
import Foundation
import Testing

@testable import DialtoneServer

/// `HTTPClient` (libcurl's multi socket interface, easy handles reused) against the server's own
/// HTTP API on loopback.
@Suite(.serialized) struct HTTPClientTests {
  @Test func aReusedHandleCarriesNothingOfTheRequestBefore() async throws {
    let server = try await TestServer()
    let client = HTTPClient(configuration: .init(http2: false))
    let url = "http://127.0.0.1:\(server.server.port)/v1/me"
    let authorized = try await client.send(
      HTTPClientRequest(method: "GET", url: url, headers: [("Authorization", "Bearer \(server.token("alice"))")]))
    #expect(authorized.status == 200)
    // The same client's next request runs on the handle the first one used: without its header.
    let anonymous = try await client.send(HTTPClientRequest(method: "GET", url: url))
    #expect(anonymous.status == 401)
    client.shutdown()
    await server.stop()
  }

  @Test func manyRequestsAtOnceAllGetTheirOwnAnswer() async throws {
    let server = try await TestServer()
    let client = HTTPClient(configuration: .init(http2: false))
    let base = "http://127.0.0.1:\(server.server.port)"
    let statuses = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
      for index in 0..<40 {
        group.addTask {
          // Every other request is authorized: each answer must match its own request.
          let headers = index % 2 == 0 ? [("Authorization", "Bearer \(server.token("u\(index)"))")] : []
          let response = try await client.send(
            HTTPClientRequest(method: "GET", url: base + "/v1/me", headers: headers))
          return (index, response.status)
        }
      }
      var statuses: [Int: Int] = [:]
      for try await (index, status) in group { statuses[index] = status }
      return statuses
    }
    #expect(statuses.count == 40)
    for (index, status) in statuses { #expect(status == (index % 2 == 0 ? 200 : 401)) }
    client.shutdown()
    await server.stop()
  }

  // A transfer that ends inside the call that starts it (here: a scheme the client refuses; on a
  // kept-alive connection: an answer already there) wakes nothing, so the engine must collect it
  // before it sleeps. Before it did, these hung until another request came. The time limit is a
  // hang guard, not a measurement. `file:` is refused too: a configured URL never reads a file.
  @Test(.timeLimit(.minutes(1))) func aRequestThatFailsAtOnceIsAnsweredAtOnce() async throws {
    let client = HTTPClient(configuration: .init(http2: false))
    for url in ["file:///etc/hostname", "ftp://127.0.0.1/", "nosuch://127.0.0.1/"] {
      await #expect(throws: HTTPClientError.self, "\(url)") {
        _ = try await client.send(HTTPClientRequest(method: "GET", url: url))
      }
    }
    client.shutdown()
  }

  @Test func aShutDownClientRefusesNewRequests() async throws {
    let client = HTTPClient()
    client.shutdown()
    await #expect(throws: HTTPClientError.self) {
      _ = try await client.send(HTTPClientRequest(method: "GET", url: "http://127.0.0.1:9/"))
    }
  }
}
