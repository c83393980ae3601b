import DialtoneHTTP2
import DialtoneJSON
import DialtoneProtocol
import DialtonePush
import Foundation
import Testing

private func hex(_ prefix: String, _ index: Int = 0) -> String {
  let tail = String(index, radix: 16)
  return prefix + String(repeating: "a", count: 64 - prefix.count - tail.count) + tail
}

/// APNs over our own HTTP/2 client (`HTTP2Client`: nghttp2 + OpenSSL), against the real APNs
/// mock (Python h2 over TLS) with its options for stream limits, GOAWAY, dropped connections,
/// certificates and ALPN.
@Suite(.serialized) struct APNsHTTP2Tests {
  struct Rig {
    let mock: APNsMock
    let http: HTTP2Client
    let apns: APNsClient

    init(_ arguments: [String] = [], caFile: String?? = nil, http configuration: HTTP2Client.Configuration? = nil)
      throws
    {
      mock = try APNsMock.start(arguments)
      var settings = configuration ?? HTTP2Client.Configuration()
      settings.caFile = caFile ?? mock.caFile
      http = try HTTP2Client(configuration: settings)
      apns = try APNsClient(
        configuration: .init(
          keyPEM: try String(contentsOfFile: mock.keyFile, encoding: .utf8), keyID: mock.keyID, teamID: mock.teamID,
          baseURL: mock.baseURL), http: http)
    }

