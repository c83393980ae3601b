import DialtoneJSON
import DialtoneNet
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

private let answer = SessionDescription(sdp: "v=0\r\no=- 3 4 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n")
private let adminToken = "admin-token-0123456789"

extension TestServer {
  /// A GET over a raw socket: the status, the headers (lowercased names) and the body as text.
  /// Not URLSession: on Linux it never completes a 401 that carries `WWW-Authenticate: Basic`.
  func raw(_ path: String, port: Int? = nil, headers: [String: String] = [:]) async throws -> RawHTTPResponse {
    let port = port ?? server.port
    let fields = headers.map { "\($0.key): \($0.value)\r\n" }.joined()
    let response = try await blockingIO {
      let connection = try RawHTTPConnection(port: port, receiveTimeout: 10)
      connection.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\(fields)\r\n")
      return connection.readResponse()
    }
    return try #require(response, "no response to GET \(path)")
  }

  /// The value of one sample of `/metrics` (0 when absent).
  func metric(_ sample: String, port: Int? = nil) async throws -> Double {
    let text = try await raw("/metrics", port: port).body
    for line in text.split(separator: "\n") where line.hasPrefix(sample + " ") {
      return Double(line.dropFirst(sample.count + 1)) ?? .nan
    }
    return 0
  }

  /// Alice calls Bob, Bob's phone rings and answers, Alice hangs up: the call's id.
  func answeredCall() async throws -> (SignalingProbe, SignalingProbe, CallID) {
    let alice = try await connect("alice")
    let bob = try await connect("bob")
    let call = callID()
    _ = try await alice.invite(call, to: "bob")
    _ = try await bob.expect(.invite)
    #expect(try await bob.act(.ringing(.init(callId: call))).isAck)
    _ = try await alice.expect(.ringing)
    clock.advance(by: 2)
    #expect(try await bob.act(.accept(.init(callId: call, answer: answer))).isAck)
    _ = try await alice.expect(.accept)
    #expect(try await alice.candidateFor(call, 1).isAck)
    _ = try await bob.expect(.candidate)
    clock.advance(by: 30)
    #expect(try await alice.act(.hangup(.init(callId: call))).isAck)
    _ = try await bob.expect(.callEnded)
    return (alice, bob, call)
  }
}

private func report(_ call: CallID, final: Bool = true, mos: Double? = 3.9) -> QualityReport {
  QualityReport(
    callId: call, final: final, milestones: CallMilestones(ringing: 90, accepted: 2000, firstAudio: 2300),
    rttMs: 20, lossPercent: 1.5, localCandidateType: .host, remoteCandidateType: .relay, iceRestarts: 1,
    durationMs: 30000, mos: mos)
}

