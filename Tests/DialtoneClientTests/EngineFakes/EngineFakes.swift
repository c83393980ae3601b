import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// One ordered log shared by the fake peer connections and the fake signaling, so tests can
/// check the order of calls across them.
final class EngineLog: Sendable {
  private let entries = Locked<[String]>([])

  func append(_ entry: String) { entries.withLock { $0.append(entry) } }
  var all: [String] { entries.current }
}

/// Holds whoever waits on it until the test opens it: a slow connection factory, or a close
/// that takes a while (TURN deallocation, joining threads).
final class TestGate: Sendable {
  private struct Gate: Sendable {
    var open = false
    var waiters: [CheckedContinuation<Void, Never>] = []
  }
  private let gate = Locked(Gate())

  func wait() async {
    await withCheckedContinuation { continuation in
      let open = gate.withLock { gate in
        if !gate.open { gate.waiters.append(continuation) }
        return gate.open
      }
      if open { continuation.resume() }
    }
  }

  func open() {
    let waiters = gate.withLock { gate in
      gate.open = true
      defer { gate.waiters = [] }
      return gate.waiters
    }
    for waiter in waiters { waiter.resume() }
  }
}

/// A scripted peer connection: records every call (as "pcN.method") and lets the test push
/// local candidates and connection states.
final class EngineFakePeerConnection: PeerConnection, Sendable {
  let index: Int
  let canRestartIce: Bool
  let localCandidates: AsyncStream<IceCandidate?>
  let connectionStates: AsyncStream<PeerConnectionState>
  let dataChannelMessages: AsyncStream<Data>
  private let candidateContinuation: AsyncStream<IceCandidate?>.Continuation
  private let stateContinuation: AsyncStream<PeerConnectionState>.Continuation
  private let dataContinuation: AsyncStream<Data>.Continuation
  private let log: EngineLog
  private struct History: Sendable {
    var offers = 0
    var calls: [String] = []
  }
  private let history = Locked(History())
  private let closeGate: TestGate?