    func push(_ token: String) async -> PushOutcome {
      await apns.send(
        APNsRequest(
          deviceToken: token, bundleID: "com.example.chat", environment: .production, pushType: .voip,
          payload: Array(#"{"aps":{}}"#.utf8)))
    }

    func pushAll(_ tokens: [String]) async -> [PushOutcome] {
      await withTaskGroup(of: PushOutcome.self) { group in
        for token in tokens { group.addTask { await push(token) } }
        var outcomes: [PushOutcome] = []
        for await outcome in group { outcomes.append(outcome) }
        return outcomes
      }
    }

    /// The mock's stats endpoint, straight through the HTTP/2 client.
    func stats(timeoutSeconds: Double = 10) async throws(HTTP2Error) -> HTTP2Response {
      let (origin, _) = try HTTP2Origin.parse(url: mock.baseURL)
      return try await http.send(
        HTTP2Request(origin: origin, method: "GET", path: "/_mock/stats", timeoutSeconds: timeoutSeconds))
    }

    func stop() {
      http.shutdown()
      mock.process.stop()
    }
  }

  @Test func manyConcurrentPushesBeyondTheServersStreamLimitAreAllAnswered() async throws {
    // The mock closes a connection that opens more than 4 streams at once; every answer waits
    // 20 ms, so the 60 pushes overlap and most must wait for a stream.
    let rig = try Rig(["--max-streams", "4", "--delay-ms", "20"])
    defer { rig.stop() }
    let outcomes = await rig.pushAll((0..<60).map { hex("ab", $0) })
    #expect(outcomes.filter { $0 == .delivered }.count == 60, "\(outcomes.filter { $0 != .delivered })")
    let log = rig.mock.process.requests()
    #expect(log.count == 60)
    #expect(Set(log.compactMap { $0["connection"]?.intValue }) == [1], "one connection, never reset")
  }

  @Test func aGoAwayMidLoadLosesNothingRetriable() async throws {
    // Each connection is sent away after 25 answers; the streams it did not process go out again
    // on the next connection, each exactly once.
    let rig = try Rig(["--goaway-after", "25"])
    defer { rig.stop() }
    let outcomes = await rig.pushAll((0..<100).map { hex("cd", $0) })
    #expect(outcomes.filter { $0 == .delivered }.count == 100, "\(outcomes.filter { $0 != .delivered })")
    let log = rig.mock.process.requests()
    #expect(log.count == 100, "no request processed twice")
    #expect(Set(log.compactMap { $0["token"]?.stringValue }).count == 100)
    #expect(Set(log.compactMap { $0["connection"]?.intValue }).count >= 4)
  }

  @Test func aRequestRefusedTooOftenFails() async throws {
    // Every connection answers one request and refuses the rest: each round delivers one push
    // and sends the others round again, until the bound of 5 attempts.
    let rig = try Rig(["--goaway-after", "1"])
    defer { rig.stop() }
    let outcomes = await rig.pushAll((0..<10).map { hex("ab", $0) })
    #expect(outcomes.filter { $0 == .delivered }.count == 5)
    let refused = outcomes.filter {
      if case .retryable(let why) = $0 { return why.contains("refused the request 5 times") }
      return false
    }
    #expect(refused.count == 5, "\(outcomes)")
    #expect(rig.mock.process.requests().count == 5)
  }

  @Test func aDroppedConnectionFailsInFlightPushesAndTheNextOneReconnects() async throws {
    let rig = try Rig(["--delay-ms", "300"])
    defer { rig.stop() }
    let inFlight = Task { await rig.pushAll((0..<5).map { hex("ef", $0) }) }
    // The mock logs a request when it arrives (its answer waits 300 ms): all 5 are in flight.
    _ = try await rig.mock.process.waitFor("5 pushes in flight") { $0.count == 5 }
    let dropped = await rig.push(hex("dead"))
    let lost = await inFlight.value
    for outcome in lost + [dropped] {
      guard case .retryable(let why) = outcome else {
        Issue.record("expected a retryable failure, got \(outcome)")
        continue
      }
      #expect(why.contains("connection to 127.0.0.1:\(rig.mock.process.port) lost"), "\(why)")
    }
    #expect(await rig.push(hex("ef", 99)) == .delivered)
    #expect(rig.mock.process.requests().last?["connection"]?.intValue == 2)
  }

  @Test func aServerCertificateFromAnotherCAIsRefused() async throws {
    // The system's CAs do not know the mock's self-signed certificate.
    let rig = try Rig(caFile: .some(nil))
    defer { rig.stop() }
    guard case .retryable(let why) = await rig.push(hex("ab")) else {
      Issue.record("an untrusted server was accepted")
      return
    }
    #expect(why.contains("TLS handshake failed") && why.contains("certificate"), "\(why)")
    #expect(rig.mock.process.requests().isEmpty)
  }

  @Test func aCertificateForAnotherNameIsRefused() async throws {
    // Trusted, but issued for apns.invalid while the client connects to 127.0.0.1.
    let rig = try Rig(["--cert-host", "apns.invalid"])
    defer { rig.stop() }
    guard case .retryable(let why) = await rig.push(hex("ab")) else {
      Issue.record("a certificate for another name was accepted")
      return
    }
    #expect(why.contains("TLS handshake failed") && why.contains("mismatch"), "\(why)")
    #expect(rig.mock.process.requests().isEmpty)
  }

  @Test func aServerThatDoesNotSelectH2IsRefused() async throws {
    let rig = try Rig(["--no-alpn"])
    defer { rig.stop() }
    guard case .retryable(let why) = await rig.push(hex("ab")) else {
      Issue.record("a server without ALPN h2 was accepted")
      return
    }
    #expect(why.contains("did not select ALPN h2"), "\(why)")
  }

  @Test func errorStatusesAndReasonsSurfaceAsTheyDid() async throws {
    let rig = try Rig()
    defer { rig.stop() }
    #expect(await rig.push(hex("4000")) == .invalidToken("400 BadDeviceToken"))
    #expect(await rig.push(hex("410")) == .invalidToken("410 Unregistered"))
    #expect(await rig.push(hex("500")) == .retryable("500 InternalServerError"))
    // 403 ExpiredProviderToken: the client signs a new token and sends again.
    #expect(await rig.push(hex("403e")) == .delivered)
    let expired = rig.mock.process.requests().filter { $0["token"]?.stringValue == hex("403e") }
    #expect(expired.map { $0["status"]?.intValue } == [403, 200])
    #expect(Set(expired.compactMap { $0["jwt"]?["raw"]?.stringValue }).count == 2)
  }

  @Test func theResponseCarriesStatusHeadersAndBody() async throws {
    let rig = try Rig()
    defer { rig.stop() }
    let response = try await rig.stats()
    #expect(response.status == 200)
    #expect(response.headers["content-type"] == "application/json")
    #expect(JSONValue(parsing: response.body)?["connections"]?.intValue == 1)
    // An APNs error: its status, its apns-id header and its JSON reason.
    let (origin, _) = try HTTP2Origin.parse(url: rig.mock.baseURL)
    let refused = try await rig.http.send(
      HTTP2Request(origin: origin, path: "/3/device/\(hex("ab"))", body: Array(#"{"aps":{}}"#.utf8)))
    #expect(refused.status == 403)
    #expect(refused.headers["apns-id"].map { UUID(uuidString: $0) != nil } == true)
    #expect(JSONValue(parsing: refused.body)?["reason"]?.stringValue == "MissingProviderToken")
  }

  @Test func aHostNameIsResolvedAndChecked() async throws {
    // "localhost" is looked up off the engine thread, and the certificate names it.
    let mock = try APNsMock.start()
    defer { mock.process.stop() }
    let http = try HTTP2Client(configuration: .init(caFile: mock.caFile))
    defer { http.shutdown() }
    let response = try await http.send(
      HTTP2Request(origin: HTTP2Origin(host: "localhost", port: mock.process.port), method: "GET", path: "/_mock/stats")
    )
    #expect(response.status == 200)
  }

  @Test func aServerThatIsNotThereFailsClearly() async throws {
    let http = try HTTP2Client()
    defer { http.shutdown() }
    // Port 1 on loopback: nothing listens there, the connection is refused at once.
    do {
      _ = try await http.send(HTTP2Request(origin: HTTP2Origin(host: "127.0.0.1", port: 1), method: "GET", path: "/"))
      Issue.record("a request without a server was answered")
    } catch {
      #expect(error.description == "cannot connect to 127.0.0.1:1: Connection refused", "\(error)")
    }
  }

  @Test func aSlowAnswerTimesOutAndTheConnectionGoesOn() async throws {
    let rig = try Rig(["--delay-ms", "2000"])
    defer { rig.stop() }
    do {
      _ = try await rig.stats(timeoutSeconds: 0.2)
      Issue.record("no timeout")
    } catch {
      #expect(error.description.contains("no answer from 127.0.0.1:\(rig.mock.process.port) within 0.2 s"))
    }
    // The stream was reset, not the connection: the next request is answered on it.
    let response = try await rig.stats()
    #expect(JSONValue(parsing: response.body)?["connections"]?.intValue == 1)
  }

  @Test func aFullQueueFailsRequestsClearly() async throws {
    // One stream at a time, answers held 300 ms, at most 2 requests waiting.
    let rig = try Rig(["--max-streams", "1", "--delay-ms", "300"], http: .init(maxQueuedRequests: 2))
    defer { rig.stop() }
    let outcomes = await rig.pushAll((0..<10).map { hex("ab", $0) })
    let full = outcomes.filter {
      if case .retryable(let why) = $0 { return why.contains("queue is full (2 requests)") }
      return false
    }
    #expect(!full.isEmpty)
    #expect(outcomes.contains(.delivered))
    #expect(full.count + outcomes.filter { $0 == .delivered }.count == 10, "\(outcomes)")
  }

  @Test func anAnswerOverTheBodyBoundFails() async throws {
    let rig = try Rig(http: .init(maxResponseBodyBytes: 10))
    defer { rig.stop() }
    do {
      _ = try await rig.stats()
      Issue.record("a body over the bound was accepted")
    } catch {
      #expect(error.description.contains("larger than 10 bytes"))
    }
  }

  /// A request the mock never reads or answers (the "fade" token: the connection stays open but
  /// goes silent, PINGs included), with its own timeout far beyond the test's.
  private func sendIntoSilence(_ rig: Rig) async -> HTTP2Error? {
    do {
      let (origin, _) = try HTTP2Origin.parse(url: rig.mock.baseURL)
      _ = try await rig.http.send(
        HTTP2Request(origin: origin, method: "POST", path: "/3/device/" + hex("fade"), timeoutSeconds: 120))
      return nil
    } catch {
      return error
    }
  }

  @Test func anIdleConnectionIsPingedAndKept() async throws {
    let rig = try Rig(http: .init(pingIntervalSeconds: 0.2))
    defer { rig.stop() }
    #expect(await rig.push(hex("ab")) == .delivered)
    // Each look at the stats is itself a request, so it leaves the connection quiet for 0.5 s
    // between looks: longer than the interval.
    var pings = 0
    for _ in 0..<40 where pings < 2 {
      try await Task.sleep(for: .milliseconds(500))
      pings = JSONValue(parsing: try await rig.stats().body)?["pings"]?.intValue ?? 0
    }
    #expect(pings >= 2, "an idle connection was not pinged")
    #expect(await rig.push(hex("ab", 1)) == .delivered)
    #expect(JSONValue(parsing: try await rig.stats().body)?["connections"]?.intValue == 1, "answered PINGs keep it")
  }

  @Test func aConnectionGoneSilentFailsItsRequestsAtThePingTimeoutAndTheNextReconnects() async throws {
    let rig = try Rig(http: .init(pingIntervalSeconds: 0.3, pingTimeoutSeconds: 0.5))
    defer { rig.stop() }
    let error = await sendIntoSilence(rig)
    #expect(error?.description.contains("no answer to a PING") == true, "\(String(describing: error))")
    #expect(await rig.push(hex("ab")) == .delivered)
    #expect(JSONValue(parsing: try await rig.stats().body)?["connections"]?.intValue == 2)
  }

  @Test func aRequestOnAConnectionQuietForAWhileIsSentWithAPing() async throws {
    // Idle PINGs far off: only the request's own PING can find the silence.
    let rig = try Rig(http: .init(pingIntervalSeconds: 3600, pingTimeoutSeconds: 0.3))
    defer { rig.stop() }
    #expect(await rig.push(hex("ab")) == .delivered)
    try await Task.sleep(for: .milliseconds(500))
    let error = await sendIntoSilence(rig)
    #expect(error?.description.contains("no answer to a PING") == true, "\(String(describing: error))")
  }

  @Test func onlyHTTPSBaseURLsAreAccepted() throws {
    #expect(throws: HTTP2Error.self) { try HTTP2Origin.parse(url: "http://127.0.0.1:8443") }
    let (origin, path) = try HTTP2Origin.parse(url: "https://[::1]:8443/proxy/")
    #expect(origin == HTTP2Origin(host: "::1", port: 8443))
    #expect(path == "/proxy")
    #expect(try HTTP2Origin.parse(url: "https://api.push.apple.com").origin.port == 443)
  }
}
