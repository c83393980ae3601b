import DialtoneAuth
import DialtoneCrypto
import DialtoneJSON
import DialtoneNet
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

@Suite(.serialized) struct HandshakeTests {
  @Test func tokenInHelloOrHeaderIsAccepted() async throws {
    let server = try await TestServer()
    let viaHello = try SignalingProbe(client: server.client, url: server.webSocketURL)
    let welcome = try await viaHello.hello(token: server.token("alice", device: "phone", name: "Alice"))
    #expect(welcome.userId == "alice")
    #expect(welcome.deviceId == "phone")
    #expect(!welcome.resumed && !welcome.resync)
    #expect(welcome.sessionId.hasPrefix("s_"))

    let viaHeader = try SignalingProbe(
      client: server.client, url: server.webSocketURL,
      headers: [HTTPHeaderField("Authorization", "Bearer \(server.token("alice", device: "laptop"))")])
    let second = try await viaHeader.hello(token: nil)
    #expect(second.deviceId == "laptop")
    await server.stop()
  }

  /// Each bad token gets `unauthorized` and close 4401.
  @Test(arguments: ["expired", "bad-signature", "alg-none", "missing-sub", "garbage", "absent"])
  func badTokensAreRefused(_ kind: String) async throws {
    let server = try await TestServer()
    let now = server.clock.now
    let secret = Array(testSecret.utf8)
    let token: String?
    switch kind {
    case "expired":
      token = server.token("alice", ttl: 60, now: now.addingTimeInterval(-3600))
    case "bad-signature":
      token = try DevelopmentTokens.mint(
        secret: Array("another-secret-entirely".utf8), user: "alice", device: nil, name: nil, ttl: 600)
    case "alg-none":
      let header = Base64URL.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8))
      let payload = Base64URL.encode(Array(#"{"sub":"alice","exp":\#(Int(now.timeIntervalSince1970) + 600)}"#.utf8))
      token = "\(header).\(payload)."
    case "missing-sub":
      token = try JWTSigner.hs256(secret: secret).sign(claims: JWTClaims(expiresAt: now.addingTimeInterval(600)))
    case "garbage":
      token = "not.a.jwt"
    default:
      token = nil
    }
    let probe = try SignalingProbe(client: server.client, url: server.webSocketURL)
    probe.send(ClientEnvelope(id: "h1", message: .hello(.init(token: token))))
    let answer = try await probe.next("unauthorized error")
    #expect(answer.message.errorCode == .unauthorized)
    #expect(answer.seq == nil)
    #expect(try await probe.closeCode() == 4401)
    await server.stop()
  }

  @Test func silentSocketIsClosedAfterTheHelloTimeout() async throws {
    let server = try await TestServer()
    let probe = try SignalingProbe(client: server.client, url: server.webSocketURL)
    _ = try await probe.nextEvent("open")
    // The hub has to have seen the socket before time moves: its hello deadline, not any timer.
    try #require(await server.clock.waitForTimer(dueIn: 5))
    server.clock.advance(by: 5.1)
    #expect(try await probe.closeCode() == 4408)
    await server.stop()
  }

  /// One timer serves every socket's hello deadline: each is still counted from its own socket's
  /// open, and a socket that said hello in time is spared when its deadline passes.
  @Test func helloDeadlinesRunFromEachSocketsOwnOpen() async throws {
    let server = try await TestServer()
    let early = try SignalingProbe(client: server.client, url: server.webSocketURL)
    _ = try await early.nextEvent("open")
    try #require(await server.clock.waitForTimer(dueIn: 5))
    server.clock.advance(by: 3)
    let greetsLate = try SignalingProbe(client: server.client, url: server.webSocketURL)
    _ = try await greetsLate.nextEvent("open")
    let silent = try SignalingProbe(client: server.client, url: server.webSocketURL)
    _ = try await silent.nextEvent("open")
    // A welcome on a socket opened after them: the hub has seen both opens.
    let greeted = try SignalingProbe(client: server.client, url: server.webSocketURL)
    _ = try await greeted.hello(token: server.token("carol"))

    server.clock.advance(by: 2.1)  // 5.1 s: only the first socket's deadline has passed
    #expect(try await early.closeCode() == 4408)
    let welcome = try await greetsLate.hello(token: server.token("alice"))
    #expect(welcome.userId == "alice")
    // The next deadline (8 s) has its timer once the hub handled the first.
    for _ in 0..<1000 where !server.clock.pendingDeadlines.contains(where: { abs($0 - 8) < 0.01 }) {
      try await Task.sleep(for: .milliseconds(5))
    }
    server.clock.advance(by: 3)  // 8.1 s
    #expect(try await silent.closeCode() == 4408)
    #expect(try await greetsLate.request(.ping(.init())).isAck)
    #expect(try await greeted.request(.ping(.init())).isAck)
    await server.stop()
  }