  init(index: Int, canRestartIce: Bool, log: EngineLog, closeGate: TestGate? = nil) {
    self.index = index
    self.canRestartIce = canRestartIce
    self.log = log
    self.closeGate = closeGate
    (localCandidates, candidateContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    (connectionStates, stateContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    (dataChannelMessages, dataContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    candidateContinuation.onTermination = { [log] reason in
      if case .cancelled = reason { log.append("pc\(index).candidates.detached") }
    }
    stateContinuation.onTermination = { [log] reason in
      if case .cancelled = reason { log.append("pc\(index).states.detached") }
    }
    dataContinuation.onTermination = { [log] reason in
      if case .cancelled = reason { log.append("pc\(index).data.detached") }
    }
  }

  /// This connection's own calls, without the "pcN." prefix.
  var calls: [String] { history.withLock { $0.calls } }

  private func record(_ s: String) {
    history.withLock { $0.calls.append(s) }
    log.append("pc\(index).\(s)")
  }

  // Test controls
  func emitCandidate(_ c: IceCandidate?) { candidateContinuation.yield(c) }
  func emitState(_ s: PeerConnectionState) { stateContinuation.yield(s) }
  func emitData(_ d: Data) { dataContinuation.yield(d) }

  // PeerConnection
  func createOffer(iceRestart: Bool) async throws -> SessionDescription {
    let n = history.withLock {
      $0.offers += 1
      return $0.offers
    }
    record("createOffer(iceRestart: \(iceRestart))")
    return SessionDescription(sdp: "offer-pc\(index)-\(n)")
  }
  func createAnswer() async throws -> SessionDescription {
    record("createAnswer")
    return SessionDescription(sdp: "answer-pc\(index)")
  }
  func setLocalDescription(_ d: SessionDescription, kind: SessionDescriptionKind) async throws {
    record("setLocal(\(kind.rawValue))")
  }
  func setRemoteDescription(_ d: SessionDescription, kind: SessionDescriptionKind) async throws {
    // A real implementation takes a while: let other work interleave.
    await Task.yield()
    record("setRemote(\(kind.rawValue):\(d.sdp))")
  }
  func addRemoteCandidate(_ c: IceCandidate) async throws { record("addCandidate(\(c.candidate))") }
  func setAudioEnabled(_ enabled: Bool) async { record("audio(\(enabled))") }
  func setVideoEnabled(_ enabled: Bool) async { record("video(\(enabled))") }
  func setVideoDirection(_ direction: MediaDirection) async { record("videoDirection(\(direction.rawValue))") }
  func sendData(_ data: Data) async throws { record("sendData(\(data.count))") }
  func releaseMedia() async { record("releaseMedia") }
  func setIceTransportPolicy(_ policy: IceTransportPolicy) async { record("iceTransportPolicy(\(policy.rawValue))") }
  func setRemoteSections(_ sections: [GroupStreamSection]) async {
    record("sections(\(sections.map { "\($0.mid)=\($0.from.userId)" }.joined(separator: ",")))")
  }
  func stats() async -> PeerConnectionStats { PeerConnectionStats(bytesSent: 1, bytesReceived: 2) }
  func close() async {
    record("close")
    // Like a real stack: closing emits events. A detached engine must not see them.
    stateContinuation.yield(.closed)
    stateContinuation.yield(.failed)
    candidateContinuation.yield(IceCandidate(candidate: "after-close"))
    dataContinuation.yield(Data("after-close".utf8))
    stateContinuation.finish()
    candidateContinuation.finish()
    dataContinuation.finish()
    if let closeGate {
      await closeGate.wait()
      record("closed")
    }
  }
}

final class EngineFakePeerConnectionFactory: PeerConnectionFactory, Sendable {
  let log: EngineLog
  let canRestartIce: Bool
  private let made = Locked<[EngineFakePeerConnection]>([])
  private let asked = Locked<[PeerConnectionConfiguration]>([])

  let closeGate: TestGate?

  init(log: EngineLog, canRestartIce: Bool = true, closeGate: TestGate? = nil) {
    self.log = log
    self.canRestartIce = canRestartIce
    self.closeGate = closeGate
  }

  var connections: [EngineFakePeerConnection] { made.current }
  /// What each connection was made with, in order.
  var configurations: [PeerConnectionConfiguration] { asked.current }

  func makePeerConnection(_ configuration: PeerConnectionConfiguration) async throws -> any PeerConnection {
    asked.withLock { $0.append(configuration) }
    let pc: EngineFakePeerConnection = made.withLock { made in
      let pc = EngineFakePeerConnection(
        index: made.count + 1, canRestartIce: canRestartIce, log: log, closeGate: closeGate)
      made.append(pc)
      return pc
    }
    log.append("factory.make(pc\(pc.index))")
    return pc
  }
}

/// Records every request as "sig.<description>".
final class EngineFakeSignaling: CallSignaling, Sendable {
  let log: EngineLog
  private let sent = Locked<[ClientMessage]>([])

  init(log: EngineLog) { self.log = log }

  var requests: [ClientMessage] { sent.current }

  func send(_ request: ClientMessage) async throws {
    sent.withLock { $0.append(request) }
    // Quality reports are checked through `requests`: the call's signaling order is what the log is for.
    if case .quality = request { return }
    log.append("sig.\(Self.describe(request))")
  }

  static func describe(_ r: ClientMessage) -> String {
    switch r {
    case .invite(let m): return "invite(\(m.to),\(m.offer?.sdp ?? "-"))"
    case .ringing: return "ringing"
    case .accept(let m): return "accept(\(m.answer?.sdp ?? "-"))"
    case .decline: return "decline"
    case .cancel: return "cancel"
    case .hangup: return "hangup"
    case .offer(let m): return "offer(\(m.sdp),restart:\(m.iceRestart))"
    case .answer(let m): return "answer(\(m.sdp))"
    case .candidate(let m): return "candidate(\(m.candidate.candidate))"
    case .endOfCandidates: return "endOfCandidates"
    case .iceRestartRequest: return "iceRestartRequest"
    default: return r.type.rawValue
    }
  }
}

/// Lets queued work run (for "nothing else happened" checks).
func engineSettle() async {
  for _ in 0..<50 { await Task.yield() }
  try? await Task.sleep(nanoseconds: 20_000_000)
}
