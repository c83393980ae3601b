import DialtoneJSON
import DialtoneNet
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What one socket, user or address may do (protocol.md 15), against a real server with a
/// virtual clock: refusals are answered, never silent, and time refills what was used.
@Suite(.serialized) struct LimitsTests {
  @Test func aSocketOverItsMessageRateIsToldHowLongToWait() async throws {
    let server = try await TestServer { $0.limits.messagesPerSecond = 5 }  // bursts of 20
    let alice = try await server.connect("alice")  // hello took one
    for _ in 0..<19 { #expect(try await alice.request(.ping(.init())).isAck) }
    let refused = try await alice.request(.ping(.init()))
    guard case .error(let error) = refused else {
      Issue.record("expected rate-limited, got \(refused)")
      return
    }
    #expect(error.code == .rateLimited && (error.retryAfterMs ?? 0) > 0 && (error.retryAfterMs ?? 0) <= 200)
    server.clock.advance(by: 1)
    #expect(try await alice.request(.ping(.init())).isAck)
    await server.stop()
  }

  @Test func aSocketThatKeepsSendingThroughItsRefusalsIsClosed() async throws {
    let server = try await TestServer { $0.limits.messagesPerSecond = 5 }
    let alice = try await server.connect("alice")
    for n in 0..<60 { alice.send(ClientEnvelope(id: "p\(n)", message: .ping(.init()))) }
    // The server closes with 4429; when the client's pings are still unread on the server side,
    // the kernel turns that close into a reset, and the close frame can be lost: either way the
    // socket must end (without the limit it stays open and this times out).
    let code = try await alice.closeCode()
    #expect(code == nil || code == UInt16(CloseCode.overLimit.rawValue) || code == 1006)
    // Others are not affected.
    let bob = try await server.connect("bob")
    #expect(try await bob.request(.ping(.init())).isAck)
    await server.stop()
  }

  @Test func aUserStartsABoundedNumberOfCallsPerMinute() async throws {
    let server = try await TestServer {
      $0.limits.invitesPerMinute = 2
      $0.limits.maxLiveCallsPerUser = 100
    }
    let alice = try await server.connect("alice")
    func invite(_ id: CallID) async throws -> ServerMessage {
      try await alice.request(.invite(.init(callId: id, to: "bob", video: false)))
    }
    #expect(try await invite("c1").isAck)
    _ = try await alice.request(.cancel(.init(callId: "c1")))
    #expect(try await invite("c2").isAck)
    _ = try await alice.request(.cancel(.init(callId: "c2")))
    let refused = try await invite("c3")
    guard case .error(let error) = refused else {
      Issue.record("expected rate-limited, got \(refused)")
      return
    }
    #expect(error.code == .rateLimited && error.callId == "c3" && (error.retryAfterMs ?? 0) > 1000)
    // Another user is not limited by Alice's calls; Alice may call again once the bucket refills.
    let carol = try await server.connect("carol")
    #expect(try await carol.request(.invite(.init(callId: "c4", to: "bob", video: false))).isAck)
    server.clock.advance(by: 31)
    #expect(try await invite("c3").isAck)
    await server.stop()
  }

  @Test func aUserHasABoundedNumberOfDevices() async throws {
    let server = try await TestServer { $0.limits.maxDevicesPerUser = 2 }
    _ = try await server.connect("alice", device: "phone")
    _ = try await server.connect("alice", device: "laptop")
    let tablet = try SignalingProbe(client: server.client, url: server.webSocketURL)
    tablet.send(ClientEnvelope(id: "h", message: .hello(.init(token: server.token("alice", device: "tablet")))))
    #expect(try await tablet.next("refusal").message.errorCode == .limitExceeded)
    #expect(try await tablet.closeCode() == UInt16(CloseCode.overLimit.rawValue))
    // A device already signed in may reconnect (its newer socket replaces the old one).
    _ = try await server.connect("alice", device: "phone")
    await server.stop()
  }

  @Test func oneAddressHasABoundedNumberOfSockets() async throws {
    let server = try await TestServer { $0.limits.maxConnectionsPerAddress = 3 }
    var open: [SignalingProbe] = []
    for n in 0..<3 { open.append(try await server.connect("user\(n)")) }
    let fourth = try SignalingProbe(client: server.client, url: server.webSocketURL)
    #expect(try await fourth.closeCode() == UInt16(CloseCode.overLimit.rawValue))
    open[0].close()
    _ = try await open[0].closeCode()
    // The closed socket's place is free again (its close reaches the server asynchronously).
    var admitted = false
    for _ in 0..<50 where !admitted {
      let probe = try SignalingProbe(client: server.client, url: server.webSocketURL)
      probe.send(ClientEnvelope(id: "h", message: .hello(.init(token: server.token("late")))))
      if case .welcome = try? await probe.next("welcome").message {
        admitted = true
      } else {
        try await Task.sleep(for: .milliseconds(20))
      }
    }
    #expect(admitted)
    await server.stop()
  }

  @Test func httpRequestsOverTheRateGet429WithRetryAfter() async throws {
    let server = try await TestServer { $0.limits.httpRequestsPerSecond = 1 }  // bursts of 5
    let token = server.token("alice")
    for _ in 0..<5 { #expect(try await server.http("GET", "/v1/me", token: token).status == 200) }
    var request = URLRequest(url: try #require(URL(string: server.baseURL + "/v1/me")))
    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    let (data, response) = try await URLSession.shared.data(for: request)
    let http = try #require(response as? HTTPURLResponse)
    #expect(http.statusCode == 429)
    #expect(http.value(forHTTPHeaderField: "Retry-After") == "1")
    #expect(JSONValue(parsing: Array(data))?["error"]?["code"]?.stringValue == "rate-limited")
    // Health checks are never limited.
    for _ in 0..<10 { #expect(try await server.http("GET", "/healthz").status == 200) }
    server.clock.advance(by: 1)
    #expect(try await server.http("GET", "/v1/me", token: token).status == 200)
    await server.stop()
  }

  @Test func aUserHasABoundedNumberOfPushRegistrations() async throws {
    let server = try await TestServer { $0.limits.maxPushRegistrationsPerUser = 2 }
    let token = server.token("alice")
    func register(_ installation: String) async throws -> Int {
      let body =
        #"{"installationId":"\#(installation)","platform":"android","fcmToken":"fcm-\#(installation)-0123456789"}"#
      return try await server.http("POST", "/v1/devices", token: token, body: body).status
    }
    #expect(try await register("one") == 200)
    #expect(try await register("two") == 200)
    let refused = try await server.http(
      "POST", "/v1/devices", token: token,
      body: #"{"installationId":"three","platform":"android","fcmToken":"fcm-three-0123456789"}"#)
    #expect(refused.status == 429 && refused.json?["error"]?["code"]?.stringValue == "limit-exceeded")
    #expect(try await register("one") == 200)  // updating a registered installation is fine
    #expect(try await server.http("DELETE", "/v1/devices/two", token: token).status == 204)
    #expect(try await register("three") == 200)
    await server.stop()
  }
}