  @Test func firstMessageMustBeHello() async throws {
    let server = try await TestServer()
    let probe = try SignalingProbe(client: server.client, url: server.webSocketURL)
    probe.send(ClientEnvelope(id: "p1", message: .ping(.init())))
    #expect(try await probe.next().message.errorCode == .invalidState)
    #expect(try await probe.closeCode() == 4400)

    let version = try SignalingProbe(client: server.client, url: server.webSocketURL)
    version.send(ClientEnvelope(id: "h1", message: .hello(.init(version: 99, token: server.token("alice")))))
    #expect(try await version.next().message.errorCode == .unsupportedVersion)
    #expect(try await version.closeCode() == 4400)
    await server.stop()
  }

  @Test func malformedAndUnknownMessagesGetErrorsAndTheSocketStays() async throws {
    let server = try await TestServer()
    let probe = try await server.connect("alice")

    probe.sendRaw("{not json")
    let malformed = try await probe.next()
    #expect(malformed.message.errorCode == .badRequest)
    #expect(malformed.seq == 1)

    probe.sendRaw(#"{"type":"teleport","id":"t1"}"#)
    let unknown = try await probe.next()
    #expect(unknown.message.errorCode == .unknownType)
    #expect(unknown.message.replyTo == "t1")

    probe.sendRaw(#"{"type":"candidate","id":"c1","callId":"x","candidate":{"candidate":42}}"#)
    #expect(try await probe.next().message.errorCode == .badRequest)

    probe.sendRaw(#"[1,2,3]"#)
    #expect(try await probe.next().message.errorCode == .badRequest)

    probe.connection.send(binary: [1, 2, 3])
    #expect(try await probe.next().message.errorCode == .badRequest)

    probe.sendRaw(#"{"type":"hello","id":"h2","version":1}"#)
    #expect(try await probe.next().message.errorCode == .invalidState)

    // Still alive.
    #expect(try await probe.request(.ping(.init())).isAck)
    await server.stop()
  }

  @Test func oversizeFrameClosesWith1009AndOthersAreServed() async throws {
    let server = try await TestServer()
    let victim = try await server.connect("alice")
    let bystander = try await server.connect("bob")
    victim.sendRaw(#"{"type":"ping","id":"p","pad":""# + String(repeating: "x", count: 70_000) + #""}"#)
    #expect(try await victim.closeCode() == 1009)
    #expect(try await bystander.request(.ping(.init())).isAck)
    await server.stop()
  }

  @Test func registryListsEveryLiveDeviceOfAUser() async throws {
    let server = try await TestServer()
    let phone = try await server.connect("alice", device: "phone")
    _ = try await server.connect("alice", device: "laptop")
    _ = try await server.connect("bob", device: "phone")

    let me = try await server.http("GET", "/v1/me", token: server.token("alice", device: "phone"))
    #expect(me.status == 200)
    #expect(me.json?["userId"]?.stringValue == "alice")
    let devices = me.json?["devices"]?.arrayValue?.compactMap { $0["deviceId"]?.stringValue }
    #expect(devices == ["laptop", "phone"])

    phone.close()
    _ = try await phone.closeCode()
    var remaining: [String]? = []
    for _ in 0..<100 {
      remaining = try await server.http("GET", "/v1/me", token: server.token("alice")).json?["devices"]?.arrayValue?
        .compactMap { $0["deviceId"]?.stringValue }
      if remaining == ["laptop"] { break }
      try await Task.sleep(for: .milliseconds(10))
    }
    #expect(remaining == ["laptop"])
    await server.stop()
  }

  @Test func sameDeviceTwiceReplacesTheOlderSocketWith4409() async throws {
    let server = try await TestServer()
    let first = try await server.connect("alice", device: "phone")
    let second = try await server.connect("alice", device: "phone")
    #expect(try await first.closeCode() == 4409)
    #expect(try await second.request(.ping(.init())).isAck)
    await server.stop()
  }

  @Test func httpEndpointsNeedAValidToken() async throws {
    let server = try await TestServer()
    let health = try await server.http("GET", "/healthz")
    #expect(health.status == 200)
    #expect(health.json?["status"]?.stringValue == "ok")
    let anonymous = try await server.http("GET", "/v1/me")
    #expect(anonymous.status == 401)
    #expect(anonymous.json?["error"]?["code"]?.stringValue == "unauthorized")
    let forged = try await server.http("GET", "/v1/me", token: "abc.def.ghi")
    #expect(forged.status == 401)
    await server.stop()
  }

  @Test func shutdownClosesEverySocketWith1001() async throws {
    let server = try await TestServer()
    let probes = [try await server.connect("alice"), try await server.connect("bob")]
    await server.server.stop()
    for probe in probes { #expect(try await probe.closeCode() == 1001) }
    await server.client.shutdown()
  }
}