@Suite(.serialized) struct ObservabilityTests {
  @Test func qualityReportsAreCheckedStoredAndShownToTheCallsParticipantsOnly() async throws {
    let server = try await TestServer()
    let (alice, bob, call) = try await server.answeredCall()
    let carol = try await server.connect("carol")

    #expect(try await alice.act(.quality(report(call))).isAck)
    #expect(try await alice.act(.quality(report(call))).errorCode == .invalidState)
    #expect(try await carol.act(.quality(report(call))).errorCode == .notFound)
    #expect(try await bob.act(.quality(report("c-unknown"))).errorCode == .notFound)
    bob.sendRaw(#"{"type":"quality","id":"bad-1","callId":"\#(call)","final":true,"lossPercent":101}"#)
    let refused = try await bob.next("the answer to a report out of range")
    #expect(refused.message.errorCode == .badRequest)
    #expect(try await bob.act(.quality(report(call, final: false))).isAck)
    #expect(try await bob.act(.quality(report(call))).isAck)

    let detail = try await server.http("GET", "/v1/calls/\(call)", token: server.token("alice"))
    #expect(detail.status == 200)
    #expect(detail.json?["call"]?["endReason"]?.stringValue == "hangup")
    let entries = detail.json?["quality"]?.arrayValue ?? []
    #expect(entries.map { $0["role"]?.stringValue } == ["callee", "caller"])
    #expect(entries.first?["report"]?["final"]?.boolValue == true)
    #expect(entries.last?["report"]?["milestones"]?["firstAudio"]?.intValue == 2300)
    // The speech estimate is kept with the report (protocol.md 7.19).
    #expect(entries.last?["report"]?["mos"]?.doubleValue == 3.9)
    #expect(try await server.http("GET", "/v1/calls/\(call)", token: server.token("carol")).status == 404)
    #expect(try await server.http("GET", "/v1/calls/c-nothing", token: server.token("alice")).status == 404)
    #expect(try await server.http("GET", "/v1/calls/\(call)").status == 401)

    #expect(try await server.metric(#"dialtone_quality_reports_total{final="true"}"#) == 2)
    #expect(try await server.metric(#"dialtone_quality_reports_total{final="false"}"#) == 1)
    #expect(try await server.metric(#"dialtone_call_media_path_total{path="relay"}"#) == 2)
    #expect(try await server.metric(#"dialtone_call_setup_seconds_count{role="caller"}"#) == 1)
    #expect(try await server.metric(#"dialtone_call_setup_seconds_sum{role="callee"}"#) == 0.3)
    #expect(try await server.metric("dialtone_call_ice_restarts_total") == 2)
    #expect(try await server.metric(#"dialtone_messages_refused_total{code="not-found"}"#) == 2)
    #expect(try await server.metric(#"dialtone_messages_refused_total{code="invalid-state"}"#) == 1)
    await server.stop()
  }

  @Test func callsMoveTheCountersAndHistogramsWithVirtualTime() async throws {
    let server = try await TestServer()
    #expect(try await server.metric(#"dialtone_calls_started_total{video="false"}"#) == 0)
    _ = try await server.answeredCall()
    #expect(try await server.metric(#"dialtone_calls_started_total{video="false"}"#) == 1)
    #expect(try await server.metric(#"dialtone_calls_ended_total{reason="hangup"}"#) == 1)
    #expect(try await server.metric("dialtone_call_ring_seconds_count") == 1)
    #expect(try await server.metric("dialtone_call_answer_seconds_sum") == 2)
    #expect(try await server.metric("dialtone_call_duration_seconds_sum") == 30)
    #expect(try await server.metric(#"dialtone_sessions_total{kind="new"}"#) == 2)
    #expect(try await server.metric(#"dialtone_messages_received_total{type="invite"}"#) == 1)
    #expect(try await server.metric("dialtone_relay_latency_seconds_count") == 1)
    #expect(try await server.metric("dialtone_websocket_connections") == 2)
    #expect(try await server.metric("dialtone_sessions_connected") == 2)
    #expect(try await server.metric("dialtone_calls_live") == 0)
    #expect(try await server.metric(#"dialtone_ice_server_requests_total{source="welcome"}"#) == 2)
    _ = try await server.http("GET", "/v1/ice-servers", token: server.token("alice"))
    #expect(try await server.metric(#"dialtone_ice_server_requests_total{source="http"}"#) == 1)
    _ = try await server.http("GET", "/v1/nowhere")
    #expect(
      try await server.metric(#"dialtone_http_requests_total{method="GET",route="unmatched",status="404"}"#) == 1)
    #expect(
      try await server.metric(#"dialtone_http_requests_total{method="GET",route="/v1/ice-servers",status="200"}"#)
        == 1)
    let text = try await server.raw("/metrics")
    #expect(text.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
    #expect(!text.body.contains("alice") && !text.body.contains("c-"))
    await server.stop()
  }

  @Test func metricsListenTakesMetricsOffThePublicPort() async throws {
    let server = try await TestServer {
      $0.metricsHost = "127.0.0.1"
      $0.metricsPort = 0
    }
    let port = try #require(server.server.metricsPort)
    #expect(try await server.raw("/metrics").status == 404)
    let scraped = try await server.raw("/metrics", port: port)
    #expect(scraped.status == 200 && scraped.body.contains("# TYPE dialtone_calls_live gauge"))
    #expect(try await server.raw("/v1/me", port: port).status == 404)
    await server.stop()
  }

  @Test func theDashboardIsOffWithoutAnAdminTokenAndNeedsIt() async throws {
    let off = try await TestServer()
    #expect(try await off.raw("/admin").status == 404)
    #expect(try await off.raw("/admin/api/overview", headers: ["Authorization": "Bearer \(adminToken)"]).status == 404)
    await off.stop()

    let server = try await TestServer { $0.adminToken = adminToken }
    _ = try await server.answeredCall()
    let refused = try await server.raw("/admin")
    #expect(refused.status == 401)
    #expect(refused.headers["www-authenticate"]?.hasPrefix("Basic realm=\"dialtone admin\"") == true)
    #expect(try await server.raw("/admin", headers: ["Authorization": "Bearer wrong-token-0123456789"]).status == 401)
    #expect(try await server.raw("/admin", headers: ["Authorization": "Bearer \(server.token("alice"))"]).status == 401)
    let basic = "Basic " + Data("ops:\(adminToken)".utf8).base64EncodedString()
    let page = try await server.raw("/admin", headers: ["Authorization": basic])
    #expect(page.status == 200 && page.headers["content-type"]?.hasPrefix("text/html") == true)
    let overview = try await server.raw("/admin/api/overview", headers: ["Authorization": "Bearer \(adminToken)"])
    #expect(overview.status == 200)
    let json = JSONValue(parsing: Array(overview.body.utf8))
    #expect(json?["recentCalls"]?.arrayValue?.first?["endReason"]?.stringValue == "hangup")
    #expect(json?["sockets"]?.intValue == 2)
    #expect(json?["timeline"]?["buckets"]?.arrayValue?.count == 60)
    let ended = json?["timeline"]?["buckets"]?.arrayValue?.compactMap { $0["ended"]?["hangup"]?.intValue }
    #expect(ended == [1])
    #expect(json?["setupTime"]?["counts"]?.arrayValue?.count == 8)
    await server.stop()
  }

  @Test func theDashboardsQualityIsTheWorseSideAndFinalReportsFirst() throws {
    func stored(_ report: QualityReport) -> StoredQualityReport {
      StoredQualityReport(userId: "u", deviceId: "d", role: "caller", receivedAt: 0, report: report)
    }
    let quality = try #require(
      AdminOverview.Quality([
        stored(report("c", mos: 4.1)), stored(report("c", mos: 2.7)), stored(report("c", final: false, mos: 1.2)),
      ]))
    #expect(quality.mos == 2.7)
    // The overview's JSON carries it (GET /admin/api/overview).
    let json = JSONValue(parsing: WireEncoder.encode(quality))
    #expect(json?["mos"]?.doubleValue == 2.7)
    #expect(AdminOverview.Quality([stored(report("c", mos: nil))])?.mos == nil)
    #expect(AdminOverview.Quality([stored(report("c", final: false, mos: 3.3))])?.mos == 3.3)
  }

  @Test func theAdminTokenIsAtLeastSixteenBytes() {
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--admin-token", "short"], environment: [:])
    }
    #expect(
      (try? ServerConfiguration.parse(arguments: [], environment: ["DIALTONE_ADMIN_TOKEN": adminToken]))?.adminToken
        == adminToken)
  }

  @Test func theTimelineKeepsTheLastHourPerMinute() {
    let timeline = ActivityTimeline(bucketSeconds: 60, bucketCount: 3)
    let start = Date(timeIntervalSince1970: 600)
    timeline.record(at: start) { $0.pushFailures += 1 }
    timeline.record(at: start.addingTimeInterval(59)) { $0.pushesSent += 1 }
    timeline.record(at: start.addingTimeInterval(240)) { $0.direct += 1 }
    let buckets = timeline.snapshot(now: start.addingTimeInterval(240))
    #expect(buckets.map(\.start) == [720_000, 780_000, 840_000])
    #expect(buckets.map(\.direct) == [0, 0, 1])
    #expect(timeline.snapshot(now: start.addingTimeInterval(30)).last?.pushFailures == 1)
  }

  @Test func setUpSamplesGiveBucketsAndPercentilesOfTheLatest() {
    let samples = SetupTimeSamples(capacity: 4)
    for ms in [50, 300, 900, 20000, 400] { samples.add(ms) }
    let summary = samples.summary
    #expect(summary.samples == 4)
    #expect(summary.counts == [0, 0, 2, 1, 0, 0, 0, 1])
    #expect(summary.p50Ms == 400 && summary.p90Ms == 20000)
  }
}
