import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

private let bob = Peer(userId: "bob", deviceId: "b1")

@Suite struct CallQualityTests {
  @Test func statesMarkEachMilestoneOnceInMillisecondsSinceTheStart() {
    let origin = Date(timeIntervalSince1970: 1000)
    var recorder = CallQualityRecorder(callId: "c", origin: origin)
    recorder.observe(.calling, at: origin)
    recorder.observe(.ringing, at: origin.addingTimeInterval(0.25))
    recorder.observe(.connecting, at: origin.addingTimeInterval(3))
    recorder.mark(.iceConnected, at: origin.addingTimeInterval(3.1))
    recorder.observe(.connected, at: origin.addingTimeInterval(3.2))
    recorder.observe(.reconnecting(attempt: 0), at: origin.addingTimeInterval(20))
    recorder.observe(.reconnecting(attempt: 2), at: origin.addingTimeInterval(25))
    recorder.observe(.connected, at: origin.addingTimeInterval(26))
    recorder.mark(.firstAudio, at: origin.addingTimeInterval(-5))
    #expect(
      recorder.milestones
        == CallMilestones(ringing: 250, accepted: 3000, iceConnected: 3100, dtlsConnected: 3200, firstAudio: 0))
    #expect(recorder.iceRestarts == 2)
  }

  @Test func theReportDerivesRatesLossAndThePathFromTheStatistics() throws {
    let origin = Date(timeIntervalSince1970: 0)
    var recorder = CallQualityRecorder(callId: "c", origin: origin)
    recorder.observe(.connected, at: origin.addingTimeInterval(1))
    var stats = PeerConnectionStats(
      bytesSent: 50_000, bytesReceived: 25_000, packetsLost: 5, roundTripTime: 0.0421, localCandidateType: "relay",
      remoteCandidateType: "srflx", packetsSent: 500, packetsReceived: 495, jitter: 0.003)
    stats.video = nil
    recorder.observe(.ended(.local), at: origin.addingTimeInterval(11))
    let report = recorder.report(final: true, stats: stats, now: origin.addingTimeInterval(99))
    #expect(report.durationMs == 10_000)
    #expect(report.sendKbps == 40 && report.receiveKbps == 20)
    #expect(report.lossPercent == 1)
    #expect(report.rttMs == 42.1 && report.jitterMs == 3)
    #expect(report.localCandidateType == .relay && report.remoteCandidateType == .srflx)
    #expect(report.relayed == true)
    #expect(report.final)
    // The speech estimate from the same figures, to two decimals; none before audio arrived.
    let mos = SpeechQualityEstimate.mos(lossPercent: 1, jitterMs: 3, rttMs: 42.1, protection: .fec)
    #expect(report.mos == (mos * 100).rounded() / 100)
    #expect(try #require(report.mos) > 3.5)
    var silent = stats
    silent.packetsReceived = 0
    #expect(recorder.report(final: true, stats: silent, now: origin).mos == nil)
    stats.audioCodec = "red"
    let protected = recorder.report(final: true, stats: stats, now: origin)
    #expect(try #require(protected.mos) > (report.mos ?? 5))
    // What came too late to play counts as lost for the estimate (not in the reported loss),
    // and so does the burstiness of the loss.
    var late = stats
    late.audioCodec = nil
    late.packetsDiscarded = 15
    let discarded = recorder.report(final: true, stats: late, now: origin)
    #expect(discarded.lossPercent == 1)
    let expectedMos = SpeechQualityEstimate.mos(lossPercent: 4, jitterMs: 3, rttMs: 42.1, protection: .fec)
    #expect(discarded.mos == (expectedMos * 100).rounded() / 100)
    late.audioBurstRatio = 3
    #expect(try #require(recorder.report(final: true, stats: late, now: origin).mos) < (discarded.mos ?? 0))
    // The protocol's own decoder takes what the recorder makes.
    let frame = ClientEnvelope(id: "q", message: .quality(report))
    #expect(try MessageCodec.decodeClientMessage(MessageCodec.encode(frame)) == frame)
  }

  @Test func anEngineSendsItsFinalReportAfterTheHangup() async throws {
    let log = EngineLog()
    let clock = ManualClock()
    let factory = EngineFakePeerConnectionFactory(log: log, canRestartIce: true)
    let signaling = EngineFakeSignaling(log: log)
    let engine = CallEngine(
      outgoingCallId: "call-1", to: "bob", video: false, iceServers: [], factory: factory, signaling: signaling,
      clock: clock)
    await engine.start()
    clock.advance(by: 0.5)
    await engine.handle(.ringing(.init(callId: "call-1", from: bob)))
    clock.advance(by: 2)
    await engine.handle(.accept(.init(callId: "call-1", from: bob, answer: SessionDescription(sdp: "answer-bob"))))
    clock.advance(by: 0.3)
    factory.connections[0].emitState(.connected)
    #expect(await eventually { await engine.state == .connected })
    await engine.markMilestone(.firstAudio, at: clock.now.addingTimeInterval(0.1))
    clock.advance(by: 10)
    await engine.hangup()
    await engine.drainSignaling()
    guard case .quality(let report) = signaling.requests.last else {
      Issue.record("the last request is not a quality report: \(signaling.requests)")
      return
    }
    #expect(signaling.requests.dropLast().last == .hangup(.init(callId: "call-1")))
    #expect(report.final && report.callId == "call-1")
    #expect(await engine.finalQualityReport == report)
    #expect(
      report.milestones
        == CallMilestones(ringing: 500, accepted: 2500, iceConnected: 2800, dtlsConnected: 2800, firstAudio: 2900))
    #expect(report.milestones?.setupMs == 400)
    #expect(report.durationMs == 10_000)
  }

  @Test func interimReportsFollowTheIntervalWhileConnected() async throws {
    let log = EngineLog()
    let clock = ManualClock()
    let factory = EngineFakePeerConnectionFactory(log: log, canRestartIce: true)
    let signaling = EngineFakeSignaling(log: log)
    var policy = CallEngine.Policy()
    policy.qualityReportInterval = .seconds(5)
    let engine = CallEngine(
      outgoingCallId: "call-1", to: "bob", video: false, iceServers: [], factory: factory, signaling: signaling,
      clock: clock, policy: policy)
    await engine.start()
    await engine.handle(.accept(.init(callId: "call-1", from: bob, answer: SessionDescription(sdp: "answer-bob"))))
    factory.connections[0].emitState(.connected)
    #expect(await eventually { await engine.state == .connected })
    @Sendable func interim() -> [QualityReport] {
      signaling.requests.compactMap { if case .quality(let r) = $0, !r.final { r } else { nil } }
    }
    #expect(interim().isEmpty)
    // The interval's own timer, not any timer the engine may have running.
    #expect(await eventually { clock.hasTimer(dueIn: 5) })
    clock.advance(by: 5)
    #expect(await eventually { interim().count == 1 })
    // The fake's statistics show received bytes: the first audio is marked from them.
    #expect(interim().first?.milestones?.firstAudio == 5000)
    await engine.hangup()
    await engine.drainSignaling()
    #expect(signaling.requests.filter { if case .quality(let r) = $0 { r.final } else { false } }.count == 1)
  }

  @Test func noReportWhenTheAppTurnsThemOff() async {
    let log = EngineLog()
    let signaling = EngineFakeSignaling(log: log)
    var policy = CallEngine.Policy()
    policy.reportsQuality = false
    let engine = CallEngine(
      outgoingCallId: "call-1", to: "bob", video: false, iceServers: [],
      factory: EngineFakePeerConnectionFactory(log: log, canRestartIce: true), signaling: signaling,
      clock: ManualClock(), policy: policy)
    await engine.start()
    await engine.hangup()
    await engine.drainSignaling()
    #expect(!signaling.requests.contains { if case .quality = $0 { true } else { false } })
  }
}
